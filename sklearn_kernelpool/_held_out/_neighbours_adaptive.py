"""Held-out sums of adaptive-width compact kernels from a tree's neighbour lists.

The adaptive candidates ``(kernel, n_neighbors)`` of
:class:`._adaptive.AdaptiveHeldOut` give each held-out point ``i`` the
width ``r_i``, the distance to its ``k``-th nearest key among the keys its
fit may hold, and pool

    S_i = sum_{j allowed for i} w_j * alpha(||x_i - x_j|| / r_i) * M_j

over the unit moments ``M``. For a kernel of compact support only the keys
within ``support * r_i`` count: ``O(k)`` of them for points spread evenly,
so a tree's neighbour lists give the sums in ``O(n k log n)`` instead of
the ``O(n^2)`` of the dense rows.

The answers are those of the dense pass, to rounding of the sums, because
every decision is taken on the same numbers:

- the keys each fit may hold: a tree over the keys of positive weight
  (all of them for leave-one-out, where the own key is then dropped from
  its list, with duplicates too; one tree per fold's complement for
  K-fold; the ``train`` keys of a split);
- the width: ``r_i**2`` is the ``k``-th smallest exact squared distance
  (:func:`.._engine._exact.paired_squared`, the same bits as the dense
  pass's :func:`.._engine._exact.pairwise_squared`) among the allowed keys
  of the list, ties counted one by one. The tree's own ``k``-th distance
  (its ``k + 1``-th for leave-one-out, which bounds the ``k``-th of the
  others) is only used, widened by its rounding
  (:func:`.._engine._exact.distance_slack`), to make the list hold every
  key within ``support * r_i``;
- the edge: ``u**2 = d**2 / r**2`` as the dense pass divides it, through
  :func:`.._engine._exact.edge_values`; a point whose ``k``-th neighbour
  is at distance zero pools the allowed keys at distance zero with their
  weights (the limit of a vanishing width, :func:`.._engine._adaptive.safe_radii`).

With ``in_sample`` (leave-one-out) the fits on all the data are pooled
from the same lists: the own key (at distance zero) included, at the width
of the fit that holds it.

The refits of the rows whose moments cancel (held-out and in-sample), the
``on_empty`` fallbacks and the memory rule take the neighbour lists too
(:class:`._neighbour_fits.NeighbourFits`): a refit weighs the keys of the
lists of its row, at the row's own width, with the exclusions of its fit.
"""

import numpy as np
from scipy.sparse import csr_array
from sklearn.neighbors import KDTree

from .._engine._adaptive import check_n_neighbors, safe_radii
from .._engine._exact import distance_slack, edge_values, paired_squared
from .._utils._working_memory import working_memory_bytes
from ._adaptive import AdaptiveHeldOut
from ._neighbour_fits import NeighbourFits, compact_rows
from ._neighbours import _FIRST_CHUNK, _MAX_CHUNK, PAIR_BYTES


class NeighbourAdaptiveHeldOut(NeighbourFits, AdaptiveHeldOut):
    """Held-out sums of adaptive-width compact kernels from neighbour lists.

    The sums of :class:`._adaptive.AdaptiveHeldOut` (the module docstring of
    :mod:`._neighbours_adaptive`) in ``O(n k log n)``; everything after the
    sums is inherited. The pass runs on one thread.

    Parameters
    ----------
    held_out : HeldOut
        The held-out state of the fixed-width candidates. Every kernel must
        have compact support.
    n_neighbors : sequence of int
        The neighbour counts of the candidates.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool.kernels import KERNELS
    >>> from sklearn_kernelpool._held_out._pool import HeldOut
    >>> from sklearn_kernelpool._held_out._adaptive import AdaptiveHeldOut
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(size=(300, 2)), rng.normal(size=(300, 1))
    >>> held = HeldOut(X, Y, np.ones(300), [KERNELS["epanechnikov"]], [], degree=1)
    >>> sparse = NeighbourAdaptiveHeldOut(held, [5, 20])
    >>> dense = AdaptiveHeldOut(held, [5, 20])
    >>> a, b = sparse.sums_excluding_groups(None), dense.sums_excluding_groups(None)
    >>> bool(np.allclose(a.moments, b.moments, rtol=1e-12, atol=1e-12))
    True
    """

    def __init__(self, held_out, n_neighbors):
        wide = [k.name for k in held_out.kernels if not k.is_compact]
        if wide:
            raise ValueError(
                "The neighbour held-out sums take kernels of compact support "
                f"only (a finite Kernel.support); got {wide}. Use the dense "
                "AdaptiveHeldOut for those."
            )
        super().__init__(held_out, n_neighbors)
        self._check_size(len(self.X), None)

    # -- the passes ------------------------------------------------------------
    def sums_excluding_groups(self, groups, in_sample=False):
        """Pooled sums of every point over the keys of the other groups.

        As :meth:`._adaptive.AdaptiveHeldOut.sums_excluding_groups`; with
        ``in_sample`` (leave-one-out only) also ``full_sums`` and
        ``full_own``.

        Returns
        -------
        sums : HeldOutSums
            Moments of shape (n_kernels, n_neighbors, n, n_columns).
        """
        n = len(self.X)
        k = int(self.n_neighbors.max())
        sums = self._empty_sums(n, self.unit_moments.shape[1])
        order = self.spatial_order
        if groups is None:
            check_n_neighbors(k, int(self.positive.sum()), loo=True)
            if in_sample:
                self.full_sums = self._empty_sums(n, sums.moments.shape[-1])
                self.full_own = np.zeros(sums.moments.shape[:-1])
            keys = np.flatnonzero(self.positive)
            self._pool_rows(sums, (order, order), keys, True, in_sample)
            return sums
        groups = np.asarray(groups)
        inside = np.bincount(groups, weights=self.positive)
        check_n_neighbors(k, int(self.positive.sum() - inside.max()))
        for group in np.unique(groups):
            points = order[groups[order] == group]
            keys = np.flatnonzero(self.positive & (groups != group))
            self._pool_rows(sums, (points, points), keys, False, False)
        return sums

    def sums_split(self, test, train):
        """Pooled sums of the ``test`` points over the ``train`` points."""
        test, train = np.asarray(test), np.asarray(train)
        keys = np.unique(train[self.positive[train]])
        check_n_neighbors(int(self.n_neighbors.max()), len(keys))
        sums = self._empty_sums(len(test), self.unit_moments.shape[1])
        self._pool_rows(sums, (test, np.arange(len(test))), keys, False, False)
        return sums

    # -- the steps ---------------------------------------------------------------
    def _pool_rows(self, out, rows, keys, leave_own, in_sample):
        """Pool the points of ``rows`` over the ``keys`` into ``out``.

        ``rows`` is the pair ``(points, at)``: the held-out points, in the
        order they are taken, and their rows in ``out``. ``leave_own``
        drops each point's own key (leave-one-out). Rows are taken in
        chunks sized from the pairs of the previous one, within
        ``working_memory``.
        """
        tree = self._pass_tree(keys)
        budget = working_memory_bytes()
        points, at = rows
        start, step = 0, _FIRST_CHUNK
        while start < len(points):
            chunk = slice(start, min(start + step, len(points)))
            pairs = self._pairs(tree, keys, points[chunk], leave_own)
            self._pool_pairs(out, at[chunk], pairs, in_sample)
            per_row = max(len(pairs[1]) / (chunk.stop - chunk.start), 1.0)
            step = int(min(_MAX_CHUNK, max(1.0, budget / (PAIR_BYTES * per_row))))
            start = chunk.stop

    def _pairs(self, tree, keys, points, leave_own):
        """The pairs of ``points`` with the keys that may be in their support.

        Returns ``(indptr, cols, d2, own)``: the pairs of each point sorted
        by their exact squared distance ``d2`` (unscaled), the key of each
        (an index of the points) and, with ``leave_own``, whether each
        point's own key is a key (its pair is then left out of the lists).
        """
        Q = self.X_raw[points]
        n_rows, d = Q.shape
        k = int(self.n_neighbors.max()) + leave_own
        reach = tree.query(Q, k=min(k, len(keys)), return_distance=True)[0][:, -1]
        coordinates = self.coordinates + np.abs(Q).max(axis=1, initial=0.0)
        support = max(kernel.support for kernel in self.kernels)
        slack = distance_slack(coordinates, support * reach, d)
        found = tree.query_radius(Q, r=support * (reach + slack) + slack)
        counts = np.fromiter(map(len, found), dtype=np.intp, count=n_rows)
        rows = np.repeat(np.arange(n_rows), counts)
        cols = keys[np.concatenate(found)] if counts.sum() else keys[:0]
        own = np.zeros(n_rows, dtype=bool)
        if leave_own:
            mine = cols == points[rows]
            own[rows[mine]] = True
            rows, cols = rows[~mine], cols[~mine]
        d2 = paired_squared(Q[rows], self.X_raw[cols], None)
        order = np.lexsort((d2, rows))
        indptr = np.zeros(n_rows + 1, dtype=np.intp)
        np.cumsum(np.bincount(rows, minlength=n_rows), out=indptr[1:])
        return indptr, cols[order], d2[order], own

    def _list_radii(self, indptr, d2, own=None):
        """Squared ``k``-th neighbour distances of the rows of sorted lists,
        shape (n_neighbors, n_rows); with ``own`` (the rows whose own key is
        a key), those of the fits that hold it, at distance zero."""
        first = indptr[:-1]
        radii = np.empty((len(self.n_neighbors), len(first)))
        for m, k in enumerate(self.n_neighbors):
            if own is None:
                radii[m] = d2[first + k - 1]
                continue
            kth = first + k - 1 - own
            radii[m] = np.where(kth >= first, d2[np.maximum(kth, 0)], 0.0)
        return radii

    def _pool_pairs(self, out, at, pairs, in_sample):
        """Pool the sorted ``pairs`` into the rows ``at`` of ``out`` (and of
        ``full_sums`` with ``in_sample``) for every candidate."""
        indptr, cols, d2, own = pairs
        rows = np.repeat(np.arange(len(at)), np.diff(indptr))
        radii = self._list_radii(indptr, d2)
        if in_sample:
            own_radii = self._list_radii(indptr, d2, own)
        lists = (rows, cols, d2, len(at))
        for k, kernel in enumerate(self.kernels):
            for m in range(len(self.n_neighbors)):
                scores = self._list_scores(lists, kernel, radii[m])
                self._set_rows(out, (k, m, at), scores)
                if in_sample:
                    scores = self._list_scores(lists, kernel, own_radii[m])
                    own_scores = self._own_scores(kernel, own, own_radii[m], at)
                    self._set_rows(self.full_sums, (k, m, at), scores, own_scores)
                    self.full_own[k, m, at] = own_scores

    def _own_scores(self, kernel, own, r2, points):
        """The score of each point's own key (at distance zero) in the fit
        that holds it: its weight where the width is zero (the keys at
        distance zero), ``alpha(0)`` times its weight otherwise."""
        alpha0 = kernel.squared_function(np.zeros(1))[0]
        scale = np.where(r2 > 0, alpha0, 1.0)
        return np.where(own, scale * self.weights[points], 0.0)

    def _list_scores(self, lists, kernel, r2):
        """The CSR scores ``w_j alpha(u_ij)`` of the pairs of ``lists``
        inside the support at the squared widths ``r2`` of the rows, as
        :meth:`._adaptive.AdaptiveHeldOut._scores` gives them."""
        rows, cols, d2, n_rows = lists
        safe, coincident = safe_radii(r2)
        u2 = edge_values(d2 / safe[rows], kernel.support, np.float64)
        inside = u2 < kernel.support * kernel.support
        on_zero = coincident[rows]
        if on_zero.any():
            # The limit of a vanishing width: the keys at distance zero.
            inside = np.where(on_zero, d2 == 0, inside)
        alpha = kernel.squared_function(u2[inside])
        alpha[on_zero[inside]] = 1.0
        alpha = alpha * self.weights[cols[inside]]
        indptr = np.zeros(n_rows + 1, dtype=np.intp)
        np.cumsum(np.bincount(rows[inside], minlength=n_rows), out=indptr[1:])
        return csr_array(
            (alpha, cols[inside], indptr), shape=(n_rows, len(self.unit_moments))
        )

    def _set_rows(self, out, at, scores, own=None):
        """Set the sums at ``at`` from the CSR ``scores`` (and the scores
        ``own`` of each row's own key, at the row's own point)."""
        out.moments[at] = scores @ self.unit_moments
        if own is not None:
            out.moments[at] += own[:, None] * self.unit_moments[at[2]]
        if out.squares is not None:
            n_rows = scores.shape[0]
            rows = np.repeat(np.arange(n_rows), np.diff(scores.indptr))
            squares = np.bincount(rows, scores.data**2, minlength=n_rows)
            if own is not None:
                squares = squares + own * own
            out.squares[at] = squares

    # -- the memory rule and the refits from the neighbour lists -------------
    def _n_sums(self):
        # The held-out sums and the in-sample ones of leave-one-out.
        return 2 * len(self.kernels) * len(self.n_neighbors)

    def _refit_weights(self, candidate, points, groups, train):
        """:meth:`._adaptive.AdaptiveHeldOut._refit_scores` over the keys of
        the lists of ``points`` (the keys of their fits, their widths
        theirs), and those keys: ``(p, keys)`` of
        :func:`._neighbour_fits.compact_rows`."""
        if train is not None:
            keys = np.unique(train[self.positive[train]])
            parts = [(np.arange(len(points)), keys, False)]
        elif groups is not None:
            parts = [
                (
                    np.flatnonzero(groups[points] == g),
                    np.flatnonzero(self.positive & (groups != g)),
                    False,
                )
                for g in np.unique(groups[points])
            ]
        else:
            parts = [(np.arange(len(points)), np.flatnonzero(self.positive), True)]
        return self._list_weights(candidate, points, parts)

    def _full_weights_of_keys(self, candidate, points):
        """:meth:`._adaptive.AdaptiveHeldOut._full_weights` over the keys of
        the lists of ``points`` (their own included, their widths those of
        the fits on all the data), and those keys."""
        parts = [(np.arange(len(points)), np.flatnonzero(self.positive), False)]
        p, keys = self._list_weights(candidate, points, parts)
        return p / p.sum(axis=1, keepdims=True), keys

    def _list_weights(self, candidate, points, parts):
        """The scores of ``points`` over their lists, ``parts`` a list of
        ``(at, keys, leave_own)``: the rows of ``points``, the keys their
        fits may hold, and whether their own key is left out."""
        kernel, m = self.kernels[candidate[0]], candidate[1]
        rows, cols, scores = [], [], []
        for at, keys, leave_own in parts:
            tree = self._key_tree(keys)
            indptr, found, d2, _ = self._pairs(tree, keys, points[at], leave_own)
            local = np.repeat(np.arange(len(at)), np.diff(indptr))
            radii = self._list_radii(indptr, d2)[m]
            part = self._list_scores((local, found, d2, len(at)), kernel, radii)
            rows.append(at[np.repeat(np.arange(len(at)), np.diff(part.indptr))])
            cols.append(part.indices)
            scores.append(part.data)
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        return compact_rows(rows, cols, np.concatenate(scores), len(points))

    def _key_tree(self, keys):
        """A tree over the points ``keys``, kept for the later batches of
        refits of the same fits (one per fold under K-fold)."""
        trees = self.__dict__.setdefault("_trees", {})
        tag = hash(keys.tobytes())
        if tag not in trees or not np.array_equal(trees[tag][0], keys):
            trees[tag] = (keys, KDTree(self.X_raw[keys]))
        return trees[tag][1]
