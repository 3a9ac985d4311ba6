"""Held-out local quadratic fits of many points from pooled moments.

The fit of :mod:`.._engine._local_quadratic` at a query, without its
safeguard, is the weighted least-squares quadratic, whose prediction does
not depend on the basis of the quadratics: in the basis
``phi(z) = [1, z, upper(z z^T)]`` of ``z = (k - c) / s`` about a centre ``c``
it is ``phi_q^T A^-1 b`` with ``A = sum_i p_i phi_i phi_i^T`` and
``b = sum_i p_i phi_i y_i``, and the leverages of the safeguard are
``1 + D1**2 = phi1_q^T A1^-1 phi1_q`` (the linear block ``A1``) and
``1 + D1**2 + Dr**2 = phi_q^T A^-1 phi_q``. For a batch of held-out points
all of it comes from one product of their weights with the per-key columns
``[upper(phi phi^T), phi y]`` about the batch's centre (a matrix product,
where the fits of :mod:`.._engine._local_quadratic` compute each point's
design alone).

The moments about ``c`` lose accuracy as the points' local means move away
from it in units of their local spread (to the fourth power), so the
batches hold points close together (a k-d tree's order), and a point whose
normal matrix is not well conditioned (its smallest eigenvalue, with unit
diagonal, below :data:`MIN_EIGENVALUE`: rank-deficient or nearly so) is
left to the exact per-point fit, which also decides its rank.
"""

import functools

import numpy as np
from sklearn.neighbors import KDTree

from .._engine._safeguard import kish_ratio, slope_shrinkage

#: The smallest eigenvalue of the normal matrix (scaled to a unit diagonal)
#: of a point fitted from the pooled moments; below it, the exact fit.
MIN_EIGENVALUE = 1e-3


def spatial_order(points):
    """An order of ``points`` (n, d) that keeps near points together: that of
    the leaves of a k-d tree."""
    if len(points) < 2:
        return np.arange(len(points))
    return np.asarray(KDTree(points, leaf_size=16).get_arrays()[1], dtype=np.intp)


def _basis(Z, pairs):
    """``[1, z, upper(z z^T)]`` of the rows of ``Z``."""
    first, second = pairs
    return np.hstack([np.ones((len(Z), 1)), Z, Z[:, first] * Z[:, second]])


@functools.lru_cache(maxsize=16)
def _monomials(d):
    """The distinct monomials of the normal matrix of a quadratic in ``d``
    features, those of degree at most 4: ``(first, second, entry)``, a pair
    of columns of :func:`_basis` whose product is each monomial, and the
    monomial of each entry of the upper triangle of the normal matrix."""
    first, second = np.triu_indices(d)
    basis = np.zeros((1 + d + len(first), d), dtype=np.intp)
    basis[1 + np.arange(d), np.arange(d)] = 1
    rows = 1 + d + np.arange(len(first))
    np.add.at(basis, (rows, first), 1)
    np.add.at(basis, (rows, second), 1)
    i, j = np.triu_indices(len(basis))
    _, pick, entry = np.unique(
        basis[i] + basis[j], axis=0, return_index=True, return_inverse=True
    )
    return i[pick], j[pick], entry.ravel()


def _inverse(A):
    """Inverses of symmetric matrices (n, P, P) through their unit-diagonal
    scaling, and whether each is well conditioned."""
    root = np.sqrt(np.maximum(np.einsum("rii->ri", A), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(root > 0, 1.0 / root, 0.0)
    scaled = A * scale[:, :, None] * scale[:, None, :]
    values, vectors = np.linalg.eigh(scaled)
    ok = np.all(root > 0, axis=1) & (values[:, 0] > MIN_EIGENVALUE)
    # (the others go to the exact fit: their inverses are not used)
    values = np.where(ok[:, None], values, 1.0)
    inverse = np.matmul(vectors / values[:, None, :], vectors.transpose(0, 2, 1))
    return inverse * scale[:, :, None] * scale[:, None, :], ok


def pooled_quadratic(scores, keys, values, queries, kernel):
    """Safeguarded local quadratic fits of a batch of points.

    Parameters
    ----------
    scores : ndarray of shape (n_rows, n_keys)
        The unnormalised weights of each point over the keys (rows of
        positive total).
    keys : ndarray of shape (n_keys, n_features)
        The keys.
    values : ndarray of shape (n_keys, n_outputs)
        Their centred values.
    queries : ndarray of shape (n_rows, n_features)
        The points.
    kernel : Kernel
        The kernel of the weights, for the safeguard.

    Returns
    -------
    mean : ndarray of shape (n_rows, n_outputs)
        The fits (only where ``ok``).
    ok : ndarray of bool of shape (n_rows,)
        The points fitted here; the others are left to the exact fit.
    s1 : ndarray of shape (n_rows,)
        The safeguard's factors of the slopes.
    own : ndarray of shape (n_rows,)
        The equivalent-kernel weight of a key at the point itself over its
        normalised weight ``p``: ``1 + s1 (lev1 - 1) + s2 (lev2 - lev1)``
        (the self weight ``L_ii = p_ii own`` of an in-sample fit).
    """
    d = keys.shape[1]
    c = queries.mean(axis=0)
    # The scale of the points' neighbourhoods: the weighted spread of the
    # keys about the centre.
    spread = np.sum(scores @ np.sum((keys - c) ** 2, axis=1))
    spread = np.sqrt(spread / (np.sum(scores) * d))
    s = spread if np.isfinite(spread) and spread > 0 else 1.0
    pairs = np.triu_indices(d)
    Z = (keys - c) / s
    phi = _basis(Z, pairs)
    P = phi.shape[1]
    upper = np.triu_indices(P)
    left, right, entry = _monomials(d)
    k = values.shape[1]
    columns = [phi[:, left] * phi[:, right]]
    columns.append((phi[:, :, None] * values[:, None, :]).reshape(len(phi), -1))
    sums = scores @ np.hstack(columns)
    total = sums[:, 0].copy()  # the monomial 1 sorts first (1 * 1)
    sums /= total[:, None]
    A = np.empty((len(sums), P, P))
    A[:, upper[0], upper[1]] = sums[:, entry]
    A[:, upper[1], upper[0]] = sums[:, entry]
    b = sums[:, len(left) :].reshape(-1, P, k)
    inverse, ok = _inverse(A)
    inverse1, _ = _inverse(np.ascontiguousarray(A[:, : d + 1, : d + 1]))
    phi_q = _basis((queries - c) / s, pairs)
    u = np.einsum("rpq,rq->rp", inverse, phi_q)
    u1 = np.einsum("rpq,rq->rp", inverse1, phi_q[:, : d + 1])
    f2 = np.einsum("rp,rpk->rk", u, b)
    f1 = np.einsum("rp,rpk->rk", u1, b[:, : d + 1])
    ybar = b[:, 0]
    kish = kish_ratio(np.einsum("rn,rn->r", scores, scores), total, kernel)
    lev1 = np.einsum("rp,rp->r", u1, phi_q[:, : d + 1])
    lev2 = np.einsum("rp,rp->r", u, phi_q)
    with np.errstate(invalid="ignore"):
        s1 = slope_shrinkage(np.maximum(lev1 - 1.0, 0.0), kish)
        s2 = slope_shrinkage(np.maximum(lev2 - 1.0, 0.0), kish)
    mean = ybar + s1[:, None] * (f1 - ybar) + s2[:, None] * (f2 - f1)
    ok &= np.all(np.isfinite(mean), axis=1)
    own = 1.0 + s1 * (lev1 - 1.0) + s2 * (lev2 - lev1)
    return mean, ok, s1, own
