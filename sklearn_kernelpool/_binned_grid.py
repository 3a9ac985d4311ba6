"""The grid of the binned path: its nodes, its memory, its resolution.

Every binned fit builds its grid with :func:`plan_grid`: the estimators'
engine (:func:`._binned.fit_engine`), the map-reduce on dask arrays
(:mod:`._binned_dask`) and the binned bandwidth search (:mod:`._binned_cv`).
It takes the default grid (:func:`._binned.default_bins`, whose caps
bound its size) or ``n_bins`` as given: then it counts the bytes of the
arrays the engine allocates for the grid (:func:`grid_bytes`: the binned
sums, the stencils, the FFT spectra and the convolved sums) and refuses,
before any of them is allocated, a grid larger than :func:`memory_limit`.
:func:`nodes_per_width` says how finely a grid resolves a width: below
``MIN_NODES_PER_WIDTH`` nodes, ``algorithm="auto"`` takes an exact path
(:func:`._algorithm.prefers_binned`).
"""

import math

import numpy as np
from scipy import fft

from . import _weights
from ._binning import make_grid
from ._chunking import working_memory_bytes

# The fewest grid nodes per width with which the binned path resolves it:
# the rule of algorithm="auto" (:func:`._algorithm.prefers_binned`).
MIN_NODES_PER_WIDTH = 16
# A grid may use this fraction of the physical memory (as the held-out sums
# of the searches, :mod:`._cv`), or scikit-learn's working_memory where
# that is larger.
PHYSICAL_FRACTION = 0.25


def grid_nodes(span, bandwidth, n_bins):
    """Nodes per axis: ``n_bins`` as given (an int array of shape (d,)),
    or, when None, :func:`._binned.default_bins` of the ``span`` of the
    grid and the ``bandwidth`` it resolves."""
    from ._binned import default_bins

    span = np.asarray(span, dtype=np.float64)
    if n_bins is None:
        return default_bins(span, bandwidth, len(span))
    return np.broadcast_to(np.asarray(n_bins, dtype=np.int64), span.shape)


def nodes_per_width(span, bins, bandwidth):
    """The fewest grid nodes per ``bandwidth`` over the axes of a grid of
    ``bins`` nodes spanning ``span``."""
    span = np.asarray(span, dtype=np.float64)
    step = np.where(span > 0, span, 1.0) / (np.asarray(bins) - 1)
    return float(np.min(np.asarray(bandwidth, dtype=np.float64) / step))


def grid_bytes(shape, reach_nodes, n_columns, n_stencils, n_sums):
    """The bytes of the arrays the binned engine allocates for one grid.

    Parameters
    ----------
    shape : sequence of int
        The nodes per axis.
    reach_nodes : sequence of int
        The half-width of the stencils per axis, in nodes (at most the
        grid's nodes minus one).
    n_columns : int
        The binned columns (weight, weighted values, their squares).
    n_stencils : int
        The stencils (kernel times the powers of the local moments).
    n_sums : int
        The convolved sums.

    Returns
    -------
    n_bytes : int
        The binned sums and their binning temporaries (three grids), the
        stencils, the real FFT spectra of the columns and the stencils, a
        product of two spectra and an inverse transform on the padded grid,
        and the convolved sums: the peak of one engine's fit, in float64.
    """
    nodes = math.prod(int(m) for m in shape)
    padded = [
        fft.next_fast_len(int(m) + 2 * int(h), real=True)
        for m, h in zip(shape, reach_nodes, strict=True)
    ]
    spectrum = math.prod(padded[:-1]) * (padded[-1] // 2 + 1)
    stencil = math.prod(2 * int(h) + 1 for h in reach_nodes)
    floats = (
        nodes * (n_columns + 2)
        + stencil * n_stencils
        + 2 * spectrum * (n_columns + n_stencils + 1)
        + math.prod(padded)
        + nodes * n_sums
    )
    return 8 * floats


def memory_limit():
    """The bytes a binned grid may take: ``PHYSICAL_FRACTION`` of the
    physical memory, or scikit-learn's ``working_memory`` where larger
    (``inf`` where neither is known or ``working_memory`` is ``inf``)."""
    physical = _weights.physical_memory()
    fraction = np.inf if physical is None else PHYSICAL_FRACTION * physical
    return max(float(working_memory_bytes()), fraction)


def plan_grid(lower, upper, bandwidth, n_bins, *, reach, sizes):
    """The :class:`._binning.Grid` of a binned fit, its memory checked.

    Parameters
    ----------
    lower, upper : ndarray of shape (d,)
        The span of the grid.
    bandwidth : float or ndarray of shape (d,)
        The width the default grid resolves (the smallest candidate's in a
        search).
    n_bins : ndarray of int, shape (d,), or None
        The nodes per axis as given (validated by
        :func:`._binned_pool.check_n_bins`), or None for the default grid.
    reach : ndarray of shape (d,)
        The distance the widest stencil covers per axis (the truncation
        radius times the largest width; ``inf`` for the whole grid).
    sizes : tuple of int
        ``(n_columns, n_stencils, n_sums)`` of :func:`grid_bytes`.

    Returns
    -------
    grid : Grid

    Raises
    ------
    ValueError
        Naming ``n_bins``, the bytes the grid needs and the nodes accepted,
        when a given ``n_bins`` makes a grid larger than
        :func:`memory_limit`; nothing is allocated.
    """
    span = np.asarray(upper, dtype=np.float64) - np.asarray(lower, dtype=np.float64)
    bins = grid_nodes(span, bandwidth, n_bins)
    if n_bins is not None:
        limit = memory_limit()
        needed = _bytes(span, bins, reach, sizes)
        if needed > limit:
            raise ValueError(_refusal(bins, span, reach, sizes, needed, limit))
    return make_grid(lower, upper, bins)


def _bytes(span, bins, reach, sizes):
    """:func:`grid_bytes` of a grid of ``bins`` nodes over ``span``."""
    bins = np.asarray(bins, dtype=np.float64)
    step = np.where(span > 0, span, 1.0) / (bins - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        half = np.ceil(np.asarray(reach, dtype=np.float64) / step)
    half = np.where(np.isfinite(half), np.minimum(half, bins - 1), bins - 1)
    return grid_bytes(bins.astype(np.int64), half.astype(np.int64), *sizes)


def _refusal(bins, span, reach, sizes, needed, limit):
    """The text of the refusal of a grid larger than the limit."""
    # The most nodes per axis accepted, the same on every axis: the bytes
    # grow with the nodes, so bisect.
    lo, hi = 2, max(int(np.max(bins)), 3)
    if _bytes(span, np.full(len(bins), lo), reach, sizes) > limit:
        accepted = "no grid fits it"
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            fits = _bytes(span, np.full(len(bins), mid), reach, sizes) <= limit
            lo, hi = (mid, hi) if fits else (lo, mid)
        accepted = f"n_bins accepts 2 to {lo} nodes per feature here"
    shape = " x ".join(str(int(m)) for m in bins)
    return (
        f"n_bins={_plain(bins)!r} asks for a binned grid of {shape} "
        f"nodes whose arrays need {needed / 2**30:.3g} GiB, more than the limit "
        f"of {limit / 2**30:.3g} GiB (a quarter of the physical memory, or "
        f"scikit-learn's working_memory where larger); {accepted}. Pass a "
        "smaller n_bins, or use an exact algorithm ('auto' or 'brute')."
    )


def _plain(bins):
    """Nodes per axis as an int (the same on every axis) or a list of ints,
    for messages."""
    values = np.asarray(bins).tolist()
    if isinstance(values, list) and len(set(values)) == 1:
        return values[0]
    return values
