"""The grid of the binned path: its nodes, its memory, its resolution.

Every binned fit builds its grid with :func:`plan_grid`: the estimators'
engine (:func:`._engine.fit_engine`), the map-reduce on dask arrays
(:mod:`._dask`) and the binned bandwidth search (:mod:`.._held_out._binned`).
It takes the default grid (:func:`default_bins`, whose caps
bound its size) or ``n_bins`` as given: then it counts the bytes of the
arrays the engine allocates for the grid (:func:`grid_bytes`: the binned
sums, the stencils, the FFT spectra and the convolved sums) and refuses,
before any of them is allocated, a grid larger than :func:`memory_limit`.
:func:`nodes_per_width` says how finely a grid resolves a width: below
``MIN_NODES_PER_WIDTH`` nodes, ``algorithm="auto"`` takes an exact path
(:func:`._pool.prefers_binned`); below ``COARSE_NODES_PER_WIDTH``, a
grid is warned of (:func:`warn_coarse_fit`,
:func:`warn_coarse_search`).
"""

import math

import numpy as np
from scipy import fft

from .._engine import _weight_rows as _weights
from .._utils._warn import describe, warn
from .._utils._warnings import CoarseGridWarning
from .._utils._working_memory import working_memory_bytes
from ._binning import make_grid

# The fewest grid nodes per width with which the binned path resolves it:
# the rule of algorithm="auto" (:func:`._pool.prefers_binned`).
MIN_NODES_PER_WIDTH = 16
# Fewer nodes per width than this on a default grid are warned of
# (CoarseGridWarning). Half the rule of "auto": at 8 nodes the error of
# local-linear fits was 3e-3 to 4e-3 of std(y) (gaussian, epanechnikov,
# exponential, triweight; 1-D smooth data, width 1/25 of the range), at 4
# nodes up to 1e-2, and it grows as the square of the spacing; while the
# capped 2-D default grid of the exponential and laplacian kernels, whose
# stencils reach 27.6 widths, holds 12.7 nodes per width at 1/25 of the
# range and keeps its error below 1e-3 (tests/test_binned.py).
COARSE_NODES_PER_WIDTH = 8
# A grid may use this fraction of the physical memory (as the held-out sums
# of the searches, :mod:`.._cv`), or scikit-learn's working_memory where
# that is larger.
PHYSICAL_FRACTION = 0.25

# Default grid: nodes per bandwidth, nodes over the extent of the keys, and
# the largest grid per dimension. The binned estimate is about the exact one
# with the kernel widened by the binning and the interpolation: the error of
# the kernel's shape falls as (step / h)**2, that of the curvature of y as
# step**2 whatever the width. 40 nodes per width alone let the error grow
# with the width (1-D, 2e5 smooth keys, degree 1, compact kernels: 1.1e-3 of
# std(y) at width 1/10 of the range, 2.7e-3 at 1/4, 7.8e-3 at the range); a
# spacing of at most 1/1000 of the keys' extent (40 nodes per width at 1/25
# of the range, the narrowest width of the promise) kept every kernel at
# degree 0 and 1 below 2.6e-4 at every width from 1/25 up. In 2-D, 400 (the
# grid is capped at 1024): 2.7e-3 at width 1/4 fell to 6.4e-4, and the grids
# of widths up to 1/10 of the range, the binned searches' cost, are as before.
BINS_PER_WIDTH = {1: 40, 2: 40}
BINS_PER_RANGE = {1: 1000, 2: 400}
MAX_BINS = {1: 2**17, 2: 1024}
MIN_BINS = 64


def default_bins(span, bandwidth, n_features, key_span):
    """Nodes per axis over ``span``: a spacing of at most 1/``BINS_PER_WIDTH``
    of the bandwidth and 1/``BINS_PER_RANGE`` of the extent ``key_span`` of
    the keys (where positive), within ``[MIN_BINS, MAX_BINS]``."""
    step = np.asarray(bandwidth, dtype=np.float64) / BINS_PER_WIDTH[n_features]
    key_span = np.asarray(key_span, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        fine = np.where(key_span > 0, key_span / BINS_PER_RANGE[n_features], np.inf)
        bins = np.ceil(np.asarray(span) / np.minimum(step, fine)) + 1
    return np.clip(bins, MIN_BINS, MAX_BINS[n_features]).astype(np.int64)


def grid_nodes(span, bandwidth, key_span, n_bins):
    """Nodes per axis: ``n_bins`` as given (an int array of shape (d,)),
    or, when None, :func:`default_bins` of the ``span`` of the
    grid, the ``bandwidth`` it resolves and the extent of the keys."""
    span = np.asarray(span, dtype=np.float64)
    if n_bins is None:
        return default_bins(span, bandwidth, len(span), key_span)
    return np.broadcast_to(np.asarray(n_bins, dtype=np.int64), span.shape)


def nodes_per_width(span, bins, bandwidth):
    """The fewest grid nodes per ``bandwidth`` over the axes of a grid of
    ``bins`` nodes spanning ``span``."""
    span = np.asarray(span, dtype=np.float64)
    step = np.where(span > 0, span, 1.0) / (np.asarray(bins) - 1)
    return float(np.min(np.asarray(bandwidth, dtype=np.float64) / step))


def warn_coarse_fit(grid, kernel, bandwidth, given):
    """Warn (:class:`CoarseGridWarning`) where the ``grid`` of a fit
    resolves ``bandwidth`` with fewer than ``COARSE_NODES_PER_WIDTH``
    nodes; ``given``: whether its nodes are the caller's ``n_bins`` rather
    than the default grid's."""
    span = grid.upper - grid.lower
    per_width = nodes_per_width(span, grid.shape, bandwidth)
    if per_width >= COARSE_NODES_PER_WIDTH:
        return
    width = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), span.shape)
    needed = np.ceil(MIN_NODES_PER_WIDTH * span / width).astype(np.int64) + 1
    if given:
        grid_text = f"n_bins={_plain(grid.shape)} spaces its nodes over {_spans(grid)}"
        remedies = "or use algorithm='brute' or 'auto'."
    else:
        grid_text = (
            f"the default grid (n_bins=None) is capped at {_cap(grid)} nodes "
            f"per feature, and it spans {_spans(grid)}"
        )
        remedies = (
            "take out the outlying keys, or use algorithm='brute' ('auto' "
            "takes an exact path here)."
        )
    warn(
        CoarseGridWarning(
            f"algorithm='binned' resolves {describe(kernel, bandwidth)} with "
            f"{per_width:.3g} nodes per width, fewer than {COARSE_NODES_PER_WIDTH}: "
            f"{grid_text}. The binned sums blur the kernel over the spacing "
            "of the grid, and the predictions can be far from the exact ones "
            "(the mean of y everywhere, at worst). Pass a larger n_bins "
            f"(n_bins={_plain(needed)} gives {MIN_NODES_PER_WIDTH} nodes per "
            f"width, memory permitting), {remedies}",
            nodes_per_width=per_width,
            n_bins=tuple(int(m) for m in grid.shape),
        )
    )


def warn_coarse_search(grid, bandwidths):
    """Warn (:class:`CoarseGridWarning`) where the grid of a binned
    search resolves some of its candidate ``bandwidths`` with fewer than
    ``COARSE_NODES_PER_WIDTH`` nodes."""
    span = grid.upper - grid.lower
    per_width = [nodes_per_width(span, grid.shape, h) for h in bandwidths]
    coarse = [
        float(h)
        for h, n in zip(bandwidths, per_width, strict=True)
        if n < COARSE_NODES_PER_WIDTH
    ]
    if not coarse:
        return
    shown = ", ".join(f"{h:.6g}" for h in coarse[:6]) + (
        ", ..." if len(coarse) > 6 else ""
    )
    warn(
        CoarseGridWarning(
            f"algorithm='binned' scores the bandwidths [{shown}] on a grid that "
            f"resolves them with fewer than {COARSE_NODES_PER_WIDTH} nodes per "
            f"width: its n_bins is capped at {_cap(grid)} nodes per feature, "
            f"and it spans {_spans(grid)}. Their scores carry a large binning "
            "error and may not tell the widths apart. Take out the outlying "
            "keys, or use algorithm='auto' (which scores on the exact paths "
            "here) or 'brute'.",
            nodes_per_width=min(per_width),
            n_bins=tuple(int(m) for m in grid.shape),
        )
    )


def _cap(grid):
    return MAX_BINS[len(grid.shape)]


def _spans(grid):
    """``"[lower, upper]"`` per feature, for messages."""
    return " x ".join(
        f"[{a:.6g}, {b:.6g}]" for a, b in zip(grid.lower, grid.upper, strict=True)
    )


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


def plan_grid(lower, upper, bandwidth, key_span, n_bins, *, reach, sizes):
    """The :class:`._binning.Grid` of a binned fit, its memory checked.

    Parameters
    ----------
    lower, upper : ndarray of shape (d,)
        The span of the grid.
    bandwidth : float or ndarray of shape (d,)
        The width the default grid resolves (the smallest candidate's in a
        search).
    key_span : ndarray of shape (d,)
        The extent of the keys, which the default grid divides finely too
        (:func:`default_bins`).
    n_bins : ndarray of int, shape (d,), or None
        The nodes per axis as given (validated by
        :func:`._pool.check_n_bins`), or None for the default grid.
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
    bins = grid_nodes(span, bandwidth, key_span, n_bins)
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
