"""Leave-one-out and K-fold scores of many widths on the binned path.

:class:`BinnedHeldOut` answers what ``KernelAttentionRegressorCV`` asks of
:class:`._pool.HeldOut` for one or two continuous features: the rows are
binned once onto a grid spanning the keys (:mod:`.._binned._binning`), resolved for
the smallest candidate width (:func:`.._binned._grid.default_bins`; its memory
checked by :func:`.._binned._grid.plan_grid`), and each
candidate (kernel, width) costs one FFT convolution of those grid sums with
its stencils (:func:`.._binned._engine.convolve`), interpolated to the held-out keys.
The rows' cells and interpolation shares on that fixed grid, and the
products of each row's own shares that its self-term needs, are computed
once (:class:`.._binned._binning.Cells`): a candidate costs its convolution, one
gather per corner and column, and the self-terms as a small matrix product.

Leave-one-out. Interpolated at key ``i``, the convolved sums hold ``i``'s
own binned contribution: its column ``c_i`` (weight, weighted values...)
spread over the nodes ``b`` of its cell with the linear-binning shares
``s_b``, convolved and read back with the same shares:
``c_i * sum_{a, b} s_a s_b K_p((g_b - g_a) / h)``, where ``K_p`` is the
stencil of power ``p`` (the kernel times ``u**p``). This is subtracted
exactly, so that the held-out sums are the binned sums of the other keys;
they differ from the exact leave-one-out sums by the binning error of those
keys alone (the error of the binned fit, below 1e-3 of the scale of ``y``
for a width of 40 nodes). The subtracted self-term is not ``K(0) w_i``: it
is between ``K(step / h) w_i`` and ``K(0) w_i``, the kernel smoothed by
binning, which is what the binned sums hold.

K-fold. The training grid is the total grid minus the grid of the fold's
rows when the training part is the rest of the data, else the training
rows binned; one convolution per candidate and split.

The safeguard of the local-linear fits reads Kish's ratio of each held-out
fit (:mod:`.._engine._safeguard`) from the binned sums of the squared
weights (:mod:`.._binned._engine`), held out as the other sums are: the
squared weights are one more binned column (the total grid minus a fold's),
convolved with the squared kernel, and a key's own term,
``w_i**2 sum_{a, b} s_a s_b K((g_b - g_a) / h)**2``, is subtracted under
leave-one-out. A held-out sum of squares at most ``MIN_SQUARES`` of the
total of the squared weights leaves the fit to the exact engine, as the
fitted estimator does.
"""

import copy

import numpy as np
from scipy.spatial import cKDTree

from .._binned._binning import Cells
from .._binned._engine import (
    MAX_EXTRAPOLATION,
    MIN_SQUARES,
    MIN_VARIANCE,
    MIN_WEIGHT,
    BinnedEngine,
    binned_columns,
    engine_sizes,
    powers,
    sum_pairs,
    truncation_radius,
)
from .._binned._estimates import binned_kish, estimates
from .._binned._grid import plan_grid, warn_coarse_search
from .._engine._local_linear import MomentLayout
from .._utils._working_memory import row_batches
from ._base import HeldOutPoints, HeldOutSums
from ._fits import solve_moments
from ._pool import HeldOut


class _Pending:
    """The sums of one held-out layout, computed when first asked."""

    def __init__(self, groups=None, rows=None, train=None):
        self.groups, self.rows, self.train = groups, rows, train
        self.cache = None


class BinnedHeldOut(HeldOutPoints):
    """Held-out predictions of every candidate from one binning.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The keys, float64, ``d`` 1 or 2.
    Y : ndarray of shape (n, n_outputs)
        Their values, float64.
    weights : ndarray of shape (n,)
        Non-negative sample weights.
    kernels : list of Kernel
    bandwidths : ndarray of shape (n_bandwidths,)
        The isotropic widths of the candidates.
    degree : {0, 1}
        The largest degree scored; degree 0 comes from the same sums.
    """

    # The grid sums of a split are those of all the rows less the held-out
    # rows' where they are the rest of them: blocks would bin the training
    # rows once each.
    rows_apart = False

    def __init__(self, X, Y, weights, kernels, bandwidths, degree=0):
        super().__init__(X, Y, weights, kernels, bandwidths, degree)
        d = X.shape[1]
        lower, upper = X.min(axis=0), X.max(axis=0)
        span = np.where(upper > lower, upper - lower, 1.0)
        # A margin of rounding, so that the last key lies inside the grid.
        lower, upper = lower - 1e-9 * span, upper + 1e-9 * span
        p = Y.shape[1]
        n_columns, n_stencils, n_sums = engine_sizes(d, p, degree, squares=False)
        radius = max(truncation_radius(kernel) for kernel in self.kernels)
        self.grid = plan_grid(
            lower,
            upper,
            self.bandwidths.min(),
            upper - lower,
            None,
            reach=np.full(d, radius * self.bandwidths.max()),
            # The total grid sums and those of a fold or a training part.
            sizes=(2 * n_columns, n_stencils, n_sums),
        )
        warn_coarse_search(self.grid, self.bandwidths)
        self.exponents = powers(d, degree)
        self.center = self.weights @ Y / self.weights.sum()
        self.columns = binned_columns(
            Y, self.weights, self.center, squares=False, weight_squares=degree == 1
        )
        # The geometry of the rows on the grid, shared by every candidate.
        self.cells = Cells(self.grid, X)
        self.total = self.cells.bin(self.columns)
        self._columns_t = np.ascontiguousarray(self.columns.T)
        self._pair_shares = None
        self._exact_engines = {}
        self._tree = None

    # -- the layouts of HeldOut -------------------------------------------
    def sums_excluding_groups(self, groups):
        return _Pending(groups=groups)

    def sums_split(self, rows, train):
        return _Pending(rows=rows, train=train)

    def predictions(self, sums, rows, groups=None, train=None, degree=None):
        """``(predictions, empty, singular, deficient, shrunk)`` as
        :meth:`._pool.HeldOut.predictions` returns them, of shape
        (n_kernels, n_bandwidths, n_rows, ...); ``singular`` marks the
        degree-1 fits whose local covariance of the scaled keys is nearly
        singular (see :data:`.._binned._engine.MIN_VARIANCE`), which get the local
        mean; ``deficient`` is all False; ``shrunk`` marks the slopes that
        the safeguard of :mod:`.._engine._local_linear` shrank."""
        degree = self.degree if degree is None else degree
        if sums.cache is None:
            sums.cache = self._compute(sums)
        return sums.cache[degree]

    def _compute(self, pending):
        n = self.X.shape[0]
        # The layout of the exact engine, for the doubtful degree-1 rows.
        exact = (pending.groups, pending.train)
        if pending.train is None and pending.groups is None:
            layouts = [(slice(None), self.total, True)]
        elif pending.train is None:
            layouts = []
            for g in np.unique(pending.groups):
                rows = np.flatnonzero(pending.groups == g)
                held = self.cells.take(rows).bin(self.columns[rows])
                layouts.append((rows, self.total - held, False))
        else:
            rows, train = pending.rows, pending.train
            rest = len(train) + len(rows) == n and not np.intersect1d(train, rows).size
            if rest:
                held = self.cells.take(rows).bin(self.columns[rows])
                grid_sums = self.total - held
            else:
                grid_sums = self.cells.take(train).bin(self.columns[train])
            layouts = [(slice(None), grid_sums, False)]
        n_rows = n if pending.rows is None else len(pending.rows)
        cells = self.cells if pending.rows is None else self.cells.take(pending.rows)
        layouts = [
            (
                rows,
                grid_sums,
                own,
                cells if isinstance(rows, slice) else cells.take(rows),
            )
            for rows, grid_sums, own in layouts
        ]
        shape = (len(self.kernels), len(self.bandwidths), n_rows)
        p = self.Y.shape[1]
        out = {}
        for d in range(self.degree + 1):
            out[d] = (
                np.empty(shape + (p,)),
                *(np.zeros(shape, dtype=bool) for _ in range(4)),
            )
        for k, kernel in enumerate(self.kernels):
            for m, h in enumerate(self.bandwidths):
                for rows, grid_sums, own, at in layouts:
                    self._candidate(out, (k, m), kernel, h, grid_sums, rows, at, own)
                self._exact_doubtful(out, (k, m), kernel, h, pending, exact)
        return out

    def _candidate(self, out, index, kernel, h, grid_sums, rows, cells, own):
        """Held-out fits of one candidate at the rows ``rows`` (their
        ``cells``), from the sums of :meth:`_held_out_sums`."""
        sums, squares = self._held_out_sums(kernel, h, grid_sums, cells, own)
        # A held-out weight at most MIN_WEIGHT of the total counts as none.
        weight = sums[:, -1]
        weight[~(weight > MIN_WEIGHT * float(grid_sums[..., 0].sum()))] = 0.0
        p = self.Y.shape[1]
        start = len(self.exponents) - 1  # the values follow the key moments
        local_mean, empty = solve_moments(sums[:, np.r_[start : start + p, -1]])
        local_mean += self.center
        k, m = index
        predictions, flag, *_ = out[0]
        predictions[k, m][rows] = local_mean
        flag[k, m][rows] = empty
        if self.degree == 1:
            kish, thin = binned_kish(
                squares,
                weight,
                kernel,
                MIN_SQUARES * float(grid_sums[..., -1].sum()),
            )
            ratio = float(((self.grid.step / h) ** 2).max())
            mean, _, bad, s = estimates(
                sums,
                empty | thin,
                MomentLayout(self.X.shape[1], p, 1),
                1,
                MIN_VARIANCE + 4 * ratio,
                max_extrapolation=MAX_EXTRAPOLATION,
                return_shrinkage=True,
                kish=kish,
            )
            singular = bad & ~empty
            mean = mean + self.center
            mean[singular] = local_mean[singular]
            predictions, flag, single, _, shrunk = out[1]
            predictions[k, m][rows] = mean
            flag[k, m][rows] = empty
            single[k, m][rows] = singular
            shrunk[k, m][rows] = ~bad & (s < 1.0)

    def _held_out_sums(self, kernel, h, grid_sums, cells, own):
        """The held-out kernel sums of one candidate at the rows of
        ``cells``, from one convolution of ``grid_sums``; with ``own``
        minus each row's own binned contribution.

        Returns ``(sums, squares)``: the sums (rows, columns), in the layout
        of :func:`.._binned._engine.sum_pairs` (the weight last), and for
        ``degree=1`` the sums of the squared weights (else None).
        """
        bandwidth = np.full(self.X.shape[1], h)
        engine = BinnedEngine(
            self.grid,
            grid_sums,
            kernel,
            bandwidth,
            self.degree,
            self.center,
            self.Y.shape[1],
        )
        sums = cells.gather(engine.convolved)  # (columns, rows)
        if own:
            factors = self._self_terms(kernel, bandwidth)
            scratch = np.empty(sums.shape[1])
            for i, (c, s) in enumerate(self._pairs()):
                sums[i] -= np.multiply(self._columns_t[c], factors[s], out=scratch)
        sums = sums.T
        if self.degree == 1:
            # The squared weights' sums follow the weight's.
            return sums[:, :-1], sums[:, -1]
        return sums, None

    def _self_terms(self, kernel, bandwidth):
        """:func:`self_terms` of every key, from its shares computed once;
        for ``degree=1`` that of the squared kernel last."""
        if self._pair_shares is None:
            self._pair_shares = self.cells.pair_shares()
        offsets, shares = self._pair_shares
        matrix = self_term_matrix(
            offsets,
            self.grid,
            kernel,
            bandwidth,
            self.exponents,
            squared=self.degree == 1,
        )
        return matrix @ shares

    def _exact_doubtful(self, out, index, kernel, h, pending, layout):
        """The exact held-out fits of the rows the binned sums leave
        undecided, as the fitted binned estimator computes its doubtful
        queries exactly: those with a held-out binned weight at most
        ``MIN_WEIGHT`` of the total (an unbounded kernel truncated at
        ``TAIL``, or a compact one whose nearest keys the binning moved out
        of its support) and, for degree 1, those with a nearly singular
        binned local design. Rows that no other key reaches under a compact
        kernel are empty for the exact engine too and are left as they are.
        """
        k, m = index
        doubtful = out[0][1][k, m].copy()
        if self.degree == 1:
            doubtful |= out[1][2][k, m]
        redo = np.flatnonzero(doubtful)
        if not len(redo):
            return
        rows = np.arange(len(self.X)) if pending.rows is None else pending.rows
        if kernel.is_compact:
            reached = self._reached(rows[redo], kernel, h)
            for predictions, empty, *flags in out.values():
                # No other key within the support: empty for the exact engine.
                predictions[k, m][redo[~reached]] = np.nan
                empty[k, m][redo[~reached]] = True
                for flag in flags:
                    flag[k, m][redo[~reached]] = False
            redo = redo[reached]
            if not len(redo):
                return
        held = self._exact_engine(kernel, h)
        groups, train = layout
        n = len(self.X)
        if train is not None:
            allowed_keys = np.zeros(n, dtype=bool)
            allowed_keys[train] = True
        for batch in row_batches(len(redo), 32 * n):
            at = redo[batch]
            points = rows[at]
            diff = self.X_raw[points][:, None, :] - self.X_raw[None, :, :]
            weights = kernel.function(np.sqrt(np.einsum("rkj,rkj->rk", diff, diff)) / h)
            del diff
            if train is not None:
                weights[:, ~allowed_keys] = 0.0
            elif groups is not None:
                weights[groups[points][:, None] == groups[None, :]] = 0.0
            else:
                weights[np.arange(len(points)), points] = 0.0
            sums = self._exact_sums(weights, held)
            for degree in range(self.degree + 1):
                fits = held.predictions(sums, points, groups, train, degree=degree)
                for target, value in zip(out[degree], fits, strict=True):
                    target[k, m][at] = value[0, 0]

    def _exact_sums(self, weights, held):
        """The exact held-out sums of rows of kernel ``weights`` (rows,
        keys), zero on the keys each row may not pool, as
        :meth:`._pool.HeldOut.predictions` of ``held`` takes them: a
        :class:`._base.HeldOutSums` (with the sums of the squared weights for
        degree 1)."""
        moments = (weights @ held.moments)[None, None]
        squares = None
        if self.degree == 1:
            squares = (np.square(weights) @ np.square(held.weights))[None, None]
        return HeldOutSums(moments, squares)

    def _reached(self, points, kernel, h):
        """Whether some other key of positive kernel weight lies near each
        of the keys ``points``, under the compact ``kernel`` at width ``h``."""
        if self._tree is None:
            self._tree = cKDTree(self.X_raw)
        distance, _ = self._tree.query(self.X_raw[points], k=2)
        return kernel.function(distance[:, 1] / h) > 0

    def _exact_engine(self, kernel, h):
        """The exact leave-one-out machinery of ``kernel`` at width ``h``
        (its moments and spatial order built once per kernel)."""
        held = self._exact_engines.get(kernel.name)
        if held is None:
            held = HeldOut(
                self.X_raw,
                self.Y,
                self.weights,
                [kernel],
                np.array([h]),
                degree=self.degree,
            )
            self._exact_engines[kernel.name] = held
        held = copy.copy(held)
        held.bandwidths = np.array([h])
        return held

    def _pairs(self):
        """The (binned column, stencil) of each held-out kernel sum, those
        of the squared weights last for ``degree=1``."""
        d, p = self.X.shape[1], self.Y.shape[1]
        pairs = sum_pairs(d, p, self.degree, squares=False)
        if self.degree == 1:
            pairs.append((self.columns.shape[1] - 1, len(self.exponents)))
        return pairs


def self_term_matrix(offsets, grid, kernel, bandwidth, exponents, squared=False):
    """The stencils at the node offsets ``offsets`` (k, d): an array of
    shape (len(exponents) + squared, k), ``K(|u|) prod_j u_j**p_j`` at
    ``u = offsets * step / h``, with ``squared`` ``K(|u|)**2`` last (the
    stencil of the squared weights, :func:`.._binned._engine.stencils`)."""
    u = offsets * grid.step / bandwidth
    base = kernel.function(np.sqrt(np.sum(u * u, axis=1)))
    rows = [base * np.prod(u ** np.asarray(power), axis=1) for power in exponents]
    if squared:
        rows.append(base * base)
    return np.array(rows)


def self_terms(grid, queries, kernel, bandwidth, exponents):
    """Each query's own binned contribution to its interpolated sums.

    For a key ``i`` binned with shares ``s_b`` on the nodes ``b`` of its
    cell and read back with the same shares, the stencil of power ``p``
    gives ``sum_{a, b} s_a s_b K((g_b - g_a) / h) prod_j ((g_b - g_a)_j /
    h_j)**p_j``. Returns an array of shape (n_queries, len(exponents)), to
    be multiplied by the key's binned column.
    """
    offsets, shares = Cells(grid, queries).pair_shares()
    matrix = self_term_matrix(offsets, grid, kernel, bandwidth, exponents)
    return (matrix @ shares).T
