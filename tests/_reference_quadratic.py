"""Slow, obviously correct references of the local quadratic fit (degree 2).

:func:`quadratic_fit` is the plain local weighted least-squares quadratic of
each query, by ``numpy.linalg.pinv`` of its dense design; :func:`guarded_fit`
the documented rule of ``degree=2`` with the safeguard, query by query, from
its defining formulas (the nested least squares of Frisch, Waugh and Lovell).
"""

import math

import numpy as np
from _reference import FORMULAS, kish, slope_factor

_EPS = float(np.finfo(float).eps)


def upper_products(K):
    """``upper(k k^T)`` of each row of ``K`` (n, d): the products
    ``k_j k_l`` for ``j <= l`` in the order of ``numpy.triu_indices``."""
    first, second = np.triu_indices(K.shape[1])
    return K[:, first] * K[:, second]


def upper_jacobian(x):
    """The derivative of :func:`upper_products` at the point ``x`` (d,),
    shape (d * (d + 1) / 2, d)."""
    d = len(x)
    first, second = np.triu_indices(d)
    J = np.zeros((len(first), d))
    for row, (a, b) in enumerate(zip(first, second, strict=True)):
        J[row, a] += x[b]
        J[row, b] += x[a]
    return J


def _scores(X, q, alpha, h, w):
    u = np.sqrt(np.sum(((X - q) / h) ** 2, axis=1))
    return w * np.array([alpha(v) for v in u])


def _prepare(X, y, bandwidth, sample_weight):
    X = np.asarray(X, dtype=float)
    Y = np.asarray(y, dtype=float).reshape(len(X), -1)
    h = np.broadcast_to(np.asarray(bandwidth, dtype=float), (X.shape[1],))
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, float)
    return X, Y, h, w


def quadratic_fit(X, y, Q, alpha, bandwidth, sample_weight=None):
    """Plain local quadratic fits by a loop over the queries.

    Each query solves the weighted least-squares problem of the full
    quadratic in ``z = (k - q) / h``, the design ``[1, z, upper(z z^T)]``
    (cross terms included), with the kernel weights ``w_i alpha(|z_i|)``,
    through ``numpy.linalg.pinv``. Returns ``(mean, weights, gradient)``:
    the intercepts (n_queries, n_outputs), the rows ``l`` of the intercept
    with ``mean = l @ y`` (the equivalent kernel), and the linear
    coefficients divided by ``h`` (n_queries, n_features, n_outputs).
    """
    X, Y, h, w = _prepare(X, y, bandwidth, sample_weight)
    Q = np.asarray(Q, dtype=float)
    d = X.shape[1]
    mean = np.empty((len(Q), Y.shape[1]))
    weights = np.empty((len(Q), len(X)))
    gradient = np.empty((len(Q), d, Y.shape[1]))
    for r, q in enumerate(Q):
        a = _scores(X, q, alpha, h, w)
        p = a / a.sum()
        Z = (X - q) / h
        design = np.hstack([np.ones((len(X), 1)), Z, upper_products(Z)])
        root = np.sqrt(p)[:, None]
        hat = np.linalg.pinv(root * design) * root.T
        weights[r] = hat[0]
        coef = hat @ Y
        mean[r] = coef[0]
        gradient[r] = coef[1 : d + 1] / h[:, None]
    return mean, weights, gradient


def _pinv_above(matrix, threshold):
    """The pseudo-inverse of a symmetric matrix over its eigenvalues above
    ``threshold``, and the number of them."""
    values, vectors = np.linalg.eigh(matrix)
    kept = values > threshold
    inverse = (vectors[:, kept] / values[kept]) @ vectors[:, kept].T
    return inverse, int(np.count_nonzero(kept))


def guarded_row(p, Z, Y, z, center, constant=False):
    """The safeguarded local quadratic fit of one query, from its weights.

    ``p`` (n,) the normalised weights of the keys ``Z`` (n, d) of positive
    weight, ``Y`` (n, n_outputs) their values, ``z`` the query, all in
    bandwidths; ``center`` the mean of the keys (the rank threshold of the
    linear block, as in :func:`_reference.safeguarded_row`); ``constant``:
    the constant kernel, whose fit the safeguard keeps.

    The rule: with ``m``, ``C``, ``beta = C^+ c`` of the local-linear fit,
    the quadratic features ``psi_i = upper(K_i K_i^T)`` of ``K_i = k_i - m``
    are regressed on ``[1, K]``: ``B = C_psi,k C^+``, residual features
    ``R_i = psi_i - psibar - B K_i``, their covariance ``Cr`` and
    ``gamma = Cr^+ R^T P (y - ybar)``. With ``t = 10 P2 sqrt(n) eps``
    (``P2 = d (d + 1) / 2``), a product whose residual variance is at most
    ``t sum_i p_i psi_ij**2`` gets no term, and ``Cr^+`` inverts the
    correlation matrix of the others over its eigenvalues above ``t``. With the
    query's ``r_q = psi(q - m) - psibar - B (q - m)``,
    ``D1**2 = (q - m)^T C^+ (q - m)``, ``Dr**2 = r_q^T Cr^+ r_q``,
    ``s1 = slope_factor(D1**2)``, ``s2 = slope_factor(D1**2 + Dr**2)``, the
    prediction is ``ybar + s1 beta . (q - m) + s2 gamma . r_q``: the plain
    quadratic fit for ``s1 = s2 = 1``, the safeguarded local-linear fit for
    ``s2 = 0``.
    """
    n, d = Z.shape
    P2 = d * (d + 1) // 2
    m = p @ Z
    K = Z - m
    C = (K * p[:, None]).T @ K
    second = np.sum(p * np.sum((Z - center) ** 2, axis=1))
    tolerance = 10 * d * math.sqrt(n) * _EPS
    C_pinv, rank = _pinv_above(C, tolerance * np.sqrt(second * np.trace(C)))
    ybar = p @ Y
    E = Y - ybar
    c = (K * p[:, None]).T @ E
    beta = C_pinv @ c
    Psi = upper_products(K)
    psibar = p @ Psi
    B = ((Psi - psibar) * p[:, None]).T @ K @ C_pinv
    R = Psi - psibar - K @ B.T
    Cr = (R * p[:, None]).T @ R
    tolerance = 10 * P2 * math.sqrt(n) * _EPS
    # Products whose residual variance is rounding of their own second
    # moment get no term; the others are inverted as correlations.
    kept = np.diag(Cr) > tolerance * (p @ Psi**2)
    unit = np.zeros(P2)
    unit[kept] = 1.0 / np.sqrt(np.diag(Cr)[kept])
    correlation, rank_r = _pinv_above(Cr * np.outer(unit, unit), tolerance)
    Cr_pinv = correlation * np.outer(unit, unit)
    gamma = Cr_pinv @ ((R * p[:, None]).T @ E)
    offset = z - m
    r_q = upper_products(offset[None])[0] - psibar - B @ offset
    k = kish(p, constant)
    d1 = max(offset @ C_pinv @ offset, 0.0)
    s1 = slope_factor(d1, k)
    s2 = slope_factor(d1 + max(r_q @ Cr_pinv @ r_q, 0.0), k)
    residuals = E - s1 * K @ beta - s2 * R @ gamma
    slope = s1 * beta + s2 * (upper_jacobian(offset) - B).T @ gamma
    return {
        "mean": ybar + s1 * offset @ beta + s2 * r_q @ gamma,
        "std": np.sqrt(p @ residuals**2),
        "weights": p * (1.0 + s1 * K @ C_pinv @ offset + s2 * R @ Cr_pinv @ r_q),
        "slope": slope,
        "shrinkage": s1,
        "quadratic_shrinkage": s2,
        "rank": rank,
        "quadratic_rank": rank_r,
    }


def guarded_fit(X, y, Q, alpha, bandwidth, sample_weight=None):
    """Safeguarded local quadratic fits (the rule of ``degree=2``), query by
    query (:func:`guarded_row`).

    Returns a dict of arrays, one row per query: ``mean`` and ``std``
    (n_queries, n_outputs), ``weights`` (the equivalent kernel over all
    rows, ``mean = weights @ y``), ``gradient`` (the linear coefficients of
    the fitted quadratic at the query, divided by ``h``: (n_queries,
    n_features, n_outputs)), ``shrinkage`` ``s1``, ``quadratic_shrinkage``
    ``s2``, ``rank`` and ``quadratic_rank``.
    """
    X, Y, h, w = _prepare(X, y, bandwidth, sample_weight)
    Q = np.asarray(Q, dtype=float)
    Z = X / h
    kept = w > 0
    center = Z[kept].mean(axis=0)
    constant = alpha is FORMULAS["constant"]
    rows = []
    for q in Q:
        a = _scores(X, q, alpha, h, w)
        p = a / a.sum()
        rows.append(guarded_row(p[kept], Z[kept], Y[kept], q / h, center, constant))
    out = {key: np.array([row[key] for row in rows]) for key in rows[0]}
    weights = np.zeros((len(Q), len(X)))
    weights[:, kept] = out["weights"]
    out["weights"] = weights
    out["gradient"] = out.pop("slope") / h[:, None]
    return out
