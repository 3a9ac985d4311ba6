"""Blocks of held-out rows, computed in turn or mapped elsewhere (dask).

The held-out predictions of one split are independent row by row: each row
is fitted from the training keys alone. :func:`map_row_blocks` computes them
in one call or, inside :func:`mapped_row_blocks`, in blocks of
:data:`BLOCK_ROWS` rows that the given mapper runs where it likes: in turn
(:func:`map_in_turn`), or as tasks on a dask cluster
(:mod:`.._selection._large_dask`). The large-table selection computes its
second stage in these blocks in memory and on dask alike, so both give the
same answer, bit for bit. The blocks also equal one call bit for bit on the
dense, categorical and adaptive engines, whose matrix products and choice
of exact distances are per tile of 256 rows; the neighbour lists refit
rows in batches over the union of their keys, which rounds a row by the
others of its batch (equal to one call within rounding). The binned engine,
whose sums of a split depend on the rows held out, is computed in one call.
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


def map_row_blocks(function, shared, rows):
    """``function(shared, rows)``, a tuple of arrays whose axis 1 runs over
    ``rows``: in one call, or in blocks of rows by the mapper of
    :func:`mapped_row_blocks`, concatenated."""
    mapper = _MAPPER.get()
    rows = np.asarray(rows)
    if mapper is None or rows.size <= BLOCK_ROWS:
        return function(shared, rows)
    starts = range(0, rows.size, BLOCK_ROWS)
    parts = mapper(function, shared, [rows[s : s + BLOCK_ROWS] for s in starts])
    columns = zip(*parts, strict=True)
    return tuple(np.concatenate(arrays, axis=1) for arrays in columns)


def map_in_turn(function, shared, blocks):
    """``[function(shared, rows) for rows in blocks]``, one after the other
    (the mapper of a fit in memory)."""
    return [function(shared, rows) for rows in blocks]
