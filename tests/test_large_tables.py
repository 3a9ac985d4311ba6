"""The large-table selection of the cross-validated estimators
(``subsample``, ``random_state``): its draw, its two stages against their
defining procedures (an exact search on the subsample; refits on all the
rows but the held-out ones, scored on those), the rescaled candidates, the
preference for a compact kernel, reproducibility and refusals."""

import io

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.metrics import log_loss, r2_score
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    progress_bar,
)
from sklearn_kernelpool._search._engines import neighbour_lists
from sklearn_kernelpool._search._quadratic_stage import without_quadratic_candidates
from sklearn_kernelpool._selection import _large
from sklearn_kernelpool._selection._large_results import COUNT_STEPS, WIDTH_STEPS

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning"),
]


def _data(n, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2] + 0.1 * rng.standard_normal(n)
    return X, y


def _draw(n, m, seed, weights=None):
    """The rows the selection draws, by its documented rule: a permutation
    of the rows of positive weight by ``RandomState(seed)``."""
    positive = np.arange(n) if weights is None else np.flatnonzero(weights > 0)
    order = np.random.RandomState(seed).permutation(positive)
    r = min(_large.HELD_OUT_ROWS, positive.size - m)
    return np.sort(order[:m]), np.sort(order[m : m + r])


SMALL = {"subsample": 500, "random_state": 3}


@pytest.fixture(scope="module")
def large_fit():
    X, y = _data(1500)
    return X, y, KernelAttentionRegressorCV(**SMALL).fit(X, y)


def test_the_subsample_search_is_the_exact_search_on_the_drawn_rows(large_fit):
    X, y, reg = large_fit
    sub, _ = _draw(1500, 500, 3)
    # The subsample's search takes the neighbour lists of compact kernels,
    # and scores no local quadratic.
    with neighbour_lists(), without_quadratic_candidates():
        exact = KernelAttentionRegressorCV(
            kernels=("gaussian", "epanechnikov"), subsample=None
        ).fit(X[sub], y[sub])
    assert reg.subsample_ == 500 and reg.n_held_out_ == 1000
    for key in ("mean_test_score", "param_bandwidth", "param_kernel"):
        np.testing.assert_array_equal(
            reg.subsample_results_[key], exact.cv_results_[key]
        )


def test_the_candidates_are_scored_by_refits_without_the_held_out_rows(large_fit):
    X, y, reg = large_fit
    _, held = _draw(1500, 500, 3)
    train = np.setdiff1d(np.arange(1500), held)
    results = reg.cv_results_
    for i in range(0, len(results["params"]), 3):
        params = results["params"][i]
        model = KernelAttentionRegressor(
            kernel=params["kernel"],
            bandwidth=params["bandwidth"],
            n_neighbors=params.get("n_neighbors"),
            degree=results["param_degree"][i],
        ).fit(X[train], y[train])
        # scoring=None: the estimator's R^2 on the held-out rows
        r2 = r2_score(y[held], model.predict(X[held]))
        np.testing.assert_allclose(results["mean_test_score"][i], r2, rtol=1e-10)


def test_the_widths_are_rescaled_by_the_rate_of_a_local_fit(large_fit):
    X, y, reg = large_fit
    first = reg.subsample_results_
    results = reg.cv_results_
    kernel = results["param_kernel"][0]
    fixed = (first["param_kernel"] == kernel) & np.ma.getmaskarray(
        first["param_n_neighbors"]
    )
    if "param_degree" in first:
        fixed &= (
            first["param_degree"] == reg.degree_ if kernel == reg.kernel_ else fixed
        )
    scores = np.where(fixed, first["mean_test_score"], -np.inf)
    h_m = first["param_bandwidth"][np.argmax(scores)]
    rows = (results["param_kernel"] == kernel) & np.ma.getmaskarray(
        results["param_n_neighbors"]
    )
    expected = h_m * (500 / 1500) ** (1 / (4 + 3)) * WIDTH_STEPS
    np.testing.assert_allclose(results["param_bandwidth"][rows], expected, rtol=1e-12)


def test_the_counts_of_a_compact_kernel_are_rescaled():
    X, y = _data(1500, 1)
    reg = KernelAttentionRegressorCV(
        kernels=("epanechnikov",), bandwidths=None, **SMALL
    ).fit(X, y)
    first = reg.subsample_results_
    k_m = first["param_n_neighbors"][np.argmax(first["mean_test_score"])]
    expected = np.unique(np.round(k_m * (1500 / 500) ** (4 / 7) * COUNT_STEPS))
    counts = np.asarray(reg.cv_results_["param_n_neighbors"])
    np.testing.assert_array_equal(counts[: expected.size], expected)
    # An edge selected: three more counts beyond it, the best kept.
    k = counts[np.argmax(reg.cv_results_["mean_test_score"])]
    assert reg.n_neighbors_ == k
    if counts.size > expected.size:
        edge = expected.max() if counts[-1] > expected.max() else expected.min()
        step = 1.5 if edge == expected.max() else 1 / 1.5
        extended = np.unique(np.round(edge * step ** np.arange(1, 4)).astype(int))
        np.testing.assert_array_equal(np.sort(counts[expected.size :]), extended)


def test_a_width_on_the_edge_of_the_rescaled_grid_is_extended(monkeypatch):
    # A grid whose widest width is too narrow for the table: the second
    # stage scores three wider ones, and keeps the best of all.
    from sklearn_kernelpool._selection import _large_results

    monkeypatch.setattr(_large_results, "WIDTH_STEPS", 1.2 ** np.arange(-12, -8))
    X, y = _data(1500, 13)
    reg = KernelAttentionRegressorCV(
        kernels=("gaussian",), degree=0, n_neighbors=None, **SMALL
    ).fit(X, y)
    assert not reg.per_feature_  # per_feature="auto" learns none on a large table
    widths = reg.cv_results_["param_bandwidth"]
    assert widths.size == 7
    np.testing.assert_allclose(widths[4:], widths[3] * 1.2 ** np.arange(1, 4))
    scores = reg.cv_results_["mean_test_score"]
    assert reg.bandwidth_ == widths[np.argmax(scores)] and reg.bandwidth_ > widths[3]


def test_a_random_state_reproduces_a_large_fit_and_another_draws_anew(large_fit):
    X, y, reg = large_fit
    again = clone(reg).fit(X, y)
    for key in ("mean_test_score", "param_bandwidth"):
        np.testing.assert_array_equal(again.cv_results_[key], reg.cv_results_[key])
    np.testing.assert_array_equal(again.predict(X[:40]), reg.predict(X[:40]))
    other = clone(reg).set_params(random_state=4).fit(X, y)
    assert not np.array_equal(
        other.subsample_results_["mean_test_score"],
        reg.subsample_results_["mean_test_score"],
    )


def test_the_selected_candidate_is_refitted_on_every_row(large_fit):
    X, y, reg = large_fit
    model = KernelAttentionRegressor(
        kernel=reg.kernel_,
        bandwidth=reg.bandwidth_,
        degree=reg.degree_,
        n_neighbors=reg.n_neighbors_,
    ).fit(X, y)
    Q = _data(50, 9)[0]
    np.testing.assert_array_equal(reg.predict(Q), model.predict(Q))
    assert reg.best_estimator_.n_features_in_ == 3
    assert reg.cv_results_["params"][reg.best_index_]["kernel"] == reg.kernel_


def test_auto_is_exact_up_to_the_threshold(monkeypatch):
    X, y = _data(300)
    monkeypatch.setattr(_large, "LARGE_TABLE_ROWS", 300)
    auto = KernelAttentionRegressorCV(random_state=0).fit(X, y)
    exact = KernelAttentionRegressorCV(subsample=None).fit(X, y)
    assert auto.subsample_ is None and auto.subsample_results_ is None
    np.testing.assert_array_equal(
        auto.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"]
    )
    assert set(auto.cv_results_["param_kernel"]) == {"gaussian"}
    monkeypatch.setattr(_large, "LARGE_TABLE_ROWS", 299)
    monkeypatch.setattr(_large, "SUBSAMPLE_ROWS", 150)
    assert KernelAttentionRegressorCV(random_state=0).fit(X, y).subsample_ == 150


def test_weights_zero_rows_are_never_drawn():
    X, y = _data(900)
    weights = np.ones(900)
    weights[::3] = 0.0
    reg = KernelAttentionRegressorCV(subsample=500, random_state=0)
    sub, held = _draw(900, 500, 0, weights)
    drawn = _large._draw(reg, 900, weights, y, 500)
    np.testing.assert_array_equal(drawn[0], sub)
    np.testing.assert_array_equal(drawn[1], held)
    assert np.all(weights[np.concatenate(drawn)] > 0)
    assert held.size == 100 and np.intersect1d(sub, held).size == 0


def test_weight_two_is_a_duplicated_row_in_the_held_out_scores():
    # The second stage's scores are refits on the other rows: a held-out row
    # of weight 2 counts twice in the mean squared error.
    X, y = _data(1200, 2)
    weights = np.ones(1200)
    weights[1::2] = 2.0
    reg = KernelAttentionRegressorCV(
        kernels=("gaussian",), degree=0, n_neighbors=None, **SMALL
    ).fit(X, y, sample_weight=weights)
    _, held = _draw(1200, 500, 3, weights)
    train = np.setdiff1d(np.arange(1200), held)
    h = reg.cv_results_["param_bandwidth"][0]
    model = KernelAttentionRegressor(bandwidth=h).fit(
        X[train], y[train], sample_weight=weights[train]
    )
    predicted = model.predict(X[held])
    twice = np.flatnonzero(weights[held] == 2)
    duplicated = r2_score(
        np.concatenate([y[held], y[held][twice]]),
        np.concatenate([predicted, predicted[twice]]),
    )
    np.testing.assert_allclose(
        reg.cv_results_["mean_test_score"][0], duplicated, rtol=1e-10
    )


@pytest.mark.parametrize(
    "gap, kept", [(0.9, "epanechnikov"), (1.1, "gaussian"), (-1.0, "epanechnikov")]
)
def test_a_compact_kernel_is_kept_within_one_standard_error(monkeypatch, gap, kept):
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(400)
    noise = (noise - noise.mean()) / noise.std(ddof=1)
    se = 1 / np.sqrt(400)
    base = rng.uniform(1, 2, 400)
    losses = iter([base, base + gap * se + noise])
    monkeypatch.setattr(_large, "row_losses", lambda *args: next(losses))
    finalists = [
        (KernelAttentionRegressorCV(kernels=(name,)), None, None)
        for name in ("gaussian", "epanechnikov")
    ]
    chosen = _large._prefer_compact(KernelAttentionRegressorCV(), finalists, None, None)
    assert finalists[chosen][0].kernels[0] == kept


def test_the_final_model_of_the_default_is_compact_where_it_scores_as_well():
    X, y = _data(1500, 5)
    reg = KernelAttentionRegressorCV(**SMALL, verbose=1)
    log = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(log):
        reg.fit(X, y)
    said = log.getvalue()
    assert "Large table: the exact search on a subsample of 500 of 1500 rows" in said
    first = reg.subsample_results_
    best = first["param_kernel"][np.argmax(first["mean_test_score"])]
    kernels = set(reg.cv_results_["param_kernel"])
    compared = "Held-out loss of kernel='epanechnikov' minus 'gaussian'" in said
    # The Gaussian selected on the subsample is compared with the best
    # compact kernel; a compact one is the only finalist.
    assert compared == (best == "gaussian")
    assert kernels == ({"gaussian", "epanechnikov"} if compared else {best})
    assert not compared or f"kept kernel={reg.kernel_!r}" in said


def test_the_progress_bar_counts_the_stages():
    pytest.importorskip("tqdm")
    X, y = _data(1000, 6)
    log = io.StringIO()
    with progress_bar(file=log):
        KernelAttentionRegressorCV(kernels=("gaussian",), **SMALL).fit(X, y)
    assert "3/3" in log.getvalue() and "stages" in log.getvalue()


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"per_feature": True}, "per_feature"),
        ({"scoring": "gcv"}, "scoring"),
        ({"algorithm": "binned"}, "binned"),
        ({"cv": [(np.arange(5), np.arange(5, 10))]}, "cv"),
    ],
)
def test_an_int_subsample_refuses_what_it_cannot_do(changes, named):
    X, y = _data(700)
    reg = KernelAttentionRegressorCV(subsample=500, **changes)
    with pytest.raises(ValueError, match=rf"subsample=500.*{named}"):
        reg.fit(X, y)


def test_auto_stays_exact_where_the_selection_cannot_stand_in(monkeypatch):
    X, y = _data(400)
    monkeypatch.setattr(_large, "LARGE_TABLE_ROWS", 100)
    reg = KernelAttentionRegressorCV(scoring="gcv", n_neighbors=None).fit(X, y)
    assert reg.subsample_ is None


@pytest.mark.parametrize("subsample", [499, 0, "all", 1.5])
def test_subsample_is_validated(subsample):
    X, y = _data(50)
    with pytest.raises(InvalidParameterError, match="subsample"):
        KernelAttentionRegressorCV(subsample=subsample).fit(X, y)


def test_the_classifier_draws_by_class_and_scores_the_log_loss():
    X, y = _data(1500, 7)
    labels = np.digitize(y, [-0.5, 0.7])
    clf = KernelAttentionClassifierCV(kernels=("gaussian",), **SMALL).fit(X, labels)
    sub, held = _large._draw(clf, 1500, None, labels, 500)
    for part in (sub, held):
        shares = np.bincount(labels[part], minlength=3) / part.size
        np.testing.assert_allclose(shares, np.bincount(labels) / 1500, atol=2e-3)
    train = np.setdiff1d(np.arange(1500), held)
    h = clf.cv_results_["param_bandwidth"][2]
    model = KernelAttentionClassifier(bandwidth=h).fit(X[train], labels[train])
    expected = log_loss(labels[held], model.predict_proba(X[held]), labels=[0, 1, 2])
    np.testing.assert_allclose(
        -clf.cv_results_["mean_test_score"][2], expected, rtol=1e-9
    )
    again = clone(clf).fit(X, labels)
    np.testing.assert_array_equal(
        again.predict_proba(X[:30]), clf.predict_proba(X[:30])
    )


def test_categorical_columns_keep_the_subsample_lambda():
    rng = np.random.default_rng(8)
    X, y = _data(1500, 8)
    level = rng.integers(0, 4, 1500)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["level"] = pd.Categorical(np.array(list("pqrs"))[level])
    y = y + 0.5 * level
    reg = KernelAttentionRegressorCV(
        kernels=("gaussian",),
        linear_features=None,
        categorical_features="from_dtype",
        **SMALL,
    ).fit(frame, y)
    assert reg.subsample_ == 500
    assert set(reg.cv_results_["param_categorical_bandwidth"]) == {
        reg.categorical_bandwidth_
    }
    lam = reg.subsample_results_["param_categorical_bandwidth"][
        np.argmax(reg.subsample_results_["mean_test_score"])
    ]
    assert reg.categorical_bandwidth_ == lam
    assert reg.score(frame, y) > 0.9


@pytest.mark.parametrize("n_neighbors", [None, 30])
def test_the_partially_linear_fit_takes_the_neighbour_lists(monkeypatch, n_neighbors):
    # On large tables the leave-one-out fits behind coef_ come from a tree's
    # neighbour lists for compact kernels: the same numbers as the dense pass.
    rng = np.random.default_rng(11)
    X, y = _data(700, 11)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    level = rng.integers(0, 3, 700)
    frame["level"] = pd.Categorical(np.array(list("pqr"))[level])
    y = y + 0.7 * level
    params = {
        "kernel": "epanechnikov",
        "bandwidth": 1.0 if n_neighbors else 0.6,
        "n_neighbors": n_neighbors,
        "degree": 1,
        "categorical_features": "from_dtype",
        "linear_features": "categorical",
    }
    from sklearn_kernelpool._estimator import _partially_linear

    name = "NeighbourAdaptiveHeldOut" if n_neighbors else "NeighbourHeldOut"
    built = []
    engine = getattr(_partially_linear, name)
    spy = type(
        name,
        (engine,),
        {
            "__init__": lambda self, *a, **k: (
                built.append(1),
                engine.__init__(self, *a, **k),
            )[1]
        },
    )
    monkeypatch.setattr(_partially_linear, name, spy)
    dense = KernelAttentionRegressor(**params).fit(frame, y)
    assert not built
    with neighbour_lists():
        lists = KernelAttentionRegressor(**params).fit(frame, y)
    assert built
    np.testing.assert_allclose(lists.coef_, dense.coef_, rtol=1e-10)
    np.testing.assert_allclose(lists.coef_se_, dense.coef_se_, rtol=1e-10)
    np.testing.assert_allclose(lists.predict(frame), dense.predict(frame), rtol=1e-10)


def test_a_partially_linear_model_scores_its_kernel_part_on_partial_residuals():
    rng = np.random.default_rng(12)
    X, y = _data(1500, 12)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    level = rng.integers(0, 4, 1500)
    frame["level"] = pd.Categorical(np.array(list("pqrs"))[level])
    y = y + 0.8 * level
    reg = KernelAttentionRegressorCV(categorical_features="from_dtype", **SMALL)
    reg.fit(frame, y)
    assert reg.linear_features_ == "categorical"
    # A compact kernel alone: its refit's leave-one-out fits take the lists.
    assert set(reg.cv_results_["param_kernel"]) == {"epanechnikov"}
    first = reg.subsample_results_
    sub, held = _draw(1500, 500, 3)
    with neighbour_lists(), without_quadratic_candidates():
        exact = KernelAttentionRegressorCV(
            kernels=("gaussian", "epanechnikov"),
            categorical_features="from_dtype",
            subsample=None,
        ).fit(frame.iloc[sub], y[sub])
    np.testing.assert_array_equal(
        first["mean_test_score"], exact.cv_results_["mean_test_score"]
    )
    # The second stage: the kernel part on y - Z coef_ - intercept_ of the
    # subsample's model, refitted without the held-out rows.
    best = exact.best_estimator_
    kernel_part = best.kernel_regressor_.predict(frame[["a", "b", "c"]])
    residuals = y - (best.predict(frame) - kernel_part)
    train = np.setdiff1d(np.arange(1500), held)
    params = reg.cv_results_["params"][0]
    part = KernelAttentionRegressor(
        kernel="epanechnikov",
        bandwidth=params["bandwidth"],
        n_neighbors=params.get("n_neighbors"),
        degree=reg.cv_results_["param_degree"][0],
    ).fit(X[train], residuals[train])
    r2 = r2_score(residuals[held], part.predict(X[held]))
    np.testing.assert_allclose(reg.cv_results_["mean_test_score"][0], r2, rtol=1e-9)
    # The selected kernel part, refitted as the partially linear model.
    model = KernelAttentionRegressor(
        kernel=reg.kernel_,
        bandwidth=reg.bandwidth_,
        n_neighbors=reg.n_neighbors_,
        degree=reg.degree_,
        categorical_features="from_dtype",
        linear_features="categorical",
    ).fit(frame, y)
    np.testing.assert_allclose(reg.predict(frame), model.predict(frame), rtol=1e-10)
    np.testing.assert_allclose(reg.best_estimator_.coef_, model.coef_, rtol=1e-10)
    assert reg.n_features_in_ == 4 and list(reg.feature_names_in_) == list(frame)


def test_auto_draws_a_smaller_subsample_of_a_table_with_categorical_features(
    monkeypatch,
):
    rng = np.random.default_rng(14)
    X, y = _data(700, 14)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["level"] = pd.Categorical(rng.choice(list("pq"), 700))
    monkeypatch.setattr(_large, "LARGE_TABLE_ROWS", 300)
    monkeypatch.setattr(_large, "SUBSAMPLE_ROWS", 400)
    monkeypatch.setattr(_large, "CATEGORICAL_SUBSAMPLE_ROWS", 250)
    params = {"kernels": ("gaussian",), "linear_features": None, "random_state": 0}
    reg = KernelAttentionRegressorCV(categorical_features="from_dtype", **params)
    assert reg.fit(frame, y).subsample_ == 250
    # A table without categorical features draws the usual subsample.
    assert KernelAttentionRegressorCV(**params).fit(X, y).subsample_ == 400


@pytest.mark.parametrize("n, rare", [(800, 1), (502, 3)])
def test_classes_too_rare_to_stratify_are_drawn_at_random(n, rare):
    # One row of a class, or fewer held-out rows than classes: the rows of
    # a regressor's draw.
    X, y = _data(n, 15)
    labels = (y > 0.3).astype(int)
    labels[:rare] = 2
    clf = KernelAttentionClassifierCV(kernels=("gaussian",), **SMALL)
    sub, held = _large._draw(clf, n, None, labels, 500)
    expected = _draw(n, 500, 3)
    np.testing.assert_array_equal(sub, expected[0])
    np.testing.assert_array_equal(held, expected[1])
    assert clf.fit(X, labels).subsample_ == 500


def test_the_memory_rule_sizes_the_sums_of_the_rows_a_split_holds(monkeypatch):
    # A split scores its test rows alone: the rule that refuses the sums of
    # every row past the physical memory sizes those of the test rows.
    from sklearn_kernelpool._held_out import _sums

    X, y = _data(2000, 16)
    held = np.arange(0, 2000, 20)
    train = np.setdiff1d(np.arange(2000), held)
    params = {"kernels": ("gaussian",), "bandwidths": 8, "degree": 1}
    params.update(n_neighbors=None, linear_features=None, per_feature=False)
    # Bytes per row: 8 widths, 16 columns of degree 1 in 3 features, three
    # copies of the sums on one thread.
    per_row = 8 * 8 * 16 * 3
    monkeypatch.setattr(_sums, "physical_memory", lambda: per_row * 1000)
    with pytest.raises(MemoryError):
        KernelAttentionRegressorCV(**params).fit(X, y)
    split = KernelAttentionRegressorCV(cv=[(train, held)], **params).fit(X, y)
    assert np.all(np.isfinite(split.cv_results_["mean_test_score"]))
