"""The tree paths: radius queries for kernels of compact support."""

import numpy as np
from scipy.sparse import csr_array
from sklearn.neighbors import BallTree, KDTree

TREES = {"kd_tree": KDTree, "ball_tree": BallTree}


class TreeScorer:
    """Sparse kernel scores from a radius query in a tree of the keys.

    The tree is built once, on the scaled keys, so the support radius of the
    kernel is the query radius whatever the (per-feature) bandwidth.

    Parameters
    ----------
    keys : ndarray of shape (n_keys, n_features)
        Scaled keys of positive weight.
    kernel : Kernel
        A kernel of compact support.
    algorithm : {"kd_tree", "ball_tree"}
        The tree.
    """

    def __init__(self, keys, kernel, algorithm):
        self.kernel = kernel
        self.dtype = keys.dtype
        self.n_keys = keys.shape[0]
        self.keys = keys
        # scikit-learn's trees work in float64.
        self.tree = TREES[algorithm](keys.astype(np.float64, copy=False))

    def scores(self, Q):
        """Sparse (n_queries, n_keys) kernel scores ``alpha(u)`` of ``Q``."""
        indices, distances = self.tree.query_radius(
            Q, r=self.kernel.support, return_distance=True
        )
        counts = np.fromiter((len(i) for i in indices), dtype=np.intp, count=len(Q))
        indptr = np.concatenate([[0], np.cumsum(counts)])
        if indptr[-1]:
            cols = np.concatenate(indices)
            x = np.concatenate(distances).astype(self.dtype, copy=False)
            alpha = self.kernel.squared_function(x * x)
        else:
            cols = np.zeros(0, dtype=np.intp)
            alpha = np.zeros(0, dtype=self.dtype)
        return csr_array((alpha, cols, indptr), shape=(len(Q), self.n_keys))

    def candidates(self, Q):
        """The keys at the smallest distance of each query, and some more.

        Returns (rows, cols): pairs among which the exact nearest keys lie.
        """
        nearest, _ = self.tree.query(Q, k=1)
        radius = nearest[:, 0] * (1 + 1e-9) + 1e-300
        indices = self.tree.query_radius(Q, r=radius)
        rows = np.repeat(np.arange(len(Q)), [len(i) for i in indices])
        return rows, np.concatenate(indices)
