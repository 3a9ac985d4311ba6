"""Attention weights of the NumPy engine, dense or sparse.

The normalised scores of each query over the training rows, with the
``on_empty`` fallback rows, and for ``degree`` 1 and 2 the equivalent kernel
of the local polynomial fit, of a :class:`._pooling.KernelPool`, within the memory.
"""

import numpy as np

from . import _weight_rows as _weights
from ._moments import equivalent_kernel, fit_counts
from ._query_chunks import run_chunks


def attention_weights(pool, X, n_jobs=None, sparse=False, counts=None):
    """Normalised weights of a pool over all training rows, shape
    (n_queries, n_fit).

    Dense, or a :class:`scipy.sparse.csr_array` of the non-zero weights
    for ``sparse=True``. For degree 1 the rows are the equivalent-kernel
    weights of the local-linear fit, and the
    :func:`._moments.fit_counts` of its chunks are appended to
    ``counts`` when it is a list (they are reported as well).
    """
    n_queries = X.shape[0]
    if sparse:
        check_sparse_size(pool, X, n_jobs)
    else:
        _weights.check_dense_size(
            n_queries, pool.n_samples_fit, pool.dtype, pool.kernel, pool.on_empty
        )
    counts = [] if counts is None else counts
    moments = pool.degree == 1 and pool.moments.uses_moment_matrix()
    if pool.degree >= 1 and not moments:
        pool.moments.check_fit_memory(n_jobs, pool.degree)

    def work(X_chunk, workspace):
        queries = pool._queries(X_chunk)
        weights, empty = pool._normalized_scores(queries, workspace, sparse)
        if pool.degree >= 1:
            fit = (queries[1], empty, pool.kernel, moments, pool.degree)
            weights, rank, s = equivalent_kernel(pool.moments, weights, *fit)
            counts.append(fit_counts(rank, s, pool.keys.shape[1], ~empty))
        if sparse:
            weights = _weights.compact_indices(weights)
        return weights, empty

    shape = (n_queries, pool.n_samples_fit)
    if sparse:
        try:
            # Under "mean" and "nan" an empty query weighs every key.
            fill = pool.keys.shape[0] if pool.on_empty in ("mean", "nan") else 1
            chunks = run_chunks(pool, X, None, work, n_jobs, empty_row_pairs=fill)
            out = _weights.assemble_sparse(chunks, pool.support, shape, pool.dtype)
        except MemoryError as exc:
            raise MemoryError(
                _weights.sparse_failure(*shape, pool.kernel, pool.on_empty)
            ) from exc
        pool._report_fits(counts, n_queries)
        return out
    # A chunk's dense rows: the weights (the trees' scores made dense, or
    # brute scores weighted), and for degree 1 the factors that turn
    # them into the equivalent kernel.
    dense_row = (3 if pool.degree >= 1 else 1) * 8 * pool.keys.shape[0]
    try:
        out = run_chunks(
            pool, X, pool.keys.shape[0], work, n_jobs, extra_row_bytes=dense_row
        )
        if out.shape[1] != pool.n_samples_fit:
            full = np.zeros(shape, dtype=pool.dtype)
            full[:, pool.support] = out
            out = full
    except MemoryError as exc:
        raise MemoryError(
            _weights.dense_refusal(*shape, pool.dtype, pool.kernel, pool.on_empty)
        ) from exc
    pool._report_fits(counts, n_queries)
    return out


def check_sparse_size(pool, X, n_jobs):
    """Refuse sparse weights larger than the physical memory, before
    computing them.

    The size is bounded by that of every (query, key) pair first; only
    when that bound exceeds the memory are the non-zero weights counted:
    the keys in each query's support, and for a query with none, its
    ``on_empty`` row (every key for "mean" and "nan").
    """
    limit = _weights.physical_memory()
    n_queries, n_keys = X.shape[0], pool.keys.shape[0]
    if (
        limit is None
        or _weights.sparse_size(n_queries * n_keys, n_queries, pool.dtype) <= limit
    ):
        return
    counts = pool.scorer.support_counts(pool, X, n_jobs)
    n_empty = int(np.count_nonzero(counts == 0))
    fill = n_keys if pool.on_empty in ("mean", "nan") else 1
    nnz = int(counts.sum()) + n_empty * fill
    size = _weights.sparse_size(nnz, n_queries, pool.dtype)
    if size > limit:
        raise MemoryError(
            _weights.sparse_refusal(
                (n_queries, pool.n_samples_fit),
                nnz,
                size,
                limit,
                n_empty,
                pool.on_empty,
            )
        )
