"""The pooling engine: distances -> attention weights -> pooled values.

Every estimator of the package fits a :class:`KernelPool` and asks it for
pooled values or for attention weights. The work runs in chunks of queries,
each bounded by scikit-learn's ``working_memory``, on one of two paths:

- brute (:mod:`._brute`): one GEMM of the chunk against all keys into a
  reused buffer, the kernel applied in place, then a second GEMM against
  ``[values, 1]`` that gives every output and the denominator at once. The
  GEMMs run on row blocks of one fixed shape, and chunks are whole blocks, so
  predictions do not depend on the chunk size or ``n_jobs`` to the last bit;
- kd_tree / ball_tree (:mod:`._tree`): a radius query per chunk in a tree
  built in ``fit``, and a sparse product.

Both reduce a chunk's scores to the kernel sums of :mod:`._protocol`, which
also holds the normalisation and the fallbacks written once for every
engine. What differs between the paths is behind the scorer protocol of
:mod:`._protocol`, met by :class:`._brute_chunks.BruteChunks` and
:class:`._tree.TreeScorer`: nothing here branches on the path.
:class:`KernelPool` holds the fitted state, the scores and the
pooled values. It is composed of its scorer, its
:class:`._moments.LocalMoments` (the moment matrices of ``return_std`` and
``degree=1``) and its :class:`._fallbacks.EmptyQueries` (the ``on_empty``
policy); its operations run over the chunks of
:func:`._query_chunks.run_chunks`, with the chunk works of
:mod:`._moments` and :mod:`._attention`.
"""

import functools

import numpy as np
from scipy.sparse import csr_array

from .._utils._validation import relative_weights, scale_coordinates, scale_values
from .._utils._warn import describe
from ..kernels import KERNELS, Kernel
from . import _adaptive, _attention, _categorical
from ._algorithm import choose_algorithm
from ._brute_chunks import BruteChunks
from ._exact import ExactKeys
from ._fallbacks import EmptyQueries, report_empty  # noqa: F401 (imported from here)
from ._moments import (
    EIGH_SQUARES,
    LocalMoments,
    local_linear_work,
    report_fits,
    spread_work,
)
from ._protocol import normalise, normalise_rows, square_sums
from ._query_chunks import run_chunks
from ._saved_state import check_pool_arguments
from ._tree import TreeScorer

ON_EMPTY = ("nearest", "mean", "nan", "raise")
# The scorer of each path (the protocol of :mod:`._protocol`).
SCORERS = {"brute": BruteChunks, "kd_tree": TreeScorer, "ball_tree": TreeScorer}


def resolve_kernel(kernel):
    """Return the registered :class:`Kernel` of a name, or wrap a callable."""
    if callable(kernel) and not isinstance(kernel, str):
        name = getattr(kernel, "__name__", repr(kernel))
        return Kernel(name, kernel, np.inf)
    return KERNELS[kernel]


# The arguments of every engine, saved in its pickles (each adds its options).
SAVED_ARGUMENTS = (
    "keys",
    "values",
    "sample_weight",
    "kernel",
    "bandwidth",
    "on_empty",
    "user_kernel",
)


def saved_arguments(*arguments, **named):
    """The :data:`SAVED_ARGUMENTS` of an engine, given in order or by name,
    as a dict: a loaded engine is rebuilt from them, checked by
    :func:`._saved_state.check_pool_arguments`."""
    saved = dict(zip(SAVED_ARGUMENTS, arguments, strict=False)) | named
    if sorted(saved) != sorted(SAVED_ARGUMENTS):
        raise TypeError(f"An engine takes the arguments {SAVED_ARGUMENTS}.")
    saved["bandwidth"] = np.asarray(saved["bandwidth"], dtype=np.float64)
    return saved


def pooling_weights(sample_weight, robustness_weight):
    """The weights of the pooling: the sample weights times the robustness
    weights, if any."""
    if robustness_weight is None:
        return sample_weight
    return sample_weight * robustness_weight


class KernelPool:
    """Fitted state of attention pooling and the arithmetic on it.

    Parameters
    ----------
    keys : ndarray of shape (n_samples, n_features)
        Training keys, float32 or float64; the dtype of every computation.
    values : ndarray of shape (n_samples, n_outputs)
        Training values.
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights, at least one positive. Rows of weight zero are
        dropped here, so they cannot influence anything.
    kernel : Kernel
        The kernel, as returned by :func:`resolve_kernel`.
    bandwidth : float or ndarray of shape (n_features,)
        The bandwidth ``h``; the scaled distance is ``||(q - k) / h||``.
    on_empty : {"nearest", "mean", "nan", "raise"}
        What a query with no key of positive attention weight gets.
    user_kernel : bool
        Whether the kernel is a user callable, whose output is checked.
    algorithm : {"auto", "brute", "kd_tree", "ball_tree"}
        The path, or "auto" to let :func:`._algorithm.choose_algorithm`
        pick one; the choice is the attribute ``algorithm``.
    degree : {0, 1, 2}
        0 pools the values (local-constant); 1 fits a local-linear model
        around each query (:mod:`._local_linear`), 2 a local quadratic one
        (:mod:`._local_quadratic`).
    categorical_bandwidth : ndarray of shape (n_categorical,) or None
        With categorical features, the weight ``lambda_j`` in [0, 1] of a key
        of another category than the query's for each of them; the last
        ``n_categorical`` columns of ``keys`` (and of every query array) then
        hold the integer codes of the categories (:mod:`._categorical`), the
        others the continuous features, to which ``bandwidth`` applies.
    categorical_levels : ndarray of int of shape (n_categorical,) or None
        The number of levels of each ordered categorical feature, whose
        codes are positions in its order (the ordered kernel of
        :mod:`._categorical`), 0 for an unordered one; None: every
        categorical feature unordered.
    n_neighbors : int or None
        None for the fixed ``bandwidth``; an int ``k`` gives each query the
        width ``bandwidth`` times the distance to its ``k``-th nearest key
        of positive weight (:mod:`._adaptive`).
    robustness_weight : ndarray of shape (n_samples,) or None
        Weights in [0, 1] that multiply ``sample_weight`` in the pooling
        (the robustness weights of a robust fit), None for none. A row they
        make zero is dropped from the pooling, but still counts as a
        neighbour under ``n_neighbors``: the neighbourhoods are those of
        ``sample_weight``, as in Cleveland's robust LOWESS.
    """

    def __init__(
        self,
        keys,
        values,
        sample_weight,
        kernel,
        bandwidth,
        on_empty,
        user_kernel,
        algorithm="auto",
        degree=0,
        categorical_bandwidth=None,
        n_neighbors=None,
        robustness_weight=None,
        categorical_levels=None,
    ):
        # All that pickles save: a loaded engine is rebuilt from them.
        self._arguments = saved_arguments(
            keys, values, sample_weight, kernel, bandwidth, on_empty, user_kernel
        )
        self._arguments.update(
            algorithm=algorithm,
            degree=degree,
            categorical_bandwidth=categorical_bandwidth,
            n_neighbors=n_neighbors,
        )
        if robustness_weight is not None:
            self._arguments["robustness_weight"] = robustness_weight
        if categorical_levels is not None:
            # Saved only where a feature is ordered: the state of other fits
            # is that of earlier releases.
            self._arguments["categorical_levels"] = categorical_levels
        keys, codes, degree, algorithm = self._continuous_keys(
            keys, categorical_bandwidth, degree, algorithm
        )
        self.dtype = keys.dtype
        self.degree = degree
        self.on_empty = on_empty
        weights = pooling_weights(sample_weight, robustness_weight)
        self.support = np.flatnonzero(weights > 0)
        self.n_samples_fit = keys.shape[0]
        scaled = self._set_keys(keys, weights, bandwidth, codes)
        self._set_radii(keys, sample_weight, scaled, n_neighbors)
        self.algorithm, neighbors = choose_algorithm(
            algorithm, kernel, self.keys, n_neighbors, self.bandwidth
        )
        # Whether predictions start threads (the tree paths).
        self.expected_neighbors = self.keys.shape[0] if neighbors is None else neighbors
        self._set_values(values)
        # The scores of the path: the scorer protocol of :mod:`._protocol`.
        self.scorer = SCORERS[self.algorithm].for_pool(
            self, scaled, kernel, user_kernel
        )
        # [values, 1], weighted unless the scores carry the weights.
        folded = self.scorer.weights_folded
        ones = np.ones((len(self.values), 1), dtype=self.dtype)
        self.pool_matrix = np.hstack([self.values, ones])
        if not folded:
            self.pool_matrix *= self.weights[:, None]
        self.moments = LocalMoments(
            self.keys, self.values, self.weights, self.mean_weights, folded
        )
        self.empty_queries = EmptyQueries(self)

    def _continuous_keys(self, keys, categorical_bandwidth, degree, algorithm):
        """The continuous columns of the keys and the category codes of the
        others (None without categorical features), with the degree and
        the algorithm they allow; sets ``n_categorical``."""
        self.n_categorical = 0
        if categorical_bandwidth is None:
            return keys, None, degree, algorithm
        self.n_categorical = len(categorical_bandwidth)
        keys, codes = _categorical.split_codes(keys, self.n_categorical)
        if keys.shape[1] == 0:
            # Categorical features only: one constant continuous feature,
            # whose kernel factor is the same for every key; no slope.
            keys = np.zeros((keys.shape[0], 1), dtype=keys.dtype)
            degree = 0
            algorithm = "brute" if algorithm == "auto" else algorithm
        return keys, codes, degree, algorithm

    def _set_keys(self, keys, sample_weight, bandwidth, codes):
        """Set the keys of positive weight, scaled and centred, their exact
        coordinates, categorical factor and weights; returns the scaled
        keys before centring."""
        self.categorical = None
        if codes is not None:
            self.categorical = _categorical.CategoricalFactor(
                codes[self.support],
                self._arguments["categorical_bandwidth"],
                self._arguments.get("categorical_levels"),
            )
        # Coordinates are scaled and centred in float64, whatever the dtype of
        # the work. Brute-force distances are computed on data centred on the
        # keys, which keeps the BLAS expansion ||q||^2 + ||k||^2 - 2 q.k free
        # of the cancellation a large common offset would cause.
        self.bandwidth = np.asarray(bandwidth, dtype=np.float64)
        scaled = scale_coordinates(keys[self.support], self.bandwidth, self.dtype, "X")
        self.center = scaled.mean(axis=0)
        self.keys = scaled - self.center
        # The support edge and the nearest keys are decided on the unscaled
        # coordinates, identically on every path (:mod:`._exact`).
        self.exact = ExactKeys(
            keys[self.support].astype(np.float64), self.bandwidth, scaled
        )
        # Weights and values are divided by powers of two, which is exact and
        # keeps every sum finite; pooled values are multiplied back.
        self.weights = relative_weights(sample_weight[self.support], self.dtype)
        return scaled

    def _set_radii(self, keys, sample_weight, scaled, n_neighbors):
        """Set ``radii``, the squared scale of each query's distances under
        ``n_neighbors`` (None for the fixed bandwidth), over the neighbours:
        the rows of positive sample weight, whatever their robustness
        weights."""
        self.n_neighbors = n_neighbors
        self.radii = None
        if n_neighbors is None:
            return
        exact = self.exact.keys
        neighbors = np.flatnonzero(sample_weight > 0)
        if len(neighbors) != len(self.support):
            scaled = scale_coordinates(keys[neighbors], self.bandwidth, self.dtype, "X")
            exact = keys[neighbors].astype(np.float64)
        self.radii = _adaptive.NeighborRadii(scaled, exact, self.bandwidth, n_neighbors)

    def _set_values(self, values):
        """Set the values of the keys, scaled, and their weighted mean."""
        values, self.value_scale = scale_values(values[self.support], self.dtype)
        self.values = values
        self.mean_weights = self.weights / self.weights.sum()
        self.weighted_mean = self.mean_weights @ values
        self.n_outputs = values.shape[1]

    def __getstate__(self):
        # Only the arguments of the constructor are saved: a loaded engine is
        # rebuilt from them, after checking them, so no array derived from
        # them (a tree's indices, above all) is ever read from a file, and
        # the rebuilt engine predicts the same to the last bit. Nothing built
        # on first use is saved either, so a fitted estimator pickles (and
        # hashes) the same before and after its predictions.
        return {"arguments": self._arguments}

    def __setstate__(self, state):
        arguments = state.get("arguments") if isinstance(state, dict) else None
        self.__init__(**check_pool_arguments(arguments, ON_EMPTY))

    @functools.cached_property
    def value_order(self):
        """The keys of positive weight in increasing order of their values,
        one row per output (a stable sort, shape (n_outputs, n_keys)): the
        order of the cumulative weights of the conditional quantiles
        (:mod:`.._inference._quantiles`). Built on first use and never saved."""
        return np.ascontiguousarray(np.argsort(self.values, axis=0, kind="stable").T)

    @property
    def kernel(self):
        """The :class:`Kernel`, held by the scorer."""
        return self.scorer.kernel

    def _continuous(self, X):
        """The continuous columns of queries (all, without categorical ones)."""
        if self.categorical is None:
            return X
        X, _ = _categorical.split_codes(X, self.n_categorical)
        if X.shape[1] == 0:
            return np.zeros((X.shape[0], 1), dtype=X.dtype)
        return X

    def _queries(self, X):
        """The queries scaled by the bandwidth, uncentred and centred, and
        unscaled (float64); with adaptive widths, each query's ``r^2`` too
        (:mod:`._adaptive`); with categorical features, a tuple whose
        ``categorical`` attribute is their factor (:mod:`._categorical`)."""
        codes = None
        if self.categorical is not None:
            codes = _categorical.split_codes(X, self.n_categorical)[1]
            X = self._continuous(X)
        scaled = scale_coordinates(X, self.bandwidth, self.dtype, "X")
        raw = X.astype(np.float64, copy=False)
        queries = scaled, scaled - self.center, raw
        if self.radii is not None:
            queries += (self.radii(scaled, raw),)
        if codes is None:
            return queries
        return _categorical.Queries(queries, self.categorical.for_queries(codes))

    # -- the operations ------------------------------------------------------
    def pool(self, X, n_jobs=None, return_std=False, counts=None):
        """Pooled values, shape (n_queries, n_outputs).

        With ``return_std``, a pair ``(mean, std)``: the weighted standard
        deviation of the values around the local mean (degree 0), or of the
        residuals of the local-linear fit (degree 1). For degree 1 the
        :func:`._moments.fit_counts` of the chunks are reported
        (:func:`._moments.report_fits`), or appended to ``counts``
        when it is a list, for the caller to report.
        """
        if self.degree >= 1 or return_std:
            report = counts is None
            counts = [] if report else counts
            work, extra = self._moment_work(return_std, counts, n_jobs)
            p = self.n_outputs
            width = 2 * p if return_std else p
            out = self._run_chunks(X, width, work, n_jobs, extra_row_bytes=extra)
            if report:
                self._report_fits(counts, X.shape[0])
            return (out[:, :p], out[:, p:]) if return_std else out

        def work(X_chunk, workspace):
            queries = self._queries(X_chunk)
            # One product gives every weighted sum and the denominator.
            (sums,) = self._weighted_sums(queries, workspace, (self.pool_matrix,))
            out, empty = normalise(sums)
            self.empty_queries.fill(out, empty, queries, workspace, pooled=True)
            out *= self.value_scale
            return out, empty

        return self._run_chunks(X, self.n_outputs, work, n_jobs)

    def _moment_work(self, return_std, counts, n_jobs):
        """The chunk work of the spread (degree 0) or of the local-linear fit
        (:mod:`._moments`), and the bytes it needs per query beside the
        scores."""
        if self.degree == 0:
            work = spread_work(self)
            return work, 8 * self.moments.spread_matrix.shape[1]
        moments = self.degree == 1 and self.moments.uses_moment_matrix()
        if not moments:
            self.moments.check_fit_memory(n_jobs, self.degree)
            # Fits one batch at a time; a batch of local quadratics takes up
            # to half of working_memory beside the chunk's scores.
            extra = 8 * (self.n_outputs + 1)
            if self.degree == 2:
                extra += 8 * self.keys.shape[0]
            return local_linear_work(self, return_std, counts, False), extra
        # The chunk's sums, and the eigendecompositions of its rows.
        d = self.keys.shape[1]
        extra = 8 * (self.moments.moment_columns + EIGH_SQUARES * d * d)
        return local_linear_work(self, return_std, counts, True), extra

    def attention_weights(self, X, n_jobs=None, sparse=False, counts=None):
        """Normalised weights over all training rows, shape (n_queries, n_fit)
        (:func:`._attention.attention_weights`)."""
        return _attention.attention_weights(self, X, n_jobs, sparse, counts)

    # -- the chunks and the scores of a chunk ---------------------------------
    def _batches(self, X, extra_row_bytes=0, n_threads=1, empty_row_pairs=0):
        """The chunks of queries, as slices, and the number of pairs they
        hold, planned by the scorer (``plan_batches`` of :mod:`._protocol`)."""
        return self.scorer.plan_batches(
            self, X, extra_row_bytes, n_threads, empty_row_pairs
        )

    def _run_chunks(self, X, width, work, n_jobs, extra_row_bytes=0, empty_row_pairs=0):
        """Apply ``work(chunk, workspace) -> (rows, empty)`` over the chunks
        of ``X`` (:func:`._query_chunks.run_chunks`)."""
        return run_chunks(
            self, X, width, work, n_jobs, extra_row_bytes, empty_row_pairs
        )

    def _report_fits(self, counts, n_queries):
        """Warn of the queries whose local design determines no slope, or
        whose slope was strongly shrunk (:func:`._moments.report_fits`)."""
        configuration = describe(self.kernel, self.bandwidth, self.n_neighbors)
        report_fits(counts, n_queries, configuration)

    def _weighted_sums(self, queries, workspace, matrices, squares=False):
        """``scores @ matrix`` of a chunk for each matrix, underflows redone.

        The last column of the first matrix is the denominator, whose
        underflowed rows are recomputed with stable scores. Float64 matrices
        get a float64 product whatever the dtype of the scores. With
        ``squares``, the sums of the squared weighted scores follow, last
        (:func:`._protocol.square_sums`).
        """

        product = self.scorer.product
        n = len(queries[0])
        scores = self.scorer.chunk_scores(queries, workspace)
        sums = [product(scores, matrix, workspace)[:n] for matrix in matrices]
        if squares:
            sums.append(square_sums(scores, n, self._weights_sq))
        # Rows whose total, or (degree 1) sum of squares, underflowed.
        small = sums[0][:, -1]
        if squares:
            small = np.minimum(small, sums[-1])
        redo = self.scorer.underflowed(small)
        if redo is not None:
            blocks, rows, at = redo
            stable = self.scorer.chunk_scores(queries, workspace, rows=blocks)
            for out, matrix in zip(sums, matrices, strict=False):
                out[rows] = product(stable, matrix, workspace)[at]
            if squares:
                sums[-1][rows] = square_sums(stable, len(stable), self._weights_sq)[at]
        return sums

    @functools.cached_property
    def _weights_sq(self):
        """The squared sample weights of :func:`._protocol.square_sums`, or
        None where the scores carry the weights."""
        if self.scorer.weights_folded:
            return None
        return np.square(self.weights.astype(np.float64))

    def _normalized_scores(self, queries, workspace, sparse):
        """A chunk's local-constant weights over the support, and its empty rows."""
        scores, total = self._weighted_scores(queries, workspace, sparse)
        return self._normalise_scores(scores, total, queries, workspace, sparse)

    def _normalise_scores(self, scores, total, queries, workspace, sparse):
        """The weights of :meth:`_normalized_scores` from the weighted scores
        and their row sums (dense scores are divided in place)."""
        if isinstance(scores, np.ndarray):
            # Dense scores are divided in place.
            scores, empty = normalise_rows(scores, total)
            self.empty_queries.fill(scores, empty, queries, workspace, pooled=False)
            return (csr_array(scores) if sparse else scores), empty
        empty = ~(total > 0)
        rows = self.empty_queries.sparse_rows(scores, total, empty, queries, workspace)
        return rows, empty

    def _weighted_scores(self, queries, workspace, sparse):
        """A chunk's scores times the sample weights over the support, and
        their row sums; rows whose sums underflow are recomputed stably."""
        n = len(queries[0])
        scores = self.scorer.chunk_scores(queries, workspace)
        scores = self.scorer.weighted(scores, self.weights, n, sparse)
        total = np.asarray(scores.sum(axis=1)).ravel()
        redo = self.scorer.underflowed(total)
        if redo is not None:
            blocks, rows, at = redo
            scores[rows] = self.scorer.chunk_scores(queries, workspace, rows=blocks)[at]
            total = scores.sum(axis=1)
        return scores, total
