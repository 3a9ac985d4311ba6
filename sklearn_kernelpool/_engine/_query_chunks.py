"""The chunks of queries of the NumPy engine, and the buffers that hold them.

Queries are pooled in chunks, each bounded by scikit-learn's
``working_memory`` (shared by the threads that hold a chunk each), planned
by the scorer (``plan_batches`` of the protocol of :mod:`._protocol`): brute
chunks of whole blocks of the scorer's products, sized to keep their scores
in cache (:mod:`._brute_chunks`); tree chunks cut from the neighbours
counted in each query's support (:mod:`._tree`), with the sizes below.
:class:`ChunkPlan` is the part of :class:`._pooling.KernelPool` that runs a
chunk's work over them, each thread with its scorer's workspace.
"""

import numpy as np
from joblib import Parallel, delayed

from .._utils._progress import new_bar
from .._utils._sparse import dense_rows
from .._utils._threads import engine_threads, single_threaded_blas
from .._utils._user_kernel import KernelShapeError

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


class ChunkPlan:
    """Chunk planning and the run of a work over the chunks (a part of
    :class:`._pooling.KernelPool`)."""

    # -- chunks --------------------------------------------------------------
    def _batches(self, X, extra_row_bytes=0, n_threads=1, empty_row_pairs=0):
        """The chunks of queries, as slices, and the number of pairs they
        hold, planned by the scorer (:mod:`._protocol`) within the share of
        ``working_memory`` of each of ``n_threads`` threads; a query with no
        neighbour counts as ``empty_row_pairs`` pairs (its fallback row of
        sparse weights)."""
        return self.scorer.plan_batches(
            self, X, extra_row_bytes, n_threads, empty_row_pairs
        )

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
            workspace = self.scorer.workspace(min(n_rows, n_queries))
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
        except KernelShapeError as exc:
            # Said of the call, not of one of its chunks.
            raise exc.for_call(n_queries, self.n_samples_fit) from None
        finally:
            bar.close()
        self._report_empty(int(empty.sum()), n_queries)
        return out
