"""Held-out pooled sums of compact kernels from the neighbour lists of a tree.

A kernel of compact support (``alpha(u) = 0`` for ``u >= support``) pools,
for each held-out point, only the keys within ``support * h`` of it. Where
those are few, the held-out sums of :class:`._pool.HeldOut`,

    S_i = sum_{j allowed for i} alpha(||x_i - x_j|| / h) * M_j,

(the moments ``M`` of :func:`._sums.pooled_moments`, the weight last) and
the sums of the squared weights ``sum_j alpha_ij**2 w_j**2`` of the
local-linear safeguard, are cheaper from the neighbour lists than from
every pair: one radius query of a :class:`sklearn.neighbors.KDTree` of the
keys of positive weight, at the widest support of the candidates, gives
the ``n k`` pairs within reach in ``O(n k log n)``; each candidate then
keeps those within its own support and pools them as a sparse (CSR)
product with the moments, ``O(n k)`` per candidate instead of ``O(n^2)``.

The answers are those of the dense pass (:class:`._sums.HeldOutPairs`),
to rounding:

- the same exclusions: the own key (leave-one-out), the keys of the same
  group (K-fold), the keys outside ``train`` (a split); keys of weight zero
  are never pooled;
- the same support edge: a pair is inside when its exact scaled squared
  distance, ``sum_f ((q_f - k_f) / h)**2`` on the unscaled points
  (:func:`.._engine._exact.paired_squared`), is below ``support**2``,
  strictly; the pairs within rounding of the edge are decided on it, as
  :class:`.._engine._exact.EdgeBlock` decides them in the dense pass;
- the same moments (centred points, values centred for ``degree=1``,
  weights scaled to a largest weight of 1), those of :class:`._pool.HeldOut`,
  whose preparation this engine inherits. Compact kernels are never
  shifted: ``log_scale`` is 0.

The squared distances of the pairs are computed once from exact
differences of the unscaled points (``O(n k d)``), so the tree's own
rounding decides nothing: its query is widened by a bound on it
(:func:`.._engine._exact.distance_slack`). Rows are taken in chunks, in
the leaf order of a k-d tree, within scikit-learn's ``working_memory``.
Everything after the sums (:meth:`._fits.HeldOutFits.predictions`, the
in-sample fits) is that of :class:`._pool.HeldOut`, but the refits of the
rows whose moments cancel, the ``on_empty`` fallbacks and the memory rule,
which take the neighbour lists too (:class:`._neighbour_fits.NeighbourFits`):
a refit weighs the keys within ``support * h`` of its row, found on the
centred points by a tree widened by its rounding, with the dense refit's
formula.
"""

import numpy as np
from scipy.sparse import csr_array
from sklearn.neighbors import KDTree

from .._engine._exact import distance_slack, edge_values, paired_squared
from .._utils._working_memory import working_memory_bytes
from ._neighbour_fits import PAIR_BYTES, NeighbourFits, compact_rows
from ._pool import HeldOut

# A chunk's pairs hold PAIR_BYTES each (their row, column and squared
# distance, the masks and the scores of a candidate).


# Rows of the first chunk; later chunks are sized from the pairs counted.
_FIRST_CHUNK = 256


# The most rows of a chunk.
_MAX_CHUNK = 4096


class NeighbourHeldOut(NeighbourFits, HeldOut):
    """Held-out pooled sums of compact kernels from a tree's neighbour lists.

    The sums of :class:`._pool.HeldOut` (the module docstring of
    :mod:`._neighbours`), in ``O(n k)`` per candidate for ``k`` keys within
    the widest support, instead of ``O(n^2)``.

    Parameters
    ----------
    X, Y, weights, kernels, bandwidths, n_jobs, degree
        As for :class:`._pool.HeldOut`. Every kernel must have compact
        support. The pass runs on one thread.

    Attributes
    ----------
    log_scale : ndarray of shape (n_kernels, n_bandwidths, n)
        Set by :meth:`sums_excluding_groups`: zero, compact kernels are
        never shifted.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool.kernels import KERNELS
    >>> from sklearn_kernelpool._held_out._pool import HeldOut
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(300, 2)), rng.normal(size=(300, 1))
    >>> w, kernels = np.ones(300), [KERNELS["epanechnikov"]]
    >>> sparse = NeighbourHeldOut(X, Y, w, kernels, [0.3, 0.6], degree=1)
    >>> dense = HeldOut(X, Y, w, kernels, [0.3, 0.6], degree=1)
    >>> a, b = sparse.sums_excluding_groups(None), dense.sums_excluding_groups(None)
    >>> bool(np.allclose(a.moments, b.moments, rtol=1e-12, atol=1e-12))
    True
    """

    def __init__(self, X, Y, weights, kernels, bandwidths, n_jobs=None, degree=0):
        wide = [k.name for k in kernels if not k.is_compact]
        if wide:
            raise ValueError(
                "The neighbour held-out sums take kernels of compact support "
                f"only (a finite Kernel.support); got {wide}. Use the dense "
                "HeldOut for those."
            )
        super().__init__(X, Y, weights, kernels, bandwidths, n_jobs, degree)

    # -- the passes ------------------------------------------------------------
    def sums_excluding_groups(self, groups):
        """Pooled sums of every point over the keys of the other groups.

        Parameters
        ----------
        groups : ndarray of int of shape (n,) or None
            Group of each point; None means one group per point
            (leave-one-out).

        Returns
        -------
        sums : HeldOutSums
            Moments of shape (n_kernels, n_bandwidths, n, n_columns), as
            those of :meth:`._sums.HeldOutPairs.sums_excluding_groups`.
        """
        n = self.X.shape[0]
        keys = np.flatnonzero(self.weights > 0)
        sums = self._empty_sums(n, self.moments.shape[1])
        labels = np.arange(n) if groups is None else np.asarray(groups)
        order = self.spatial_order
        self._pool_rows(sums, (order, order), keys, labels)
        self.log_scale = np.zeros((*self._shape, n))
        return sums

    def sums_split(self, test, train):
        """Pooled sums of the ``test`` points over the ``train`` points.

        Returns
        -------
        sums : HeldOutSums
            Moments of shape (n_kernels, n_bandwidths, n_test, n_columns),
            as those of :meth:`._sums.HeldOutPairs.sums_split`.
        """
        test, train = np.asarray(test), np.asarray(train)
        keys = train[self.weights[train] > 0]
        if len(keys) == 0:
            raise ValueError(
                "A cross-validation split has no training point of positive weight."
            )
        sums = self._empty_sums(len(test), self.moments.shape[1])
        self._pool_rows(sums, (test, np.arange(len(test))), keys, None)
        return sums

    # -- the steps ---------------------------------------------------------------
    def _pool_rows(self, out, rows, keys, labels):
        """Pool the pairs of the points of ``rows`` with the ``keys`` into ``out``.

        ``rows`` is the pair ``(points, at)``: the indices of the held-out
        points, in the order they are taken, and their rows in ``out``. With
        ``labels`` (one per point), a pair of the same label is left out.
        Rows are taken in chunks sized from the pairs of the previous one,
        so that a chunk's pairs fit ``working_memory``.
        """
        tree = self._pass_tree(keys)
        reach = max(k.support for k in self.kernels) * self.bandwidths.max()
        budget = working_memory_bytes()
        points, at = rows
        start, step = 0, _FIRST_CHUNK
        while start < len(points):
            chunk = slice(start, min(start + step, len(points)))
            pairs = self._pairs(tree, keys, points[chunk], reach, labels)
            self._pool_pairs(out, at[chunk], pairs)
            per_row = max(len(pairs[0]) / (chunk.stop - chunk.start), 1.0)
            step = int(min(_MAX_CHUNK, max(1.0, budget / (PAIR_BYTES * per_row))))
            start = chunk.stop

    def _pairs(self, tree, keys, points, reach, labels):
        """The pairs of ``points`` and ``keys`` within ``reach`` (unscaled).

        Returns ``(rows, cols, d2, points)``: the position of the point in
        ``points`` (sorted), the key (an index of the points) and the
        exact squared distance of the pair, unscaled; the pairs of the
        same label are left out.
        """
        Q = self.X_raw[points]
        coordinates = self.coordinates + np.abs(Q).max(axis=1, initial=0.0)
        radius = reach + distance_slack(coordinates, reach, Q.shape[1])
        found = tree.query_radius(Q, r=radius)
        counts = np.fromiter(map(len, found), dtype=np.intp, count=len(Q))
        rows = np.repeat(np.arange(len(Q)), counts)
        cols = keys[np.concatenate(found)] if counts.sum() else keys[:0]
        if labels is not None:
            other = labels[points[rows]] != labels[cols]
            rows, cols = rows[other], cols[other]
        d2 = paired_squared(Q[rows], self.X_raw[cols], None)
        return rows, cols, d2, points

    def _pool_pairs(self, out, at, pairs):
        """Pool the ``pairs`` into the rows ``at`` of ``out`` for every
        candidate: the moments and, for ``degree=1``, the squared weights."""
        rows, cols = pairs[:2]
        n_rows = len(at)
        moments = self.moments
        weights_sq = self.weights * self.weights
        for k, kernel in enumerate(self.kernels):
            for m, h in enumerate(self.bandwidths):
                inside, u2 = self._inside(pairs, kernel.support, h)
                indptr = np.zeros(n_rows + 1, dtype=np.intp)
                np.cumsum(np.bincount(rows[inside], minlength=n_rows), out=indptr[1:])
                alpha = kernel.squared_function(u2)
                scores = csr_array(
                    (alpha, cols[inside], indptr), shape=(n_rows, len(moments))
                )
                out.moments[k, m, at] = scores @ moments
                if out.squares is not None:
                    scores.data *= scores.data
                    out.squares[k, m, at] = scores @ weights_sq

    def _inside(self, pairs, support, h):
        """The pairs inside the support ``support * h``, and their ``u**2``.

        The squared distances of ``pairs`` divided by ``h**2`` decide the
        pairs away from the edge; those within their rounding of it are
        decided on :func:`.._engine._exact.paired_squared` with ``h``, as
        the dense pass does (:func:`.._engine._exact.edge_values`).
        """
        rows, cols, d2, points = pairs
        s2 = support * support
        # Both forms of u**2 round by a few eps relative (about d + 4
        # roundings each): a band of 16 (d + 4) eps holds their difference.
        band = 16 * (self.X.shape[1] + 4) * float(np.finfo(np.float64).eps)
        candidate = np.flatnonzero(d2 <= s2 * (h * h) * (1.0 + 2.0 * band))
        u2 = d2[candidate] / (h * h)
        near = np.flatnonzero(u2 >= s2 * (1.0 - band))
        if len(near):
            at = candidate[near]
            Q = self.X_raw[points[rows[at]]]
            exact = paired_squared(Q, self.X_raw[cols[at]], h)
            u2[near] = edge_values(exact, support, np.float64)
        keep = u2 < s2
        return candidate[keep], u2[keep]

    # -- the refits from the neighbour lists ---------------------------------
    def _refit_weights(self, candidate, points, groups, train):
        """:meth:`._fits.HeldOutFits._refit_scores` over the keys within
        reach of ``points`` (the same exclusions, the same formula), and
        those keys: ``(p, keys)`` of :func:`._neighbour_fits.compact_rows`."""
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        rows, cols = self._centred_pairs(points, kernel.support * h)
        if train is not None:
            kept = np.zeros(len(self.X), dtype=bool)
            kept[train] = True
            other = kept[cols]
        elif groups is not None:
            other = groups[points[rows]] != groups[cols]
        else:
            other = points[rows] != cols
        rows, cols = rows[other], cols[other]
        # The support's edge decided as every path decides it (:mod:`._exact`).
        u2 = paired_squared(self.X_raw[points[rows]], self.X_raw[cols], h)
        u = np.sqrt(edge_values(u2, kernel.support, np.float64))
        scores = kernel.function(u) * self.weights[cols]
        return compact_rows(rows, cols, scores, len(points))

    def _full_weights_of_keys(self, candidate, points):
        """:meth:`._fits.HeldOutFits._full_weights` over the keys within
        reach of ``points``, their own included, and those keys."""
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        rows, cols = self._centred_pairs(points, kernel.support * h)
        u2 = paired_squared(self.X[points[rows]], self.X[cols], None) / (h * h)
        scores = kernel.squared_function(u2) * self.weights[cols]
        total = np.bincount(rows, scores, minlength=len(points))
        return compact_rows(rows, cols, scores / total[rows], len(points))

    def _centred_pairs(self, points, reach):
        """The pairs of ``points`` and the keys of positive weight within
        ``reach`` of them on the centred points, widened by the rounding of
        the tree's distances (a superset of the pairs the dense refits
        weigh)."""
        if getattr(self, "_centred_tree", None) is None:
            keys = np.flatnonzero(self.weights > 0)
            self._centred_tree = (keys, KDTree(self.X[keys]))
        keys, tree = self._centred_tree
        Q = self.X[points]
        coordinates = float(np.abs(self.X).max(initial=0.0))
        radius = reach + 2 * distance_slack(coordinates, reach, Q.shape[1])
        found = tree.query_radius(Q, r=radius)
        counts = np.fromiter(map(len, found), dtype=np.intp, count=len(Q))
        rows = np.repeat(np.arange(len(Q)), counts)
        cols = keys[np.concatenate(found)] if counts.sum() else keys[:0]
        return rows, cols
