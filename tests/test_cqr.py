"""``prediction_interval(method="cqr")``: conformalized quantile regression,
against a direct implementation of the procedure, and its coverage and
adaptive widths by seeded simulation."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import KFold, ShuffleSplit

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionRegressor

LEVEL = 0.8


def _data(seed, n, noise=True):
    """Noise whose standard deviation grows 6-fold across x."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 1))
    sd = 0.1 * (1 + 5 * X[:, 0]) if noise else 0.1
    y = 0.5 * np.sin(2 * np.pi * X[:, 0]) + sd * rng.normal(size=n)
    return X, y


def _quantiles(params, X, y, queries, sample_weight=None):
    """The quantiles at (1 -+ LEVEL) / 2 of a model fitted on ``X, y``."""
    reg = KernelAttentionRegressor(**params).fit(X, y, sample_weight=sample_weight)
    q = reg.predict_quantiles(queries, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return q[:, 0], q[:, 1]


def _scores(low, high, y):
    return np.maximum(low - y, y - high)


def direct_split(params, X, y, queries, train, calibration):
    """Split CQR as the paper writes it."""
    low, high = _quantiles(params, X[train], y[train], X[calibration])
    E = sorted(_scores(low, high, y[calibration]))
    m = len(E)
    rank = math.ceil(LEVEL * (m + 1) - 1e-12)
    Q = E[rank - 1] if rank <= m else np.inf
    low, high = _quantiles(params, X[train], y[train], queries)
    return low - Q, high + Q


def direct_cross(params, X, y, queries, folds):
    """Cross-fitted CQR (CV+ with the CQR scores), one query at a time."""
    n = len(y)
    E = np.empty(n)
    fits = []
    fold_of = np.empty(n, dtype=int)
    for k, (train, test) in enumerate(folds):
        low, high = _quantiles(params, X[train], y[train], X[test])
        E[test] = _scores(low, high, y[test])
        fits.append(_quantiles(params, X[train], y[train], queries))
        fold_of[test] = k
    alpha = 1 - LEVEL
    rank_low = math.floor(alpha * (n + 1) + 1e-12)
    rank_high = math.ceil((1 - alpha) * (n + 1) - 1e-12)
    lower, upper = [], []
    for q in range(len(queries)):
        lows = sorted(fits[fold_of[i]][0][q] - E[i] for i in range(n))
        highs = sorted(fits[fold_of[i]][1][q] + E[i] for i in range(n))
        lower.append(lows[rank_low - 1] if rank_low >= 1 else -np.inf)
        upper.append(highs[rank_high - 1] if rank_high <= n else np.inf)
    return np.array(lower), np.array(upper)


@pytest.mark.parametrize(
    "params",
    [
        {"bandwidth": 0.1},
        {"kernel": "epanechnikov", "bandwidth": 0.2, "algorithm": "kd_tree"},
    ],
)
def test_split_cqr_equals_the_direct_procedure(params):
    X, y = _data(0, 61)
    queries = np.linspace(0, 1, 9)[:, None]
    reg = KernelAttentionRegressor(**params).fit(X, y)
    got = reg.prediction_interval(queries, level=LEVEL, method="cqr")
    # The documented default split: a random half of the rows calibrates.
    train, calibration = next(
        ShuffleSplit(n_splits=1, test_size=0.5, random_state=0).split(X)
    )
    expected = direct_split(params, X, y, queries, train, calibration)
    assert_allclose(got, expected, rtol=1e-12)
    splitter = ShuffleSplit(n_splits=1, test_size=0.3, random_state=4)
    train, calibration = next(splitter.split(X))
    got = reg.prediction_interval(queries, level=LEVEL, method="cqr", cv=splitter)
    assert_allclose(got, direct_split(params, X, y, queries, train, calibration))


def test_cross_fitted_cqr_equals_the_direct_procedure():
    X, y = _data(1, 40)
    queries = np.linspace(0, 1, 7)[:, None]
    params = {"bandwidth": 0.15}
    reg = KernelAttentionRegressor(**params).fit(X, y)
    cv = KFold(4, shuffle=True, random_state=0)
    got = reg.prediction_interval(queries, level=LEVEL, method="cqr", cv=cv)
    expected = direct_cross(params, X, y, queries, list(cv.split(X)))
    assert_allclose(got, expected, rtol=1e-12)
    # An int: contiguous folds, as for "cv+".
    got = reg.prediction_interval(queries, level=LEVEL, method="cqr", cv=4)
    expected = direct_cross(params, X, y, queries, list(KFold(4).split(X)))
    assert_allclose(got, expected, rtol=1e-12)


def test_rows_of_weight_zero_are_not_part_of_the_calibration():
    X, y = _data(2, 50)
    weights = np.ones(50)
    weights[::5] = 0.0
    queries = np.linspace(0, 1, 5)[:, None]
    reg = KernelAttentionRegressor(bandwidth=0.1).fit(X, y, sample_weight=weights)
    kept = weights > 0
    alone = KernelAttentionRegressor(bandwidth=0.1).fit(X[kept], y[kept])
    for cv in (None, 3):
        assert_array_equal(
            reg.prediction_interval(queries, method="cqr", cv=cv),
            alone.prediction_interval(queries, method="cqr", cv=cv),
        )


class _NoCalibration:
    """A splitter of one split that leaves no row to calibrate."""

    def split(self, X, y=None, groups=None):
        yield np.arange(len(X)), np.arange(0)

    def get_n_splits(self, X=None, y=None, groups=None):
        return 1


def test_cqr_refusals_and_fallbacks():
    X, y = _data(3, 40)
    reg = KernelAttentionRegressor(bandwidth=0.1, degree=1).fit(X, y)
    with pytest.raises(ValueError, match="degree=0"):
        reg.prediction_interval(X[:2], method="cqr")
    reg.set_params(degree=0).fit(X, y)
    for cv, match in (
        (1, "cv must be an int in"),
        ("five", "cv must be None"),
        (_NoCalibration(), "non-empty"),
    ):
        with pytest.raises(ValueError, match=match):
            reg.prediction_interval(X[:2], method="cqr", cv=cv)
    # Refitted, adaptive widths are taken.
    reg.set_params(n_neighbors=8).fit(X, y)
    lower, upper = reg.prediction_interval(X[:3], method="cqr")
    assert np.all(lower <= upper)
    # A query without keys under on_empty="nan" has no interval.
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.2, on_empty="nan")
    reg.fit(X, y)
    for cv in (None, 3):
        with pytest.warns(EmptyNeighborhoodWarning):
            lower, upper = reg.prediction_interval([[0.5], [9.0]], method="cqr", cv=cv)
        assert np.isfinite(lower[0]) and np.isnan(lower[1]) and np.isnan(upper[1])


def _simulate(n_reps, n=400, n_fresh=100, cv=None, seed=0):
    """Coverage of fresh points per repetition, and the mean widths in the
    calmest and the noisiest fifths of x."""
    covered, calm, noisy = [], [], []
    grid = np.linspace(0, 1, 30)[:, None]
    for rep in range(n_reps):
        X, y = _data(seed + rep, n)
        Xf, yf = _data(10_000 + seed + rep, n_fresh)
        reg = KernelAttentionRegressor(bandwidth=0.05).fit(X, y)
        lower, upper = reg.prediction_interval(Xf, level=LEVEL, method="cqr", cv=cv)
        covered.append(np.mean((lower <= yf) & (yf <= upper)))
        lower, upper = reg.prediction_interval(grid, level=LEVEL, method="cqr", cv=cv)
        calm.append(np.mean((upper - lower)[:6]))
        noisy.append(np.mean((upper - lower)[-6:]))
    covered = np.asarray(covered)
    return covered.mean(), covered.std(ddof=1) / np.sqrt(n_reps), calm, noisy


def _check_simulation(n_reps, cv):
    mean, se, calm, noisy = _simulate(n_reps, cv=cv)
    # Split CQR covers at least LEVEL in expectation; the cross fit in
    # practice. Bound: 3 Monte-Carlo standard errors.
    assert mean >= LEVEL - 3 * se, (mean, se)
    assert mean <= LEVEL + 0.05
    # The noise grows 6-fold across x, 3.7-fold from the calmest fifth to
    # the noisiest: so do the widths.
    assert np.mean(noisy) >= 3 * np.mean(calm)


@pytest.mark.parametrize("cv", [None, 5])
def test_coverage_and_adaptive_widths_quick(cv):
    _check_simulation(25, cv)


@pytest.mark.slow
@pytest.mark.parametrize("cv", [None, 5])
def test_coverage_and_adaptive_widths(cv):
    _check_simulation(300, cv)


def test_jackknife_widths_do_not_follow_the_noise():
    X, y = _data(5, 400)
    grid = np.linspace(0, 1, 30)[:, None]
    reg = KernelAttentionRegressor(bandwidth=0.05).fit(X, y)
    lower, upper = reg.prediction_interval(grid, level=LEVEL)
    width = upper - lower
    assert np.mean(width[-6:]) < 1.5 * np.mean(width[:6])
    lower, upper = reg.prediction_interval(grid, level=LEVEL, method="cqr")
    width = upper - lower
    assert np.mean(width[-6:]) >= 3 * np.mean(width[:6])


def test_cqr_names_the_refit_that_n_neighbors_exceeds():
    X, y = _data(6, 30)
    params = {"kernel": "epanechnikov", "bandwidth": 1.0, "n_neighbors": 20}
    reg = KernelAttentionRegressor(**params).fit(X, y)
    queries = np.linspace(0, 1, 5)[:, None]
    split = (
        r"training part of its split, 15 of the 30 training rows \(the other "
        r"15 calibrate\): n_neighbors=20 exceeds them\. Use n_neighbors <= 15, "
        r"or cv=ShuffleSplit\(n_splits=1, test_size=10, random_state=0\) .* or cv=3"
    )
    with pytest.raises(ValueError, match=split):
        reg.prediction_interval(queries, level=LEVEL, method="cqr")
    with pytest.raises(ValueError, match="without the largest fold.*<= 15"):
        reg.prediction_interval(queries, level=LEVEL, method="cqr", cv=2)
    # Rows of weight zero are not counted, and the message says so.
    weights = np.ones(30)
    weights[:4] = 0.0
    reg.fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match="13 of the 26 training rows of positive"):
        reg.prediction_interval(queries, level=LEVEL, method="cqr")
    # The cv that the message suggests gives the direct procedure's interval.
    reg.fit(X, y)
    splitter = ShuffleSplit(n_splits=1, test_size=10, random_state=0)
    got = reg.prediction_interval(queries, level=LEVEL, method="cqr", cv=splitter)
    train, calibration = next(splitter.split(X))
    expected = direct_split(params, X, y, queries, train, calibration)
    assert_allclose(got, expected, rtol=1e-12)
    got = reg.prediction_interval(queries, level=LEVEL, method="cqr", cv=3)
    expected = direct_cross(params, X, y, queries, list(KFold(3).split(X)))
    assert_allclose(got, expected, rtol=1e-12)
