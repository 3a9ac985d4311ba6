"""The chunks of queries of the NumPy engine, and the buffers that hold them.

Queries are pooled in chunks, each bounded by scikit-learn's
``working_memory`` (shared by the threads that hold a chunk each): brute
chunks of whole blocks of the scorer's products, sized to keep their scores
in cache; tree chunks cut from the neighbours counted in each query's
support. :class:`ChunkPlan` is the part of :class:`._pooling.KernelPool`
that plans them and runs a chunk's work over them.
"""

import numpy as np
from joblib import Parallel, delayed
from sklearn.utils import gen_batches

from . import _adaptive
from ._chunking import working_memory_bytes
from ._progress import new_bar
from ._sparse import dense_rows
from ._threads import engine_threads, single_threaded_blas
from ._validation import scale_coordinates

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


class ChunkPlan:
    """Chunk planning and the run of a work over the chunks (a part of
    :class:`._pooling.KernelPool`)."""

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
