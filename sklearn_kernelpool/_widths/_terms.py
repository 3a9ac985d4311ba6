"""The terms of the leave-one-out loss of per-feature widths: the kernel
scores of chunks of rows, their slopes in the log widths, and the losses."""

import numpy as np

from .._held_out._distances import _augment, exact_if_far, squared_distances
from .._held_out._sums import _LOGIT_FLOOR

# Rows per chunk: a chunk holds a few (rows, n) float64 arrays, of at most
# this many bytes each, and all of them within ``working_memory``.
_CHUNK_BYTES = 2**22
_BYTES_PER_KEY = 32
_EPS = float(np.finfo(np.float64).eps)


def _log_slope(kernel, s):
    """``-2 d log(alpha) / ds`` at squared scaled distances ``s``
    (:attr:`..kernels.Kernel.log_slope`).

    The derivative of a kernel weight in the log width of feature ``f`` is
    ``alpha * _log_slope(s) * D_f``, ``D_f`` the squared scaled difference of
    that feature. None where it is the constant 1 (a log-quadratic kernel,
    the gaussian); a cusp's slope at ``s = 0``, where ``D_f = 0``, is 0.
    """
    if kernel.log_quadratic is not None:
        return None  # -2 c, the constant 1 of the gaussian
    if kernel.log_slope is None:
        raise ValueError(f"No gradient for the kernel {kernel.name!r}.")
    return -2.0 * kernel.log_slope(s)


OBJECTIVES = ("squared_error", "log_loss")


def _objective(objective, Y, predictions, weights, scale):
    """The summed loss of ``predictions`` and its derivative in them.

    ``squared_error``: ``sum_i w_i ||y_i - p_i||^2 / scale``. ``log_loss``:
    ``-sum_i w_i sum_c Y_ic log(clip(p_ic)) / scale`` of class indicators
    ``Y``, the probabilities clipped to ``[eps, 1 - eps]`` as
    :func:`sklearn.metrics.log_loss` does (the derivative is zero where they
    are clipped).
    """
    w = weights[:, None]
    if objective == "squared_error":
        residual = predictions - Y
        return float(np.sum(w * residual**2)) / scale, 2.0 * w * residual / scale
    clipped = np.clip(predictions, _EPS, 1.0 - _EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(Y > 0, Y * np.log(clipped), 0.0)
        derivative = np.where(
            (Y > 0) & (clipped == predictions), -w * Y / predictions, 0.0
        )
    return -float(np.sum(w * terms)) / scale, derivative / scale


def _score_chunks(
    Z, left, right, weights, log_weights, has_zero, kernel, slopes, buf, own=False
):
    """Chunks of rows with their leave-one-out kernel scores (and slopes).

    Yields ``(rows, scores, slope)``: the scores of each row over the keys,
    its own key (unless ``own``: the in-sample fits) and keys of zero weight
    at zero, scaled by the row's largest (which cancels in every pooled
    ratio); ``slope`` is ``_log_slope`` of the squared distances, None for
    the Gaussian (the constant 1) or when ``slopes`` is False.
    """
    n = Z.shape[0]
    rows_per_chunk = buf.shape[0]
    # Logits far below their row's maximum are clamped (exp() is slow on
    # them); the squared diagonal of the bounding box bounds every distance.
    box = float(np.sum(np.ptp(Z, axis=0) ** 2))
    positive = weights[weights > 0]
    spread = float(np.log(positive.max() / positive.min()))
    needs_floor = -kernel.log_function(np.sqrt(box)) + spread > -_LOGIT_FLOOR
    for start in range(0, n, rows_per_chunk):
        rows = np.arange(start, min(start + rows_per_chunk, n))
        diagonal = (np.arange(len(rows)), rows)
        s = buf[: len(rows)]
        squared_distances(left[rows], right, s)
        if kernel.cusp:
            # sqrt() turns the rounding error of a zero distance into ~1e-8:
            # pairs within it of zero are taken as duplicates.
            slack = 64 * _EPS * (left[rows, -1][:, None] + right[-2][None, :])
            s[s <= slack] = 0.0
        # Groups of points far apart: exact differences, as the engine does
        # (duplicates then have distance 0 exactly).
        exact_if_far(s, left[rows], right, 1.0)
        slope = _log_slope(kernel, s) if slopes else None
        logits = kernel.squared_log_function(s)  # in place: s is not needed
        if log_weights is not None:
            logits += log_weights
        if own:
            # The distance of a point to itself is exactly zero.
            logits[diagonal] = kernel.squared_log_function(np.zeros(len(rows)))
            if log_weights is not None:
                logits[diagonal] += log_weights[rows]
        else:
            logits[diagonal] = -np.inf
        logits -= logits.max(axis=1, keepdims=True)
        if needs_floor:
            np.maximum(logits, _LOGIT_FLOOR, out=logits)
        scores = np.exp(logits, out=logits)
        if has_zero:
            scores[:, weights == 0] = 0.0
        if not own:
            scores[diagonal] = 0.0
        yield rows, scores, slope


def scaled_points(X, weights, log_widths):
    """The points in units of the widths, centred on the mean of those of
    positive weight, their augmented forms for the pairwise distances, and
    the log weights (None when every weight is the same)."""
    Z = X / np.exp(log_widths)
    Z -= Z[weights > 0].mean(axis=0)
    left, right = _augment(Z)
    log_weights = None
    if np.any(weights != weights[0]):
        with np.errstate(divide="ignore"):
            log_weights = np.log(weights)
    return Z, left, right, log_weights
