"""The chunks of queries of the NumPy engine, and the buffers that hold them.

Queries are pooled in chunks, each bounded by scikit-learn's
``working_memory`` (shared by the threads that hold a chunk each), planned
by the scorer (``plan_batches`` of the protocol of :mod:`._protocol`): brute
chunks of whole blocks of the scorer's products, sized to keep their scores
in cache (:mod:`._brute_chunks`); tree chunks cut from the neighbours
counted in each query's support (:mod:`._tree`), with the sizes below.
:func:`run_chunks` runs a chunk's work of a :class:`._pooling.KernelPool`
over them, each thread with its scorer's workspace.
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


def run_chunks(pool, X, width, work, n_jobs, extra_row_bytes=0, empty_row_pairs=0):
    """Apply ``work(chunk, workspace) -> (rows, empty)`` over the chunks of
    the queries ``X`` of a :class:`._pooling.KernelPool`.

    The chunks are planned by the pool's scorer (``plan_batches`` of
    :mod:`._protocol`) within the share of ``working_memory`` of each
    thread, counting ``extra_row_bytes`` per query beside the scores and
    ``empty_row_pairs`` pairs for a query with no neighbour (its fallback
    row of sparse weights). The rows fill an (n_queries, width) array of the
    pool's dtype, or, for ``width=None``, a list of each chunk's rows in
    order; the empty queries are reported (:mod:`._fallbacks`).

    Where the scorer orders the queries (``query_order``, the trees: nearby
    queries in one chunk visit the same nodes and keys), the chunks are cut
    from that order, each gathers its own rows of ``X`` and writes them back
    in place. Each query's row is computed alone, so the order changes no
    value.
    """
    n_queries = X.shape[0]
    order = None if width is None else pool.scorer.query_order(pool, X)
    # Each thread holds a chunk: the chunks share working_memory.
    max_threads = engine_threads(n_jobs)
    batches, pairs = pool.scorer.plan_batches(
        pool, X, extra_row_bytes, max_threads, empty_row_pairs, order=order
    )
    n_rows = max((b.stop - b.start for b in batches), default=1)
    if width is None:
        out = [None] * len(batches)
    else:
        out = np.empty((n_queries, width), dtype=pool.dtype)
    empty = np.zeros(n_queries, dtype=bool)
    bar = new_bar(n_queries)

    def run(group):
        workspace = pool.scorer.workspace(min(n_rows, n_queries))
        for i in group:
            batch = batches[i]
            # Sparse queries are made dense a chunk at a time.
            at = batch if order is None else order[batch]
            rows, empty[batch] = work(dense_rows(X, at), workspace)
            out[i if width is None else at] = rows
            # (not held while the next chunk's rows are computed)
            del rows
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
        raise exc.for_call(n_queries, pool.n_samples_fit) from None
    finally:
        bar.close()
    pool.empty_queries.report(int(empty.sum()), n_queries)
    return out
