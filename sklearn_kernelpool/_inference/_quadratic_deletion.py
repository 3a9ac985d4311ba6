"""Leave-one-out fits of the local quadratic fit (``degree=2``) at a query.

The fit of :mod:`.._engine._local_quadratic` at ``q`` from normalised
weights ``p`` combines three weighted least-squares fits of the values: the
local mean ``ybar``, the local line ``f1`` and the local quadratic ``f2``,
as ``ybar + s1 (f1 - ybar) + s2 (f2 - f1)``. In the basis ``[1, K, R]`` of
the nested design (orthogonal under ``p``) the normal matrices are
``diag(1, C)`` and ``diag(1, C, Cr)``, so that for a key ``i`` of weight
``w = p_i`` the case-deletion (Sherman--Morrison) formulas of each fit need
only, per key, ``u_i = phi_q^T A^-1 phi_i`` (the equivalent-kernel factor),
``h_i = w phi_i^T A^-1 phi_i`` (the key's leverage) and the residual ``e_i``
of the fit at the key (Cook & Weisberg, "Residuals and Influence in
Regression", 1982)::

    f_{-i} = f - w u_i e_i / (1 - h_i)
    L_{-i} = (1 - w) (L + w u_i**2 / (1 - h_i))

with ``L = phi_q^T A^-1 phi_q``, ``1 + D1**2`` for the line and
``1 + D1**2 + Dr**2`` for the quadratic (the leverage of the safeguard, for
the weights normalised without the key), ``ybar_{-i} = ybar - w e0_i / (1 -
w)`` and ``kish_{-i} = (kish - w**2) / (1 - w)**2``. The safeguard's factors
of the fit without the key follow from these, as in the fit.

The formulas are exact where both blocks have full rank; rows whose design
is rank-deficient, or where a key carries the rank (``1 - h_i`` below
:data:`MIN_REST`), are refitted without each key by definition.
"""

import numpy as np

from .._engine._local_quadratic import _rows, quadratic_fit
from .._engine._safeguard import slope_shrinkage
from ._sparse_case_deletion import _TINY_REST

#: The smallest ``1 - h_i`` of a key for which a row's deleted fits are
#: taken by the case-deletion formulas; below it, by refits.
MIN_REST = 1e-6


def _closed_form(batch, Y):
    """The fits of a :class:`_Rows` batch without each key it uses, shape
    (n_rows, n_used, n_outputs), and the rows where the formulas hold (see
    the module docstring)."""
    w, K, R = batch.p, batch.K, batch.R
    d, P2 = K.shape[2], R.shape[2]
    ybar, E, beta, gamma = batch.coefficients(Y)
    e1 = E - np.matmul(K, beta)
    e2 = e1 - np.matmul(R, gamma)
    c1 = np.einsum("rnf,rfg,rng->rn", K, batch.C_pinv, K)
    h1 = w * (1.0 + c1)
    h2 = h1 + w * np.einsum("rnp,rpq,rnq->rn", R, batch.Cr_pinv, R)
    ok = (batch.rank == d) & (batch.quadratic_rank == P2)
    ok &= np.all((w == 0) | (1.0 - h2 >= MIN_REST), axis=1)
    u1 = 1.0 + np.einsum("rnf,rf->rn", K, batch.a1)
    u2 = u1 + np.einsum("rnp,rp->rn", R, batch.a2)
    f1 = ybar + np.einsum("rf,rfk->rk", batch.offset, beta)
    f2 = f1 + np.einsum("rp,rpk->rk", batch.r_q, gamma)
    L1 = 1.0 + np.einsum("rf,rf->r", batch.offset, batch.a1)[:, None]
    L2 = L1 + np.einsum("rp,rp->r", batch.r_q, batch.a2)[:, None]
    rest = 1.0 - w
    kish = batch.kish[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mean = ybar[:, None] - (w / rest)[:, :, None] * E
        line = f1[:, None] - (w * u1 / (1.0 - h1))[:, :, None] * e1
        quadratic = f2[:, None] - (w * u2 / (1.0 - h2))[:, :, None] * e2
        kish = np.where(kish == 0, 0.0, (kish - w * w) / (rest * rest))
        lev1 = rest * (L1 + w * u1 * u1 / (1.0 - h1))
        lev2 = rest * (L2 + w * u2 * u2 / (1.0 - h2))
        s1 = slope_shrinkage(np.maximum(lev1 - 1.0, 0.0), kish)[:, :, None]
        s2 = slope_shrinkage(np.maximum(lev2 - 1.0, 0.0), kish)[:, :, None]
        mu = mean + s1 * (line - mean) + s2 * (quadratic - line)
    return mu, ok


def _refits(p, keys, Y, query, layout, kernel, drop):
    """The fits of one row without each key of ``drop``, by definition."""
    rows = np.repeat(p[None], len(drop), axis=0)
    rows[np.arange(len(drop)), drop] = 0.0
    total = rows.sum(axis=1, keepdims=True)
    out = np.full((len(drop), Y.shape[1]), np.nan)
    fine = total[:, 0] > 0
    if np.any(fine):
        queries = np.repeat(query[None], int(np.count_nonzero(fine)), axis=0)
        out[fine] = quadratic_fit(
            rows[fine] / total[fine], keys, Y, queries, layout, False, kernel=kernel
        )[0]
    return out


def deleted_quadratic(P, keys, Y, Q, layout, kernel, cols=None):
    """The local quadratic fits at the queries without each key.

    Parameters
    ----------
    P : ndarray of shape (n_rows, n_keys)
        Normalised weights (float64) of non-empty rows.
    keys, Y : ndarray
        The scaled keys and centred values of the engine.
    Q : ndarray of shape (n_rows, n_features)
        The queries, in the frame of ``keys``.
    layout : QuadraticLayout
        The layout of the fits.
    kernel : Kernel
        The kernel of the weights, for the safeguard.
    cols : ndarray of shape (n_rows,) or None
        One key per row to leave out, or None for every key.

    Returns
    -------
    mu : ndarray of shape (n_rows, n_keys or 1, n_outputs)
        The fits without each key (without a key of weight zero: the fit).
    hard : ndarray of bool of shape (n_rows, n_keys or 1)
        The fits without a key that held (nearly) all of the row's weight:
        the row's fit without it falls back to ``on_empty``, left to the
        caller (an engine without the key).
    """
    r, n = P.shape
    mu = np.empty((r, n if cols is None else 1, Y.shape[1]))
    own = P if cols is None else P[np.arange(r), cols][:, None]
    hard = (own > 0) & ~(1.0 - own >= _TINY_REST)
    for rows, batch in _rows(P, keys, Q, layout, None, kernel):
        full, _ = batch.fit(Y, False)
        fits, ok = _closed_form(batch, Y)
        used = np.arange(n)[batch.used]
        for j, row in enumerate(range(r)[rows]):
            mu[row] = full[j]
            weighed = used[batch.p[j] > 0]
            at = (
                weighed
                if cols is None
                else np.intersect1d(weighed, cols[row : row + 1])
            )
            if not len(at):
                continue
            if ok[j]:
                out = fits[j, np.searchsorted(used, at)]
            else:
                out = _refits(P[row], keys, Y, Q[row], layout, kernel, at)
            mu[row, at if cols is None else 0] = out
    return mu, hard
