"""Held-out fits from held-out sums: predictions, refits and fallbacks.

The part of :class:`._pool.HeldOut` that turns held-out pooled sums into
predictions (local-constant or local-linear, with the rows whose moments
cancel fitted again from their keys), and the in-sample fits and the
diagonal of the smoother matrix (:meth:`HeldOutFits.in_sample`). The
``on_empty`` fallbacks of held-out points with no key in their support are
those of :class:`._base.HeldOutPoints`, shared with the binned
held-out sums.
"""

import numpy as np

from .._engine import _centred_fit, _local_linear
from .._engine._exact import edge_values, pairwise_squared
from .._engine._protocol import normalise
from .._engine._safeguard import kish_ratio
from .._utils._working_memory import row_batches
from ._base import HeldOutPoints
from ._quadratic import quadratic_predictions

# Rows of an in-sample local-linear fit computed again together.
_REFIT_ROWS = 32


# Bytes per key of a row that falls back to ``on_empty`` (its squared
# distances, tie tolerances and masks).
FALLBACK_BYTES_PER_KEY = 48


def solve_moments(sums):
    """Predictions and empty rows from pooled sums ``[sum a w y, sum a w]``.

    Parameters
    ----------
    sums : ndarray of shape (..., n_outputs + 1)
        Pooled moments.

    Returns
    -------
    predictions : ndarray of shape (..., n_outputs)
        NaN where the pooled weight is zero.
    empty : ndarray of bool of shape (...)
        Whether the pooled weight is zero.
    """
    predictions, empty = normalise(sums)
    predictions[empty] = np.nan
    return predictions, empty


def allowed_keys(points, n, groups=None, train=None):
    """The keys that each held-out point of ``points`` may pool, (len, n).

    Those of ``train`` (a K-fold split), of the other groups (``groups``, a
    partition), or else every key but the point's own (leave-one-out).
    """
    if train is not None:
        allowed = np.zeros((len(points), n), dtype=bool)
        allowed[:, train] = True
        return allowed
    if groups is not None:
        return groups[points][:, None] != groups[None, :]
    return points[:, None] != np.arange(n)[None, :]


class HeldOutFits(HeldOutPoints):
    """Held-out points whose fits are solved from pooled sums.

    The sums come from a subclass (``sums_excluding_groups``, ``sums_split``:
    the exact pass of :class:`._sums.HeldOutPairs`); the refits of the rows
    whose sums cancel ask it for their scores (``_refit_scores``,
    ``_full_weights``), which the adaptive and categorical engines
    specialise.
    """

    # -- predictions ---------------------------------------------------------
    def predictions(self, sums, rows, groups=None, train=None, degree=None):
        """Held-out predictions of every candidate from its pooled sums.

        Parameters
        ----------
        sums : HeldOutSums
            From :meth:`sums_excluding_groups` (``rows`` every point) or
            :meth:`sums_split` (``rows`` the test points): the moments, of
            shape (n_kernels, n_bandwidths, n_rows, n_columns), and for
            local-linear fits the sums of the squared weights, which set the
            safeguard of each fit (:mod:`.._engine._safeguard`).
        rows : ndarray of int of shape (n_rows,)
            The held-out points.
        groups : ndarray of int of shape (n,) or None
            The groups of :meth:`sums_excluding_groups`; None with ``train``
            None means leave-one-out.
        train : ndarray of int or None
            The training points of :meth:`sums_split`.
        degree : {0, 1, 2} or None
            The degree of the predictions; None means that of the moments.
            Degree 2 is computed from the weights of each point
            (:func:`._quadratic.quadratic_predictions`).
            Degree 0 from the moments of degree 1 takes their columns
            ``[y, 1]``: the local-constant sums are part of the local-linear
            ones.

        Returns
        -------
        predictions : ndarray of shape (n_kernels, n_bandwidths, n_rows, n_outputs)
            NaN where the pooled weight is zero.
        empty : ndarray of bool of shape (n_kernels, n_bandwidths, n_rows)
            Whether the pooled weight is zero.
        singular : ndarray of bool of shape (n_kernels, n_bandwidths, n_rows)
            The rows of positive weight whose local-linear design determines
            no slope (rank 0) and that got the local mean; all False for
            degree 0.
        deficient : ndarray of bool of shape (n_kernels, n_bandwidths, n_rows)
            The rows of positive weight whose local-linear design is
            rank-deficient but determines a slope (minimum-norm solve); all
            False for degree 0.
        shrunk : ndarray of bool of shape (n_kernels, n_bandwidths, n_rows)
            The rows of positive weight whose local-linear slope the
            safeguard of :mod:`.._engine._local_linear` shrank (``s < 1``); all False
            for degree 0.
        """
        if degree == 2:
            return quadratic_predictions(self, sums, rows, groups, train)
        moments = sums.moments
        if self.degree == 0 or degree == 0:
            columns = slice(None)
            center = 0.0
            if self.degree == 1:
                d, p = self.X.shape[1], self.Y.shape[1]
                layout = _local_linear.MomentLayout(d, p, 1)
                columns = np.r_[np.arange(moments.shape[-1])[layout.values], -1]
                center = self.value_center
            predictions, empty = solve_moments(moments[..., columns])
            flags = [np.zeros_like(empty) for _ in range(3)]
            return predictions + center, empty, *flags
        n_keys, centers = self._fit_keys(rows, groups, train)
        layout = _local_linear.MomentLayout(self.X.shape[1], self.Y.shape[1], n_keys)
        predictions = np.empty((*moments.shape[:-1], self.Y.shape[1]))
        rank = np.empty(moments.shape[:-1], dtype=np.intp)
        shrinkage = np.empty(moments.shape[:-1])
        queries = self.X[rows]
        for k, kernel in enumerate(self.kernels):
            for m in range(moments.shape[1]):
                fit = _local_linear.solve(
                    moments[k, m],
                    queries,
                    layout,
                    False,
                    centers,
                    None,
                    True,
                    kish=sums.kish((k, m), kernel),
                )
                predictions[k, m], _, rank[k, m], shrinkage[k, m] = fit
                redo = moments[k, m, :, -1] > 0
                redo &= _local_linear.cancelled(moments[k, m], layout)
                self._refit(
                    predictions[k, m],
                    (rank[k, m], shrinkage[k, m]),
                    redo,
                    (k, m),
                    rows,
                    (n_keys, centers),
                    groups,
                    train,
                )
        predictions += self.value_center
        empty = ~(moments[..., -1] > 0)
        predictions[empty] = np.nan
        singular = ~empty & (rank == 0)
        deficient = ~empty & (rank > 0) & (rank < self.X.shape[1])
        shrunk = ~empty & (shrinkage < 1.0)
        return predictions, empty, singular, deficient, shrunk

    def _refit(self, predictions, flags, redo, candidate, rows, fits, groups, train):
        """Held-out local-linear fits of the ``redo`` rows about their own means.

        For the rows whose moments about the global centres cancel
        (:func:`.._engine._local_linear.cancelled`): their weights over the keys of
        their fit (:meth:`_refit_scores`, in batches of :meth:`_refit_batches`),
        and the two-pass fit of :func:`.._engine._centred_fit.centred_fit`.
        ``predictions`` and ``flags``, the pair ``(rank, shrinkage)`` (those
        of ``candidate``, a (kernel, bandwidth) index pair), are updated in
        place; ``fits`` is the pair of :meth:`_fit_keys`. Subclasses change
        the scores, never the fit.
        """
        redo = np.flatnonzero(redo)
        if not len(redo):
            return
        d = self.X.shape[1]
        values = self.Y - self.value_center
        n_keys, centers = fits
        n_keys = np.broadcast_to(n_keys, (len(rows),))
        for batch in self._refit_batches(len(redo), values.shape[1]):
            at = redo[batch]
            points = rows[at]
            scores, keys = self._refit_weights(candidate, points, groups, train)
            # Rows of no weight (empty neighbourhoods) keep their values: the
            # fallbacks replace them.
            total = scores.sum(axis=1)
            weighed = total > 0
            at, points = at[weighed], points[weighed]
            p = scores[weighed] / total[weighed, None]
            layout = _local_linear.MomentLayout(d, values.shape[1], n_keys[at])
            mean, _, rank, s = _centred_fit.centred_fit(
                p,
                self.X[keys],
                values[keys],
                self.X[points],
                layout,
                False,
                centers[at],
                True,
                kernel=self.kernels[candidate[0]],
            )
            predictions[at], flags[0][at], flags[1][at] = mean, rank, s

    def _refit_batches(self, n_rows, n_outputs):
        """Slices of the rows of :meth:`_refit` computed together."""
        n, d = self.X.shape
        # Per row: its distances and weights, and the work of its fit.
        row = 8 * (d + 4) * n + _centred_fit.fit_bytes(n, d, n_outputs)
        step = max(1, 2**22 // row)
        return (slice(start, start + step) for start in range(0, n_rows, step))

    def _refit_weights(self, candidate, points, groups, train):
        """Unnormalised weights of ``points`` over the keys of their fits, and
        those keys: here every key (:meth:`_refit_scores`, zero where not
        allowed) and ``slice(None)``; the neighbour engines give the keys
        within reach only."""
        allowed = allowed_keys(points, len(self.X), groups, train)
        return self._refit_scores(candidate, points, allowed), slice(None)

    def _refit_scores(self, candidate, points, allowed):
        """Unnormalised weights of ``points`` over every key, zero where not
        ``allowed``, from exact differences, shape (len(points), n)."""
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        allowed = allowed & (self.weights > 0)[None, :]
        # The support's edge decided as every path decides it (:mod:`._exact`).
        u2 = pairwise_squared(self.X_raw[points], self.X_raw, h)
        if np.isfinite(kernel.support):
            u2 = edge_values(u2, kernel.support, np.float64)
        u = np.sqrt(u2)
        return self._masked_scores(kernel.log_function, kernel.function, u, allowed)

    def _masked_scores(self, log_function, function, u, allowed):
        """``function(u) * weights``, zero where not ``allowed``; through
        ``log_function`` with each row's largest logit subtracted where the
        kernel has a log form."""
        with np.errstate(divide="ignore"):
            if log_function is not None:
                logits = log_function(u) + np.log(self.weights)
                logits[~allowed] = -np.inf
                return np.exp(logits - logits.max(axis=1, keepdims=True))
            return np.where(allowed, function(u) * self.weights, 0.0)

    def _fit_keys(self, rows, groups, train):
        """Number and mean of the keys of positive weight of each row's fit.

        The fitted estimator centres its keys on their unweighted mean, over
        the keys of positive weight: the mean of the singular threshold.
        """
        positive = self.weights > 0
        if train is not None:
            keys = self.X[train[positive[train]]]
            n_keys = np.full(len(rows), len(keys))
            return n_keys, np.broadcast_to(
                keys.mean(axis=0), (len(rows), keys.shape[1])
            )
        if groups is None:
            groups = np.arange(len(self.X))
        X = self.X * positive[:, None]
        n_groups = groups.max() + 1
        counts = np.bincount(groups, weights=positive, minlength=n_groups)
        totals = np.zeros((n_groups, X.shape[1]))
        np.add.at(totals, groups, X)
        n_keys = (positive.sum() - counts)[groups[rows]]
        centers = (X.sum(axis=0) - totals[groups[rows]]) / n_keys[:, None]
        return n_keys, centers

    # -- in-sample fits -------------------------------------------------------
    def in_sample(self, sums, degree=None):
        """In-sample fits and self weights of every candidate, from the
        leave-one-out sums.

        The fit of all the data at a training point ``i`` pools the keys of
        its leave-one-out fit and its own key: its sums are the leave-one-out
        sums of the last :meth:`sums_excluding_groups` (with ``groups=None``)
        plus the self term ``c_i = w_i alpha(0)`` times the point's own
        moments (and ``c_i**2`` in the sum of the squared weights, which
        sets the safeguard of degree 1), in the scale of the row (times
        ``exp(-shift)`` where the row was recomputed with a shift, see
        :attr:`log_scale`). For degree 0
        the self weight is ``L_ii = c_i / (D_{-i} + c_i)`` and the fit
        ``(N_{-i} + c_i y_i) / (D_{-i} + c_i)``; for degree 1 the fit is the
        local-linear solve of the completed moments about the mean of the
        keys of positive weight and ``L_ii = p_ii (1 + g . (m - x_i))``, the
        equivalent-kernel weight of :func:`.._engine._local_linear.equivalent_kernel`
        (minimum-norm where the design is rank-deficient, ``p_ii`` on rank
        0); rows whose moments cancel are fitted again about their own
        means from their weights over every key, as the estimator does. No
        other pass over the pairs of points is made.

        Parameters
        ----------
        sums : HeldOutSums
            The leave-one-out sums of :meth:`sums_excluding_groups`.
        degree : {0, 1} or None
            As for :meth:`predictions`.

        Returns
        -------
        fitted : ndarray of shape (n_kernels, n_bandwidths, n, n_outputs)
            The in-sample fits; NaN on rows of weight zero that pool nothing.
        self_weight : ndarray of shape (n_kernels, n_bandwidths, n)
            ``L_ii``; 0 on rows of weight zero.
        """
        degree = self.degree if degree is None else degree
        positive = self.weights > 0
        n, d = self.X.shape
        p = self.Y.shape[1]
        moments = sums.moments
        fitted = np.empty((*moments.shape[:-1], p))
        self_weight = np.zeros(moments.shape[:-1])
        layout = None
        columns = slice(None)
        if self.degree == 1:
            layout = _local_linear.MomentLayout(d, p, int(positive.sum()))
            if degree == 0:
                columns = np.r_[np.arange(moments.shape[-1])[layout.values], -1]
        for k in range(moments.shape[0]):
            for m in range(moments.shape[1]):
                full, own, squares = self._full_sums(sums, (k, m))
                total = full[:, -1]
                with np.errstate(invalid="ignore", divide="ignore"):
                    p_self = np.where(positive, own / total, 0.0)
                if degree == 0:
                    fitted[k, m], _ = solve_moments(full[:, columns])
                    self_weight[k, m] = p_self
                else:
                    kish = kish_ratio(squares, total, self.kernels[k])
                    fitted[k, m], self_weight[k, m] = self._in_sample_linear(
                        full, p_self, kish, layout
                    )
                    redo = positive & _local_linear.cancelled(full, layout)
                    self._in_sample_refit(fitted[k, m], self_weight[k, m], redo, (k, m))
                fitted[k, m] += self.value_center
        return fitted, self_weight

    def _in_sample_linear(self, full, p_self, kish, layout):
        """In-sample local-linear fits and self weights of one candidate
        from its in-sample sums ``full``, the normalised weights ``p_self``
        of each point's own key and ``kish``, ``1 / n_eff`` of each point's
        weights: one eigendecomposition per row for the fit (as
        :func:`.._engine._local_linear.solve`) and the self weight (as
        :func:`.._engine._local_linear.equivalent_kernel`)."""
        n, d = self.X.shape
        p = self.Y.shape[1]
        with np.errstate(invalid="ignore", divide="ignore"):
            means = full[:, :-1] / full[:, -1:]
        local, vectors, inverse, _, s = _local_linear._local_geometry(
            means, self.X, layout, kish=kish
        )
        ybar = means[:, layout.values]
        cross = means[:, layout.cross].reshape(n, d, p)
        cross -= local[:, :, None] * ybar[:, None]
        fitted, _ = _local_linear._fit(
            local, vectors, inverse, ybar, cross, None, self.X, s
        )
        offset = (local - self.X)[:, :, None]
        g = _local_linear._apply_inverse(vectors, inverse, offset)
        own_weight = p_self * (1.0 + np.einsum("nfo,nfo->n", g, offset))
        return fitted, np.where(self.weights > 0, own_weight, 0.0)

    def _full_sums(self, sums, candidate):
        """The in-sample sums of every point for one candidate, the part of
        each point's own key in them, and their sums of squared weights: the
        leave-one-out ``sums`` plus the self term, divided by ``max(1, c_i)``
        (in the row's scale) so that none overflows.

        Returns ``full`` (n, n_columns), ``own`` (n,) and ``squares`` (n,)
        (None where ``sums`` hold none, for degree 0).
        """
        k, m = candidate
        kernel = self.kernels[k]
        with np.errstate(divide="ignore"):
            log_alpha0 = float(np.log(np.ravel(kernel.function(np.zeros(1)))[0]))
            log_self = np.log(self.weights) + log_alpha0 - self.log_scale[k, m]
        top = np.maximum(log_self, 0.0)
        own = np.exp(log_self - top)
        scale = np.exp(-top)
        full = sums.moments[k, m] * scale[:, None]
        full += own[:, None] * self.unit_moments
        if sums.squares is None:
            return full, own, None
        return full, own, sums.squares[k, m] * scale * scale + own * own

    def _in_sample_refit(self, fitted, self_weight, redo, candidate):
        """In-sample local-linear fits and self weights of the ``redo`` rows
        about their own means, from their weights over every key of positive
        weight; updated in place.

        The computation of :func:`.._engine._centred_fit.centred_kernel` and
        :func:`.._engine._centred_fit.centred_fit` (the keys and values centred on
        each row's local means before any product, the same rank threshold),
        vectorised over a batch of rows: the equivalent-kernel weights
        ``l_j = p_j (1 - g . (k_j - m))``, the self weight ``l_i`` and the fit
        ``ybar + sum_j l_j (y_j - ybar)``.
        """
        # Rows in the order of the k-d tree's leaves, a few at a time: the
        # keys that any of them weighs are then few where the bandwidth is
        # narrow (where moments cancel most).
        rank = np.empty(len(self.X), dtype=np.intp)
        rank[self.spatial_order] = np.arange(len(self.X))
        redo = np.flatnonzero(redo)
        redo = redo[np.argsort(rank[redo])]
        n, d = self.X.shape
        values = self.Y - self.value_center
        p_out = values.shape[1]
        n_keys = int(np.count_nonzero(self.weights > 0))
        layout = _local_linear.MomentLayout(d, p_out, n_keys)
        # Per row: differences, centred and weighted keys, weights, values.
        row = 8 * n * (4 * d + 4 + 2 * p_out)
        for batch in row_batches(len(redo), row):
            for start in range(batch.start, batch.stop, _REFIT_ROWS):
                points = redo[start : min(start + _REFIT_ROWS, batch.stop)]
                self._in_sample_rows(fitted, self_weight, points, candidate, layout)

    def _in_sample_rows(self, fitted, self_weight, points, candidate, layout):
        """:meth:`_in_sample_refit` of the rows ``points``, over the keys
        that any of them weighs."""
        p, keys = self._full_weights_of_keys(candidate, points)
        X = self.X[keys]
        values = self.Y[keys] - self.value_center
        m = p @ X
        centred = X[None, :, :] - m[:, None, :]
        cov = (centred * p[:, :, None]).transpose(0, 2, 1) @ centred
        scale = _centred_fit._centred_scale(m, cov, None)
        offset = m - self.X[points]
        kish = kish_ratio(np.einsum("rn,rn->r", p, p), 1.0, self.kernels[candidate[0]])
        vectors, inverse, _, _ = _local_linear._pseudo_inverse(
            cov, scale, layout, offset, kish
        )
        g = _local_linear._apply_inverse(vectors, inverse, offset[:, :, None])
        weights = p * (1.0 - (centred @ g)[:, :, 0])
        ybar = p @ values
        spread = values[None, :, :] - ybar[:, None, :]
        fitted[points] = ybar + (weights[:, None, :] @ spread)[:, 0]
        # A point whose own weight underflowed to zero is not among the keys.
        own = np.minimum(np.searchsorted(keys, points), len(keys) - 1)
        own_weight = weights[np.arange(len(points)), own]
        self_weight[points] = np.where(keys[own] == points, own_weight, 0.0)

    def _full_weights_of_keys(self, candidate, points):
        """:meth:`_full_weights` on the keys that any of ``points`` weighs,
        and those keys (sorted), shape (len(points), n_keys)."""
        p = self._full_weights(candidate, points)
        keys = np.flatnonzero(p.any(axis=0))
        return p[:, keys], keys

    def _full_weights(self, candidate, points):
        """Normalised weights of ``points`` over every key of positive
        weight, themselves included, shape (len(points), n)."""
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        allowed = np.broadcast_to(self.weights > 0, (len(points), len(self.X)))
        u2 = pairwise_squared(self.X[points], self.X, None) / (h * h)
        log_function = (
            None if kernel.log_function is None else kernel.squared_log_function
        )
        scores = self._masked_scores(log_function, kernel.squared_function, u2, allowed)
        return scores / scores.sum(axis=1, keepdims=True)
