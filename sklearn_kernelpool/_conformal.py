"""Jackknife+ and CV+ prediction intervals from closed-form leave-out fits.

Jackknife+ (Barber, Candes, Ramdas and Tibshirani, "Predictive inference
with the jackknife+", Ann. Statist. 49 (2021)) needs, at every query ``q``,
the fits ``mu_{-i}(q)`` of the model without each training row ``i`` and the
leave-one-out residuals ``R_i = |y_i - mu_{-i}(x_i)|``. For attention
pooling they follow from the same weights as the prediction, without any
refit:

- degree 0: with ``p_i`` the normalised weights of ``q`` and ``f = sum_i p_i
  y_i``, ``mu_{-i}(q) = (f - p_i y_i) / (1 - p_i)``;
- degree 1: the case-deletion formula of the weighted least squares at
  ``q``: ``mu_{-i}(q) = f(q) - l_i r_i / (1 - h_ii)`` with ``l_i`` the
  equivalent-kernel weight, ``r_i = y_i - b - beta . (k_i - q)`` the residual
  of key ``i`` from the local model and ``h_ii = p_i (1 + (k_i - m)^T C^+
  (k_i - m))`` its local leverage (``m``, ``C`` the local mean and covariance
  of the keys, ``C^+`` the pseudo-inverse of the fit). Deleting a key that
  leaves the column space of the design unchanged (``1 - h_ii > 0``) is a
  rank-preserving update, for which Sherman-Morrison holds with ``C^+``.

The pairs ``(q, i)`` where the formula is undefined (``i`` holds all the
weight of ``q``, ``1 - h_ii`` below 1e-6, or the fallback of an empty
neighbourhood depends on ``i``) are computed by the definition: the engine
built without row ``i`` (its sample weight set to zero), with the same
widths and ``on_empty`` policy, predicts at ``q``; the engines without
single rows are kept within ``working_memory``. CV+ does the same with the
moments summed over the keys outside each fold.

A key ``j`` of weight zero at ``q`` leaves the fit unchanged:
``mu_{-j}(q) = f(q)``. On a tree, a query whose weights are nonzero on few
keys (its neighbours ``N``) takes the order statistics of ``{f + R_j : j not
in N}`` and ``{mu_{-j}(q) + R_j : j in N}`` from ``N`` and a window of the
residuals sorted once (:func:`_select_sparse`), and the residual of a
training row from its own weight, so that both passes visit only the
neighbours, as ``predict`` does.
"""

import warnings
from fractions import Fraction
from numbers import Integral, Real

import numpy as np
from scipy.sparse import csr_array
from sklearn.model_selection import check_cv

from . import _local_linear
from ._base import validate_queries
from ._chunking import row_batches, working_memory_bytes
from ._exceptions import EmptyNeighborhoodWarning, LocalLinearFallbackWarning

METHODS = ("jackknife+", "cv+")
_EPS = float(np.finfo(np.float64).eps)
# A leave-out denominator below this (in units of the query's total weight)
# has lost the weights of the remaining keys to underflow: computed exactly.
_TINY_REST = 1e-150
# Leverages this close to one drop the rank of the local design.
_LEVERAGE_MARGIN = 1e-6


def order_ranks(level, n):
    """The 1-based ranks of the paper's two order statistics.

    ``floor(alpha (n + 1))`` for the lower bound (0: minus infinity) and
    ``ceil((1 - alpha) (n + 1))`` for the upper (above ``n``: infinity), with
    ``alpha = 1 - level`` computed on the decimal that ``level`` prints as,
    so that ``level=0.9`` and ``n=19`` give ranks 2 and 18 exactly.
    """
    exact = Fraction(repr(float(level)))
    alpha = 1 - exact
    low = (alpha * (n + 1)).__floor__()
    high = (exact * (n + 1)).__ceil__()
    return int(low), int(high)


def _check_arguments(estimator, level, method, cv, n):
    if isinstance(level, (bool, np.bool_)) or not isinstance(level, Real):
        raise ValueError(f"level must be a float in (0, 1); got {level!r}.")
    if not 0 < level < 1:
        raise ValueError(f"level must be a float in (0, 1); got {level!r}.")
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}; got {method!r}.")
    if getattr(estimator, "n_neighbors", None) is not None:
        raise ValueError(
            "prediction_interval does not support adaptive widths "
            f"(n_neighbors={estimator.n_neighbors!r}): the width of a query "
            "depends on the other keys, so the fits without each row have no "
            "closed form here. Use n_neighbors=None."
        )
    if n < 2:
        raise ValueError(
            "prediction_interval needs at least 2 training rows of positive "
            f"sample weight; got {n}."
        )
    if method == "jackknife+":
        if cv is not None:
            raise ValueError(
                f"cv is only used with method='cv+'; got cv={cv!r} with "
                "method='jackknife+'."
            )
        return None
    if cv is None:
        cv = 5
    if isinstance(cv, Integral) and not isinstance(cv, (bool, np.bool_)):
        if not 2 <= cv <= n:
            raise ValueError(
                f"cv must be an int in [2, n] with n={n} the number of training "
                f"rows of positive sample weight, or a cross-validation "
                f"splitter; got cv={cv!r}."
            )
    elif isinstance(cv, (bool, np.bool_, Real, str)) or not hasattr(cv, "split"):
        raise ValueError(
            "cv must be an int >= 2 or a cross-validation splitter with a "
            f"split method; got {cv!r}."
        )
    splitter = check_cv(cv)
    fold = np.full(n, -1)
    k = 0
    for k, (_, test) in enumerate(splitter.split(np.zeros((n, 1)))):
        test = np.asarray(test)
        if np.any(fold[test] >= 0):
            raise ValueError(
                "cv must split the training rows into disjoint folds; the "
                "splitter's test sets overlap."
            )
        fold[test] = k
    if np.any(fold < 0):
        raise ValueError(
            "cv must put every training row of positive sample weight in one "
            "test fold; the splitter left "
            f"{int(np.count_nonzero(fold < 0))} row(s) out."
        )
    if k < 1:
        raise ValueError("cv must give at least 2 folds.")
    return fold


class _LeaveOut:
    """The engine of a fitted estimator and its fits without some rows."""

    def __init__(self, estimator):
        pool = self.pool = estimator._pool
        self.support = pool.support
        values = np.asarray(estimator.values_, dtype=np.float64)
        values = values.reshape(values.shape[0], -1)[self.support]
        # Centred values: leave-out fits are differences of weighted sums.
        self.center = np.mean(values, axis=0)
        self.Y = values - self.center
        self.keys = pool.keys.astype(np.float64)
        self.degree = pool.degree
        self.moments = self.degree == 1 and pool._uses_moments()
        self._cache = {}  # per-fold masks and moment matrices
        self._pools = {}  # engines without a fold

    def row_bytes(self, width):
        """Bytes of the work of one query against ``width`` leave-out fits:
        about ten arrays of one value per key, three per output, and the
        fits."""
        n, d = self.keys.shape
        k = self.Y.shape[1]
        return 8 * (n * (10 + 3 * k) + width * (d + 2) * k)

    # -- the exact fits --------------------------------------------------------
    def exact(self, X_rows, removed, key):
        """The engine without the support rows ``removed`` predicting at
        ``X_rows``, centred; cached under ``key`` (None: not cached)."""
        loo = self._pools.get(key) if key is not None else None
        if loo is None:
            pool = self.pool
            weights = np.array(pool._arguments["sample_weight"], dtype=np.float64)
            weights[self.support[removed]] = 0.0
            if not np.any(weights > 0):
                return np.full((len(X_rows), self.Y.shape[1]), np.nan)
            loo = type(pool)(**{**pool._arguments, "sample_weight": weights})
            if key is not None and len(self._pools) < self._cache_size(key):
                self._pools[key] = loo
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            try:
                out = loo.pool(X_rows, n_jobs=1)
            except ValueError as exc:
                if self.pool.on_empty != "raise":
                    raise
                raise ValueError(
                    "prediction_interval: the fit without some training rows has "
                    "no key of positive weight near a query, which "
                    "on_empty='raise' refuses; choose another on_empty policy "
                    "or a wider bandwidth."
                ) from exc
        return np.asarray(out, dtype=np.float64) - self.center

    def _cache_size(self, key):
        """How many engines may be kept: 64 for folds; for single rows (a
        key alone in its neighbourhood is removed for its own residual and
        for the queries near it) as many as fit in a quarter of
        working_memory."""
        if key[0] == "fold":
            return 64
        # An engine holds about 100 (degree 0) and 200 (degree 1) bytes per
        # key with two features: counted twice.
        n, d = self.keys.shape
        engine = 32 * n * (d + 4) * (1 + self.degree)
        budget = working_memory_bytes() / (4 * engine)
        return int(min(4096, budget))

    # -- the weights -----------------------------------------------------------
    def weights(self, X_chunk, workspace, sparse=False):
        """Normalised local-constant weights (float64), the queries, and the
        empty rows (whose weights are the ``on_empty`` fallback's); a CSR
        array with ``sparse`` on a tree (brute force scores every key)."""
        queries = self.pool._queries(X_chunk)
        sparse = sparse and self.pool.algorithm != "brute"
        P, empty = self.pool._normalized_scores(queries, workspace, sparse=sparse)
        if sparse:
            P = csr_array(P, dtype=np.float64)
            P.sort_indices()
            return P, queries[1], empty
        return np.asarray(P, dtype=np.float64), queries[1], empty

    # -- sparse rows -----------------------------------------------------------
    def split(self, P, empty, allowed=True):
        """The rows of a batch of weights to take by their neighbours, as
        CSR, and the others as an array: ``(fast, P_fast, slow, P_slow)``.

        Taken by their neighbours: the finite rows of a CSR batch (a tree's)
        nonzero on at most an eighth of the keys, for ``degree=0`` and
        ``allowed``. Brute-force rows stay dense: their scores are computed
        for every key, in small blocks, and the dense leave-out fits cost
        less than gathering the neighbours of each block.
        """
        r, n = P.shape
        if self.degree == 1 and not self.moments:
            allowed = False
        if not allowed or isinstance(P, np.ndarray):
            return np.empty(0, np.intp), None, np.arange(r), _dense(P)
        use = 8 * np.diff(P.indptr) <= n
        if self.degree == 1:
            use &= ~empty  # their fallback weights: the local-constant fits
        use[_data_rows(P)[~np.isfinite(P.data)]] = False
        fast, slow = np.flatnonzero(use), np.flatnonzero(~use)
        P_fast = P_slow = None
        if len(fast):
            P_fast = P[fast]
            P_fast.sort_indices()
        if len(slow):
            P_slow = _dense(P if len(slow) == r else P[slow])
        return fast, P_fast, slow, P_slow

    def neighbours(self, P):
        """The weights and support indices of each row's stored entries,
        padded to the longest row with weight 0 and index ``n``."""
        counts = np.diff(P.indptr)
        r, n = P.shape
        width = int(counts.max()) if r else 0
        row = np.repeat(np.arange(r), counts)
        slot = np.arange(len(P.data)) - np.repeat(P.indptr[:-1], counts)
        W = np.zeros((r, width))
        cols = np.full((r, width), n)
        W[row, slot] = P.data
        cols[row, slot] = P.indices
        return W, cols

    def sparse_leave_one_out(self, X_rows, P, Q, W, cols, pick=None):
        """``mu_{-i}(q)`` for the neighbours of sparse rows.

        ``W``, ``cols``: :meth:`neighbours`. Returns the fit ``f`` of each
        row (a key of weight zero leaves it unchanged) and the leave-out
        fits at every slot, or at the slot ``pick`` of each row (-1: a key
        of weight zero), as in :meth:`_constant` and :meth:`_linear`.
        """
        r = len(W)
        if pick is None:
            own, at = W, cols
        else:
            absent = pick < 0
            slot = np.where(absent, 0, pick)
            own = np.where(absent, 0.0, W[np.arange(r), slot])[:, None]
            at = np.where(absent, len(self.Y), cols[np.arange(r), slot])[:, None]
        if self.degree == 1:
            fit, mu, hard = self._sparse_linear(X_rows, P, Q, own, at)
        else:
            fit, mu, hard = self._sparse_constant(P, W, cols, own, at, pick)
        for i in np.unique(at[hard]):
            rows, where = np.nonzero(hard & (at == i))
            mu[rows, where] = self.exact(X_rows[rows], [i], ("row", i))
        return fit, mu

    def _sparse_constant(self, P, W, cols, own, at, pick):
        r = len(W)
        Yx = _padded(self.Y)
        f = np.asarray(P @ self.Y).reshape(r, -1)
        total = np.asarray(P.sum(axis=1)).ravel()
        with np.errstate(invalid="ignore", divide="ignore"):
            fit = f / total[:, None]
        rest = total[:, None] - own
        num = f[:, None, :] - own[:, :, None] * Yx[at]
        big = own > 0.5
        if big.any():
            big_rows, big_at = np.nonzero(big)
            big_slot = big_at if pick is None else np.maximum(pick, 0)[big_rows]
            other = W[big_rows].copy()
            other[np.arange(len(big_rows)), big_slot] = 0.0
            rest[big_rows, big_at] = other.sum(axis=1)
            num[big_rows, big_at] = np.einsum("bm,bmk->bk", other, Yx[cols[big_rows]])
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = num / rest[:, :, None]
        hard = (own > 0) & ~(rest >= _TINY_REST * total[:, None])
        hard &= np.isfinite(total)[:, None]
        return fit, mu, hard

    def _sparse_linear(self, X_rows, P, Q, own, at):
        """Degree 1 on sparse rows: :meth:`_deleted` at the given keys; rows
        whose moments cancel by the dense :meth:`_linear`."""
        r, n = P.shape
        k = self.Y.shape[1]
        layout = self.pool.layout
        total = np.asarray(P.sum(axis=1)).ravel()
        Pn = P.copy()
        Pn.data = Pn.data / np.repeat(total, np.diff(P.indptr))
        sums = np.asarray(Pn @ self._moment_matrix)
        redo = _local_linear.cancelled(sums, layout)
        fit = np.empty((r, k))
        mu = np.empty(at.shape + (k,))
        hard = np.zeros(at.shape, dtype=bool)
        rows = np.flatnonzero(~redo)
        if len(rows):
            means = sums[rows, :-1] / sums[rows, -1:]
            m, V, inv, _ = _local_linear._local_geometry(means, Q[rows], layout)
            ybar = means[:, layout.values]
            cross = means[:, layout.cross].reshape(-1, m.shape[1], k)
            cross -= m[:, :, None] * ybar[:, None, :]
            slots = (own[rows] / total[rows, None], at[rows])
            fit[rows], mu[rows], hard[rows] = self._deleted(
                None, Q[rows], None, m, V, inv, ybar, cross, True, slots=slots
            )
        rows = np.flatnonzero(redo)
        if len(rows):
            Pd = Pn[rows].toarray()
            full = self.leave_one_out(
                X_rows[rows], Pd, Q[rows], np.zeros(len(rows), dtype=bool)
            )
            # A key of weight zero: the fit itself.
            fit[rows] = full[np.arange(len(rows)), np.argmax(Pd == 0, axis=1)]
            mu[rows] = full[np.arange(len(rows))[:, None], np.minimum(at[rows], n - 1)]
        return fit, mu, hard

    # -- leave-one-out ---------------------------------------------------------
    def leave_one_out(self, X_chunk, P, Q, empty, cols=None):
        """``mu_{-i}(q)`` for the rows of a chunk, centred.

        Shape ``(n_rows, n_keys, n_outputs)``, or ``(n_rows, 1, n_outputs)``
        for one column per row (``cols``: the support index of each row).
        """
        r, n = P.shape
        if cols is None:
            Psel = P
        else:
            Psel = P[np.arange(r), cols][:, None]
        local = np.zeros(r, dtype=bool)
        if self.degree == 1:
            local = ~empty & np.all(np.isfinite(P), axis=1)
        if np.all(local):
            mu, hard = self._linear(P, Q, cols)
        elif not np.any(local):
            mu, hard = self._constant(P, cols)
        else:
            mu = np.empty((r, Psel.shape[1], self.Y.shape[1]))
            hard = np.zeros(Psel.shape, dtype=bool)
        if np.any(~local) and np.any(local):
            rows = np.flatnonzero(~local)
            sub = None if cols is None else cols[rows]
            mu[rows], hard[rows] = self._constant(P[rows], sub)
        if np.any(local) and np.any(~local):
            rows = np.flatnonzero(local)
            sub = None if cols is None else cols[rows]
            mu[rows], hard[rows] = self._linear(P[rows], Q[rows], sub)
        if not hard.any():
            return mu
        for i in np.unique(np.nonzero(hard)[1] if cols is None else cols[hard[:, 0]]):
            if cols is None:
                rows = np.flatnonzero(hard[:, i])
                mu[rows, i] = self.exact(X_chunk[rows], [i], None)
            else:
                rows = np.flatnonzero(hard[:, 0] & (cols == i))
                mu[rows, 0] = self.exact(X_chunk[rows], [i], None)
        return mu

    def _constant(self, P, cols):
        """Degree 0: ``(f - p_i y_i) / (1 - p_i)``, the denominators exact."""
        Y = self.Y
        f = _dot(P, Y)
        total = P.sum(axis=1)
        r = len(P)
        if cols is None:
            rest = total[:, None] - P
            num = f[:, None, :] - P[:, :, None] * Y[None]
            own = P
        else:
            own = P[np.arange(r), cols][:, None]
            rest = total[:, None] - own
            num = f[:, None, :] - own[:, :, None] * Y[cols][:, None, :]
        # The one key of a row that may hold most of its weight: its
        # leave-out sums from the other keys, free of cancellation.
        big = own > 0.5
        if big.any():
            big_rows, big_at = np.nonzero(big)
            big_cols = big_at if cols is None else cols[big_rows]
            other = P[big_rows].copy()
            other[np.arange(len(big_rows)), big_cols] = 0.0
            rest[big_rows, big_at] = other.sum(axis=1)
            num[big_rows, big_at] = _dot(other, Y)
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = num / rest[:, :, None]
        hard = (own > 0) & ~(rest >= _TINY_REST * total[:, None])
        hard &= np.isfinite(total)[:, None]
        return mu, hard

    @property
    def _moment_matrix(self):
        if "moments" not in self._cache:
            self._cache["moments"] = _local_linear.moment_matrix(self.keys, self.Y)
        return self._cache["moments"]

    def _linear(self, P, Q, cols):
        """Degree 1: ``f - l_i r_i / (1 - h_ii)``.

        The local fit from the pooled moments, and the per-key terms
        expanded about the local mean of the keys (their cancellation is
        bounded as in :func:`._local_linear.cancelled`); rows whose moments
        cancel are computed about their own local means.
        """
        P = P / P.sum(axis=1, keepdims=True)
        layout = self.pool.layout
        r, d = len(P), self.keys.shape[1]
        k = self.Y.shape[1]
        mu = hard = None
        redo = np.ones(r, dtype=bool)
        if self.moments:
            sums = _dot(P, self._moment_matrix)
            redo = _local_linear.cancelled(sums, layout)
            rows = np.flatnonzero(~redo)
            if len(rows) == r:
                rows = slice(None)
            if len(P[rows]):
                means = sums[rows, :-1] / sums[rows, -1:]
                m, V, inv, _ = _local_linear._local_geometry(means, Q[rows], layout)
                ybar = means[:, layout.values]
                cross = means[:, layout.cross].reshape(-1, d, k)
                cross -= m[:, :, None] * ybar[:, None, :]
                sub = None if cols is None else cols[rows]
                fit = self._deleted(
                    P[rows], Q[rows], sub, m, V, inv, ybar, cross, expanded=True
                )
                if not np.any(redo):
                    return fit
                mu = np.empty((r,) + fit[0].shape[1:])
                hard = np.zeros((r, fit[0].shape[1]), dtype=bool)
                mu[rows], hard[rows] = fit
        rows = np.flatnonzero(redo)
        if len(rows):
            Pr = P[rows]
            m, cov, scale = _local_linear.centred_geometry(Pr, self.keys, layout)
            V, inv, _ = _local_linear._pseudo_inverse(cov, scale, layout)
            ybar = _dot(Pr, self.Y)
            cross = np.empty((len(rows), d, k))
            for j in range(len(rows)):
                nz = np.flatnonzero(Pr[j])
                wK = (self.keys[nz] - m[j]) * Pr[j, nz, None]
                cross[j] = wK.T @ (self.Y[nz] - ybar[j])
            sub = None if cols is None else cols[rows]
            fit = self._deleted(
                Pr, Q[rows], sub, m, V, inv, ybar, cross, expanded=False
            )
            if mu is None:
                mu = np.empty((r,) + fit[0].shape[1:])
                hard = np.zeros((r, fit[0].shape[1]), dtype=bool)
            mu[rows], hard[rows] = fit
        return mu, hard

    def _deleted(self, P, Q, cols, m, V, inv, ybar, cross, expanded, slots=None):
        """The case-deletion formula from the local fit of each row.

        ``slots``: normalised weights and support indices ``(W, at)`` of the
        keys to delete, per row (index ``n``: padding); the fits ``f`` are
        returned too.
        """
        r = len(m)
        A = np.einsum("rfe,re,rge->rfg", V, inv, V)  # C^+
        g = np.einsum("rfg,rg->rf", A, m - Q)
        beta = np.einsum("rfg,rgk->rfk", A, cross)
        f = ybar - np.einsum("rfk,rf->rk", beta, m - Q)
        if slots is not None:
            Psel, at = slots
            Ysel = _padded(self.Y)[at]
        elif cols is None:
            Psel, Ysel = P, self.Y[None]
        else:
            Psel, Ysel = P[np.arange(r), cols][:, None], self.Y[cols][:, None, :]
        if slots is not None:
            K = _padded(self.keys)[at]
            Kc = K - m[:, None, :]
            kg = np.einsum("rcf,rf->rc", Kc, g)
            quad = np.einsum("rcf,rfg,rcg->rc", Kc, A, Kc)
            kb = np.einsum("rcf,rfk->rck", Kc, beta)
        elif expanded and cols is None:
            # (k - m) terms for every key by products with the keys.
            keys = self.keys
            kg = _dot(g, keys.T) - np.einsum("rf,rf->r", g, m)[:, None]
            i, j = np.triu_indices(keys.shape[1])
            upper = A[:, i, j] * np.where(i == j, 1.0, 2.0)
            Am = np.einsum("rfg,rg->rf", A, m)
            quad = _dot(upper, (keys[:, i] * keys[:, j]).T)
            quad -= 2.0 * _dot(Am, keys.T)
            quad += np.einsum("rf,rf->r", Am, m)[:, None]
            kb = np.tensordot(beta, keys, axes=([1], [1])).transpose(0, 2, 1)
            kb -= np.einsum("rf,rfk->rk", m, beta)[:, None, :]
        else:
            K = self.keys[None] if cols is None else self.keys[cols][:, None, :]
            Kc = K - m[:, None, :]
            kg = np.einsum("rcf,rf->rc", Kc, g)
            quad = np.einsum("rcf,rfg,rcg->rc", Kc, A, Kc)
            kb = np.einsum("rcf,rfk->rck", Kc, beta)
        leverage = Psel * (1.0 + quad)
        ell = Psel * (1.0 - kg)
        kb -= Ysel
        kb += ybar[:, None, :]  # minus the residuals of the keys
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            factor = ell / (1.0 - leverage)
            kb *= factor[:, :, None]
            kb += f[:, None, :]
        hard = (Psel > 0) & ~(1.0 - leverage > _LEVERAGE_MARGIN)
        if slots is not None:
            return f, kb, hard
        return kb, hard

    # -- leave-fold-out --------------------------------------------------------
    def leave_folds_out(self, X_chunk, P, Q, empty, fold, n_folds):
        """``mu_{-S_k}(q)`` for every fold ``k``: (n_rows, n_folds, n_outputs)."""
        r = len(P)
        mu = np.empty((r, n_folds, self.Y.shape[1]))
        local = np.zeros(r, dtype=bool)
        if self.degree == 1:
            local = ~empty & np.all(np.isfinite(P), axis=1)
        layout = self.pool.layout
        for k in range(n_folds):
            keep = self._kept(fold, k)
            Pk = P[:, keep]
            total = Pk.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                mu[:, k] = _dot(Pk, self.Y[keep]) / total[:, None]
            hard = ~(total >= _TINY_REST * P.sum(axis=1)) & np.isfinite(total)
            rows = np.flatnonzero(local & ~hard)
            if len(rows):
                mu[rows, k] = self._fold_linear(Pk[rows], Q[rows], k, keep, layout)
            rows = np.flatnonzero(hard)
            if len(rows):
                key = ("fold", k) if n_folds <= 64 else None
                mu[rows, k] = self.exact(X_chunk[rows], np.flatnonzero(~keep), key)
        return mu

    def _kept(self, fold, k):
        """The mask of the keys outside fold ``k``, one array per fold."""
        key = ("kept", k)
        if key not in self._cache:
            self._cache[key] = fold != k
        return self._cache[key]

    def _fold_linear(self, Pk, Q, k, keep, layout):
        """The local-linear fits of normalised rows over the kept keys."""
        Pk = Pk / Pk.sum(axis=1, keepdims=True)
        keys, Y = self.keys[keep], self.Y[keep]
        if self.moments:
            matrix = self._cache.get(("moments", k))
            if matrix is None:
                matrix = self._moment_matrix[keep]
                self._cache[("moments", k)] = matrix
            sums = _dot(Pk, matrix)
            mean, _, _ = _local_linear.solve(sums, Q, layout, False)
            redo = np.flatnonzero(_local_linear.cancelled(sums, layout))
        else:
            mean = np.empty((len(Pk), Y.shape[1]))
            redo = np.arange(len(Pk))
        if len(redo):
            mean[redo] = _local_linear.centred_fit(
                Pk[redo], keys, Y, Q[redo], layout, False
            )[0]
        return mean


def _dot(A, B):
    """``A @ B`` (rows of weights times columns of keys or values)."""
    return A @ B


def _select(mu, sorted_R, order, rank):
    """The ``rank``-th smallest of ``mu[r, i] + R_i`` for each row ``r``.

    ``sorted_R`` holds the residuals in increasing order, ``order`` their
    indices. With ``lo``, ``hi`` the extremes of a row of ``mu`` and ``t`` the
    ``rank``-th smallest residual, the answer lies in ``[lo + t, hi + t]``:
    a key whose residual is below ``t - (hi - lo)`` has a value below it and
    one above ``t + (hi - lo)`` a value above it (margins widened by the
    rounding), so only the keys between are selected from (a contiguous run
    of ``sorted_R``), by partial selection. The values are those of the full
    computation, so is the result. Rows with a non-finite entry are selected
    from all their values (:func:`_order_statistic`). Ranks out of ``[1, n]``
    give -inf or +inf.
    """
    r, n = mu.shape
    if rank < 1:
        return np.full(r, -np.inf)
    if rank > n:
        return np.full(r, np.inf)
    out = np.empty(r)
    lo, hi = mu.min(axis=1), mu.max(axis=1)
    pivot = sorted_R[rank - 1]
    margin = (hi - lo) + 8 * _EPS * (np.abs(lo) + np.abs(hi) + pivot)
    with np.errstate(invalid="ignore"):
        start = np.searchsorted(sorted_R, pivot - margin, side="left")
        stop = np.searchsorted(sorted_R, pivot + margin, side="right")
    finite = np.isfinite(lo) & np.isfinite(hi)
    for row in np.flatnonzero(finite):
        a, b = start[row], stop[row]
        values = mu[row, order[a:b]] + sorted_R[a:b]
        out[row] = np.partition(values, rank - 1 - a)[rank - 1 - a]
    rows = np.flatnonzero(~finite)
    if len(rows):
        R = np.empty(n)
        R[order] = sorted_R
        values = (mu[rows] + R)[:, :, None]
        out[rows] = _order_statistic(values, rank, 1.0)[:, 0]
    return out


def _select_sparse(fit, values, position, sorted_R, rank):
    """The ``rank``-th smallest of ``fit[r] + R_i`` over the keys ``i`` of
    weight zero at row ``r`` and ``values[r]`` over its neighbours.

    ``position``: the place of each neighbour in ``sorted_R`` (-1: padding,
    whose ``values`` are ignored); ``sorted_R`` the residuals in increasing
    order, NaN as +inf. With ``m`` the number of slots, the keys of weight
    zero below place ``rank - 1 - m`` of ``sorted_R`` are below the answer
    (fewer than ``rank`` values can be smaller than theirs) and those above
    ``rank - 1 + m`` above it, so the answer is selected from a window of
    ``2 m + 1`` residuals, less the neighbours', and the neighbours' values
    (each row sorted). A NaN value counts as +inf; ranks out of ``[1, n]``
    give -inf or +inf, as in :func:`_select`.
    """
    r, m = values.shape
    n = len(sorted_R)
    if rank < 1:
        return np.full(r, -np.inf)
    if rank > n:
        return np.full(r, np.inf)
    lo, hi = max(0, rank - 1 - m), min(n - 1, rank - 1 + m)
    window = fit[:, None] + sorted_R[None, lo : hi + 1]
    inside = (position >= lo) & (position <= hi)
    rows, slots = np.nonzero(inside)
    window[rows, position[rows, slots] - lo] = np.inf
    below = lo - np.count_nonzero((position >= 0) & (position < lo), axis=1)
    values = np.where(position >= 0, values, np.inf)
    candidates = np.concatenate([window, values], axis=1)
    candidates[np.isnan(candidates)] = np.inf
    candidates.sort(axis=1)
    return candidates[np.arange(r), rank - 1 - below]


def _order_statistic(values, rank, sign):
    """The ``rank``-th smallest of each row over axis 1 (partial selection).

    ``rank`` < 1 gives -inf, above the count +inf (``sign`` picks which).
    An undefined (NaN) leave-out fit or residual counts as ``sign * inf``:
    it can only widen the interval. ``values`` is overwritten.
    """
    n = values.shape[1]
    shape = (values.shape[0], values.shape[2])
    if rank < 1 or rank > n:
        return np.full(shape, sign * np.inf)
    # The selection runs along the last, contiguous axis.
    values = np.ascontiguousarray(values.transpose(0, 2, 1))
    values[np.isnan(values)] = sign * np.inf
    values.partition(rank - 1, axis=-1)
    return values[:, :, rank - 1]


def prediction_interval(estimator, X, level, method, cv):
    """The bounds of :meth:`KernelAttentionRegressor.prediction_interval`.

    Returns ``(lower, upper)`` of shape (n_queries, n_outputs).
    """
    if estimator._pool.__class__.__name__ != "KernelPool":
        raise ValueError(
            "prediction_interval works on NumPy arrays only; the estimator was "
            "fitted on arrays of another array API namespace."
        )
    n = len(estimator._pool.support)
    fold = _check_arguments(estimator, level, method, cv, n)
    X = validate_queries(estimator, X)
    state = _LeaveOut(estimator)
    pool = state.pool
    low, high = order_ranks(level, n)
    p = state.Y.shape[1]
    train = np.asarray(pool._arguments["keys"])[state.support]

    if fold is None:

        def train_fits(X_rows, P, Q, empty, rows):
            return state.leave_one_out(X_rows, P, Q, empty, rows)[:, 0]

        def query_fits(X_rows, P, Q, empty):
            return state.leave_one_out(X_rows, P, Q, empty)

        width = 1
    else:
        n_folds = int(fold.max()) + 1

        def train_fits(X_rows, P, Q, empty, rows):
            mu = state.leave_folds_out(X_rows, P, Q, empty, fold, n_folds)
            return mu[np.arange(len(rows)), fold[rows]]

        def query_fits(X_rows, P, Q, empty):
            mu = state.leave_folds_out(X_rows, P, Q, empty, fold, n_folds)
            return mu[:, fold]

        width = n_folds
    # A chunk holds its weights, the leave-out fits of its rows are computed
    # in batches of rows: each within half of working_memory (a block of
    # brute-force rows, one row, at least).
    row_bytes = 2 * state.row_bytes(width)
    chunk_bytes = 16 * state.keys.shape[0]

    # The residuals R_i = |y_i - mu_{-i}(x_i)|, chunk by chunk.
    counter = _Counter()

    def residual_work(X_chunk, workspace):
        start = counter.advance(len(X_chunk))
        P, Q, empty = state.weights(X_chunk, workspace, sparse=fold is None)
        out = np.empty((len(X_chunk), p))
        for b in row_batches(len(X_chunk), row_bytes):
            at = np.arange(b.start, b.stop)
            fast, P_fast, slow, P_slow = state.split(P[b], empty[b], fold is None)
            if len(fast):
                W, cols = state.neighbours(P_fast)
                found = cols == (start + at[fast])[:, None]
                pick = np.where(found.any(axis=1), np.argmax(found, axis=1), -1)
                X_rows = _take(X_chunk, at[fast])
                fits = state.sparse_leave_one_out(
                    X_rows, P_fast, Q[at[fast]], W, cols, pick
                )
                out[at[fast]] = fits[1][:, 0]
            if len(slow):
                rows = at[slow]
                out[rows] = train_fits(
                    _take(X_chunk, rows), P_slow, Q[rows], empty[rows], start + rows
                )
        return out, np.zeros(len(X_chunk), dtype=bool)

    loo_fit = _run(pool, train, residual_work, chunk_bytes, p)
    R = np.abs(state.Y - loo_fit)
    # The residuals sorted once, for the selection of every query.
    order = [np.argsort(R[:, j], kind="stable") for j in range(p)]
    sorted_R = [R[order[j], j] for j in range(p)]
    # For sparse rows: NaN residuals as +inf, and the place of each key.
    R_inf = np.where(np.isnan(R), np.inf, R)
    S_inf = [R_inf[order[j], j] for j in range(p)]
    place = [np.argsort(order[j]) for j in range(p)]

    def query_work(X_chunk, workspace):
        P, Q, empty = state.weights(X_chunk, workspace, sparse=fold is None)
        out = np.empty((len(X_chunk), 2 * p))
        if isinstance(P, np.ndarray):
            undefined = np.isnan(P).any(axis=1)
        else:
            undefined = np.zeros(len(X_chunk), dtype=bool)
            undefined[_data_rows(P)[np.isnan(P.data)]] = True
        for b in row_batches(len(X_chunk), row_bytes):
            at = np.arange(b.start, b.stop)
            fast, P_fast, slow, P_slow = state.split(P[b], empty[b], fold is None)
            if len(fast):
                rows = at[fast]
                W, cols = state.neighbours(P_fast)
                fit, mu = state.sparse_leave_one_out(
                    _take(X_chunk, rows), P_fast, Q[rows], W, cols
                )
                keys = np.minimum(cols, n - 1)
                for j in range(p):
                    place_j = np.where(cols < n, place[j][keys], -1)
                    R_j = R_inf[keys, j]
                    out[rows, j] = -_select_sparse(
                        -fit[:, j], R_j - mu[:, :, j], place_j, S_inf[j], n - low + 1
                    )
                    out[rows, p + j] = _select_sparse(
                        fit[:, j], R_j + mu[:, :, j], place_j, S_inf[j], high
                    )
            if len(slow):
                rows = at[slow]
                mu = query_fits(_take(X_chunk, rows), P_slow, Q[rows], empty[rows])
                for j in range(p):
                    out[rows, j] = -_select(
                        -mu[:, :, j], sorted_R[j], order[j], n - low + 1
                    )
                    out[rows, p + j] = _select(mu[:, :, j], sorted_R[j], order[j], high)
        # A query without a prediction (empty under on_empty="nan").
        out[empty & undefined] = np.nan
        return out, empty

    out = _run(pool, X, query_work, chunk_bytes, 2 * p)
    return out[:, :p] + state.center, out[:, p:] + state.center


def _padded(A):
    """``A`` and a row of zeros (the index of padding)."""
    return np.vstack([A, np.zeros((1,) + A.shape[1:])])


def _dense(P):
    """A batch of weights as an array."""
    return P if isinstance(P, np.ndarray) else P.toarray()


def _data_rows(P):
    """The row of each stored entry of a CSR array."""
    return np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))


def _take(X, rows):
    """The rows of a chunk of queries (array or sparse), a slice if whole."""
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1:
        return X[rows[0] : rows[-1] + 1]
    return X[rows]


class _Counter:
    """The start of each chunk of a sequential run of chunks."""

    def __init__(self):
        self.position = 0

    def advance(self, n):
        start, self.position = self.position, self.position + n
        return start


def _run(pool, X, work, extra, width):
    """``pool._run_chunks`` on one thread, the chunks' rows concatenated."""
    chunks = pool._run_chunks(X, None, work, 1, extra_row_bytes=extra)
    return np.concatenate(chunks) if chunks else np.empty((0, width))
