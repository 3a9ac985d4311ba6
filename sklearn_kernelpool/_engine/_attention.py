"""Attention weights of the NumPy engine, dense or sparse.

The normalised scores of each query over the training rows, with the
``on_empty`` fallback rows, and for ``degree=1`` the equivalent kernel of the
local-linear fit. :class:`AttentionWeights` is the part of
:class:`._pooling.KernelPool` that computes them within the memory.
"""

import numpy as np
from scipy.sparse import csr_array

from . import _weight_rows as _weights
from ._moments import fit_counts
from ._protocol import normalise_rows


class AttentionWeights:
    """Attention weights (a part of :class:`._pooling.KernelPool`)."""

    def attention_weights(self, X, n_jobs=None, sparse=False, counts=None):
        """Normalised weights over all training rows, shape (n_queries, n_fit).

        Dense, or a :class:`scipy.sparse.csr_array` of the non-zero weights
        for ``sparse=True``. For degree 1 the rows are the equivalent-kernel
        weights of the local-linear fit, and the
        :func:`._moments.fit_counts` of its chunks are appended to
        ``counts`` when it is a list (they are reported as well).
        """
        n_queries = X.shape[0]
        if sparse:
            self._check_sparse_size(X, n_jobs)
        else:
            _weights.check_dense_size(
                n_queries, self.n_samples_fit, self.dtype, self.kernel, self.on_empty
            )
        counts = [] if counts is None else counts
        moments = self.degree == 1 and self._uses_moments()
        if self.degree == 1 and not moments:
            self._check_fit_memory(n_jobs)

        def work(X_chunk, workspace):
            queries = self._queries(X_chunk)
            weights, empty = self._normalized_scores(queries, workspace, sparse)
            if self.degree == 1:
                weights, rank, s = self._equivalent_kernel(
                    weights, queries[1], empty, moments
                )
                counts.append(fit_counts(rank, s, self.keys.shape[1], ~empty))
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
        counts = self.scorer.support_counts(self, X, n_jobs)
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
        scores = self.scorer.chunk_scores(queries, workspace)
        counts = np.count_nonzero(scores[: len(X_chunk)], axis=1)
        return counts, np.zeros(len(X_chunk), dtype=bool)

    def _normalized_scores(self, queries, workspace, sparse):
        """A chunk's local-constant weights over the support, and its empty rows."""
        scores, total = self._weighted_scores(queries, workspace, sparse)
        return self._normalise_scores(scores, total, queries, workspace, sparse)

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

    def _normalise_scores(self, scores, total, queries, workspace, sparse):
        """The weights of :meth:`_normalized_scores` from the weighted scores
        and their row sums (dense scores are divided in place)."""
        if isinstance(scores, np.ndarray):
            scores, empty = normalise_rows(scores, total)
            self._fill_fallback(scores, empty, queries, workspace, pooled=False)
            return (csr_array(scores) if sparse else scores), empty
        empty = ~(total > 0)
        return self._sparse_fallback(scores, total, empty, queries, workspace), empty
