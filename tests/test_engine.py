"""The layer shared by the engines (:mod:`sklearn_kernelpool._engine._protocol`),
against plain loops over the defining formulas."""

import math

import numpy as np
import pytest
from _array_api import strict_namespace
from numpy.testing import assert_allclose, assert_array_equal
from scipy.sparse import csr_array

from sklearn_kernelpool._engine._protocol import (
    fill_empty,
    normalise,
    normalise_rows,
    spread,
)


def _reference_spread(weights, values):
    """sqrt(sum_k w_k (y_k - sum_j w_j y_j)^2), one row and output at a time."""
    weights = np.atleast_2d(weights)
    out = np.empty((len(weights), values.shape[1]))
    for i, row in enumerate(weights):
        for j in range(values.shape[1]):
            mean = sum(w * y for w, y in zip(row, values[:, j], strict=True))
            out[i, j] = math.sqrt(
                sum(w * (y - mean) ** 2 for w, y in zip(row, values[:, j], strict=True))
            )
    return out


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(7, 2)) + 1e3  # a large common offset
    weights = rng.uniform(size=(4, 7))
    weights[1, :5] = 0.0  # a row on two keys
    weights /= weights.sum(axis=1, keepdims=True)
    return weights, values - values.mean(axis=0)


def test_spread_of_dense_sparse_and_single_rows(data):
    weights, values = data
    expected = _reference_spread(weights, values)
    assert_allclose(spread(weights, values), expected, rtol=1e-12)
    assert_allclose(spread(csr_array(weights), values), expected, rtol=1e-12)
    assert_allclose(spread(weights[2], values), expected[2], rtol=1e-12)


def test_spread_in_an_array_api_namespace(data):
    xp = strict_namespace()
    weights, values = data
    expected = _reference_spread(weights, values)
    out = spread(xp.asarray(weights), xp.asarray(values), xp)
    assert_allclose(np.asarray(out), expected, rtol=1e-12)
    single = spread(xp.asarray(weights[3]), xp.asarray(values), xp)
    assert_allclose(np.asarray(single), expected[3], rtol=1e-12)


def test_normalise_divides_by_the_last_column_and_finds_empty_rows():
    sums = np.array([[2.0, 4.0, 2.0], [1.0, 1.0, 0.0], [3.0, 0.0, 4.0]])
    ratios, empty = normalise(sums)
    assert_array_equal(empty, [False, True, False])
    assert_array_equal(ratios[[0, 2]], [[1.0, 2.0], [0.75, 0.0]])
    # Held-out sums of several candidates: the same along the last axis.
    stacked, empty = normalise(np.stack([sums, 2 * sums]))
    assert_array_equal(stacked[1, 0], ratios[0])
    assert_array_equal(empty[1], [False, True, False])
    scores = sums.copy()
    weights, empty = normalise_rows(scores, scores.sum(axis=1))
    assert_allclose(weights.sum(axis=1), 1.0)
    assert not empty.any()


def test_normalise_in_an_array_api_namespace():
    xp = strict_namespace()
    sums = np.array([[2.0, 4.0, 2.0], [1.0, 1.0, 0.0]])
    ratios, empty = normalise(xp.asarray(sums), xp)
    assert_array_equal(np.asarray(empty), [False, True])
    assert_array_equal(np.asarray(ratios)[0], [1.0, 2.0])
    assert np.all(np.isfinite(np.asarray(ratios)))  # no division by zero


class _Engine:
    """What :func:`fill_empty` asks of an engine: the nearest keys of a query
    are those of its index in ``nearest``."""

    def __init__(self, on_empty, values, weights, nearest):
        self.on_empty = on_empty
        self.values = values
        self.centered_values = values - weights @ values / weights.sum()
        self.mean_weights = weights / weights.sum()
        self.nan_weights = np.nan
        self.nearest = nearest

    def fallback_weights(self, chosen):
        rows = self.nearest[chosen]
        return csr_array(rows / rows.sum(axis=1, keepdims=True))


@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan", "raise"])
@pytest.mark.parametrize("pooled", [True, False])
def test_fill_empty_puts_each_policy_in_the_empty_rows_only(on_empty, pooled):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(5, 2))
    weights = rng.uniform(0.5, 2.0, size=5)
    nearest = np.array([[0, 1, 0, 0, 0], [0, 0, 3, 1, 0], [1, 0, 0, 0, 0]], float)
    engine = _Engine(on_empty, values, weights, nearest)
    empty = np.array([False, True, True])
    width = 2 if pooled else 5
    out = rng.normal(size=(3, width))
    std = rng.normal(size=(3, 2)) if pooled else None
    kept = out[0].copy()
    out, std = fill_empty(engine, out, empty, np.flatnonzero(empty), std, pooled)
    assert_array_equal(out[0], kept)
    if on_empty in ("nan", "raise"):
        assert np.isnan(out[1:]).all()
        assert std is None or np.isnan(std[1:]).all()
        return
    if on_empty == "mean":
        rows = np.tile(weights / weights.sum(), (2, 1))
    else:
        rows = nearest[1:] / nearest[1:].sum(axis=1, keepdims=True)
    assert_allclose(out[1:], rows @ values if pooled else rows, rtol=1e-12)
    if pooled:
        assert_allclose(std[1:], _reference_spread(rows, values), rtol=1e-12)


def test_every_scorer_meets_the_documented_protocol():
    # KernelPool asks its scorer for whatever differs between paths: every
    # scorer has each method the protocol of _engine's docstring names, and
    # the pool itself has no branch on its path.
    import inspect
    import re

    from sklearn_kernelpool._engine import _attention, _fallbacks, _pooling
    from sklearn_kernelpool._engine import _moments as _moment_pooling
    from sklearn_kernelpool._engine import _protocol as _engine
    from sklearn_kernelpool._engine import _query_chunks as _chunk_plan

    section = _engine.__doc__.split("The scorer protocol")[1]
    section = section.split("The ``degree=1`` solve")[0]
    names = set(re.findall(r"^- ``(\w+)", section, flags=re.M))
    names |= set(re.findall(r"and ``(\w+)\(", section))
    assert {
        "chunk_scores",
        "plan_batches",
        "nearest_candidates",
        "refit_scores",
    } <= names
    for scorer in set(_pooling.SCORERS.values()):
        missing = sorted(n for n in names if not hasattr(scorer, n))
        assert not missing, (scorer.__name__, missing)
    for module in (_pooling, _chunk_plan, _fallbacks, _moment_pooling, _attention):
        source = inspect.getsource(module)
        assert not re.search(r"algorithm [!=]= \"(brute|kd_tree|ball_tree)\"", source)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("return_std", [False, True])
def test_binned_engine_gives_the_documented_kernel_sums(degree, return_std):
    # The binned engine's kernel_sums are the columns of the shared layer
    # (pool_matrix, spread_matrix or moment_matrix, keys as (k - q) / h and
    # values centred), the total last: against a plain loop over the keys.
    from sklearn_kernelpool._binned import _engine as _binned
    from sklearn_kernelpool.kernels import KERNELS

    rng = np.random.default_rng(2)
    keys = rng.uniform(0, 1, size=(400, 1))
    values = np.sin(5 * keys) + 0.1 * rng.normal(size=(400, 1))
    weights = rng.uniform(0.5, 2.0, size=400)
    kernel, h = KERNELS["epanechnikov"], 0.1
    engine = _binned.fit_engine(
        keys, values, weights, kernel, h, degree, n_bins=4001, squares=return_std
    )
    queries = np.array([[0.05], [0.3], [0.71], [0.99]])
    sums, inside = engine.kernel_sums(queries, return_std)
    assert inside.all()
    center = weights @ values / weights.sum()
    expected = []
    for (q,) in queries:
        row = []
        a = [
            w * kernel.function(abs((k - q) / h))
            for (k,), w in zip(keys, weights, strict=True)
        ]
        u = [(k - q) / h for (k,) in keys]
        y = [v - center[0] for (v,) in values]
        if degree == 1:
            row += [
                sum(ai * ui for ai, ui in zip(a, u, strict=True)),
                sum(ai * ui * ui for ai, ui in zip(a, u, strict=True)),
            ]
        row.append(sum(ai * yi for ai, yi in zip(a, y, strict=True)))
        if degree == 1:
            row.append(sum(ai * ui * yi for ai, ui, yi in zip(a, u, y, strict=True)))
        if return_std:
            row.append(sum(ai * yi * yi for ai, yi in zip(a, y, strict=True)))
        row.append(sum(a))
        expected.append(row)
    expected = np.array(expected)
    scale = expected[:, -1:]  # relative to each query's total weight
    assert_allclose(sums / scale, expected / scale, atol=1e-4)
    if degree == 1:
        # The safeguard's sums of the squared weights, sum_i a_i**2, from
        # the squared weights binned and the squared kernel: the same sums,
        # squares and Kish's ratio of each query to the binning error.
        again, _, squares = engine.kernel_sums(queries, return_std, True)
        assert_allclose(again, sums, rtol=0, atol=0)
        expected_squares = [
            sum(
                (w * kernel.function(abs((k - q) / h))) ** 2
                for (k,), w in zip(keys, weights, strict=True)
            )
            for (q,) in queries
        ]
        assert_allclose(squares, expected_squares, rtol=1e-4)
        assert_allclose(
            squares / sums[:, -1] ** 2,
            np.array(expected_squares) / expected[:, -1] ** 2,
            rtol=1e-4,
        )
    else:
        with pytest.raises(ValueError, match="without the squared weights"):
            engine.kernel_sums(queries, return_std, True)
    # The estimates are those of the shared layer on these sums.
    mean, std, doubtful = engine.predict(queries, return_std)
    assert not doubtful.any()
    if degree == 0:
        assert_allclose(mean, sums[:, :1] / sums[:, -1:] + center, rtol=1e-12)
        if return_std:
            ratios = sums[:, :-1] / sums[:, -1:]
            assert_allclose(std[:, 0], np.sqrt(ratios[:, 1] - ratios[:, 0] ** 2))


def test_binned_engine_is_on_the_protocol():
    # The binned pool answers from kernel sums and hands what needs each
    # key's weight to the exact engine through named members only.
    import inspect
    import re

    from sklearn_kernelpool._binned import _engine as _binned
    from sklearn_kernelpool._binned import _estimates as _binned_estimates
    from sklearn_kernelpool._binned import _pool as _binned_pool
    from sklearn_kernelpool._engine import _protocol as _engine

    assert "kernel_sums(" in _engine.__doc__
    assert hasattr(_binned.BinnedEngine, "kernel_sums")
    pool = _binned_pool.BinnedKernelPool
    assert "__getattr__" not in vars(pool)
    for name in _binned_pool.EXACT_MEMBERS + ("attention_weights",):
        assert name in vars(pool), name
    source = inspect.getsource(_binned) + inspect.getsource(_binned_estimates)
    # The estimates come from the shared layer, not from a solve of its own.
    assert re.search(r"normalise\(", source) and re.search(r"\bsolve\(", source)
    assert "np.linalg.solve(cov, cross)" not in source


def test_binned_pool_hands_per_key_operations_to_the_exact_engine():
    from sklearn_kernelpool import KernelAttentionRegressor

    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, size=(200, 1))
    y = np.cos(4 * X[:, 0])
    binned = KernelAttentionRegressor(bandwidth=0.1, algorithm="binned").fit(X, y)
    exact = KernelAttentionRegressor(bandwidth=0.1, algorithm="brute").fit(X, y)
    Q = rng.uniform(0, 1, size=(7, 1))
    assert_allclose(binned.attention_weights(Q), exact.attention_weights(Q), rtol=1e-10)
    assert_allclose(
        binned.predict_gradient(Q), exact.predict_gradient(Q), rtol=1e-8, atol=1e-12
    )
    with pytest.raises(AttributeError):
        binned._pool.not_a_member  # noqa: B018 (no member reaches the exact engine unnamed)
