"""predict(X, return_se=True): the standard error of the fitted mean."""

import warnings

import numpy as np
import pytest
from _array_api import strict_namespace
from _memory import FIXED_SLACK, traced_peak
from _reference import FORMULAS, local_fit
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse as sp
from sklearn import config_context

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionRegressor


def slow_residual_variance(L, Y, sample_weight=None):
    """``e_i**2 / (1 - 2 L_ii + sum_j L_ij**2)`` by a loop over the rows,
    pooled where that correction is below 1e-8."""
    n = len(Y)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight)
    squared, correction = np.empty_like(Y), np.empty(n)
    for i in range(n):
        fit = sum(L[i, j] * Y[j] for j in range(n))
        squared[i] = (Y[i] - fit) ** 2
        correction[i] = (1 - L[i, i]) ** 2 + sum(
            L[i, j] ** 2 for j in range(n) if j != i
        )
    variance = np.empty_like(Y)
    pooled_rows = [i for i in range(n) if correction[i] > 1e-8 and w[i] > 0]
    pooled = sum(squared[i] for i in pooled_rows) / sum(
        correction[i] for i in pooled_rows
    )
    for i in range(n):
        if w[i] == 0:
            variance[i] = 0.0
        elif correction[i] > 1e-8:
            variance[i] = squared[i] / correction[i]
        else:
            variance[i] = pooled
    return variance


def slow_se(L_query, variance):
    """``sqrt(sum_i l_i(q)**2 sigma_i**2)`` by a loop over the queries."""
    out = np.empty((len(L_query), variance.shape[1]))
    for q, row in enumerate(L_query):
        out[q] = np.sqrt(sum(row[i] ** 2 * variance[i] for i in range(len(row))))
    return out


@pytest.fixture
def data():
    rng = np.random.RandomState(0)
    X = rng.uniform(0, 3, (40, 2))
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1], X[:, 0] * X[:, 1]])
    Y += rng.normal(scale=0.2 + 0.2 * X[:, :1], size=Y.shape)
    Q = rng.uniform(0, 3, (15, 2))
    weights = rng.uniform(0.5, 2, 40)
    return X, Y, Q, weights


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube"])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bandwidth", [1.0, [0.8, 1.5]])
def test_se_equals_the_slow_reference(data, kernel, degree, weighted, bandwidth):
    X, Y, Q, weights = data
    w = weights if weighted else None
    alpha = FORMULAS[kernel]
    L_train = local_fit(X, Y, X, alpha, bandwidth, w, degree)[2]
    L_query = local_fit(X, Y, Q, alpha, bandwidth, w, degree)[2]
    expected = slow_se(L_query, slow_residual_variance(L_train, Y, w))
    reg = KernelAttentionRegressor(kernel, bandwidth, degree=degree)
    reg.fit(X, Y, sample_weight=w)
    y_pred, y_se = reg.predict(Q, return_se=True)
    assert_allclose(y_se, expected, rtol=1e-9, atol=1e-12)
    assert_array_equal(y_pred, reg.predict(Q))


@pytest.mark.parametrize("degree", [0, 1])
def test_return_order_and_shapes(data, degree):
    X, Y, Q, _ = data
    reg = KernelAttentionRegressor(bandwidth=1.0, degree=degree)
    for y in (Y[:, 0], Y):
        reg.fit(X, y)
        mean, std = reg.predict(Q, return_std=True)
        y_pred, y_se = reg.predict(Q, return_se=True)
        triple = reg.predict(Q, return_std=True, return_se=True)
        assert len(triple) == 3
        assert_array_equal(triple[0], mean)
        assert_array_equal(triple[1], std)
        assert_array_equal(triple[2], y_se)
        assert_array_equal(y_pred, mean)
        assert y_se.shape == mean.shape == (len(Q),) + y.shape[1:]
        assert np.all(y_se > 0)


def test_multi_output_is_per_output(data):
    X, Y, Q, weights = data
    reg = KernelAttentionRegressor(bandwidth=0.9, degree=1)
    both = reg.fit(X, Y, sample_weight=weights).predict(Q, return_se=True)[1]
    for k in range(Y.shape[1]):
        one = reg.fit(X, Y[:, k], sample_weight=weights).predict(Q, return_se=True)
        assert_allclose(both[:, k], one[1], rtol=1e-12)


def _compact_data(n=300, d=2, seed=1):
    rng = np.random.RandomState(seed)
    X = rng.uniform(0, 4, (n, d))
    y = np.sin(X[:, 0]) + rng.normal(scale=0.3, size=n)
    return X, y, rng.uniform(0, 4, (40, d))


# In three dimensions the safeguard shrinks the slopes of the queries near
# the corners of the cube by more than half, which predict warns of: their
# standard errors must agree too.
@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning")
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("n_neighbors", [None, 15])
def test_every_algorithm_gives_the_same_se(d, degree, n_neighbors):
    X, y, Q = _compact_data(d=d)
    ses = []
    for algorithm in ("brute", "kd_tree", "ball_tree"):
        reg = KernelAttentionRegressor(
            "epanechnikov",
            1.2,
            degree=degree,
            algorithm=algorithm,
            n_neighbors=n_neighbors,
        )
        ses.append(reg.fit(X, y).predict(Q, return_se=True)[1])
    for other in ses[1:]:
        assert_allclose(other, ses[0], rtol=1e-9)
    # The sparse path (brute force on dense keys) agrees too.
    reg.set_params(algorithm="brute").fit(sp.csr_array(X), y)
    assert_allclose(reg.predict(sp.csr_array(Q), return_se=True)[1], ses[0], 1e-9)


@pytest.mark.parametrize("n_neighbors", [None, 10])
def test_adaptive_and_categorical_follow_the_defining_formula(n_neighbors):
    # The smoother rows are the estimator's own attention weights.
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(2)
    n = 60
    X = pd.DataFrame(
        {
            "x": rng.uniform(0, 2, n),
            "c": pd.Categorical(rng.choice(["a", "b", "c"], n)),
        }
    )
    y = X["x"].to_numpy() + (X["c"] == "b") + rng.normal(scale=0.3, size=n)
    reg = KernelAttentionRegressor(
        bandwidth=0.5 if n_neighbors is None else 1.0,
        degree=1,
        categorical_features="from_dtype",
        n_neighbors=n_neighbors,
    ).fit(X, y)
    Q = X.iloc[:12]
    L_train = reg.attention_weights(X)
    variance = slow_residual_variance(L_train, y.to_numpy()[:, None])
    expected = slow_se(reg.attention_weights(Q), variance)[:, 0]
    assert_allclose(reg.predict(Q, return_se=True)[1], expected, rtol=1e-9)


# With eight neighbours, the queries at the ends of the data are fitted from
# few keys on one side: their slopes shrunk, which predict warns of.
@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning")
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("n_neighbors", [None, 8])
def test_rows_of_weight_zero_never_change_the_se(degree, n_neighbors):
    rng = np.random.RandomState(3)
    X = rng.uniform(0, 2, (50, 1))
    y = X[:, 0] ** 2 + rng.normal(scale=0.2, size=50)
    extra_X = rng.uniform(0, 2, (7, 1))
    extra_y = rng.normal(scale=1e6, size=7)  # wild values, weight zero
    Q = np.linspace(0, 2, 11)[:, None]
    reg = KernelAttentionRegressor(
        "biweight", 0.6, degree=degree, n_neighbors=n_neighbors
    )
    expected = reg.fit(X, y).predict(Q, return_se=True)[1]
    weights = np.r_[np.ones(50), np.zeros(7)]
    reg.fit(np.r_[X, extra_X], np.r_[y, extra_y], sample_weight=weights)
    assert_allclose(reg.predict(Q, return_se=True)[1], expected, rtol=1e-9)


@pytest.mark.parametrize("degree", [0, 1])
def test_se_scales_with_y_and_ignores_its_offset(data, degree):
    X, Y, Q, weights = data
    reg = KernelAttentionRegressor(bandwidth=0.8, degree=degree)
    se = reg.fit(X, Y, sample_weight=weights).predict(Q, return_se=True)[1]
    for scale in (-3.0, 1e-3, 1e4):
        scaled = reg.fit(X, scale * Y, sample_weight=weights)
        assert_allclose(scaled.predict(Q, return_se=True)[1], abs(scale) * se, 1e-9)
    shifted = reg.fit(X, Y + 1e3, sample_weight=weights)
    assert_allclose(shifted.predict(Q, return_se=True)[1], se, rtol=1e-7)
    if degree == 1:
        # A local-linear fit reproduces linear functions: its residuals, and
        # so its standard errors, ignore a linear trend added to y.
        trend = (X @ [2.0, -1.0])[:, None]
        tilted = reg.fit(X, Y + trend, sample_weight=weights)
        assert_allclose(tilted.predict(Q, return_se=True)[1], se, rtol=1e-7)


def test_se_shrinks_like_one_over_root_n():
    # The property that separates the error of the mean from the spread of y.
    rng = np.random.RandomState(4)
    ratios = []
    for n in (400, 1600):
        X = rng.uniform(0, 1, (n, 1))
        y = rng.normal(size=n)
        reg = KernelAttentionRegressor(bandwidth=0.1).fit(X, y)
        _, std, se = reg.predict([[0.5]], return_std=True, return_se=True)
        ratios.append(se[0] / std[0])
    assert 1.7 < ratios[0] / ratios[1] < 2.3


@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
@pytest.mark.parametrize("degree", [0, 1])
def test_fallback_rows(on_empty, degree):
    X = np.array([[0.0], [0.1], [0.2], [1.0], [1.1], [1.3], [5.0], [5.1]])
    y = np.array([0.0, 0.3, 0.1, 1.0, 1.4, 1.1, 5.0, 5.3])
    reg = KernelAttentionRegressor(
        "epanechnikov", 0.5, degree=degree, on_empty=on_empty
    ).fit(X, y)
    Q = np.array([[0.1], [3.0]])  # the second one is empty
    with pytest.warns(EmptyNeighborhoodWarning):
        _, se = reg.predict(Q, return_se=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        L_train = reg.attention_weights(X)
        L_query = reg.attention_weights(Q)
    variance = slow_residual_variance(L_train, y[:, None])
    expected = slow_se(L_query, variance)[:, 0]
    assert np.isfinite(se[0])
    if on_empty == "nan":
        assert np.isnan(se[1])
    else:
        assert_allclose(se, expected, rtol=1e-9)


def test_float32_gives_float32():
    rng = np.random.RandomState(5)
    X = rng.uniform(size=(30, 1)).astype(np.float32)
    y = rng.normal(size=30).astype(np.float32)
    y_pred, y_se = KernelAttentionRegressor().fit(X, y).predict(X, return_se=True)
    assert y_pred.dtype == y_se.dtype == np.float32


@pytest.mark.parametrize("value", [1, "yes", None])
def test_return_se_is_validated(data, value):
    X, Y, Q, _ = data
    reg = KernelAttentionRegressor().fit(X, Y)
    with pytest.raises(ValueError, match="return_se must be True or False"):
        reg.predict(Q, return_se=value)


def test_array_api_path_refuses_return_se():
    xp = strict_namespace()
    X = np.linspace(0, 1, 10)[:, None]
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(xp.asarray(X), xp.asarray(X[:, 0]))
        reg.predict(xp.asarray(X))
        with pytest.raises(ValueError, match="return_se=True works on NumPy"):
            reg.predict(xp.asarray(X), return_se=True)
        with pytest.raises(ValueError, match="confidence_interval works on NumPy"):
            reg.confidence_interval(xp.asarray(X))


def test_se_memory_within_working_memory():
    # Dense smoother rows of every key would take 8 n**2 = 128 MB.
    rng = np.random.RandomState(6)
    n = 4000
    X = rng.uniform(size=(n, 1))
    y = rng.normal(size=n)
    reg = KernelAttentionRegressor(bandwidth=0.05).fit(X, y)
    _, peak = traced_peak(lambda: reg.predict(X[:500], return_se=True), 4)
    assert peak < 4 * 2**20 + FIXED_SLACK + 10 * 8 * n
    with config_context(working_memory=1):
        small = reg.predict(X[:50], return_se=True)[1]
    assert_allclose(small, reg.predict(X[:50], return_se=True)[1], rtol=1e-12)


@pytest.mark.parametrize("heteroscedastic", [False, True])
def test_pointwise_asymptotic_coverage(heteroscedastic):
    # A linear truth, which the local-linear fit (degree=1) reproduces without
    # bias: the 95 % interval y_pred -+ 1.96 se covers the truth at 10
    # queries in each of 400 data sets. The 4000 indicators are positively
    # correlated within a data set (the queries are one bandwidth apart), so
    # the Monte-Carlo standard error is at most about
    # sqrt(0.95 * 0.05 / 400) / sqrt(10) * sqrt(1 + 9 * 0.3) ~ 0.0066 with a
    # within-set correlation of about 0.3: 0.93-0.97 is three of them.
    rng = np.random.RandomState(7)
    n, Q = 200, np.linspace(0.05, 0.95, 10)[:, None]
    truth = 1 + 2 * Q[:, 0]
    reg = KernelAttentionRegressor(bandwidth=0.1, degree=1)
    covered = []
    for _ in range(400):
        X = rng.uniform(0, 1, (n, 1))
        scale = 0.2 + 0.8 * X[:, 0] if heteroscedastic else 0.5
        y = 1 + 2 * X[:, 0] + scale * rng.standard_normal(n)
        lower, upper = reg.fit(X, y).confidence_interval(Q)
        covered.append((lower <= truth) & (truth <= upper))
    coverage = np.mean(covered)
    assert 0.93 <= coverage <= 0.97, coverage
