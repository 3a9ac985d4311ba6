"""The binned engine: kernel sums on a grid by one FFT convolution.

For one or two continuous features, the sums the engine needs at a query
``q`` (``sum_i w_i alpha(u_i) u_i**p`` and the same times ``y_i``, with
``u_i = (k_i - q) / h``) are computed as in R's KernSmooth (Wand 1994, "Fast
computation of multivariate kernel estimators"; ``locpoly``): the weights,
the weighted values and their squares are linearly binned onto a regular
grid (:mod:`._binning`), convolved with the kernel sampled on the grid's
offsets times the powers ``u**p`` (:func:`stencils`, :func:`convolve`), and
the convolved sums are interpolated linearly to the queries
(:func:`interpolate`). The local-constant and local-linear estimates are
then solved at each query from its interpolated sums.

The safeguard of ``degree=1`` (:mod:`.._engine._safeguard`) also reads
``sum_i a_i**2``, ``a_i = w_i alpha(u_i)``, Kish's effective number of keys
of each query with the weight sum. Its grid is one more binned column, the
squared weights ``w**2`` linearly binned as the weights are, convolved with
the squared kernel ``alpha**2`` sampled on the same offsets
(:func:`stencils` with ``squared``) and interpolated to the queries with the
other sums: ``sum_i w_i**2 sum_b s_ib alpha(u_b)**2``, with ``s_ib`` the
shares of key ``i`` on the nodes ``b`` of its cell, which differs from
``sum_i w_i**2 alpha(u_i)**2`` by the error of linear interpolation of
``alpha**2`` between nodes, of the order of ``(step / h)**2`` as the error
of the other sums. (Squaring the binned weights instead would count the
keys of a node as one.) Linear binning of ``w**2`` is additive in the rows
as that of ``w`` is, so that the grid of partitions of the rows sums up.

A :class:`BinnedEngine` holds the grid sums after the convolution and
nothing of the rows: :meth:`BinnedEngine.from_grid_sums` builds one from
binned sums computed elsewhere (summed over partitions, for instance).
"""

import numpy as np
from scipy import fft

from .._engine._local_linear import MomentLayout
from .._utils._sparse import dense_rows
from ._binning import Cells, linear_bin
from ._estimates import binned_kish, estimates
from ._grid import plan_grid
from ._queries import QueryChunk, chunk_rows

# Unbounded kernels are sampled up to the scaled distance where they fall
# below this fraction of their peak: 7.43 bandwidths for the gaussian, 27.6
# for the exponential and the laplacian.
TAIL = 1e-12
# The cauchy kernel falls below TAIL only at 1e6 bandwidths: its stencil
# instead covers the whole grid (every key-to-node offset), which is exact up
# to binning; the grid then spans the keys plus this many bandwidths.
CAUCHY_MARGIN = 8.0
# A query is left to the exact engine when its interpolated weight sum is at
# most this fraction of the total weight (no key near it; FFT rounding is
# about 1e-16 of the total), or, for degree=1, when its interpolated sum of
# squared weights is at most MIN_SQUARES of the total of the squared weights
# (the FFT's rounding, about 1e-16 of that total, would leave Kish's n_eff
# less precise than 1e-4, above the FFT's error of the other sums; measured,
# 2e-5 at most at MIN_SQUARES, 6e-4 at 1e-14), or when the smallest eigenvalue
# of its local covariance of the scaled keys is below
# ``MIN_VARIANCE + 4 max_j (step_j / h_j)**2`` (linear binning alone spreads
# one key over a variance of up to (step / h)**2 / 4).
MIN_WEIGHT = 1e-9
MIN_SQUARES = 1e-12
MIN_VARIANCE = 1e-3
# Bandwidth selection also leaves to the exact engine the held-out
# local-linear fits that extrapolate: those whose key lies more than
# sqrt(MAX_EXTRAPOLATION) local standard deviations from the local weighted
# mean of the other keys (m' C^-1 m above it, with m the mean and C the
# covariance of the scaled keys). The fit multiplies the binning error of
# the tail weights by about 1 + m' C^-1 m; m' C^-1 m is at most 3 at the
# boundary of dense data (half-gaussian 1.8, half-epanechnikov 2.4,
# half-boxcar 3) and reaches hundreds at keys isolated in a sparse tail
# (Engel's largest incomes).
MAX_EXTRAPOLATION = 4.0


def truncation_radius(kernel):
    """The scaled distance beyond which ``kernel`` is taken as zero.

    The support radius of a compact kernel; for an unbounded one, where it
    falls below ``TAIL`` of its peak; ``numpy.inf`` for the cauchy kernel
    (whose stencil spans the grid) and for the constant kernel (which needs
    no grid: its estimate is the global weighted mean).
    """
    if kernel.is_compact:
        return float(kernel.support)
    if kernel.name in ("cauchy", "constant"):
        return np.inf
    if kernel.name not in _RADII:
        _RADII[kernel.name] = _tail_radius(kernel)
    return _RADII[kernel.name]


_RADII = {}


def _tail_radius(kernel):
    """Where the decreasing unbounded ``kernel`` falls below ``TAIL``."""
    # Every built-in unbounded kernel decreases: bisect alpha(x) = TAIL.
    lo, hi = 0.0, 1.0
    while kernel.function(hi) > TAIL:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kernel.function(mid) > TAIL else (lo, mid)
    return hi


def powers(n_features, degree):
    """The exponents of the local moments: ``[(0,)]`` (degree 0), or the
    monomials of degree at most 2 (degree 1), first the constant, then the
    linear ones, then the quadratic ones."""
    d = n_features
    out = [(0,) * d]
    if degree == 1:
        eye = np.eye(d, dtype=int)
        out += [tuple(e) for e in eye]
        out += [tuple(eye[i] + eye[j]) for i in range(d) for j in range(i, d)]
    return out


def stencils(grid, kernel, bandwidth, exponents, radius, squared=False):
    """The kernel sampled on the grid's offsets times ``(-offset / h)**p``.

    Parameters
    ----------
    grid : Grid
    kernel : Kernel
    bandwidth : ndarray of shape (d,)
    exponents : list of tuple of int
        The powers ``p`` (one per axis) of each stencil.
    radius : float
        The truncation radius in bandwidths (:func:`truncation_radius`);
        the stencil stops at it or at the size of the grid.
    squared : bool, default=False
        Whether to add, last, the squared kernel ``alpha**2`` (for the sums
        of the squared weights).

    Returns
    -------
    stencils : ndarray of shape (2 L_1 + 1, ..., len(exponents) + squared)
        ``alpha(|o step / h|) * prod_j (-o_j step_j / h_j)**p_j`` at the
        offsets ``o``: convolved with binned sums at node ``m``, it gives
        ``sum_k W_k alpha(u_k) u_k**p`` with ``u_k = (g_k - g_m) / h``.
    """
    shape = np.asarray(grid.shape)
    half = np.minimum(np.ceil(radius * bandwidth / grid.step), shape - 1)
    axes = [
        -np.arange(-h, h + 1) * s / b
        for h, s, b in zip(half.astype(int), grid.step, bandwidth, strict=True)
    ]
    u = np.meshgrid(*axes, indexing="ij")
    distance = np.sqrt(sum(a * a for a in u))
    base = kernel.function(distance)
    out = np.empty(base.shape + (len(exponents) + squared,))
    for i, p in enumerate(exponents):
        term = base.copy()
        for a, e in zip(u, p, strict=True):
            if e:
                term *= a**e
        out[..., i] = term
    if squared:
        np.square(base, out=out[..., -1])
    return out


def convolve(binned, stencil_array, pairs):
    """FFT convolutions of binned columns with stencils, same shape as grid.

    ``pairs`` lists ``(column, stencil)`` indices; returns an array of
    shape grid.shape + (len(pairs),). Uses ``scipy.fft`` on a padded grid
    (linear, not circular, convolution).
    """
    d = binned.ndim - 1
    grid_shape = binned.shape[:d]
    half = [(s - 1) // 2 for s in stencil_array.shape[:d]]
    full = [
        fft.next_fast_len(g + 2 * h, real=True)
        for g, h in zip(grid_shape, half, strict=True)
    ]
    axes = tuple(range(d))
    columns = sorted({c for c, _ in pairs})
    kernels = sorted({s for _, s in pairs})
    fb = {c: fft.rfftn(binned[..., c], full, axes=axes) for c in columns}
    fs = {s: fft.rfftn(stencil_array[..., s], full, axes=axes) for s in kernels}
    out = np.empty(grid_shape + (len(pairs),))
    window = tuple(slice(h, h + g) for h, g in zip(half, grid_shape, strict=True))
    for i, (c, s) in enumerate(pairs):
        out[..., i] = fft.irfftn(fb[c] * fs[s], full, axes=axes)[window]
    return out


def interpolate(grid, arrays, Q, columns=None):
    """Linear (bilinear) interpolation of grid arrays to the queries ``Q``.

    Returns ``(values, inside)``: values of shape (n_queries, c), or
    (n_queries, len(columns)) for the columns ``columns`` only (those of the
    nearest cell, extrapolated, for queries outside the grid) and a boolean
    mask of the queries inside it.
    """
    cells = Cells(grid, Q)
    return cells.gather(arrays, columns).T, cells.inside


def sum_pairs(n_features, n_outputs, degree, squares):
    """The ``(binned column, stencil)`` of each convolved kernel sum.

    The sums come in the column layout of the shared layer (:mod:`.._engine._protocol`)
    for moments about the query (keys ``u = (k - q) / h``, queries at the
    origin): ``[y, 1]`` (``pool_matrix``), with ``squares`` ``[y, y**2, 1]``
    (``spread_matrix``), for degree 0; ``[u, upper(u u^T), y, u y, (y**2),
    1]`` (:func:`.._engine._local_linear.moment_matrix`) for degree 1. Binned column
    0 is the weight, ``1 + j`` the centred weighted value ``j`` and
    ``1 + p + j`` its square; stencil ``e`` the power ``powers(d, degree)[e]``.
    """
    d, p = n_features, n_outputs
    n_e = len(powers(d, degree))
    pairs = [(0, e) for e in range(1, n_e)]
    pairs += [(1 + j, 0) for j in range(p)]
    if degree == 1:
        pairs += [(1 + j, 1 + f) for f in range(d) for j in range(p)]
    if squares:
        pairs += [(1 + p + j, 0) for j in range(p)]
    return pairs + [(0, 0)]


class BinnedEngine:
    """Convolved grid sums of one binned fit: the kernel sums of the queries.

    Build it with :meth:`fit` (from the rows) or :meth:`from_grid_sums`
    (from binned sums, e.g. summed over partitions). It holds the grid, the
    convolved sums and the weighted mean of the values; never the rows.
    :meth:`kernel_sums` interpolates the convolved sums to queries, in the
    layout of the shared layer (:func:`sum_pairs`); :meth:`predict` turns
    them into estimates with the shared normalisation, spread and
    local-linear solve (:func:`estimates`).

    Binned columns, in order: the weight ``w``, the centred weighted values
    ``w (y - center)`` (``n_outputs`` columns), optionally, for
    ``return_std``, ``w (y - center)**2`` (``n_outputs`` more) and, with
    ``weight_squares`` (which ``degree=1`` needs), the squared weight
    ``w**2`` last. :func:`binned_columns` forms them.
    """

    def __init__(
        self,
        grid,
        sums,
        kernel,
        bandwidth,
        degree,
        center,
        n_outputs,
        weight_squares=None,
    ):
        self.grid = grid
        self.kernel = kernel
        self.bandwidth = np.asarray(bandwidth, dtype=np.float64)
        self.degree = degree
        self.center = center
        self.n_outputs = n_outputs
        self.n_features = len(grid.shape)
        self.exponents = powers(self.n_features, degree)
        p = n_outputs
        # The squared weights are binned, and convolved, for degree 1 only.
        weight_squares = degree == 1 if weight_squares is None else weight_squares
        self.has_squares = sums.shape[-1] - weight_squares == 1 + 2 * p
        self.has_weight_squares = bool(weight_squares) and degree == 1
        self.layout = MomentLayout(self.n_features, p, 1)
        pairs = sum_pairs(self.n_features, p, degree, self.has_squares)
        # Without return_std, the sums but those of the squares.
        self.plain = np.arange(len(pairs))
        if self.has_squares:
            self.plain = np.r_[self.plain[: -1 - p], len(pairs) - 1]
        if self.has_weight_squares:
            # The sums of the squared weights, after the total.
            self.squares_column = len(pairs)
            pairs.append((sums.shape[-1] - 1, len(self.exponents)))
            self.total_squares = float(sums[..., -1].sum())
        radius = truncation_radius(kernel)
        stencil_array = stencils(
            grid,
            kernel,
            self.bandwidth,
            self.exponents,
            radius,
            squared=self.has_weight_squares,
        )
        self.total = float(sums[..., 0].sum())
        self.convolved = convolve(sums, stencil_array, pairs)
        ratio = (self.grid.step / self.bandwidth) ** 2
        self.min_variance = MIN_VARIANCE + 4 * float(ratio.max())

    @classmethod
    def from_grid_sums(
        cls, grid, sums, kernel, bandwidth, degree, center, weight_squares=None
    ):
        """The engine of binned sums of shape grid.shape + (c,), in the
        columns of :func:`binned_columns` (``weight_squares`` None: those
        of ``degree``); ``center`` of shape (p,)."""
        n_outputs = len(np.atleast_1d(center))
        return cls(
            grid, sums, kernel, bandwidth, degree, center, n_outputs, weight_squares
        )

    def kernel_sums(self, Q, return_std=False, return_squares=False):
        """The kernel sums of the queries ``Q`` (n, d), and which are inside.

        Returns ``(sums, inside)``: the convolved sums interpolated to each
        query, in the layout of :func:`sum_pairs` (the squares only with
        ``return_std``), the total weight last; and the mask of the queries
        inside the grid (the others get the sums of their nearest cell).
        With ``return_squares`` (``degree=1``), ``(sums, inside, squares)``:
        ``squares`` the interpolated sums of the squared weights
        ``sum_i w_i**2 alpha(u_i)**2``, binned (see the module docstring).
        """
        if return_std and not self.has_squares:
            raise ValueError("This binned engine was built without the squares.")
        if return_squares and not self.has_weight_squares:
            raise ValueError(
                "This binned engine was built without the squared weights."
            )
        columns = self.plain if self.has_squares and not return_std else None
        if return_squares:
            n_sums = len(self.plain) + (self.n_outputs if return_std else 0)
            columns = np.r_[
                np.arange(n_sums) if columns is None else columns, self.squares_column
            ]
        elif columns is None and self.has_weight_squares:
            columns = np.arange(self.squares_column)
        values, inside = interpolate(self.grid, self.convolved, Q, columns)
        if return_squares:
            return values[:, :-1], inside, values[:, -1]
        return values, inside

    def predict_chunks(self, Q, return_std=False):
        """The estimates of the queries ``Q`` (n, d), dense or sparse, a
        :class:`._queries.QueryChunk` at a time, each chunk within
        scikit-learn's ``working_memory`` (:func:`._queries.chunk_rows`).

        A chunk's ``doubtful`` queries are those outside the grid, with an
        interpolated weight sum at most ``MIN_WEIGHT`` of the total, or
        (degree 1) with an interpolated sum of squared weights at most
        ``MIN_SQUARES`` of their total or a nearly singular local
        covariance: their estimates are NaN, for the caller to compute
        exactly or to apply the empty-neighbourhood policy to.
        """
        squares = self.degree == 1
        n_sums = len(self.plain) + (self.n_outputs if return_std else 0) + squares
        n = Q.shape[0]
        rows = chunk_rows(self.n_features, n_sums, self.degree)
        for start in range(0, n, rows):
            batch = slice(start, min(n, start + rows))
            # Nothing of a chunk stays here while the next one is computed.
            yield self._estimate_chunk(Q, batch, return_std)

    def _estimate_chunk(self, Q, batch, return_std):
        """The :class:`._queries.QueryChunk` of the queries ``Q[batch]``."""
        queries = dense_rows(Q, batch)
        kish = None
        if self.degree == 1:
            sums, inside, squares = self.kernel_sums(queries, return_std, True)
            kish, thin = binned_kish(
                squares, sums[:, -1], self.kernel, MIN_SQUARES * self.total_squares
            )
        else:
            sums, inside = self.kernel_sums(queries, return_std)
        bad = ~inside | ~(sums[:, -1] > MIN_WEIGHT * self.total)
        if self.degree == 1:
            bad |= thin
        m, s, bad, shrinkage = estimates(
            sums,
            bad,
            self.layout,
            self.degree,
            self.min_variance,
            return_std,
            return_shrinkage=True,
            kish=kish,
        )
        mean = m + self.center
        mean[bad] = np.nan
        if return_std:
            s[bad] = np.nan
        return QueryChunk(batch, mean, s, bad, shrinkage)

    def predict(self, Q, return_std=False, return_shrinkage=False):
        """Estimates at the queries, and the mask of those left undecided.

        Returns ``(mean, std, doubtful)``: ``std`` None unless asked;
        ``doubtful`` marks the queries left undecided (see
        :meth:`predict_chunks`), whose estimates are NaN. With
        ``return_shrinkage`` also the safeguard's factors ``s`` of the
        local-linear slopes (ones for degree 0 and on the doubtful queries).
        The estimators predict through :func:`._queries.predict_queries`,
        which keeps no array of a row per query beside the output.
        """
        n = Q.shape[0]
        p = self.n_outputs
        mean = np.empty((n, p))
        std = np.empty((n, p)) if return_std else None
        doubtful = np.empty(n, dtype=bool)
        shrinkage = np.ones(n)
        for chunk in self.predict_chunks(Q, return_std):
            rows = chunk.rows
            mean[rows], doubtful[rows] = chunk.mean, chunk.doubtful
            shrinkage[rows] = chunk.shrinkage
            if return_std:
                std[rows] = chunk.std
            del chunk  # not held while the next one is computed
        if return_shrinkage:
            return mean, std, doubtful, shrinkage
        return mean, std, doubtful


def binned_columns(values, weights, center, squares=True, weight_squares=False):
    """``[w, w (y - center), w (y - center)**2, w**2]`` of the rows (without
    the third block unless ``squares``, without the last column unless
    ``weight_squares``), of shape (n, c), each column contiguous (the
    transpose of a C-ordered (c, n) array)."""
    n, p = values.shape
    out = np.empty((1 + (1 + squares) * p + weight_squares, n))
    out[0] = weights
    centred = out[1 : 1 + p]
    np.subtract(values.T, np.reshape(center, (p, 1)), out=centred)
    if squares:
        np.multiply(centred, centred, out=out[1 + p : 1 + 2 * p])
    out[1 : 1 + (1 + squares) * p] *= out[0]
    if weight_squares:
        np.square(out[0], out=out[-1])
    return out.T


def engine_sizes(n_features, n_outputs, degree, squares):
    """The binned columns, stencils and convolved sums of one engine, for
    :func:`._grid.grid_bytes`; ``degree=1`` adds the squared weights."""
    n_columns = 1 + (1 + squares) * n_outputs + (degree == 1)
    pairs = sum_pairs(n_features, n_outputs, degree, squares)
    extra = int(degree == 1)
    return n_columns, len(powers(n_features, degree)) + extra, len(pairs) + extra


def fit_engine(
    keys, values, weights, kernel, bandwidth, degree, n_bins=None, squares=True
):
    """Bin the rows and build their :class:`BinnedEngine`.

    ``keys`` (n, d) unscaled, ``values`` (n, p), ``weights`` (n,) positive;
    ``bandwidth`` a float or one per feature; ``n_bins`` None (automatic,
    :func:`._grid.default_bins`), an int or one per feature. The grid spans the
    keys plus the truncation radius (:func:`truncation_radius`; for the
    cauchy kernel ``CAUCHY_MARGIN`` bandwidths); a grid whose arrays exceed
    the memory limit is refused before they are allocated
    (:func:`._grid.plan_grid`). ``squares``: whether to bin the
    squared values too, which ``return_std`` needs; ``degree=1`` bins the
    squared weights too (:func:`binned_columns`).
    """
    keys = np.asarray(keys, dtype=np.float64)
    d = keys.shape[1]
    bandwidth = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), (d,))
    radius = truncation_radius(kernel)
    margin = CAUCHY_MARGIN if not np.isfinite(radius) else radius
    lower = keys.min(axis=0) - margin * bandwidth
    upper = keys.max(axis=0) + margin * bandwidth
    p = values.shape[1]
    grid = plan_grid(
        lower,
        upper,
        bandwidth,
        np.ptp(keys, axis=0),
        n_bins,
        reach=radius * bandwidth,
        sizes=engine_sizes(d, p, degree, squares),
    )
    weights = np.asarray(weights, dtype=np.float64)
    center = weights @ values / weights.sum()
    columns = binned_columns(values, weights, center, squares, degree == 1)
    sums = linear_bin(grid, keys, columns)
    return BinnedEngine.from_grid_sums(grid, sums, kernel, bandwidth, degree, center)
