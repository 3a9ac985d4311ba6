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
import warnings

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy.sparse import csr_array
from sklearn import get_config
from sklearn.utils import gen_batches
from threadpoolctl import ThreadpoolController

from ._algorithm import choose_algorithm
from ._brute import BruteScorer
from ._exceptions import EmptyNeighborhoodWarning
from ._tree import TreeScorer
from ._validation import relative_weights, scale_coordinates, scale_values
from .kernels import KERNELS, Kernel

ON_EMPTY = ("nearest", "mean", "nan", "raise")

# The brute buffer of a chunk is kept near this size, so that the passes over
# it run from cache; benchmarks/bench_predict.py --chunks measures the choice.
CHUNK_BYTES = 2**22
# Tree chunks hold at most this many queries, so that threads share the work.
TREE_CHUNK_ROWS = 2048
# Below this many query-key pairs, starting threads costs more than it saves.
MIN_THREADED_PAIRS = 2**22


@functools.cache
def _threadpool_controller():
    """One controller for the process: finding the BLAS libraries is slow."""
    return ThreadpoolController()


def resolve_kernel(kernel):
    """Return the registered :class:`Kernel` of a name, or wrap a callable."""
    if callable(kernel) and not isinstance(kernel, str):
        name = getattr(kernel, "__name__", repr(kernel))
        return Kernel(name, kernel, np.inf)
    return KERNELS[kernel]


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
    ):
        self.dtype = keys.dtype
        self.on_empty = on_empty
        self.support = np.flatnonzero(sample_weight > 0)
        self.n_samples_fit = keys.shape[0]
        # Coordinates are scaled and centred in float64, whatever the dtype of
        # the work. Brute-force distances are computed on data centred on the
        # keys, which keeps the BLAS expansion ||q||^2 + ||k||^2 - 2 q.k free
        # of the cancellation a large common offset would cause.
        self.bandwidth = np.asarray(bandwidth, dtype=np.float64)
        scaled = scale_coordinates(keys[self.support], self.bandwidth, self.dtype, "X")
        self.center = scaled.mean(axis=0)
        self.keys = scaled - self.center
        # Weights and values are divided by powers of two, which is exact and
        # keeps every sum finite; pooled values are multiplied back.
        self.weights = relative_weights(sample_weight[self.support], self.dtype)
        self.algorithm, neighbors = choose_algorithm(algorithm, kernel, self.keys)
        # Sizes the chunks of the tree paths.
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
                self.keys, self.weights, kernel, user_kernel, self.dtype
            )
            folded = self.scorer.weights_folded
            # [values, 1], weighted unless the scores carry the weights.
            self.pool_matrix = np.hstack([values, ones]) if folded else unfolded
        else:
            # Trees subtract exactly: they work on the uncentred keys.
            self.scorer = TreeScorer(scaled, kernel, self.algorithm, self.dtype)
            self.pool_matrix = unfolded

    # -- chunks --------------------------------------------------------------
    def _chunk_rows(self, n_queries):
        budget = get_config()["working_memory"] * 2**20
        itemsize = np.dtype(self.dtype).itemsize
        n_keys = self.keys.shape[0]
        max_rows = max(n_queries, 1)
        if self.algorithm == "brute":
            if self.dtype != np.float64:
                itemsize += 8  # the float64 buffer of widened products
            row_bytes = itemsize * n_keys + 8 * (self.keys.shape[1] + 2)
            budget = min(budget, CHUNK_BYTES)
            # Whole blocks, so that every chunk starts a block.
            block = self.scorer.block_rows
            rows = max(budget // row_bytes // block, 1) * block
            return int(min(rows, self.scorer.padded(max_rows)))
        # Per neighbour: an index, a distance and a score, plus copies.
        row_bytes = 48 * max(self.expected_neighbors, 1.0) + 64
        max_rows = min(max_rows, TREE_CHUNK_ROWS)
        return int(min(max(budget // row_bytes, 1), max_rows))

    def _run_chunks(self, X, width, work, n_jobs):
        """Apply ``work(chunk, workspace) -> (rows, empty)`` over the chunks."""
        n_queries = X.shape[0]
        n_rows = self._chunk_rows(n_queries)
        batches = list(gen_batches(n_queries, n_rows))
        out = np.empty((n_queries, width), dtype=self.dtype)
        empty = np.zeros(n_queries, dtype=bool)
        n_threads = min(effective_n_jobs(n_jobs), len(batches))
        pairs = n_queries * (
            self.keys.shape[0] if self.algorithm == "brute" else self.expected_neighbors
        )
        if pairs < MIN_THREADED_PAIRS:
            n_threads = 1

        def run(group):
            workspace = None
            if self.algorithm == "brute":
                workspace = _Workspace(
                    min(n_rows, n_queries),
                    self.keys.shape[0],
                    self.keys.shape[1],
                    self.scorer,
                )
            for batch in group:
                out[batch], empty[batch] = work(X[batch], workspace)

        if n_threads <= 1:
            run(batches)
        else:
            # Threads share the cores: BLAS gets one thread each.
            with _threadpool_controller().limit(limits=1, user_api="blas"):
                Parallel(n_jobs=n_threads, prefer="threads")(
                    delayed(run)(batches[t::n_threads]) for t in range(n_threads)
                )
        self._report_empty(int(empty.sum()), n_queries)
        return out

    def _queries(self, X):
        """The queries scaled by the bandwidth, uncentred and centred (float64)."""
        scaled = scale_coordinates(X, self.bandwidth, self.dtype, "X")
        return scaled, scaled - self.center

    def _raw_scores(self, queries, workspace, rows=None):
        """Scores of a chunk, dense for brute and sparse for the trees.

        ``rows`` recomputes the brute scores of these rows, in a stable way.
        Brute scores have rows past the chunk's, up to a whole block.
        """
        scaled, Q = queries
        if self.algorithm != "brute":
            return self.scorer.scores(scaled)
        if rows is not None:
            Q = Q[rows]  # whole blocks: see _underflowed
        augmented, out, wide = workspace.rows(len(Q))
        augmented = self.scorer.augment(Q, augmented)
        return self.scorer.scores(augmented, out, wide, stable=rows is not None)

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
        scaled, Q = queries
        if self.algorithm != "brute":
            return self.scorer.candidates(scaled)
        augmented, out, wide = workspace.rows(len(Q))
        Q1 = self.scorer.augment(Q, augmented)
        return self.scorer.candidates(Q1, len(Q), out, wide)

    def _nearest_weights(self, queries, workspace):
        """Sparse weights of the nearest keys, ties shared by sample weight."""
        rows, cols = self._nearest_candidates(queries, workspace)
        # Exact differences, in the frame of the path, settle the ties.
        if self.algorithm == "brute":
            Q, keys = queries[1], self.keys
        else:
            Q, keys = queries[0], self.scorer.keys
        diff = Q[rows] - keys[cols]
        d2 = np.einsum("ij,ij->i", diff, diff)
        row_min = np.full(len(Q), np.inf, dtype=d2.dtype)
        np.minimum.at(row_min, rows, d2)
        tied = d2 == row_min[rows]
        rows, cols = rows[tied], cols[tied]
        data = self.weights[cols]
        totals = np.bincount(rows, weights=data, minlength=len(Q))
        data = (data / totals[rows]).astype(self.dtype)
        return csr_array((data, (rows, cols)), shape=(len(Q), self.keys.shape[0]))

    def _fill_fallback(self, out, empty, queries, workspace, pooled):
        """Overwrite the empty rows of ``out`` with the ``on_empty`` fallback."""
        if not np.any(empty):
            return
        if self.on_empty in ("nan", "raise"):
            out[empty] = np.nan
        elif self.on_empty == "mean":
            out[empty] = self.weighted_mean if pooled else self.mean_weights
        else:
            chosen = (queries[0][empty], queries[1][empty])
            weights = self._nearest_weights(chosen, workspace)
            out[empty] = weights @ self.values if pooled else weights.toarray()

    def _report_empty(self, n_empty, n_queries):
        if n_empty == 0:
            return
        if self.on_empty == "raise":
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
        }[self.on_empty]
        warnings.warn(
            f"{n_empty} of {n_queries} queries have no training key with "
            f"positive weight inside the kernel's support; they get {what} "
            f"(on_empty={self.on_empty!r}). A larger bandwidth avoids this.",
            EmptyNeighborhoodWarning,
            stacklevel=5,
        )

    def _pooled_sums(self, scores, n):
        """``scores @ pool_matrix`` for the first ``n`` rows of ``scores``."""
        if self.algorithm != "brute":
            return scores @ self.pool_matrix
        return self.scorer.pool(scores, self.pool_matrix)[:n]

    # -- the operations ------------------------------------------------------
    def pool(self, X, n_jobs=None):
        """Pooled values, shape (n_queries, n_outputs)."""

        def work(X_chunk, workspace):
            queries = self._queries(X_chunk)
            # One product gives every weighted sum and the denominator.
            scores = self._raw_scores(queries, workspace)
            sums = self._pooled_sums(scores, len(X_chunk))
            redo = self._underflowed(sums[:, -1])
            if redo is not None:
                blocks, rows, at = redo
                stable = self._raw_scores(queries, workspace, rows=blocks)
                sums[rows] = self._pooled_sums(stable, len(blocks))[at]
            total = sums[:, -1]
            empty = ~(total > 0)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = sums[:, :-1] / total[:, None]
            self._fill_fallback(out, empty, queries, workspace, pooled=True)
            out *= self.value_scale
            return out, empty

        return self._run_chunks(X, self.n_outputs, work, n_jobs)

    def attention_weights(self, X, n_jobs=None):
        """Normalised weights over all training rows, shape (n_queries, n_fit)."""

        def work(X_chunk, workspace):
            queries = self._queries(X_chunk)
            scores = self._raw_scores(queries, workspace)[: len(X_chunk)]
            if self.algorithm != "brute":
                scores = scores.toarray()
            if self.algorithm != "brute" or not self.scorer.weights_folded:
                scores = scores * self.weights
            else:
                scores = scores.copy()  # the buffer is reused by the next chunk
            redo = self._underflowed(scores.sum(axis=1))
            if redo is not None:
                blocks, rows, at = redo
                stable = self._raw_scores(queries, workspace, rows=blocks)
                scores[rows] = stable[at]
            total = scores.sum(axis=1)
            empty = ~(total > 0)
            with np.errstate(invalid="ignore", divide="ignore"):
                scores /= total[:, None]
            self._fill_fallback(scores, empty, queries, workspace, pooled=False)
            return scores, empty

        dense = self._run_chunks(X, self.keys.shape[0], work, n_jobs)
        if dense.shape[1] == self.n_samples_fit:
            return dense
        out = np.zeros((X.shape[0], self.n_samples_fit), dtype=self.dtype)
        out[:, self.support] = dense
        return out
