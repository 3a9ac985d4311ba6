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
"""

import functools

import numpy as np
from joblib import Parallel, delayed
from scipy.sparse import csr_array
from sklearn.utils import gen_batches

from . import _adaptive, _categorical, _local_linear, _weights
from ._algorithm import choose_algorithm
from ._brute import BruteScorer
from ._chunking import working_memory_bytes
from ._engine import fill_empty, normalise, normalise_rows
from ._exact import ExactKeys
from ._exceptions import (
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
    LocalLinearMemoryWarning,
    describe,
    warn,
)
from ._persistence import check_pool_arguments
from ._progress import new_bar
from ._sparse import dense_rows
from ._threads import engine_threads, single_threaded_blas
from ._tree import TreeScorer
from ._validation import relative_weights, scale_coordinates, scale_values
from .kernels import KERNELS, Kernel

ON_EMPTY = ("nearest", "mean", "nan", "raise")

# The brute buffer of a chunk is kept near this size, so that the passes over
# it run from cache; benchmarks/bench_predict.py --chunks measures the choice.
CHUNK_BYTES = 2**22
# Tree chunks hold at most this many queries, so that threads share the work;
# under the default working_memory, up to 8192 keys need no count of the
# neighbours (larger chunks cost less, above all in one dimension).
TREE_CHUNK_ROWS = 2048
# Bytes of a tree chunk's work per neighbour (indices, distances, scores and
# their copies) and per query; tests/test_working_memory.py measures the peak.
TREE_PAIR_BYTES = 64
# And per neighbour of the categorical factor of a tree chunk: the codes of
# both sides, the mask and the factor (:mod:`._categorical`).
CATEGORICAL_PAIR_BYTES = 32
TREE_ROW_BYTES = 64
# Below this many query-key pairs, starting threads costs more than it saves.
MIN_THREADED_PAIRS = 2**22
# Below this many query-key pairs the products are too small for BLAS to
# split (OpenBLAS splits none under 2**18 multiply-adds): the engine leaves
# the BLAS threads alone, which takes time.
BLAS_THREADED_PAIRS = 2**16
# Local-linear pooling pools a moment matrix of ``(d + 1)(d + 2) / 2 + (d + 2) p``
# columns per key when it takes at most a quarter of ``working_memory`` (or
# this many bytes, whatever the budget): one product then gives every
# query's local normal equations. Larger ones (many features) are not formed:
# each query's equations are summed from its weighted keys instead
# (:func:`._local_linear.centred_fit`), within ``working_memory``.
MOMENT_MATRIX_SHARE = 4
MOMENT_MATRIX_FLOOR = 2**22
# Bytes per query of the eigendecompositions of the local covariances, in
# units of ``8 d**2`` (the covariance, its copy, eigenvectors, workspace).
EIGH_SQUARES = 6


def resolve_kernel(kernel):
    """Return the registered :class:`Kernel` of a name, or wrap a callable."""
    if callable(kernel) and not isinstance(kernel, str):
        name = getattr(kernel, "__name__", repr(kernel))
        return Kernel(name, kernel, np.inf)
    return KERNELS[kernel]


def report_empty(on_empty, n_empty, n_queries, kernel, bandwidth, n_neighbors=None):
    """Warn of, or for ``on_empty="raise"`` refuse, ``n_empty`` empty queries.

    The warning's text names the configuration only; the counts are its
    attributes (see :mod:`._exceptions`).
    """
    if n_empty == 0:
        return
    if on_empty == "raise":
        raise ValueError(
            f"{n_empty} of {n_queries} queries have no training key with "
            "positive weight inside the kernel's support (on_empty='raise'). "
            "Use a larger bandwidth, a kernel with unbounded support, or "
            "another on_empty policy."
        )
    what = {
        "nearest": "the value of the nearest key",
        "mean": "the weighted mean of the training values",
        "nan": "NaN",
    }[on_empty]
    warn(
        EmptyNeighborhoodWarning(
            "Queries with no training key of positive weight inside the "
            f"support of {describe(kernel, bandwidth, n_neighbors)} get {what} "
            f"(on_empty={on_empty!r}); a larger bandwidth avoids this. The "
            "warning's n_empty and n_queries attributes count them in each call.",
            n_empty=n_empty,
            n_queries=n_queries,
        )
    )


class _Workspace:
    """The buffers of one thread, allocated once and reused for every chunk.

    ``wide`` is the float64 buffer of float32 work whose products widen. The
    buffers hold whole blocks of the scorer's products.
    """

    def __init__(self, n_rows, n_keys, n_features, scorer):
        self.padded = scorer.padded
        n_rows = scorer.padded(n_rows)
        self.scores = np.empty((n_rows, n_keys), dtype=scorer.dtype)
        self.augmented = np.empty((n_rows, n_features + 2), dtype=np.float64)
        self.wide = None
        if scorer.narrow:
            self.wide = np.empty((n_rows, n_keys), dtype=np.float64)

    def rows(self, n):
        """The augmented-query, score and wide buffers of an ``n``-row chunk,
        padded to whole blocks."""
        n = self.padded(n)
        wide = None if self.wide is None else self.wide[:n]
        return self.augmented[:n], self.scores[:n], wide


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
    degree : {0, 1}
        0 pools the values (local-constant); 1 fits a local-linear model
        around each query (:mod:`._local_linear`).
    categorical_bandwidth : ndarray of shape (n_categorical,) or None
        With categorical features, the weight ``lambda_j`` in [0, 1] of a key
        of another category than the query's for each of them; the last
        ``n_categorical`` columns of ``keys`` (and of every query array) then
        hold the integer codes of the categories (:mod:`._categorical`), the
        others the continuous features, to which ``bandwidth`` applies.
    n_neighbors : int or None
        None for the fixed ``bandwidth``; an int ``k`` gives each query the
        width ``bandwidth`` times the distance to its ``k``-th nearest key
        of positive weight (:mod:`._adaptive`).
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
    ):
        # All that pickles save: a loaded engine is rebuilt from them.
        self._arguments = {
            "keys": keys,
            "values": values,
            "sample_weight": sample_weight,
            "kernel": kernel,
            "bandwidth": np.asarray(bandwidth, dtype=np.float64),
            "on_empty": on_empty,
            "user_kernel": user_kernel,
            "algorithm": algorithm,
            "degree": degree,
            "categorical_bandwidth": categorical_bandwidth,
            "n_neighbors": n_neighbors,
        }
        codes = None
        self.n_categorical = 0
        if categorical_bandwidth is not None:
            self.n_categorical = len(categorical_bandwidth)
            keys, codes = _categorical.split_codes(keys, self.n_categorical)
            if keys.shape[1] == 0:
                # Categorical features only: one constant continuous feature,
                # whose kernel factor is the same for every key; no slope.
                keys = np.zeros((keys.shape[0], 1), dtype=keys.dtype)
                degree = 0
                algorithm = "brute" if algorithm == "auto" else algorithm
        self.dtype = keys.dtype
        self.degree = degree
        self.on_empty = on_empty
        self.support = np.flatnonzero(sample_weight > 0)
        self.n_samples_fit = keys.shape[0]
        self.categorical = None
        if codes is not None:
            self.categorical = _categorical.CategoricalFactor(
                codes[self.support], categorical_bandwidth
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
        # Per-query widths: the squared scale of each query's distances.
        self.radii = None
        self._n_neighbors = n_neighbors
        if n_neighbors is not None:
            self.radii = _adaptive.NeighborRadii(
                scaled, self.exact.keys, self.bandwidth, n_neighbors
            )
        self.algorithm, neighbors = choose_algorithm(
            algorithm, kernel, self.keys, n_neighbors, self.bandwidth
        )
        # Whether predictions start threads (the tree paths).
        self.expected_neighbors = self.keys.shape[0] if neighbors is None else neighbors
        values, self.value_scale = scale_values(values[self.support], self.dtype)
        self.values = values
        self.mean_weights = self.weights / self.weights.sum()
        self.weighted_mean = self.mean_weights @ values
        ones = np.ones((len(values), 1), dtype=self.dtype)
        unfolded = np.hstack([values, ones]) * self.weights[:, None]
        self.n_outputs = values.shape[1]
        if self.algorithm == "brute":
            self.scorer = BruteScorer(
                self.keys, self.weights, kernel, user_kernel, self.dtype, self.exact
            )
            folded = self.scorer.weights_folded
            # [values, 1], weighted unless the scores carry the weights.
            self.pool_matrix = np.hstack([values, ones]) if folded else unfolded
        else:
            # Trees subtract exactly: they work on the uncentred keys.
            self.scorer = TreeScorer(
                scaled, kernel, self.algorithm, self.dtype, self.exact
            )
            self.pool_matrix = unfolded
            if self.radii is not None:
                self.scorer.max_neighbors = None  # a bound for a fixed width

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

    @property
    def kernel(self):
        """The :class:`Kernel`, held by the scorer."""
        return self.scorer.kernel

    # -- the matrices of the spread and of the local-linear moments ----------
    # Built on first use, in float64, with the values centred on their
    # weighted mean so that variances are differences of moments of the
    # order of the spread, not of the squared mean.
    @property
    def _matrix_weights(self):
        """The weights for matrices, or None when the scores carry them."""
        if self.algorithm == "brute" and self.scorer.weights_folded:
            return None
        return self.weights.astype(np.float64)

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
        """``[y - mean, (y - mean)**2, 1]``, weighted like ``pool_matrix``."""
        c = self.centered_values
        matrix = np.hstack([c, c * c, np.ones((len(c), 1))])
        weights = self._matrix_weights
        return matrix if weights is None else matrix * weights[:, None]

    @functools.cached_property
    def layout(self):
        n_keys, n_features = self.keys.shape
        return _local_linear.MomentLayout(n_features, self.n_outputs, n_keys)

    @functools.cached_property
    def moment_matrix(self):
        """The local-linear moments of keys and values, total last."""
        return _local_linear.moment_matrix(
            self.keys, self.centered_values, self._matrix_weights
        )

    @property
    def moment_columns(self):
        """The number of local-linear moments pooled per key."""
        return self.layout.values_sq.stop + 1

    def _uses_moments(self):
        """Whether local-linear pooling pools the moment matrix (small
        ``n_keys x n_features**2``) or sums each query's equations alone."""
        size = 8 * self.keys.shape[0] * self.moment_columns
        budget = working_memory_bytes() / MOMENT_MATRIX_SHARE
        return size <= max(budget, MOMENT_MATRIX_FLOOR)

    def _check_fit_memory(self, n_jobs):
        """Refuse local-linear fits whose single query exceeds the memory;
        warn when one exceeds ``working_memory`` (queries one at a time)."""
        n_keys, d = self.keys.shape
        row = _local_linear.fit_bytes(n_keys, d, self.n_outputs)
        limit = _weights.physical_memory()
        if limit is not None and row > limit:
            raise MemoryError(
                f"Local-linear pooling (degree=1) with {d} features and {n_keys} "
                f"keys needs about {row / 2**30:.1f} GiB for the local design of "
                f"a single query, more than the {limit / 2**30:.1f} GiB of "
                "physical memory. Reduce the number of features (for example "
                "with sklearn.decomposition.PCA or feature selection), or use "
                "degree=0, whose memory does not grow with the features squared."
            )
        budget = working_memory_bytes() / engine_threads(n_jobs)
        if row > budget:
            warn(
                LocalLinearMemoryWarning(
                    f"The local design of one query of local-linear pooling "
                    f"(degree=1, {d} features, {n_keys} keys) takes about "
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

    def _fit_step(self):
        """Rows of a batch of two-pass local-linear fits."""
        n_keys, d = self.keys.shape
        row = _local_linear.fit_bytes(n_keys, d, self.n_outputs) + 8 * n_keys
        return int(max(1, min(working_memory_bytes(), CHUNK_BYTES) // row))

    @functools.cached_property
    def geometry_matrix(self):
        """``[k, upper(k k^T), 1]``, for weights that are already normalised."""
        return _local_linear.moment_matrix(self.keys)

    # -- chunks --------------------------------------------------------------
    def _chunk_rows(self, n_queries, extra_row_bytes=0, n_threads=1):
        """Queries per chunk of the brute path: whole blocks within the
        budget of each of ``n_threads`` threads."""
        n_keys = self.keys.shape[0]
        itemsize = np.dtype(self.dtype).itemsize
        row_bytes = itemsize * n_keys + 8 * (self.keys.shape[1] + 2)
        row_bytes += extra_row_bytes
        if self.categorical is not None:
            # The masks of the categorical factor (:mod:`._categorical`).
            row_bytes += 2 * n_keys
        # CHUNK_BYTES keeps the scores of a chunk in cache; the float64
        # buffer of float32 work, touched only by the rows whose products
        # widen, counts against working_memory alone.
        memory_row_bytes = row_bytes
        if self.dtype != np.float64:
            memory_row_bytes += 8 * n_keys
        budget = working_memory_bytes() / n_threads
        # Whole blocks, so that every chunk starts a block.
        block = self.scorer.block_rows
        rows = min(CHUNK_BYTES // row_bytes, budget // memory_row_bytes)
        rows = max(rows // block, 1) * block
        return int(min(rows, self.scorer.padded(max(n_queries, 1))))

    def _neighbor_counts(self, X):
        """An upper bound on the keys in each query's support (tree paths)."""
        counts = np.empty(X.shape[0], dtype=np.intp)
        X = self._continuous(X)
        for batch in gen_batches(X.shape[0], TREE_CHUNK_ROWS):
            chunk = dense_rows(X, batch)
            scaled = scale_coordinates(chunk, self.bandwidth, self.dtype, "X")
            if self.radii is None:
                counts[batch] = self.scorer.count(scaled)
            else:
                r2 = self.radii(scaled, chunk)
                counts[batch] = _adaptive.tree_count(self.scorer, scaled, r2)
        return counts

    def _batches(self, X, extra_row_bytes=0, n_threads=1, empty_row_pairs=0):
        """The chunks of queries, as slices, and the number of pairs they hold.

        Brute chunks have a fixed number of rows. Tree chunks are cut from
        the neighbours actually counted in each query's support, so that a
        chunk's pairs fit ``working_memory`` whatever the spread of the
        neighbourhood sizes; a query whose neighbours alone exceed it makes
        a chunk of its own, the least that can be computed. ``working_memory``
        is shared by the ``n_threads`` threads that hold a chunk each. A
        query with no neighbour counts as ``empty_row_pairs`` pairs (its
        fallback row of sparse weights).
        """
        n_queries = X.shape[0]
        if self.algorithm == "brute":
            n_rows = self._chunk_rows(n_queries, extra_row_bytes, n_threads)
            return list(gen_batches(n_queries, n_rows)), n_queries * self.keys.shape[0]
        budget = working_memory_bytes() / n_threads
        row_bytes = TREE_ROW_BYTES + extra_row_bytes
        most = self.scorer.max_neighbors
        most = self.keys.shape[0] if most is None else max(most, empty_row_pairs)
        pair_bytes = TREE_PAIR_BYTES
        if self.categorical is not None:
            pair_bytes += CATEGORICAL_PAIR_BYTES
        worst = most * pair_bytes + row_bytes
        if min(n_queries, TREE_CHUNK_ROWS) * worst <= budget:
            # Chunks fit even if every query had the most neighbours any
            # query can have (every key, where no bound is known).
            pairs = n_queries * self.expected_neighbors
            return list(gen_batches(n_queries, TREE_CHUNK_ROWS)), pairs
        counts = self._neighbor_counts(X)
        pairs = np.where(counts == 0, empty_row_pairs, counts)
        cost = np.cumsum(pairs * pair_bytes + row_bytes)
        batches, start = [], 0
        while start < n_queries:
            spent = cost[start - 1] if start else 0
            stop = int(np.searchsorted(cost, spent + budget, side="right"))
            stop = min(max(stop, start + 1), start + TREE_CHUNK_ROWS, n_queries)
            batches.append(slice(start, stop))
            start = stop
        return batches, int(counts.sum())

    def _run_chunks(self, X, width, work, n_jobs, extra_row_bytes=0, empty_row_pairs=0):
        """Apply ``work(chunk, workspace) -> (rows, empty)`` over the chunks.

        The rows fill an (n_queries, width) array of the work's dtype, or,
        for ``width=None``, a list of each chunk's rows in order.
        """
        n_queries = X.shape[0]
        # Each thread holds a chunk: the chunks share working_memory.
        max_threads = engine_threads(n_jobs)
        batches, pairs = self._batches(X, extra_row_bytes, max_threads, empty_row_pairs)
        n_rows = max((b.stop - b.start for b in batches), default=1)
        if width is None:
            out = [None] * len(batches)
        else:
            out = np.empty((n_queries, width), dtype=self.dtype)
        empty = np.zeros(n_queries, dtype=bool)
        bar = new_bar(n_queries)

        def run(group):
            workspace = None
            if self.algorithm == "brute":
                workspace = _Workspace(
                    min(n_rows, n_queries),
                    self.keys.shape[0],
                    self.keys.shape[1],
                    self.scorer,
                )
            for i in group:
                batch = batches[i]
                # Sparse queries are made dense a chunk at a time.
                rows, empty[batch] = work(dense_rows(X, batch), workspace)
                out[batch if width is not None else i] = rows
                bar.update(batch.stop - batch.start)

        def run_all():
            n_threads = 1
            if pairs >= MIN_THREADED_PAIRS:
                n_threads = min(max_threads, len(batches))
            if n_threads <= 1:
                run(range(len(batches)))
            else:
                Parallel(n_jobs=n_threads, require="sharedmem")(
                    delayed(run)(range(t, len(batches), n_threads))
                    for t in range(n_threads)
                )

        try:
            if pairs < BLAS_THREADED_PAIRS:
                run_all()
            else:
                # BLAS threads cost more than they save on the small products
                # of the engine: the engine's own threads share the cores.
                with single_threaded_blas():
                    run_all()
        finally:
            bar.close()
        self._report_empty(int(empty.sum()), n_queries)
        return out

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

    def _raw_scores(self, queries, workspace, rows=None):
        """Scores of a chunk, dense for brute and sparse for the trees.

        ``rows`` recomputes the brute scores of these rows, in a stable way.
        Brute scores have rows past the chunk's, up to a whole block.
        """
        scaled, Q, raw = queries[:3]
        r2 = queries[3] if len(queries) > 3 else None
        categorical = getattr(queries, "categorical", None)
        if self.algorithm != "brute":
            if r2 is not None:
                scores = _adaptive.tree_scores(self.scorer, scaled, raw, r2)
            else:
                scores = self.scorer.scores(scaled, raw)
            return scores if categorical is None else categorical.scale_sparse(scores)
        exact = (raw, scaled)
        if rows is not None:
            # Whole blocks: see _underflowed and _row_scores.
            Q, exact = Q[rows], (raw[rows], scaled[rows])
            categorical = None if categorical is None else categorical[rows]
            r2 = None if r2 is None else r2[rows]
        augmented, out, wide = workspace.rows(len(Q))
        augmented = self.scorer.augment(Q, augmented)
        if r2 is not None:
            return _adaptive.brute_scores(
                self.scorer, augmented, out, wide, *exact, r2, categorical
            )
        return self.scorer.scores(
            augmented,
            out,
            wide,
            stable=rows is not None,
            exact=exact,
            categorical=categorical,
        )

    def _underflowed(self, total):
        """Rows of brute scores to recompute with their maximum subtracted.

        Returns the whole blocks that hold them, and where they are in it:
        a row is recomputed at the place it has in the first pass.
        """
        if self.algorithm != "brute" or not self.scorer.may_underflow:
            return None
        rows = np.flatnonzero(total < self.scorer.tiny)
        if not len(rows):
            return None
        blocks = self.scorer.whole_blocks(rows, len(total))
        return blocks, rows, np.searchsorted(blocks, rows)

    # -- fallbacks -----------------------------------------------------------
    def _nearest_candidates(self, queries, workspace):
        """(rows, cols) pairs that hold each query's nearest keys."""
        scaled, Q = queries[:2]
        if self.algorithm != "brute":
            return self.scorer.candidates(scaled)
        augmented, out, wide = workspace.rows(len(Q))
        Q1 = self.scorer.augment(Q, augmented)
        return self.scorer.candidates(Q1, scaled, out, wide)

    def _nearest_weights(self, queries, workspace):
        """Sparse weights of the nearest keys, ties shared by sample weight."""
        rows, cols = self._nearest_candidates(queries, workspace)
        # The ties are settled on the unscaled coordinates, on every path.
        Q = queries[2]
        rows, cols = self.exact.ties(rows, cols, Q)
        data = self.weights[cols]
        totals = np.bincount(rows, weights=data, minlength=len(Q))
        data = (data / totals[rows]).astype(self.dtype)
        return csr_array((data, (rows, cols)), shape=(len(Q), self.keys.shape[0]))

    def fallback_weights(self, chosen):
        """Sparse weights of the nearest keys of the ``(queries, workspace)``
        pair ``chosen`` (for :func:`._engine.fill_empty`)."""
        return self._nearest_weights(*chosen)

    # What an empty query's attention weights are under on_empty="nan".
    nan_weights = np.nan

    def _fill_fallback(self, out, empty, queries, workspace, pooled, std=None):
        """Overwrite the empty rows of ``out`` (and ``std``) with the
        ``on_empty`` fallback (:func:`._engine.fill_empty`)."""
        if np.any(empty):
            chosen = tuple(q[empty] for q in queries[:3]), workspace
            fill_empty(self, out, empty, chosen, std, pooled)

    def _report_empty(self, n_empty, n_queries):
        report_empty(
            self.on_empty,
            n_empty,
            n_queries,
            self.kernel,
            self.bandwidth,
            self._n_neighbors,
        )

    # -- the operations ------------------------------------------------------
    def pool(self, X, n_jobs=None, return_std=False):
        """Pooled values, shape (n_queries, n_outputs).

        With ``return_std``, a pair ``(mean, std)``: the weighted standard
        deviation of the values around the local mean (degree 0), or of the
        residuals of the local-linear fit (degree 1).
        """
        if self.degree == 1 or return_std:
            counts = []
            if self.degree == 1:
                moments = self._uses_moments()
                if not moments:
                    self._check_fit_memory(n_jobs)
                work = self._local_linear_work(return_std, counts, moments)
                # The chunk's sums, and the eigendecompositions of its rows.
                d = self.keys.shape[1]
                extra = 8 * (self.moment_columns + EIGH_SQUARES * d * d)
                if not moments:
                    extra = 8 * (self.n_outputs + 1)  # fits one batch at a time
            else:
                work, extra = self._spread_work, 8 * self.spread_matrix.shape[1]
            p = self.n_outputs
            width = 2 * p if return_std else p
            out = self._run_chunks(X, width, work, n_jobs, extra_row_bytes=extra)
            self._report_singular(counts, X.shape[0])
            return (out[:, :p], out[:, p:]) if return_std else out

        def work(X_chunk, workspace):
            queries = self._queries(X_chunk)
            # One product gives every weighted sum and the denominator.
            (sums,) = self._weighted_sums(queries, workspace, (self.pool_matrix,))
            out, empty = normalise(sums)
            self._fill_fallback(out, empty, queries, workspace, pooled=True)
            out *= self.value_scale
            return out, empty

        return self._run_chunks(X, self.n_outputs, work, n_jobs)

    def _spread_work(self, X_chunk, workspace):
        """Pooled values and their weighted spread of a chunk (degree 0)."""
        queries = self._queries(X_chunk)
        sums, spread = self._weighted_sums(
            queries, workspace, (self.pool_matrix, self.spread_matrix)
        )
        mean, empty = normalise(sums)
        moments, _ = normalise(spread)
        p = self.n_outputs
        variance = moments[:, p:] - moments[:, :p] ** 2
        std = np.sqrt(np.maximum(variance, 0.0))
        # Rows whose local mean is far from the global one, in local
        # standard deviations, lose their variance to cancellation.
        ratio = _local_linear.MAX_MOMENT_RATIO
        redo = ~empty & np.any(moments[:, p:] > ratio * variance, axis=1)
        self._refit_rows(redo, queries, workspace, None, std)
        self._fill_fallback(mean, empty, queries, workspace, pooled=True, std=std)
        return np.hstack([mean * self.value_scale, std * self.value_scale]), empty

    def _local_linear_work(self, return_std, counts, moments=True):
        """The chunk work of local-linear pooling.

        ``moments``: from the pooled moment matrix, with the rows whose
        moments cancel fitted again in two passes; otherwise every row in two
        passes, from its weighted keys (:func:`._local_linear.centred_fit`).
        Appends each chunk's ``(n_singular, n_rank_deficient)`` to ``counts``.
        """

        def work(X_chunk, workspace):
            queries = self._queries(X_chunk)
            if moments:
                (sums,) = self._weighted_sums(queries, workspace, (self.moment_matrix,))
                mean, std, rank = _local_linear.solve(
                    sums, queries[1], self.layout, return_std
                )
                empty = ~(sums[:, -1] > 0)
                redo = ~empty & _local_linear.cancelled(sums, self.layout)
            else:
                (sums,) = self._weighted_sums(queries, workspace, (self.pool_matrix,))
                empty = ~(sums[:, -1] > 0)
                n, p = len(X_chunk), self.n_outputs
                mean = np.full((n, p), np.nan)
                std = np.full((n, p), np.nan) if return_std else None
                rank = np.full(n, self.keys.shape[1])
                redo = ~empty
            self._refit_rows(redo, queries, workspace, mean, std, rank)
            mean += self.value_center
            self._fill_fallback(mean, empty, queries, workspace, pooled=True, std=std)
            counts.append(_local_linear.rank_counts(rank, self.keys.shape[1], ~empty))
            mean *= self.value_scale
            if std is None:
                return mean, empty
            std *= self.value_scale
            return np.hstack([mean, std]), empty

        return work

    def _weighted_sums(self, queries, workspace, matrices):
        """``scores @ matrix`` of a chunk for each matrix, underflows redone.

        The last column of the first matrix is the denominator, whose
        underflowed rows are recomputed with stable scores. Float64 matrices
        get a float64 product whatever the dtype of the scores.
        """

        def product(scores, matrix):
            if not isinstance(scores, np.ndarray):
                return scores @ matrix  # the trees' sparse scores
            if matrix.dtype != scores.dtype:
                wide = workspace.wide[: len(scores)]
                np.copyto(wide, scores)
                scores = wide
            return self.scorer.pool(scores, matrix)

        n = len(queries[0])
        scores = self._raw_scores(queries, workspace)
        sums = [product(scores, matrix)[:n] for matrix in matrices]
        redo = self._underflowed(sums[0][:, -1])
        if redo is not None:
            blocks, rows, at = redo
            stable = self._raw_scores(queries, workspace, rows=blocks)
            for out, matrix in zip(sums, matrices, strict=True):
                out[rows] = product(stable, matrix)[at]
        return sums

    # -- rows fitted again about their own local means -----------------------
    def _row_scores(self, queries, workspace, rows):
        """Float64 scores of the ``rows`` of a chunk, sample weights included,
        dense, up to a factor per row."""
        if self.algorithm != "brute":
            categorical = getattr(queries, "categorical", None)
            if categorical is None:
                scores = self._raw_scores(tuple(q[rows] for q in queries), workspace)
            else:
                parts = tuple(q[rows] for q in queries)
                scores = self._raw_scores(
                    _categorical.Queries(parts, categorical[rows]), workspace
                )
            scores.data *= self.weights[scores.indices]
            return scores.toarray().astype(np.float64, copy=False)
        blocks = self.scorer.whole_blocks(rows, len(queries[0]))
        at = np.searchsorted(blocks, rows)
        scores = self._raw_scores(queries, workspace, rows=blocks)[at]
        scores = scores.astype(np.float64)
        if not self.scorer.weights_folded:
            scores *= self.weights
        return scores

    def _refit_rows(self, redo, queries, workspace, mean, std, rank=None):
        """Recompute the ``redo`` rows of a chunk in two passes.

        Their keys and values are centred on the row's own weighted means
        before any product: the fit (``mean``, degree 1) and the spread
        (``std``, if not None) then lose nothing to cancellation. The
        arrays are updated in place; ``mean`` and ``std`` are in the frame
        of the centred values.
        """
        redo = np.flatnonzero(redo)
        if not len(redo):
            return
        n_keys, d = self.keys.shape
        if self.degree == 1:
            step = self._fit_step()
        else:
            width = 3 * self.n_outputs + 2
            step = max(1, CHUNK_BYTES // (8 * n_keys * width))
        # Brute scores are recomputed by whole blocks, once for the chunk
        # (within its buffer); the trees' rows one batch at a time.
        brute = self.algorithm == "brute"
        every = self._row_scores(queries, workspace, redo) if brute else None
        for start in range(0, len(redo), step):
            rows = redo[start : start + step]
            if brute:
                scores = every[start : start + step]
            else:
                scores = self._row_scores(queries, workspace, rows)
            p = scores / scores.sum(axis=1, keepdims=True)
            fit = _local_linear.centred_fit(
                p,
                self.keys,
                self.centered_values,
                queries[1][rows],
                self.layout if self.degree == 1 else None,
                std is not None,
            )  # the keys are centred on their mean: centers is the origin
            if self.degree == 1:
                mean[rows], rank[rows] = fit[0], fit[2]
            if std is not None:
                std[rows] = fit[1]

    def _report_singular(self, counts, n_queries):
        """Warn of the queries whose local design determines no slope.

        ``counts`` holds ``(n_singular, n_rank_deficient)`` pairs.
        """
        n_singular = sum(c[0] for c in counts)
        n_deficient = sum(c[1] for c in counts)
        if n_singular:
            warn(
                LocalLinearFallbackWarning(
                    "Queries whose local design determines no slope under "
                    f"{describe(self.kernel, self.bandwidth, self._n_neighbors)} "
                    "(their attention weight is carried by a single key, or by "
                    "keys at one point) get the local mean (degree 0) instead; "
                    "a larger bandwidth avoids this. The warning's n_singular, "
                    "n_rank_deficient and n_queries attributes count them in "
                    "each call.",
                    n_singular=n_singular,
                    n_queries=n_queries,
                    n_rank_deficient=n_deficient,
                )
            )

    def attention_weights(self, X, n_jobs=None, sparse=False):
        """Normalised weights over all training rows, shape (n_queries, n_fit).

        Dense, or a :class:`scipy.sparse.csr_array` of the non-zero weights
        for ``sparse=True``. For degree 1 the rows are the equivalent-kernel
        weights of the local-linear fit.
        """
        n_queries = X.shape[0]
        if sparse:
            self._check_sparse_size(X, n_jobs)
        else:
            _weights.check_dense_size(
                n_queries, self.n_samples_fit, self.dtype, self.kernel, self.on_empty
            )
        counts = []
        moments = self.degree == 1 and self._uses_moments()
        if self.degree == 1 and not moments:
            self._check_fit_memory(n_jobs)

        def work(X_chunk, workspace):
            queries = self._queries(X_chunk)
            weights, empty = self._normalized_scores(queries, workspace, sparse)
            if self.degree == 1:
                weights, rank = self._equivalent_kernel(
                    weights, queries[1], empty, moments
                )
                d = self.keys.shape[1]
                counts.append(_local_linear.rank_counts(rank, d, ~empty))
            if sparse:
                weights = _weights.compact_indices(weights)
            return weights, empty

        shape = (n_queries, self.n_samples_fit)
        if sparse:
            try:
                # Under "mean" and "nan" an empty query weighs every key.
                fill = self.keys.shape[0] if self.on_empty in ("mean", "nan") else 1
                chunks = self._run_chunks(X, None, work, n_jobs, empty_row_pairs=fill)
                out = _weights.assemble_sparse(chunks, self.support, shape, self.dtype)
            except MemoryError as exc:
                raise MemoryError(
                    _weights.sparse_failure(*shape, self.kernel, self.on_empty)
                ) from exc
            self._report_singular(counts, n_queries)
            return out
        # A chunk's dense rows: the weights (the trees' scores made dense, or
        # brute scores weighted), and for degree 1 the factors that turn
        # them into the equivalent kernel.
        dense_row = (3 if self.degree == 1 else 1) * 8 * self.keys.shape[0]
        try:
            out = self._run_chunks(
                X, self.keys.shape[0], work, n_jobs, extra_row_bytes=dense_row
            )
            if out.shape[1] != self.n_samples_fit:
                full = np.zeros(shape, dtype=self.dtype)
                full[:, self.support] = out
                out = full
        except MemoryError as exc:
            raise MemoryError(
                _weights.dense_refusal(*shape, self.dtype, self.kernel, self.on_empty)
            ) from exc
        self._report_singular(counts, n_queries)
        return out

    def _check_sparse_size(self, X, n_jobs):
        """Refuse sparse weights larger than the physical memory, before
        computing them.

        The size is bounded by that of every (query, key) pair first; only
        when that bound exceeds the memory are the non-zero weights counted:
        the keys in each query's support, and for a query with none, its
        ``on_empty`` row (every key for "mean" and "nan").
        """
        limit = _weights.physical_memory()
        n_queries, n_keys = X.shape[0], self.keys.shape[0]
        if (
            limit is None
            or _weights.sparse_size(n_queries * n_keys, n_queries, self.dtype) <= limit
        ):
            return
        if self.algorithm == "brute":
            counts = np.concatenate(self._run_chunks(X, None, self._count_work, n_jobs))
        else:
            counts = self._neighbor_counts(X)
        n_empty = int(np.count_nonzero(counts == 0))
        fill = n_keys if self.on_empty in ("mean", "nan") else 1
        nnz = int(counts.sum()) + n_empty * fill
        size = _weights.sparse_size(nnz, n_queries, self.dtype)
        if size > limit:
            raise MemoryError(
                _weights.sparse_refusal(
                    (n_queries, self.n_samples_fit),
                    nnz,
                    size,
                    limit,
                    n_empty,
                    self.on_empty,
                )
            )

    def _count_work(self, X_chunk, workspace):
        """The number of keys of positive score of each query of a chunk."""
        queries = self._queries(X_chunk)
        scores = self._raw_scores(queries, workspace)
        counts = np.count_nonzero(scores[: len(X_chunk)], axis=1)
        return counts, np.zeros(len(X_chunk), dtype=bool)

    def _normalized_scores(self, queries, workspace, sparse):
        """A chunk's local-constant weights over the support, and its empty rows."""
        n = len(queries[0])
        scores = self._raw_scores(queries, workspace)
        if self.algorithm != "brute":
            # The scorer's sparse arrays are new for every chunk.
            scores.data *= self.weights[scores.indices]
            if not sparse:
                scores = scores.toarray()
        elif not self.scorer.weights_folded:
            scores = scores[:n] * self.weights
        else:
            scores = scores[:n].copy()  # the buffer is reused by the next chunk
        total = np.asarray(scores.sum(axis=1)).ravel()
        redo = self._underflowed(total)
        if redo is not None:
            blocks, rows, at = redo
            scores[rows] = self._raw_scores(queries, workspace, rows=blocks)[at]
            total = scores.sum(axis=1)
        if isinstance(scores, np.ndarray):
            scores, empty = normalise_rows(scores, total)
            self._fill_fallback(scores, empty, queries, workspace, pooled=False)
            return (csr_array(scores) if sparse else scores), empty
        empty = ~(total > 0)
        return self._sparse_fallback(scores, total, empty, queries, workspace), empty

    def _sparse_fallback(self, scores, total, empty, queries, workspace):
        """Normalise sparse scores and put the fallback rows in the empty ones."""
        scores = _weights.normalize_sparse_rows(scores, total, empty)
        if not np.any(empty):
            return scores
        if self.on_empty == "nearest":
            chosen = tuple(q[empty] for q in queries[:3])
            fallback = self._nearest_weights(chosen, workspace)
        else:
            fill = self.mean_weights if self.on_empty == "mean" else np.nan
            fallback = _weights.repeated_rows(fill, int(empty.sum()), scores.shape[1])
        return _weights.place_rows(scores, fallback, empty)

    def _equivalent_kernel(self, weights, queries, empty, moments=True):
        """Local-linear equivalent-kernel weights from local-constant ones.

        The fallback rows of empty queries keep their weights. ``moments``:
        as in :meth:`_local_linear_work`.
        """
        n_keys, d = self.keys.shape
        if moments:
            means = weights @ self.geometry_matrix
            offset, g, rank = _local_linear.equivalent_kernel(
                means[:, :-1], queries, self.layout
            )
            # Rows whose key moments about the centre cancel: about their own
            # local means, as in _refit_rows.
            redo = ~empty & _local_linear.keys_cancelled(means, self.layout)
        else:
            n = len(queries)
            offset, g, rank = np.ones(n), np.zeros((n, d)), np.full(n, d)
            redo = ~empty
        redo = np.flatnonzero(redo)
        step = self._fit_step()
        for start in range(0, len(redo), step):
            rows = redo[start : start + step]
            p = weights[rows]
            p = np.asarray(p.toarray() if hasattr(p, "toarray") else p, np.float64)
            offset[rows], g[rows], rank[rows] = _local_linear.centred_kernel(
                p, self.keys, queries[rows], self.layout
            )
        offset[empty] = 1.0
        g[empty] = 0.0
        return _weights.scale_rows(weights, offset, g, self.keys, self.dtype), rank
