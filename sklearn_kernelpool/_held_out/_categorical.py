"""Held-out predictions with categorical features, for the CV estimators.

:class:`CategoricalHeldOut` is :class:`._pool.HeldOut` with the unordered
and ordered kernels of :mod:`.._engine._categorical` in every weight: for
one vector of ``lambda_j``, the held-out sums of every candidate (kernel,
bandwidth) over the continuous features, each held-out point against every
allowed key (not itself under leave-one-out, not its fold under K-fold), in
batches of rows within scikit-learn's ``working_memory``. Kernels with a log
form are pooled as a softmax over the allowed keys with the row's largest
logit subtracted (the factor added to the logits), so that no row
underflows; the sums are then the true sums times a positive factor per row,
which leaves the predictions unchanged. The symmetric, block-skipping pass
of :class:`._pool.HeldOut` does not apply: a pair's weight depends on the
categories of both of its points, and the factor would have to be computed
for every block and candidate anyway. The predictions, fallbacks and
local-linear solves are those of :class:`._pool.HeldOut`, and so are the
in-sample fits of :meth:`._pool.HeldOut.in_sample` (the shift of each row is
kept in ``log_scale``; a point's own category has the factor 1).

The held-out fits read the codes of their training part
(:mod:`._levels`): an ordered feature whose levels are the sorted values
seen in ``fit`` is numbered among the levels of the part, as a refit on it
numbers them; the in-sample fits read those of all the points.
"""

import numpy as np

from .._engine._categorical import CategoricalFactor
from .._engine._exact import pairwise_squared
from .._utils._threads import single_threaded_blas
from .._utils._working_memory import row_batches
from ._levels import HeldOutLevels, PartCodings
from ._pool import HeldOut

# Bytes per (row, key) pair of a batch: distances, logits or scores, the
# factor and the masks, in float64.
PAIR_BYTES = 48
# Each float64 array of a batch is about this size, so that every candidate
# is pooled from its distances while they are in cache.
CACHE_BYTES = 2**18


def _cached_batches(n_rows, n_keys):
    """Batches of rows of about CACHE_BYTES per array, within working_memory."""
    step = max(1, CACHE_BYTES // (8 * max(n_keys, 1)))
    for batch in row_batches(n_rows, PAIR_BYTES * n_keys):
        for start in range(batch.start, batch.stop, step):
            yield slice(start, min(start + step, batch.stop))


class CategoricalHeldOut(HeldOut):
    """Held-out sums with the categorical factor of ``lambdas``.

    Parameters
    ----------
    X : ndarray of shape (n, n_continuous)
        The continuous features, float64 (one constant column when there is
        none).
    codes : ndarray of int of shape (n, n_categorical)
        The category codes.
    lambdas : ndarray of shape (n_categorical,)
        The weight of a category at distance 1, per feature.
    *args, **kwargs
        As for :class:`._pool.HeldOut`.
    levels : ndarray of int of shape (n_categorical,) or None, default=None
        The number of levels of each ordered feature, 0 for an unordered
        one; None: every feature unordered.
    sorted_levels : ndarray of bool of shape (n_categorical,) or None, \
            default=None
        The ordered features whose levels are the sorted values seen in
        ``fit``, numbered among those of each training part
        (:class:`._levels.HeldOutLevels`); None: none.

    Attributes
    ----------
    parts : :class:`._levels.PartCodings`
        Set by :meth:`sums_excluding_groups` and :meth:`sums_split`: the
        codes of the fit of each held-out row, which the refits of
        :meth:`predictions` read.
    """

    def __init__(
        self, X, codes, lambdas, *args, levels=None, sorted_levels=None, **kwargs
    ):
        super().__init__(X, *args, **kwargs)
        self.codes = np.asarray(codes, dtype=np.intp)
        self.factor = CategoricalFactor(self.codes, lambdas, levels)
        self.positions = HeldOutLevels(self.codes, levels, sorted_levels)
        self.parts = PartCodings([self.positions.full])
        # The leave-one-out sums and shifts of the rows whose held-out codes
        # are not those of all the points, in the latter (:meth:`in_sample`).
        self._recoded_in_sample = None

    def _log_base(self, rows, keys, allowed, parts=None):
        """``log w_i + sum_j D_j log lambda_j`` of the pairs, ``-inf`` where
        the key is not allowed (or weighs nothing), with the codes of each
        row's fit in ``parts`` (those of all the points where None)."""
        with np.errstate(divide="ignore"):
            base = np.broadcast_to(np.log(self.weights[keys]), allowed.shape).copy()
        if parts is None:
            parts = PartCodings([self.positions.full])
        for where, coding in parts.split(rows):
            factor = CategoricalFactor(
                coding.keys[keys], self.factor.lambdas, coding.levels
            )
            part = base[where]
            factor.for_queries(coding.queries[rows[where]]).add_log(part)
            base[where] = part
        base[~allowed] = -np.inf
        return base

    @staticmethod
    def _scores(kernel, h, base, d2, out, factor=None, shifts=None):
        """Scores of a batch from its squared distances and :meth:`_log_base`
        (``factor``, its exponential, for kernels without a log form), into
        ``out``, up to a positive factor per row, ``exp(-shift)``: the shifts
        are written into ``shifts`` if given (0 for kernels without a log
        form)."""
        np.multiply(d2, 1.0 / (h * h), out=out)
        if kernel.log_function is None:
            out = kernel.squared_function(out)
            out *= np.exp(base) if factor is None else factor
            return out
        out = kernel.squared_log_function(out)
        out += base
        top = out.max(axis=1, keepdims=True)
        top[~np.isfinite(top)] = 0.0  # rows that weigh no key: empty
        out -= top
        if shifts is not None:
            shifts[...] = top[:, 0]
        return np.exp(out, out=out)

    def _sums(self, rows, keys, allowed_rows, shifts=None, parts=None):
        """Sums of ``rows`` over ``keys`` for every candidate;
        ``allowed_rows(batch)`` the keys each row of a batch may pool, and
        ``parts`` the codes of each row's fit (:meth:`_log_base`). The
        shift of each row's sums goes into ``shifts`` if given, shape
        (n_kernels, n_bandwidths, len(rows))."""
        sums = self._empty_sums(len(rows), self.unit_moments.shape[1])
        if shifts is None:
            shifts = np.zeros(sums.moments.shape[:-1])
        moments = self.unit_moments[keys]
        flat = any(kernel.log_function is None for kernel in self.kernels)
        # Batches of a few rows: BLAS threads cost more than they save on
        # their products (1.5 times the time of one thread on 1,000 rows
        # against 260,000), as in the dense pass of :class:`._pool.HeldOut`.
        with single_threaded_blas():
            for batch in _cached_batches(len(rows), len(keys)):
                at = rows[batch]
                d2 = pairwise_squared(self.X[at], self.X[keys], None)
                base = self._log_base(at, keys, allowed_rows(batch), parts)
                factor = np.exp(base) if flat else None
                out = np.empty_like(d2)
                for k, kernel in enumerate(self.kernels):
                    for m, h in enumerate(self.bandwidths):
                        scores = self._scores(
                            kernel, h, base, d2, out, factor, shifts[k, m, batch]
                        )
                        sums.set_rows((k, m, batch), scores, moments)
        return sums

    def sums_excluding_groups(self, groups):
        n = len(self.X)
        points = np.arange(n)
        if groups is None:

            def allowed(batch):
                return points[batch][:, None] != points[None, :]

        else:

            def allowed(batch):
                return groups[batch][:, None] != groups[None, :]

        self.parts = self.positions.parts(groups)
        self._recoded_in_sample = None
        self.log_scale = np.zeros((*self._shape, n))
        return self._sums(points, points, allowed, self.log_scale, self.parts)

    def in_sample(self, sums, degree=None):
        """:meth:`._pool.HeldOut.in_sample` in the codes of all the points:
        the leave-one-out sums of the rows whose held-out fit reads other
        codes (a level the row holds alone) are pooled in them first."""
        rows = self.positions.recoded_rows()
        if not len(rows):
            return super().in_sample(sums, degree)
        if self._recoded_in_sample is None:
            points = np.arange(len(self.X))
            shifts = np.zeros((*self._shape, len(rows)))

            def others(batch):
                return rows[batch][:, None] != points[None, :]

            self._recoded_in_sample = self._sums(rows, points, others, shifts), shifts
        # The rows swapped in place (no copy of the sums), then put back.
        arrays = [sums.moments, self.log_scale]
        recoded, shifts = self._recoded_in_sample
        swapped = [recoded.moments, shifts]
        if sums.squares is not None:
            arrays.append(sums.squares)
            swapped.append(recoded.squares)
        held = [array[:, :, rows] for array in arrays]
        for array, values in zip(arrays, swapped, strict=True):
            array[:, :, rows] = values
        try:
            return super().in_sample(sums, degree)
        finally:
            for array, values in zip(arrays, held, strict=True):
                array[:, :, rows] = values

    def _full_weights(self, candidate, points):
        """:meth:`._pool.HeldOut._full_weights` with the categorical factor."""
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        n = len(self.X)
        d2 = pairwise_squared(self.X[points], self.X, None)
        allowed = np.ones((len(points), n), dtype=bool)
        base = self._log_base(points, np.arange(n), allowed)
        scores = self._scores(kernel, h, base, d2, np.empty_like(d2))
        return scores / scores.sum(axis=1, keepdims=True)

    def sums_split(self, test, train):
        # The codes of the fit of every training point, of any weight.
        self.parts = self.positions.parts(train=train)
        train = train[self.weights[train] > 0]
        if len(train) == 0:
            raise ValueError(
                "A cross-validation split has no training point of positive weight."
            )

        def allowed(batch):
            return np.ones((batch.stop - batch.start, len(train)), dtype=bool)

        return self._sums(np.asarray(test), train, allowed, parts=self.parts)

    def _refit_batches(self, n_rows, n_outputs):
        n, d = self.X.shape
        return row_batches(n_rows, 8 * n * (d * d + d + 8))

    def _refit_scores(self, candidate, points, allowed):
        """:meth:`._pool.HeldOut._refit_scores` with the categorical factor,
        in the codes of the held-out fits of the last sums (:attr:`parts`)."""
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        d2 = pairwise_squared(self.X[points], self.X, None)
        base = self._log_base(points, np.arange(len(self.X)), allowed, self.parts)
        return self._scores(kernel, h, base, d2, np.empty_like(d2))
