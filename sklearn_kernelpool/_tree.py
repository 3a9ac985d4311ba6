"""The tree paths: radius queries for kernels of compact support."""

import numpy as np
from scipy.sparse import csr_array
from sklearn.neighbors import BallTree, KDTree

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
    """

    def __init__(self, keys, kernel, algorithm, dtype):
        self.kernel = kernel
        self.dtype = np.dtype(dtype)
        self.n_keys = keys.shape[0]
        self.keys = keys
        if algorithm == "kd_tree" and keys.shape[1] == 1:
            self.tree = SortedKeys(keys)
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

    def scores(self, Q):
        """Sparse (n_queries, n_keys) kernel scores ``alpha(u)`` of ``Q``."""
        indptr, cols, x = self._neighbors(Q, self.kernel.support)
        x = x.astype(self.dtype, copy=False)
        alpha = self.kernel.squared_function(x * x)
        return csr_array((alpha, cols, indptr), shape=(len(Q), self.n_keys))

    def candidates(self, Q):
        """The keys at the smallest distance of each query, and some more.

        Returns (rows, cols): pairs among which the exact nearest keys lie.
        """
        nearest, _ = self.tree.query(Q, k=1)
        radius = nearest[:, 0] * (1 + 1e-9) + 1e-300
        indptr, cols, _ = self._neighbors(Q, radius)
        return np.repeat(np.arange(len(Q)), np.diff(indptr)), cols
