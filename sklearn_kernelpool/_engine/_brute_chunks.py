"""The brute path's side of the scorer protocol of :mod:`._protocol`.

:class:`BruteChunks` is the :class:`._brute.BruteScorer` that
:class:`._pooling.KernelPool` drives: chunks of whole blocks sized to keep
their scores in cache, a reused :class:`Workspace` per thread, dense scores
whose underflowed rows are recomputed with their maximum subtracted, and
the nearest keys from the smallest scaled distances.
"""

import numpy as np
from sklearn.utils import gen_batches

from .._utils._working_memory import working_memory_bytes
from . import _query_chunks as _chunk_plan
from ._brute import BruteScorer


class Workspace:
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


class BruteChunks(BruteScorer):
    """Dense scores of chunks of whole blocks, against every key."""

    @classmethod
    def for_pool(cls, pool, scaled, kernel, user_kernel):
        """The scorer of a :class:`._pooling.KernelPool`: on its centred
        keys, whose ``scaled`` (uncentred) coordinates it does not use."""
        return cls(pool.keys, pool.weights, kernel, user_kernel, pool.dtype, pool.exact)

    # -- the chunks ----------------------------------------------------------
    def _chunk_rows(self, pool, n_queries, extra_row_bytes=0, n_threads=1):
        """Queries per chunk: whole blocks within the budget of each of
        ``n_threads`` threads."""
        n_keys = self.keys.shape[0]
        row_bytes = self.dtype.itemsize * n_keys + 8 * (self.n_features + 2)
        row_bytes += extra_row_bytes
        if pool.categorical is not None:
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
        block = self.block_rows
        rows = min(_chunk_plan.CHUNK_BYTES // row_bytes, budget // memory_row_bytes)
        rows = max(rows // block, 1) * block
        return int(min(rows, self.padded(max(n_queries, 1))))

    def plan_batches(
        self, pool, X, extra_row_bytes, n_threads, empty_row_pairs, order=None
    ):
        """Chunks of a fixed number of rows, and the pairs they hold (the
        queries are taken in their order: ``order`` is None)."""
        n_queries = X.shape[0]
        n_rows = self._chunk_rows(pool, n_queries, extra_row_bytes, n_threads)
        return list(gen_batches(n_queries, n_rows)), n_queries * self.keys.shape[0]

    def query_order(self, pool, X):
        """None: every chunk scores every key, in any order."""
        return None

    def workspace(self, n_rows):
        """The buffers of a thread that computes chunks of ``n_rows`` rows."""
        return Workspace(n_rows, self.keys.shape[0], self.n_features, self)

    def support_counts(self, pool, X, n_jobs):
        """The number of keys of positive score of each query."""

        def work(X_chunk, workspace):
            scores = self.chunk_scores(pool._queries(X_chunk), workspace)
            counts = np.count_nonzero(scores[: len(X_chunk)], axis=1)
            return counts, np.zeros(len(X_chunk), dtype=bool)

        return np.concatenate(pool._run_chunks(X, None, work, n_jobs))

    # -- the scores ----------------------------------------------------------
    def chunk_scores(self, queries, workspace, rows=None):
        """Dense scores of a chunk, with rows past the chunk's up to a whole
        block; ``rows`` recomputes those rows, in a stable way."""
        scaled, Q, raw = queries[:3]
        r2 = queries[3] if len(queries) > 3 else None
        categorical = getattr(queries, "categorical", None)
        exact = (raw, scaled)
        if rows is not None:
            # Whole blocks: see underflowed and row_scores.
            Q, exact = Q[rows], (raw[rows], scaled[rows])
            categorical = None if categorical is None else categorical[rows]
            r2 = None if r2 is None else r2[rows]
        augmented, out, wide = workspace.rows(len(Q))
        augmented = self.augment(Q, augmented)
        return self.scores(
            augmented,
            out,
            wide,
            stable=rows is not None,
            exact=exact,
            categorical=categorical,
            r2=r2,
        )

    def underflowed(self, total):
        """Rows of scores to recompute with their maximum subtracted.

        Returns the whole blocks that hold them, and where they are in it:
        a row is recomputed at the place it has in the first pass.
        """
        if not self.may_underflow:
            return None
        rows = np.flatnonzero(total < self.tiny)
        if not len(rows):
            return None
        blocks = self.whole_blocks(rows, len(total))
        return blocks, rows, np.searchsorted(blocks, rows)

    def product(self, scores, matrix, workspace):
        """``scores @ matrix``, in float64 where ``matrix`` is."""
        if matrix.dtype != scores.dtype:
            wide = workspace.wide[: len(scores)]
            np.copyto(wide, scores)
            scores = wide
        return self.pool(scores, matrix)

    def weighted(self, scores, weights, n, sparse):
        """The ``n`` rows of a chunk's scores, sample weights included, in
        an array of their own (the buffer is reused by the next chunk)."""
        if not self.weights_folded:
            return scores[:n] * weights
        return scores[:n].copy()

    def row_scores(self, queries, workspace, rows, weights):
        """Float64 scores of the ``rows`` of a chunk, sample weights
        included, dense, up to a factor per row."""
        blocks = self.whole_blocks(rows, len(queries[0]))
        at = np.searchsorted(blocks, rows)
        scores = self.chunk_scores(queries, workspace, rows=blocks)[at]
        scores = scores.astype(np.float64)
        if not self.weights_folded:
            scores *= weights
        return scores

    def refit_scores(self, queries, workspace, redo, step, weights):
        """``(rows, row_scores)`` of the ``redo`` rows, ``step`` at a time;
        computed by whole blocks, once for the chunk (within its buffer)."""
        every = self.row_scores(queries, workspace, redo, weights)
        for start in range(0, len(redo), step):
            yield redo[start : start + step], every[start : start + step]

    def nearest_candidates(self, queries, workspace):
        """(rows, cols) pairs that hold each query's nearest keys."""
        scaled, Q = queries[:2]
        augmented, out, wide = workspace.rows(len(Q))
        Q1 = self.augment(Q, augmented)
        return self.candidates(Q1, scaled, out, wide)
