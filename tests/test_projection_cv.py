"""The learned map in the searches (``projection``): the guard, the refit on
the mapped keys, and every method of the search through the map."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_diabetes
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, cross_val_score
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionProjection,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._inference._residuals import residual_variance


def _index_model(n=240, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    direction = np.ones(d) / np.sqrt(d)
    y = np.sin(2 * X @ direction) + 0.1 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def kept():
    X, y = _index_model()
    search = KernelAttentionRegressorCV(degree=0, projection="auto").fit(X, y)
    return search, X, y


def test_a_map_is_kept_on_index_model_data(kept):
    search, X, y = kept
    assert search.projection_ is not None
    assert search.projection_.components_.shape == (2, 5)
    scores = search.projection_scores_
    assert scores["kept"]
    assert scores["without"] - scores["projection"] > scores["standard_error"]
    assert search.kernel_ == "gaussian"
    assert search.bandwidth_ == 1.0
    assert search.degree_ == 0
    # The kept map scores better, out of fold, than the search without it.
    cv = KFold(5, shuffle=True, random_state=1)
    with_map = cross_val_score(search, X, y, cv=cv).mean()
    without = cross_val_score(search.set_params(projection=None), X, y, cv=cv).mean()
    search.set_params(projection="auto")
    assert with_map > without + 0.2


@pytest.mark.slow
def test_the_map_costs_no_more_than_fold_noise_on_a_small_noisy_table():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    cv = KFold(5, shuffle=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = {
            projection: cross_val_score(
                KernelAttentionRegressorCV(degree=0, projection=projection),
                X,
                y,
                cv=cv,
            )
            for projection in (None, "auto")
        }
    gap = scores[None] - scores["auto"]
    # The mean R^2 loss, against the standard error of the fold differences.
    assert gap.mean() <= max(0.01, gap.std(ddof=1) / np.sqrt(len(gap)))


def test_every_method_answers_through_the_map(kept):
    search, X, _ = kept
    Q = X[:7] + 0.05
    Z = search.projection_.transform(Q)
    best = search.best_estimator_
    assert_array_equal(search.predict(Q), best.predict(Z))
    for mean, other in zip(
        search.predict(Q, return_std=True, return_se=True),
        best.predict(Z, return_std=True, return_se=True),
        strict=True,
    ):
        assert_array_equal(mean, other)
    assert_array_equal(search.attention_weights(Q), best.attention_weights(Z))
    for name in ("confidence_interval", "prediction_interval"):
        assert_array_equal(getattr(search, name)(Q), getattr(best, name)(Z))


def test_the_gradient_is_that_of_the_original_features(kept):
    search, X, y = kept
    Q = X[:5]
    gradient, se = search.predict_gradient(Q, return_se=True)
    assert gradient.shape == se.shape == (5, 5)
    # Central differences of predict in the original coordinates.
    step = 1e-6
    numeric = np.empty_like(gradient)
    for j in range(5):
        E = np.zeros(5)
        E[j] = step
        numeric[:, j] = (search.predict(Q + E) - search.predict(Q - E)) / (2 * step)
    assert_allclose(gradient, numeric, rtol=1e-5, atol=1e-7)
    # The standard errors: the gradient is linear in y, sum_i G_i(q) y_i;
    # the factors G_i in the mapped coordinates are the gradients of the
    # fits of the unit vectors e_i, mapped back by A^T.
    best = search.best_estimator_
    Z = search.projection_.transform(X)
    n = len(y)
    unit = KernelAttentionRegressor(bandwidth=1.0).fit(Z, np.eye(n))
    G = unit.predict_gradient(search.projection_.transform(Q))  # (q, r, n)
    Gx = np.einsum("kj,qki->qji", search.projection_.components_, G)
    variance = residual_variance(best)[0][:, 0]
    assert_allclose(se, np.sqrt(Gx**2 @ variance), rtol=1e-8)


def test_an_int_forces_a_map_of_that_rank():
    X, y = _index_model(n=120)
    search = KernelAttentionRegressorCV(degree=0, projection=1).fit(X, y)
    assert search.projection_.components_.shape == (1, 5)
    assert search.projection_scores_ is None  # nothing compared under LOO
    # Its leave-one-out score: the negated mean squared error of the map's
    # leave-one-out fits.
    Z = search.projection_.transform(X)
    loo = [
        KernelAttentionRegressor(bandwidth=1.0)
        .fit(np.delete(Z, i, 0), np.delete(y, i))
        .predict(Z[i : i + 1])[0]
        for i in range(len(y))
    ]
    assert_allclose(search.best_score_, -np.mean((np.array(loo) - y) ** 2))
    # Under K-fold the map of each training part scores its split.
    folds = KernelAttentionRegressorCV(degree=0, projection=1, cv=3).fit(X, y)
    assert folds.projection_scores_ is not None
    assert -1.0 < folds.best_score_ <= 1.0


def test_a_map_is_not_kept_without_a_gain():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 3))
    y = rng.normal(size=80)  # nothing to learn
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = KernelAttentionRegressorCV(degree=0, projection="auto").fit(X, y)
    assert search.projection_ is None
    assert not search.projection_scores_["kept"]
    plain = KernelAttentionRegressorCV(degree=0).fit(X, y)
    assert_array_equal(search.predict(X), plain.predict(X))


def test_the_classifier_search_keeps_a_map_of_index_labels():
    # Classes in stripes across one direction: a map along it separates them.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    labels = np.where(np.sin(2 * X @ (np.ones(5) / np.sqrt(5))) > 0, "up", "down")
    search = KernelAttentionClassifierCV(projection="auto").fit(X, labels)
    assert search.projection_ is not None
    Q = X[:9]
    Z = search.projection_.transform(Q)
    assert_array_equal(search.predict_proba(Q), search.best_estimator_.predict_proba(Z))
    assert_array_equal(search.predict(Q), search.best_estimator_.predict(Z))


@pytest.mark.parametrize(
    "params, X_kind, match",
    [
        ({"categorical_features": [0]}, "dense", "categorical features"),
        ({"linear_features": [0]}, "dense", "linear_features"),
        ({}, "sparse", "sparse X"),
        ({"projection": 9}, "dense", "projection=9 exceeds the 5 features"),
    ],
)
def test_what_a_map_cannot_take_is_refused(params, X_kind, match):
    X, y = _index_model(n=60)
    X = np.round(X, 0) if "categorical_features" in params else X
    X = sp.csr_array(X) if X_kind == "sparse" else X
    params = {"projection": "auto", **params}
    with pytest.raises(ValueError, match=match), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        KernelAttentionRegressorCV(degree=0, **params).fit(X, y)


def test_a_search_with_a_map_pickles(kept):
    search, X, _ = kept
    loaded = pickle.loads(pickle.dumps(search))
    assert_array_equal(loaded.predict(X[:20]), search.predict(X[:20]))
    assert isinstance(loaded.projection_, KernelAttentionProjection)


def test_an_all_numeric_frame_with_categories_from_dtype_takes_a_map():
    import pandas as pd

    X, y = _index_model(n=120)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(5)])
    search = KernelAttentionRegressorCV(
        degree=0, projection=1, categorical_features="from_dtype"
    ).fit(frame, y)
    assert search.projection_.components_.shape == (1, 5)


def _assert_the_map_is_the_selected_entry(search):
    """best_index_, best_params_ and best_score_ describe best_estimator_:
    the map's entry, appended last to cv_results_."""
    results = search.cv_results_
    n = len(results["params"])
    assert search.best_index_ == n - 1
    assert results["params"][-1] == search.best_params_
    assert search.best_score_ == results["mean_test_score"][-1]
    assert search.best_params_["projection"] == search.projection_.n_components
    best = search.best_estimator_.get_params()
    for name in ("kernel", "bandwidth", "degree"):
        if name in search.best_params_:
            assert best[name] == search.best_params_[name]
    assert best["bandwidth"] == 1.0 and search.best_params_["bandwidth"] == 1.0
    column = results["param_projection"]
    assert column.mask.tolist() == [True] * (n - 1) + [False]
    assert results["param_kernel"][-1] == search.kernel_
    assert_array_equal(
        results["rank_test_score"],
        [
            1 + np.sum(results["mean_test_score"] > s)
            for s in results["mean_test_score"]
        ],
    )
    for key, values in results.items():
        assert len(values) == n, key


def test_a_kept_map_is_the_selected_entry_of_the_results(kept):
    search, X, y = kept
    _assert_the_map_is_the_selected_entry(search)
    assert search.best_params_ == {
        "bandwidth": 1.0,
        "kernel": "gaussian",
        "projection": 2,
    }
    # Its leave-one-out error: that of the map's leave-one-out refits.
    Z = search.projection_.transform(X)
    loo = [
        KernelAttentionRegressor(bandwidth=1.0)
        .fit(np.delete(Z, i, 0), np.delete(y, i))
        .predict(Z[i : i + 1])[0]
        for i in range(len(y))
    ]
    mse = np.mean((np.array(loo) - y) ** 2)
    assert_allclose(search.cv_results_["loo_mse"][-1], mse, rtol=1e-10)
    assert_allclose(search.best_score_, -mse, rtol=1e-10)


def test_the_entry_of_a_map_under_k_fold_scores_the_map_of_each_split():
    X, y = _index_model(n=150)
    cv = KFold(3, shuffle=True, random_state=0)
    search = KernelAttentionRegressorCV(projection=1, cv=cv).fit(X, y)
    _assert_the_map_is_the_selected_entry(search)
    # degree="auto": the map's entry says degree 0, the others' column too.
    assert search.best_params_["degree"] == 0 == search.degree_
    assert search.cv_results_["param_degree"][-1] == 0
    assert search.cv_results_["shrunk_fraction"][-1] == 0.0
    # The refits: each split's map learned on its training part, pooled.
    scores = []
    for train, test in cv.split(X):
        projection = KernelAttentionProjection(1, max_iter=200, random_state=0)
        projection.fit(X[train], y[train])
        model = KernelAttentionRegressor(bandwidth=1.0, degree=0)
        model.fit(projection.transform(X[train]), y[train])
        scores.append(r2_score(y[test], model.predict(projection.transform(X[test]))))
    for s, score in enumerate(scores):
        assert_allclose(search.cv_results_[f"split{s}_test_score"][-1], score)
    assert_allclose(search.best_score_, np.mean(scores))
    assert_allclose(search.cv_results_["std_test_score"][-1], np.std(scores))


def test_a_map_scored_by_gcv_has_its_criterion_and_trace():
    X, y = _index_model(n=120)
    search = KernelAttentionRegressorCV(degree=0, projection=1, scoring="gcv")
    search.fit(X, y)
    _assert_the_map_is_the_selected_entry(search)
    diagnostics = search.best_estimator_.smoother_diagnostics()
    assert_allclose(search.best_score_, -diagnostics.gcv, rtol=1e-8)
    assert_allclose(search.effective_df_, diagnostics.effective_df, rtol=1e-8)


def test_the_classifier_search_selects_the_entry_of_its_map():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    labels = np.where(np.sin(2 * X @ (np.ones(4) / 2)) > 0, "up", "down")
    search = KernelAttentionClassifierCV(projection=1).fit(X, labels)
    _assert_the_map_is_the_selected_entry(search)
    # The negated leave-one-out log-loss of the map's pooled indicators.
    Z = search.projection_.transform(X)
    losses = []
    for i in range(len(labels)):
        model = KernelAttentionClassifier(kernel=search.kernel_, bandwidth=1.0)
        model.fit(np.delete(Z, i, 0), np.delete(labels, i))
        proba = model.predict_proba(Z[i : i + 1])[0]
        losses.append(-np.log(proba[list(model.classes_).index(labels[i])]))
    # (the log of probabilities near 0 amplifies the rounding of the sums)
    assert_allclose(search.best_score_, -np.mean(losses), rtol=1e-8)


def test_no_warning_of_the_guard_reaches_the_user():
    # The guard's searches on the training parts select local-linear widths
    # that fall back on some test points: the user never chose them.
    X, y = _index_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = KernelAttentionRegressorCV(degree=1, projection="auto").fit(X, y)
    assert search.projection_ is not None
    assert [str(w.message) for w in caught] == []


def test_the_entry_is_appended_with_masks_where_parameters_differ():
    from sklearn_kernelpool._search._mapped import append_entry

    results = {
        "param_kernel": np.array(["gaussian", "tricube"], dtype=object),
        "param_bandwidth": np.array([0.5, 2.0]),
        "param_lambda": np.array([0.1, 0.3]),
        "param_n_neighbors": np.ma.MaskedArray(
            [0, 5], mask=[True, False], dtype=object
        ),
        "params": [{"kernel": "gaussian"}, {"kernel": "tricube"}],
        "mean_test_score": np.array([-2.0, -1.0]),
        "rank_test_score": np.array([2, 1], dtype=np.int32),
        "shrunk_fraction": np.array([0.1, 0.2]),
        "gcv": np.array([3.0, 4.0]),
    }
    params = {"bandwidth": 1.0, "kernel": "gaussian", "projection": 2}
    merged = append_entry(results, params, {"mean_test_score": np.array([-1.5])})
    assert merged["params"][-1] == params
    assert list(merged["param_kernel"]) == ["gaussian", "tricube", "gaussian"]
    assert_array_equal(merged["param_bandwidth"], [0.5, 2.0, 1.0])
    for key, mask in [
        ("param_lambda", [False, False, True]),
        ("param_n_neighbors", [True, False, True]),
        ("param_projection", [True, True, False]),
    ]:
        assert merged[key].mask.tolist() == mask, key
    assert merged["param_projection"][-1] == 2
    assert_array_equal(merged["param_lambda"].data[:2], [0.1, 0.3])
    assert_array_equal(merged["rank_test_score"], [3, 1, 2])
    assert_array_equal(merged["shrunk_fraction"], [0.1, 0.2, 0.0])
    assert_array_equal(merged["gcv"], [3.0, 4.0, np.nan])
