"""Per-feature widths learned on the leave-one-out error (or on GCV or AICc),
with its gradient."""

import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from .._held_out._criteria import SMOOTHER_CRITERIA
from .._utils._threads import single_threaded_blas
from .._utils._width_rules import _weighted_spread
from ._criteria import criterion_loss
from ._loss_constant import _constant_terms
from ._loss_linear import _loo_loss_linear
from ._terms import OBJECTIVES

# Widths are bounded to [1e-3, 1e3] times the feature's spread.
_WIDTH_RANGE = 1e3
_MAX_ITER = 200
# L-BFGS-B stops when an iteration lowers the loss, in units of the values'
# variance (1 - R^2 for the squared error), by less than _FTOL, or when no
# log width has a projected gradient above _GTOL: far below any difference
# the choice of widths can see. Widths of features switched off drift to
# their bound along an almost flat loss, in many iterations: those that stop
# above _OFF times the spread are moved there (see learn_widths).
_FTOL = 1e-8
_GTOL = 1e-5
_OFF = 30.0
# Iterations every start runs before the best of them goes on alone.
_RACE = 10
# Starts closer than this in every log width are one start.
_SAME_START = np.log(1.1)


def loo_loss(
    log_widths,
    X,
    Y,
    weights,
    kernel,
    gradient=True,
    *,
    degree=0,
    objective="squared_error",
):
    """Weighted leave-one-out loss of per-feature widths.

    Parameters
    ----------
    log_widths : ndarray of shape (n_features,)
        Logarithms of the widths.
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values (class indicators for ``objective="log_loss"``).
    weights : ndarray of shape (n,)
        Sample weights: they weigh the keys in the pools and the errors in
        the loss. At least two are positive.
    kernel : Kernel
        A kernel with a log form.
    gradient : bool
        Whether to return the gradient too.
    degree : {0, 1}
        Local-constant (0) or local-linear (1) held-out fits.
    objective : {"squared_error", "log_loss"}
        ``squared_error``: ``sum_i w_i ||y_i - p_i||^2 / (n_outputs sum_i
        w_i)``. ``log_loss`` (degree 0): ``-sum_i w_i sum_c Y_ic log p_ic /
        sum_i w_i`` of the held-out pooled class indicators, clipped to
        ``[eps, 1 - eps]`` as :func:`sklearn.metrics.log_loss` does.

    Returns
    -------
    loss : float
        The loss of the held-out predictions ``p_i``, each fitted on every
        point but ``i``.
    grad : ndarray of shape (n_features,)
        Its gradient in ``log_widths`` (when ``gradient``).
    predictions : ndarray of shape (n, n_outputs)
        The leave-one-out predictions ``p_i``.

    Notes
    -----
    The weight of key ``j`` for point ``i`` is ``a_ij = w_j alpha(s_ij)``,
    ``s_ij = sum_f (x_if - x_jf)^2 / h_f^2``; its derivative in ``log h_f``
    is ``a_ij * _log_slope(s_ij) * D_ijf``, ``D_ijf`` the squared scaled
    difference of feature ``f``. The local-linear prediction is
    ``p_i = e_1^T A_i^{-1} U_i^T W_i y`` (``U_i`` the rows ``[1, x_j -
    x_i]``, ``A_i = U_i^T W_i U_i``); its differential is ``dp_i = sum_j
    da_ij g_ij r_ij`` with ``g_ij = e_1^T A_i^{-1} [1, x_j - x_i]`` (the
    equivalent kernel) and ``r_ij`` the residual of key ``j`` under the fit
    at ``i``. For the local mean ``g_ij = 1 / sum_j a_ij`` and ``r_ij = y_j
    - p_i``. Rows are taken in chunks within ``working_memory``.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}.")
    if degree == 1 and objective != "squared_error":
        raise ValueError(
            "objective='log_loss' pools class indicators locally-constant: it "
            "needs degree=0."
        )
    if degree == 1:
        terms = _loo_loss_linear(log_widths, X, Y, weights, kernel, gradient)
    else:
        terms = _constant_terms(log_widths, X, Y, weights, kernel, gradient, objective)
    loss, grad, predictions = terms[:3]
    return (loss, grad, predictions) if gradient else (loss, predictions)


def width_loss(
    log_widths,
    X,
    Y,
    weights,
    kernel,
    gradient=True,
    *,
    degree=0,
    objective="squared_error",
):
    """The loss that :func:`learn_widths` minimises: :func:`loo_loss` for
    ``"squared_error"`` and ``"log_loss"``, and for ``"gcv"`` and ``"aicc"``
    the criterion of the in-sample fit
    (:func:`._criteria.criterion_loss`), whose second output is then
    the in-sample fits."""
    if objective in SMOOTHER_CRITERIA:
        return criterion_loss(
            log_widths,
            X,
            Y,
            weights,
            kernel,
            gradient,
            degree=degree,
            criterion=objective,
        )
    return loo_loss(
        log_widths, X, Y, weights, kernel, gradient, degree=degree, objective=objective
    )


def _unique(starts):
    kept = []
    for start in starts:
        if not any(np.all(np.abs(start - other) < _SAME_START) for other in kept):
            kept.append(start)
    return kept


def _bounds_and_starts(X, weights, bandwidth):
    """The bounds of the log widths and the distinct starts, clipped to them."""
    positive = weights > 0
    spread = _weighted_spread(X[positive], weights[positive])
    lower = np.log(spread / _WIDTH_RANGE)
    upper = np.log(spread * _WIDTH_RANGE)
    relative = spread / np.exp(np.mean(np.log(spread)))
    starts = [
        np.full(X.shape[1], np.log(bandwidth)),
        np.log(bandwidth * relative),
        np.full(X.shape[1], np.log(2.0 * bandwidth)),
    ]
    if X.shape[1] == 1:
        # One width: the grid has scanned the curve, refine its minimum.
        starts = starts[:1]
    starts = [np.clip(start, lower, upper) for start in _unique(starts)]
    return lower, upper, starts


def _in_variance_units(Y, weights, objective):
    """The values centred and in units of their variance; class indicators as
    they are."""
    if objective == "log_loss":
        return Y
    # The loss in units of the values' variance, so that the tolerances of
    # L-BFGS-B do not depend on the scale of y.
    mean = np.average(Y, axis=0, weights=weights)
    variance = np.mean(np.average((Y - mean) ** 2, axis=0, weights=weights))
    unit = float(variance) if variance > 0 else 1.0
    return (Y - mean) / np.sqrt(unit)


def _cached_loss(X, Y, weights, kernel, *, degree, objective):
    """:func:`width_loss` and its gradient as a function of the log widths,
    the last point's value kept."""
    last = {}

    def fun(theta):
        # The race's winner goes on from its last point: that point is
        # evaluated once.
        if "theta" not in last or not np.array_equal(theta, last["theta"]):
            loss, grad, _ = width_loss(
                theta, X, Y, weights, kernel, degree=degree, objective=objective
            )
            last.update(theta=theta.copy(), value=(loss, grad.copy()))
        loss, grad = last["value"]
        return loss, grad.copy()

    return fun


def _race(fun, starts, lower, upper, max_iter):
    """The log widths of the race's winner, clipped to their bounds, and its
    iterations, the race's included."""
    bounds = list(zip(lower, upper, strict=True))

    def run(start, iterations):
        return minimize(
            fun,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": iterations, "ftol": _FTOL, "gtol": _GTOL},
        )

    # The race: every start runs _RACE iterations (all of max_iter when there
    # is one), and the lowest goes on where it stopped.
    race = max_iter if len(starts) == 1 else min(_RACE, max_iter)
    results = [run(start, race) for start in starts]
    best = min(results, key=lambda result: result.fun)
    n_iter = int(best.nit)
    if best.status == 1 and n_iter < max_iter:  # stopped by the race
        more = run(best.x, max_iter - n_iter)
        n_iter += int(more.nit)
        if more.fun <= best.fun:
            best = more
    return np.clip(best.x, lower, upper), n_iter


def _switch_off(fun, theta, lower, upper):
    """``theta`` with the log widths above ``_OFF`` times the spread moved to
    their upper bound, where that does not raise the loss."""
    off = (theta > lower + np.log(_WIDTH_RANGE * _OFF)) & (theta < upper)
    if np.any(off):
        current = fun(theta)[0]  # the last point evaluated
        switched_off = np.where(off, upper, theta)
        if fun(switched_off)[0] <= current:
            theta = switched_off
    return theta


def learn_widths(
    X,
    Y,
    weights,
    kernel,
    bandwidth,
    *,
    degree=0,
    objective="squared_error",
    max_iter=_MAX_ITER,
    warn=True,
):
    """Per-feature widths minimising the leave-one-out loss (or GCV, AICc).

    L-BFGS-B on the log widths with the analytic gradient of
    :func:`width_loss`, bounded to ``[1e-3 s_j, 1e3 s_j]`` (``s_j`` the
    feature's weighted spread), from three deterministic starts: the
    isotropic ``bandwidth``, the same scaled per feature by ``s_j`` over
    their geometric mean, and twice ``bandwidth`` (the first only for one
    feature; a start within 10% of an earlier one in every width is
    dropped). The starts race: each runs 10 iterations, and the one of
    lowest loss then goes on from where it stopped, to convergence (an
    iteration lowering the loss in units of the values' variance by less
    than 1e-8, or every projected gradient below 1e-5) or ``max_iter``
    iterations in all. Widths that end above 30 ``s_j``, whose features are
    all but switched off, are then moved to their bound ``1e3 s_j`` where
    that does not raise the loss: along the flat loss that leads there the
    optimiser would take many iterations for nothing.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values; class indicators (one-hot) for ``objective="log_loss"``.
    weights : ndarray of shape (n,)
        Sample weights, at least two positive.
    kernel : Kernel
        A kernel with a log form.
    bandwidth : float
        The isotropic bandwidth the starts are made of.
    degree : {0, 1}, default=0
        The degree of the held-out fits.
    objective : {"squared_error", "log_loss", "gcv", "aicc"}, \
            default="squared_error"
        The leave-one-out loss minimised (see :func:`loo_loss`), or the
        criterion of the in-sample fit (see
        :func:`._criteria.criterion_loss`).
    max_iter : int, default=200
        The iteration cap of L-BFGS-B, per start (the race's iterations
        included).
    warn : bool, default=True
        Whether to issue a :class:`~sklearn.exceptions.ConvergenceWarning`
        when the winning start stopped at ``max_iter``.

    Returns
    -------
    widths : ndarray of shape (n_features,)
    n_iter : int
        Iterations of the winning start, the race's included.
    loss : float
        Its leave-one-out loss (its criterion for ``"gcv"``, ``"aicc"``).
    predictions : ndarray of shape (n, n_outputs)
        Its leave-one-out predictions (its in-sample fits for ``"gcv"``,
        ``"aicc"``).
    """
    lower, upper, starts = _bounds_and_starts(X, weights, bandwidth)
    fun = _cached_loss(
        X,
        _in_variance_units(Y, weights, objective),
        weights,
        kernel,
        degree=degree,
        objective=objective,
    )
    with single_threaded_blas():
        theta, n_iter = _race(fun, starts, lower, upper, max_iter)
        theta = _switch_off(fun, theta, lower, upper)
        loss, predictions = width_loss(
            theta,
            X,
            Y,
            weights,
            kernel,
            gradient=False,
            degree=degree,
            objective=objective,
        )
    if warn and n_iter >= max_iter:
        warnings.warn(
            f"The per-feature widths stopped at max_iter={max_iter} iterations "
            "of L-BFGS-B before converging; increase max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return np.exp(theta), n_iter, loss, predictions
