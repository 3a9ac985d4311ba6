"""The tree paths: radius queries for kernels of compact support."""

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy.sparse import csr_array, issparse
from sklearn.neighbors import BallTree, KDTree
from sklearn.utils import gen_batches

from .._utils._sparse import dense_rows
from .._utils._validation import scale_coordinates
from .._utils._working_memory import working_memory_bytes
from . import _adaptive, _categorical
from . import _query_chunks as _chunk_plan
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

    def _radius(self, Q, r2=None):
        """The radius of the query of each row of ``Q`` and its rounding:
        the support, times ``r`` with adaptive widths (``r2``, see
        :mod:`._adaptive`; zero for a query of scale zero), and the slack of
        the tree's distances near it."""
        radius = self.kernel.support
        if r2 is not None:
            safe, coincident = _adaptive.safe_radii(r2)
            radius = radius * np.sqrt(safe)
            radius[coincident] = 0.0
        return radius, self._slack(Q, radius)

    def count(self, Q, r2=None):
        """An upper bound on the number of keys in each query's support.

        The keys of the widened radius query of :meth:`scores`, counted
        without listing them; ``r2`` as in :meth:`scores`.
        """
        radius, slack = self._radius(Q, r2)
        if isinstance(self.tree, SortedKeys):
            return self.tree.count(Q, radius + slack)
        return self.tree.query_radius(Q, r=radius + slack, count_only=True)

    def scores(self, Q, raw, r2=None):
        """Sparse (n_queries, n_keys) kernel scores ``alpha(u)`` of ``Q``.

        ``Q`` holds the scaled queries and ``raw`` the unscaled ones. The
        radius query is widened by the rounding of the tree's distances, and
        the pairs within it of the edge are decided exactly
        (:mod:`._exact`): inside means ``u < support``, strictly. With
        adaptive widths, ``r2`` holds each query's squared scale
        (:mod:`._adaptive`): one radius per query, ``support * r``, the
        distances and edge pairs divided by ``r``, and a query of scale zero
        gets the keys at distance zero from it.
        """
        support = self.kernel.support
        radius, slack = self._radius(Q, r2)
        indptr, cols, x = self._neighbors(Q, radius + slack)
        rows = np.repeat(np.arange(len(Q)), np.diff(indptr))
        u2 = x * x
        if r2 is not None:
            safe, coincident = _adaptive.safe_radii(r2)
            u2 = u2 / safe[rows]
            radius = radius[rows]
        u2 = u2.astype(self.dtype, copy=False)
        # Near the edge, or rounded onto it by float32.
        edge = (x >= radius - slack[rows]) | (u2 >= support * support)
        if r2 is not None:
            edge &= ~coincident[rows]
        edge = np.flatnonzero(edge)
        if len(edge):
            exact = paired_squared(
                raw[rows[edge]], self.exact.keys[cols[edge]], self.exact.bandwidth
            )
            if r2 is not None:
                exact = exact / safe[rows[edge]]
            u2[edge] = edge_values(exact, support, self.dtype)
        inside = u2 < support * support
        alpha = None
        if r2 is not None:
            alpha = self.kernel.squared_function(u2)  # may work in place
            inside = _adaptive.coincident_pairs(
                self, raw, rows, cols, coincident, inside, alpha
            )
        if not inside.all():
            rows, cols, u2 = rows[inside], cols[inside], u2[inside]
            alpha = None if alpha is None else alpha[inside]
            indptr = np.concatenate(
                [[0], np.cumsum(np.bincount(rows, minlength=len(Q)))]
            )
        if alpha is None:
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

    # -- the scorer protocol of :mod:`._protocol` ------------------------------
    # The scores are sparse and new for every chunk, without sample weights.
    weights_folded = False

    @classmethod
    def for_pool(cls, pool, scaled, kernel, user_kernel):
        """The scorer of a :class:`._pooling.KernelPool`: a tree of its
        ``scaled`` keys, uncentred (trees subtract exactly)."""
        scorer = cls(scaled, kernel, pool.algorithm, pool.dtype, pool.exact)
        if pool.radii is not None:
            scorer.max_neighbors = None  # a bound for a fixed width
        return scorer

    def plan_batches(
        self, pool, X, extra_row_bytes, n_threads, empty_row_pairs, order=None
    ):
        """The chunks of queries, as slices, and the number of pairs they hold.

        Chunks are cut from the neighbours actually counted in each query's
        support, so that a chunk's pairs fit ``working_memory`` whatever the
        spread of the neighbourhood sizes; a query whose neighbours alone
        exceed it makes a chunk of its own, the least that can be computed.
        ``working_memory`` is shared by the ``n_threads`` threads that hold a
        chunk each. A query with no neighbour counts as ``empty_row_pairs``
        pairs (its fallback row of sparse weights). The chunks are slices of
        ``order`` where given (of the queries as they come otherwise).
        """
        n_queries = X.shape[0]
        budget = working_memory_bytes() / n_threads
        row_bytes = _chunk_plan.TREE_ROW_BYTES + extra_row_bytes
        most = self.max_neighbors
        most = self.n_keys if most is None else max(most, empty_row_pairs)
        pair_bytes = _chunk_plan.TREE_PAIR_BYTES
        if pool.categorical is not None:
            pair_bytes += _chunk_plan.CATEGORICAL_PAIR_BYTES
        worst = most * pair_bytes + row_bytes
        max_rows = _chunk_plan.TREE_CHUNK_ROWS
        if min(n_queries, max_rows) * worst <= budget:
            # Chunks fit even if every query had the most neighbours any
            # query can have (every key, where no bound is known).
            pairs = n_queries * pool.expected_neighbors
            return list(gen_batches(n_queries, max_rows)), pairs
        counts = self.support_counts(pool, X, n_threads, order)
        pairs = np.where(counts == 0, empty_row_pairs, counts)
        cost = np.cumsum(pairs * pair_bytes + row_bytes)
        batches, start = [], 0
        while start < n_queries:
            spent = cost[start - 1] if start else 0
            stop = int(np.searchsorted(cost, spent + budget, side="right"))
            stop = min(max(stop, start + 1), start + max_rows, n_queries)
            batches.append(slice(start, stop))
            start = stop
        return batches, int(counts.sum())

    def workspace(self, n_rows):
        """No buffer: a chunk's sparse scores are new arrays."""
        return None

    def query_order(self, pool, X):
        """The queries sorted by the cells that hold them (first feature
        first), cells of side the support, or of the typical radius of
        ``n_neighbors``; None for sparse queries. Nearby queries then follow
        each other, and their radius queries visit the same nodes of the
        tree (twice as fast on a table of 262,000 keys in 4 dimensions).
        Any order gives the same rows: the cells are float32."""
        if issparse(X) or X.shape[0] < 2:
            return None
        X = pool._continuous(X)
        side = self.kernel.support
        if pool.radii is not None:
            # The radius that holds about n_neighbors keys, were they spread
            # evenly over the widest extent of the keys.
            n_keys, d = self.keys.shape
            fraction = min(1.0, pool._arguments["n_neighbors"] / n_keys)
            side *= float(np.max(np.ptp(self.keys, axis=0))) * fraction ** (1 / d)
        scale = np.broadcast_to(pool.bandwidth * side, X.shape[1:])
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            cells = [
                np.floor(X[:, j] / scale[j]).astype(np.float32)
                for j in reversed(range(X.shape[1]))
            ]
        return np.lexsort(cells)

    def support_counts(self, pool, X, n_jobs=None, order=None):
        """An upper bound on the keys in each query's support, counted in
        chunks over ``n_jobs`` threads; in the ``order`` of the queries
        where given."""
        counts = np.empty(X.shape[0], dtype=np.intp)
        X = pool._continuous(X)

        def count(batch):
            chunk = dense_rows(X, batch if order is None else order[batch])
            scaled = scale_coordinates(chunk, pool.bandwidth, self.dtype, "X")
            r2 = None if pool.radii is None else pool.radii(scaled, chunk)
            counts[batch] = self.count(scaled, r2)

        batches = list(gen_batches(X.shape[0], _chunk_plan.TREE_CHUNK_ROWS))
        n_threads = min(effective_n_jobs(n_jobs), len(batches))
        if n_threads <= 1:
            for batch in batches:
                count(batch)
        else:
            Parallel(n_jobs=n_threads, require="sharedmem")(
                delayed(count)(batch) for batch in batches
            )
        return counts

    def chunk_scores(self, queries, workspace, rows=None):
        """Sparse scores of a chunk (their rows never underflow)."""
        scaled, raw = queries[0], queries[2]
        r2 = queries[3] if len(queries) > 3 else None
        scores = self.scores(scaled, raw, r2)
        categorical = getattr(queries, "categorical", None)
        return scores if categorical is None else categorical.scale_sparse(scores)

    def underflowed(self, total):
        """None: the scores of a compact kernel are never recomputed."""
        return None

    def product(self, scores, matrix, workspace):
        """``scores @ matrix``, sparse by dense."""
        return scores @ matrix

    def weighted(self, scores, weights, n, sparse):
        """The chunk's scores, sample weights included, dense unless
        ``sparse``."""
        scores.data *= weights[scores.indices]
        return scores if sparse else scores.toarray()

    def row_scores(self, queries, workspace, rows, weights):
        """Float64 scores of the ``rows`` of a chunk, sample weights
        included, dense."""
        parts = tuple(q[rows] for q in queries)
        categorical = getattr(queries, "categorical", None)
        if categorical is not None:
            parts = _categorical.Queries(parts, categorical[rows])
        scores = self.chunk_scores(parts, workspace)
        scores.data *= weights[scores.indices]
        return scores.toarray().astype(np.float64, copy=False)

    def refit_scores(self, queries, workspace, redo, step, weights):
        """``(rows, row_scores)`` of the ``redo`` rows, ``step`` at a time."""
        for start in range(0, len(redo), step):
            rows = redo[start : start + step]
            yield rows, self.row_scores(queries, workspace, rows, weights)

    def nearest_candidates(self, queries, workspace):
        """(rows, cols) pairs that hold each query's nearest keys."""
        return self.candidates(queries[0])
