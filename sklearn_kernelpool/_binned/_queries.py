"""The binned estimates of many queries, a chunk at a time.

The binned engine (:class:`._engine.BinnedEngine`) interpolates its
convolved sums to the queries and solves their estimates in chunks of at
most ``CHUNK_ROWS`` queries whose work keeps within scikit-learn's
``working_memory`` (:func:`chunk_rows`). :func:`predict_queries` writes each
chunk's estimates into the output, in the fit's dtype, and keeps of a chunk
only the indices of its undecided queries and the counts of its local-linear
fits. A prediction then holds its output and one chunk, whatever the number
of queries: the queries are read in place (float32 and sparse queries are
converted a chunk at a time), and no other array has a row per query.
"""

from dataclasses import dataclass

import numpy as np

from .._engine._moments import fit_counts
from .._utils._working_memory import working_memory_bytes

# Queries are interpolated and solved in chunks of at most this many rows
# (as many as working_memory holds, under the default of 1 GiB).
CHUNK_ROWS = 2**16
# The floats a chunk's work holds per query: per feature (its cell, its
# fractions and the shares of its corners), per interpolated kernel sum (the
# sums, their ratios and the estimates; for degree 1 the sums of the squared
# weights among them, and Kish's ratio) and, for degree 1, for the local
# design and its solve. Traced at 65536 queries a chunk, the work took 0.34
# to 0.73 of these bytes over d = 1, 2, degree 0, 1, one and four outputs,
# with and without return_std (0.34 to 0.71 with the squared weights;
# tests/test_memory.py bounds the peak).
FEATURE_FLOATS = 8
SUM_FLOATS = 5
DESIGN_FLOATS = 16


@dataclass
class QueryChunk:
    """The estimates of one chunk of queries
    (:meth:`._engine.BinnedEngine.predict_chunks`).

    ``rows`` is the slice of the queries; ``mean`` and ``std`` (None unless
    asked) of shape (n_rows, n_outputs), NaN where ``doubtful``; ``doubtful``
    marks the queries left undecided; ``shrinkage`` holds the safeguard's
    factors of the local-linear slopes (ones for degree 0).
    """

    rows: slice
    mean: np.ndarray
    std: object
    doubtful: np.ndarray
    shrinkage: np.ndarray


@dataclass
class BinnedPredictions:
    """The estimates of all the queries, written chunk by chunk.

    ``mean`` and ``std`` (None unless asked) of shape (n_queries,
    n_outputs), NaN at the queries ``doubtful`` (their indices, in order)
    left undecided; ``counts`` the :func:`.._engine._moments.fit_counts` of
    each chunk's local-linear fits (empty for degree 0).
    """

    mean: np.ndarray
    std: object
    doubtful: np.ndarray
    counts: list


def chunk_rows(n_features, n_sums, degree):
    """The queries of one chunk: as many as ``working_memory`` holds, at
    least one and at most ``CHUNK_ROWS``.

    ``n_sums`` is the number of kernel sums interpolated per query.
    """
    floats = FEATURE_FLOATS * n_features + SUM_FLOATS * n_sums
    floats += DESIGN_FLOATS * (degree == 1)
    rows = working_memory_bytes() // (8 * floats)
    return int(max(1, min(CHUNK_ROWS, rows)))


def predict_queries(engine, X, dtype, return_std=False):
    """The :class:`BinnedPredictions` of the queries ``X`` by the binned
    ``engine``, the estimates in ``dtype``.

    Each chunk's estimates are cast to ``dtype`` as they are written, which
    gives the bits of casting the float64 estimates of all the queries.
    """
    n, p, d = X.shape[0], engine.n_outputs, X.shape[1]
    mean = np.empty((n, p), dtype=dtype)
    std = np.empty((n, p), dtype=dtype) if return_std else None
    doubtful, counts = [], []
    for chunk in engine.predict_chunks(X, return_std):
        mean[chunk.rows] = chunk.mean
        if return_std:
            std[chunk.rows] = chunk.std
        doubtful.append(np.flatnonzero(chunk.doubtful) + chunk.rows.start)
        if engine.degree == 1:
            # The binned designs decided here have full rank (their smallest
            # eigenvalue is above the binned engine's min_variance).
            rank = np.full(len(chunk.doubtful), d)
            counts.append(fit_counts(rank, chunk.shrinkage, d, ~chunk.doubtful))
        del chunk  # not held while the next one is computed
    doubtful = np.concatenate(doubtful) if doubtful else np.empty(0, dtype=np.intp)
    return BinnedPredictions(mean, std, doubtful, counts)
