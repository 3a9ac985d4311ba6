"""The tree paths: radius queries for kernels of compact support."""

import numpy as np
from scipy.sparse import csr_array
from sklearn.neighbors import BallTree, KDTree

from ._exact import distance_slack, edge_values, paired_squared

TREES = {"kd_tree": KDTree, "ball_tree": BallTree}


class SortedKeys:
    """The k-d tree of one feature: the sorted keys, searched by bisection.

    Offers the two queries of scikit-learn's trees that the engine uses,
    vectorised over the queries instead of looping over them.
    """

    def __init__(self, keys):
        self.order = np.argsort(keys[:, 0], kind="stable")
        self.sorted = keys[self.order, 0]

    def query_radius(self, Q, r, return_distance=True):
        """Neighbours within ``r`` (inclusive), as flat CSR pieces."""
        q = Q[:, 0]
        r = np.broadcast_to(r, q.shape)
        lo = np.searchsorted(self.sorted, q - r, side="left")
        hi = np.searchsorted(self.sorted, q + r, side="right")
        counts = hi - lo
        indptr = np.concatenate([[0], np.cumsum(counts)])
        # Positions lo[i], ..., hi[i] - 1 of every query, without a loop.
        positions = np.arange(indptr[-1]) - np.repeat(indptr[:-1] - lo, counts)
        cols = self.order[positions]
        distances = np.abs(np.repeat(q, counts) - self.sorted[positions])
        inside = distances <= r.repeat(counts)  # the bisection is on q -+ r
        if not np.all(inside):
            rows = np.repeat(np.arange(len(q)), counts)[inside]
            counts = np.bincount(rows, minlength=len(q))
            indptr = np.concatenate([[0], np.cumsum(counts)])
            cols, distances = cols[inside], distances[inside]
        return indptr, cols, distances

    def max_count(self, width):
        """The most keys that any closed interval of length ``width`` holds.

        Such an interval holds no more keys than the one of the same length
        that starts at its smallest key.
        """
        ends = np.searchsorted(self.sorted, self.sorted + width, side="right")
        return int(np.max(ends - np.arange(len(self.sorted)), initial=0))

    def count(self, Q, r):
        """How many keys lie within ``r`` (inclusive) of each query."""
        q = Q[:, 0]
        lo = np.searchsorted(self.sorted, q - r, side="left")
        return np.searchsorted(self.sorted, q + r, side="right") - lo

    def query(self, Q, k=1):
        """Distance to the nearest key, shape (n_queries, 1)."""
        q = Q[:, 0]
        i = np.searchsorted(self.sorted, q)
        left = np.abs(q - self.sorted[np.maximum(i - 1, 0)])
        right = np.abs(self.sorted[np.minimum(i, len(self.sorted) - 1)] - q)
        return np.minimum(left, right)[:, None], None


class TreeScorer:
    """Sparse kernel scores from a radius query in a tree of the keys.

    The tree is built once, on the scaled keys, so the support radius of the
    kernel is the query radius whatever the (per-feature) bandwidth. With one
    feature the k-d tree is the sorted array of the keys.

    Parameters
    ----------
    keys : ndarray of shape (n_keys, n_features)
        Scaled keys of positive weight, in float64.
    kernel : Kernel
        A kernel of compact support.
    algorithm : {"kd_tree", "ball_tree"}
        The tree.
    dtype : {float32, float64}
        The dtype of the scores.
    exact : ExactKeys
        The unscaled keys, on which the support edge and the nearest keys
        are decided (:mod:`._exact`).
    """

    def __init__(self, keys, kernel, algorithm, dtype, exact):
        self.kernel = kernel
        self.exact = exact
        self.dtype = np.dtype(dtype)
        self.n_keys = keys.shape[0]
        self.keys = keys
        # A bound on count() of every query, where one is cheap: in one
        # dimension, the most keys in an interval as long as the widened
        # support of any query that reaches a key (whose coordinates are at
        # most twice those of the keys, plus the support).
        self.max_neighbors = None
        if algorithm == "kd_tree" and keys.shape[1] == 1:
            self.tree = SortedKeys(keys)
            support = kernel.support
            reach = 2.0 * (exact.coordinates + support)
            width = 2.0 * (support + distance_slack(reach, support, 1))
            self.max_neighbors = self.tree.max_count(width)
        else:
            self.tree = TREES[algorithm](keys)

    def _neighbors(self, Q, r):
        """(indptr, cols, distances) of the keys within ``r`` of each query."""
        if isinstance(self.tree, SortedKeys):
            return self.tree.query_radius(Q, r)
        indices, distances = self.tree.query_radius(Q, r=r, return_distance=True)
        counts = np.fromiter(map(len, indices), dtype=np.intp, count=len(Q))
        indptr = np.concatenate([[0], np.cumsum(counts)])
        if not indptr[-1]:
            return indptr, np.zeros(0, dtype=np.intp), np.zeros(0)
        return indptr, np.concatenate(indices), np.concatenate(distances)

    def _slack(self, Q, radius):
        """Bound on the rounding of the tree's distances of ``Q`` near ``radius``."""
        coordinates = self.exact.query_coordinates(Q)
        return distance_slack(coordinates, radius, Q.shape[1])

    def count(self, Q):
        """An upper bound on the number of keys in each query's support.

        The keys of the widened radius query of :meth:`scores`, counted
        without listing them.
        """
        radius = self.kernel.support + self._slack(Q, self.kernel.support)
        if isinstance(self.tree, SortedKeys):
            return self.tree.count(Q, radius)
        return self.tree.query_radius(Q, r=radius, count_only=True)

    def scores(self, Q, raw):
        """Sparse (n_queries, n_keys) kernel scores ``alpha(u)`` of ``Q``.

        ``Q`` holds the scaled queries and ``raw`` the unscaled ones. The
        radius query is widened by the rounding of the tree's distances, and
        the pairs within it of the edge are decided exactly
        (:mod:`._exact`): inside means ``u < support``, strictly.
        """
        support = self.kernel.support
        slack = self._slack(Q, support)
        indptr, cols, x = self._neighbors(Q, support + slack)
        rows = np.repeat(np.arange(len(Q)), np.diff(indptr))
        u2 = (x * x).astype(self.dtype, copy=False)
        # Near the edge, or rounded onto it by float32.
        edge = np.flatnonzero((x >= support - slack[rows]) | (u2 >= support * support))
        if len(edge):
            exact = paired_squared(
                raw[rows[edge]], self.exact.keys[cols[edge]], self.exact.bandwidth
            )
            u2[edge] = edge_values(exact, support, self.dtype)
            inside = u2 < support * support
            if not inside.all():
                rows, cols, u2 = rows[inside], cols[inside], u2[inside]
                indptr = np.concatenate(
                    [[0], np.cumsum(np.bincount(rows, minlength=len(Q)))]
                )
        alpha = self.kernel.squared_function(u2)
        return csr_array((alpha, cols, indptr), shape=(len(Q), self.n_keys))

    def candidates(self, Q):
        """The keys at the smallest distance of each query, and some more.

        Returns (rows, cols): pairs among which the exact nearest keys lie,
        every key within the rounding of the tree's distances of the nearest.
        """
        nearest = self.tree.query(Q, k=1)[0][:, 0]
        radius = nearest + 2 * self._slack(Q, nearest) + 1e-300
        indptr, cols, _ = self._neighbors(Q, radius)
        return np.repeat(np.arange(len(Q)), np.diff(indptr)), cols
