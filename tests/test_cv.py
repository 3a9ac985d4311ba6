"""KernelAttentionRegressorCV against refitting, GridSearchCV and the formulas."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import clone
from sklearn.metrics import get_scorer, mean_absolute_error, r2_score
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    LeaveOneOut,
    ShuffleSplit,
    TimeSeriesSplit,
)

from sklearn_kernelpool import (
    BandwidthEdgeWarning,
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._search._grid import bandwidth_grid
from sklearn_kernelpool._search._scores import _r2_scores
from sklearn_kernelpool._widths._learning import loo_loss
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted({kernel.name for kernel in KERNELS.values()})
LOG_FORM = [name for name in CANONICAL if KERNELS[name].log_function is not None]
# From a width at which the nearest other point is 60 bandwidths away (the
# gaussian's weights underflow, compact neighbourhoods are empty) to wide.
BANDWIDTHS = [0.004, 0.15, 0.6]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(36, 2))
    X[5] = X[4]  # a duplicated key
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=36)
    w = rng.integers(0, 4, size=36).astype(float)
    w[:3] = [0.0, 0.5, 2.5]
    return X, y, w


def refit_held_out(X, y, splits, kernel, bandwidth, sample_weight, on_empty):
    """Held-out predictions by refitting without the held-out points."""
    Y = y.reshape(len(X), -1)
    predictions = np.full((len(X), Y.shape[1]), np.nan)
    empty = np.zeros(len(X), dtype=bool)
    for train, test in splits:
        w = None if sample_weight is None else sample_weight[train]
        reg = KernelAttentionRegressor(
            kernel=kernel, bandwidth=bandwidth, on_empty=on_empty
        ).fit(X[train], Y[train], sample_weight=w)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", EmptyNeighborhoodWarning)
            predictions[test] = reg.predict(X[test])
        empty[test] = bool(caught)
    return predictions, empty


def loo_splits(n):
    return [(np.delete(np.arange(n), i), np.array([i])) for i in range(n)]


# -- leave-one-out -----------------------------------------------------------
@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("weighted", [False, True])
def test_loo_matches_refitting_without_each_point(data, kernel, weighted):
    X, y, w = data
    sample_weight = w if weighted else None
    on_empty = "mean" if kernel == "cosine" else "nearest"
    reg = KernelAttentionRegressorCV(
        kernels=kernel,
        bandwidths=BANDWIDTHS,
        on_empty=on_empty,
        degree=0,
        n_neighbors=None,
    ).fit(X, y, sample_weight=sample_weight)
    weights = np.ones(len(X)) if w is None or not weighted else w
    for c, h in enumerate(BANDWIDTHS):
        pred, empty = refit_held_out(
            X, y, loo_splits(len(X)), kernel, h, sample_weight, on_empty
        )
        mse = np.average((pred[:, 0] - y) ** 2, weights=weights)
        assert_allclose(reg.cv_results_["loo_mse"][c], mse, rtol=1e-10)
        assert_allclose(reg.cv_results_["mean_test_score"][c], -mse, rtol=1e-10)
        assert reg.cv_results_["empty_fraction"][c] == pytest.approx(empty.mean())
    if KERNELS[kernel].is_compact:
        # The narrowest width leaves every point without another key but the
        # duplicated pair.
        assert reg.cv_results_["empty_fraction"][0] == pytest.approx(1 - 2 / 36)


def test_loo_multi_output_and_custom_scoring(data):
    X, y, w = data
    Y = np.column_stack([y, np.cos(3 * X[:, 1])])
    reg = KernelAttentionRegressorCV(
        kernels=("gaussian", "biweight"),
        bandwidths=BANDWIDTHS[1:],
        scoring="r2",
        degree=0,
        n_neighbors=None,
    ).fit(X, Y, sample_weight=w)
    for params, score in zip(
        reg.cv_results_["params"], reg.cv_results_["mean_test_score"], strict=True
    ):
        pred, _ = refit_held_out(
            X,
            Y,
            loo_splits(len(X)),
            params["kernel"],
            params["bandwidth"],
            w,
            "nearest",
        )
        # A scorer scores the n leave-one-out predictions together.
        assert_allclose(score, r2_score(Y, pred, sample_weight=w), rtol=1e-10)
        mse = np.average(np.mean((pred - Y) ** 2, axis=1), weights=w)
        index = reg.cv_results_["params"].index(params)
        assert_allclose(reg.cv_results_["loo_mse"][index], mse, rtol=1e-10)


def test_loo_equals_grid_search_with_leave_one_out(data):
    X, y, _ = data
    grid = {"kernel": ["gaussian", "epanechnikov"], "bandwidth": [0.15, 0.6]}
    search = GridSearchCV(
        KernelAttentionRegressor(),
        grid,
        cv=LeaveOneOut(),
        scoring="neg_mean_squared_error",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        search.fit(X, y)
    reg = KernelAttentionRegressorCV(
        grid["kernel"], grid["bandwidth"], degree=0, n_neighbors=None
    ).fit(X, y)
    assert reg.cv_results_["params"] == search.cv_results_["params"]
    assert_allclose(
        reg.cv_results_["mean_test_score"],
        search.cv_results_["mean_test_score"],
        rtol=1e-10,
    )
    assert_array_equal(
        reg.cv_results_["rank_test_score"], search.cv_results_["rank_test_score"]
    )
    assert reg.best_params_ == search.best_params_
    assert reg.kernel_ == search.best_params_["kernel"]
    assert reg.bandwidth_ == search.best_params_["bandwidth"]


@pytest.mark.parametrize("on_empty", ["nan", "raise"])
def test_candidates_with_empty_neighbourhoods_are_not_eligible(data, on_empty):
    X, y, _ = data
    reg = KernelAttentionRegressorCV(
        "boxcar", bandwidths=BANDWIDTHS, on_empty=on_empty, degree=0, n_neighbors=None
    ).fit(X, y)
    scores = reg.cv_results_["mean_test_score"]
    assert np.isnan(scores[0]) and np.isnan(reg.cv_results_["loo_mse"][0])
    ranks = reg.cv_results_["rank_test_score"]
    assert ranks[0] == ranks.max() > ranks[reg.best_index_]
    assert np.isfinite(scores[reg.best_index_])
    with pytest.raises(ValueError, match="No candidate could be scored"):
        KernelAttentionRegressorCV(
            "boxcar", [0.004], on_empty=on_empty, degree=0, n_neighbors=None
        ).fit(X, y)


def test_underflowing_rows_are_recomputed(data):
    # At h = 0.004 the weights of most rows underflow without a shift.
    X, y, w = data
    reg = KernelAttentionRegressorCV("gaussian", [0.004]).fit(X, y, sample_weight=w)
    pred, _ = refit_held_out(X, y, loo_splits(len(X)), "gaussian", 0.004, w, "raise")
    assert np.all(np.isfinite(pred))
    mse = np.average((pred[:, 0] - y) ** 2, weights=w)
    assert_allclose(reg.cv_results_["loo_mse"][0], mse, rtol=1e-10)


# -- K-fold ----------------------------------------------------------------
@pytest.mark.parametrize(
    "cv",
    [
        3,
        KFold(4, shuffle=True, random_state=0),
        ShuffleSplit(3, test_size=0.3, random_state=0),
        TimeSeriesSplit(3),
    ],
)
@pytest.mark.parametrize("scoring", [None, "neg_mean_absolute_error"])
def test_kfold_equals_grid_search(data, cv, scoring):
    X, y, _ = data
    grid = {"kernel": ["gaussian", "tricube"], "bandwidth": [0.004, 0.15, 0.6]}
    search = GridSearchCV(KernelAttentionRegressor(), grid, cv=cv, scoring=scoring)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        search.fit(X, y)
    reg = KernelAttentionRegressorCV(
        grid["kernel"],
        grid["bandwidth"],
        cv=cv,
        scoring=scoring,
        degree=0,
        n_neighbors=None,
        per_feature=False,
    ).fit(X, y)
    assert reg.cv_results_["params"] == search.cv_results_["params"]
    for key in ["mean_test_score", "std_test_score", "split0_test_score"]:
        assert_allclose(reg.cv_results_[key], search.cv_results_[key], rtol=1e-10)
    assert_array_equal(
        reg.cv_results_["rank_test_score"], search.cv_results_["rank_test_score"]
    )
    assert reg.best_params_ == search.best_params_
    assert_allclose(reg.predict(X), search.predict(X), rtol=1e-12)
    # The narrowest tricube leaves held-out points without a key.
    tricube = reg.cv_results_["param_kernel"] == "tricube"
    assert reg.cv_results_["empty_fraction"][tricube][0] > 0.9


@pytest.mark.parametrize("cv", [KFold(3), ShuffleSplit(3, random_state=0)])
@pytest.mark.parametrize("on_empty, scoring", [("nearest", None), ("mean", "r2")])
def test_weighted_kfold_matches_refitting(data, cv, on_empty, scoring):
    X, y, w = data
    kernels, bandwidths = ["gaussian", "epanechikov"], [0.15, 0.6]
    reg = KernelAttentionRegressorCV(
        kernels,
        bandwidths,
        cv=cv,
        scoring=scoring,
        on_empty=on_empty,
        degree=0,
        n_neighbors=None,
    ).fit(X, y, sample_weight=w)
    splits = list(cv.split(X))
    for c, params in enumerate(reg.cv_results_["params"]):
        scores = []
        for s, (train, test) in enumerate(splits):
            pred, _ = refit_held_out(
                X,
                y,
                [(train, test)],
                params["kernel"],
                params["bandwidth"],
                w,
                on_empty,
            )
            scores.append(r2_score(y[test], pred[test, 0], sample_weight=w[test]))
            assert_allclose(
                reg.cv_results_[f"split{s}_test_score"][c], scores[-1], rtol=1e-10
            )
        assert_allclose(reg.cv_results_["mean_test_score"][c], np.mean(scores))


def test_r2_of_every_candidate_matches_r2_score():
    rng = np.random.default_rng(4)
    Y = rng.normal(size=(9, 2))
    Y[:, 1] = 3.0  # an output without variance
    predictions = Y + rng.normal(size=(4, 9, 2))
    predictions[0, :, 1] = 3.0  # predicted exactly
    w = rng.uniform(0, 2, size=9)
    for weights in (None, w):
        expected = [r2_score(Y, p, sample_weight=weights) for p in predictions]
        assert_allclose(_r2_scores(Y, predictions, weights), expected, rtol=1e-12)


def test_callable_scoring(data):
    X, y, w = data

    def neg_mae(estimator, X, y, sample_weight=None):
        return -mean_absolute_error(
            y, estimator.predict(X), sample_weight=sample_weight
        )

    reg = KernelAttentionRegressorCV(bandwidths=[0.15, 0.6], cv=3, scoring=neg_mae)
    fitted = reg.fit(X, y, sample_weight=w)
    named = clone(reg).set_params(scoring="neg_mean_absolute_error")
    named.fit(X, y, sample_weight=w)
    assert_allclose(
        fitted.cv_results_["mean_test_score"], named.cv_results_["mean_test_score"]
    )
    with pytest.raises(ValueError, match="must accept a sample_weight"):
        reg.set_params(scoring=lambda est, X, y: 0.0).fit(X, y, sample_weight=w)


# -- local-linear candidates (degree=1) -------------------------------------------
def refit_local_linear(X, Y, splits, kernel, bandwidth, sample_weight, on_empty):
    """Held-out local-linear predictions by refitting, with the empty and
    singular-design fallbacks read from the estimator's warnings."""
    predictions = np.full((len(X), Y.shape[1]), np.nan)
    empty = np.zeros(len(X), dtype=bool)
    singular = np.zeros(len(X), dtype=bool)
    for train, test in splits:
        w = None if sample_weight is None else sample_weight[train]
        reg = KernelAttentionRegressor(
            kernel=kernel, bandwidth=bandwidth, degree=1, on_empty=on_empty
        ).fit(X[train], Y[train], sample_weight=w)
        for i in test:  # one query at a time: a warning is that query's
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                predictions[i] = reg.predict(X[i : i + 1])[0]
            kinds = {warning.category for warning in caught}
            empty[i] = EmptyNeighborhoodWarning in kinds
            # The warning also tells of slopes shrunk by the safeguard.
            singular[i] = any(
                warning.category is LocalLinearFallbackWarning
                and warning.message.n_singular
                for warning in caught
            )
    return predictions, empty, singular


# At these widths every local design of the fixture is either singular
# (exactly: too few keys in a compact support) or well conditioned, so the
# held-out fits and the refits agree to rounding. Narrower widths give
# nearly singular designs (weights over tens of orders of magnitude), where
# both computations are accurate only to the design's conditioning.
LOCAL_LINEAR_BANDWIDTHS = [0.3, 0.6]


@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("weighted", [False, True])
def test_local_linear_loo_matches_refitting(data, kernel, weighted):
    X, y, w = data
    sample_weight = w if weighted else None
    weights = w if weighted else np.ones(len(X))
    Y = np.column_stack([y, np.cos(3 * X[:, 1])]) if weighted else y[:, None]
    target = Y if weighted else y
    reg = KernelAttentionRegressorCV(
        kernels=kernel, bandwidths=LOCAL_LINEAR_BANDWIDTHS, degree=1
    ).fit(X, target, sample_weight=sample_weight)
    assert reg.best_estimator_.degree == 1
    for c, h in enumerate(LOCAL_LINEAR_BANDWIDTHS):
        pred, empty, singular = refit_local_linear(
            X, Y, loo_splits(len(X)), kernel, h, sample_weight, "nearest"
        )
        mse = np.average(np.mean((pred - Y) ** 2, axis=1), weights=weights)
        assert_allclose(reg.cv_results_["loo_mse"][c], mse, rtol=1e-10)
        assert_allclose(reg.cv_results_["mean_test_score"][c], -mse, rtol=1e-10)
        assert reg.cv_results_["empty_fraction"][c] == pytest.approx(empty.mean())
        fraction = reg.cv_results_["singular_fraction"][c]
        assert fraction == pytest.approx(singular.mean())
    if KERNELS[kernel].is_compact:
        # The narrower support leaves some points with too few neighbours.
        assert reg.cv_results_["singular_fraction"][0] > 0


def test_local_linear_underflowing_rows_are_recomputed(data):
    # At h = 0.004 the weights of most rows underflow without a shift, and
    # the shifted ones are carried by the nearest other key (a design of
    # rank 0, which gets that key's value) or by it and a second key of far
    # smaller weight (rank 1: the line through the two).
    X, y, w = data
    reg = KernelAttentionRegressorCV("gaussian", [0.004], degree=1)
    reg.fit(X, y, sample_weight=w)
    pred, _, singular = refit_local_linear(
        X, y[:, None], loo_splits(len(X)), "gaussian", 0.004, w, "raise"
    )
    assert np.all(np.isfinite(pred)) and np.mean(singular) > 0.5
    assert reg.cv_results_["singular_fraction"][0] == pytest.approx(singular.mean())
    deficient = reg.cv_results_["rank_deficient_fraction"][0]
    assert deficient == pytest.approx(1.0 - singular.mean())
    mse = np.average((pred[:, 0] - y) ** 2, weights=w)
    assert_allclose(reg.cv_results_["loo_mse"][0], mse, rtol=1e-10)


def test_local_linear_loo_formula_on_a_line():
    # Ten points on a line, y = 2x, a boxcar of radius 1.5: an inner point's
    # fit holds its two neighbours and is exact; an end point's holds one
    # key, a singular design, and gets that key's value, 2 away. At radius
    # 2.5 an end point's fit holds the next two keys, of local mean 1.5 and
    # spread 0.5 from it: 3 local standard deviations away from a line of
    # n_eff = 2 keys, a leverage (1 + 3**2) / 2 = 5 above one, its slope is
    # shrunk by s = exp(-(sqrt(5) - 1)**2 / 2), and it gets 3 - 3 s, not 0
    # (an inner point's leverage is 1 / 2).
    X = np.arange(10.0)[:, None]
    s = np.exp(-((np.sqrt(5) - 1) ** 2) / 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning while scoring
        warnings.simplefilter("ignore", BandwidthEdgeWarning)  # a small grid
        reg = KernelAttentionRegressorCV(
            "boxcar", [1.5, 2.5], degree=1, n_neighbors=None
        ).fit(X, 2 * X[:, 0])
    assert reg.cv_results_["singular_fraction"].tolist() == [0.2, 0.0]
    assert reg.cv_results_["shrunk_fraction"].tolist() == [0.0, 0.2]
    assert reg.cv_results_["empty_fraction"].tolist() == [0.0, 0.0]
    expected = [2 * 4 / 10, 2 * (3 - 3 * s) ** 2 / 10]
    assert_allclose(reg.cv_results_["loo_mse"], expected, rtol=1e-12, atol=1e-24)
    assert reg.bandwidth_ == 2.5
    # Without the fallback the local mean is the rule: degree 0 at h = 1.5
    # predicts the mean of the two neighbours, exact inside, 2 off at the ends.
    zero = KernelAttentionRegressorCV("boxcar", [1.5], degree=0, n_neighbors=None).fit(
        X, 2 * X[:, 0]
    )
    assert_allclose(zero.cv_results_["loo_mse"], [2 * 4 / 10], rtol=1e-14)
    assert "singular_fraction" not in zero.cv_results_


@pytest.mark.parametrize("cv", [3, ShuffleSplit(3, test_size=0.3, random_state=0)])
@pytest.mark.parametrize("scoring", [None, "neg_mean_absolute_error"])
def test_local_linear_kfold_equals_grid_search(data, cv, scoring):
    X, y, _ = data
    grid = {"kernel": ["gaussian", "tricube"], "bandwidth": LOCAL_LINEAR_BANDWIDTHS}
    search = GridSearchCV(
        KernelAttentionRegressor(degree=1), grid, cv=cv, scoring=scoring
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        search.fit(X, y)
    reg = KernelAttentionRegressorCV(
        grid["kernel"],
        grid["bandwidth"],
        cv=cv,
        scoring=scoring,
        degree=1,
        n_neighbors=None,
    ).fit(X, y)
    assert reg.cv_results_["params"] == search.cv_results_["params"]
    for key in ["mean_test_score", "std_test_score", "split0_test_score"]:
        assert_allclose(reg.cv_results_[key], search.cv_results_[key], rtol=1e-10)
    assert_array_equal(
        reg.cv_results_["rank_test_score"], search.cv_results_["rank_test_score"]
    )
    assert reg.best_params_ == search.best_params_
    assert reg.best_estimator_.degree == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        assert_allclose(reg.predict(X), search.predict(X), rtol=1e-12)
    # The narrower tricube leaves some held-out points too few keys.
    tricube = reg.cv_results_["param_kernel"] == "tricube"
    assert reg.cv_results_["singular_fraction"][tricube][0] > 0


@pytest.mark.parametrize(
    "cv",
    [KFold(4, shuffle=True, random_state=1), ShuffleSplit(3, random_state=0)],
)
def test_local_linear_weighted_kfold_matches_refitting(data, cv):
    X, y, w = data
    Y = np.column_stack([y, np.cos(3 * X[:, 1])])
    reg = KernelAttentionRegressorCV(
        ["epanechnikov", "cauchy"],
        LOCAL_LINEAR_BANDWIDTHS,
        cv=cv,
        degree=1,
        n_neighbors=None,
    ).fit(X, Y, sample_weight=w)
    splits = list(cv.split(X))
    for c, params in enumerate(reg.cv_results_["params"]):
        for s, (train, test) in enumerate(splits):
            pred, _, _ = refit_local_linear(
                X,
                Y,
                [(train, test)],
                params["kernel"],
                params["bandwidth"],
                w,
                "nearest",
            )
            expected = r2_score(Y[test], pred[test], sample_weight=w[test])
            assert_allclose(
                reg.cv_results_[f"split{s}_test_score"][c], expected, rtol=1e-10
            )


def test_local_linear_selection_removes_the_boundary_bias():
    # A steep linear trend: local-constant pooling is biased near the ends of
    # the data by about the slope times the bandwidth, which forces narrow,
    # noisy widths on it; local-linear fits are exact for linear functions.
    errors = {0: [], 1: []}
    for seed in range(6):
        rng = np.random.default_rng(seed)
        X = rng.uniform(0, 1, size=(50, 1))
        y = 10 * X[:, 0] + 0.5 * rng.normal(size=50)
        loo_mse = {}
        for degree in (0, 1):
            reg = KernelAttentionRegressorCV(bandwidths=15, degree=degree)
            reg.fit(X, y)
            loo_mse[degree] = reg.cv_results_["loo_mse"][reg.best_index_]
            assert reg.best_score_ == -loo_mse[degree]
            ends = reg.predict([[0.0], [1.0]])
            errors[degree].extend(np.abs(ends - [0.0, 10.0]))
        assert loo_mse[1] < 0.95 * loo_mse[0]
        # Degree 1 leaves little more than the noise variance, 0.25.
        assert loo_mse[1] < 1.25 * 0.5**2
    # At the ends of the data, the selected degree-1 fits are closer to the
    # trend on average.
    assert np.mean(errors[1]) < 0.5 * np.mean(errors[0])


# -- per-feature widths ---------------------------------------------------------
def slow_loo_loss(widths, X, Y, w, kernel):
    pred, _ = refit_held_out(X, Y, loo_splits(len(X)), kernel, widths, w, "raise")
    return np.average(np.mean((pred - Y.reshape(len(X), -1)) ** 2, axis=1), weights=w)


@pytest.mark.parametrize("kernel", LOG_FORM)
def test_loo_loss_and_gradient(data, kernel):
    X, y, w = data
    X = np.column_stack([X, X[:, 0] * X[:, 1]])
    Y = np.column_stack([y, X[:, 1]])
    theta = np.log([0.2, 0.35, 0.5])
    loss, grad, _ = loo_loss(theta, X, Y, w, KERNELS[kernel])
    assert_allclose(loss, slow_loo_loss(np.exp(theta), X, Y, w, kernel), rtol=1e-10)
    step = 1e-6
    for f in range(3):
        up, down = theta.copy(), theta.copy()
        up[f] += step
        down[f] -= step
        numeric = (
            loo_loss(up, X, Y, w, KERNELS[kernel], gradient=False)[0]
            - loo_loss(down, X, Y, w, KERNELS[kernel], gradient=False)[0]
        ) / (2 * step)
        assert_allclose(grad[f], numeric, rtol=1e-5, atol=1e-9)


def test_irrelevant_feature_gets_a_large_width():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(150, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=150)
    reg = KernelAttentionRegressorCV(
        bandwidths=10, per_feature=True, degree=0, n_neighbors=None
    ).fit(X, y)
    widths = reg.bandwidth_
    assert widths.shape == (2,)
    assert np.all(np.isfinite(widths) & (widths > 0))
    assert widths[1] >= 10 * widths[0]
    assert reg.n_iter_ > 0
    assert reg.best_estimator_.bandwidth_.tolist() == widths.tolist()
    # best_score_ is the leave-one-out error of the learned widths, lower than
    # the isotropic one.
    loo = slow_loo_loss(widths, X, y, np.ones(150), "gaussian")
    assert_allclose(reg.best_score_, -loo, rtol=1e-10)
    assert loo < reg.cv_results_["loo_mse"][reg.best_index_]


def test_per_feature_widths_stay_in_bounds_on_degenerate_data():
    # A constant feature and a feature that copies y: nothing may go to zero.
    rng = np.random.default_rng(2)
    x = rng.normal(size=60)
    X = np.column_stack([x, np.ones(60), np.arange(60.0)])
    reg = KernelAttentionRegressorCV(bandwidths=8, per_feature=True).fit(X, x)
    widths = reg.bandwidth_
    spread = np.array([x.std(), 1.0, np.arange(60.0).std()])
    assert np.all(widths >= spread * 1e-3 * (1 - 1e-12))
    assert np.all(widths <= spread * 1e3 * (1 + 1e-12))
    assert np.all(np.isfinite(reg.predict(X)))


# -- the grid, the API ---------------------------------------------------------
def test_automatic_grid(data):
    X, y, w = data
    distinct = np.unique(X[w > 0], axis=0)
    nearest = [
        min(np.linalg.norm(a - b) for j, b in enumerate(distinct) if j != i)
        for i, a in enumerate(distinct)
    ]
    points = X[w > 0]
    radius = 2 * max(np.linalg.norm(p - points.mean(axis=0)) for p in points)
    expected = np.geomspace(np.median(nearest), radius, 7)
    assert_allclose(bandwidth_grid(points, 7), expected, rtol=1e-12)
    reg = KernelAttentionRegressorCV(bandwidths=7, degree=0, n_neighbors=None).fit(
        X, y, sample_weight=w
    )
    # The grid, extended past its edge where the best candidate lay there.
    scored = reg.cv_results_["param_bandwidth"]
    start = int(np.argmin(np.abs(scored - expected[0])))
    assert_allclose(scored[start : start + 7], expected, rtol=1e-12)
    assert_allclose(bandwidth_grid(np.ones((4, 2)), 3), [1.0, 1.0, 1.0])


def test_predict_score_clone_pickle(data):
    X, y, w = data
    reg = KernelAttentionRegressorCV(("gaussian", "cauchy"), 6, per_feature=False)
    reg.fit(X, y)
    assert isinstance(reg.best_estimator_, KernelAttentionRegressor)
    assert reg.best_estimator_.kernel == reg.kernel_
    assert_array_equal(reg.predict(X), reg.best_estimator_.predict(X))
    assert reg.score(X, y) == pytest.approx(r2_score(y, reg.predict(X)))
    assert reg.best_score_ == reg.cv_results_["mean_test_score"].max()
    assert get_scorer("r2")(reg, X, y) == reg.score(X, y)
    unfitted = clone(reg)
    assert not hasattr(unfitted, "cv_results_")
    assert unfitted.get_params() == reg.get_params()
    restored = pickle.loads(pickle.dumps(reg))
    assert_array_equal(restored.predict(X), reg.predict(X))


@pytest.mark.parametrize("degree", [0, 1])
def test_threads_give_the_same_scores(degree):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(700, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=700)
    reg = KernelAttentionRegressorCV(("gaussian", "biweight"), 5, degree=degree)
    one = clone(reg).fit(X, y)
    two = clone(reg).set_params(n_jobs=2).fit(X, y)
    # Threads add their parts of the sums in another order. A local-linear
    # fit multiplies that rounding by its design's conditioning, about 1e3 at
    # the narrowest gaussian width here.
    assert_allclose(
        one.cv_results_["mean_test_score"],
        two.cv_results_["mean_test_score"],
        rtol=1e-12 if degree == 0 else 1e-10,
    )


@pytest.mark.parametrize(
    "params, match",
    [
        ({"bandwidths": [0.5, -1.0]}, "finite float > 0"),
        ({"bandwidths": [0.5, np.nan]}, "finite float > 0"),
        ({"bandwidths": []}, "non-empty 1-D"),
        ({"bandwidths": [[0.5, 1.0]]}, "non-empty 1-D"),
        ({"bandwidths": ["a", "b"]}, "non-empty 1-D"),
        ({"kernels": ["gaussian", "gausian"]}, "kernel names"),
        ({"kernels": []}, "kernel names"),
        ({"kernels": "boxcar", "per_feature": True}, "log form"),
        ({"per_feature": True, "cv": 3}, "needs cv=None"),
    ],
)
def test_invalid_parameters(data, params, match):
    X, y, _ = data
    with pytest.raises(ValueError, match=match):
        KernelAttentionRegressorCV(**params).fit(X, y)


def test_invalid_parameter_types(data):
    X, y, _ = data
    for params in (
        {"bandwidths": 0},
        {"cv": 1},
        {"on_empty": "zero"},
        {"degree": 3},
        {"degree": 0.5},
    ):
        with pytest.raises(ValueError, match="parameter of KernelAttentionRegressor"):
            KernelAttentionRegressorCV(**params).fit(X, y)


def test_invalid_weights(data):
    X, y, _ = data
    one = np.zeros(len(X))
    one[0] = 1.0
    with pytest.raises(ValueError, match="at least two samples of positive weight"):
        KernelAttentionRegressorCV().fit(X, y, sample_weight=one)
    w = np.ones(len(X))
    w[:24] = 0.0
    with pytest.raises(ValueError, match="no training sample of positive weight"):
        KernelAttentionRegressorCV(cv=KFold(3)).fit(X, y, sample_weight=w)
