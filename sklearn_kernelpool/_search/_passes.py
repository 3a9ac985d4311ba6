"""The held-out passes of the bandwidth search: leave-one-out and K-fold
predictions of every candidate from one pass over the pairs of points, their
fallbacks, and the in-sample criteria of the smoother."""

import numpy as np

from .._held_out._criteria import in_sample_criteria
from .._held_out._fits import FALLBACK_BYTES_PER_KEY
from .._held_out._quadratic import quadratic_in_sample
from .._utils._row_blocks import map_row_blocks
from .._utils._working_memory import row_batches


def _stacked_flags(held_out_predictions):
    """``(predictions, empty, flags)`` of :meth:`HeldOut.predictions`' five
    arrays: the singular, the rank-deficient and the shrunk rows stacked on
    a last axis."""
    predictions, empty, *flags = held_out_predictions
    return predictions, empty, np.stack(flags, axis=-1)


def _partition_groups(splits, n):
    """The fold of each point when the test sets partition the points and
    each training set is the rest of them; None otherwise."""
    groups = np.full(n, -1)
    for s, (_, test) in enumerate(splits):
        if np.any(groups[test] >= 0) or len(np.unique(test)) != len(test):
            return None
        groups[test] = s
    if np.any(groups < 0):
        return None
    for s, (train, test) in enumerate(splits):
        if len(train) + len(test) != n or np.any(groups[train] == s):
            return None
        if len(np.unique(train)) != len(train):
            return None
    return groups


class HeldOutPasses:
    """The held-out predictions and scores of the candidates of a held-out
    engine (:mod:`.._held_out`), leave-one-out or K-fold.

    Parameters
    ----------
    policy : RegressionScoring or ProbabilityScoring or None
        Scores the held-out predictions (:mod:`._scores`, :mod:`._proba`);
        None where only the predictions are asked for.
    on_empty : {"nearest", "mean", "nan", "raise"}
        The fallback of a held-out point with no key in its support.
    in_sample : bool, default=False
        Whether leave-one-out also gives the in-sample criteria of every
        candidate (``scoring="gcv"`` or ``"aicc"``).
    point_errors : bool, default=False
        Whether leave-one-out keeps the per-point squared errors of every
        candidate in :attr:`last_errors` (the rules of small tables).

    Attributes
    ----------
    last_errors : ndarray of shape (n_candidates, n) or None
        With ``point_errors``, those of the last leave-one-out pass.
    """

    def __init__(self, policy, on_empty, in_sample=False, point_errors=False):
        self.policy = policy
        self.on_empty = on_empty
        self.in_sample = in_sample
        self.point_errors = point_errors
        self.last_errors = None

    def fallback(self, held_out, predictions, empty, queries, allowed_rows):
        """Fill the empty rows of ``predictions`` (candidates, rows, outputs).

        ``queries`` are the indices of the rows among the training points, and
        ``allowed_rows(rows)`` the keys that each of these rows may pool.
        """
        rows = np.flatnonzero(empty.any(axis=0))
        if self.on_empty in ("nan", "raise"):
            return
        # The rows in batches within working_memory: each needs its keys.
        row_bytes = FALLBACK_BYTES_PER_KEY * held_out.X.shape[0]
        for batch in row_batches(len(rows), row_bytes):
            chunk = rows[batch]
            allowed = allowed_rows(chunk)
            if self.on_empty == "nearest":
                values = held_out.nearest_values(queries[chunk], allowed)
            else:
                values = held_out.mean_values(allowed)
            for c in range(predictions.shape[0]):
                hit = empty[c, chunk]
                predictions[c, chunk[hit]] = values[hit]

    def _flat(self, held_out, sums, rows, degrees, groups=None, train=None):
        """Predictions, empty and flagged rows of every fixed-width candidate,
        in ``params`` order (see :meth:`HeldOut.predictions`).

        With two degrees, both come from the same sums (those of degree 1).
        The flags stack the singular, the rank-deficient and the shrunk rows
        on the last axis.
        """
        parts = [
            _stacked_flags(held_out.predictions(sums, rows, groups, train, degree=d))
            for d in degrees
        ]
        flat = []
        for i in range(3):
            # (degrees, kernels, bandwidths, ...) -> ParameterGrid's order:
            # bandwidth, then degree, then kernel.
            stacked = np.stack([part[i] for part in parts])
            stacked = np.moveaxis(stacked, 2, 0)
            flat.append(stacked.reshape(-1, *stacked.shape[3:]))
        return tuple(flat)

    def held_out(
        self,
        held_out,
        rows,
        degrees,
        groups=None,
        train=None,
        in_sample=False,
        adaptive=None,
    ):
        """Held-out predictions, empty and flagged rows of every candidate of
        ``held_out`` (fixed widths) or of the adaptive candidates of
        ``adaptive`` (an :class:`.._held_out._adaptive.AdaptiveHeldOut` of
        ``held_out``), in ``params`` order.

        ``train`` None: every point, excluding its group (its own key under
        leave-one-out when ``groups`` is None); else the ``rows`` held out
        from the ``train`` points. With ``in_sample`` (leave-one-out of fixed
        widths only) also the in-sample summaries of every candidate
        (:meth:`_in_sample`), from the same sums.
        """
        pool = adaptive
        if pool is None:
            if train is None:
                sums = held_out.sums_excluding_groups(groups)
            else:
                sums = held_out.sums_split(rows, train)
            flat = self._flat(held_out, sums, rows, degrees, groups, train)
            if in_sample:
                return *flat, self._in_sample(held_out, sums, degrees)
            return flat
        if train is None:
            sums = pool.sums_excluding_groups(groups, in_sample=in_sample)
        else:
            sums = pool.sums_split(rows, train)
        # (degrees, kernels, n_neighbors, ...) is ParameterGrid's order.
        parts = [
            _stacked_flags(pool.predictions(sums, rows, groups, train, degree=d))
            for d in degrees
        ]
        flat = tuple(
            np.stack([part[i] for part in parts]).reshape(-1, *parts[0][i].shape[2:])
            for i in range(3)
        )
        if in_sample:
            return *flat, self._in_sample(pool, sums, degrees, adaptive=True)
        return flat

    def _in_sample(self, held_out, sums, degrees, adaptive=False):
        """``effective_df``, ``gcv`` and ``aicc`` of every candidate of
        ``held_out`` fitted on all the data, in ``params`` order, from the
        leave-one-out pass (:meth:`.._held_out._pool.HeldOut.in_sample`)."""
        parts = []
        for d in degrees:
            if d == 2:
                shape = sums.moments.shape[:2]
                fitted, self_weight = quadratic_in_sample(held_out, shape)
            else:
                fitted, self_weight = held_out.in_sample(sums, degree=d)
            parts.append(
                in_sample_criteria(held_out.Y, held_out.weights, fitted, self_weight)
            )
        # (degrees, 4, kernels, bandwidths) -> ParameterGrid's order:
        # bandwidth, then degree, then kernel; (degrees, kernels,
        # n_neighbors) is already that of the adaptive candidates.
        order = (1, 0, 2, 3) if adaptive else (1, 3, 0, 2)
        stacked = np.asarray(parts).transpose(order).reshape(4, -1)
        return {"effective_df": stacked[0], "gcv": stacked[2], "aicc": stacked[3]}

    def loo(self, held_out, data, degrees, adaptive=None):
        """The leave-one-out results of every candidate of ``held_out`` (or
        of ``adaptive``, see :meth:`held_out`) on the search's ``data``
        (:class:`._data.SearchData`)."""
        X, y, weights = data.X, data.y, data.weights
        n = X.shape[0]
        predictions, empty, singular, *summaries = self.held_out(
            held_out, np.arange(n), degrees, in_sample=self.in_sample, adaptive=adaptive
        )

        def others(rows):
            allowed = np.ones((len(rows), n), dtype=bool)
            allowed[np.arange(len(rows)), rows] = False
            return allowed

        self.fallback(held_out, predictions, empty, np.arange(n), others)
        if self.point_errors:
            # The per-point losses of the degree rule (small tables only).
            self.last_errors = np.mean((predictions - held_out.Y[None]) ** 2, axis=2)
        shrunk = singular[..., 2] if max(degrees) >= 1 else None
        results = self.policy.loo_scores(
            held_out,
            predictions,
            empty,
            X,
            y,
            weights,
            data.scorer,
            data.weighted,
            shrunk=shrunk,
        )
        results["empty_fraction"] = empty.mean(axis=1)
        if max(degrees) >= 1:
            results["singular_fraction"] = singular[..., 0].mean(axis=1)
            results["rank_deficient_fraction"] = singular[..., 1].mean(axis=1)
            results["shrunk_fraction"] = singular[..., 2].mean(axis=1)
        for summary in summaries:
            results.update(summary)
        return results

    def kfold(self, held_out, data, degrees, adaptive=None):
        """The K-fold results of every candidate of ``held_out`` (or of
        ``adaptive``, see :meth:`held_out`) on the search's ``data``
        (:class:`._data.SearchData`), over its ``splits``."""
        X, y, sample_weight = data.X, data.y, data.sample_weight
        scorer, splits = data.scorer, data.splits
        if scorer is None:
            scorer = self.policy.default_scorer()
        for train, _ in splits:
            if not np.any(held_out.weights[train] > 0):
                raise ValueError(
                    "A cross-validation split has no training sample of positive "
                    "weight."
                )
        per_split = self._fold_predictions(held_out, splits, degrees, adaptive)
        n_candidates = per_split[0][1].shape[0]
        split_scores = np.empty((n_candidates, len(splits)))
        n_empty = np.zeros(n_candidates)
        n_singular = np.zeros((n_candidates, 3))
        n_held_out = 0
        for s, (test, pred, emp, sing) in enumerate(per_split):
            n_empty += emp.sum(axis=1)
            n_singular += sing.sum(axis=1)
            n_held_out += len(test)
            bad = emp.any(axis=1) & (self.on_empty in ("nan", "raise"))
            w_test = None if sample_weight is None else sample_weight[test]
            split_scores[:, s] = self.policy.split_scores(
                held_out, splits[s], pred, bad, X, y, w_test, scorer
            )
        results = {
            f"split{s}_test_score": split_scores[:, s] for s in range(len(splits))
        }
        results["mean_test_score"] = split_scores.mean(axis=1)
        results["std_test_score"] = split_scores.std(axis=1)
        results["empty_fraction"] = n_empty / n_held_out
        if max(degrees) >= 1:
            results["singular_fraction"] = n_singular[:, 0] / n_held_out
            results["rank_deficient_fraction"] = n_singular[:, 1] / n_held_out
            results["shrunk_fraction"] = n_singular[:, 2] / n_held_out
        return results

    def _fold_predictions(self, held_out, splits, degrees, adaptive):
        """``(test, predictions, empty, flags)`` of each split, the
        fallbacks filled: from one pass where the test sets partition the
        points (each excluding its fold), else one pass per split."""
        n = held_out.X.shape[0]
        groups = _partition_groups(splits, n)
        if groups is not None:
            predictions, empty, singular = self.held_out(
                held_out, np.arange(n), degrees, groups=groups, adaptive=adaptive
            )
            self.fallback(
                held_out,
                predictions,
                empty,
                np.arange(n),
                lambda rows: groups[rows][:, None] != groups[None, :],
            )
            per_split = [
                (test, predictions[:, test], empty[:, test], singular[:, test])
                for _, test in splits
            ]
        else:
            per_split = []
            for train, test in splits:
                # (in blocks of rows where a caller maps them: on dask)
                light = HeldOutPasses(None, self.on_empty)
                shared = (light, held_out, train, degrees, adaptive)
                if getattr(held_out, "rows_apart", False):
                    parts = map_row_blocks(_split_rows, shared, test)
                else:
                    parts = _split_rows(shared, test)
                per_split.append((test, *parts))
        return per_split


def _split_rows(shared, test):
    """``(predictions, empty, flags)`` of the ``test`` rows of one split,
    their fallbacks filled; ``shared`` are ``(passes, held_out, train,
    degrees, adaptive)``."""
    passes, held_out, train, degrees, adaptive = shared
    pred, emp, sing = passes.held_out(
        held_out, test, degrees, train=train, adaptive=adaptive
    )
    keep = np.zeros(held_out.X.shape[0], dtype=bool)
    keep[train] = True
    passes.fallback(
        held_out, pred, emp, test, lambda rows: np.tile(keep, (len(rows), 1))
    )
    return pred, emp, sing
