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


#: The documented leverage up to which the local-linear safeguard keeps the
#: slope: the variance of one observation.
MAX_LEVERAGE = 1.0


def slope_factor(distance_sq, kish):
    """The safeguard's factor ``s`` of the slope at the squared Mahalanobis
    distance ``distance_sq`` of a query from its local mean, ``kish`` the
    sum of its squared normalised weights (``1 / n_eff``): with the leverage
    ``L = (1 + distance_sq) * kish``, 1 up to ``MAX_LEVERAGE``, then
    ``exp(-(sqrt(L / MAX_LEVERAGE) - 1)**2 / 2)``. A ``kish`` of 0 (the
    constant kernel, whose fit is the global line) keeps every slope."""
    u = math.sqrt((1.0 + distance_sq) * kish / MAX_LEVERAGE)
    return 1.0 if u <= 1.0 else math.exp(-0.5 * (u - 1.0) ** 2)


def kish(p, constant=False):
    """``sum_i p_i**2`` of normalised weights ``p``, 0 for the constant
    kernel (``constant``)."""
    return 0.0 if constant else float(np.sum(np.asarray(p) ** 2))


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


def _shrunk_hat(p, K, hat, constant=False):
    """The hat rows ``[intercept; slope]`` of the safeguarded local-linear fit.

    ``K`` holds the keys about the query, in bandwidths. The slope rows of
    the plain fit are multiplied by the safeguard's factor ``s``
    (:func:`slope_factor`) of the leverage ``(1 + D**2) sum_i p_i**2`` of
    the query, ``D`` its Mahalanobis distance from the local mean ``m`` of
    the keys (none for the ``constant`` kernel), and the intercept row is
    that of the line of the shrunk slope through ``(m, ybar)``:
    ``p - m^T (s slope rows)``.
    """
    m = p @ K
    C = (K - m).T @ ((K - m) * p[:, None])
    C_pinv = np.linalg.pinv(C)
    s = slope_factor(max(m @ C_pinv @ m, 0.0), kish(p, constant))
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
            hat = _shrunk_hat(p, design[:, 1:], hat, alpha is FORMULAS["constant"])
        weights[j] = hat[0]
        coef = hat @ Y
        residuals = Y - design @ coef
        mean[j] = coef[0]
        std[j] = np.sqrt(p @ residuals**2)
    if np.ndim(y) == 1:
        mean, std = mean[:, 0], std[:, 0]
    return mean, std, weights


def safeguarded_row(p, Z, Y, z, center, constant=False, inverse_count=None):
    """The safeguarded local-linear fit of one query, from its weights.

    ``p`` (n,) the normalised weights of the keys ``Z`` (n, d) of positive
    sample weight, in the coordinates of the query ``z``; ``Y`` (n,
    n_outputs) their values; ``center`` their mean, about which the rank
    threshold takes the trace of the local second moments (see
    :func:`safeguarded_fit`); ``constant``: the constant kernel, whose slope
    the safeguard keeps; ``inverse_count``: ``1 / n_eff`` where it is not
    :func:`kish` of ``p`` (see :func:`safeguarded_fit`). Returns a dict of
    the fit's ``mean``, ``std``, equivalent-kernel ``weights``,
    ``shrinkage`` ``s``, ``rank``, ``slope`` ``s beta`` (d, n_outputs),
    ``local_mean`` and ``local_std``.
    """
    n, d = Z.shape
    tolerance = 10 * d * math.sqrt(n) * np.finfo(float).eps
    m = p @ Z
    K = Z - m
    C = (K * p[:, None]).T @ K
    ybar = p @ Y
    E = Y - ybar
    c = (K * p[:, None]).T @ E
    # The rounding of the two-pass computation (see ``centred_fit``).
    second = np.sum(p * np.sum((Z - center) ** 2, axis=1))
    threshold = tolerance * np.sqrt(second * np.trace(C))
    eigenvalues = np.linalg.eigvalsh(C)
    rank = int(np.count_nonzero(eigenvalues > threshold))
    if rank == d:
        inverse = np.linalg.inv(C)
    elif rank == 0:
        inverse = np.zeros((d, d))
    else:
        # The pseudo-inverse over the eigenvalues above the threshold.
        values, vectors = np.linalg.eigh(C)
        kept = values > threshold
        inverse = (vectors[:, kept] / values[kept]) @ vectors[:, kept].T
    offset = z - m
    if inverse_count is None or constant:
        inverse_count = kish(p, constant)
    s = slope_factor(max(offset @ inverse @ offset, 0.0), inverse_count)
    beta = inverse @ c  # (d, n_outputs), per unit of z
    residuals = E - s * K @ beta
    return {
        "mean": ybar + s * offset @ beta,
        "std": np.sqrt(p @ residuals**2),
        "weights": p * (1.0 - K @ (s * inverse @ -offset)),
        "shrinkage": s,
        "kish": inverse_count,
        "rank": rank,
        "slope": s * beta,
        "local_mean": ybar,
        "local_std": np.sqrt(p @ E**2),
    }


def safeguarded_fit(
    X, y, Q, alpha, bandwidth, sample_weight=None, log_alpha=None, square_weight=None
):
    """Local-linear fits with the slope safeguard, query by query.

    The documented rule of ``degree=1``, in the coordinates ``z = x / h``:
    with ``a_i = w_i alpha(|q - k_i| / h)`` and ``p = a / sum(a)``, the local
    mean ``m`` of the keys, their covariance ``C``, the cross-covariance
    ``c`` with the values, ``C^+`` the pseudo-inverse of ``C`` without the
    eigenvalues at most ``10 d sqrt(n) eps`` times the trace of the local
    second moments of the keys about their mean (``n`` keys of positive
    weight), ``r`` its rank, ``D**2 = (q - m)^T C^+ (q - m)``,
    ``u = sqrt((1 + D**2) sum_i p_i**2)`` (the root of the query's leverage;
    0 for the constant kernel) and ``s = 1`` if ``u <= 1`` else
    ``exp(-(u - 1)**2 / 2)``, the prediction is
    ``ybar + s beta . (q - m)`` with ``beta = C^+ c`` (:func:`safeguarded_row`).

    ``log_alpha``, the logarithm of ``alpha`` where given, weighs the keys
    of queries far from every key (whose ``alpha`` underflows).
    ``square_weight``, where given, holds the squared sample weights that
    ``n_eff`` counts in place of ``sample_weight**2`` (keys that stand for
    several rows, as the nodes of a binned grid):
    ``1 / n_eff = sum_i v_i alpha_i**2 / (sum_i w_i alpha_i)**2``. Every query
    must have keys of positive weight. Returns a dict of arrays, one row per
    query: ``mean`` and ``std`` (the spread ``sqrt(sum_i p_i e_i**2)`` of
    the residuals ``e_i`` of the shrunk local line), both (n_queries,
    n_outputs); ``weights``, the equivalent kernel ``l`` with
    ``mean = l @ y``; ``shrinkage`` ``s``; ``gradient`` ``s beta / h`` of
    shape (n_queries, n_features, n_outputs); ``rank``; ``local_mean``
    ``ybar`` and ``local_std``, the weighted spread of the values; and
    ``attention``, the normalised weights ``p``.
    """
    X, Q = np.asarray(X, dtype=float), np.asarray(Q, dtype=float)
    Y = np.asarray(y, dtype=float).reshape(len(X), -1)
    n, d = X.shape
    h = np.broadcast_to(np.asarray(bandwidth, dtype=float), (d,))
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, float)
    Z = X / h
    center = Z[w > 0].mean(axis=0)
    rows = []
    attention = np.empty((len(Q), n))
    for j, q in enumerate(Q):
        u = np.sqrt(np.sum(((X - q) / h) ** 2, axis=1))
        if log_alpha is None:
            a = w * np.array([alpha(v) for v in u])
        else:
            with np.errstate(divide="ignore"):
                logits = np.log(w) + np.array([log_alpha(v) for v in u])
            a = np.exp(logits - logits.max())
        attention[j] = p = a / a.sum()
        kept = w > 0
        constant = alpha is FORMULAS["constant"]
        count = None
        if square_weight is not None:
            # a / w is alpha, up to the common factor of a that cancels.
            alpha_kept = a[kept] / w[kept]
            count = float(np.sum(square_weight[kept] * alpha_kept**2))
            count /= a.sum() ** 2
        rows.append(
            safeguarded_row(p[kept], Z[kept], Y[kept], q / h, center, constant, count)
        )
    out = {key: np.array([row[key] for row in rows]) for key in rows[0]}
    weights = np.zeros((len(Q), n))
    weights[:, w > 0] = out["weights"]
    out["weights"] = weights
    out["gradient"] = out.pop("slope") / h[:, None]
    out["attention"] = attention
    return out
