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
