"""Pooled moments of the NumPy engine: the spread and the local-linear fit.

``return_std`` pools the second moments of the values
(``spread_matrix``), ``degree=1`` the moments of the keys and their cross
moments with the values (``moment_matrix``, :mod:`._local_linear`), by the
same product of the chunk's scores as the pooled values. Rows whose moments
cancel are fitted again in two passes about their own local means.
:class:`LocalMoments`, held by a :class:`._pooling.KernelPool`, builds the
matrices and decides how their fits are held in memory; the functions
below are the chunk works of the pool's spread and local-linear fit.
"""

import functools

import numpy as np

from .._utils._threads import engine_threads
from .._utils._warn import warn
from .._utils._warnings import LocalLinearFallbackWarning, LocalLinearMemoryWarning
from .._utils._working_memory import working_memory_bytes
from . import _centred_fit, _local_linear, _local_quadratic
from . import _query_chunks as _chunk_plan
from . import _weight_rows as _weights
from ._protocol import moment_spread, normalise, square_sums
from ._safeguard import kish_ratio

# Local-linear pooling pools a moment matrix of ``(d + 1)(d + 2) / 2 + (d + 2) p``
# columns per key when it takes at most a quarter of ``working_memory`` (or
# this many bytes, whatever the budget): one product then gives every
# query's local normal equations. Larger ones (many features) are not formed:
# each query's equations are summed from its weighted keys instead
# (:func:`._centred_fit.centred_fit`), within ``working_memory``.
MOMENT_MATRIX_SHARE = 4
MOMENT_MATRIX_FLOOR = 2**22
# Bytes per query of the eigendecompositions of the local covariances, in
# units of ``8 d**2`` (the covariance, its copy, eigenvectors, workspace).
EIGH_SQUARES = 6
# A call of degree 1 warns when some query's slope was shrunk below this
# fraction of itself by the safeguard of :mod:`._local_linear` (or when a
# query fell back to the local mean); milder shrinkage is only counted.
STRONG_SHRINKAGE = 0.5


def fit_counts(rank, shrinkage, n_features, rows):
    """The counts of a chunk's local-linear fits, for :func:`report_fits`.

    Parameters
    ----------
    rank : ndarray of shape (n_queries,) of int
        The ranks of the local covariances (:func:`._local_linear.solve`).
    shrinkage : ndarray of shape (n_queries,)
        The safeguard's factors ``s`` of the slopes.
    n_features : int
        The number of (continuous) features of the fit.
    rows : ndarray of bool of shape (n_queries,)
        The queries with a neighbourhood (the others fell back to
        ``on_empty`` and are not counted).

    Returns
    -------
    counts : tuple
        ``(n_singular, n_rank_deficient, n_shrunk, n_strongly_shrunk,
        total_shrinkage, n_fitted)``: the queries of rank 0, of a positive
        rank below ``n_features``, with ``s < 1``, with ``s <
        STRONG_SHRINKAGE``, the sum of ``1 - s`` and the number of ``rows``.
    """
    singular, deficient = _local_linear.rank_counts(rank, n_features, rows)
    s = shrinkage[rows]
    return (
        singular,
        deficient,
        int(np.count_nonzero(s < 1.0)),
        int(np.count_nonzero(s < STRONG_SHRINKAGE)),
        float(np.sum(1.0 - s)),
        int(len(s)),
    )


def report_fits(counts, n_queries, configuration):
    """Warn of the local-linear queries of a call that fell back to the
    local mean or whose slopes were strongly shrunk.

    ``counts`` holds the :func:`fit_counts` of the call's chunks;
    ``configuration`` names the kernel and bandwidth (:func:`describe`).
    Issues one :class:`LocalLinearFallbackWarning`, or none.
    """
    totals = np.sum(np.reshape(counts, (-1, 6)), axis=0)
    n_singular, n_deficient, n_shrunk, n_strong, shrinkage, n_fitted = totals
    if not (n_singular or n_strong):
        return
    what = []
    if n_singular:
        what.append(
            "queries whose local design determines no slope (their attention "
            "weight is carried by a single key, or by keys at one point) get "
            "the local mean (degree 0) instead"
        )
    if n_strong:
        what.append(
            "queries of high leverage in their local fit (far from the keys "
            "that carry their attention weight, in units of their local "
            "spread, and supported by few of them) get a slope shrunk by more "
            "than half towards the local mean (the fit would extrapolate from "
            "few keys)"
        )
    text = "; ".join(what)
    warn(
        LocalLinearFallbackWarning(
            f"Under {configuration}, {text}. A larger bandwidth avoids this, "
            "and degree=0 fits the local mean everywhere. The warning's "
            "n_singular, n_rank_deficient, n_shrunk, mean_shrinkage and "
            "n_queries attributes count them in each call.",
            n_singular=int(n_singular),
            n_queries=n_queries,
            n_rank_deficient=int(n_deficient),
            n_shrunk=int(n_shrunk),
            mean_shrinkage=float(shrinkage / n_fitted) if n_fitted else 0.0,
        )
    )


class LocalMoments:
    """The moment matrices of a pool's keys and values, built on first use.

    In float64, with the values centred on their weighted mean so that
    variances are differences of moments of the order of the spread, not of
    the squared mean.

    Parameters
    ----------
    keys : ndarray of shape (n_keys, n_features)
        The pool's scaled and centred keys.
    values : ndarray of shape (n_keys, n_outputs)
        The pool's scaled values.
    weights : ndarray of shape (n_keys,)
        The pool's relative sample weights.
    mean_weights : ndarray of shape (n_keys,)
        The sample weights normalised to sum to one.
    weights_folded : bool
        Whether the scorer's scores carry the weights (then the matrices do
        not).
    """

    def __init__(self, keys, values, weights, mean_weights, weights_folded):
        self.keys = keys
        self.values = values
        self.mean_weights = mean_weights
        self.n_outputs = values.shape[1]
        # The weights for matrices, or None when the scores carry them.
        self.matrix_weights = None if weights_folded else weights.astype(np.float64)

    @functools.cached_property
    def value_center(self):
        """The weighted mean of the values, in float64."""
        return self.mean_weights.astype(np.float64) @ self.values.astype(np.float64)

    @functools.cached_property
    def centered_values(self):
        """The values minus their weighted mean, in float64."""
        return self.values.astype(np.float64) - self.value_center

    @functools.cached_property
    def spread_matrix(self):
        """``[y - mean, (y - mean)**2, 1]``, weighted like the pool's
        ``pool_matrix``."""
        c = self.centered_values
        matrix = np.hstack([c, c * c, np.ones((len(c), 1))])
        weights = self.matrix_weights
        return matrix if weights is None else matrix * weights[:, None]

    @functools.cached_property
    def layout(self):
        """The columns of :attr:`moment_matrix` (a
        :class:`._local_linear.MomentLayout`)."""
        n_keys, n_features = self.keys.shape
        return _local_linear.MomentLayout(n_features, self.n_outputs, n_keys)

    @functools.cached_property
    def moment_matrix(self):
        """The local-linear moments of keys and values, total last."""
        return _local_linear.moment_matrix(
            self.keys, self.centered_values, self.matrix_weights
        )

    @functools.cached_property
    def geometry_matrix(self):
        """``[k, upper(k k^T), 1]``, for weights that are already normalised."""
        return _local_linear.moment_matrix(self.keys)

    @functools.cached_property
    def quadratic_layout(self):
        """The layout of local quadratic fits (a
        :class:`._local_quadratic.QuadraticLayout`)."""
        n_keys, n_features = self.keys.shape
        return _local_quadratic.QuadraticLayout(n_features, self.n_outputs, n_keys)

    def row_bytes(self, degree=1):
        """Bytes of the two-pass fit of one query of ``degree`` 1 or 2."""
        n_keys, d = self.keys.shape
        if degree == 2:
            return _local_quadratic.fit_bytes(n_keys, d, self.n_outputs)
        return _centred_fit.fit_bytes(n_keys, d, self.n_outputs)

    @property
    def moment_columns(self):
        """The number of local-linear moments pooled per key."""
        return self.layout.values_sq.stop + 1

    def uses_moment_matrix(self):
        """Whether local-linear pooling pools the moment matrix (small
        ``n_keys x n_features**2``) or sums each query's equations alone."""
        size = 8 * self.keys.shape[0] * self.moment_columns
        budget = working_memory_bytes() / MOMENT_MATRIX_SHARE
        return size <= max(budget, MOMENT_MATRIX_FLOOR)

    def check_fit_memory(self, n_jobs, degree=1):
        """Refuse local-polynomial fits whose single query exceeds the
        memory; warn when one exceeds ``working_memory`` (queries one at a
        time)."""
        n_keys, d = self.keys.shape
        row = self.row_bytes(degree)
        limit = _weights.physical_memory()
        if limit is not None and row > limit:
            raise MemoryError(
                f"Local-polynomial pooling (degree={degree}) with {d} features "
                f"and {n_keys} keys needs about {row / 2**30:.1f} GiB for the "
                "local design of a single query, more than the "
                f"{limit / 2**30:.1f} GiB of "
                "physical memory. Reduce the number of features (for example "
                "with sklearn.decomposition.PCA or feature selection), or use "
                "a lower degree, whose memory grows more slowly with the features."
            )
        budget = working_memory_bytes() / engine_threads(n_jobs)
        if row > budget:
            warn(
                LocalLinearMemoryWarning(
                    f"The local design of one query of local-polynomial pooling "
                    f"(degree={degree}, {d} features, {n_keys} keys) takes about "
                    f"{row / 2**20:.3g} MiB, more than the working_memory of "
                    f"{budget / 2**20:.3g} MiB per thread: the queries are "
                    "solved one at a time, and the memory used exceeds "
                    "working_memory. Raise it with "
                    "sklearn.config_context(working_memory=...) or reduce the "
                    "number of features to stay within it.",
                    row_bytes=row,
                    working_memory_bytes=budget,
                )
            )

    def fit_step(self, degree=1):
        """Rows of a batch of two-pass local fits of ``degree`` 1 or 2."""
        n_keys = self.keys.shape[0]
        row = self.row_bytes(degree) + 8 * n_keys
        return int(max(1, min(working_memory_bytes(), _chunk_plan.CHUNK_BYTES) // row))


# -- the chunk works of a pool ----------------------------------------------
def spread_work(pool):
    """The chunk work of pooled values and their weighted spread (degree 0)
    of a :class:`._pooling.KernelPool`."""
    moments = pool.moments

    def work(X_chunk, workspace):
        queries = pool._queries(X_chunk)
        sums, spread = pool._weighted_sums(
            queries, workspace, (pool.pool_matrix, moments.spread_matrix)
        )
        mean, empty = normalise(sums)
        second, _ = normalise(spread)
        p = pool.n_outputs
        variance, std = moment_spread(second, p)
        # Rows whose local mean is far from the global one, in local
        # standard deviations, lose their variance to cancellation.
        ratio = _local_linear.MAX_MOMENT_RATIO
        redo = ~empty & np.any(second[:, p:] > ratio * variance, axis=1)
        refit_rows(pool, redo, queries, workspace, None, std)
        pool.empty_queries.fill(mean, empty, queries, workspace, pooled=True, std=std)
        return np.hstack([mean * pool.value_scale, std * pool.value_scale]), empty

    return work


def local_linear_work(pool, return_std, counts, moments=True):
    """The chunk work of local-linear pooling of a :class:`._pooling.KernelPool`.

    ``moments``: from the pooled moment matrix, with the rows whose
    moments cancel fitted again in two passes; otherwise every row in two
    passes, from its weighted keys (:func:`._centred_fit.centred_fit`).
    Appends each chunk's :func:`fit_counts` to ``counts``.
    """
    local = pool.moments

    def work(X_chunk, workspace):
        queries = pool._queries(X_chunk)
        if moments:
            matrices = (local.moment_matrix,)
            sums, squares = pool._weighted_sums(
                queries, workspace, matrices, squares=True
            )
            kish = kish_ratio(squares, sums[:, -1], pool.kernel)
            mean, std, rank, s = _local_linear.solve(
                sums,
                queries[1],
                local.layout,
                return_std,
                return_shrinkage=True,
                kish=kish,
            )
            empty = ~(sums[:, -1] > 0)
            redo = ~empty & _local_linear.cancelled(sums, local.layout)
        else:
            (sums,) = pool._weighted_sums(queries, workspace, (pool.pool_matrix,))
            empty = ~(sums[:, -1] > 0)
            n, p = len(X_chunk), pool.n_outputs
            mean = np.full((n, p), np.nan)
            std = np.full((n, p), np.nan) if return_std else None
            rank = np.full(n, pool.keys.shape[1])
            s = np.ones(n)
            redo = ~empty
        refit_rows(pool, redo, queries, workspace, mean, std, (rank, s))
        mean += local.value_center
        pool.empty_queries.fill(mean, empty, queries, workspace, pooled=True, std=std)
        counts.append(fit_counts(rank, s, pool.keys.shape[1], ~empty))
        mean *= pool.value_scale
        if std is None:
            return mean, empty
        std *= pool.value_scale
        return np.hstack([mean, std]), empty

    return work


def refit_rows(pool, redo, queries, workspace, mean, std, fits=None):
    """Recompute the ``redo`` rows of a chunk of a pool in two passes.

    Their keys and values are centred on the row's own weighted means
    before any product: the fit (``mean``, degree 1) and the spread
    (``std``, if not None) then lose nothing to cancellation. The arrays
    are updated in place, with (degree 1) those of ``fits``, the pair
    ``(rank, shrinkage)``; ``mean`` and ``std`` are in the frame of the
    centred values.
    """
    redo = np.flatnonzero(redo)
    if not len(redo):
        return
    local = pool.moments
    n_keys = pool.keys.shape[0]
    if pool.degree == 0:
        width = 3 * pool.n_outputs + 2
        step = max(1, _chunk_plan.CHUNK_BYTES // (8 * n_keys * width))
        fit_rows, layout = _centred_fit.centred_fit, None
    elif pool.degree == 1:
        step = local.fit_step()
        fit_rows, layout = _centred_fit.centred_fit, local.layout
    else:
        step = local.fit_step(2)
        fit_rows, layout = _local_quadratic.quadratic_fit, local.quadratic_layout
    batches = pool.scorer.refit_scores(queries, workspace, redo, step, pool.weights)
    for rows, scores in batches:
        p = scores / scores.sum(axis=1, keepdims=True)
        fit = fit_rows(
            p,
            pool.keys,
            local.centered_values,
            queries[1][rows],
            layout,
            std is not None,
            return_shrinkage=True,
            kernel=pool.kernel,
        )  # the keys are centred on their mean: centers is the origin
        if pool.degree >= 1:
            mean[rows], fits[0][rows], fits[1][rows] = fit[0], fit[2], fit[3]
        if std is not None:
            std[rows] = fit[1]


def _quadratic_kernel(moments, weights, queries, empty, kernel):
    """The equivalent kernel of the local quadratic fit of a chunk's
    normalised weights (:func:`._local_quadratic.quadratic_kernel`), dense
    or on the stored entries of sparse ones; the rows of ``empty`` queries
    keep their weights."""
    keys, layout = moments.keys, moments.quadratic_layout
    n, d = len(queries), keys.shape[1]
    rank, s = np.full(n, d), np.ones(n)
    sparse = not isinstance(weights, np.ndarray)
    out = weights.tocsr(copy=True) if sparse else weights.astype(np.float64)
    redo = np.flatnonzero(~empty)
    step = moments.fit_step(2)
    for start in range(0, len(redo), step):
        rows = redo[start : start + step]
        p = weights[rows]
        p = np.asarray(p.toarray() if sparse else p, np.float64)
        kernel_rows, rank[rows], s[rows] = _local_quadratic.quadratic_kernel(
            p, keys, queries[rows], layout, kernel=kernel
        )
        if sparse:
            for r, row in zip(rows, kernel_rows, strict=True):
                span = slice(out.indptr[r], out.indptr[r + 1])
                out.data[span] = row[out.indices[span]]
        else:
            out[rows] = kernel_rows
    if sparse:
        out.data = out.data.astype(keys.dtype, copy=False)
        out.eliminate_zeros()
        return out, rank, s
    return out.astype(keys.dtype, copy=False), rank, s


def equivalent_kernel(
    moments, weights, queries, empty, kernel, use_matrix=True, degree=1
):
    """Local-linear equivalent-kernel weights from local-constant ones.

    ``moments`` is the pool's :class:`LocalMoments`, ``queries`` the
    chunk's centred scaled queries, ``kernel`` that of the weights. The
    fallback rows of empty queries keep their weights. ``use_matrix``: as
    ``moments`` in
    :func:`local_linear_work`. Returns the weights, the ranks and the
    safeguard's factors ``s`` of the rows.
    """
    keys, layout = moments.keys, moments.layout
    n_keys, d = keys.shape
    if degree == 2:
        return _quadratic_kernel(moments, weights, queries, empty, kernel)
    if use_matrix:
        means = weights @ moments.geometry_matrix
        kish = kish_ratio(square_sums(weights, len(queries)), means[:, -1], kernel)
        offset, g, rank, s = _local_linear.equivalent_kernel(
            means[:, :-1], queries, layout, return_shrinkage=True, kish=kish
        )
        # Rows whose key moments about the centre cancel: about their own
        # local means, as in refit_rows.
        redo = ~empty & _local_linear.keys_cancelled(means, layout)
    else:
        n = len(queries)
        offset, g, rank = np.ones(n), np.zeros((n, d)), np.full(n, d)
        s = np.ones(n)
        redo = ~empty
    redo = np.flatnonzero(redo)
    step = moments.fit_step()
    for start in range(0, len(redo), step):
        rows = redo[start : start + step]
        p = weights[rows]
        p = np.asarray(p.toarray() if hasattr(p, "toarray") else p, np.float64)
        offset[rows], g[rows], rank[rows], s[rows] = _centred_fit.centred_kernel(
            p, keys, queries[rows], layout, return_shrinkage=True, kernel=kernel
        )
    offset[empty] = 1.0
    g[empty] = 0.0
    s[empty] = 1.0
    # The keys are in the dtype of the pool's work.
    weights = _weights.scale_rows(weights, offset, g, keys, keys.dtype)
    return weights, rank, s
