"""KernelAttentionClassifierCV against refitting, GridSearchCV and the formulas."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import clone, config_context
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import (
    accuracy_score,
    brier_score_loss,
    f1_score,
    get_scorer,
    log_loss,
    roc_auc_score,
)
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import (
    BandwidthEdgeWarning,
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._widths._learning import loo_loss
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted({kernel.name for kernel in KERNELS.values()})
LOG_FORM = [name for name in CANONICAL if KERNELS[name].log_function is not None]
# From a width at which compact neighbourhoods are empty and the gaussian's
# weights underflow, to wide.
BANDWIDTHS = [0.004, 0.15, 0.6]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 2))
    X[5] = X[4]  # a duplicated key
    score = np.sin(4 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=40)
    y = np.array(["low", "mid", "high"])[np.digitize(score, [0.7, 1.3])]
    w = rng.integers(0, 4, size=40).astype(float)
    w[:3] = [0.0, 0.5, 2.5]
    return X, y, w


def refit_held_out(X, y, splits, kernel, bandwidth, sample_weight, on_empty):
    """Held-out probabilities over ``np.unique(y)`` by refitting without the
    held-out points; NaN rows where the fit raised for an empty query."""
    classes = np.unique(y)
    proba = np.zeros((len(X), len(classes)))
    for train, test in splits:
        w = None if sample_weight is None else sample_weight[train]
        clf = KernelAttentionClassifier(
            kernel=kernel, bandwidth=bandwidth, on_empty=on_empty
        ).fit(X[train], y[train], sample_weight=w)
        columns = np.searchsorted(classes, clf.classes_)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            try:
                proba[np.ix_(test, columns)] = clf.predict_proba(X[test])
            except ValueError:
                proba[test] = np.nan
    return proba


def loo_splits(n):
    return [(np.delete(np.arange(n), i), np.array([i])) for i in range(n)]


def log_loss_of(y, proba, w):
    """log_loss with the classes of ``np.unique(y)`` (each point's own class
    may be missing from its training part)."""
    return log_loss(y, proba, sample_weight=w, labels=np.unique(y))


# -- leave-one-out -----------------------------------------------------------
# A kernel of each family (unbounded, heavy-tailed, compact, flat, constant)
# with and without weights under both policies by default; the other kernels
# with -m slow.
LOO_DEFAULT_KERNELS = {"gaussian", "cauchy", "epanechnikov", "boxcar", "constant"}


def _loo_cases():
    return [
        pytest.param(
            kernel,
            weighted,
            on_empty,
            id=f"{on_empty}-{weighted}-{kernel}",
            marks=[] if kernel in LOO_DEFAULT_KERNELS else [pytest.mark.slow],
        )
        for on_empty in ("nearest", "mean")
        for weighted in (False, True)
        for kernel in CANONICAL
    ]


@pytest.mark.parametrize("kernel, weighted, on_empty", _loo_cases())
def test_loo_matches_refitting_without_each_point(data, kernel, weighted, on_empty):
    X, y, w = data
    w = w if weighted else None
    clf = KernelAttentionClassifierCV(kernel, BANDWIDTHS, on_empty=on_empty).fit(
        X, y, sample_weight=w
    )
    for c, h in enumerate(BANDWIDTHS):
        proba = refit_held_out(X, y, loo_splits(len(X)), kernel, h, w, on_empty)
        expected = log_loss_of(y, proba, w)
        assert_allclose(clf.cv_results_["loo_log_loss"][c], expected, rtol=1e-10)
        assert_allclose(clf.cv_results_["mean_test_score"][c], -expected, rtol=1e-10)
    if KERNELS[kernel].is_compact and kernel != "constant":
        # The narrowest width leaves every point without a neighbour.
        assert clf.cv_results_["empty_fraction"][0] > 0.9


@pytest.mark.parametrize("scoring", ["accuracy", "neg_log_loss", "balanced_accuracy"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_loo_scorer_scores_every_held_out_prediction(data, scoring, kernel):
    X, y, w = data
    clf = KernelAttentionClassifierCV(kernel, BANDWIDTHS, scoring=scoring).fit(
        X, y, sample_weight=w
    )
    scorer = get_scorer(scoring)
    for c, h in enumerate(BANDWIDTHS):
        proba = refit_held_out(X, y, loo_splits(len(X)), kernel, h, w, "nearest")
        if scoring == "neg_log_loss":
            expected = -log_loss_of(y, proba, w)
        else:
            pred = np.unique(y)[np.argmax(proba, axis=1)]
            expected = scorer._score_func(y, pred, sample_weight=w)
        assert_allclose(clf.cv_results_["mean_test_score"][c], expected, rtol=1e-10)


def test_loo_with_raise_makes_empty_candidates_ineligible(data):
    X, y, _ = data
    clf = KernelAttentionClassifierCV(
        "epanechnikov", BANDWIDTHS, on_empty="raise", n_neighbors=None
    ).fit(X, y)
    scores, ranks = (
        clf.cv_results_["mean_test_score"],
        clf.cv_results_["rank_test_score"],
    )
    assert np.isnan(scores[0]) and not np.isnan(scores[2])
    assert np.all(ranks[np.isnan(scores)] > ranks[2])
    proba = refit_held_out(X, y, loo_splits(len(X)), "epanechnikov", 0.6, None, "raise")
    assert_allclose(clf.cv_results_["loo_log_loss"][2], log_loss_of(y, proba, None))
    with pytest.raises(ValueError, match="No candidate could be scored"):
        KernelAttentionClassifierCV(
            "boxcar", [0.004], on_empty="raise", n_neighbors=None
        ).fit(X, y)


def test_a_zero_probability_of_the_true_class_is_clipped_at_eps():
    # The middle point's class has no other member: probability 0 for it.
    X = np.array([[0.0], [1.0], [2.0], [3.0], [4.0]])
    y = np.array([0, 0, 1, 2, 2])
    clf = KernelAttentionClassifierCV("boxcar", [1.5]).fit(X, y)
    eps = np.finfo(np.float64).eps
    # Ends: their neighbour shares the class. 1 and 3: half. 2: none.
    expected = -(2 * np.log(1 - eps) + 2 * np.log(0.5) + np.log(eps)) / 5
    assert_allclose(clf.cv_results_["loo_log_loss"][0], expected, rtol=1e-12)


# -- K-fold ------------------------------------------------------------------
@pytest.mark.parametrize(
    "cv", [3, StratifiedKFold(4, shuffle=True, random_state=0), KFold(4)]
)
@pytest.mark.parametrize("scoring", [None, "accuracy", "neg_log_loss"])
def test_kfold_equals_grid_search(data, cv, scoring):
    X, y, _ = data
    grid = {"kernel": ["gaussian", "tricube"], "bandwidth": BANDWIDTHS}
    # The default score is the negative log-loss.
    search = GridSearchCV(
        KernelAttentionClassifier(),
        grid,
        cv=cv,
        scoring="neg_log_loss" if scoring is None else scoring,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        search.fit(X, y)
    clf = KernelAttentionClassifierCV(
        grid["kernel"], grid["bandwidth"], cv=cv, scoring=scoring, n_neighbors=None
    ).fit(X, y)
    assert clf.cv_results_["params"] == search.cv_results_["params"]
    for key in ["mean_test_score", "std_test_score", "split0_test_score"]:
        assert_allclose(clf.cv_results_[key], search.cv_results_[key], rtol=1e-10)
    assert_array_equal(
        clf.cv_results_["rank_test_score"], search.cv_results_["rank_test_score"]
    )
    assert clf.best_params_ == search.best_params_
    assert clf.best_index_ == search.best_index_
    assert_allclose(clf.best_score_, search.best_score_, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        assert_allclose(clf.predict_proba(X), search.predict_proba(X), rtol=1e-12)
        assert_array_equal(clf.predict(X), search.predict(X))
    assert isinstance(clf.best_estimator_, KernelAttentionClassifier)
    assert clf.best_estimator_.get_params()["bandwidth"] == clf.bandwidth_


@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
@pytest.mark.parametrize("scoring", [None, "accuracy"])
def test_weighted_kfold_equals_grid_search_with_routing(data, on_empty, scoring):
    X, y, w = data
    grid = {"kernel": ["gaussian", "epanechnikov"], "bandwidth": [0.1, 0.6]}
    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    with config_context(enable_metadata_routing=True):
        name = "neg_log_loss" if scoring is None else scoring
        scorer = get_scorer(name).set_score_request(sample_weight=True)
        estimator = KernelAttentionClassifier(on_empty=on_empty).set_fit_request(
            sample_weight=True
        )
        search = GridSearchCV(estimator, grid, cv=cv, scoring=scorer)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            search.fit(X, y, sample_weight=w)
    clf = KernelAttentionClassifierCV(
        grid["kernel"],
        grid["bandwidth"],
        cv=cv,
        scoring=scoring,
        on_empty=on_empty,
        n_neighbors=None,
    ).fit(X, y, sample_weight=w)
    for key in ["mean_test_score", "split1_test_score"]:
        assert_allclose(clf.cv_results_[key], search.cv_results_[key], rtol=1e-10)
    assert clf.best_params_ == search.best_params_


def test_kfold_classes_of_the_training_part(data):
    # A fold whose training part lacks a class: the scorer sees the classes
    # of that part, as GridSearchCV's fitted classifier has them.
    X, y, _ = data
    rare = np.flatnonzero(y == "high")
    splits = [
        (np.setdiff1d(np.arange(len(y)), rare[:3]), rare[:3]),
        (np.arange(20), np.arange(20, 40)),
    ]
    y = y.copy()
    y[rare[3:]] = "low"  # "high" only in the first test set
    grid = {"kernel": ["gaussian"], "bandwidth": [0.15, 0.6]}
    search = GridSearchCV(KernelAttentionClassifier(), grid, cv=splits).fit(X, y)
    clf = KernelAttentionClassifierCV(
        "gaussian", [0.15, 0.6], cv=splits, scoring="accuracy", n_neighbors=None
    ).fit(X, y)
    assert_allclose(clf.cv_results_["split0_test_score"], 0.0)
    assert_allclose(
        clf.cv_results_["mean_test_score"], search.cv_results_["mean_test_score"]
    )


# -- per-feature widths --------------------------------------------------------
def loo_log_loss(log_widths, X, Y, weights, kernel, gradient=True):
    """The leave-one-out log-loss of per-feature widths and its gradient."""
    return loo_loss(log_widths, X, Y, weights, kernel, gradient, objective="log_loss")


@pytest.mark.parametrize("kernel", LOG_FORM)
def test_loo_log_loss_and_gradient(data, kernel):
    X, y, w = data
    X = np.column_stack([X, X[:, 0] * X[:, 1]])
    Y = (y[:, None] == np.unique(y)[None, :]).astype(float)
    theta = np.log([0.2, 0.35, 0.5])
    loss, grad, proba = loo_log_loss(theta, X, Y, w, KERNELS[kernel])
    slow = refit_held_out(X, y, loo_splits(len(X)), kernel, np.exp(theta), w, "nearest")
    assert_allclose(proba, slow, rtol=1e-10, atol=1e-14)
    assert_allclose(loss, log_loss_of(y, slow, w), rtol=1e-10)
    step = 1e-6
    for f in range(3):
        up, down = theta.copy(), theta.copy()
        up[f] += step
        down[f] -= step
        numeric = (
            loo_log_loss(up, X, Y, w, KERNELS[kernel], gradient=False)[0]
            - loo_log_loss(down, X, Y, w, KERNELS[kernel], gradient=False)[0]
        ) / (2 * step)
        assert_allclose(grad[f], numeric, rtol=1e-5, atol=1e-9)


def test_per_feature_widths_lower_the_loo_log_loss():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(150, 2))
    X[:, 1] *= 5  # an irrelevant feature on a larger scale
    y = (np.sin(3 * X[:, 0]) + 0.3 * rng.normal(size=150) > 0).astype(int)
    iso = KernelAttentionClassifierCV(kernels="gaussian", bandwidths=10).fit(X, y)
    clf = KernelAttentionClassifierCV(
        kernels="gaussian", bandwidths=10, per_feature=True
    ).fit(X, y)
    assert clf.bandwidth_.shape == (2,)
    assert clf.bandwidth_[1] > 10 * clf.bandwidth_[0]
    assert clf.best_score_ > iso.best_score_
    Y = np.column_stack([y == 0, y == 1]).astype(float)
    loss, _ = loo_log_loss(
        np.log(clf.bandwidth_), X, Y, np.ones(150), KERNELS["gaussian"], False
    )
    assert_allclose(clf.best_score_, -loss)
    assert clf.n_iter_ >= 1
    assert_array_equal(clf.best_estimator_.bandwidth_, clf.bandwidth_)


# -- the estimator -------------------------------------------------------------
def test_selects_the_best_candidate_and_refits_it(data):
    X, y, w = data
    clf = KernelAttentionClassifierCV(
        ["gaussian", "cauchy"], BANDWIDTHS, n_neighbors=None
    ).fit(X, y, sample_weight=w)
    best = int(np.nanargmax(clf.cv_results_["mean_test_score"]))
    assert clf.best_index_ == best
    assert clf.best_params_ == clf.cv_results_["params"][best]
    assert (clf.kernel_, clf.bandwidth_) == (
        clf.best_params_["kernel"],
        clf.best_params_["bandwidth"],
    )
    assert clf.best_score_ == clf.cv_results_["mean_test_score"][best]
    ref = KernelAttentionClassifier(clf.kernel_, clf.bandwidth_).fit(
        X, y, sample_weight=w
    )
    assert_allclose(clf.predict_proba(X), ref.predict_proba(X))
    assert_array_equal(clf.predict(X), ref.predict(X))
    assert_allclose(clf.predict_log_proba(X), ref.predict_log_proba(X))
    assert clf.score(X, y) == accuracy_score(y, ref.predict(X))
    assert_array_equal(clf.classes_, ["high", "low", "mid"])
    assert list(clf.cv_results_) == [
        "mean_test_score",
        "loo_log_loss",
        "empty_fraction",
        "param_kernel",
        "param_bandwidth",
        "params",
        "rank_test_score",
    ]
    copy = pickle.loads(pickle.dumps(clf))
    assert_array_equal(copy.predict_proba(X), clf.predict_proba(X))
    assert clone(clf).get_params() == clf.get_params()


@pytest.mark.parametrize(
    "scoring, labels",
    [("roc_auc", [0, 1]), ("neg_brier_score", [-1, 1]), ("f1_macro", ["no", "yes"])],
)
def test_binary_labels_with_probability_scorers(data, scoring, labels):
    # scikit-learn's roc_auc and Brier score need labels {0, 1} or {-1, 1}.
    X, y, w = data
    y = np.where(y == "low", *labels)
    clf = KernelAttentionClassifierCV("gaussian", BANDWIDTHS, scoring=scoring).fit(
        X, y, sample_weight=w
    )
    for c, h in enumerate(BANDWIDTHS):
        proba = refit_held_out(X, y, loo_splits(len(X)), "gaussian", h, w, "nearest")
        if scoring == "roc_auc":
            expected = roc_auc_score(y, proba[:, 1], sample_weight=w)
        elif scoring == "neg_brier_score":
            expected = -brier_score_loss(y, proba[:, 1], sample_weight=w)
        else:
            pred = np.unique(y)[np.argmax(proba, axis=1)]
            expected = f1_score(y, pred, average="macro", sample_weight=w)
        assert_allclose(clf.cv_results_["mean_test_score"][c], expected, rtol=1e-10)
    assert_array_equal(clf.classes_, labels)
    assert set(clf.predict(X)) <= set(labels)


def test_verbose_names_the_estimator_and_refits_drop_stale_attributes(data, capsys):
    X, y, _ = data
    clf = KernelAttentionClassifierCV(
        kernels="gaussian", bandwidths=3, per_feature=True, verbose=1
    )
    clf.fit(X, y)
    assert hasattr(clf, "n_iter_")
    out = capsys.readouterr().out
    assert "[KernelAttentionClassifierCV] Scoring 3 candidates" in out
    assert "Per-feature widths" in out
    clf.set_params(per_feature=False, verbose=0).fit(X, y)
    assert clf.n_iter_ == 1  # nothing learned: the iterations are not kept
    assert isinstance(clf.bandwidth_, float)


def test_feature_names_are_kept(data):
    pd = pytest.importorskip("pandas")
    X, y, _ = data
    frame = pd.DataFrame(X, columns=["a", "b"])
    clf = KernelAttentionClassifierCV(bandwidths=5).fit(frame, y)
    assert_array_equal(clf.feature_names_in_, ["a", "b"])
    assert clf.n_features_in_ == 2


@pytest.mark.parametrize(
    "params, match",
    [
        ({"scoring": "r2"}, "a regression metric"),
        ({"scoring": "neg_mean_squared_error"}, "classification scorer"),
        ({"per_feature": True, "cv": 3}, "needs cv=None"),
        ({"per_feature": True, "kernels": "boxcar"}, "log form"),
        ({"bandwidths": [0.1, -1.0]}, "finite float > 0"),
        ({"kernels": ["gaussian", "nope"]}, "kernel name"),
    ],
)
def test_invalid_parameters(data, params, match):
    X, y, _ = data
    with pytest.raises(ValueError, match=match):
        KernelAttentionClassifierCV(**params).fit(X, y)


def test_invalid_data(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="at least two samples"):
        KernelAttentionClassifierCV().fit(X[:1], y[:1])
    with pytest.raises(ValueError, match="Unknown label type"):
        KernelAttentionClassifierCV().fit(X, np.linspace(0, 1, len(X)))
    with pytest.raises(ValueError, match="n_splits=5"):
        KernelAttentionClassifierCV(cv=5).fit(X[:4], y[:4])
    w = np.zeros(len(X))
    w[0] = 1.0
    with pytest.raises(ValueError, match="at least two samples of positive weight"):
        KernelAttentionClassifierCV().fit(X, y, sample_weight=w)


def test_breast_cancer_accuracy_and_log_loss():
    # Standardised, the breast-cancer data want a width below the median
    # distance to the nearest point, where the automatic grid starts.
    X, y = load_breast_cancer(return_X_y=True)
    search = KernelAttentionClassifierCV(
        ("gaussian", "exponential"), np.geomspace(0.1, 10, 30)
    )
    outer = StratifiedKFold(5, shuffle=True, random_state=0)
    accuracy, loss = [], []
    for train, test in outer.split(X, y):
        scaler = StandardScaler().fit(X[train])
        clf = clone(search).fit(scaler.transform(X[train]), y[train])
        proba = clf.predict_proba(scaler.transform(X[test]))
        accuracy.append(accuracy_score(y[test], clf.classes_[proba.argmax(axis=1)]))
        loss.append(log_loss(y[test], proba))
    assert np.mean(accuracy) >= 0.965
    assert np.mean(loss) <= 0.11


def test_guarded_per_feature_widths_of_the_classifier():
    # An irrelevant feature on a larger scale: the widths learned on the
    # leave-one-out log-loss also win out of fold, and are kept; under
    # K-fold the score is that of the guard's out-of-fold probabilities.
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(150, 2))
    X[:, 1] *= 5
    y = (np.sin(3 * X[:, 0]) + 0.3 * rng.normal(size=150) > 0).astype(int)
    clf = KernelAttentionClassifierCV(
        bandwidths=10, per_feature="auto", n_neighbors=None
    ).fit(X, y)
    assert clf.per_feature_
    scores = clf.per_feature_scores_
    assert scores["per_feature"] < scores["isotropic"]
    assert clf.bandwidth_.shape == (2,)
    assert_array_equal(clf.best_estimator_.bandwidth_, clf.bandwidth_)
    kfold = KernelAttentionClassifierCV(
        bandwidths=10, per_feature="auto", n_neighbors=None, cv=3
    ).fit(X, y)
    assert kfold.per_feature_
    assert np.isfinite(kfold.best_score_)
    assert kfold.best_score_ > kfold.cv_results_["mean_test_score"].max()


def test_the_search_refits_the_classifier_alone(monkeypatch):
    # The candidates are scored on the pooled one-hot labels by the shared
    # search; only the selected classifier is fitted, no regressor.
    def refuse(*args, **kwargs):
        raise AssertionError("a regressor was fitted")

    monkeypatch.setattr(KernelAttentionRegressor, "fit", refuse)
    X, y = _iris_like()
    clf = KernelAttentionClassifierCV(bandwidths=[0.3, 1.0], n_neighbors=None)
    assert clf.fit(X, y).best_estimator_.classes_.tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    "search",
    [
        KernelAttentionRegressorCV(bandwidths=[1e-3, 2e-3], n_neighbors=None),
        KernelAttentionClassifierCV(bandwidths=[1e-3, 2e-3], n_neighbors=None),
    ],
    ids=["regressor", "classifier"],
)
def test_the_edge_warning_points_at_the_call_of_fit(search):
    X, y = _iris_like()
    with pytest.warns(BandwidthEdgeWarning) as caught:
        search.fit(X, y)
    assert [w.filename for w in caught] == [__file__]


def test_the_verbose_output_names_the_estimator_class(capsys):
    class MySearch(KernelAttentionClassifierCV):
        pass

    X, y = _iris_like()
    MySearch(bandwidths=[0.3, 1.0], n_neighbors=None, verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("[MySearch] ") for line in lines)


def _iris_like():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 20)
    X = y[:, None] + rng.normal(scale=0.5, size=(60, 2))
    return X, y
