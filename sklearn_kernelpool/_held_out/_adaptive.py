"""Held-out predictions of adaptive-width candidates (``n_neighbors``).

Leave-one-out and K-fold scores of the candidates ``(kernel, n_neighbors)``
of :class:`~sklearn_kernelpool.KernelAttentionRegressorCV`, each with the
bandwidth multiplier 1: a held-out point's width is the distance to its
``k``-th nearest key *of its own fit*. Under leave-one-out the point's own
key is not its neighbour (its ``k``-th nearest among the other points, as
refitting without it gives), under K-fold the neighbours are those of the
training part of the split, and rows of weight zero are never neighbours.

Adaptive widths make the kernel matrix asymmetric (a pair's weight depends
on the width of its query), so the symmetric pass of :class:`._pool.HeldOut`
does not apply: each held-out point is pooled over its row of keys, the
rows in batches within ``working_memory``. The squared distances are
computed from exact differences (:func:`.._engine._exact.pairwise_squared`), on
which the fitted estimator takes its decisions too (the neighbour distance,
the support edge, the keys at distance zero), so that the held-out
predictions equal those of the refitted estimator. The pooled moments, the
local-linear solves and the fallbacks are those of :class:`._pool.HeldOut`.

The fits on all the data, for GCV and AICc (:meth:`._pool.HeldOut.in_sample`),
cannot be completed from the leave-one-out sums as for fixed widths: in them
a training point is its own nearest key, so its width (its ``k``-th
neighbour distance, itself counted) differs from that of its leave-one-out
fit. With ``in_sample`` they are pooled in the same batches, from the same
distances, at the point's own width and with its own key (:meth:`_sums`).
"""

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs

from .._engine._adaptive import check_n_neighbors
from .._engine._exact import edge_values, pairwise_squared
from .._utils._threads import single_threaded_blas
from .._utils._working_memory import row_batches
from ._pool import HeldOut

_LOGIT_FLOOR = -700.0
# Bytes per key of a held-out row: its squared distances, mask, partition,
# scaled distances and scores.
ROW_BYTES_PER_KEY = 48


class AdaptiveHeldOut(HeldOut):
    """Held-out pooled sums of adaptive-width candidates.

    Built from the :class:`._pool.HeldOut` of the same data, whose points,
    moments and fallbacks it shares; its candidates are ``kernels`` times
    ``n_neighbors`` (where ``HeldOut`` has ``kernels`` times
    ``bandwidths``).

    Parameters
    ----------
    held_out : HeldOut
        The held-out state of the fixed-width candidates.
    n_neighbors : sequence of int
        The neighbour counts of the candidates.
    """

    def __init__(self, held_out, n_neighbors):
        self.__dict__.update(vars(held_out))
        self.n_neighbors = np.asarray(n_neighbors, dtype=np.intp)
        self.positive = self.weights > 0
        with np.errstate(divide="ignore"):
            self.log_weights = np.log(self.weights)

    @property
    def _shape(self):
        return (len(self.kernels), len(self.n_neighbors))

    # -- the scores of a batch of held-out points --------------------------
    def _distances(self, points, allowed):
        """Exact squared distances of ``points`` to every point, the keys
        that each may pool, and its squared ``k``-th neighbour distance for
        every candidate ``k`` (shape (n_neighbors, n_points))."""
        d2 = pairwise_squared(self.X_raw[points], self.X_raw, None)
        allowed = allowed & self.positive[None, :]
        return d2, allowed, self._radii(d2, allowed)

    def _radii(self, d2, allowed):
        """Squared ``k``-th neighbour distances among the allowed keys, shape
        (n_neighbors, n_points)."""
        kth = np.where(allowed, d2, np.inf)
        kth.partition(np.unique(self.n_neighbors - 1), axis=1)
        radii = kth[:, self.n_neighbors - 1].T
        if not np.all(np.isfinite(radii)):
            raise ValueError(  # the callers check the counts first
                f"n_neighbors={int(self.n_neighbors.max())} exceeds the number "
                "of training points of positive weight of a held-out fit."
            )
        return radii

    def _scores(self, d2, allowed, kernel, r2):
        """Scores ``w alpha(u)`` of the pairs, up to a factor per row."""
        coincident = ~(r2 > 0)
        safe = np.where(coincident, 1.0, r2)
        u2 = d2 / safe[:, None]
        if kernel.log_function is not None:
            logits = kernel.squared_log_function(u2) + self.log_weights
            logits[~allowed] = -np.inf
            logits -= logits.max(axis=1, keepdims=True)
            np.maximum(logits, _LOGIT_FLOOR, out=logits)
            scores = np.exp(logits, out=logits)
        else:
            if kernel.is_compact:
                u2 = edge_values(u2, kernel.support, np.float64)
            scores = kernel.squared_function(u2) * self.weights
        scores[~allowed] = 0.0
        if coincident.any():
            rows = np.flatnonzero(coincident)
            hit = allowed[rows] & (d2[rows] == 0)
            scores[rows] = np.where(hit, self.weights, 0.0)
        return scores

    def _sums(self, points, allowed_rows, n_keys, in_sample=False):
        """Pooled sums of ``points`` for every candidate, in batches of rows
        shared by ``n_jobs`` threads (each holds one within its share of
        ``working_memory``).

        With ``in_sample`` (``points`` every point, which does not pool
        itself), also the sums of the fit on all the data at each point,
        with its own key and its own width (its ``k``-th neighbour counts
        itself), from the same distances, into ``full_sums`` (a
        :class:`._base.HeldOutSums`), and its own key's part of them into
        ``full_own``, in the same scale.
        """
        sums = self._empty_sums(len(points), self.unit_moments.shape[1])
        n_threads = max(1, min(effective_n_jobs(self.n_jobs), len(points)))
        row_bytes = ROW_BYTES_PER_KEY * n_keys * n_threads * (1 + in_sample)
        batches = list(row_batches(len(points), row_bytes))
        if in_sample:
            self.full_sums = self._empty_sums(len(points), sums.moments.shape[-1])
            self.full_own = np.zeros(sums.moments.shape[:-1])

        def run(batch):
            d2, allowed, radii = self._distances(points[batch], allowed_rows(batch))
            if in_sample:
                rows = np.arange(len(d2))
                own = allowed.copy()
                own[rows, points[batch]] = self.positive[points[batch]]
                own_radii = self._radii(d2, own)
            for k, kernel in enumerate(self.kernels):
                for m in range(len(self.n_neighbors)):
                    scores = self._scores(d2, allowed, kernel, radii[m])
                    sums.set_rows((k, m, batch), scores, self.unit_moments)
                    if in_sample:
                        scores = self._scores(d2, own, kernel, own_radii[m])
                        at = (k, m, batch)
                        self.full_sums.set_rows(at, scores, self.unit_moments)
                        self.full_own[k, m, batch] = scores[rows, points[batch]]

        with single_threaded_blas():
            if n_threads == 1 or len(batches) == 1:
                for batch in batches:
                    run(batch)
            else:
                Parallel(n_jobs=n_threads, require="sharedmem")(
                    delayed(run)(batch) for batch in batches
                )
        return sums

    def sums_excluding_groups(self, groups, in_sample=False):
        """Pooled sums of every point over the points of the other groups.

        With ``in_sample`` (leave-one-out only) also the in-sample sums of
        :meth:`in_sample`, from the same distances (see :meth:`_sums`).

        Returns
        -------
        sums : HeldOutSums
            Moments of shape (n_kernels, n_neighbors, n, n_columns).
        """
        n = len(self.X)
        points = np.arange(n)
        k = int(self.n_neighbors.max())
        if groups is None:
            check_n_neighbors(k, int(self.positive.sum()), loo=True)
        else:
            inside = np.bincount(groups, weights=self.positive)
            check_n_neighbors(k, int(self.positive.sum() - inside.max()))

        def allowed_rows(batch):
            if groups is None:
                allowed = np.ones((len(points[batch]), n), dtype=bool)
                allowed[np.arange(len(points[batch])), points[batch]] = False
                return allowed
            return groups[points[batch]][:, None] != groups[None, :]

        return self._sums(points, allowed_rows, n, in_sample and groups is None)

    # -- in-sample fits ------------------------------------------------------
    def _full_sums(self, sums, candidate):
        """The in-sample sums of one candidate, the part of each point's own
        key in them and their sums of squared weights, computed with the
        leave-one-out sums (``sums_excluding_groups(None, in_sample=True)``)."""
        k, m = candidate
        full = self.full_sums
        squares = None if full.squares is None else full.squares[k, m]
        return full.moments[k, m], self.full_own[k, m], squares

    def _full_weights(self, candidate, points):
        """:meth:`._pool.HeldOut._full_weights` at the adaptive widths of the
        fit on all the data."""
        kernel, m = self.kernels[candidate[0]], candidate[1]
        d2 = pairwise_squared(self.X_raw[points], self.X_raw, None)
        allowed = np.broadcast_to(self.positive, d2.shape)
        scores = self._scores(d2, allowed, kernel, self._radii(d2, allowed)[m])
        return scores / scores.sum(axis=1, keepdims=True)

    def sums_split(self, test, train):
        """Pooled sums of the ``test`` points over the ``train`` points."""
        n = len(self.X)
        keep = np.zeros(n, dtype=bool)
        keep[train] = True
        check_n_neighbors(
            int(self.n_neighbors.max()), int(np.count_nonzero(keep & self.positive))
        )
        test = np.asarray(test)
        return self._sums(test, lambda batch: np.tile(keep, (len(test[batch]), 1)), n)

    # -- local-linear rows fitted again about their own means --------------
    def _refit_batches(self, n_rows, n_outputs):
        n, d = self.X.shape
        return row_batches(n_rows, ROW_BYTES_PER_KEY * n * (d + 1))

    def _refit_scores(self, candidate, points, allowed):
        """:meth:`._pool.HeldOut._refit_scores` under the adaptive widths."""
        d2, allowed, radii = self._distances(points, allowed)
        return self._scores(
            d2, allowed, self.kernels[candidate[0]], radii[candidate[1]]
        )
