"""The grid of the binned path and linear binning onto it.

Linear binning (Jones and Lotwick 1983; Wand 1994, "Fast computation of
multivariate kernel estimators", J. Comput. Graph. Statist. 3) spreads each
row over the ``2**d`` nodes of its grid cell with the weights of linear
(bilinear) interpolation, so that the binned sums keep the row's total and
its mean position. It is additive: binning the rows in parts and summing
the grids gives the grid of all rows, up to float rounding, so that grid
sums can be computed per partition of the data and added.
"""

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Grid:
    """A regular grid of ``shape[j]`` nodes from ``lower[j]`` by ``step[j]``.

    Parameters
    ----------
    lower : ndarray of shape (d,)
        The first node of each axis.
    step : ndarray of shape (d,)
        The spacing of each axis, positive.
    shape : tuple of int
        The number of nodes of each axis, at least 2.
    """

    lower: np.ndarray
    step: np.ndarray
    shape: tuple

    @property
    def upper(self):
        """The last node of each axis."""
        return self.lower + self.step * (np.asarray(self.shape) - 1)


def make_grid(lower, upper, n_bins):
    """The :class:`Grid` of ``n_bins[j]`` nodes spanning ``[lower, upper]``.

    Parameters
    ----------
    lower, upper : array-like of shape (d,)
        The span of each axis; an empty span is widened to a unit one.
    n_bins : array-like of int, shape (d,)
        Nodes per axis, at least 2.

    Returns
    -------
    grid : Grid
    """
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    shape = tuple(int(m) for m in np.broadcast_to(n_bins, lower.shape))
    span = np.where(upper > lower, upper - lower, 1.0)
    step = span / (np.asarray(shape) - 1)
    return Grid(lower, step, shape)


def cell_coordinates(grid, X):
    """The cell index and the fraction within it of each row of ``X``.

    Rows outside the grid are clipped to its first or last cell (their
    fraction then lies outside [0, 1]); ``inside`` says which are in it.
    """
    t = np.subtract(X, grid.lower, dtype=np.float64)
    t /= grid.step
    last = np.asarray(grid.shape) - 2
    inside = (t >= 0) & (t <= last + 1)
    inside = inside[:, 0] if t.shape[1] == 1 else np.all(inside, axis=1)
    floor = np.floor(t)
    np.clip(floor, 0, last, out=floor)
    index = floor.astype(np.intp)
    t -= floor  # the fraction
    return index, t, inside


def linear_bin(grid, X, columns):
    """Linear binning of ``columns`` at the rows ``X`` onto ``grid``.

    Parameters
    ----------
    grid : Grid
        A grid of ``d`` axes (1 or 2) holding every row of ``X``.
    X : ndarray of shape (n, d)
        The positions, inside the grid.
    columns : ndarray of shape (n, c)
        What each row carries (its weight, weighted values...).

    Returns
    -------
    binned : ndarray of shape grid.shape + (c,)
        ``binned[node] = sum_i columns[i] * prod_j (1 - |t_ij - node_j|)``
        over the rows ``i`` of the cells around ``node``, with ``t_ij`` the
        position in units of the spacing. Additive in the rows.
    """
    cells = Cells(grid, X)
    if not np.all(cells.inside):
        raise ValueError("linear_bin needs every row inside the grid.")
    return cells.bin(columns)


class Cells:
    """The cells of rows on a grid, computed once and reused.

    For each row, the flat index of each corner node of its cell and the
    row's linear-interpolation share of it (:func:`cell_coordinates`; rows
    outside the grid get the nearest cell, with shares that extrapolate).
    Linear binning and linear interpolation use the same shares:
    :meth:`bin` spreads columns of the rows onto the nodes, :meth:`gather`
    reads grid arrays back at the rows.

    Parameters
    ----------
    grid : Grid
    X : ndarray of shape (n, d)
    """

    def __init__(self, grid, X=None):
        self.grid = grid
        if X is None:
            return
        self.index, self.fraction, self.inside = cell_coordinates(grid, X)

    def __len__(self):
        return len(self.inside)

    @functools.cached_property
    def corners(self):
        """Per corner of the cells, the flat node index and share of each
        row (:func:`_corners`), computed on first use."""
        return _corners(self.grid, self.index, self.fraction)

    def take(self, rows):
        """The cells of the rows ``rows`` (indices or a mask)."""
        out = Cells(self.grid)
        out.index = self.index[rows]
        out.fraction = self.fraction[rows]
        out.inside = self.inside[rows]
        return out

    def bin(self, columns):
        """Linear binning of ``columns`` (n, c): grid.shape + (c,)."""
        columns = np.asarray(columns, dtype=np.float64)
        n_nodes = int(np.prod(self.grid.shape))
        out = np.empty((n_nodes, columns.shape[1]))
        one_d = len(self.grid.shape) == 1
        corners = None if one_d else self.corners
        for c in range(columns.shape[1]):
            column = columns[:, c]
            if one_d:
                # Shares 1 - f and f of the nodes i and i + 1: both binned
                # on i, the upper shifted by one node.
                lower, fraction = self.index[:, 0], self.fraction[:, 0]
                upper = column * fraction
                total = np.bincount(lower, column - upper, minlength=n_nodes)
                total[1:] += np.bincount(lower, upper, minlength=n_nodes)[:-1]
            else:
                total = None
                for flat, share in corners:
                    binned = np.bincount(flat, share * column, minlength=n_nodes)
                    total = binned if total is None else total + binned
            out[:, c] = total
        return out.reshape(self.grid.shape + (columns.shape[1],))

    def gather(self, arrays, columns=None):
        """Linear (bilinear) interpolation of grid arrays (grid.shape + (c,))
        at the rows, as an array of shape (c, n), or (len(columns), n) for
        the columns ``columns`` only.

        One gather per corner and column, read in place from the flat grid
        (no column of the grid is copied): the memory is the output and two
        rows of scratch, whatever the size of the grid.
        """
        values = np.ascontiguousarray(arrays)
        width = values.shape[-1]
        values = values.reshape(-1)  # node i, column c at i * width + c
        columns = range(width) if columns is None else columns
        n = len(self)
        out = np.empty((len(columns), n))
        scratch = np.empty(n)
        at = np.empty(n, dtype=np.intp)

        def take(nodes, c, offset, into):
            np.multiply(nodes, width, out=at)
            np.add(at, c + offset * width, out=at)
            np.take(values, at, out=into, mode="clip")

        if len(self.grid.shape) == 1:
            # 1-D: a[i] + f (a[i + 1] - a[i]), the slope times f.
            node, fraction = self.index[:, 0], self.fraction[:, 0]
            for row, c in zip(out, columns, strict=True):
                take(node, c, 1, row)
                take(node, c, 0, scratch)
                row -= scratch
                row *= fraction
                row += scratch
            return out
        for row, c in zip(out, columns, strict=True):
            for k, (node, share) in enumerate(self.corners):
                take(node, c, 0, scratch if k else row)
                if k:
                    scratch *= share
                    row += scratch
                else:
                    row *= share
        return out

    def pair_shares(self):
        """Each row's products of its own shares, grouped by node offset.

        Returns ``(offsets, shares)``: ``offsets`` (k, d) the differences
        ``o_b - o_a`` of the corners' node offsets, and ``shares`` (k, n)
        the sums of ``s_a s_b`` over the corner pairs ``(a, b)`` with that
        difference. A row binned with shares ``s`` and read back with the
        same shares sees the grid function ``f`` as
        ``sum_k shares[k] f(offsets[k] * step)``.
        """
        d = len(self.grid.shape)
        if d == 1:
            corner_offsets = np.array([[0], [1]])
        else:
            corner_offsets = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
        groups = {}
        for a, (_, share_a) in enumerate(self.corners):
            for b, (_, share_b) in enumerate(self.corners):
                key = tuple(corner_offsets[b] - corner_offsets[a])
                product = share_a * share_b
                if key in groups:
                    groups[key] += product
                else:
                    groups[key] = product
        offsets = np.array(list(groups))
        return offsets, np.array(list(groups.values()))


def _corners(grid, index, fraction):
    """The flat node index and the linear-interpolation weight of each row
    at each corner of its cell."""
    if len(grid.shape) == 1:
        i, f = index[:, 0], fraction[:, 0]
        return [(i, 1.0 - f), (i + 1, f)]
    m = grid.shape[1]
    flat = index[:, 0] * m + index[:, 1]
    fx, fy = fraction[:, 0], fraction[:, 1]
    gx, gy = 1.0 - fx, 1.0 - fy
    return [
        (flat, gx * gy),
        (flat + 1, gx * fy),
        (flat + m, fx * gy),
        (flat + m + 1, fx * fy),
    ]
