"""The held-out sums of adaptive-width compact kernels from a tree's
neighbour lists equal those of the dense rows of every pair."""

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import KFold

from sklearn_kernelpool._engine._exact import pairwise_squared
from sklearn_kernelpool._held_out._adaptive import AdaptiveHeldOut
from sklearn_kernelpool._held_out._neighbours_adaptive import (
    NeighbourAdaptiveHeldOut,
)
from sklearn_kernelpool._held_out._pool import HeldOut
from sklearn_kernelpool.kernels import KERNELS

COMPACT = sorted({k.name for k in KERNELS.values() if k.is_compact})
COUNTS = [1, 2, 4, 11]


def _data(n, d, seed=0):
    """Points on a grid (ties of the k-th neighbour, pairs on the support
    edge), a few points repeated four times (widths of zero for small k),
    values, and weights of which some are zero (also on repeated points)."""
    rng = np.random.default_rng(seed)
    step = 0.05 if d == 1 else 0.3
    X = np.round(rng.normal(0.0, 1.0 if d == 1 else 2.0, (n, d)) / step) * step + 3.0
    X[-40:] = np.repeat(X[:10], 4, axis=0)
    Y = np.c_[np.sin(2 * X[:, 0]), X.sum(axis=1)] + rng.normal(0, 0.1, (n, 2))
    w = rng.uniform(0.5, 2.0, n)
    w[rng.choice(n, n // 10, replace=False)] = 0.0
    w[[0, n - 1]] = 0.0
    return X, Y, w


def _folds(n):
    groups = np.empty(n, dtype=np.intp)
    for fold, (_, test) in enumerate(
        KFold(5, shuffle=True, random_state=0).split(np.zeros(n))
    ):
        groups[test] = fold
    return groups


def _engines(X, Y, w, kernels, degree, counts=COUNTS):
    held = HeldOut(X, Y, w, kernels, np.empty(0), degree=degree)
    return NeighbourAdaptiveHeldOut(held, counts), AdaptiveHeldOut(held, counts)


def _assert_sums_equal(sparse, dense, rtol=1e-10):
    """Equal to ``rtol`` of the largest magnitude of each column of each
    candidate (moments near a centre cancel)."""
    pairs = [(sparse.moments, dense.moments)]
    if dense.squares is None:
        assert sparse.squares is None
    else:
        pairs.append((sparse.squares[..., None], dense.squares[..., None]))
    for got, expected in pairs:
        scale = np.abs(expected).max(axis=2, keepdims=True)
        scale[scale == 0] = 1.0
        assert_allclose(got / scale, expected / scale, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("cv", ["loo", "kfold"])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("kernel", COMPACT)
def test_sums_and_predictions_equal_the_dense_pass(kernel, d, degree, cv):
    n = 240
    X, Y, w = _data(n, d)
    sparse, dense = _engines(X, Y, w, [KERNELS[kernel]], degree)
    groups = None if cv == "loo" else _folds(n)
    sums = sparse.sums_excluding_groups(groups)
    reference = dense.sums_excluding_groups(groups)
    _assert_sums_equal(sums, reference)
    rows = np.arange(n)
    got = sparse.predictions(sums, rows, groups)
    expected = dense.predictions(reference, rows, groups)
    assert_allclose(got[0], expected[0], rtol=1e-8, atol=1e-8)
    for flags, flags_expected in zip(got[1:], expected[1:], strict=True):
        assert_array_equal(flags, flags_expected)


@pytest.mark.parametrize("d", [1, 3])
def test_in_sample_sums_equal_the_dense_pass(d):
    # The fits on all the data: the own key included, at its own width.
    X, Y, w = _data(200, d, seed=1)
    kernels = [KERNELS["epanechnikov"], KERNELS["boxcar"], KERNELS["triangular"]]
    sparse, dense = _engines(X, Y, w, kernels, 1)
    sums = sparse.sums_excluding_groups(None, in_sample=True)
    reference = dense.sums_excluding_groups(None, in_sample=True)
    _assert_sums_equal(sums, reference)
    _assert_sums_equal(sparse.full_sums, dense.full_sums)
    assert_allclose(sparse.full_own, dense.full_own, rtol=1e-14, atol=0)
    assert_allclose(
        sparse.in_sample(sums)[0], dense.in_sample(reference)[0], rtol=1e-8, atol=1e-8
    )


@pytest.mark.parametrize("degree", [0, 1])
def test_sums_of_a_split_equal_the_dense_pass(degree):
    n = 240
    X, Y, w = _data(n, 3, seed=2)
    kernels = [KERNELS["epanechnikov"], KERNELS["tricube"]]
    sparse, dense = _engines(X, Y, w, kernels, degree)
    groups = _folds(n)
    for fold in range(5):
        test, train = np.flatnonzero(groups == fold), np.flatnonzero(groups != fold)
        _assert_sums_equal(
            sparse.sums_split(test, train), dense.sums_split(test, train)
        )


@pytest.mark.parametrize("kernel", ["boxcar", "epanechnikov", "tricube"])
def test_leave_one_out_sums_equal_a_plain_loop(kernel):
    # The defining formula: r_i the k-th smallest distance to the other keys
    # of positive weight (ties counted one by one); the keys strictly within
    # r_i pooled with w_j alpha(d_ij / r_i); where r_i = 0, the keys at
    # distance zero with their weights.
    n = 90
    X, Y, w = _data(n, 3, seed=3)
    kernel = KERNELS[kernel]
    sparse, _ = _engines(X, Y, w, [kernel], 1)
    sums = sparse.sums_excluding_groups(None)
    weights, M = sparse.weights, sparse.unit_moments
    for m, k in enumerate(COUNTS):
        for i in range(n):
            others = [j for j in range(n) if j != i and weights[j] > 0]
            d2 = np.array([np.sum((X[i] - X[j]) ** 2) for j in others])
            r2 = np.sort(d2)[k - 1]
            if r2 == 0:
                a = np.where(d2 == 0, 1.0, 0.0)
            else:
                u2 = d2 / r2
                a = np.where(u2 < 1, kernel.squared_function(np.minimum(u2, 1)), 0.0)
            a = a * weights[others]
            assert_allclose(sums.moments[0, m, i], a @ M[others], atol=1e-12)
            assert_allclose(sums.squares[0, m, i], a @ a, atol=1e-12)


def test_small_working_memory_gives_the_same_sums():
    # Chunks of a few rows, sized from the pairs of the previous chunk.
    X, Y, w = _data(240, 3, seed=4)
    sparse, dense = _engines(X, Y, w, [KERNELS["biweight"]], 1)
    with sklearn.config_context(working_memory=0.005):
        got = sparse.sums_excluding_groups(None)
    _assert_sums_equal(got, dense.sums_excluding_groups(None))


def test_refuses_too_many_neighbours_and_wide_kernels():
    X, Y, w = _data(60, 2)
    held = HeldOut(X, Y, w, [KERNELS["epanechnikov"]], np.empty(0))
    n_positive = int(np.count_nonzero(w))
    with pytest.raises(ValueError, match="n_neighbors"):
        NeighbourAdaptiveHeldOut(held, [n_positive]).sums_excluding_groups(None)
    wide = HeldOut(X, Y, w, [KERNELS["gaussian"]], np.empty(0))
    with pytest.raises(ValueError, match="compact support.*'gaussian'"):
        NeighbourAdaptiveHeldOut(wide, [3])


def test_the_distances_of_the_lists_are_those_of_the_dense_rows():
    # The same bits: the widths and the edge are decided on the same numbers.
    X, _, _ = _data(50, 3)
    rows, cols = np.triu_indices(50, 1)
    from sklearn_kernelpool._engine._exact import paired_squared

    assert_array_equal(
        paired_squared(X[rows], X[cols], None), pairwise_squared(X, X, None)[rows, cols]
    )
