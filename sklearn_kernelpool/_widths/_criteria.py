"""GCV and AICc of the in-sample fit at per-feature widths, with their
gradients in the log widths (:func:`._learning.learn_widths`)."""

import numpy as np

from .._held_out._criteria import SMOOTHER_CRITERIA, criteria
from ._loss_constant import _constant_terms
from ._loss_linear import _loo_loss_linear


def criterion_loss(
    log_widths, X, Y, weights, kernel, gradient=True, *, degree=0, criterion="aicc"
):
    """GCV or AICc of the fit on all the points at per-feature widths.

    The criteria of :meth:`KernelAttentionRegressor.smoother_diagnostics`
    (Craven and Wahba 1979; Hurvich, Simonoff and Tsai 1998), as functions
    of the widths: with ``sigma2 = sum_i w_i ||y_i - f_i||^2 / (n_outputs
    sum_i w_i)`` the residual mean square of the in-sample fits ``f_i``
    (each point's own key pooled too) and ``tr = sum_i L_ii`` the trace of
    the smoother matrix over the ``n`` points of positive weight,
    ``gcv = sigma2 / (1 - tr / n)**2`` and ``aicc = log(sigma2) + (1 + tr /
    n) / (1 - (tr + 2) / n)``; ``+inf`` where the denominator is not
    positive.

    Parameters
    ----------
    log_widths : ndarray of shape (n_features,)
        Logarithms of the widths.
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values.
    weights : ndarray of shape (n,)
        Sample weights, at least two positive.
    kernel : Kernel
        A kernel with a log form.
    gradient : bool
        Whether to return the gradient too.
    degree : {0, 1}
        Local-constant (0) or local-linear (1) fits.
    criterion : {"gcv", "aicc"}
        The criterion.

    Returns
    -------
    loss : float
        The criterion.
    grad : ndarray of shape (n_features,)
        Its gradient in ``log_widths`` (when ``gradient``): the chain rule
        through ``sigma2`` and ``tr``, whose gradients come from the same
        pass as the fits (:func:`._learning.loo_loss`'s, with the own keys).
        Zero where the criterion is infinite.
    fits : ndarray of shape (n, n_outputs)
        The in-sample fits ``f_i``.
    """
    if criterion not in SMOOTHER_CRITERIA:
        raise ValueError(
            f"criterion must be one of {SMOOTHER_CRITERIA}; got {criterion!r}."
        )
    if degree == 1:
        terms = _loo_loss_linear(log_widths, X, Y, weights, kernel, gradient, own=True)
    else:
        terms = _constant_terms(
            log_widths, X, Y, weights, kernel, gradient, "squared_error", own=True
        )
    sigma2, sigma2_grad, fits, trace, trace_grad = terms
    n = int(np.count_nonzero(weights > 0))
    gcv, aicc = criteria(sigma2, trace, n)
    loss = float(gcv if criterion == "gcv" else aicc)
    if not gradient:
        return loss, fits
    if not np.isfinite(loss):
        return loss, np.zeros_like(trace_grad), fits
    free = 1.0 - trace / n
    if criterion == "gcv":
        grad = sigma2_grad / free**2 + 2.0 * sigma2 / (n * free**3) * trace_grad
    else:
        den = free - 2.0 / n
        grad = sigma2_grad / sigma2 + (2.0 / n) * (1.0 - 1.0 / n) / den**2 * trace_grad
    return loss, grad, fits
