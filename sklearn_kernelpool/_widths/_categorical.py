"""Per-feature widths and lambdas learned together by leave-one-out.

With categorical features, ``KernelAttentionRegressorCV(per_feature=True)``
learns one width per continuous feature and one ``lambda_j`` per categorical
feature by minimising the leave-one-out squared error of the selected degree
(local-constant or local-linear held-out fits) with L-BFGS-B, from the
selected grid candidate or, where its error is lower, twice its bandwidth
or its bandwidth scaled per feature (:func:`learn`). The log weight of key
``k`` for held-out point ``i`` is::

    log w_k + log alpha(u_ik) + sum_j D_j(c_ij, c_kj) log lambda_j,
    u_ik^2 = sum_f (x_if - x_kf)^2 / h_f^2

with ``D_j = [c_ij != c_kj]`` for an unordered feature and ``|c_ij - c_kj|``
for an ordered one (:mod:`.._engine._categorical`), so that ``d log weight
/ d log lambda_j = D_j`` (the derivative ``D lambda ** (D - 1)`` of
``lambda ** D`` times ``lambda``; the bounds below keep ``lambda > 0``) and
``d log weight / d log h_f = -2 (d log alpha / d u^2) (x_if - x_kf)^2 / h_f^2``,
and with ``p_ik`` the normalised weights of the held-out fit of ``i``,
``d yhat_i / d theta = sum_k p_ik g_ik v_ik``, ``g_ik``
the derivative of the log weight and ``v_ik = T_i d yhat_i / d a_ik`` the
sensitivity of the fit to the score ``a_ik`` of key ``k`` (``T_i`` the sum
of the scores): ``y_k - yhat_i`` for local-constant fits; for local-linear
ones, the fits of the fitted estimator, whose slope the safeguard of
:mod:`.._engine._safeguard` shrinks (from the query's distance and Kish's
``sum_k p_ik**2`` of its normalised weights), that of
:func:`._loss_linear.key_sensitivities` (in the scaled coordinates ``z =
x / h``, in which the fit and the safeguard's distance are the same). A
local design whose covariance is rank-deficient, by a threshold like that of
the fitted estimator, gets its minimum-norm slope
(:func:`._loss_linear._solve_local`). The pass goes over batches of
held-out rows within ``working_memory``. ``lambda_j`` is bounded to [1e-3,
1], the log width of feature ``f`` to ``log(s_f) +- log(1e3)`` with ``s_f``
its weighted standard deviation, as :mod:`._learning` does.
"""

import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from .._engine._categorical import distances
from .._engine._safeguard import kish_ratio
from .._held_out._levels import HeldOutLevels
from .._utils._working_memory import row_batches
from ._learning import _unique
from ._loss_linear import key_sensitivities, shrunk_fits, square_sums

LAMBDA_BOUNDS = (1e-3, 1.0)
WIDTH_RANGE = 1e3
MAX_ITER = 200
_EPS = float(np.finfo(np.float64).eps)


def _loo_coding(codes, levels, sorted_levels):
    """The codes of the fits without each point
    (:meth:`.._held_out._levels.HeldOutLevels.leave_one_out`)."""
    return HeldOutLevels(codes, levels, sorted_levels).leave_one_out().codings[0]


def _softmax_rows(theta, X, coding, weights, kernel, rows):
    """Leave-one-out weights of ``rows`` over every point, normalised, and
    the pieces of their gradient: squared scaled differences, squared
    distances and the category distances ``D_j`` in the codes of each
    row's fit (``coding``, a :class:`.._held_out._levels.LevelCoding`)."""
    d = X.shape[1]
    h2 = np.exp(2.0 * theta[:d])
    with np.errstate(divide="ignore"):
        log_w = np.log(weights)
    D2 = (X[rows, None, :] - X[None, :, :]) ** 2 / h2
    u2 = D2.sum(axis=2)
    M = distances(coding.queries[rows], coding.keys, coding.levels)
    logits = kernel.squared_log_function(u2.copy()) + log_w + M @ theta[d:]
    logits[np.arange(len(rows)), rows] = -np.inf
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    return p, D2, u2, M


def _held_out_fits(p, Z, Y, rows, n_keys, degree, kernel):
    """Held-out fits of ``rows`` from their normalised weights ``p``.

    Returns the predictions and, for degree 1, the local means of the keys
    and values, :func:`._loss_linear.shrunk_fits` of the rows in the
    coordinates ``Z``, ``p`` and its sums (ones), the arguments of
    :func:`._loss_linear.key_sensitivities` (None for degree 0): the fits of
    the fitted estimator, safeguard included (``kish = sum_k p_k**2``,
    :func:`.._engine._safeguard.kish_ratio` of ``kernel``).
    """
    fitted = p @ Y
    if degree == 0:
        return fitted, None
    m = p @ Z
    centred = Z[None, :, :] - m[:, None, :]
    weighted = centred * p[:, :, None]
    cov = np.einsum("cnf,cng->cfg", weighted, centred)
    cross = np.einsum("cnf,nk->cfk", weighted, Y - Y.mean(axis=0))
    # The rank threshold of the fitted estimator (:mod:`.._engine._local_linear`), on
    # the moments about the mean of the keys.
    second = np.trace(cov, axis1=1, axis2=2) + np.einsum("cf,cf->c", m, m)
    tol = 10.0 * Z.shape[1] * np.sqrt(n_keys) * _EPS * second
    kish = kish_ratio(square_sums(p), 1.0, kernel)
    fits = shrunk_fits(cov, cross, Z[rows] - m, tol, kish)
    return fitted + fits.s[:, None] * fits.t, (m, fitted, fits, p, 1.0)


def _row_bytes(X, codes):
    return 8 * X.shape[0] * (4 * X.shape[1] + codes.shape[1] + 8)


def _n_keys(weights, rows):
    """The keys of positive weight of each held-out fit of ``rows``."""
    return np.count_nonzero(weights > 0) - (weights[rows] > 0)


def _scaled(X, widths, weights):
    """The points in units of the widths, centred on the mean of those of
    positive weight as the fitted estimator centres its keys (the origin of
    the rank threshold)."""
    Z = X / widths
    Z -= Z[weights > 0].mean(axis=0)
    return Z


def loo_predictions(
    X,
    codes,
    Y,
    weights,
    kernel,
    widths,
    lambdas,
    degree=0,
    levels=None,
    sorted_levels=None,
):
    """Leave-one-out predictions of local-constant (``degree=0``) or
    local-linear (``degree=1``) held-out fits; ``levels`` as for
    :class:`.._engine._categorical.CategoricalFactor`, ``sorted_levels`` as
    for :class:`.._held_out._levels.HeldOutLevels`."""
    theta = np.concatenate([np.log(widths), np.log(lambdas)])
    coding = _loo_coding(codes, levels, sorted_levels)
    Z = _scaled(X, widths, weights)
    points = np.arange(X.shape[0])
    out = np.empty_like(Y)
    for batch in row_batches(len(points), _row_bytes(X, codes)):
        rows = points[batch]
        p = _softmax_rows(theta, X, coding, weights, kernel, rows)[0]
        n_keys = _n_keys(weights, rows)
        out[batch] = _held_out_fits(p, Z, Y, rows, n_keys, degree, kernel)[0]
    return out


def loo_objective(
    theta, X, codes, Y, weights, kernel, degree=0, levels=None, sorted_levels=None
):
    """Weighted leave-one-out mean squared error of the held-out fits of
    ``degree`` and its gradient in ``theta = [log h_1..h_d, log
    lambda_1..lambda_c]``; ``levels`` says which features are ordered and
    ``sorted_levels`` which of them each held-out fit numbers among its own
    rows (:class:`.._held_out._levels.HeldOutLevels`)."""
    n, d = X.shape
    total = weights.sum()
    value, grad = 0.0, np.zeros_like(theta)
    Z = _scaled(X, np.exp(theta[:d]), weights)
    coding = _loo_coding(codes, levels, sorted_levels)
    points = np.arange(n)
    for batch in row_batches(n, _row_bytes(X, codes)):
        rows = points[batch]
        p, D2, u2, M = _softmax_rows(theta, X, coding, weights, kernel, rows)
        n_keys = _n_keys(weights, rows)
        fitted, local = _held_out_fits(p, Z, Y, rows, n_keys, degree, kernel)
        error = fitted - Y[rows]
        value += float(weights[rows] @ np.sum(error * error, axis=1))
        # A_ik = p_ik e_i . (T dyhat_i / da_ik), weighted by w_i.
        if local is None:
            A = error @ Y.T - np.sum(error * fitted, axis=1, keepdims=True)
        else:
            A = key_sensitivities(error, Y, Z, *local)[0]
        A *= p
        A *= weights[rows, None]
        grad[d:] += 2.0 * np.einsum("ik,ikj->j", A, M)
        grad[:d] += 2.0 * np.einsum("ik,ikf->f", A * -2.0 * kernel.log_slope(u2), D2)
    return value / total, grad / total


def _starts(bandwidth, spread, low, high, lambdas):
    """The distinct starts of :func:`learn`, as :func:`._learning.learn_widths`
    makes them: the isotropic ``bandwidth``, the same scaled per feature by
    its spread over their geometric mean, and twice ``bandwidth``, clipped to
    the bounds of the log widths, each with the log of the shared
    ``lambdas``. The lambdas are learned one per feature from a grid that
    shared them: the first start is not the grid's minimum of the whole
    space, and is kept with one feature too."""
    d = len(spread)
    base = np.log(np.broadcast_to(bandwidth, (d,)))
    relative = np.log(spread) - np.mean(np.log(spread))
    log_lambdas = np.log(np.clip(lambdas, *LAMBDA_BOUNDS))
    starts = [base, base + relative, base + np.log(2.0)]
    return [
        np.concatenate([np.clip(start, low, high), log_lambdas])
        for start in _unique(starts)
    ]


def learn(
    X,
    codes,
    Y,
    weights,
    kernel,
    bandwidth,
    lambdas,
    *,
    degree=0,
    max_iter=MAX_ITER,
    levels=None,
    sorted_levels=None,
):
    """Widths and lambdas minimising the leave-one-out error of the held-out
    fits of ``degree``, from the isotropic ``bandwidth`` and the shared
    ``lambdas``, with at most ``max_iter`` iterations of L-BFGS-B (a
    :class:`~sklearn.exceptions.ConvergenceWarning` when it stops there);
    ``levels`` says which categorical features are ordered, ``sorted_levels``
    which of them the fits without each point number among their own rows.

    L-BFGS-B runs from the start of lowest error among those of
    :func:`_starts`: the loss may have several local minima, and the grid
    that selected ``bandwidth`` shared the lambdas and scanned a few
    widths only.

    Returns the widths, the lambdas, the number of iterations and the
    leave-one-out mean squared error (averaged over the outputs).
    """
    d = X.shape[1]
    mean = weights @ X / weights.sum()
    spread = np.sqrt(weights @ (X - mean) ** 2 / weights.sum())
    spread[spread == 0] = 1.0
    low = np.log(spread / WIDTH_RANGE)
    high = np.log(spread * WIDTH_RANGE)
    bounds = list(zip(low, high, strict=True))
    bounds += [tuple(np.log(LAMBDA_BOUNDS))] * codes.shape[1]
    args = (X, codes, Y, weights, kernel, degree, levels, sorted_levels)
    starts = _starts(bandwidth, spread, low, high, lambdas)
    start = min(starts, key=lambda start: loo_objective(start, *args)[0])
    result = minimize(
        loo_objective,
        start,
        args=args,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": max_iter},
    )
    if result.nit >= max_iter:
        warnings.warn(
            f"The per-feature widths and lambdas stopped at max_iter={max_iter} "
            "iterations of L-BFGS-B before converging; increase max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )
    theta = result.x
    mse = loo_objective(theta, *args)[0] / Y.shape[1]
    return np.exp(theta[:d]), np.exp(theta[d:]), int(result.nit), mse
