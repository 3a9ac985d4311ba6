"""Local-linear pooling from kernel-weighted moments.

At a query ``q`` the local-linear fit minimises
``sum_i a_i (y_i - b - beta . (k_i - q))**2`` over ``b`` and ``beta``, with
``a_i = w_i alpha(u_i)`` the attention scores, and predicts ``b``. With
``p_i = a_i / sum_j a_j`` the normalised weights, ``m = sum_i p_i k_i`` the
local mean of the keys, ``C = sum_i p_i (k_i - m)(k_i - m)^T`` their local
covariance and ``c = sum_i p_i (k_i - m) y_i`` the local cross-covariance,
the solution is::

    beta = C^+ c,    b = ybar - beta . (m - q)

with ``C^+`` the pseudo-inverse of ``C`` over its numerically determined
rank (:func:`_local_geometry`): the ordinary local-linear fit where ``C`` has
full rank, and the minimum-norm (Moore--Penrose) least-squares solution of
the weighted design ``[1, k_i - m]`` at ``q`` where it does not (collinear
features, too few keys). Only a design of rank 0 gets the local mean.

For a few features all of it follows from the moments ``sum_i a_i [k_i,
k_i k_i^T, y_i, k_i y_i, y_i**2, 1]``, which one product of a chunk's scores
against the matrix of :func:`moment_matrix` gives for every query at once;
only the batched ``d x d`` eigendecompositions of ``C`` remain. For many
features, whose moment matrix (``n_keys x d**2 / 2``) would not fit,
:func:`centred_fit` sums each query's ``C`` and ``c`` from its weighted keys
instead. The keys are scaled by
the bandwidth and centred on their mean by the engine, and the values
centred on their weighted mean, so the covariances are differences of
moments as large as the squared extent of the data (in bandwidths), never
of its squared offset from the origin.

The slope is shrunk by a safeguard where the query's leverage in its local
fit is high (:mod:`._safeguard`). The two-pass fit from weighted keys is in
:mod:`._centred_fit`.

The prediction is also a weighted sum of the values,
``b = sum_i l_i y_i`` with the equivalent-kernel weights
``l_i = p_i (1 - g . (k_i - m))``, ``g = s C^+ (m - q)``: they sum to one
and may be negative.
"""

import numpy as np

from ._safeguard import shrink

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


def rank_counts(rank, n_features, rows=None):
    """``(n_singular, n_rank_deficient)`` of an array of local ranks.

    ``rows``, a boolean mask, restricts the count (e.g. to non-empty rows).
    """
    if rows is not None:
        rank = rank[rows]
    singular = int(np.count_nonzero(rank == 0))
    return singular, int(np.count_nonzero(rank < n_features)) - singular


def _pseudo_inverse(cov, scale, layout, offset, kish=None):
    """Eigendecomposition and shrunk pseudo-inverse of local covariances.

    ``cov`` (n, d, d) is overwritten. The numerical rank of a row is the
    number of eigenvalues of ``cov`` above the rounding error of its
    computation, ``layout.rank_tolerance * scale``; the pseudo-inverse
    inverts those and sets the others to zero (the Moore--Penrose inverse of
    the matrix with its rounding-level eigenvalues set to zero). Rows whose
    ``scale`` is not finite (no weight) get the identity, and rank ``d``.
    ``offset`` (n, d), ``m - q``, and ``kish`` (n,), ``1 / n_eff`` of each
    row's weights (:func:`._safeguard.kish_ratio`), set the safeguard's
    factor ``s`` of each row, by which the inverse is multiplied
    (:func:`._safeguard.shrink`); an ``offset`` of None leaves the inverse
    unshrunk (a covariance used for no query).

    Returns ``(vectors, inverse, rank, s)``: the eigenvectors, the inverted
    eigenvalues times ``s`` (zero off the rank), the rank of each row and
    ``s`` (ones when ``offset`` is None).
    """
    cov[~np.isfinite(scale)] = np.eye(layout.n_features)
    eigenvalues, vectors = np.linalg.eigh(cov)
    tol = layout.rank_tolerance * np.where(np.isfinite(scale), scale, 0.0)
    kept = eigenvalues > tol[:, None]  # NaN eigenvalues are not kept
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inverse = np.where(kept, 1.0 / eigenvalues, 0.0)
    rank = np.count_nonzero(kept, axis=1)
    if offset is None:
        return vectors, inverse, rank, np.ones(len(rank))
    s = shrink(vectors, inverse, offset, kish)
    return vectors, inverse, rank, s


def _local_geometry(
    means, queries, layout, centers=None, scale=None, shrunk=True, kish=None
):
    """Local key means, the pseudo-inverse of the covariances, and ranks.

    ``means`` holds the normalised moments (the sums divided by the total).
    An eigenvalue of a covariance is zero when it is within the rounding
    error of its computation from the moments,
    ``10 d sqrt(n) eps trace(E[(k - c)(k - c)^T])`` in squared bandwidths for
    ``n`` keys centred on their mean ``c``: the keys that carry the weight
    do not spread along its eigenvector (collinear columns, such as a full
    one-hot block; fewer than ``d + 1`` keys in general position), or the
    others weigh too little to tell their spread from rounding. A slope along
    such a direction would be made of rounding errors; the fit takes none
    (:func:`solve`). ``centers`` holds ``c`` per row when it is not the
    origin of the moments (None: it is). ``scale``, if given, replaces the
    trace (see :func:`centred_fit`).

    Returns ``(m, vectors, inverse, rank, s)``: the pseudo-inverse is shrunk
    by the safeguard's factor ``s`` of each query (:func:`_pseudo_inverse`,
    from ``kish``, ``1 / n_eff`` of each query's weights), unless ``shrunk``
    is False (``s`` then ones), for callers that apply the safeguard
    themselves (the case-deletion formulas of jackknife+).
    """
    n = len(queries)
    m = means[:, layout.keys]
    cov = _symmetric(means[:, layout.squares], layout, n)
    if scale is None:
        scale = np.trace(cov, axis1=1, axis2=2)
        if centers is not None:
            # trace E[(k - c)(k - c)^T] = trace E[k k^T] - 2 c . m + |c|^2
            scale = scale - 2.0 * np.einsum("nf,nf->n", centers, m)
            scale += np.einsum("nf,nf->n", centers, centers)
    cov -= m[:, :, None] * m[:, None, :]
    offset = m - queries if shrunk else None
    return (m, *_pseudo_inverse(cov, scale, layout, offset, kish))


def _apply_inverse(vectors, inverse, rhs):
    """``C^+ rhs`` per row from the eigendecomposition; rhs (n, d, k)."""
    projected = np.einsum("nfe,nfk->nek", vectors, rhs)
    return np.einsum("nfe,nek->nfk", vectors, inverse[:, :, None] * projected)


def _fit(m, vectors, inverse, ybar, cross, variance, queries, s):
    """The minimum-norm local-linear fit from the local moments.

    ``beta = s C^+ c`` (``inverse`` already holds ``s C^+``) and
    ``b = ybar - beta . (m - q)``, and the residual variance of the local
    line of slope ``beta``, ``variance - (2 - s) beta . c`` (None: not
    asked).
    """
    beta = _apply_inverse(vectors, inverse, cross)  # zero where rank 0
    mean = ybar - np.einsum("nfk,nf->nk", beta, m - queries)
    std = None
    if variance is not None:
        explained = np.einsum("nfk,nfk->nk", beta, cross) * (2.0 - s)[:, None]
        std = np.sqrt(np.maximum(variance - explained, 0.0))
    return mean, std


def solve(
    sums,
    queries,
    layout,
    return_std,
    centers=None,
    scale=None,
    return_shrinkage=False,
    *,
    kish,
):
    """Local-linear predictions from a chunk's weighted moments.

    The slope is the minimum-norm solution ``beta = C^+ c`` of the local
    normal equations ``C beta = c``, with ``C^+`` the pseudo-inverse over
    the numerically determined rank of ``C`` (:func:`_local_geometry`), and
    the prediction ``b = ybar - beta . (m - q)``. This is the Moore--Penrose
    (minimum-norm) least-squares solution of the weighted design
    ``[1, k_i - m]`` evaluated at ``q``: the ordinary local-linear fit where
    ``C`` has full rank; where it does not, the slope along the directions
    the keys determine and none along the others, so that a rank-deficient
    design (collinear features, too few keys) still gets a slope. A design
    of rank 0 (the weight on one key, or on identical keys) gets the local
    mean.

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
        keys). It only sets the rank threshold.
    scale : ndarray of shape (n_queries,) or None
        The scale of the rank threshold, when it is not the trace of
        the second moments about ``centers`` (see :func:`centred_fit`).
    return_shrinkage : bool, default=False
        Whether to return the safeguard's factors ``s`` as well.
    kish : ndarray of shape (n_queries,)
        ``1 / n_eff`` of each query's weights, for the safeguard
        (:func:`._safeguard.kish_ratio`).

    Returns
    -------
    mean : ndarray of shape (n_queries, n_outputs)
        The local-linear predictions of the centred values; the local mean
        (degree 0) on rows of rank 0, NaN on rows without weight.
    std : ndarray of shape (n_queries, n_outputs) or None
        ``sqrt(sum_i p_i r_i**2)`` of the residuals ``r_i`` of the local fit
        (of the local mean on rows of rank 0), negative variances clipped.
    rank : ndarray of shape (n_queries,) of int
        The numerical rank of each row's local covariance: 0 for the rows
        that fell back to the local mean, below ``n_features`` for
        rank-deficient ones, ``n_features`` on rows without weight.
    shrinkage : ndarray of shape (n_queries,)
        The factors ``s`` of the slopes (only with ``return_shrinkage``).
    """
    total = sums[:, -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums[:, :-1] / total[:, None]
    m, vectors, inverse, rank, s = _local_geometry(
        means, queries, layout, centers, scale, kish=kish
    )
    d, p = layout.n_features, layout.n_outputs
    ybar = means[:, layout.values]
    cross = means[:, layout.cross].reshape(-1, d, p) - m[:, :, None] * ybar[:, None]
    variance = None
    if return_std:
        variance = means[:, layout.values_sq] - ybar * ybar
    mean, std = _fit(m, vectors, inverse, ybar, cross, variance, queries, s)
    rank[~(total > 0)] = d
    if return_shrinkage:
        return mean, std, rank, s
    return mean, std, rank


def equivalent_kernel(
    means, queries, layout, scale=None, return_shrinkage=False, *, kish
):
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
        The scale of the rank threshold, as in :func:`solve`.
    return_shrinkage : bool, default=False
        Whether to return the safeguard's factors ``s`` as well.
    kish : ndarray of shape (n_queries,)
        ``1 / n_eff`` of each query's weights, as in :func:`solve`.

    Returns
    -------
    offset : ndarray of shape (n_queries,)
        ``1 + g . m``.
    g : ndarray of shape (n_queries, n_features)
        ``s C^+ (m - q)``, so that ``l_i = p_i (offset - g . k_i)``; zero on
        rows of rank 0, whose weights stay the local-constant ones.
    rank : ndarray of shape (n_queries,) of int
        The ranks, as in :func:`solve`.
    shrinkage : ndarray of shape (n_queries,)
        The factors ``s`` (only with ``return_shrinkage``).
    """
    m, vectors, inverse, rank, s = _local_geometry(
        means, queries, layout, scale=scale, kish=kish
    )
    g = _apply_inverse(vectors, inverse, (m - queries)[:, :, None])[:, :, 0]
    g[~np.isfinite(g)] = 0.0
    offset = 1.0 + np.einsum("nf,nf->n", g, np.nan_to_num(m))
    if return_shrinkage:
        return offset, g, rank, s
    return offset, g, rank


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
