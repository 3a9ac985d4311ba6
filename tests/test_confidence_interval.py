"""confidence_interval: asymptotic, wild bootstrap percentile-t and sup-t bands."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import norm
from sklearn import config_context
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import KernelAttentionRegressor


@pytest.fixture
def fitted():
    rng = np.random.RandomState(0)
    X = rng.uniform(0, 1, (120, 1))
    y = np.sin(4 * X[:, 0]) + (0.1 + 0.3 * X[:, 0]) * rng.standard_normal(120)
    reg = KernelAttentionRegressor(bandwidth=0.08, degree=1).fit(X, y)
    return reg, X, y, np.linspace(0.05, 0.95, 12)[:, None]


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95])
def test_asymptotic_is_the_normal_interval_of_the_se(fitted, level):
    reg, _, _, Q = fitted
    y_pred, se = reg.predict(Q, return_se=True)
    lower, upper = reg.confidence_interval(Q, level=level)
    z = norm.ppf((1 + level) / 2)
    assert_allclose(lower, y_pred - z * se, rtol=1e-12)
    assert_allclose(upper, y_pred + z * se, rtol=1e-12)


@pytest.mark.parametrize("method", ["asymptotic", "bootstrap"])
@pytest.mark.parametrize("simultaneous", [False, True])
def test_shapes_and_multi_output_is_per_output(fitted, method, simultaneous):
    reg, X, y, Q = fitted
    Y = np.column_stack([y, X[:, 0] ** 2 + 0.1 * np.cos(40 * X[:, 0])])
    options = dict(
        method=method, simultaneous=simultaneous, n_resamples=99, random_state=3
    )
    lower, upper = reg.fit(X, Y).confidence_interval(Q, **options)
    assert lower.shape == upper.shape == (len(Q), 2)
    assert np.all(lower < upper)
    for k in range(2):
        # The multipliers depend on the seed and n only: shared by outputs.
        one = reg.fit(X, Y[:, k]).confidence_interval(Q, **options)
        assert one[0].shape == (len(Q),)
        assert_allclose(lower[:, k], one[0], rtol=1e-10)
        assert_allclose(upper[:, k], one[1], rtol=1e-10)


@pytest.mark.parametrize("method", ["asymptotic", "bootstrap"])
def test_simultaneous_band_is_wider_than_pointwise(fitted, method):
    reg, _, _, Q = fitted
    options = dict(method=method, n_resamples=199, random_state=0)
    y_pred, se = reg.predict(Q, return_se=True)
    lower, upper = reg.confidence_interval(Q, simultaneous=True, **options)
    pointwise = reg.confidence_interval(Q, **options)
    assert np.all(upper - lower > pointwise[1] - pointwise[0])
    # A band y_pred -+ c se: one critical value for all queries.
    critical = (upper - y_pred) / se
    assert_allclose(critical, critical[0], rtol=1e-10)
    assert_allclose((y_pred - lower) / se, critical, rtol=1e-10)
    assert norm.ppf(0.975) < critical[0] < norm.ppf(1 - 0.025 / len(Q)) + 0.5


def test_bootstrap_approaches_the_asymptotic_interval_on_large_n():
    # n = 1000 with ~100 keys per window: the studentised statistic is close
    # to normal. The 2.5 % quantile of 1999 resamples has a Monte-Carlo
    # standard error of about sqrt(0.025 * 0.975 / 1999) / phi(1.96) = 0.06
    # (3 % of 1.96), so the widths agree within 8 % (about 3.6 of those
    # errors for a width, two quantiles) and the centres within 5 % of it.
    rng = np.random.RandomState(1)
    n = 1000
    X = rng.uniform(0, 1, (n, 1))
    y = np.sin(3 * X[:, 0]) + (0.2 + 0.5 * X[:, 0]) * rng.standard_normal(n)
    reg = KernelAttentionRegressor(bandwidth=0.05, degree=1).fit(X, y)
    Q = np.linspace(0.1, 0.9, 9)[:, None]
    lower, upper = reg.confidence_interval(Q)
    boot = reg.confidence_interval(
        Q, method="bootstrap", n_resamples=1999, random_state=0
    )
    width = upper - lower
    assert_allclose((boot[1] - boot[0]) / width, 1, atol=0.08)
    assert_allclose(((boot[0] + boot[1]) - (lower + upper)) / 2 / width, 0, atol=0.05)


@pytest.mark.parametrize("method", ["asymptotic", "bootstrap"])
@pytest.mark.parametrize("simultaneous", [False, True])
def test_same_random_state_same_band(fitted, method, simultaneous):
    reg, _, _, Q = fitted
    # Few resamples: under the small working_memory below, the bootstrap
    # recomputes the training smoother for every block of them.
    options = dict(method=method, simultaneous=simultaneous, n_resamples=40)
    first = reg.confidence_interval(Q, random_state=7, **options)
    assert_array_equal(first, reg.confidence_interval(Q, random_state=7, **options))
    state = np.random.RandomState(7)
    assert_array_equal(first, reg.confidence_interval(Q, random_state=state, **options))
    # Blocks of resamples, queries and keys within a small working_memory
    # draw the same multipliers.
    with config_context(working_memory=0.03):
        chunked = reg.confidence_interval(Q, random_state=7, **options)
    assert_allclose(chunked, first, rtol=1e-10)
    if method == "bootstrap" or simultaneous:
        other = reg.confidence_interval(Q, random_state=8, **options)
        assert not np.allclose(other, first)


def test_rows_of_weight_zero_never_change_the_asymptotic_intervals(fitted):
    reg, X, y, Q = fitted
    expected = reg.confidence_interval(Q)
    weights = np.r_[np.ones(len(X)), np.zeros(5)]
    X_more = np.r_[X, np.linspace(0, 1, 5)[:, None]]
    reg.fit(X_more, np.r_[y, np.full(5, 1e8)], sample_weight=weights)
    assert_allclose(reg.confidence_interval(Q), expected, rtol=1e-9)


def test_nan_fallbacks_give_nan_bounds():
    X = np.array([[0.0], [0.1], [0.2], [0.3], [2.0], [2.1], [2.2], [2.3]])
    y = np.array([0.0, 0.3, 0.1, 0.2, 1.0, 1.4, 1.1, 1.2])
    reg = KernelAttentionRegressor("epanechnikov", 0.3, on_empty="nan").fit(X, y)
    Q = np.array([[0.15], [1.0], [2.15]])
    for method in ("asymptotic", "bootstrap"):
        for simultaneous in (False, True):
            with pytest.warns(UserWarning):
                lower, upper = reg.confidence_interval(
                    Q, method=method, simultaneous=simultaneous, random_state=0
                )
            assert np.isnan(lower[1]) and np.isnan(upper[1])
            assert np.all(lower[[0, 2]] < upper[[0, 2]])


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"level": 0}, "'level' parameter"),
        ({"level": 1.0}, "'level' parameter"),
        ({"level": 95}, "'level' parameter"),
        ({"level": "high"}, "'level' parameter"),
        ({"method": "basic"}, "'method' parameter"),
        ({"simultaneous": "yes"}, "'simultaneous' parameter"),
        ({"n_resamples": 0}, "'n_resamples' parameter"),
        ({"n_resamples": 10.5}, "'n_resamples' parameter"),
        ({"random_state": "seed"}, "'random_state' parameter"),
    ],
)
def test_parameters_are_validated(fitted, options, match):
    reg, _, _, Q = fitted
    with pytest.raises(InvalidParameterError, match=match):
        reg.confidence_interval(Q, **options)


def test_unfitted_estimator_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        KernelAttentionRegressor().confidence_interval([[0.0]])


@pytest.mark.parametrize("heteroscedastic", [False, True])
def test_simultaneous_bootstrap_band_covers_the_whole_line(heteroscedastic):
    # A linear truth, unbiased under degree=1: the 95 % sup-t band over 12
    # queries covers the whole line in at least 93 % of 250 data sets. The
    # Monte-Carlo standard error of a coverage of 0.95 is
    # sqrt(0.95 * 0.05 / 250) = 0.014. (With fewer keys per window the band
    # covers a little less: see benchmarks/bench_inference.py.)
    rng = np.random.RandomState(11)
    n, Q = 200, np.linspace(0.05, 0.95, 12)[:, None]
    truth = 1 + 2 * Q[:, 0]
    reg = KernelAttentionRegressor(bandwidth=0.1, degree=1)
    covered = []
    for repetition in range(250):
        X = rng.uniform(0, 1, (n, 1))
        scale = 0.2 + 0.8 * X[:, 0] if heteroscedastic else 0.5
        y = 1 + 2 * X[:, 0] + scale * rng.standard_normal(n)
        lower, upper = reg.fit(X, y).confidence_interval(
            Q,
            method="bootstrap",
            simultaneous=True,
            n_resamples=199,
            random_state=repetition,
        )
        covered.append(np.all((lower <= truth) & (truth <= upper)))
    assert np.mean(covered) >= 0.93, np.mean(covered)


@pytest.mark.slow
@pytest.mark.parametrize("simultaneous", [False, True])
def test_bootstrap_memory_within_working_memory(simultaneous):
    # The smoother matrix of the keys would take 8 n**2 = 18 MB.
    from _memory import FIXED_SLACK, traced_peak

    rng = np.random.RandomState(6)
    n = 1500
    X = rng.uniform(size=(n, 1))
    y = rng.normal(size=n)
    reg = KernelAttentionRegressor(bandwidth=0.05, degree=1).fit(X, y)
    Q = np.linspace(0, 1, 100)[:, None]
    _, peak = traced_peak(
        lambda: reg.confidence_interval(
            Q,
            method="bootstrap",
            simultaneous=simultaneous,
            n_resamples=100,
            random_state=0,
        ),
        2,
    )
    assert peak < 2 * 2**20 + FIXED_SLACK + 10 * 8 * n
