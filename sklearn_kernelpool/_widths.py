"""Per-feature widths learned on the leave-one-out error, with its gradient."""

import numpy as np
from scipy.optimize import minimize

from ._bandwidth import _weighted_spread
from ._chunking import working_memory_bytes
from ._loo import _LOGIT_FLOOR, _augment, exact_if_far, squared_distances
from ._threads import single_threaded_blas

# Rows per chunk: a chunk holds a few (rows, n) float64 arrays, of at most
# this many bytes each, and all of them within ``working_memory``.
_CHUNK_BYTES = 2**22
_BYTES_PER_KEY = 32
# Widths are bounded to [1e-3, 1e3] times the feature's spread.
_WIDTH_RANGE = 1e3
_MAX_ITER = 200
_EPS = float(np.finfo(np.float64).eps)
# Starts closer than this in every log width are one start.
_SAME_START = np.log(1.1)


def _log_slope(kernel, s):
    """``-2 d log(alpha) / ds`` at squared scaled distances ``s``.

    The derivative of a kernel weight in the log width of feature ``f`` is
    ``alpha * _log_slope(s) * D_f``, ``D_f`` the squared scaled difference of
    that feature. The exponential kernel's slope is unbounded at ``s = 0``,
    where ``D_f = 0``: it is set to 0 there.
    """
    name = kernel.name
    if name == "gaussian":
        return None  # the constant 1
    if name == "cauchy":
        return 2.0 / (1.0 + s)
    if name == "exponential":
        root = np.sqrt(s)
        return np.divide(1.0, root, out=np.zeros_like(s), where=s > 0)
    raise ValueError(f"No gradient for the kernel {name!r}.")


def loo_loss(log_widths, X, Y, weights, kernel, gradient=True):
    """Weighted leave-one-out squared error of per-feature widths.

    Parameters
    ----------
    log_widths : ndarray of shape (n_features,)
        Logarithms of the widths.
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values.
    weights : ndarray of shape (n,)
        Sample weights: they weigh the keys in the pools and the errors in
        the loss. At least two are positive.
    kernel : Kernel
        A kernel with a log form.
    gradient : bool
        Whether to return the gradient too.

    Returns
    -------
    loss : float
        ``sum_i w_i ||y_i - p_i||^2 / (n_outputs sum_i w_i)``, ``p_i`` pooling
        every point but ``i``.
    grad : ndarray of shape (n_features,)
        Its gradient in ``log_widths`` (when ``gradient``).
    predictions : ndarray of shape (n, n_outputs)
        The leave-one-out predictions ``p_i``.
    """
    n, n_outputs = Y.shape
    Z = X / np.exp(log_widths)
    Z -= Z[weights > 0].mean(axis=0)
    left, right = _augment(Z)
    log_weights = None
    if np.any(weights != weights[0]):
        with np.errstate(divide="ignore"):
            log_weights = np.log(weights)
    scale = n_outputs * weights.sum()
    has_zero = bool(np.any(weights == 0))
    loss = 0.0
    grad = np.zeros(X.shape[1])
    predictions = np.empty_like(Y)
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
    # Logits far below their row's maximum are clamped (exp() is slow on
    # them); the squared diagonal of the bounding box bounds every distance.
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
            # sqrt() turns the rounding error of a zero distance into ~1e-8:
            # pairs within it of zero are taken as duplicates.
            slack = 64 * _EPS * (left[rows, -1][:, None] + right[-2][None, :])
            s[s <= slack] = 0.0
        # Groups of points far apart: exact differences, as the engine does
        # (duplicates then have distance 0 exactly).
        exact_if_far(s, left[rows], right, 1.0)
        slope = _log_slope(kernel, s) if gradient else None
        logits = kernel.squared_log_function(s)  # in place: s is not needed
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
            pooled = scores @ moments  # the pooled sums and the gradient's
            sums = pooled[:, :width]
        else:
            sums = scores @ unit
            if gradient:
                scores *= slope
                pooled = scores @ moments
        total = sums[:, -1]
        pred = sums[:, :-1] / total[:, None]
        predictions[rows] = pred
        residual = pred - Y[rows]
        loss += float(weights[rows] @ np.sum(residual**2, axis=1))
        if not gradient:
            continue
        # dp_i / dtheta_f = sum_j T_ij D_ijf (y_j - p_i) / total_i, with
        # T = scores * slope and D_ijf = z_if^2 + z_jf^2 - 2 z_if z_jf: sums
        # of T against [1, z_f^2, z_f] times [y, 1], pooled above.
        c = len(rows)
        direct = pooled[:, :width]
        squares = pooled[:, width : width * (d + 1)].reshape(c, d, width)
        linear = pooled[:, width * (d + 1) :].reshape(c, d, width)
        Zr = Z[rows][:, :, None]
        pair_sums = Zr**2 * direct[:, None, :] + squares - 2.0 * Zr * linear
        r = 2.0 * weights[rows, None] * residual / scale
        coef = np.hstack([r, -np.sum(r * pred, axis=1, keepdims=True)])
        coef /= total[:, None]
        grad += np.einsum("ifq,iq->f", pair_sums, coef)
    loss /= scale
    return (loss, grad, predictions) if gradient else (loss, predictions)


def _unique(starts):
    kept = []
    for start in starts:
        if not any(np.all(np.abs(start - other) < _SAME_START) for other in kept):
            kept.append(start)
    return kept


def learn_widths(X, Y, weights, kernel, bandwidth):
    """Per-feature widths minimising the leave-one-out squared error.

    L-BFGS-B on the log widths with the analytic gradient of
    :func:`loo_loss`, bounded to ``[1e-3 s_j, 1e3 s_j]`` (``s_j`` the
    feature's weighted spread), from three deterministic starts: the
    isotropic ``bandwidth``, the same scaled per feature by ``s_j`` over
    their geometric mean, and twice ``bandwidth`` (the first only for one
    feature; a start within 10% of an earlier one in every width is
    dropped).

    Returns
    -------
    widths : ndarray of shape (n_features,)
    n_iter : int
        Iterations of the winning start.
    loss : float
        Its leave-one-out error.
    predictions : ndarray of shape (n, n_outputs)
        Its leave-one-out predictions.
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

    # The loss in units of the values' variance, so that the tolerances of
    # L-BFGS-B do not depend on the scale of y.
    mean = np.average(Y, axis=0, weights=weights)
    variance = float(np.mean(np.average((Y - mean) ** 2, axis=0, weights=weights)))
    unit = variance if variance > 0 else 1.0
    Y_unit = (Y - mean) / np.sqrt(unit)

    def fun(theta):
        loss, grad, _ = loo_loss(theta, X, Y_unit, weights, kernel)
        return loss, grad

    if X.shape[1] == 1:
        # One width: the grid has scanned the curve, refine its minimum.
        starts = starts[:1]
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
        loss, predictions = loo_loss(theta, X, Y, weights, kernel, gradient=False)
    return np.exp(theta), int(best.nit), loss, predictions
