"""Local-linear pooling (degree=1) against the references and its properties."""

import warnings

import numpy as np
import pytest
from _reference import FORMULAS, local_fit, safeguarded_fit
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import clone, config_context
from sklearn.linear_model import LinearRegression
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._engine import _query_chunks as _chunk_plan
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted(FORMULAS)
COMPACT = [name for name in CANONICAL if KERNELS[name].is_compact]
PATHS = ["brute", "kd_tree", "ball_tree"]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=40)
    Y = np.column_stack([y, np.cos(3 * X[:, 2]), -2 * y])
    Q = rng.uniform(0.1, 0.9, size=(20, 3))
    w = rng.uniform(0.5, 3.0, size=40)
    return X, y, Y, Q, w


def quietly(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return func(*args, **kwargs)


@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("multi_output", [False, True])
@pytest.mark.parametrize("bandwidth", [0.8, (0.7, 0.9, 1.2)])
def test_matches_slow_reference(data, kernel, weighted, multi_output, bandwidth):
    X, y, Y, Q, w = data
    target = Y if multi_output else y
    sample_weight = w if weighted else None
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=bandwidth, degree=1)
    # Every query has enough neighbours: no fallback, hence no warning.
    reg.fit(X, target, sample_weight=sample_weight)
    mean, std = reg.predict(Q, return_std=True)
    expected, expected_std, _ = local_fit(
        X, target, Q, FORMULAS[kernel], bandwidth, sample_weight, degree=1
    )
    assert mean.shape == std.shape == expected.shape
    assert_allclose(mean, expected, rtol=1e-10, atol=1e-12)
    assert_allclose(std, expected_std, rtol=1e-9, atol=1e-12)


def test_callable_kernel_matches_reference(data):
    X, _, Y, Q, w = data

    def inverse_square(x):
        return 1.0 / (0.1 + x**2)

    reg = KernelAttentionRegressor(kernel=inverse_square, bandwidth=0.5, degree=1)
    mean, std = reg.fit(X, Y, sample_weight=w).predict(Q, return_std=True)
    expected, expected_std, _ = local_fit(
        X, Y, Q, lambda u: 1 / (0.1 + u**2), 0.5, w, degree=1
    )
    assert_allclose(mean, expected, rtol=1e-10, atol=1e-12)
    assert_allclose(std, expected_std, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n_features", [1, 2, 3])
@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own
def test_matches_statsmodels_local_linear(n_features):
    kernel_regression = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression"
    )
    rng = np.random.default_rng(n_features)
    X = rng.uniform(0, 1, size=(80, n_features))
    y = np.sin(3 * X.sum(axis=1)) + 0.1 * rng.normal(size=80)
    Q = rng.uniform(-0.1, 1.1, size=(25, n_features))  # beyond the data too
    h = 0.25
    reference = kernel_regression.KernelReg(
        y, X, var_type="c" * n_features, reg_type="ll", bw=[h] * n_features
    )
    expected, _ = reference.fit(Q)
    reg = KernelAttentionRegressor(kernel="gaussian", bandwidth=h, degree=1)
    predictions = quietly(reg.fit(X, y).predict, Q)
    # statsmodels' plain fit where the safeguard keeps it (most queries);
    # beyond the corners of the cube the slope is shrunk (s < 1).
    safeguarded = safeguarded_fit(X, y, Q, FORMULAS["gaussian"], h)
    plain = safeguarded["shrinkage"] == 1.0
    assert np.count_nonzero(plain) >= 20
    assert_allclose(predictions[plain], expected[plain], rtol=0, atol=1e-8)
    assert_allclose(predictions, safeguarded["mean"][:, 0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "kernel, path",
    [(kernel, "brute") for kernel in CANONICAL]
    + [(kernel, tree) for kernel in COMPACT for tree in PATHS[1:]],
)
def test_reproduces_linear_functions_exactly(kernel, path):
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, size=(200, 2))
    Y = np.column_stack([1.0 + X @ [2.0, -3.0], 5.0 - X[:, 1]])
    Q = rng.uniform(0, 1, size=(50, 2))
    reg = KernelAttentionRegressor(kernel, bandwidth=0.3, degree=1, algorithm=path)
    mean, std = quietly(reg.fit(X, Y).predict, Q, return_std=True)
    truth = np.column_stack([1.0 + Q @ [2.0, -3.0], 5.0 - Q[:, 1]])
    # The local line is the function itself; where the query lies far from
    # the local centre m of its keys (a corner of the square, for the most
    # peaked kernels), the safeguard shrinks the slope by s: the prediction
    # is f(m) + s (f(q) - f(m)), and the residuals (1 - s) (f(k) - f(m)).
    fit = safeguarded_fit(X, Y, Q, FORMULAS[kernel], 0.3)
    s = fit["shrinkage"][:, None]
    assert np.mean(s == 1.0) > 0.9
    local = fit["local_mean"]  # f(m)
    assert_allclose(mean, local + s * (truth - local))
    assert_allclose(mean[s[:, 0] == 1.0], truth[s[:, 0] == 1.0])
    assert_allclose(std, (1.0 - s) * fit["local_std"], atol=1e-7)


def test_smaller_bias_than_pooling_at_the_boundary():
    # A linear trend on [0, 1]: pooling at the ends averages values from one
    # side only and is pulled towards the inside; the local-linear fit is not.
    x = np.linspace(0, 1, 101)[:, None]
    y = 1.0 + 2.0 * x[:, 0]
    ends = np.array([[0.0], [1.0]])
    truth = 1.0 + 2.0 * ends[:, 0]
    errors = {}
    for degree in (0, 1):
        reg = KernelAttentionRegressor("epanechnikov", bandwidth=0.2, degree=degree)
        errors[degree] = np.abs(reg.fit(x, y).predict(ends) - truth)
        # In the interior, where the window is symmetric, both are exact.
        assert_allclose(reg.predict([[0.5]]), [2.0])
    # About h * 3 / 8 * slope for the parabolic kernel: 0.15.
    assert np.all(errors[0] > 0.1)
    assert np.all(errors[1] < 1e-12)


def test_constant_kernel_is_weighted_least_squares(data):
    X, _, Y, Q, w = data
    reg = KernelAttentionRegressor(kernel="constant", degree=1)
    mean, std = reg.fit(X, Y, sample_weight=w).predict(Q, return_std=True)
    ols = LinearRegression().fit(X, Y, sample_weight=w)
    assert_allclose(mean, ols.predict(Q), rtol=1e-10)
    residuals = Y - ols.predict(X)
    expected_std = np.sqrt(w @ residuals**2 / w.sum())
    assert_allclose(std, np.broadcast_to(expected_std, std.shape))


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
def test_every_path_gives_the_same_fit(kernel, on_empty):
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, size=(300, 2))
    Y = np.column_stack([np.sin(5 * X[:, 0]), X[:, 1] ** 2])
    w = rng.uniform(0.2, 3.0, size=300)
    Q = rng.uniform(-0.3, 1.3, size=(200, 2))  # some empty, some singular
    results = []
    for path in PATHS:
        reg = KernelAttentionRegressor(
            kernel, bandwidth=0.15, degree=1, on_empty=on_empty, algorithm=path
        )
        reg.fit(X, Y, sample_weight=w)
        results.append(quietly(reg.predict, Q, return_std=True))
    # Windows at the edge that hold three or four keys give ill-conditioned
    # fits, which amplify the paths' different roundings of the distances;
    # and a spread of zero is known to about sqrt(eps) of the values' scale.
    for mean, std in results[1:]:
        assert_allclose(mean, results[0][0], rtol=1e-6, atol=1e-9)
        assert_allclose(std, results[0][1], rtol=1e-6, atol=1e-7)


def test_designs_of_rank_zero_fall_back_to_the_local_mean():
    # Two features; the boxcar window of the first query holds three
    # collinear keys (rank 1), that of the second a single key (rank 0),
    # that of the third three keys in general position.
    X = np.array([[0, 0], [1, 1], [2, 2], [10, 10], [20, 0], [21, 0], [20, 1]])
    X = X.astype(float)
    y = np.array([0.0, 1.0, 5.0, 7.0, 1.0, 2.0, 4.0])
    Q = np.array([[1.05, 1.05], [10.0, 10.0], [20.2, 0.2]])
    reg = KernelAttentionRegressor("boxcar", bandwidth=1.5, degree=1).fit(X, y)
    with pytest.warns(LocalLinearFallbackWarning) as rec:
        mean, std = reg.predict(Q, return_std=True)
    warning = rec.pop(LocalLinearFallbackWarning).message
    assert (warning.n_singular, warning.n_queries) == (1, 3)
    assert warning.n_rank_deficient == 1
    # The line through the three collinear keys, t = 0, 1, 2 along the
    # diagonal: y = 2 + 2.5 (t - 1), residuals (0.5, -1, 0.5).
    assert_allclose(mean[:2], [2.0 + 2.5 * 0.05, 7.0])
    assert_allclose(std[:2], [np.sqrt(0.5), 0.0])
    # y = 1 + x - 2 + 3 y on the three keys of the third window.
    assert_allclose(mean[2], 1.0 + 0.2 + 3 * 0.2)
    weights = quietly(reg.attention_weights, Q)
    # l_i = p_i (1 - g . (k_i - m)), g = C^+ (m - q), along the diagonal.
    assert_allclose(weights[0], [1 / 3 - 0.025, 1 / 3, 1 / 3 + 0.025] + [0] * 4)
    assert_allclose(weights[1], np.eye(7)[3])
    assert_allclose(weights @ y, mean)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechikov", "boxcar"])
def test_integer_weight_equals_duplicated_rows(data, kernel):
    X, _, Y, Q, _ = data
    counts = np.random.default_rng(3).integers(0, 4, size=len(X))
    counts[:5] = np.maximum(counts[:5], 1)
    reg = KernelAttentionRegressor(kernel, bandwidth=0.9, degree=1)
    weighted = quietly(reg.fit(X, Y, sample_weight=counts).predict, Q, return_std=True)
    repeated_fit = clone(reg).fit(
        np.repeat(X, counts, axis=0), np.repeat(Y, counts, axis=0)
    )
    repeated = quietly(repeated_fit.predict, Q, return_std=True)
    assert_allclose(weighted[0], repeated[0], rtol=1e-10, atol=1e-12)
    assert_allclose(weighted[1], repeated[1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("path", PATHS)
def test_float32(data, path):
    X, _, Y, Q, w = data
    reg = KernelAttentionRegressor("biweight", bandwidth=0.9, degree=1, algorithm=path)
    mean32, std32 = reg.fit(X.astype(np.float32), Y, sample_weight=w).predict(
        Q.astype(np.float32), return_std=True
    )
    mean64, std64 = clone(reg).fit(X, Y, sample_weight=w).predict(Q, return_std=True)
    assert mean32.dtype == std32.dtype == np.float32
    assert_allclose(mean32, mean64, rtol=1e-4, atol=1e-5)
    assert_allclose(std32, std64, rtol=1e-4, atol=1e-5)


def test_keys_many_bandwidths_from_their_centre():
    # Keys 2000 bandwidths across, far from the centre of the data: the
    # moments stay accurate because the engine centres and scales the keys.
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(0, 1000, size=(3000, 1)), axis=0) + 1e6
    y = np.sin(x[:, 0] / 20) + 0.01 * x[:, 0]
    Q = np.array([[1e6 + 1.0], [1e6 + 500.0], [1e6 + 999.0]])
    reg = KernelAttentionRegressor("gaussian", bandwidth=0.5, degree=1).fit(x, y)
    mean, std = reg.predict(Q, return_std=True)
    near = np.abs(x[:, 0, None] - Q[:, 0]).min(axis=1) < 10
    expected, expected_std, _ = local_fit(
        x[near] - 1e6, y[near], Q - 1e6, FORMULAS["gaussian"], 0.5, degree=1
    )
    assert_allclose(mean, expected, rtol=1e-9)
    assert_allclose(std, expected_std, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("path", PATHS)
def test_n_jobs_and_chunks_do_not_change_the_fit(data, path, monkeypatch):
    monkeypatch.setattr(_chunk_plan, "MIN_THREADED_PAIRS", 0)  # threads, even here
    X, _, Y, _, w = data
    Q = np.random.default_rng(5).uniform(0, 1, size=(3000, 3))
    reg = KernelAttentionRegressor("tricube", bandwidth=0.8, degree=1, algorithm=path)
    reg.fit(X, Y, sample_weight=w)
    expected = quietly(reg.predict, Q, return_std=True)
    with config_context(working_memory=0.05):
        chunked = quietly(reg.predict, Q, return_std=True)
        threaded = quietly(reg.set_params(n_jobs=2).predict, Q, return_std=True)
    for a, b, c in zip(expected, chunked, threaded, strict=True):
        # Other chunks round the products otherwise, which windows of a few
        # keys amplify; the same chunks in threads give the same bits.
        assert_allclose(b, a, rtol=1e-9, atol=1e-12)
        assert_array_equal(c, b)


@pytest.mark.parametrize("degree", [3, -1, 0.5, "1"])
def test_degree_is_validated(data, degree):
    X, y, *_ = data
    with pytest.raises(InvalidParameterError, match="degree"):
        KernelAttentionRegressor(degree=degree).fit(X, y)
