"""predict(X, return_std=True): the attention-weighted spread of the values."""

import warnings

import numpy as np
import pytest
from _reference import FORMULAS, local_fit
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionRegressor

CANONICAL = sorted(FORMULAS)
PATHS = ["brute", "kd_tree", "ball_tree"]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 2))
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.3 * rng.normal(size=40)
    Y = np.column_stack([y, np.cos(3 * X[:, 1])])
    Q = rng.uniform(0.1, 0.9, size=(25, 2))
    w = rng.uniform(0.5, 3.0, size=40)
    return X, y, Y, Q, w


def predict_quietly(reg, Q, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        return reg.predict(Q, **kwargs)


@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("multi_output", [False, True])
def test_std_matches_slow_reference(data, kernel, weighted, multi_output):
    X, y, Y, Q, w = data
    target = Y if multi_output else y
    sample_weight = w if weighted else None
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.7)
    mean, std = reg.fit(X, target, sample_weight=sample_weight).predict(
        Q, return_std=True
    )
    expected, expected_std, _ = local_fit(
        X, target, Q, FORMULAS[kernel], 0.7, sample_weight
    )
    assert mean.shape == std.shape == expected.shape
    assert_allclose(mean, expected, rtol=1e-12)
    assert_allclose(std, expected_std, rtol=1e-10)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_is_predict_exactly(data, degree, dtype):
    X, _, Y, Q, w = data
    reg = KernelAttentionRegressor("gaussian", bandwidth=0.3, degree=degree)
    reg.fit(X.astype(dtype), Y, sample_weight=w)
    mean, std = reg.predict(Q.astype(dtype), return_std=True)
    assert_array_equal(mean, reg.predict(Q.astype(dtype)))
    assert mean.dtype == std.dtype == dtype
    assert np.all(std > 0)


@pytest.mark.parametrize("path", PATHS)
def test_constant_values_have_no_spread(data, path):
    X, _, _, Q, w = data
    reg = KernelAttentionRegressor("biweight", bandwidth=0.5, algorithm=path)
    mean, std = reg.fit(X, np.full(len(X), 3.5), sample_weight=w).predict(
        Q, return_std=True
    )
    assert_allclose(mean, 3.5)
    assert_array_equal(std, 0.0)


def test_constant_kernel_gives_the_global_weighted_std(data):
    X, y, _, Q, w = data
    reg = KernelAttentionRegressor(kernel="constant").fit(X, y, sample_weight=w)
    _, std = reg.predict(Q, return_std=True)
    global_std = np.sqrt(np.cov(y, aweights=w, bias=True))
    assert_allclose(std, global_std, rtol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
def test_a_large_offset_of_the_values_costs_no_precision(data, degree):
    # E[y^2] - E[y]^2 would lose everything at an offset of 1e8 with a
    # spread of 0.3; the values are centred in fit.
    X, y, _, Q, w = data
    reg = KernelAttentionRegressor("gaussian", bandwidth=0.3, degree=degree)
    _, std = reg.fit(X, y, sample_weight=w).predict(Q, return_std=True)
    _, shifted = reg.fit(X, y + 1e8, sample_weight=w).predict(Q, return_std=True)
    assert_allclose(shifted, std, rtol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_fallbacks(path):
    X = np.array([[0.0], [1.0], [1.0], [5.0]])
    y = np.array([1.0, 2.0, 6.0, 10.0])
    w = np.array([1.0, 1.0, 3.0, 1.0])
    Q = np.array([[0.1], [1.1], [2.5], [-7.0], [20.0]])  # three are empty
    results = {}
    for policy in ("nearest", "mean", "nan"):
        reg = KernelAttentionRegressor(
            "epanechnikov", bandwidth=0.5, on_empty=policy, algorithm=path
        )
        reg.fit(X, y, sample_weight=w)
        with pytest.warns(EmptyNeighborhoodWarning) as rec:
            results[policy] = reg.predict(Q, return_std=True)
        warning = rec.pop(EmptyNeighborhoodWarning).message
        assert (warning.n_empty, warning.n_queries) == (3, 5)
    for mean, std in results.values():
        assert_allclose(mean[:2], [1.0, 5.0])
        assert_allclose(std[:2], [0.0, np.sqrt(3.0)])  # values 2 and 6, 1:3
    # The tied keys at 1.0 are nearest to 2.5; one key each to -7 and 20.
    assert_allclose(results["nearest"][0][2:], [5.0, 1.0, 10.0])
    assert_allclose(results["nearest"][1][2:], [np.sqrt(3.0), 0.0, 0.0])
    global_std = np.sqrt(np.cov(y, aweights=w, bias=True))
    assert_allclose(results["mean"][0][2:], np.average(y, weights=w))
    assert_allclose(results["mean"][1][2:], global_std)
    assert np.all(np.isnan(results["nan"][0][2:]))
    assert np.all(np.isnan(results["nan"][1][2:]))


@pytest.mark.parametrize("return_std", [1, "yes", None])
def test_return_std_is_validated(data, return_std):
    X, y, _, Q, _ = data
    reg = KernelAttentionRegressor().fit(X, y)
    with pytest.raises(ValueError, match="return_std must be True or False"):
        reg.predict(Q, return_std=return_std)


def test_std_is_the_spread_of_y_not_the_error_of_the_mean():
    # Homoscedastic noise of standard deviation 0.5 around a smooth curve:
    # the std estimates 0.5 however many samples there are.
    rng = np.random.default_rng(1)
    for n in (2_000, 20_000):
        X = rng.uniform(0, 1, size=(n, 1))
        y = np.sin(2 * X[:, 0]) + 0.5 * rng.normal(size=n)
        reg = KernelAttentionRegressor(bandwidth=0.05, degree=1).fit(X, y)
        _, std = reg.predict(np.linspace(0.2, 0.8, 7)[:, None], return_std=True)
        assert_allclose(std, 0.5, rtol=0.15)
