"""predict_gradient: derivatives of the fit and their standard errors."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _array_api import strict_namespace
from _memory import FIXED_SLACK, INPUT_COPIES, output_bytes, traced_peak
from _reference import FORMULAS, safeguarded_fit
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.datasets import load_diabetes
from sklearn.neighbors import NearestNeighbors

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionRegressor
from sklearn_kernelpool._inference._residuals import residual_variance
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted(FORMULAS)
COMPACT = [name for name in CANONICAL if KERNELS[name].is_compact]
# Differentiable everywhere inside their support (and at its edge, for the
# compact ones, to first order at least).
SMOOTH = ["gaussian", "cauchy", "biweight", "triweight", "tricube", "cosine"]
STEP = 1e-6


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(50, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=50)
    Y = np.column_stack([y, np.cos(2 * X[:, 1]) - X[:, 0]])
    Q = rng.uniform(0.2, 0.8, size=(8, 2))
    w = rng.uniform(0.5, 3.0, size=50)
    return X, y, Y, Q, w


def central_differences(func, Q, step=STEP):
    """``(n_queries, n_features, ...)`` central differences of ``func``."""
    columns = []
    for j in range(Q.shape[1]):
        e = np.zeros(Q.shape[1])
        e[j] = step
        columns.append((func(Q + e) - func(Q - e)) / (2 * step))
    return np.stack(columns, axis=1)


def weighted_least_squares(X, Y, Q, alpha, h, w=None):
    """Slopes and their weight rows by a loop: the slope rows of
    ``pinv(A^T W A) A^T W`` for the design ``A = [1, X - q]``."""
    Y = np.asarray(Y, dtype=float).reshape(len(X), -1)
    h = np.broadcast_to(np.asarray(h, dtype=float), (X.shape[1],))
    w = np.ones(len(X)) if w is None else w
    slopes = np.empty((len(Q), X.shape[1], Y.shape[1]))
    rows = np.empty((len(Q), X.shape[1], len(X)))
    for j, q in enumerate(Q):
        a = np.array(
            [
                w[i] * alpha(math.sqrt(np.sum(((q - k) / h) ** 2)))
                for i, k in enumerate(X)
            ]
        )
        A = np.hstack([np.ones((len(X), 1)), X - q])
        solution = np.linalg.pinv(A.T @ (a[:, None] * A)) @ (A.T * a)
        rows[j] = solution[1:]
        slopes[j] = rows[j] @ Y
    return slopes, rows


@pytest.mark.parametrize("name", sorted({k.name for k in KERNELS.values()}))
def test_log_slopes_are_the_derivatives_of_the_kernels(name):
    # Kernel.log_slope = d log alpha / ds, against central differences of
    # the defining formula, inside the support and away from the kinks.
    alpha = FORMULAS[name]
    s = np.array([0.04, 0.2, 0.5, 0.81])
    expected = [
        (math.log(alpha(math.sqrt(v + 1e-7))) - math.log(alpha(math.sqrt(v - 1e-7))))
        / 2e-7
        for v in s
    ]
    assert_allclose(KERNELS[name].log_slope(s), expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kernel", SMOOTH)
@pytest.mark.parametrize("bandwidth", [0.6, [0.5, 0.8]])
def test_degree_0_equals_central_differences(kernel, bandwidth, data):
    X, y, Y, Q, w = data
    reg = KernelAttentionRegressor(kernel, bandwidth).fit(X, Y, sample_weight=w)
    gradient = reg.predict_gradient(Q)
    assert gradient.shape == (len(Q), 2, 2)
    expected = central_differences(reg.predict, Q)
    assert_allclose(gradient, expected, rtol=1e-6, atol=1e-7)
    # Not a trivially small number: the fit does slope.
    assert np.abs(expected).max() > 0.1


@pytest.mark.parametrize("kernel", ["exponential", "epanechikov", "epanechnikov"])
def test_degree_0_kinked_kernels_away_from_the_keys(kernel, data):
    X, y, _, Q, _ = data
    reg = KernelAttentionRegressor(kernel, 0.7).fit(X, y)
    expected = central_differences(reg.predict, Q)
    assert_allclose(reg.predict_gradient(Q), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kernel", ["exponential", "epanechikov"])
def test_kink_at_a_key_gets_the_symmetric_subgradient(kernel):
    # At a key the one-sided derivatives differ; the gradient is linear in
    # that key's term, so the subgradient 0 gives their mean.
    X = np.array([[0.0], [0.7], [-0.3]])
    y = np.array([0.0, 1.0, 2.0])
    reg = KernelAttentionRegressor(kernel, 2.0).fit(X, y)
    q, e = np.array([[0.0]]), 1e-7
    right = (reg.predict(q + e) - reg.predict(q)) / e
    left = (reg.predict(q) - reg.predict(q - e)) / e
    assert abs(right - left)[0] > 0.1  # a kink indeed
    assert_allclose(reg.predict_gradient(q)[:, 0], (right + left) / 2, atol=1e-6)


@pytest.mark.parametrize("kernel", ["boxcar", "constant"])
def test_degree_0_flat_kernels_give_zero(kernel, data):
    X, y, _, Q, _ = data
    reg = KernelAttentionRegressor(kernel, 0.5).fit(X, y)
    gradient, se = reg.predict_gradient(Q, return_se=True)
    assert_array_equal(gradient, 0.0)
    assert_array_equal(se, 0.0)
    # The almost-everywhere derivative of predict.
    assert_allclose(central_differences(reg.predict, Q), 0.0, atol=1e-12)


@pytest.mark.parametrize(
    "kernel, algorithm",
    [(kernel, "brute") for kernel in CANONICAL]
    + [(kernel, tree) for kernel in COMPACT for tree in ("kd_tree", "ball_tree")],
)
def test_degree_1_recovers_linear_slopes(kernel, algorithm):
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, size=(200, 3))
    Y = np.column_stack([1.0 + X @ [2.0, -3.0, 0.5], 5.0 - X[:, 1]])
    Q = rng.uniform(0.1, 0.9, size=(30, 3))
    reg = KernelAttentionRegressor(kernel, 0.4, degree=1, algorithm=algorithm)
    gradient = reg.fit(X, Y).predict_gradient(Q)
    expected = np.broadcast_to(
        np.array([[2.0, 0.0], [-3.0, -1.0], [0.5, 0.0]]), gradient.shape
    )
    assert_allclose(gradient, expected, atol=1e-9)


@pytest.mark.parametrize("kernel", ["gaussian", "tricube", "epanechikov"])
@pytest.mark.parametrize("bandwidth", [0.4, [0.3, 0.6]])
def test_degree_1_equals_weighted_least_squares(kernel, bandwidth, data):
    X, y, Y, Q, w = data
    reg = KernelAttentionRegressor(kernel, bandwidth, degree=1)
    gradient = reg.fit(X, Y, sample_weight=w).predict_gradient(Q)
    expected, _ = weighted_least_squares(X, Y, Q, FORMULAS[kernel], bandwidth, w)
    assert_allclose(gradient, expected, rtol=1e-9, atol=1e-10)


def test_degree_1_callable_kernel(data):
    X, y, _, Q, _ = data
    reg = KernelAttentionRegressor(lambda u: 1 / (0.1 + u**2), 0.5, degree=1)
    gradient = reg.fit(X, y).predict_gradient(Q)
    expected, _ = weighted_least_squares(X, y, Q, lambda u: 1 / (0.1 + u**2), 0.5)
    assert_allclose(gradient, expected[:, :, 0], rtol=1e-9, atol=1e-10)


def test_degree_1_minimum_norm_on_collinear_features():
    # A duplicated feature: the slope is shared equally (minimum norm).
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, size=60)
    X = np.column_stack([x, x, rng.uniform(0, 1, size=60)])
    y = 4.0 * x - X[:, 2]
    Q = np.column_stack([[0.3, 0.6], [0.3, 0.6], [0.5, 0.2]])
    reg = KernelAttentionRegressor(bandwidth=0.5, degree=1).fit(X, y)
    assert_allclose(reg.predict_gradient(Q), [[2.0, 2.0, -1.0]] * 2, atol=1e-9)
    expected, _ = weighted_least_squares(X, y, Q, FORMULAS["gaussian"], 0.5)
    assert_allclose(reg.predict_gradient(Q), expected[:, :, 0], atol=1e-9)


@pytest.mark.parametrize("n_features", [1, 2, 3])
@pytest.mark.parametrize("per_feature", [False, True])
@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own
def test_matches_statsmodels_local_linear_marginal_effects(n_features, per_feature):
    kernel_regression = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression"
    )
    rng = np.random.default_rng(n_features)
    X = rng.uniform(0, 1, size=(80, n_features))
    y = np.sin(3 * X.sum(axis=1)) + 0.1 * rng.normal(size=80)
    Q = rng.uniform(-0.1, 1.1, size=(25, n_features))  # beyond the data too
    h = np.array([0.2, 0.3, 0.4][:n_features]) if per_feature else 0.25
    # statsmodels' gaussian bandwidth is its standard deviation, as ours.
    reference = kernel_regression.KernelReg(
        y,
        X,
        var_type="c" * n_features,
        reg_type="ll",
        bw=np.broadcast_to(h, (n_features,)),
    )
    _, marginal_effects = reference.fit(Q)
    reg = KernelAttentionRegressor(kernel="gaussian", bandwidth=h, degree=1)
    gradient = reg.fit(X, y).predict_gradient(Q)
    # statsmodels' plain slope where the safeguard keeps it (most queries);
    # beyond the corners of the cube it is shrunk (s < 1): s beta.
    safeguarded = safeguarded_fit(X, y, Q, FORMULAS["gaussian"], h)
    plain = safeguarded["shrinkage"] == 1.0
    assert np.count_nonzero(plain) >= 20
    marginal_effects = marginal_effects.reshape(gradient.shape)
    assert_allclose(gradient[plain], marginal_effects[plain], atol=1e-7)
    expected = safeguarded["gradient"][:, :, 0]
    assert_allclose(gradient, expected, rtol=1e-9, atol=1e-12)


def _real_data(name):
    if name == "engel":
        datasets = pytest.importorskip("statsmodels.api").datasets
        frame = datasets.engel.load_pandas().data
        return frame[["income"]].to_numpy(), frame["foodexp"].to_numpy()
    X, y = load_diabetes(return_X_y=True)
    return X[:, [0, 2, 3, 8]], y


@pytest.mark.parametrize("name", ["engel", "diabetes"])
@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own
def test_matches_statsmodels_on_real_data(name):
    # Engel's food expenditure against income (in currency units, far from
    # the origin) and four features of the diabetes data, one width per
    # feature, at the first 30 rows.
    kernel_regression = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression"
    )
    X, y = _real_data(name)
    h = 0.5 * X.std(axis=0)
    Q = X[:30]
    reference = kernel_regression.KernelReg(
        y, X, var_type="c" * X.shape[1], reg_type="ll", bw=h
    )
    _, marginal_effects = reference.fit(Q)
    reg = KernelAttentionRegressor(bandwidth=h, degree=1).fit(X, y)
    gradient = reg.predict_gradient(Q)
    scale = np.abs(marginal_effects).max()
    assert_allclose(
        gradient, marginal_effects.reshape(gradient.shape), atol=1e-7 * scale
    )


def test_slope_beyond_the_data_is_accurate():
    # One bandwidth past Engel's largest income, that key holds all but
    # 1e-18 of the weight: the slope rests on the others, through a local
    # covariance of about 1e-17 squared bandwidths. Against the same formula
    # in 60 digits (statsmodels 0.15 gives -7.05 here, and -0.44 with the
    # income in thousands).
    mpmath = pytest.importorskip("mpmath")
    X, y = _real_data("engel")
    h = 0.5 * X.std()
    q = X.max() + h
    reg = KernelAttentionRegressor(bandwidth=h, degree=1).fit(X, y)
    gradient = reg.predict_gradient([[q]])[0, 0]
    with mpmath.workdps(60):
        x = [mpmath.mpf(float(v)) for v in X[:, 0]]
        a = [mpmath.exp(-(((v - mpmath.mpf(q)) / mpmath.mpf(h)) ** 2) / 2) for v in x]
        total = sum(a)
        xbar = sum(ai * v for ai, v in zip(a, x, strict=True)) / total
        ybar = sum(ai * float(v) for ai, v in zip(a, y, strict=True)) / total
        cross = sum(
            ai * (v - xbar) * (float(t) - ybar)
            for ai, v, t in zip(a, x, y, strict=True)
        )
        spread = sum(ai * (v - xbar) ** 2 for ai, v in zip(a, x, strict=True))
        expected = float(cross / spread)
    assert_allclose(gradient, expected, rtol=1e-8)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("bandwidth", [0.5, [0.4, 0.7]])
def test_standard_errors_equal_the_explicit_sandwich(degree, bandwidth, data):
    X, y, Y, Q, w = data
    w = w.copy()
    w[:5] = 0.0  # rows of weight zero never enter
    reg = KernelAttentionRegressor("biweight", bandwidth, degree=degree)
    reg.fit(X, Y, sample_weight=w)
    gradient, se = reg.predict_gradient(Q, return_se=True)
    if degree == 0:
        # grad f = sum_i grad p_i(q) y_i: the rows G are the derivatives of
        # the attention weights, by central differences.
        rows = central_differences(reg.attention_weights, Q)
    else:
        _, rows = weighted_least_squares(X, Y, Q, FORMULAS["biweight"], bandwidth, w)
    assert_allclose(gradient, rows @ Y, rtol=1e-6, atol=1e-7)
    variance = residual_variance(reg)[0]
    assert_allclose(se, np.sqrt(rows**2 @ variance), rtol=1e-6, atol=1e-7)
    assert np.all(se > 0)
    # Rows of weight zero: whatever their values, nothing changes.
    Y2 = Y.copy()
    Y2[:5] = 1e6
    reg2 = KernelAttentionRegressor("biweight", bandwidth, degree=degree)
    reg2.fit(X, Y2, sample_weight=w)
    gradient2, se2 = reg2.predict_gradient(Q, return_se=True)
    assert_allclose(gradient2, gradient, rtol=1e-12, atol=1e-12)
    assert_allclose(se2, se, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
def test_multi_output_is_each_output(degree, data):
    X, y, Y, Q, _ = data
    reg = KernelAttentionRegressor("cauchy", 0.4, degree=degree)
    gradient, se = reg.fit(X, Y).predict_gradient(Q, return_se=True)
    assert gradient.shape == se.shape == (len(Q), 2, 2)
    for k in range(Y.shape[1]):
        single, single_se = reg.fit(X, Y[:, k]).predict_gradient(Q, return_se=True)
        assert single.shape == single_se.shape == (len(Q), 2)
        assert_allclose(gradient[:, :, k], single, rtol=1e-12)
        assert_allclose(se[:, :, k], single_se, rtol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
def test_categorical_features_are_nan(degree):
    rng = np.random.default_rng(3)
    n = 80
    X = np.column_stack([rng.integers(0, 3, n), rng.uniform(0, 1, (n, 2))])
    y = 2.0 * X[:, 1] - X[:, 2]
    if degree == 0:
        y += X[:, 0] + np.sin(3 * X[:, 2])
    Q = np.column_stack([[0, 2, 1], rng.uniform(0.2, 0.8, (3, 2))])
    reg = KernelAttentionRegressor(
        "gaussian", 0.4, degree=degree, categorical_features=[0]
    ).fit(X, y)
    gradient, se = reg.predict_gradient(Q, return_se=True)
    assert np.all(np.isnan(gradient[:, 0])) and np.all(np.isnan(se[:, 0]))
    assert np.all(np.isfinite(gradient[:, 1:])) and np.all(np.isfinite(se[:, 1:]))
    if degree == 1:
        assert_allclose(gradient[:, 1:], [[2.0, -1.0]] * 3, atol=1e-9)
    else:
        expected = central_differences(reg.predict, Q)
        assert_allclose(gradient[:, 1:], expected[:, 1:], rtol=1e-6, atol=1e-7)
    only = KernelAttentionRegressor(categorical_features=[0]).fit(X[:, :1], y)
    assert np.all(np.isnan(only.predict_gradient(Q[:, :1])))


@pytest.mark.parametrize("degree", [0, 1])
def test_adaptive_width_held_fixed_at_the_query(degree, data):
    X, y, _, Q, _ = data
    k, h = 10, 1.5
    reg = KernelAttentionRegressor("biweight", h, degree=degree, n_neighbors=k)
    gradient = reg.fit(X, y).predict_gradient(Q)
    distances, _ = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(Q)
    for q, width, row in zip(Q, h * distances[:, -1], gradient, strict=True):
        fixed = KernelAttentionRegressor("biweight", width, degree=degree).fit(X, y)
        assert_allclose(row, fixed.predict_gradient(q[None])[0], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree", "sparse"])
def test_every_path_gives_the_same(degree, algorithm, data):
    X, y, Y, Q, w = data
    brute = KernelAttentionRegressor("triweight", 0.4, degree=degree, algorithm="brute")
    expected = brute.fit(X, Y, sample_weight=w).predict_gradient(Q, return_se=True)
    if algorithm == "sparse":
        reg = brute.fit(sp.csr_array(X), Y, sample_weight=w)
        result = reg.predict_gradient(sp.csr_array(Q), return_se=True)
    else:
        reg = KernelAttentionRegressor(
            "triweight", 0.4, degree=degree, algorithm=algorithm
        )
        result = reg.fit(X, Y, sample_weight=w).predict_gradient(Q, return_se=True)
    for got, want in zip(result, expected, strict=True):
        assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
def test_working_memory_and_n_jobs_do_not_change_the_result(degree, data):
    X, y, Y, Q, _ = data
    reg = KernelAttentionRegressor("gaussian", 0.3, degree=degree).fit(X, Y)
    expected = reg.predict_gradient(Q, return_se=True)
    with config_context(working_memory=1e-4):
        small = reg.set_params(n_jobs=2).predict_gradient(Q, return_se=True)
    for got, want in zip(small, expected, strict=True):
        assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("degree", [0, 1])
def test_memory_stays_within_working_memory(degree):
    rng = np.random.default_rng(4)
    n, d, m = 3000, 4, 2000
    X = rng.uniform(0, 1, size=(n, d))
    reg = KernelAttentionRegressor(bandwidth=0.3, degree=degree)
    reg.fit(X, X.sum(axis=1))
    Q = rng.uniform(0, 1, size=(m, d))
    working_memory = 1  # MiB; one query's factors take 8 * 5 * n * d bytes
    result, peak = traced_peak(lambda: reg.predict_gradient(Q), working_memory)
    budget = working_memory * 2**20 + FIXED_SLACK
    budget += 2 * output_bytes(result) + INPUT_COPIES * Q.nbytes
    assert peak <= budget
    assert result.shape == (m, d)


@pytest.mark.parametrize(
    "on_empty, expected", [("nearest", 0.0), ("mean", 0.0), ("nan", np.nan)]
)
@pytest.mark.parametrize("degree", [0, 1])
def test_empty_neighbourhoods(on_empty, expected, degree, data):
    X, y, _, _, _ = data
    Q = np.array([[5.0, 5.0], [0.5, 0.5]])
    reg = KernelAttentionRegressor("biweight", 0.3, degree=degree, on_empty=on_empty)
    reg.fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning):
        gradient, se = reg.predict_gradient(Q, return_se=True)
    assert_array_equal(gradient[0], expected)
    assert_array_equal(se[0], expected)
    assert np.all(np.isfinite(gradient[1])) and np.all(se[1] > 0)


def test_on_empty_raise(data):
    X, y, _, _, _ = data
    reg = KernelAttentionRegressor("biweight", 0.3, on_empty="raise").fit(X, y)
    with pytest.raises(ValueError, match="1 of 1"):
        reg.predict_gradient([[5.0, 5.0]])


def test_float32_gives_float32(data):
    X, y, _, Q, _ = data
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X.astype(np.float32), y)
    gradient, se = reg.predict_gradient(Q.astype(np.float32), return_se=True)
    assert gradient.dtype == se.dtype == np.float32
    reference = KernelAttentionRegressor(bandwidth=0.5).fit(X, y).predict_gradient(Q)
    assert_allclose(gradient, reference, rtol=1e-4, atol=1e-5)


def test_validation(data):
    X, y, _, Q, _ = data
    reg = KernelAttentionRegressor().fit(X, y)
    with pytest.raises(ValueError, match="return_se must be True or False; got 'yes'"):
        reg.predict_gradient(Q, return_se="yes")
    with pytest.raises(ValueError, match="X has 3 features"):
        reg.predict_gradient(np.ones((2, 3)))
    user = KernelAttentionRegressor(lambda u: np.exp(-u)).fit(X, y)
    with pytest.raises(ValueError, match="degree=0 needs the derivative"):
        user.predict_gradient(Q)
    with pytest.raises(Exception, match="not fitted"):
        KernelAttentionRegressor().predict_gradient(Q)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.predict_gradient(Q)


def test_other_array_namespaces_are_refused(data):
    xp = strict_namespace()
    X, y, _, Q, _ = data
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(xp.asarray(X), xp.asarray(y))
        with pytest.raises(ValueError, match="predict_gradient works on NumPy arrays"):
            reg.predict_gradient(xp.asarray(Q))


@pytest.mark.parametrize("heteroscedastic", [False, True])
def test_local_linear_slope_intervals_cover(heteroscedastic):
    # A linear truth has no smoothing bias under degree=1: slope +- 1.96 se
    # covers the true slope 2 at 95 % over fresh designs and noise (1000
    # intervals: 5 queries x 200 repetitions; binomial sd 0.007).
    rng = np.random.default_rng(0)
    Q = np.linspace(0.1, 0.9, 5)[:, None]
    covered = []
    for _ in range(200):
        X = rng.uniform(0, 1, size=(200, 1))
        sd = 0.2 + 0.6 * X[:, 0] if heteroscedastic else 0.5
        y = 1.0 + 2.0 * X[:, 0] + sd * rng.normal(size=200)
        reg = KernelAttentionRegressor(bandwidth=0.15, degree=1).fit(X, y)
        gradient, se = reg.predict_gradient(Q, return_se=True)
        covered.append(np.abs(gradient[:, 0] - 2.0) <= 1.96 * se[:, 0])
    assert 0.93 <= np.mean(covered) <= 0.97


def test_local_constant_standard_errors_match_the_spread_given_the_design():
    # Given the design, the derivative of pooling varies only with the noise:
    # the mean standard error matches its spread over repetitions (away from
    # the boundary, where the bias of pooling inflates the residuals).
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, size=(200, 1))
    Q = np.linspace(0.3, 0.7, 5)[:, None]
    gradients, ses = [], []
    for _ in range(200):
        y = 1.0 + 2.0 * X[:, 0] + (0.2 + 0.6 * X[:, 0]) * rng.normal(size=200)
        reg = KernelAttentionRegressor(bandwidth=0.15).fit(X, y)
        gradient, se = reg.predict_gradient(Q, return_se=True)
        gradients.append(gradient[:, 0])
        ses.append(se[:, 0])
    ratio = np.mean(ses, axis=0) / np.std(gradients, axis=0)
    assert np.all((ratio > 0.85) & (ratio < 1.15))


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("working_memory", [None, 1e-3])
def test_compact_kernels_pool_only_the_keys_they_weigh(degree, working_memory):
    # Narrow supports: each batch of queries forms its factors over the few
    # keys it weighs; the result is that of the references all the same.
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, size=(300, 2))
    y = np.sin(4 * X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=300)
    Q = np.sort(rng.uniform(0.2, 0.8, size=(20, 2)), axis=0)
    reg = KernelAttentionRegressor("triweight", 0.2, degree=degree).fit(X, y)
    options = {} if working_memory is None else {"working_memory": working_memory}
    with config_context(**options):
        gradient = reg.predict_gradient(Q)
    if degree == 0:
        expected = central_differences(reg.predict, Q)
    else:
        expected = weighted_least_squares(X, y, Q, FORMULAS["triweight"], 0.2)[0][
            ..., 0
        ]
    assert_allclose(gradient, expected, rtol=1e-6, atol=1e-7)
