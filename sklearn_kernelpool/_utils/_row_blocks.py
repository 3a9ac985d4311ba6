"""Blocks of held-out rows that a caller maps elsewhere (a dask cluster).

The held-out predictions of one split are independent row by row: each row
is fitted from the training keys alone. :func:`map_row_blocks` computes them
in one call, or, inside :func:`mapped_row_blocks`, in blocks of
:data:`BLOCK_ROWS` rows that the given mapper runs where it likes (the
large-table selection of a dask array runs them as tasks on the cluster,
:mod:`.._selection._large_dask`). The exact held-out engines compute a row
alike whatever the other rows of its call, down to the bit, provided the
blocks start on the boundaries of the dense pass's tiles of 256 rows (its
matrix products, and its choice of exact distances, are per tile): so
both give the same answer, bit for bit. The binned engine, whose sums of a
split depend on the rows held out, is computed in one call.
"""

import contextlib
import contextvars

import numpy as np

#: The held-out rows of one task: a multiple of the tiles of the dense pass
#: (``BLOCK`` of :mod:`.._held_out._sums`).
BLOCK_ROWS = 256

_MAPPER = contextvars.ContextVar("sklearn_kernelpool_row_block_mapper", default=None)


@contextlib.contextmanager
def mapped_row_blocks(mapper):
    """Within the block, :func:`map_row_blocks` computes in blocks of rows
    with ``mapper(function, shared, blocks)``, which returns
    ``[function(shared, rows) for rows in blocks]`` in order."""
    token = _MAPPER.set(mapper)
    try:
        yield
    finally:
        _MAPPER.reset(token)


def map_row_blocks(function, shared, rows, axis=1):
    """``function(shared, rows)``, a tuple of arrays whose ``axis`` runs
    over ``rows``: in one call, or in blocks of rows by the mapper of
    :func:`mapped_row_blocks`, concatenated."""
    mapper = _MAPPER.get()
    rows = np.asarray(rows)
    if mapper is None or rows.size <= BLOCK_ROWS:
        return function(shared, rows)
    starts = range(0, rows.size, BLOCK_ROWS)
    parts = mapper(function, shared, [rows[s : s + BLOCK_ROWS] for s in starts])
    columns = zip(*parts, strict=True)
    return tuple(np.concatenate(arrays, axis=axis) for arrays in columns)
