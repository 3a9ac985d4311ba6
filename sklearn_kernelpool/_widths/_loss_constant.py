"""The leave-one-out loss of local-constant (degree 0) held-out fits at
per-feature widths, and its gradient (:func:`._learning.loo_loss`); with the
own keys, the terms of the in-sample criteria (:mod:`._criteria`)."""

import numpy as np

from .._utils._working_memory import working_memory_bytes
from ._terms import (
    _BYTES_PER_KEY,
    _CHUNK_BYTES,
    _objective,
    _score_chunks,
    scaled_points,
)


def _chunk_buffer(n):
    """The scores of a chunk of rows, as many as ``working_memory`` holds."""
    budget = min(_CHUNK_BYTES * _BYTES_PER_KEY // 8, working_memory_bytes())
    rows_per_chunk = max(1, int(min(n, budget // (_BYTES_PER_KEY * n))))
    return np.empty((min(rows_per_chunk, n), n))


def _gradient_moments(Z, unit):
    """``[y, 1]``, ``z_f^2 [y, 1]`` and ``z_f [y, 1]`` for every feature ``f``,
    per key: what the scores pool for the gradient."""
    n = len(Z)
    return np.hstack(
        [
            unit,
            (Z[:, :, None] ** 2 * unit[:, None, :]).reshape(n, -1),
            (Z[:, :, None] * unit[:, None, :]).reshape(n, -1),
        ]
    )


def _pair_sums(pooled, Zr, width):
    """``sum_j T_ij D_ijf [y_j, 1]`` of rows ``Zr``, shape (c, d, width), from
    the pooled :func:`_gradient_moments`."""
    c, d = Zr.shape
    direct = pooled[:, :width]
    squares = pooled[:, width : width * (d + 1)].reshape(c, d, width)
    linear = pooled[:, width * (d + 1) :].reshape(c, d, width)
    Zr = Zr[:, :, None]
    return Zr**2 * direct[:, None, :] + squares - 2.0 * Zr * linear


def _constant_terms(log_widths, X, Y, weights, kernel, gradient, objective, own=False):
    """The terms of :func:`loo_loss` for degree 0.

    With ``own``, of the in-sample fits (each point's own key pooled too):
    returns ``(loss, grad, fits, trace, trace_grad)``, ``trace`` the sum over
    the points of positive weight of their own normalised weights ``L_ii``
    and ``trace_grad`` its gradient. Otherwise ``(loss, grad, predictions)``
    (``grad`` None without ``gradient``).
    """
    n, n_outputs = Y.shape
    Z, left, right, log_weights = scaled_points(X, weights, log_widths)
    scale = weights.sum()
    if objective == "squared_error":
        scale *= n_outputs
    has_zero = bool(np.any(weights == 0))
    loss = 0.0
    grad = np.zeros(X.shape[1])
    predictions = np.empty_like(Y)
    buffer = _chunk_buffer(n)
    unit = np.hstack([Y, np.ones((n, 1))])
    width = unit.shape[1]
    if gradient:
        moments = _gradient_moments(Z, unit)
    trace, trace_grad = 0.0, np.zeros(X.shape[1])
    for rows, scores, slope in _score_chunks(
        Z, left, right, weights, log_weights, has_zero, kernel, gradient, buffer, own
    ):
        if own:
            # L_ii = a_ii / T_i, the own score read before the slopes scale
            # the scores.
            own_score = scores[np.arange(len(rows)), rows] * (weights[rows] > 0)
        if gradient and slope is None:
            pooled = scores @ moments  # the pooled sums and the gradient's
            sums = pooled[:, :width]
        else:
            sums = scores @ unit
            if gradient:
                scores *= slope
                pooled = scores @ moments
        total = sums[:, -1]
        pred = sums[:, :-1] / total[:, None]
        if own:
            trace += float(np.sum(own_score / total))
        predictions[rows] = pred
        part, r = _objective(objective, Y[rows], pred, weights[rows], scale)
        loss += part
        if not gradient:
            continue
        # dp_i / dtheta_f = sum_j T_ij D_ijf (y_j - p_i) / total_i, with
        # T = scores * slope and D_ijf = z_if^2 + z_jf^2 - 2 z_if z_jf: sums
        # of T against [1, z_f^2, z_f] times [y, 1], pooled above. ``r`` is
        # the derivative of the loss in the predictions.
        pair_sums = _pair_sums(pooled, Z[rows], width)
        coef = np.hstack([r, -np.sum(r * pred, axis=1, keepdims=True)])
        coef /= total[:, None]
        grad += np.einsum("ifq,iq->f", pair_sums, coef)
        if own:
            # dL_ii = -a_ii dT_i / T_i^2: the column of ones of the pair sums.
            trace_grad -= pair_sums[:, :, -1].T @ (own_score / total**2)
    if own:
        return loss, grad, predictions, trace, trace_grad
    return loss, (grad if gradient else None), predictions
