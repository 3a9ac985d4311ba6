"""The held-out sums of compact kernels from a tree's neighbour lists equal
those of the dense pass over every pair."""

import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import KFold

from sklearn_kernelpool._engine._exact import pairwise_squared
from sklearn_kernelpool._held_out._neighbours import NeighbourHeldOut
from sklearn_kernelpool._held_out._pool import HeldOut
from sklearn_kernelpool.kernels import KERNELS

COMPACT = sorted({k.name for k in KERNELS.values() if k.is_compact})


def _data(n, d, seed=0):
    """Points on a grid (many pairs exactly on a support edge), values,
    and weights of which some are zero."""
    rng = np.random.default_rng(seed)
    step = 0.05 if d == 1 else 0.3
    X = np.round(rng.normal(0.0, 1.0 if d == 1 else 2.0, (n, d)) / step) * step + 3.0
    Y = np.c_[np.sin(2 * X[:, 0]), X.sum(axis=1)] + rng.normal(0, 0.1, (n, 2))
    w = rng.uniform(0.5, 2.0, n)
    w[rng.choice(n, n // 10, replace=False)] = 0.0
    # Widths that are multiples of the grid step: distances on the edge.
    widths = np.array([3, 8, 20] if d == 1 else [3, 5, 7]) * step
    return X, Y, w, widths


def _folds(n):
    groups = np.empty(n, dtype=np.intp)
    for fold, (_, test) in enumerate(
        KFold(5, shuffle=True, random_state=0).split(np.zeros(n))
    ):
        groups[test] = fold
    return groups


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
    # The dense pass expands squared distances, which rounds those of
    # coincident points to about eps |x|**2 instead of 0: a kernel with a
    # cusp at 0 (1 - |u|) turns that into about sqrt(eps) |x| / h. The
    # neighbour lists take exact differences (the plain loop below checks
    # them to 1e-12 for that kernel).
    rtol = 1e-6 if KERNELS[kernel].cusp else 1e-10
    n = 300
    X, Y, w, widths = _data(n, d)
    kernels = [KERNELS[kernel]]
    sparse = NeighbourHeldOut(X, Y, w, kernels, widths, degree=degree)
    dense = HeldOut(X, Y, w, kernels, widths, degree=degree)
    groups = None if cv == "loo" else _folds(n)
    sums = sparse.sums_excluding_groups(groups)
    reference = dense.sums_excluding_groups(groups)
    _assert_sums_equal(sums, reference, rtol)
    assert_array_equal(sparse.log_scale, 0.0)
    rows = np.arange(n)
    got = sparse.predictions(sums, rows, groups)
    expected = dense.predictions(reference, rows, groups)
    assert_allclose(got[0], expected[0], rtol=100 * rtol, atol=100 * rtol)
    for flags, flags_expected in zip(got[1:], expected[1:], strict=True):
        assert_array_equal(flags, flags_expected)


@pytest.mark.parametrize("degree", [0, 1])
def test_sums_of_a_split_equal_the_dense_pass(degree):
    n = 300
    X, Y, w, widths = _data(n, 3, seed=1)
    kernels = [KERNELS["epanechnikov"], KERNELS["boxcar"]]
    sparse = NeighbourHeldOut(X, Y, w, kernels, widths, degree=degree)
    dense = HeldOut(X, Y, w, kernels, widths, degree=degree)
    groups = _folds(n)
    for fold in range(5):
        test, train = np.flatnonzero(groups == fold), np.flatnonzero(groups != fold)
        _assert_sums_equal(
            sparse.sums_split(test, train), dense.sums_split(test, train)
        )


@pytest.mark.parametrize("kernel", ["tricube", "epanechikov", "boxcar"])
def test_leave_one_out_sums_equal_a_plain_loop(kernel):
    # The defining formula: sum over the other keys of alpha(u) M_j, with
    # u**2 from exact differences and alpha(u) = 0 for u >= 1.
    n = 80
    X, Y, w, widths = _data(n, 3, seed=2)
    kernel = KERNELS[kernel]
    held = NeighbourHeldOut(X, Y, w, [kernel], widths, degree=1)
    sums = held.sums_excluding_groups(None)
    for m, h in enumerate(widths):
        u2 = pairwise_squared(X, X, h)
        alpha = np.where(u2 < 1.0, kernel.squared_function(u2.copy()), 0.0)
        np.fill_diagonal(alpha, 0.0)
        assert_allclose(sums.moments[0, m], alpha @ held.moments, atol=1e-12)
        assert_allclose(sums.squares[0, m], alpha**2 @ held.weights**2, atol=1e-12)


def test_small_working_memory_gives_the_same_sums():
    # Chunks of a few rows, sized from the pairs of the previous chunk.
    X, Y, w, widths = _data(300, 3, seed=3)
    kernels = [KERNELS["epanechnikov"]]
    held = NeighbourHeldOut(X, Y, w, kernels, widths, degree=1)
    expected = HeldOut(X, Y, w, kernels, widths, degree=1)
    groups = _folds(300)
    with sklearn.config_context(working_memory=0.01):
        got = held.sums_excluding_groups(groups)
    _assert_sums_equal(got, expected.sums_excluding_groups(groups))


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "constant"])
def test_refuses_kernels_of_unbounded_support(kernel):
    X, Y, w, widths = _data(50, 2)
    kernels = [KERNELS["epanechnikov"], KERNELS[kernel]]
    with pytest.raises(ValueError, match=f"compact support.*'{kernel}'"):
        NeighbourHeldOut(X, Y, w, kernels, widths)
