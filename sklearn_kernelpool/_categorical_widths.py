"""Per-feature widths and lambdas learned together by leave-one-out.

With categorical features, ``KernelAttentionRegressorCV(per_feature=True)``
learns one width per continuous feature and one ``lambda_j`` per categorical
feature by minimising the leave-one-out squared error of local-constant
pooling with L-BFGS-B, from the selected grid candidate. The log weight of
key ``k`` for held-out point ``i`` is::

    log w_k + log alpha(u_ik) + sum_j [c_ij != c_kj] log lambda_j,
    u_ik^2 = sum_f (x_if - x_kf)^2 / h_f^2

so that ``d log weight / d log lambda_j = [c_ij != c_kj]`` and
``d log weight / d log h_f = -2 (d log alpha / d u^2) (x_if - x_kf)^2 / h_f^2``,
and with ``p_ik`` the normalised weights and ``e_i`` the held-out error,
``d yhat_i / d theta = sum_k p_ik g_ik (y_k - yhat_i)``. The pass goes over
batches of held-out rows within ``working_memory``. ``lambda_j`` is bounded
to [1e-3, 1], the log width of feature ``f`` to ``log(s_f) +- log(1e3)``
with ``s_f`` its weighted standard deviation, as :mod:`._widths` does.
"""

import numpy as np
from scipy.optimize import minimize

from ._chunking import row_batches

LAMBDA_BOUNDS = (1e-3, 1.0)
WIDTH_RANGE = 1e3
MAX_ITER = 100


def _dlog_alpha(kernel, u2):
    """``d log alpha / d u^2`` of the kernels with a log form."""
    if kernel.name == "gaussian":
        return np.full_like(u2, -0.5)
    if kernel.name == "cauchy":
        return -1.0 / (1.0 + u2)
    if kernel.name == "exponential":
        return -0.5 / np.sqrt(np.maximum(u2, np.finfo(np.float64).tiny))
    raise ValueError(f"No derivative for the kernel {kernel.name!r}.")


def _softmax_rows(theta, X, codes, weights, kernel, rows):
    """Leave-one-out weights of ``rows`` over every point, normalised, and
    the pieces of their gradient: squared scaled differences, squared
    distances and mismatches."""
    d = X.shape[1]
    h2 = np.exp(2.0 * theta[:d])
    with np.errstate(divide="ignore"):
        log_w = np.log(weights)
    D2 = (X[rows, None, :] - X[None, :, :]) ** 2 / h2
    u2 = D2.sum(axis=2)
    M = codes[rows, None, :] != codes[None, :, :]
    logits = kernel.squared_log_function(u2.copy()) + log_w + M @ theta[d:]
    logits[np.arange(len(rows)), rows] = -np.inf
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    return p, D2, u2, M


def _row_bytes(X, codes):
    return 8 * X.shape[0] * (2 * X.shape[1] + codes.shape[1] + 8)


def loo_predictions(X, codes, Y, weights, kernel, widths, lambdas):
    """Leave-one-out predictions of local-constant pooling."""
    theta = np.concatenate([np.log(widths), np.log(lambdas)])
    points = np.arange(X.shape[0])
    out = np.empty_like(Y)
    for batch in row_batches(len(points), _row_bytes(X, codes)):
        p = _softmax_rows(theta, X, codes, weights, kernel, points[batch])[0]
        out[batch] = p @ Y
    return out


def loo_objective(theta, X, codes, Y, weights, kernel):
    """Weighted leave-one-out mean squared error and its gradient in
    ``theta = [log h_1..h_d, log lambda_1..lambda_c]``."""
    n, d = X.shape
    total = weights.sum()
    value, grad = 0.0, np.zeros_like(theta)
    points = np.arange(n)
    for batch in row_batches(n, _row_bytes(X, codes)):
        rows = points[batch]
        p, D2, u2, M = _softmax_rows(theta, X, codes, weights, kernel, rows)
        fitted = p @ Y
        error = fitted - Y[rows]
        value += float(weights[rows] @ np.sum(error * error, axis=1))
        # A_ik = p_ik e_i . (y_k - yhat_i), weighted by w_i.
        A = p * (error @ Y.T - np.sum(error * fitted, axis=1, keepdims=True))
        A *= weights[rows, None]
        grad[d:] += 2.0 * np.einsum("ik,ikj->j", A, M)
        grad[:d] += 2.0 * np.einsum("ik,ikf->f", A * -2.0 * _dlog_alpha(kernel, u2), D2)
    return value / total, grad / total


def learn(X, codes, Y, weights, kernel, bandwidth, lambdas):
    """Widths and lambdas minimising the leave-one-out error, from the
    isotropic ``bandwidth`` and the shared ``lambdas``.

    Returns the widths, the lambdas, the number of iterations and the
    leave-one-out mean squared error (averaged over the outputs).
    """
    d = X.shape[1]
    mean = weights @ X / weights.sum()
    spread = np.sqrt(weights @ (X - mean) ** 2 / weights.sum())
    spread[spread == 0] = 1.0
    low = np.log(spread / WIDTH_RANGE)
    high = np.log(spread * WIDTH_RANGE)
    start = np.concatenate(
        [
            np.clip(np.log(np.broadcast_to(bandwidth, (d,))), low, high),
            np.log(np.clip(lambdas, *LAMBDA_BOUNDS)),
        ]
    )
    bounds = list(zip(low, high, strict=True))
    bounds += [tuple(np.log(LAMBDA_BOUNDS))] * codes.shape[1]
    result = minimize(
        loo_objective,
        start,
        args=(X, codes, Y, weights, kernel),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": MAX_ITER},
    )
    theta = result.x
    mse = loo_objective(theta, X, codes, Y, weights, kernel)[0] / Y.shape[1]
    return np.exp(theta[:d]), np.exp(theta[d:]), int(result.nit), mse
