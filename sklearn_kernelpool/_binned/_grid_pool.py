"""The fitted model of a binned fit on dask arrays: the grid sums, no rows
(:mod:`._dask`)."""

import functools

import numpy as np
from scipy.sparse import issparse
from scipy.spatial import cKDTree

from .._engine._moments import report_fits
from .._engine._pooling import report_empty, resolve_kernel
from .._utils._warn import describe
from . import _engine as _binned
from ._binning import Grid
from ._queries import predict_queries

NO_ROWS = (
    "{method} needs the training rows, and this model was fitted on a dask "
    "array with algorithm='binned': it holds the binned grid sums only, no "
    "rows. Fit on in-memory NumPy arrays to use it."
)

NO_WEIGHT_SQUARES = (
    "This model was fitted on dask arrays with degree=1 by an earlier release "
    "of sklearn_kernelpool: its binned grid sums lack the squared sample "
    "weights, from which the safeguard of the local-linear slope now reads "
    "each query's effective number of keys, and it holds no rows to bin them "
    "from. Fit it again with this release."
)


class GridPool:
    """The binned engine of a fit on dask arrays: grid sums, no rows.

    Queries the binned engine leaves undecided (see :mod:`._pool`)
    get, instead of the exact engine's answer: the local-constant estimate
    from the grid sums where a local-linear design is nearly singular, or
    its sums of squared weights are within the FFT's rounding, but keys are
    near; else the ``on_empty`` policy applied on the grid:
    ``"mean"`` the weighted mean and standard deviation of ``y``, ``"nan"``
    NaN, ``"raise"`` a ``ValueError``, and ``"nearest"`` the weighted mean
    (and spread) of the values binned onto the nearest grid node that holds
    weight, an approximation of the nearest key's value within about one
    node spacing.
    """

    algorithm = "binned"

    def __init__(
        self, grid, sums, kernel, bandwidth, degree, center, on_empty, dtype, n_rows
    ):
        self.grid = grid
        self.sums = np.asarray(sums, dtype=np.float64)
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.degree = degree
        self.center = np.asarray(center, dtype=np.float64)
        self.on_empty = on_empty
        self.dtype = np.dtype(dtype)
        self.n_samples_fit = n_rows
        self.n_outputs = len(self.center)
        self.n_bins = np.asarray(grid.shape)
        self.weight_squares = self.sums.shape[-1] == 2 + 2 * self.n_outputs
        self.binned = self._engine(degree)

    def _engine(self, degree):
        return _binned.BinnedEngine.from_grid_sums(
            self.grid,
            self.sums,
            self.kernel,
            self.bandwidth,
            degree,
            self.center,
            self.weight_squares,
        )

    @functools.cached_property
    def local_constant(self):
        return self._engine(0)

    @functools.cached_property
    def nodes(self):
        """The grid nodes holding weight, scaled by the bandwidth, in a
        k-d tree, and the mean and spread of the values binned there."""
        p = self.n_outputs
        flat = self.sums.reshape(-1, self.sums.shape[-1])
        held = np.flatnonzero(flat[:, 0] > _binned.MIN_WEIGHT * flat[:, 0].sum())
        index = np.unravel_index(held, self.grid.shape)
        coordinates = np.column_stack(
            [
                self.grid.lower[j] + self.grid.step[j] * index[j]
                for j in range(len(index))
            ]
        )
        scale = np.broadcast_to(self.bandwidth, (coordinates.shape[1],))
        weight = flat[held, :1]
        mean = flat[held, 1 : 1 + p] / weight
        square = flat[held, 1 + p : 1 + 2 * p] / weight
        spread = np.sqrt(np.maximum(square - mean**2, 0.0))
        return cKDTree(coordinates / scale), mean + self.center, spread

    def _global(self):
        flat = self.sums.reshape(-1, self.sums.shape[-1])
        total = flat[:, 0].sum()
        p = self.n_outputs
        mean = flat[:, 1 : 1 + p].sum(axis=0) / total
        variance = flat[:, 1 + p : 1 + 2 * p].sum(axis=0) / total - mean**2
        return mean + self.center, np.sqrt(np.maximum(variance, 0.0))

    def pool(self, X, n_jobs=None, return_std=False):
        """Pooled values of the queries, as
        :meth:`.._engine._pooling.KernelPool.pool`."""
        if self.degree == 1 and not self.weight_squares:
            raise ValueError(NO_WEIGHT_SQUARES)
        pooled = predict_queries(self.binned, X, self.dtype, return_std)
        mean, std, rows = pooled.mean, pooled.std, pooled.doubtful
        if self.degree == 1:
            # The designs decided on the grid have full rank; those it leaves
            # nearly singular get the local-constant estimate below.
            configuration = describe(self.kernel, self.bandwidth)
            report_fits(pooled.counts, X.shape[0], configuration)
        if len(rows) and self.degree == 1:
            local = predict_queries(
                self.local_constant, X[rows], self.dtype, return_std
            )
            mean[rows] = local.mean
            if return_std:
                std[rows] = local.std
            rows = rows[local.doubtful]
        report_empty(self.on_empty, len(rows), X.shape[0], self.kernel, self.bandwidth)
        if len(rows):
            self._fall_back(X[rows], rows, mean, std)
        if return_std:
            return mean, std
        return mean

    def _fall_back(self, Q, rows, mean, std):
        """The ``on_empty`` policy, on the grid, at the queries ``Q`` (the
        rows ``rows`` of the output)."""
        if self.on_empty == "mean":
            m, s = self._global()
        elif self.on_empty == "nan":
            m, s = np.nan, np.nan
        else:
            tree, node_mean, node_spread = self.nodes
            scale = np.broadcast_to(self.bandwidth, (Q.shape[1],))
            Q = Q.toarray() if issparse(Q) else Q
            _, nearest = tree.query(np.asarray(Q, dtype=np.float64) / scale)
            m, s = node_mean[nearest], node_spread[nearest]
        mean[rows] = m
        if std is not None:
            std[rows] = s

    def __getstate__(self):
        state = {
            name: getattr(self, name)
            for name in (
                "sums",
                "bandwidth",
                "degree",
                "center",
                "on_empty",
                "dtype",
                "n_samples_fit",
            )
        }
        state["grid"] = (self.grid.lower, self.grid.step, self.grid.shape)
        state["kernel"] = self.kernel.name
        return state

    def __setstate__(self, state):
        lower, step, shape = state["grid"]
        self.__init__(
            Grid(np.asarray(lower), np.asarray(step), tuple(shape)),
            state["sums"],
            resolve_kernel(state["kernel"]),
            state["bandwidth"],
            state["degree"],
            state["center"],
            state["on_empty"],
            state["dtype"],
            state["n_samples_fit"],
        )

    def __getattr__(self, name):
        if name.startswith("_") or name in ("binned", "grid", "sums"):
            raise AttributeError(name)
        raise ValueError(NO_ROWS.format(method=name))
