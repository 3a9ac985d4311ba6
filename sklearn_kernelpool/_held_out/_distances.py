"""Squared distances of pairs of points for the held-out passes: the
augmented rows whose product is the squared distance, and exact differences
where that expansion could round."""

import numpy as np

from .._engine._brute import _MAX_DISTANCE_ROUNDING
from .._engine._exact import pairwise_squared


def _augment(X):
    """``[x, 1, |x|^2]`` and ``[-2 x, |x|^2, 1]^T``: their product is ||x - x'||^2."""
    sq = np.einsum("ij,ij->i", X, X)
    ones = np.ones_like(sq)
    left = np.column_stack([X, ones, sq])
    right = np.ascontiguousarray(np.vstack([-2.0 * X.T, sq, ones]))
    return left, right


def squared_distances(left, right, out):
    """Squared distances of augmented rows into ``out``, clipped at zero."""
    np.matmul(left, right, out=out)
    return np.maximum(out, 0.0, out=out)


def exact_if_far(d2, left, right, bandwidth):
    """``d2`` of augmented rows, from exact differences where it may round.

    The expansion rounds a squared distance by a few ``eps (|x|^2 +
    |x'|^2)``, at most ``3 eps min(|x|^2, |x'|^2)`` plus a part relative to
    the distance itself: where the first may exceed the engine's limit
    (``_MAX_DISTANCE_ROUNDING`` squared bandwidths, for the smallest
    ``bandwidth``), as for groups of points far from the centre of the data,
    the block is recomputed from exact differences, as the engine does.
    """
    if not d2.size:
        return d2
    reach = min(float(left[:, -1].max()), float(right[-2].max()))
    eps = float(np.finfo(np.float64).eps)
    if 3.0 * eps * reach <= _MAX_DISTANCE_ROUNDING * bandwidth**2:
        return d2
    # right holds -2 x^T: halving it is exact.
    d2[...] = pairwise_squared(left[:, :-2], -0.5 * right[:-2].T, None)
    return d2
