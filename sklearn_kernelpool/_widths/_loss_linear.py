"""The leave-one-out loss of local-linear (degree 1) held-out fits at
per-feature widths, and its gradient (:func:`._learning.loo_loss`).

The held-out fits are those of the fitted estimator, safeguard included
(:mod:`.._engine._safeguard`): at point ``i``, with ``a_ij`` the scores of the
keys, ``T = sum_j a_ij``, ``p_j = a_ij / T``, ``m``, ``ybar``, ``C`` and
``c`` the local means, covariance and cross-covariance, ``beta = C^+ c`` the
plain slope, ``delta = z_i - m``, ``lever = C^+ delta``, ``D**2 = lever .
delta``, ``t = beta . delta`` and Kish's ``kish = sum_j p_j**2 = 1 / n_eff``
(0 for the constant kernel, :func:`.._engine._safeguard.kish_ratio`), the
prediction is ``ybar + s t`` with ``s = slope_shrinkage(D**2, kish)``. With
``l_j = lever . (z_j - m)``, the residual ``e_j = y_j - ybar - beta . (z_j -
m)`` of key ``j`` under the plain line, and ``s' = ds / d(D**2)``, ``s_k = ds
/ d kish``, its derivative in the score of key ``j`` is::

    T dpred / da_j = (1 - s)(y_j - ybar) + s (1 + l_j) e_j
                     + s' t (D**2 + 1 - (1 + l_j)**2) + 2 s_k t (p_j - kish),

from ``T dm = z_j - m``, ``T dybar = y_j - ybar``, ``T dC = (z_j - m)(z_j -
m)^T - C``, ``T dc = (z_j - m)(y_j - ybar)^T - c`` (so ``T dbeta = C^+ (z_j -
m) e_j^T``), ``dD**2 = -2 lever . dm - lever^T dC lever``, the rank of ``C``
held (``C C^+ c = c`` and ``lever^T C lever = D**2``), and ``T dkish / da_j =
2 (p_j - kish)`` (``sum_j p_j dp_j`` of the normalised weights, ``T dp_k /
da_j = [j = k] - p_k``; the constant kernel's ``kish`` is 0 at every width).
With ``s = 1`` it is ``(1 + l_j) e_j``, ``T`` times the equivalent kernel
times the residual. The equivalent kernel of the fit is ``g_j = (1 + s l_j)
/ T``; the diagonal of the smoother matrix of the in-sample fits is ``L_ii =
a_ii g_i = a_ii (1 + s D**2) / T``, whose derivative is::

    T**2 dL_ii / (a_ii da_j) = -(1 + s D**2)
                               + (s + s' D**2)(D**2 + 1 - (1 + l_j)**2)
                               + 2 s_k D**2 (p_j - kish).
"""

from typing import NamedTuple

import numpy as np

from .._engine._safeguard import (
    kish_ratio,
    slope_shrinkage,
    slope_shrinkage_derivative,
)
from .._utils._working_memory import working_memory_bytes
from ._terms import (
    _BYTES_PER_KEY,
    _CHUNK_BYTES,
    _EPS,
    _objective,
    _score_chunks,
    scaled_points,
)


def _solve_local(cov, rhs, tol):
    """``C^+ rhs`` per row, ``C^+`` the pseudo-inverse over the eigenvalues
    of ``C`` above ``tol`` (the minimum-norm rule of :mod:`.._engine._local_linear`):
    zero on the rows of rank 0, which keep the local mean.

    A row is rank-deficient when the smallest eigenvalue of ``C`` is within
    ``tol``. Batched Cholesky
    factorisations are far cheaper than eigendecompositions, so they screen
    the rows: every Cholesky pivot is at least the smallest eigenvalue, and
    a chunk whose factorisation fails or has a pivot within twice ``tol``
    is decided on its eigenvalues. Otherwise the rows whose smallest pivot
    is within ``1e3 tol`` are checked on their eigenvalues, and the others
    are taken as regular: this loss may then keep, as regular, a row whose
    covariance is singular by a conditioning worse than that margin, where
    the fitted estimator takes the local mean.

    Returns ``C^+ rhs``.
    """
    try:
        pivots = np.diagonal(np.linalg.cholesky(cov), axis1=1, axis2=2) ** 2
    except np.linalg.LinAlgError:
        pivots = None
    if pivots is not None and np.all(pivots.min(axis=1) > 2 * tol):
        # The smallest eigenvalue may still lie below a pivot: decide the
        # rows near the threshold on it.
        close = np.flatnonzero(pivots.min(axis=1) <= 1e3 * tol)
        if not len(close) or np.all(np.linalg.eigvalsh(cov[close])[:, 0] > tol[close]):
            return np.linalg.solve(cov, rhs)
    eigenvalues, vectors = np.linalg.eigh(cov)
    kept = eigenvalues > tol[:, None]
    with np.errstate(divide="ignore"):
        inverse = np.where(kept, 1.0 / eigenvalues, 0.0)
    projected = np.einsum("cfe,cfk->cek", vectors, rhs)
    return np.einsum("cfe,cek->cfk", vectors, inverse[:, :, None] * projected)


class ShrunkFits(NamedTuple):
    """The plain slopes, levers and safeguard of rows of held-out fits
    (:func:`shrunk_fits`), each of shape (c, ...)."""

    #: The plain slopes ``C^+ c``, (c, d, p).
    beta: np.ndarray
    #: ``C^+ delta``, (c, d).
    lever: np.ndarray
    #: ``beta . delta``, (c, p): the prediction is ``ybar + s t``.
    t: np.ndarray
    #: ``D**2 = lever . delta``, (c,).
    distance_sq: np.ndarray
    #: ``1 / n_eff`` of each row's weights, (c,).
    kish: np.ndarray
    #: The safeguard's factor :func:`.._engine._safeguard.slope_shrinkage`.
    s: np.ndarray
    #: Its derivatives in ``D**2`` and in ``kish``.
    by_distance: np.ndarray
    by_kish: np.ndarray


def shrunk_fits(cov, cross, offset, tol, kish):
    """The plain slopes, levers and safeguard of rows of local moments.

    Parameters
    ----------
    cov : ndarray of shape (c, d, d)
        The local covariances of the keys.
    cross : ndarray of shape (c, d, p)
        The local cross-covariances of the keys with the values.
    offset : ndarray of shape (c, d)
        ``delta = z_i - m``, the query from its local mean.
    tol : ndarray of shape (c,)
        The rank threshold of each row (:func:`_solve_local`).
    kish : ndarray of shape (c,)
        ``1 / n_eff`` of each row's weights
        (:func:`.._engine._safeguard.kish_ratio`).

    Returns
    -------
    fits : ShrunkFits
        The plain fits of the rows and the safeguard's factor ``s`` at
        ``D**2`` and ``kish`` (:func:`.._engine._safeguard.slope_shrinkage`),
        with its derivatives.
    """
    p = cross.shape[2]
    rhs = np.concatenate([cross, offset[:, :, None]], axis=2)
    solved = _solve_local(cov, rhs, tol)
    beta, lever = solved[:, :, :p], solved[:, :, p]
    t = np.einsum("cfk,cf->ck", beta, offset)
    distance_sq = np.einsum("cf,cf->c", lever, offset)
    s = slope_shrinkage(distance_sq, kish)
    by_distance, by_kish = slope_shrinkage_derivative(distance_sq, kish)
    return ShrunkFits(beta, lever, t, distance_sq, kish, s, by_distance, by_kish)


def key_sensitivities(
    r, values, Z, m, ybar, fits, scores, totals, own=False, work=None
):
    """``T r_i . dpred_i / da_ij`` of rows of held-out fits, and of ``L_ii``.

    Parameters
    ----------
    r : ndarray of shape (c, p)
        The derivative of the loss in each row's prediction.
    values : ndarray of shape (n, p)
        The values of the keys.
    Z : ndarray of shape (n, d)
        The keys.
    m, ybar : ndarray of shape (c, d), (c, p)
        The local means of the keys and values of each row.
    fits : ShrunkFits
        :func:`shrunk_fits` of the rows.
    scores : ndarray of shape (c, n)
        The scores ``a_ij`` of the keys of each row (times any factor common
        to the row), or its normalised weights.
    totals : ndarray of shape (c,) or float
        Their sums (1 for normalised weights).
    own : bool, default=False
        Whether to return the derivatives of the diagonal of the smoother
        matrix too.
    work : ndarray of shape (2 or 3, at least c, n) or None
        Space for the results (3 planes with ``own``), reused from chunk to
        chunk; None allocates it.

    Returns
    -------
    sensitivity : ndarray of shape (c, n)
        ``T r . dpred / da_j`` (see the module docstring).
    diagonal : ndarray of shape (c, n) or None
        ``T**2 dL_ii / (a_ii da_j)`` with ``own``, else None.
    """
    beta, lever, distance_sq, s = fits.beta, fits.lever, fits.distance_sq, fits.s
    c, n = len(r), len(Z)
    if work is None:
        work = np.empty((3 if own else 2, c, n))
    P, out = work[0, :c], work[1, :c]
    # P_ij = 1 + l_ij = 1 + lever_i . (z_j - m_i)
    np.matmul(lever, Z.T, out=P)
    P += (1.0 - np.einsum("cf,cf->c", lever, m))[:, None]
    # r . e_j = r . (y_j - ybar) - (beta r) . (z_j - m), one product; times
    # P: the sensitivity where s = 1.
    tilt = np.einsum("cfk,ck->cf", beta, r)
    np.matmul(np.hstack([r, -tilt]), np.hstack([values, Z]).T, out=out)
    out += (np.einsum("cf,cf->c", tilt, m) - np.einsum("ck,ck->c", r, ybar))[:, None]
    out *= P
    diagonal = None
    if own:
        # -P**2 where s = 1
        diagonal = work[2, :c]
        np.multiply(P, P, out=diagonal)
        np.negative(diagonal, out=diagonal)
    # The rows the safeguard shrinks, alone.
    k = np.flatnonzero(s < 1.0)
    if len(k):
        Pk = P[k]
        plain = r[k] @ values.T
        plain -= np.einsum("ck,ck->c", r[k], ybar[k])[:, None]
        # D**2 + 1 - P**2
        curve = (distance_sq[k] + 1.0)[:, None] - Pk * Pk
        # T dkish / da_j = 2 (p_j - kish)
        dkish = scores[k] / np.broadcast_to(totals, (c,))[k, None]
        dkish -= fits.kish[k, None]
        dkish *= 2.0
        r_t = np.einsum("ck,ck->c", r[k], fits.t[k])
        ds, ds_kish = fits.by_distance[k], fits.by_kish[k]
        out[k] = (
            (1.0 - s[k])[:, None] * plain
            + s[k][:, None] * out[k]
            + (ds * r_t)[:, None] * curve
            + (ds_kish * r_t)[:, None] * dkish
        )
        if own:
            diagonal[k] = (
                (s[k] + ds * distance_sq[k])[:, None] * curve
                - (1.0 + s[k] * distance_sq[k])[:, None]
                + (ds_kish * distance_sq[k])[:, None] * dkish
            )
    return out, diagonal


def square_sums(scores):
    """``sum_j a_ij**2`` of each row of dense ``scores`` (c, n), for
    :func:`.._engine._safeguard.kish_ratio`: one BLAS dot product per row
    (a pass that :func:`numpy.einsum` takes about twice as long over)."""
    return np.matmul(scores[:, None, :], scores[:, :, None])[:, 0, 0]


def _feature_sums(M, Zr, Z):
    """``sum_ij M_ij (z_if - z_jf)^2`` per feature ``f``, from the rows ``Zr``
    of the chunk and all points ``Z``."""
    grad = Zr.T**2 @ M.sum(axis=1) + M.sum(axis=0) @ Z**2
    return grad - 2.0 * np.einsum("cf,cf->f", Zr, M @ Z)


def _key_moments(Z, values, upper):
    """``[z, upper(z z^T), y, z (x) y]`` per key: what the local moments sum."""
    n = len(Z)
    return np.hstack(
        [
            Z,
            (Z[:, upper[0]] * Z[:, upper[1]]),
            values,
            (Z[:, :, None] * values[:, None, :]).reshape(n, -1),
        ]
    )


def _rows_per_chunk(n, moments_bytes):
    """Rows of held-out fits per chunk, within ``working_memory`` less the
    moments."""
    # Per row: the distances/scores, their slopes, the (up to three) (c, n)
    # matrices of the gradient, and a temporary (float64).
    per_key = 8 * 6
    budget = min(_CHUNK_BYTES * _BYTES_PER_KEY // 8, working_memory_bytes())
    budget = max(budget - moments_bytes, per_key * n)
    return max(1, int(min(n, budget // (per_key * n))))


def _local_fits(sums, Zr, n_keys, upper, p, kish):
    """The local means ``m`` and ``ybar`` of rows ``Zr`` and their
    :func:`shrunk_fits`, from the weighted means ``sums`` of the moments and
    ``kish``, ``1 / n_eff`` of each row's weights."""
    c, d = Zr.shape
    n_sq = len(upper[0])
    m = sums[:, :d]
    second = np.zeros((c, d, d))
    second[:, upper[0], upper[1]] = sums[:, d : d + n_sq]
    second[:, upper[1], upper[0]] = sums[:, d : d + n_sq]
    ybar = sums[:, d + n_sq : d + n_sq + p]
    cross = sums[:, d + n_sq + p :].reshape(c, d, p) - m[:, :, None] * ybar[:, None]
    cov = second - m[:, :, None] * m[:, None, :]
    # The rank threshold of the fitted estimator (:mod:`.._engine._local_linear`).
    tol = 10.0 * d * np.sqrt(n_keys) * _EPS
    tol *= np.trace(second, axis1=1, axis2=2)
    return m, ybar, shrunk_fits(cov, cross, Zr - m, tol, kish)


def _loo_loss_linear(log_widths, X, Y, weights, kernel, gradient, own=False):
    """:func:`loo_loss` of local-linear (degree 1) held-out fits.

    The local fits are solved in the scaled coordinates ``z = x / h``, in
    which the local-linear prediction is the same (it is invariant to an
    affine map of the design), and so is the safeguard's distance ``D``. A
    row whose local covariance is rank-deficient, by the threshold of the
    fitted estimator (:mod:`.._engine._local_linear`), gets its minimum-norm fit; one
    of rank 0 the local mean and the local mean's gradient. The slopes are
    shrunk by the safeguard, from ``kish``, the sum of the squared scores of
    each row over the square of their sum (those of the keys its fit holds:
    its own key and keys of zero weight excluded, each row's shift of the
    logits cancelling), and the gradient is that of the shrunk fits (see the
    module docstring).

    Returns ``(loss, grad, predictions)`` (``grad`` None without
    ``gradient``). With ``own``, the terms of the in-sample fits (each
    point's own key pooled too), followed by ``trace``, the sum over the
    points of positive weight of ``L_ii = a_ii (1 + s D**2) / T``, and its
    gradient (``a_ii`` not depending on the widths).
    """
    n, p = Y.shape
    d = X.shape[1]
    Z, left, right, log_weights = scaled_points(X, weights, log_widths)
    has_zero = bool(np.any(weights == 0))
    scale = p * weights.sum()
    center = weights @ Y / weights.sum()
    values = Y - center
    upper = np.triu_indices(d)
    moments = _key_moments(Z, values, upper)
    rows_per_chunk = _rows_per_chunk(n, moments.nbytes)
    buffer = np.empty((rows_per_chunk, n))
    work = np.empty((3 if own else 2, rows_per_chunk, n)) if gradient else None
    n_keys = np.count_nonzero(weights > 0) - (0 if own else 1) * (weights > 0)
    loss = 0.0
    grad = np.zeros(d)
    predictions = np.empty_like(Y)
    trace, trace_grad = 0.0, np.zeros(d)
    for rows, scores, slope in _score_chunks(
        Z, left, right, weights, log_weights, has_zero, kernel, gradient, buffer, own
    ):
        c = len(rows)
        if own:
            own_score = scores[np.arange(c), rows] * (weights[rows] > 0)
        total = scores.sum(axis=1)
        sums = scores @ moments / total[:, None]
        kish = kish_ratio(square_sums(scores), total, kernel)
        m, ybar, fits = _local_fits(sums, Z[rows], n_keys[rows], upper, p, kish)
        s, distance_sq = fits.s, fits.distance_sq
        pred = ybar + s[:, None] * fits.t
        predictions[rows] = pred + center
        part, r = _objective("squared_error", values[rows], pred, weights[rows], scale)
        loss += part
        if own:
            trace += float(np.sum(own_score * (1.0 + s * distance_sq) / total))
        if not gradient:
            continue
        M, diagonal = key_sensitivities(
            r, values, Z, m, ybar, fits, scores, total, own, work
        )
        if slope is not None:
            scores *= slope
        M *= scores
        M /= total[:, None]
        grad += _feature_sums(M, Z[rows], Z)
        if own:
            diagonal *= scores
            diagonal *= (own_score / total**2)[:, None]
            trace_grad += _feature_sums(diagonal, Z[rows], Z)
    if own:
        return loss, grad, predictions, trace, trace_grad
    return loss, (grad if gradient else None), predictions
