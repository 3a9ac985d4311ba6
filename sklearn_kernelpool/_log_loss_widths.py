"""Per-feature widths learned on the leave-one-out log-loss, with its gradient.

The classifier's counterpart of :mod:`._widths`: the held-out class
probabilities are the pooled one-hot labels of every other point, and the
objective is their sample-weighted log-loss, with the probability of the true
class clipped to ``[eps, 1 - eps]`` as :func:`sklearn.metrics.log_loss` does
(``eps`` the float64 machine epsilon). Bounds, starts and optimiser are those
of :func:`._widths.learn_widths`.
"""

import numpy as np
from scipy.optimize import minimize

from ._bandwidth import _weighted_spread
from ._chunking import working_memory_bytes
from ._loo import _LOGIT_FLOOR, _augment, exact_if_far, squared_distances
from ._threads import single_threaded_blas
from ._widths import (
    _BYTES_PER_KEY,
    _CHUNK_BYTES,
    _EPS,
    _MAX_ITER,
    _WIDTH_RANGE,
    _log_slope,
    _unique,
)


def loo_log_loss(log_widths, X, Y, weights, kernel, gradient=True):
    """Weighted leave-one-out log-loss of per-feature widths.

    Parameters
    ----------
    log_widths : ndarray of shape (n_features,)
        Logarithms of the widths.
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_classes)
        One-hot class indicators.
    weights : ndarray of shape (n,)
        Sample weights: they weigh the keys in the pools and the losses of
        the points. At least two are positive.
    kernel : Kernel
        A kernel with a log form.
    gradient : bool
        Whether to return the gradient too.

    Returns
    -------
    loss : float
        ``-sum_i w_i log(clip(p_i[y_i], eps, 1 - eps)) / sum_i w_i``, ``p_i``
        pooling the labels of every point but ``i``.
    grad : ndarray of shape (n_features,)
        Its gradient in ``log_widths`` (when ``gradient``); zero through the
        points whose probability is clipped.
    proba : ndarray of shape (n, n_classes)
        The leave-one-out probabilities ``p_i``.
    """
    n, n_classes = Y.shape
    true = np.argmax(Y, axis=1)
    Z = X / np.exp(log_widths)
    Z -= Z[weights > 0].mean(axis=0)
    left, right = _augment(Z)
    log_weights = None
    if np.any(weights != weights[0]):
        with np.errstate(divide="ignore"):
            log_weights = np.log(weights)
    total_weight = weights.sum()
    has_zero = bool(np.any(weights == 0))
    loss = 0.0
    grad = np.zeros(X.shape[1])
    proba = np.empty_like(Y)
    budget = min(_CHUNK_BYTES * _BYTES_PER_KEY // 8, working_memory_bytes())
    rows_per_chunk = max(1, int(min(n, budget // (_BYTES_PER_KEY * n))))
    buffer = np.empty((min(rows_per_chunk, n), n))
    d = Z.shape[1]
    unit = np.hstack([Y, np.ones((n, 1))])
    width = unit.shape[1]
    if gradient:
        # [y, 1], z_f^2 [y, 1] and z_f [y, 1] for every feature f.
        moments = np.hstack(
            [
                unit,
                (Z[:, :, None] ** 2 * unit[:, None, :]).reshape(n, -1),
                (Z[:, :, None] * unit[:, None, :]).reshape(n, -1),
            ]
        )
    box = float(np.sum(np.ptp(Z, axis=0) ** 2))
    positive = weights[weights > 0]
    spread = float(np.log(positive.max() / positive.min()))
    needs_floor = -kernel.log_function(np.sqrt(box)) + spread > -_LOGIT_FLOOR
    for start in range(0, n, rows_per_chunk):
        rows = np.arange(start, min(start + rows_per_chunk, n))
        diagonal = (np.arange(len(rows)), rows)
        s = buffer[: len(rows)]
        squared_distances(left[rows], right, s)
        if kernel.name == "exponential":
            slack = 64 * _EPS * (left[rows, -1][:, None] + right[-2][None, :])
            s[s <= slack] = 0.0
        exact_if_far(s, left[rows], right, 1.0)
        slope = _log_slope(kernel, s) if gradient else None
        logits = kernel.squared_log_function(s)
        if log_weights is not None:
            logits += log_weights
        logits[diagonal] = -np.inf
        logits -= logits.max(axis=1, keepdims=True)
        if needs_floor:
            np.maximum(logits, _LOGIT_FLOOR, out=logits)
        scores = np.exp(logits, out=logits)
        if has_zero:
            scores[:, weights == 0] = 0.0
        scores[diagonal] = 0.0
        if gradient and slope is None:
            pooled = scores @ moments
            sums = pooled[:, :width]
        else:
            sums = scores @ unit
            if gradient:
                scores *= slope
                pooled = scores @ moments
        total = sums[:, -1]
        pred = sums[:, :-1] / total[:, None]
        proba[rows] = pred
        p_true = pred[np.arange(len(rows)), true[rows]]
        clipped = np.clip(p_true, _EPS, 1.0 - _EPS)
        loss -= float(weights[rows] @ np.log(clipped))
        if not gradient:
            continue
        # d log p_i[y_i] / dtheta_f = sum_j T_ij D_ijf (Y_j[y_i] - p_i[y_i])
        # / (total_i p_i[y_i]), with T = scores * slope and D_ijf the squared
        # scaled difference of feature f: sums of T against [1, z_f^2, z_f]
        # times [y, 1], pooled above, as in :func:`._widths.loo_loss`.
        c = len(rows)
        direct = pooled[:, :width]
        squares = pooled[:, width : width * (d + 1)].reshape(c, d, width)
        linear = pooled[:, width * (d + 1) :].reshape(c, d, width)
        Zr = Z[rows][:, :, None]
        pair_sums = Zr**2 * direct[:, None, :] + squares - 2.0 * Zr * linear
        free = (p_true > _EPS) & (p_true < 1.0 - _EPS)
        r = np.zeros((c, n_classes))
        r[np.arange(c), true[rows]] = np.where(
            free, -weights[rows] / (total_weight * np.where(free, p_true, 1.0)), 0.0
        )
        coef = np.hstack([r, -np.sum(r * pred, axis=1, keepdims=True)])
        coef /= total[:, None]
        grad += np.einsum("ifq,iq->f", pair_sums, coef)
    loss /= total_weight
    return (loss, grad, proba) if gradient else (loss, proba)


def learn_log_loss_widths(X, Y, weights, kernel, bandwidth):
    """Per-feature widths minimising the leave-one-out log-loss.

    L-BFGS-B on the log widths with the analytic gradient of
    :func:`loo_log_loss`, with the bounds and the three deterministic starts
    of :func:`._widths.learn_widths`.

    Returns
    -------
    widths : ndarray of shape (n_features,)
    n_iter : int
        Iterations of the winning start.
    loss : float
        Its leave-one-out log-loss.
    proba : ndarray of shape (n, n_classes)
        Its leave-one-out probabilities.
    """
    positive = weights > 0
    spread = _weighted_spread(X[positive], weights[positive])
    lower = np.log(spread / _WIDTH_RANGE)
    upper = np.log(spread * _WIDTH_RANGE)
    bounds = list(zip(lower, upper, strict=True))
    relative = spread / np.exp(np.mean(np.log(spread)))
    starts = [
        np.full(X.shape[1], np.log(bandwidth)),
        np.log(bandwidth * relative),
        np.full(X.shape[1], np.log(2.0 * bandwidth)),
    ]
    if X.shape[1] == 1:
        starts = starts[:1]

    def fun(theta):
        loss, grad, _ = loo_log_loss(theta, X, Y, weights, kernel)
        return loss, grad

    best = None
    with single_threaded_blas():
        for start in _unique(starts):
            result = minimize(
                fun,
                np.clip(start, lower, upper),
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxiter": _MAX_ITER, "ftol": 1e-12, "gtol": 1e-9},
            )
            if best is None or result.fun < best.fun:
                best = result
        theta = np.clip(best.x, lower, upper)
        loss, proba = loo_log_loss(theta, X, Y, weights, kernel, gradient=False)
    return np.exp(theta), int(best.nit), loss, proba
