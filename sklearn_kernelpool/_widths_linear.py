"""The leave-one-out loss of local-linear (degree 1) held-out fits at
per-feature widths, and its gradient (:func:`._widths.loo_loss`)."""

import numpy as np

from ._chunking import working_memory_bytes
from ._widths_terms import (
    _BYTES_PER_KEY,
    _CHUNK_BYTES,
    _EPS,
    _objective,
    _score_chunks,
    scaled_points,
)


def _solve_local(cov, rhs, tol):
    """``C^+ rhs`` per row, ``C^+`` the pseudo-inverse over the eigenvalues
    of ``C`` above ``tol`` (the minimum-norm rule of :mod:`._local_linear`):
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
    with np.errstate(divide="ignore"):
        inverse = np.where(eigenvalues > tol[:, None], 1.0 / eigenvalues, 0.0)
    projected = np.einsum("cfe,cfk->cek", vectors, rhs)
    return np.einsum("cfe,cek->cfk", vectors, inverse[:, :, None] * projected)


def _feature_sums(M, Zr, Z):
    """``sum_ij M_ij (z_if - z_jf)^2`` per feature ``f``, from the rows ``Zr``
    of the chunk and all points ``Z``."""
    grad = Zr.T**2 @ M.sum(axis=1) + M.sum(axis=0) @ Z**2
    return grad - 2.0 * np.einsum("cf,cf->f", Zr, M @ Z)


def _loo_loss_linear(log_widths, X, Y, weights, kernel, gradient, own=False):
    """:func:`loo_loss` of local-linear (degree 1) held-out fits.

    The local fits are solved in the scaled coordinates ``z = x / h``, in
    which the local-linear prediction is the same (it is invariant to an
    affine map of the design). A row whose local covariance is
    rank-deficient, by the threshold of the fitted estimator
    (:mod:`._local_linear`), gets its minimum-norm fit; one of rank 0 the
    local mean and the local mean's gradient.

    Returns ``(loss, grad, predictions)`` (``grad`` None without
    ``gradient``). With ``own``, the terms of the in-sample fits (each
    point's own key pooled too), followed by ``trace``, the sum over the
    points of positive weight of ``L_ii = a_ii g_ii``, and its gradient:
    ``dL_ii = -a_ii sum_j da_ij g_ij^2`` (the derivative of ``e_1^T
    A_i^{-1} e_1``, ``a_ii`` not depending on the widths).
    """
    n, p = Y.shape
    d = X.shape[1]
    Z, left, right, log_weights = scaled_points(X, weights, log_widths)
    has_zero = bool(np.any(weights == 0))
    scale = p * weights.sum()
    center = weights @ Y / weights.sum()
    values = Y - center
    upper = np.triu_indices(d)
    # [z, upper(z z^T), y, z (x) y] per key: the local moments.
    moments = np.hstack(
        [
            Z,
            (Z[:, upper[0]] * Z[:, upper[1]]),
            values,
            (Z[:, :, None] * values[:, None, :]).reshape(n, -1),
        ]
    )
    # Per row: the distances/scores, the slope, the equivalent kernel, the
    # residuals and their product (float64).
    per_key = 8 * 6
    budget = min(_CHUNK_BYTES * _BYTES_PER_KEY // 8, working_memory_bytes())
    budget = max(budget - moments.nbytes, per_key * n)
    rows_per_chunk = max(1, int(min(n, budget // (per_key * n))))
    buffer = np.empty((rows_per_chunk, n))
    n_keys = np.count_nonzero(weights > 0) - (0 if own else 1) * (weights > 0)
    loss = 0.0
    grad = np.zeros(d)
    predictions = np.empty_like(Y)
    n_sq = len(upper[0])
    trace, trace_grad = 0.0, np.zeros(d)
    for rows, scores, slope in _score_chunks(
        Z, left, right, weights, log_weights, has_zero, kernel, gradient, buffer, own
    ):
        c = len(rows)
        if own:
            own_score = scores[np.arange(c), rows] * (weights[rows] > 0)
        total = scores.sum(axis=1)
        sums = scores @ moments / total[:, None]
        m = sums[:, :d]
        second = np.zeros((c, d, d))
        second[:, upper[0], upper[1]] = sums[:, d : d + n_sq]
        second[:, upper[1], upper[0]] = sums[:, d : d + n_sq]
        ybar = sums[:, d + n_sq : d + n_sq + p]
        cross = sums[:, d + n_sq + p :].reshape(c, d, p) - m[:, :, None] * ybar[:, None]
        cov = second - m[:, :, None] * m[:, None, :]
        tol = 10.0 * d * np.sqrt(n_keys[rows]) * _EPS
        tol *= np.trace(second, axis1=1, axis2=2)
        # C^{-1} [cross, z_i - m]: the slopes and the equivalent kernel's.
        rhs = np.concatenate([cross, (Z[rows] - m)[:, :, None]], axis=2)
        solved = _solve_local(cov, rhs, tol)
        beta, lever = solved[:, :, :p], solved[:, :, p]
        pred = ybar + np.einsum("cfk,cf->ck", beta, Z[rows] - m)
        predictions[rows] = pred + center
        part, r = _objective("squared_error", values[rows], pred, weights[rows], scale)
        loss += part
        if own:
            # g_ii = (1 + lever_i . (z_i - m_i)) / total_i
            lever_own = 1.0 + np.einsum("cf,cf->c", lever, Z[rows] - m)
            trace += float(np.sum(own_score * lever_own / total))
        if not gradient:
            continue
        # g_ij = (1 + lever_i . (z_j - m_i)) / total_i and
        # r . (y_j - p_i - beta_i^T (z_j - z_i)), as (c, n) matrices.
        G = lever @ Z.T
        G += (1.0 - np.einsum("cf,cf->c", lever, m))[:, None]
        G /= total[:, None]
        tilt = np.einsum("cfk,ck->cf", beta, r)
        E = r @ values.T
        E -= tilt @ Z.T
        E += (np.einsum("cf,cf->c", tilt, Z[rows]) - np.sum(r * pred, axis=1))[:, None]
        if slope is not None:
            scores *= slope
        if own:
            trace_grad -= _feature_sums(G**2 * scores * own_score[:, None], Z[rows], Z)
        E *= G
        E *= scores
        grad += _feature_sums(E, Z[rows], Z)
    if own:
        return loss, grad, predictions, trace, trace_grad
    return loss, (grad if gradient else None), predictions
