"""Local-linear pooling from kernel-weighted moments.

At a query ``q`` the local-linear fit minimises
``sum_i a_i (y_i - b - beta . (k_i - q))**2`` over ``b`` and ``beta``, with
``a_i = w_i alpha(u_i)`` the attention scores, and predicts ``b``. With
``p_i = a_i / sum_j a_j`` the normalised weights, ``m = sum_i p_i k_i`` the
local mean of the keys, ``C = sum_i p_i (k_i - m)(k_i - m)^T`` their local
covariance and ``c = sum_i p_i (k_i - m) y_i`` the local cross-covariance,
the solution is::

    beta = C^{-1} c,    b = ybar - beta . (m - q)

All of it follows from the moments ``sum_i a_i [k_i, k_i k_i^T, y_i,
k_i y_i, y_i**2, 1]``, which one product of a chunk's scores against the
matrix of :func:`moment_matrix` gives for every query at once; only the
batched ``d x d`` eigendecompositions of ``C`` remain. The keys are scaled by
the bandwidth and centred on their mean by the engine, and the values
centred on their weighted mean, so the covariances are differences of
moments as large as the squared extent of the data (in bandwidths), never
of its squared offset from the origin.

The prediction is also a weighted sum of the values,
``b = sum_i l_i y_i`` with the equivalent-kernel weights
``l_i = p_i (1 - g . (k_i - m))``, ``g = C^{-1} (m - q)``: they sum to one and
may be negative.
"""

import numpy as np

_EPS = float(np.finfo(np.float64).eps)
# Moments about the global centre of the keys and values lose about
# n eps times (second moment / local variance) to cancellation; past this
# ratio a row is computed again about its own local means (two passes).
MAX_MOMENT_RATIO = 2.0**10


class MomentLayout:
    """Column positions of the moments of ``d`` features and ``p`` outputs.

    ``n_keys``, the number of keys summed over, sets the rounding tolerance
    of the local covariances (see :func:`_local_geometry`): an int, or an
    ndarray of one count per query when the queries pool different sets of
    keys (held-out predictions).
    """

    def __init__(self, n_features, n_outputs, n_keys):
        d, p = n_features, n_outputs
        self.n_features, self.n_outputs = d, p
        # Rounding errors of the summed moments grow like sqrt(n) eps; a
        # perturbation of the entries of a d x d matrix moves its eigenvalues
        # by up to d times as much; 10 is a margin of safety.
        self.rank_tolerance = 10.0 * d * np.sqrt(n_keys) * _EPS
        self.upper = np.triu_indices(d)
        self.keys = slice(0, d)
        self.squares = slice(d, d + len(self.upper[0]))
        start = self.squares.stop
        self.values = slice(start, start + p)
        self.cross = slice(start + p, start + p + d * p)
        self.values_sq = slice(start + p + d * p, start + 2 * p + d * p)


def moment_matrix(keys, values=None, weights=None):
    """The per-key columns ``[k, upper(k k^T), y, k (x) y, y**2, 1]``.

    Parameters
    ----------
    keys : ndarray of shape (n_keys, n_features)
        Scaled, centred keys (float64).
    values : ndarray of shape (n_keys, n_outputs) or None
        Centred values (float64); None leaves out every column of ``y``.
    weights : ndarray of shape (n_keys,) or None
        Sample weights to fold into every column, or None when the scores
        already carry them.

    Returns
    -------
    matrix : ndarray of shape (n_keys, n_columns)
        Float64, the column of ones last: a chunk's scores times it are the
        weighted moments, the last column their total weight.
    """
    upper = np.triu_indices(keys.shape[1])
    columns = [keys, keys[:, upper[0]] * keys[:, upper[1]]]
    if values is not None:
        cross = keys[:, :, None] * values[:, None, :]
        columns += [values, cross.reshape(len(keys), -1), values * values]
    columns.append(np.ones((len(keys), 1)))
    matrix = np.hstack(columns)
    if weights is not None:
        matrix *= weights[:, None]
    return matrix


def _symmetric(upper_values, layout, n_rows):
    d = layout.n_features
    full = np.empty((n_rows, d, d))
    i, j = layout.upper
    full[:, i, j] = upper_values
    full[:, j, i] = upper_values
    return full


def _local_geometry(means, queries, layout, centers=None, scale=None):
    """Local key means, covariances and the singular rows.

    ``means`` holds the normalised moments (the sums divided by the total).
    A covariance is singular when its smallest eigenvalue is within the
    rounding error of its computation from the moments,
    ``10 d sqrt(n) eps trace(E[(k - c)(k - c)^T])`` in squared bandwidths for
    ``n`` keys centred on their mean ``c``: fewer than ``d + 1`` keys in
    general position carry the weight, or the others weigh too little to
    tell their spread from rounding. The slope of such a fit would be made of
    rounding errors. ``centers`` holds ``c`` per row when it is not the
    origin of the moments (None: it is). ``scale``, if given, replaces the
    trace (see :func:`centred_fit`).
    """
    n = len(queries)
    m = means[:, layout.keys]
    second = _symmetric(means[:, layout.squares], layout, n)
    cov = second - m[:, :, None] * m[:, None, :]
    if scale is None:
        scale = np.trace(second, axis1=1, axis2=2)
        if centers is not None:
            # trace E[(k - c)(k - c)^T] = trace E[k k^T] - 2 c . m + |c|^2
            scale = scale - 2.0 * np.einsum("nf,nf->n", centers, m)
            scale += np.einsum("nf,nf->n", centers, centers)
    # NaN rows (no weight at all) are handled by the caller's fallbacks.
    cov[~np.isfinite(scale)] = np.eye(layout.n_features)
    eigenvalues, vectors = np.linalg.eigh(cov)
    tol = layout.rank_tolerance * np.where(np.isfinite(scale), scale, 0.0)
    singular = ~(eigenvalues[:, 0] > tol)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inverse = np.where(singular[:, None], 0.0, 1.0 / eigenvalues)
    return m, vectors, inverse, singular


def _apply_inverse(vectors, inverse, rhs):
    """``C^{-1} rhs`` per row from the eigendecomposition; rhs (n, d, k)."""
    projected = np.einsum("nfe,nfk->nek", vectors, rhs)
    return np.einsum("nfe,nek->nfk", vectors, inverse[:, :, None] * projected)


def solve(sums, queries, layout, return_std, centers=None, scale=None):
    """Local-linear predictions from a chunk's weighted moments.

    Parameters
    ----------
    sums : ndarray of shape (n_queries, n_columns)
        The scores times :func:`moment_matrix` (with values).
    queries : ndarray of shape (n_queries, n_features)
        The queries, scaled and centred like the keys.
    layout : MomentLayout
        The column positions.
    return_std : bool
        Whether to return the weighted spread of the residuals.
    centers : ndarray of shape (n_queries, n_features) or None
        The mean of the keys of each query's fit, in the frame of the
        moments, when it is not the origin (held-out fits pool subsets of the
        keys). It only sets the singular threshold.
    scale : ndarray of shape (n_queries,) or None
        The scale of the singular threshold, when it is not the trace of
        the second moments about ``centers`` (see :func:`centred_fit`).

    Returns
    -------
    mean : ndarray of shape (n_queries, n_outputs)
        The local-linear predictions of the centred values; the local mean
        (degree 0) on singular rows, NaN on rows without weight.
    std : ndarray of shape (n_queries, n_outputs) or None
        ``sqrt(sum_i p_i r_i**2)`` of the residuals ``r_i`` of the local fit
        (of the local mean on singular rows), negative variances clipped.
    singular : ndarray of shape (n_queries,) of bool
        The rows of positive weight that fell back to the local mean.
    """
    total = sums[:, -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums[:, :-1] / total[:, None]
    m, vectors, inverse, singular = _local_geometry(
        means, queries, layout, centers, scale
    )
    d, p = layout.n_features, layout.n_outputs
    ybar = means[:, layout.values]
    cross = means[:, layout.cross].reshape(-1, d, p) - m[:, :, None] * ybar[:, None]
    beta = _apply_inverse(vectors, inverse, cross)  # zero on singular rows
    mean = ybar - np.einsum("nfk,nf->nk", beta, m - queries)
    std = None
    if return_std:
        variance = means[:, layout.values_sq] - ybar * ybar
        variance -= np.einsum("nfk,nfk->nk", beta, cross)
        std = np.sqrt(np.maximum(variance, 0.0))
    return mean, std, singular & (total > 0)


def equivalent_kernel(means, queries, layout, scale=None):
    """The factors of the equivalent-kernel weights of a chunk.

    Parameters
    ----------
    means : ndarray of shape (n_queries, n_features * (n_features + 3) // 2)
        Normalised geometry moments ``sum_i p_i [k_i, upper(k_i k_i^T)]``.
    queries : ndarray of shape (n_queries, n_features)
        The queries, scaled and centred like the keys.
    layout : MomentLayout
        The column positions.
    scale : ndarray of shape (n_queries,) or None
        The scale of the singular threshold, as in :func:`solve`.

    Returns
    -------
    offset : ndarray of shape (n_queries,)
        ``1 + g . m``.
    g : ndarray of shape (n_queries, n_features)
        ``C^{-1} (m - q)``, so that ``l_i = p_i (offset - g . k_i)``; zero on
        singular rows, whose weights stay the local-constant ones.
    singular : ndarray of shape (n_queries,) of bool
        The singular rows.
    """
    m, vectors, inverse, singular = _local_geometry(means, queries, layout, scale=scale)
    g = _apply_inverse(vectors, inverse, (m - queries)[:, :, None])[:, :, 0]
    g[~np.isfinite(g)] = 0.0
    offset = 1.0 + np.einsum("nf,nf->n", g, np.nan_to_num(m))
    return offset, g, singular


def cancelled(sums, layout):
    """Rows whose moments about the global centres cancel (see ``solve``).

    The key moments cancel when the local mean of the keys is far from their
    centre in units of their local spread, the value moments when the local
    mean of the values is far from theirs: past ``MAX_MOMENT_RATIO``.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums[:, :-1] / sums[:, -1:]
    y_second = means[:, layout.values_sq]
    y_spread = y_second - means[:, layout.values] ** 2
    return keys_cancelled(means, layout) | np.any(
        y_second > MAX_MOMENT_RATIO * y_spread, axis=1
    )


def keys_cancelled(means, layout):
    """Rows of normalised moments whose key covariance cancels (see
    :func:`cancelled`)."""
    d = layout.n_features
    i, j = layout.upper
    second = means[:, layout.squares][:, i == j].sum(axis=1)
    spread = second - np.einsum("nf,nf->n", means[:, :d], means[:, :d])
    return second > MAX_MOMENT_RATIO * spread


def centred_geometry(p, keys, layout, centers=None):
    """Local key means, centred moments and singular scales of rows of ``p``.

    Returns ``(m, means, scale, D)``: the local means of the keys, the
    normalised moments ``[0, upper(C), ...]`` about them (zeros past the
    key columns, 1 last), the singular scale of :func:`centred_fit` and the
    centred keys ``D`` of every row, shape (n_rows, n_keys, n_features).
    """
    m = np.einsum("rn,nf->rf", p, keys)
    D = keys[None] - m[:, None]
    means = np.zeros((len(p), layout.values_sq.stop + 1))
    means[:, -1] = 1.0
    i, j = layout.upper
    means[:, layout.squares] = np.einsum("rn,rnf,rnf->rf", p, D[:, :, i], D[:, :, j])
    trace = means[:, layout.squares][:, i == j].sum(axis=1)
    offset = m if centers is None else m - centers
    scale = np.sqrt((trace + np.einsum("rf,rf->r", offset, offset)) * trace)
    return m, means, scale, D


def centred_fit(p, keys, values, queries, layout, return_std, centers=None):
    """Fits of rows of normalised weights about their own local means.

    The two-pass counterpart of :func:`solve`: the keys and values are
    centred on each row's weighted means before any product, so that no
    moment cancels, whatever the distance of the row's keys and values from
    the global centres. A row's result does not depend on the other rows
    (``einsum`` sums each row alone, where BLAS products may not).

    Parameters
    ----------
    p : ndarray of shape (n_rows, n_keys)
        Normalised weights (float64), rows summing to one.
    keys : ndarray of shape (n_keys, n_features)
        The keys, in the frame of ``queries``.
    values : ndarray of shape (n_keys, n_outputs)
        The (centred) values.
    queries : ndarray of shape (n_rows, n_features)
        The queries.
    layout : MomentLayout or None
        The layout of local-linear moments, or None for the local mean
        (degree 0).
    return_std : bool
        Whether to compute the spread.
    centers : ndarray of shape (n_rows, n_features) or None
        The mean of the keys of each row's fit (None: the origin).

    The singular threshold is that of :func:`solve` with the rounding of
    this computation: the centred keys ``k - m`` round by an ulp of
    ``|k - c|`` (``c`` the mean of the keys), so the covariance by about
    ``eps sqrt(E|k - c|^2 trace(C))``, which takes the place of the trace
    ``E|k - c|^2 = trace(C) + |m - c|^2`` of the moments about ``c``.

    Returns
    -------
    mean, std, singular
        As :func:`solve` (std: the two-pass spread of the values around the
        local mean for degree 0; singular: None for degree 0).
    """
    ybar = np.einsum("rn,nk->rk", p, values)
    E = values[None] - ybar[:, None]
    variance = np.einsum("rn,rnk,rnk->rk", p, E, E)
    if layout is None:
        return ybar, np.sqrt(variance), None
    m, means, scale, D = centred_geometry(p, keys, layout, centers)
    cross = np.einsum("rn,rnf,rnk->rfk", p, D, E)
    means[:, layout.cross] = cross.reshape(len(p), -1)
    means[:, layout.values_sq] = variance
    mean, std, singular = solve(means, queries - m, layout, return_std, scale=scale)
    return mean + ybar, std, singular
