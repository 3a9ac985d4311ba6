"""Rows of attention weights: sparse assembly, scaling and the memory guard.

The engine (:mod:`._pooling`) computes the weights chunk by chunk; these
helpers put the rows together without densifying sparse ones.
"""

import os

import numpy as np
from scipy.sparse import csr_array


def _row_of_each_entry(weights):
    return np.repeat(np.arange(weights.shape[0]), np.diff(weights.indptr))


def normalize_sparse_rows(scores, total, empty):
    """Divide each row of CSR ``scores`` by its total, in place.

    Empty rows (and keys on the support radius) are left without entries.
    """
    divisor = np.where(empty, 1.0, total)[_row_of_each_entry(scores)]
    scores.data /= divisor.astype(scores.dtype)
    scores.eliminate_zeros()
    return scores


def repeated_rows(fill, n_rows, n_cols):
    """CSR of ``n_rows`` rows equal to ``fill`` (a row or a number), built
    without a dense intermediate."""
    data = np.tile(np.broadcast_to(fill, (n_cols,)), n_rows)
    indices = np.tile(np.arange(n_cols, dtype=np.int32), n_rows)
    indptr = np.arange(0, (n_rows + 1) * n_cols, n_cols, dtype=np.int64)
    return csr_array((data, indices, indptr), shape=(n_rows, n_cols))


def place_rows(weights, rows, empty):
    """Add the CSR ``rows`` into the ``empty`` rows of CSR ``weights``.

    ``rows`` is laid out over the empty rows directly, without a COO copy.
    """
    counts = np.zeros(weights.shape[0], dtype=np.int64)
    counts[empty] = np.diff(rows.indptr)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    placed = csr_array((rows.data, rows.indices, indptr), shape=weights.shape)
    return weights + placed


def scale_rows(weights, offset, g, keys, dtype):
    """``weights * (offset - g @ keys.T)``, dense or on the stored entries only."""
    if isinstance(weights, np.ndarray):
        factor = offset[:, None] - g @ keys.T
        return (weights * factor).astype(dtype, copy=False)
    rows, cols = _row_of_each_entry(weights), weights.indices
    factor = offset[rows] - np.einsum("ij,ij->i", g[rows], keys[cols])
    weights.data = (weights.data * factor).astype(dtype)
    weights.eliminate_zeros()
    return weights


def compact_indices(weights):
    """CSR ``weights`` with 32-bit indices where they fit (the trees give
    64-bit ones), so that the chunks held until they are joined take no
    more memory than the joined matrix."""
    if max(weights.nnz, weights.shape[1]) < np.iinfo(np.int32).max:
        weights.indices = weights.indices.astype(np.int32, copy=False)
        weights.indptr = weights.indptr.astype(np.int32, copy=False)
    return weights


def assemble_sparse(chunks, columns, shape, dtype):
    """Stack CSR chunks over the keys ``columns`` into a canonical CSR array.

    The chunks' arrays are joined directly, with 32-bit indices where they
    fit: older SciPy stacks CSR arrays through COO copies of several times
    their size.
    """
    ends = np.cumsum([chunk.indptr[-1] for chunk in chunks])
    nnz = int(ends[-1]) if len(ends) else 0
    index = np.int32 if max(nnz, shape[1]) < np.iinfo(np.int32).max else np.int64
    data = np.concatenate([chunk.data for chunk in chunks]).astype(dtype, copy=False)
    indices = np.concatenate(
        [chunk.indices for chunk in chunks], dtype=index, casting="same_kind"
    )
    if len(columns) != shape[1]:  # keys of zero weight are not columns
        indices = columns[indices].astype(index)
    starts = ends - [chunk.indptr[-1] for chunk in chunks]
    indptr = np.concatenate(
        [np.zeros(1, dtype=index)]
        + [
            chunk.indptr[1:] + start
            for chunk, start in zip(chunks, starts, strict=True)
        ],
        dtype=index,
        casting="same_kind",
    )
    out = csr_array((data, indices, indptr), shape=shape)
    out.sort_indices()  # tree neighbours come unsorted
    return out


def dense_refusal(n_queries, n_samples, dtype, kernel, on_empty):
    """Why a dense weight matrix is refused, with the advice that fits.

    ``sparse=True`` helps only when most weights are zero: with a compact
    ``kernel``. With an unbounded one every weight is positive, and a sparse
    matrix would be larger than the dense one.
    """
    size = n_queries * n_samples * np.dtype(dtype).itemsize
    size = f"{size / 2**30:.3g} GiB" if size >= 2**30 else f"{size / 2**20:.3g} MiB"
    message = (
        f"A dense ({n_queries}, {n_samples}) matrix of attention weights "
        f"({size}) does not fit in memory. "
    )
    fewer = "ask for fewer queries at a time"
    limit = physical_memory()
    if limit is not None:
        row_bytes = n_samples * np.dtype(dtype).itemsize
        fewer += f" (at most about {max(limit // 4 // row_bytes, 1)} per call)"
    if not kernel.is_compact:
        return message + (
            f"The {kernel.name!r} kernel has unbounded support, so every weight "
            "is positive and sparse=True would not save memory: "
            f"{fewer}. predict needs no weight matrix."
        )
    if on_empty == "mean":
        return message + (
            "Ask for sparse=True, which stores only the weights inside the "
            f"kernel's support (queries that fall back to on_empty='mean' "
            f"still weigh every key), or {fewer}."
        )
    return message + (
        "Ask for sparse=True, which stores only the non-zero weights, the "
        f"keys inside the kernel's support, or {fewer}."
    )


def sparse_failure(n_queries, n_samples, kernel, on_empty):
    """Why a sparse weight matrix could not be built, with the advice that fits."""
    message = (
        f"The sparse matrix of the attention weights of {n_queries} queries "
        f"over {n_samples} keys (sparse=True) does not fit in memory. "
    )
    if not kernel.is_compact:
        return message + (
            f"The {kernel.name!r} kernel has unbounded support, so every weight "
            "is positive and a sparse matrix is larger than a dense one: ask "
            "for sparse=False and fewer queries at a time, or use a kernel "
            "with compact support."
        )
    if on_empty == "mean":
        return message + (
            "Queries that fall back to on_empty='mean' weigh every key: use "
            "on_empty='nearest' (the nearest keys only) or a larger bandwidth, "
            "or ask for fewer queries at a time."
        )
    return message + (
        "Every query weighs the keys inside the kernel's support: ask for "
        "fewer queries at a time, or use a smaller bandwidth."
    )


def sparse_size(nnz, n_rows, dtype):
    """Bytes of a CSR array of ``nnz`` entries: data, 64-bit indices, indptr."""
    return nnz * (np.dtype(dtype).itemsize + 8) + 8 * (n_rows + 1)


def sparse_refusal(shape, nnz, size, limit, n_empty, on_empty):
    """The message of a sparse weight matrix larger than the memory."""
    message = (
        f"A sparse {shape} matrix of attention weights would hold {nnz:,} "
        f"non-zero weights ({size / 2**30:.3g} GiB), more than the "
        f"{limit / 2**30:.3g} GiB of physical memory."
    )
    if n_empty and on_empty in ("mean", "nan"):
        return message + (
            f" {n_empty} of the {shape[0]} queries have no key inside the "
            f"kernel's support, and on_empty={on_empty!r} gives each of them "
            f"a weight on every one of the {shape[1]} keys. Use "
            "on_empty='nearest' (the nearest keys only) or 'raise', a larger "
            "bandwidth, or fewer queries at a time."
        )
    return message + (
        " Ask for fewer queries at a time, or use a compact kernel with a "
        "smaller bandwidth, whose weights are zero beyond its support."
    )


def physical_memory():
    """Bytes of physical memory, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def check_dense_size(n_queries, n_samples, dtype, kernel, on_empty):
    """Refuse a dense weight matrix larger than the physical memory."""
    limit = physical_memory()
    size = n_queries * n_samples * np.dtype(dtype).itemsize
    if limit is not None and size > limit:
        raise MemoryError(dense_refusal(n_queries, n_samples, dtype, kernel, on_empty))
