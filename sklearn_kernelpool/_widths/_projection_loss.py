"""The leave-one-out loss of attention pooling after a linear map of the keys,
and its gradient in the map (metric learning for kernel regression).

With the map ``A`` (``n_components x n_features``), the attention weight of key
``j`` for the query ``x_i`` is ``w_j alpha(||A (x_i - x_j)||)``: the query
and key projections of an attention layer tied to one matrix, the width
absorbed into it (Weinberger and Tesauro 2007, "Metric learning for kernel
regression", AISTATS). The leave-one-out fit of point ``i`` pools every other
key,

    f_i = sum_{j != i} p_ij y_j,   p_ij = w_j a_ij / sum_{k != i} w_k a_ik,

and the loss is the weighted squared error of the ``f_i`` (or the log-loss
of the class indicators they pool), as :func:`._terms._objective` defines
it. With ``s_ij = ||A (x_i - x_j)||^2``, ``g(s) = d log(alpha) / ds`` (the
kernel's :attr:`..kernels.Kernel.log_slope`) and ``e_i = dL / df_i``,

    dL / ds_ij = g(s_ij) p_ij e_i . (y_j - f_i),
    dL / dA = 2 A sum_ij (dL / ds_ij) (x_i - x_j)(x_i - x_j)^T,

whose sum over pairs is four products of the points with the ``n x n``
factors, accumulated over blocks of rows within ``working_memory``: no
``n x n`` array is ever formed. A point whose neighbourhood is empty (a
compact kernel) gets the weighted mean of the other values and no
gradient.
"""

import numpy as np

from .._held_out._distances import _augment, exact_if_far, squared_distances
from .._utils._working_memory import working_memory_bytes
from ..kernels import KERNELS
from ._terms import _EPS, _objective

# Bytes per key of a row of a block: the squared distances, the weights,
# the slopes, the factors and the products of the values. A block is kept
# near _BLOCK_BYTES per array, so that its passes run from cache, and
# within working_memory.
_PAIR_BYTES = 48
_BLOCK_BYTES = 2**22
# A row whose largest logit is below this is shifted before exp(): the sum
# of its weights could otherwise underflow (exp(-708) is the smallest
# normal float64).
_SHIFT_BELOW = -300.0


def differentiable_kernels():
    """The names (and aliases) of the registered kernels whose weight has a
    slope in the distance: every one but the boxcar and the constant."""
    names = set()
    for name, kernel in KERNELS.items():
        if kernel.name not in ("boxcar", "constant"):
            names.add(name)
    return names


def projection_loss(
    components, X, Y, weights, kernel, *, objective="squared_error", gradient=True
):
    """The leave-one-out loss of pooling at unit width after ``components``.

    Parameters
    ----------
    components : ndarray of shape (n_components, n_features)
        The map ``A``.
    X : ndarray of shape (n, n_features)
        The points, float64.
    Y : ndarray of shape (n, n_outputs)
        Their values; class indicators for ``objective="log_loss"``.
    weights : ndarray of shape (n,)
        Sample weights: they weigh the keys in the pools and the points in
        the loss.
    kernel : Kernel
        A registered kernel of :func:`differentiable_kernels`.
    objective : {"squared_error", "log_loss"}, default="squared_error"
        ``sum_i w_i ||y_i - f_i||^2 / (W n_outputs)``, or the log-loss of
        the pooled class indicators over ``W = sum_i w_i``.
    gradient : bool, default=True
        Whether to compute the gradient.

    Returns
    -------
    loss : float
    grad : ndarray of shape (n_components, n_features) or None
    predictions : ndarray of shape (n, n_outputs)
        The leave-one-out fits ``f_i``.
    """
    A = np.asarray(components, dtype=np.float64)
    n, n_outputs = Y.shape
    # Translation does not change the distances; centring keeps the
    # expansion of the squared distances and the moments below exact.
    X = X - np.average(X, axis=0, weights=weights)
    Z = X @ A.T
    left, right = _augment(Z)
    scale = weights.sum() * (n_outputs if objective == "squared_error" else 1)
    fallback = _fallback_values(Y, weights)
    loss = 0.0
    predictions = np.empty_like(Y)
    moments = _Moments(X, gradient)
    log_weights = _log_weights(kernel, weights)
    step = _block_rows(n)
    buffer = np.empty((min(step, n), n))
    for start in range(0, n, step):
        rows = np.arange(start, min(start + step, n))
        s = squared_distances(left[rows], right, buffer[: len(rows)])
        exact_if_far(s, left[rows], right, 1.0)
        if kernel.cusp:
            # sqrt() turns the rounding error of a zero distance into ~1e-8:
            # pairs within it of zero are duplicates, of slope 0.
            slack = 64 * _EPS * (left[rows, -1][:, None] + right[-2][None, :])
            s[s <= slack] = 0.0
        slope = _slope(kernel, s) if gradient else None
        a, inverse, empty = _leave_one_out_weights(
            kernel, s, rows, weights, log_weights
        )
        f = a @ Y
        f *= inverse[:, None]
        f[empty] = fallback[rows[empty]]
        predictions[rows] = f
        part, derivative = _loss_terms(objective, Y[rows], f, weights[rows], scale)
        loss += part
        if gradient:
            # dL / ds_ij = g(s_ij) p_ij e_i . (y_j - f_i), with p_ij = a_ij
            # / total_i: zero where a pair has no weight.
            factors = derivative @ Y.T
            factors -= np.einsum("ik,ik->i", derivative, f)[:, None]
            factors *= a
            if np.ndim(slope):
                factors *= slope
                factors *= inverse[:, None]
            else:
                factors *= (slope * inverse)[:, None]
            moments.add(rows, factors)
    grad = 2.0 * A @ moments.total() if gradient else None
    return loss, grad, predictions


def _loss_terms(objective, Y, predictions, weights, scale):
    """The summed loss of the rows and its derivative in their fits.

    The squared error as :func:`._terms._objective` has it. The log-loss of
    the class indicators clips the probabilities to ``[eps, 1 - eps]`` as
    :func:`sklearn.metrics.log_loss` does, but keeps the derivative
    ``-w y / max(p, eps)`` where a probability is clipped: a point whose
    true class gets no weight is where a map must change most, and a zero
    derivative there would let the learning sharpen the map past it.
    """
    if objective == "squared_error":
        return _objective(objective, Y, predictions, weights, scale)
    loss, _ = _objective(objective, Y, predictions, weights, scale)
    floor = np.maximum(predictions, _EPS)
    derivative = np.where(Y > 0, -weights[:, None] * Y / floor, 0.0) / scale
    return loss, derivative


def _block_rows(n):
    """The rows of a block of pairs."""
    budget = min(working_memory_bytes(), _BLOCK_BYTES * _PAIR_BYTES // 8)
    return int(max(1, min(n, budget // (_PAIR_BYTES * n))))


def _log_weights(kernel, weights):
    """The log weights added to the logits of a log-form kernel, None when
    every weight is the same (they cancel) or the kernel has no log form."""
    if kernel.squared_log_function is None or np.all(weights == weights[0]):
        return None
    with np.errstate(divide="ignore"):
        return np.log(weights)


def _slope(kernel, s):
    """``d log(alpha) / ds`` at the squared distances ``s``, 0 outside the
    support and at a cusp's zero distance; a float where it is constant
    (the gaussian)."""
    if kernel.log_quadratic is not None:
        return float(kernel.log_quadratic)
    slope = np.asarray(kernel.log_slope(s), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        slope[~np.isfinite(slope)] = 0.0
    if kernel.is_compact:
        slope[s >= kernel.support**2] = 0.0
    return slope


def _leave_one_out_weights(kernel, s, rows, weights, log_weights):
    """The weights ``a_ij`` of the rows over every other key (in place of
    ``s``), up to a factor per row, the inverse of their row sums (0 for an
    empty row) and the rows of no positive weight (empty): the normalised
    weights are ``a_ij * inverse_i``."""
    diagonal = (np.arange(len(rows)), rows)
    if kernel.squared_log_function is not None:
        logits = kernel.squared_log_function(s)
        if log_weights is not None:
            logits += log_weights
        logits[diagonal] = -np.inf
        # Where some row's largest logit could underflow exp(), it is
        # subtracted from the row: the weights are ratios within each row.
        top = logits.max(axis=1, keepdims=True)
        top[~np.isfinite(top)] = 0.0
        if top.min() < _SHIFT_BELOW:
            logits -= top
        a = np.exp(logits, out=logits)
    else:
        a = kernel.squared_function(s)
        a *= weights
        a[diagonal] = 0.0
    total = a.sum(axis=1)
    empty = ~(total > 0)
    inverse = np.zeros_like(total)
    np.divide(1.0, total, out=inverse, where=~empty)
    a[empty] = 0.0
    return a, inverse, empty


def _fallback_values(Y, weights):
    """The weighted mean of the other points' values, for each point: the fit
    of a point whose neighbourhood is empty."""
    total = weights.sum()
    sums = weights @ Y
    others = total - weights
    out = np.empty_like(Y)
    some = others > 0
    out[some] = (sums - weights[some, None] * Y[some]) / others[some, None]
    out[~some] = sums / total
    return out


class _Moments:
    """``sum_ij c_ij (x_i - x_j)(x_i - x_j)^T`` over blocks of rows of the
    factors ``c``: ``sum_i r_i x_i x_i^T + sum_j k_j x_j x_j^T - C - C^T``
    with ``r`` and ``k`` the row and column sums of ``c`` and ``C = sum_ij
    c_ij x_i x_j^T``."""

    def __init__(self, X, active):
        d = X.shape[1]
        self.X = X
        self.own = np.zeros((d, d))
        self.cross = np.zeros((d, d))
        self.columns = np.zeros(X.shape[0]) if active else None

    def add(self, rows, factors):
        """Add the factors of the block ``rows``."""
        Xr = self.X[rows]
        self.own += (Xr * factors.sum(axis=1)[:, None]).T @ Xr
        self.cross += Xr.T @ (factors @ self.X)
        self.columns += factors.sum(axis=0)

    def total(self):
        """The sum over every pair."""
        own = self.own + (self.X * self.columns[:, None]).T @ self.X
        return own - self.cross - self.cross.T
