"""The held-out sums without each group: blocks that span groups."""

import numpy as np
import pytest

from sklearn_kernelpool._held_out._pool import HeldOut
from sklearn_kernelpool._held_out._sums import BLOCK, _blocks
from sklearn_kernelpool.kernels import KERNELS

GROUPINGS = {
    "one per point": lambda n, rng: np.arange(n),
    "five folds": lambda n, rng: np.repeat(np.arange(5), -(-n // 5))[:n],
    "groups of 10": lambda n, rng: np.arange(n) // 10,
    "groups larger than a block": lambda n, rng: np.arange(n) // (BLOCK + 44),
    "mixed sizes": lambda n, rng: np.repeat(
        np.arange(n), rng.choice([1, 3, 40, 300], size=n)
    )[:n],
}


@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("n", [7, 700, 2000])
def test_blocks_do_not_grow_with_the_number_of_groups(grouping, n):
    rng = np.random.default_rng(0)
    groups = GROUPINGS[grouping](n, rng)
    blocks = _blocks(n, groups)
    starts = [b.start for b in blocks]
    stops = [b.stop for b in blocks]
    assert starts[0] == 0 and stops[-1] == n and starts[1:] == stops[:-1]
    sizes = np.diff([0, *stops])
    assert np.all((sizes > 0) & (sizes <= BLOCK))
    # All blocks but the last hold at least half a block of points.
    assert np.all(sizes[:-1] >= BLOCK // 2)
    assert len(blocks) <= 2 * n // BLOCK + 1
    if grouping == "groups larger than a block":
        # Pairs within a group are skipped whole only if a block holds one.
        spanning = [b for b in blocks if groups[b.start] != groups[b.stop - 1]]
        assert len(spanning) <= len(np.unique(groups))


@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("degree", [0, 1])
def test_sums_without_each_group_equal_those_of_its_split(grouping, degree):
    # Each group's sums over the points of the other groups, against the
    # sums of the group's points over its complement (a separate pass).
    rng = np.random.default_rng(1)
    n = 700  # several blocks
    X = rng.normal(size=(n, 2))
    Y = np.c_[np.sin(X[:, 0]), X[:, 1] ** 2] + rng.normal(0, 0.1, (n, 2))
    w = rng.uniform(0.5, 2.0, n)
    groups = rng.permutation(GROUPINGS[grouping](n, rng))
    kernels = [KERNELS["gaussian"], KERNELS["epanechnikov"]]
    held = HeldOut(X, Y, w, kernels, np.array([0.3, 1.0]), degree=degree)
    sums = held.sums_excluding_groups(groups)
    reference = np.empty_like(sums.moments)
    squares = np.empty((2, 2, n))
    for g in np.unique(groups):
        inside = np.flatnonzero(groups == g)
        outside = np.flatnonzero(groups != g)
        split = held.sums_split(inside, outside)
        reference[:, :, inside] = split.moments
        if degree == 1:
            squares[:, :, inside] = split.squares
    # Moments cancel in some columns: tolerances relative to each column.
    scale = 1e-12 * np.abs(reference).max(axis=(0, 1, 2))
    close = np.abs(sums.moments - reference) <= 1e-10 * np.abs(reference) + scale
    assert np.all(close)
    if degree == 1:
        # The sums of the squared weights (positive terms): relative.
        np.testing.assert_allclose(sums.squares, squares, rtol=1e-10)
    else:
        assert sums.squares is None
    if grouping == "one per point":
        loo = held.sums_excluding_groups(None)
        assert np.all(
            np.abs(loo.moments - sums.moments) <= 1e-10 * np.abs(sums.moments) + scale
        )
        if degree == 1:
            np.testing.assert_allclose(loo.squares, sums.squares, rtol=1e-10)
