"""What the neighbour engines do after their sums, from neighbour lists too.

The neighbour engines (:class:`._neighbours.NeighbourHeldOut`,
:class:`._neighbours_adaptive.NeighbourAdaptiveHeldOut`) pool their sums
from a tree's neighbour lists; three things they inherit from the dense
engines would still take every key of every row, or be sized for the
dense pass. :class:`NeighbourFits` gives them their sparse forms, with the
answers of the dense ones:

- the refits of the rows whose moments cancel and the in-sample refits
  (:meth:`._fits.HeldOutFits._refit`,
  :meth:`._fits.HeldOutFits._in_sample_refit`) take the weights of a row
  over the keys within its support only (``_refit_weights`` and
  ``_full_weights_of_keys`` of each engine), in batches of a few rows; the
  fit itself, :func:`.._engine._centred_fit.centred_fit`, is unchanged, on
  the keys any row of the batch weighs;
- the ``on_empty="nearest"`` fallback (:meth:`nearest_values`) finds each
  row's nearest allowed key of positive weight by ``k``-nearest queries of
  a tree, ``k`` doubled until one is allowed, then settles the ties on
  exact differences among the keys within rounding of it
  (:func:`.._engine._exact.nearest_ties`), as
  :meth:`._base.HeldOutPoints.nearest_values` does;
- the memory rule (:meth:`sums_bytes`) counts what the neighbour pass
  holds: the sums themselves (one array, no copy per thread), the pairs of
  a chunk (within ``working_memory``) and the tree and lists of the points.
"""

import numpy as np
from sklearn.neighbors import KDTree

from .._engine._exact import distance_slack, nearest_ties
from .._engine._protocol import normalise
from .._utils._working_memory import working_memory_bytes
from ._base import HeldOutPoints

# Bytes per pair of a chunk of the neighbour passes (as
# :data:`._neighbours.PAIR_BYTES`, which imports this module).
PAIR_BYTES = 48


# Rows of a refit computed together: their weights are held over the keys
# any of them weighs.
REFIT_ROWS = 32


# Neighbours asked of the tree first by the nearest-key fallback.
_FIRST_NEIGHBOURS = 8


def compact_rows(rows, cols, scores, n_rows):
    """Dense rows over the keys with a positive score, and those keys.

    ``(rows, cols, scores)`` are pairs, one at most per row and key.
    Returns ``p`` of shape (n_rows, n_keys) and the sorted keys.
    """
    positive = scores > 0
    rows, cols, scores = rows[positive], cols[positive], scores[positive]
    keys, at = np.unique(cols, return_inverse=True)
    p = np.zeros((n_rows, len(keys)))
    p[rows, at] = scores
    return p, keys


class NeighbourFits:
    """The refits, fallbacks and memory rule of the neighbour engines.

    A mixin before :class:`._pool.HeldOut` (or its adaptive form) in the
    bases of a neighbour engine, which gives ``_refit_weights`` and
    ``_full_weights_of_keys`` from its lists.
    """

    # -- the memory rule -------------------------------------------------------
    def sums_bytes(self, n, n_jobs):
        """Bytes the neighbour pass holds for ``n`` points.

        The sums ``8 n n_columns n_candidates`` (one more column for
        ``degree=1``, the squared weights; ``n_candidates`` counts the
        in-sample sums of the adaptive engine), written in place; the pairs
        of a chunk, within ``working_memory``, and the work of a candidate
        on them, as much again; the tree and the order of the
        points, ``8 n (d + 4)``. ``n_jobs`` is not read: the pass runs on
        one thread. The ``working_memory`` is that of the call.
        """
        d, p = self.X_raw.shape[1], self.Y.shape[1]
        columns = p + 1
        if self.degree == 1:
            columns = (d + 1) * (d + 2) // 2 + (d + 2) * p + 2
        chunk = 2 * min(working_memory_bytes(), PAIR_BYTES * float(n) * n)
        return int(8 * n * columns * self._n_sums() + chunk + 8 * n * (d + 4))

    def _n_sums(self):
        return len(self.kernels) * len(self.bandwidths)

    # -- the tree of the keys ----------------------------------------------------
    def _pass_tree(self, keys):
        """A tree over the points ``keys``. The last two are kept for the
        next passes over the same keys: the blocks of held-out rows of one
        split (:mod:`.._utils._row_blocks`) share the tree of its training
        keys, and that of the keys of the ``on_empty="nearest"`` fallback."""
        trees = self.__dict__.setdefault("_pass_trees", [])
        for kept, tree in trees:
            if np.array_equal(kept, keys):
                return tree
        tree = KDTree(self.X_raw[keys])
        trees.insert(0, (keys, tree))
        del trees[2:]
        return tree

    # -- the refits ------------------------------------------------------------
    def _refit_batches(self, n_rows, n_outputs):
        """Slices of :data:`REFIT_ROWS` rows: their weights are held over
        the keys within their reach only."""
        return (
            slice(start, min(start + REFIT_ROWS, n_rows))
            for start in range(0, n_rows, REFIT_ROWS)
        )

    # -- the fallbacks ---------------------------------------------------------
    def nearest_values(self, queries, allowed):
        """Values of each query's nearest allowed key of positive weight.

        As :meth:`._base.HeldOutPoints.nearest_values` (the keys tied at
        the exact smallest distance averaged with their weights), from a
        tree over the keys of positive weight: ``O(k log n)`` per query for
        ``k`` keys nearer than its nearest allowed one, instead of ``O(n)``.

        Parameters
        ----------
        queries : ndarray of int
            Indices of the points that fell back.
        allowed : ndarray of bool of shape (n_queries, n)
            The keys each query may pool.
        """
        keys = np.flatnonzero(self.weights > 0)
        tree = self._pass_tree(keys)
        Q = self.X_raw[queries]
        nearest = self._nearest_allowed(tree, keys, Q, allowed)
        values = np.empty((len(Q), self.Y.shape[1]))
        found = np.flatnonzero(np.isfinite(nearest))
        lost = np.flatnonzero(~np.isfinite(nearest))
        if len(lost):
            # No allowed key of positive weight: as the dense fallback.
            values[lost] = HeldOutPoints.nearest_values(
                self, queries[lost], allowed[lost]
            )
        if not len(found):
            return values
        coordinates = self.coordinates + np.abs(Q[found]).max(axis=1, initial=0.0)
        slack = distance_slack(coordinates, nearest[found], Q.shape[1])
        # Every key whose exact distance may equal the nearest one's.
        lists = tree.query_radius(Q[found], r=nearest[found] + 4 * slack)
        counts = np.fromiter(map(len, lists), dtype=np.intp, count=len(found))
        rows = np.repeat(np.arange(len(found)), counts)
        cols = keys[np.concatenate(lists)]
        inside = allowed[found[rows], cols]
        rows, cols = nearest_ties(
            rows[inside], cols[inside], Q[found], self.X_raw, None, len(found)
        )
        order = np.lexsort((cols, rows))
        sums = np.zeros((len(found), self.weighted_values.shape[1]))
        np.add.at(sums, rows[order], self.weighted_values[cols[order]])
        values[found] = normalise(sums)[0]
        return values

    @staticmethod
    def _nearest_allowed(tree, keys, Q, allowed):
        """The tree's distance of each query's nearest allowed key, ``inf``
        where none is: ``k`` nearest keys, ``k`` doubled until one is."""
        nearest = np.full(len(Q), np.inf)
        todo = np.arange(len(Q))
        k = min(_FIRST_NEIGHBOURS, len(keys))
        while len(todo) and k:
            distances, found = tree.query(Q[todo], k=k)
            ok = allowed[todo[:, None], keys[found]]
            hit = ok.any(axis=1)
            first = ok.argmax(axis=1)
            nearest[todo[hit]] = distances[hit, first[hit]]
            todo = todo[~hit]
            if k == len(keys):
                break
            k = min(2 * k, len(keys))
        return nearest
