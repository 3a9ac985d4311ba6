"""Slow, obviously correct references the engine is compared against."""

import math

import numpy as np

# The defining formulas of the kernels, as plain scalar Python.
FORMULAS = {
    "gaussian": lambda x: math.exp(-(x**2) / 2),
    "boxcar": lambda x: 1.0 if abs(x) < 1.0 else 0.0,
    "constant": lambda x: 1.0 + 0 * x,
    "epanechikov": lambda x: max(1 - abs(x), 0.0),
    "epanechnikov": lambda x: max(1 - x**2, 0.0),
    "biweight": lambda x: max(1 - x**2, 0.0) ** 2,
    "triweight": lambda x: max(1 - x**2, 0.0) ** 3,
    "tricube": lambda x: max(1 - abs(x) ** 3, 0.0) ** 3,
    "cosine": lambda x: math.cos(math.pi * x / 2) if abs(x) < 1 else 0.0,
    "exponential": lambda x: math.exp(-abs(x)),
    "cauchy": lambda x: 1 / (1 + x**2),
}


def nadaraya_watson(X, y, Q, alpha, bandwidth, sample_weight=None):
    """Nadaraya-Watson by a double loop over queries and keys.

    ``alpha`` is a scalar function of the scaled distance; ``bandwidth`` a
    float or one width per feature. Returns (n_queries,) for 1-D ``y`` and
    (n_queries, n_outputs) otherwise.
    """
    X, Q = np.asarray(X, dtype=float), np.asarray(Q, dtype=float)
    Y = np.asarray(y, dtype=float).reshape(len(X), -1)
    h = np.broadcast_to(np.asarray(bandwidth, dtype=float), (X.shape[1],))
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight)
    out = np.empty((len(Q), Y.shape[1]))
    for j, q in enumerate(Q):
        numerator = np.zeros(Y.shape[1])
        denominator = 0.0
        for i, k in enumerate(X):
            u = math.sqrt(sum(((q[f] - k[f]) / h[f]) ** 2 for f in range(len(q))))
            a = w[i] * alpha(u)
            numerator += a * Y[i]
            denominator += a
        out[j] = numerator / denominator
    return out if np.ndim(y) == 2 else out[:, 0]


def _scores(X, q, alpha, h, w):
    """``w_i alpha(||(q - k_i) / h||)`` by a loop over the keys."""
    scores = np.empty(len(X))
    for i, k in enumerate(X):
        u = math.sqrt(sum(((q[f] - k[f]) / h[f]) ** 2 for f in range(len(q))))
        scores[i] = w[i] * alpha(u)
    return scores


def _shrunk_hat(p, K, hat):
    """The hat rows ``[intercept; slope]`` of the safeguarded local-linear fit.

    ``K`` holds the keys about the query, in bandwidths. The slope rows of
    the plain fit are multiplied by the safeguard's factor ``s`` of the
    Mahalanobis distance ``D`` of the query from the local mean ``m`` of the
    keys, ``s = exp(-(D / tau - 1)**2 / 2)`` beyond ``tau = 3 sqrt(r + 1)``
    (``r`` the rank of the local covariance), and the intercept row is that
    of the line of the shrunk slope through ``(m, ybar)``:
    ``p - m^T (s slope rows)``.
    """
    m = p @ K
    C = (K - m).T @ ((K - m) * p[:, None])
    C_pinv = np.linalg.pinv(C)
    rank = np.linalg.matrix_rank(C)
    u = np.sqrt(m @ C_pinv @ m) / (3.0 * np.sqrt(rank + 1.0))
    s = 1.0 if u <= 1.0 else np.exp(-0.5 * (u - 1.0) ** 2)
    slope = s * hat[1:]
    return np.vstack([p - m @ slope, slope])


def local_fit(X, y, Q, alpha, bandwidth, sample_weight=None, degree=0):
    """Local polynomial fits by a loop over the queries.

    Each query solves its weighted least-squares problem on the design
    ``[1]`` (degree 0) or ``[1, k - q]`` (degree 1) through ``numpy.linalg.pinv``.
    Returns (mean, std, weights): the intercepts, the weighted standard
    deviations ``sqrt(sum_i p_i r_i**2)`` of the residuals ``r_i`` with the
    normalised kernel weights ``p_i``, and the rows of weights ``l`` with
    ``mean = l @ y`` (the equivalent kernel). Shapes follow ``y`` as in
    :func:`nadaraya_watson`.
    """
    X, Q = np.asarray(X, dtype=float), np.asarray(Q, dtype=float)
    Y = np.asarray(y, dtype=float).reshape(len(X), -1)
    h = np.broadcast_to(np.asarray(bandwidth, dtype=float), (X.shape[1],))
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight)
    mean = np.empty((len(Q), Y.shape[1]))
    std = np.empty_like(mean)
    weights = np.empty((len(Q), len(X)))
    for j, q in enumerate(Q):
        a = _scores(X, q, alpha, h, w)
        p = a / a.sum()
        design = np.ones((len(X), 1))
        if degree == 1:
            design = np.hstack([design, (X - q) / h])
        root = np.sqrt(p)[:, None]
        # The rows of pinv(sqrt(p) Z) times sqrt(p): the hat row of the intercept.
        hat = np.linalg.pinv(root * design) * root.T
        if degree == 1:
            hat = _shrunk_hat(p, design[:, 1:], hat)
        weights[j] = hat[0]
        coef = hat @ Y
        residuals = Y - design @ coef
        mean[j] = coef[0]
        std[j] = np.sqrt(p @ residuals**2)
    if np.ndim(y) == 1:
        mean, std = mean[:, 0], std[:, 0]
    return mean, std, weights
