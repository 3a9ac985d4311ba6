"""Conditional quantiles and distribution functions: ``predict_quantiles``,
``predict_cdf`` and :class:`KernelAttentionQuantileRegressor`, against a
plain loop over the attention-weighted empirical distribution."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import clone, config_context
from sklearn.metrics import make_scorer, mean_pinball_loss
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionQuantileRegressor,
    KernelAttentionRegressor,
)

LEVELS = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def _tolerance(n, dtype=np.float64):
    """The documented tolerance ``64 (eps + n eps_64)``."""
    return 64 * (np.finfo(dtype).eps + n * np.finfo(np.float64).eps)


def reference_cdf(w, y, value):
    """``F(value) = sum_i w_i 1{y_i <= value}``, one key at a time."""
    total = 0.0
    for w_i, y_i in zip(w, y, strict=True):
        if y_i <= value:
            total += w_i
    return total


def reference_quantile(w, y, tau, t):
    """At ``tau`` 0 and 1 the smallest and the largest value of a key of
    positive weight; between, the smallest value ``v`` of a key with
    ``F(v) >= tau - t`` and ``F(v) > 0`` (at most the total weight), by
    trying every value."""
    positive = [y_i for w_i, y_i in zip(w, y, strict=True) if w_i > 0]
    if tau == 0:
        return min(positive)
    if tau == 1:
        return max(positive)
    total = reference_cdf(w, y, np.inf)
    for v in sorted(set(y)):
        F = reference_cdf(w, y, v)
        if F > 0 and F >= min(tau - t, total):
            return v
    raise AssertionError("no value reaches the level")


def reference(estimator, X, levels, n_keys):
    """The quantiles of the plain loop from the estimator's weights, shape
    (n_queries, n_levels, n_outputs)."""
    W = estimator.attention_weights(X)
    Y = np.asarray(estimator.values_).reshape(len(estimator.values_), -1)
    t = _tolerance(n_keys, W.dtype)
    out = np.empty((len(X), len(levels), Y.shape[1]))
    for q in range(len(X)):
        for j in range(Y.shape[1]):
            for k, tau in enumerate(levels):
                if np.isnan(W[q]).any():
                    out[q, k, j] = np.nan
                    continue
                out[q, k, j] = reference_quantile(W[q], Y[:, j], tau, t)
    return out


def _data(seed=0, n=60, n_outputs=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    # Rounded values: many ties in y.
    Y = np.round(rng.normal(size=(n, n_outputs)) * 3) / 3
    Y[:, -1] += 4 * X[:, 0]
    weights = rng.integers(0, 4, n).astype(float)
    weights[0] = 1.0
    queries = rng.uniform(-0.1, 1.1, (25, 2))
    return X, Y, weights, queries


PATHS = [
    ("brute", "gaussian", 0.2),
    ("brute", "epanechnikov", 0.4),
    ("brute", "cauchy", 0.1),
    ("kd_tree", "epanechnikov", 0.4),
    ("kd_tree", "boxcar", 0.3),
    ("ball_tree", "biweight", 0.5),
    ("binned", "gaussian", 0.2),
    ("binned", "tricube", 0.4),
]


@pytest.mark.parametrize(("algorithm", "kernel", "bandwidth"), PATHS)
def test_quantiles_match_a_loop_on_every_path(algorithm, kernel, bandwidth):
    X, Y, weights, queries = _data()
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=bandwidth)
    reg.set_params(algorithm=algorithm).fit(X, Y, sample_weight=weights)
    assert reg.algorithm_ == algorithm
    got = reg.predict_quantiles(queries, quantiles=LEVELS)
    assert got.shape == (len(queries), len(LEVELS), 2)
    n_keys = np.count_nonzero(weights)
    assert_array_equal(got, reference(reg, queries, LEVELS, n_keys))
    # The distribution function at every training value, as the loop has it.
    values = np.unique(Y)
    cdf = reg.predict_cdf(queries, values)
    W = reg.attention_weights(queries)
    for j in range(2):
        expected = [[reference_cdf(w, Y[:, j], v) for v in values] for w in W]
        assert_allclose(cdf[:, :, j], np.clip(expected, 0, 1), atol=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning")
@pytest.mark.parametrize(
    "reg",
    [
        KernelAttentionRegressor(bandwidth=0.3, n_neighbors=5),
        KernelAttentionRegressor(bandwidth=[0.2, 0.5], kernel="triweight"),
        KernelAttentionRegressor(categorical_features=[1], bandwidth=0.3),
    ],
    ids=["adaptive", "per-feature", "categorical"],
)
def test_quantiles_match_a_loop_for_other_widths(reg):
    X, Y, weights, queries = _data(1)
    X[:, 1] = np.floor(X[:, 1] * 3)
    queries[:, 1] = np.floor(np.clip(queries[:, 1], 0, 0.99) * 3)
    reg.fit(X, Y[:, 0], sample_weight=weights)
    got = reg.predict_quantiles(queries, quantiles=LEVELS)
    assert got.shape == (len(queries), len(LEVELS))
    expected = reference(reg, queries, LEVELS, np.count_nonzero(weights))
    assert_array_equal(got, expected[:, :, 0])


def test_integer_weight_is_a_repeated_row():
    X, Y, weights, queries = _data(2)
    reg = KernelAttentionRegressor(bandwidth=0.2)
    weighted = reg.fit(X, Y, sample_weight=weights).predict_quantiles(
        queries, quantiles=LEVELS
    )
    rows = np.repeat(np.arange(len(X)), weights.astype(int))
    repeated = reg.fit(X[rows], Y[rows]).predict_quantiles(queries, quantiles=LEVELS)
    assert_array_equal(weighted, repeated)
    cdf = reg.predict_cdf(queries, np.unique(Y))
    reg.fit(X, Y, sample_weight=weights)
    assert_allclose(reg.predict_cdf(queries, np.unique(Y)), cdf, atol=1e-12)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_many_chunks_give_the_same_answers(algorithm):
    X, Y, weights, _ = _data(3, n=200)
    queries = np.random.default_rng(3).uniform(0, 1, (300, 2))
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.3)
    reg.set_params(algorithm=algorithm).fit(X, Y, sample_weight=weights)
    quantiles = reg.predict_quantiles(queries, quantiles=LEVELS)
    cdf = reg.predict_cdf(queries, [-1.0, 0.0, 2.0])
    with config_context(working_memory=0.001):  # about 1 kB: many chunks
        assert_array_equal(reg.predict_quantiles(queries, quantiles=LEVELS), quantiles)
        assert_array_equal(reg.predict_cdf(queries, [-1.0, 0.0, 2.0]), cdf)


def test_exact_ties_of_the_cumulative_weight_give_the_lower_value():
    # Keys at one point: equal weights, whatever the kernel.
    X = np.zeros((3, 1))
    for dtype in (np.float64, np.float32):
        reg = KernelAttentionRegressor().fit(X.astype(dtype), [2.0, 1.0, 3.0])
        got = reg.predict_quantiles([[0.0]], quantiles=[1 / 3, 0.5, 2 / 3, 1.0])
        assert_array_equal(got, [[1.0, 2.0, 2.0, 3.0]])
        reg.fit(X[:2].astype(dtype), [2.0, 1.0])
        assert_array_equal(reg.predict_quantiles([[5.0]], quantiles=0.5), [1.0])
        # Just above the level: the upper value.
        assert_array_equal(reg.predict_quantiles([[5.0]], quantiles=0.5001), [2.0])


def test_quantiles_are_monotone_and_consistent_with_the_cdf():
    X, Y, weights, queries = _data(4, n=120)
    reg = KernelAttentionRegressor(bandwidth=0.15).fit(X, Y, sample_weight=weights)
    levels = np.linspace(0, 1, 41)
    Q = reg.predict_quantiles(queries, quantiles=levels)
    assert np.all(np.diff(Q, axis=1) >= 0)
    t = _tolerance(np.count_nonzero(weights))
    for j in range(2):
        for k, tau in enumerate(levels):
            at = reg.predict_cdf(queries, Q[:, k, j])
            below = reg.predict_cdf(queries, np.nextafter(Q[:, k, j], -np.inf))
            rows = np.arange(len(queries))
            assert np.all(at[rows, rows, j] >= tau - t)
            assert np.all(below[rows, rows, j] < max(tau, 1e-300))


def test_scalar_level_and_per_output_values():
    X, Y, weights, queries = _data(5)
    reg = KernelAttentionRegressor(bandwidth=0.2).fit(X, Y)
    assert_array_equal(
        reg.predict_quantiles(queries, 0.3),
        reg.predict_quantiles(queries, [0.3])[:, 0],
    )
    values = np.array([[0.0, 1.0], [1.0, 3.0]])
    cdf = reg.predict_cdf(queries, values)
    assert cdf.shape == (len(queries), 2, 2)
    assert_array_equal(cdf[:, :, 1], reg.predict_cdf(queries, values[:, 1])[:, :, 1])
    ends = reg.predict_cdf(queries, [-np.inf, np.inf])[:, :, 0]
    assert_array_equal(ends, np.broadcast_to([0.0, 1.0], ends.shape))


@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning")
@pytest.mark.parametrize("policy", ["nearest", "mean", "nan"])
def test_empty_queries_get_the_quantiles_of_their_fallback(policy):
    X = np.array([[0.0], [1.0], [1.0], [5.0]])
    y = np.array([3.0, 1.0, 2.0, 7.0])
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5, on_empty=policy)
    reg.fit(X, y)
    got = reg.predict_quantiles([[1.2], [2.5]], quantiles=[0.25, 0.5, 1.0])
    assert_array_equal(got[0], [1.0, 1.0, 2.0])
    expected = {
        "nearest": [1.0, 1.0, 2.0],  # the keys at 1, tied nearest
        "mean": [1.0, 2.0, 7.0],  # every key
        "nan": [np.nan] * 3,
    }[policy]
    assert_array_equal(got[1], expected)
    with pytest.warns(EmptyNeighborhoodWarning):
        reg.predict_cdf([[3.0]], [2.0])


def test_empty_queries_raise_under_raise():
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5, on_empty="raise")
    reg.fit([[0.0], [1.0]], [0.0, 1.0])
    with pytest.raises(ValueError, match="empty"):
        reg.predict_quantiles([[3.0]])


def test_refusals_name_the_argument():
    X, Y, _, queries = _data(6)
    reg = KernelAttentionRegressor(degree=1).fit(X, Y)
    for method, args in (("predict_quantiles", ()), ("predict_cdf", ([0.0],))):
        with pytest.raises(ValueError, match="degree=0"):
            getattr(reg, method)(queries, *args)
    reg.set_params(degree=0).fit(X, Y)
    for bad in (1.5, -0.1, [], [[0.5]], [np.nan], True, "median"):
        with pytest.raises(ValueError, match="quantiles must be"):
            reg.predict_quantiles(queries, bad)
    for bad in ([np.nan], [[0.0, 1.0, 2.0]], "x", [[[0.0]]]):
        with pytest.raises(ValueError, match="y_values must be"):
            reg.predict_cdf(queries, bad)


def test_pickles_are_unchanged_by_the_cached_order():
    X, Y, _, queries = _data(7)
    reg = KernelAttentionRegressor(bandwidth=0.2).fit(X, Y)
    before = pickle.dumps(reg)
    expected = reg.predict_quantiles(queries)
    assert pickle.dumps(reg) == before
    assert_array_equal(pickle.loads(before).predict_quantiles(queries), expected)


def test_partially_linear_quantiles_are_shifted():
    rng = np.random.default_rng(8)
    X = np.column_stack([rng.uniform(0, 1, 150), rng.normal(size=150)])
    y = np.sin(3 * X[:, 0]) + 2 * X[:, 1] + rng.normal(scale=0.2, size=150)
    reg = KernelAttentionRegressor(bandwidth=0.1, linear_features=[1]).fit(X, y)
    queries = X[:10]
    shift = reg.coef_[0] * queries[:, 1] + reg.intercept_
    kernel = reg.kernel_regressor_.predict_quantiles(queries[:, :1], LEVELS)
    assert_allclose(reg.predict_quantiles(queries, LEVELS), kernel + shift[:, None])
    values = np.linspace(-3, 3, 7)
    expected = reg.kernel_regressor_.predict_cdf(queries[:, :1], values)
    rows = [
        reg.kernel_regressor_.predict_cdf(queries[[i], :1], values - shift[i])[0]
        for i in range(10)
    ]
    assert_allclose(reg.predict_cdf(queries, values), rows)
    assert expected.shape == (10, 7)


def test_quantile_regressor_predicts_its_level():
    X, Y, weights, queries = _data(9)
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.4)
    reg.fit(X, Y, sample_weight=weights)
    qr = KernelAttentionQuantileRegressor(
        kernel="epanechnikov", bandwidth=0.4, quantile=0.75
    ).fit(X, Y, sample_weight=weights)
    assert_array_equal(qr.predict(queries), reg.predict_quantiles(queries, 0.75))
    assert_array_equal(qr.predict_quantiles(queries), reg.predict_quantiles(queries))


def test_grid_search_tunes_the_pinball_loss():
    rng = np.random.default_rng(10)
    X = rng.uniform(0, 1, (400, 1))
    y = np.sin(4 * X[:, 0]) + rng.normal(scale=0.1 + 0.5 * X[:, 0], size=400)
    scorer = make_scorer(mean_pinball_loss, alpha=0.9, greater_is_better=False)
    search = GridSearchCV(
        KernelAttentionQuantileRegressor(quantile=0.9),
        {"bandwidth": [0.005, 0.05, 2.0]},
        scoring=scorer,
        cv=3,
    ).fit(X, y)
    assert search.best_params_ == {"bandwidth": 0.05}
    X_test = rng.uniform(0, 1, (4000, 1))
    y_test = np.sin(4 * X_test[:, 0]) + rng.normal(
        scale=0.1 + 0.5 * X_test[:, 0], size=4000
    )
    below = np.mean(y_test <= search.predict(X_test))
    # 0.9 up to the estimation error of the quantiles and 3 MC s.e.
    assert abs(below - 0.9) < 0.03


def test_the_quantile_regressor_reads_ordered_categories_as_the_regressor():
    import pandas as pd

    rng = np.random.default_rng(0)
    levels = pd.Categorical(
        rng.choice(["low", "mid", "high"], 120),
        categories=["low", "mid", "high"],
        ordered=True,
    )
    X = pd.DataFrame({"x": rng.uniform(size=120), "level": levels})
    y = X["x"].to_numpy() + levels.codes + 0.1 * rng.normal(size=120)
    params = {"bandwidth": 0.3, "categorical_features": "from_dtype"}
    reg = KernelAttentionRegressor(**params).fit(X, y)
    quantile = KernelAttentionQuantileRegressor(quantile=0.5, **params).fit(X, y)
    assert_array_equal(quantile.is_ordered_, reg.is_ordered_)
    assert_array_equal(quantile.predict(X), reg.predict_quantiles(X, 0.5))


def _tails(dtype, seed=11, n=40):
    """Two outputs whose largest and smallest values sit on keys of sample
    weight 1e-14: of positive attention weight at every query, yet below the
    rounding tolerance of the cumulative weights in float32 and float64.
    The second feature takes three categories."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    X[:, 1] = np.floor(X[:, 1] * 3)
    X[:4, 1] = 1.0
    Y = rng.normal(size=(n, 2))
    Y[[0, 1, 2, 3], [0, 0, 1, 1]] = [10.0, -10.0, 10.0, -10.0]
    weights = np.ones(n)
    weights[:4] = 1e-14
    queries = np.column_stack([rng.uniform(0.3, 0.7, 12), np.ones(12)])
    X[:4, 0] = np.linspace(0.4, 0.6, 4)
    return X.astype(dtype), Y.astype(dtype), weights, queries.astype(dtype)


TAIL_PATHS = {
    "brute": {"kernel": "gaussian", "bandwidth": 0.3},
    "kd_tree": {"kernel": "epanechnikov", "bandwidth": 0.6, "algorithm": "kd_tree"},
    "ball_tree": {"kernel": "biweight", "bandwidth": 0.6, "algorithm": "ball_tree"},
    "binned": {"kernel": "epanechnikov", "bandwidth": 0.6, "algorithm": "binned"},
    "adaptive": {"kernel": "epanechnikov", "bandwidth": 0.5, "n_neighbors": 20},
    "categorical": {"bandwidth": 0.3, "categorical_features": [1]},
}
INTERIOR = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def _far_from_jumps(W, Y, levels, gap=1e-6):
    """Whether no cumulative weight of a query lies within ``gap`` of a
    level, per query, level and output (the plain loop's ``F``)."""
    far = np.ones((len(W), len(levels), Y.shape[1]), dtype=bool)
    for q, w in enumerate(W):
        for j in range(Y.shape[1]):
            F = [reference_cdf(w, Y[:, j], v) for v in Y[w > 0, j]]
            for k, tau in enumerate(levels):
                far[q, k, j] = np.min(np.abs(np.subtract(F, tau))) > gap
    return far


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("params", TAIL_PATHS.values(), ids=TAIL_PATHS.keys())
def test_levels_0_and_1_are_the_extremes_of_positive_weight(params, dtype):
    X, Y, weights, queries = _tails(dtype)
    reg = KernelAttentionRegressor(**params).fit(X, Y, sample_weight=weights)
    W = reg.attention_weights(queries).astype(np.float64)
    assert np.all(W[:, :4] > 0)  # the keys of the extremes count
    got = reg.predict_quantiles(queries, [0.0, 1.0])
    expected = [
        [[Y[w > 0, j].min() for j in range(2)], [Y[w > 0, j].max() for j in range(2)]]
        for w in W
    ]
    assert_array_equal(got, expected)
    assert_array_equal(got[:, :, 0], np.broadcast_to([-10.0, 10.0], (12, 2)))
    interior = reg.predict_quantiles(queries, INTERIOR)
    n_keys = np.count_nonzero(weights)
    assert_array_equal(interior, reference(reg, queries, INTERIOR, n_keys))
    # Symmetric under y -> -y: exactly at 0 and 1, away from jumps between.
    negated = clone(reg).fit(X, -Y, sample_weight=weights)
    assert_array_equal(negated.predict_quantiles(queries, [1.0, 0.0]), -got)
    mirrored = -negated.predict_quantiles(queries, [1 - tau for tau in INTERIOR])
    far = _far_from_jumps(W, Y, INTERIOR)
    assert far.mean() > 0.9
    assert_array_equal(interior[far], mirrored[far])
    # The distribution function: 0 below the smallest, 1 from the largest.
    rows = np.arange(len(queries))
    low, high = got[:, 0], got[:, 1]
    for j in range(2):
        assert np.all(reg.predict_cdf(queries, high[:, j])[rows, rows, j] == 1.0)
        below = reg.predict_cdf(queries, np.nextafter(low[:, j], -np.inf))
        assert np.all(below[rows, rows, j] == 0.0)
        assert np.all(reg.predict_cdf(queries, low[:, j])[rows, rows, j] > 0.0)


@pytest.mark.parametrize("params", TAIL_PATHS.values(), ids=TAIL_PATHS.keys())
def test_quantile_regressor_at_levels_0_and_1(params):
    X, Y, weights, queries = _tails(np.float32)
    reg = KernelAttentionRegressor(**params).fit(X, Y, sample_weight=weights)
    expected = reg.predict_quantiles(queries, [0.0, 1.0])
    for k, level in enumerate((0, 1.0)):
        qr = KernelAttentionQuantileRegressor(quantile=level, **params)
        assert_array_equal(
            qr.fit(X, Y, sample_weight=weights).predict(queries), expected[:, k]
        )
        qr.fit(X, -Y, sample_weight=weights)
        assert_array_equal(qr.predict(queries), -expected[:, 1 - k])


def test_level_1_reaches_a_key_of_tiny_weight():
    # Gaussian weights of the query 0.1, by the formula: the key of value
    # 10 has about 1.3e-6 of the weight, below float32's tolerance.
    keys = np.array([0.0, 0.1, 0.2, 2.6])
    y = np.array([0.0, 1.0, 2.0, 10.0])
    kernel = np.exp(-0.5 * ((keys - 0.1) / 0.5) ** 2)
    p = kernel / kernel.sum()
    assert 1e-6 < p[3] < _tolerance(4, np.float32)
    X = keys[:, None].astype(np.float32)
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, y.astype(np.float32))
    assert_array_equal(reg.predict_quantiles([[0.1]], [0.0, 1.0]), [[0.0, 10.0]])
    assert_allclose(reg.predict_cdf([[0.1]], [9.99]), [[1 - p[3]]], rtol=1e-6)
    assert_array_equal(reg.predict_cdf([[0.1]], [10.0]), [[1.0]])
    reg.fit(X, -y.astype(np.float32))
    assert_array_equal(reg.predict_quantiles([[0.1]], [0.0, 1.0]), [[-10.0, 0.0]])


def test_levels_refuse_strings_booleans_and_empty_thresholds():
    X, Y, _, queries = _data(12)
    reg = KernelAttentionRegressor(bandwidth=0.3).fit(X, Y[:, 0])
    bad_levels = (
        "0.5",
        ["0.5"],
        [0.25, "0.75"],
        True,
        False,
        np.True_,
        [0.5, True],
        [np.False_, 0.5],
        np.array([True, False]),
    )
    for bad in bad_levels:
        with pytest.raises(ValueError, match="quantiles must be .* not strings or"):
            reg.predict_quantiles(queries, bad)
    # Integers and NumPy floats are levels.
    assert_array_equal(
        reg.predict_quantiles(queries, [0, np.float32(0.5), 1]),
        reg.predict_quantiles(queries, [0.0, 0.5, 1.0]),
    )
    for bad in ([], np.empty((0, 1)), ["1.0"], "1.0"):
        with pytest.raises(ValueError, match="y_values must be a non-empty"):
            reg.predict_cdf(queries, bad)
    for bad in (True, False, np.True_, "0.5"):
        qr = KernelAttentionQuantileRegressor(quantile=bad)
        with pytest.raises(InvalidParameterError, match="'quantile' parameter.*not a"):
            qr.fit(X, Y[:, 0])


def test_partially_linear_levels_0_and_1_are_symmetric():
    rng = np.random.default_rng(13)
    X = np.column_stack([rng.uniform(0, 1, 150), rng.normal(size=150)])
    y = np.sin(3 * X[:, 0]) + 2 * X[:, 1] + rng.normal(scale=0.2, size=150)
    reg = KernelAttentionRegressor(bandwidth=0.1, linear_features=[1]).fit(X, y)
    queries = X[:10]
    got = reg.predict_quantiles(queries, [0.0, 1.0])
    # The extremes of the kernel part's values of positive weight, shifted.
    kernel = reg.kernel_regressor_
    W = kernel.attention_weights(queries[:, :1])
    shift = reg.coef_[0] * queries[:, 1] + reg.intercept_
    ends = [[kernel.values_[w > 0].min(), kernel.values_[w > 0].max()] for w in W]
    assert_allclose(got, np.add(ends, shift[:, None]), rtol=1e-12)
    negated = clone(reg).fit(X, -y)
    assert_array_equal(negated.predict_quantiles(queries, [1.0, 0.0]), -got)
