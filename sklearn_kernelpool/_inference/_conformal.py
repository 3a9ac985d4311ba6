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
  The slope of that fit is then shrunk by the safeguard of
  :mod:`.._engine._safeguard` at the leverage of ``q`` in the fit without
  the key, from its Mahalanobis distance from the local mean and the
  effective number of the keys without it, which follow from the same
  terms (:mod:`._case_deletion`): the fit of the estimator refitted
  without ``i``.

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
neighbours, as ``predict`` does. On the brute-force path, the rows of
``degree=0`` take both passes from the weighted scores as they are, without
normalising them (:mod:`._jackknife_constant`).
"""

from numbers import Real

import numpy as np

from .._engine._pooling import KernelPool
from .._utils._input import validate_queries
from .._utils._working_memory import row_batches
from ._conformal_quantiles import (
    cqr_calibration,
    cqr_interval,
    fold_splitter,
    partition_folds,
)
from ._deleted_fits import _data_rows, _dot, _LeaveOut, exact_engine
from ._jackknife_constant import constant_bounds, own_leave_one_out, simple_rows
from ._order_statistics import _select, _select_sparse, order_ranks

METHODS = ("jackknife+", "cv+", "cqr")


def _check_arguments(estimator, level, method, cv, n):
    if isinstance(level, (bool, np.bool_)) or not isinstance(level, Real):
        raise ValueError(f"level must be a float in (0, 1); got {level!r}.")
    if not 0 < level < 1:
        raise ValueError(f"level must be a float in (0, 1); got {level!r}.")
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}; got {method!r}.")
    if n < 2:
        raise ValueError(
            "prediction_interval needs at least 2 training rows of positive "
            f"sample weight; got {n}."
        )
    if method == "cqr":  # refits: adaptive widths are refitted too
        return cqr_calibration(cv, n)
    if getattr(estimator, "n_neighbors", None) is not None:
        raise ValueError(
            "prediction_interval does not support adaptive widths "
            f"(n_neighbors={estimator.n_neighbors!r}): the width of a query "
            "depends on the other keys, so the fits without each row have no "
            "closed form here. Use n_neighbors=None."
        )
    if method == "jackknife+":
        if cv is not None:
            raise ValueError(
                f"cv is only used with method='cv+' or 'cqr'; got cv={cv!r} with "
                "method='jackknife+'."
            )
        return None
    splitter = fold_splitter(5 if cv is None else cv, n)
    return partition_folds(splitter.split(np.zeros((n, 1))), n)


def prediction_interval(estimator, X, level, method, cv):
    """The bounds of :meth:`KernelAttentionRegressor.prediction_interval`.

    Returns ``(lower, upper)`` of shape (n_queries, n_outputs).
    """
    engine = exact_engine(estimator)
    if not isinstance(engine, KernelPool):
        raise ValueError(
            "prediction_interval works on NumPy arrays only; the estimator was "
            "fitted on arrays of another array API namespace."
        )
    n = len(engine.support)
    fold = _check_arguments(estimator, level, method, cv, n)
    if method == "cqr":
        return cqr_interval(estimator, X, level, fold)
    X = validate_queries(estimator, X)
    intervals = _Intervals(estimator, level, fold, n)
    intervals.training_residuals()
    return intervals.bounds(X)


class _Intervals:
    """One jackknife+ (``fold`` None) or CV+ computation: the leave-out
    residuals of the training rows, then the bounds of the queries, both
    chunk by chunk within ``working_memory``.

    ``n`` is the number of training rows of positive weight and ``level``
    the coverage, whose order statistics are ``n - low + 1`` and ``high``.
    """

    def __init__(self, estimator, level, fold, n):
        self.state = _LeaveOut(estimator)
        self.pool = self.state.pool
        self.fold, self.n = fold, n
        self.low, self.high = order_ranks(level, n)
        self.p = self.state.Y.shape[1]
        self.n_folds = 1 if fold is None else int(fold.max()) + 1
        # Degree 0 on dense rows: from the weighted scores as they are.
        self.constant = (
            fold is None and self.state.degree == 0 and self.pool.algorithm == "brute"
        )
        # A chunk holds its weights, the leave-out fits of its rows are
        # computed in batches of rows: each within half of working_memory
        # (a block of brute-force rows, one row, at least).
        self.row_bytes = 2 * self.state.row_bytes(self.n_folds)
        n_keys = self.state.keys.shape[0]
        # The window of the selection of degree 0: at most a row of scores.
        self.chunk_bytes = (8 if self.constant else 16) * n_keys

    # -- the leave-out fits of the slow rows ------------------------------

    def _train_fits(self, X_rows, P, Q, empty, rows):
        """``mu_{-i}(x_i)`` of the training ``rows``."""
        if self.fold is None:
            return self.state.leave_one_out(X_rows, P, Q, empty, rows)[:, 0]
        mu = self.state.leave_folds_out(X_rows, P, Q, empty, self.fold, self.n_folds)
        return mu[np.arange(len(rows)), self.fold[rows]]

    def _query_fits(self, X_rows, P, Q, empty):
        """``mu_{-i}(q)`` of every training row ``i``, shape (rows, n, p)."""
        if self.fold is None:
            return self.state.leave_one_out(X_rows, P, Q, empty)
        mu = self.state.leave_folds_out(X_rows, P, Q, empty, self.fold, self.n_folds)
        return mu[:, self.fold]

    def _weights(self, X_chunk, workspace):
        return self.state.weights(X_chunk, workspace, sparse=self.fold is None)

    # -- the residuals R_i = |y_i - mu_{-i}(x_i)| --------------------------

    def training_residuals(self):
        """The leave-out residuals of the training rows, sorted once for
        the selection of every query."""
        train = np.asarray(self.pool._arguments["keys"])[self.state.support]
        self._counter = _Counter()
        fits = _run(self.pool, train, self._residual_work, self.chunk_bytes, self.p)
        R = np.abs(self.state.Y - fits)
        p = self.p
        self.order = [np.argsort(R[:, j], kind="stable") for j in range(p)]
        self.sorted_R = [R[self.order[j], j] for j in range(p)]
        # For sparse rows: NaN residuals as +inf, and the place of each key.
        self.R_inf = np.where(np.isnan(R), np.inf, R)
        self.S_inf = [self.R_inf[self.order[j], j] for j in range(p)]
        self.place = [np.argsort(self.order[j]) for j in range(p)]

    def _residual_work(self, X_chunk, workspace):
        state = self.state
        start = self._counter.advance(len(X_chunk))
        if self.constant:
            W, total, queries = state.raw_weights(X_chunk, workspace)
            out, done = own_leave_one_out(W, state.Y, total, start)
            todo = np.flatnonzero(~done)
            if not len(todo):
                return out, np.zeros(len(X_chunk), dtype=bool)
            P, Q, empty = state.normalise(W, total, queries, workspace)
        else:
            P, Q, empty = self._weights(X_chunk, workspace)
            out = np.empty((len(X_chunk), self.p))
            todo = np.arange(len(X_chunk))
        for b in row_batches(len(todo), self.row_bytes):
            at = todo[b]
            fast, P_fast, slow, P_slow = state.split(
                _take(P, at), empty[at], self.fold is None
            )
            if len(fast):
                W, cols = state.neighbours(P_fast)
                found = cols == (start + at[fast])[:, None]
                pick = np.where(found.any(axis=1), np.argmax(found, axis=1), -1)
                fits = state.sparse_leave_one_out(
                    _take(X_chunk, at[fast]), P_fast, Q[at[fast]], W, cols, pick
                )
                out[at[fast]] = fits[1][:, 0]
            if len(slow):
                rows = at[slow]
                out[rows] = self._train_fits(
                    _take(X_chunk, rows), P_slow, Q[rows], empty[rows], start + rows
                )
        return out, np.zeros(len(X_chunk), dtype=bool)

    # -- the bounds of the queries ---------------------------------------

    def bounds(self, X):
        """``(lower, upper)`` at the queries ``X``."""
        out = _run(self.pool, X, self._query_work, self.chunk_bytes, 2 * self.p)
        center = self.state.center
        return out[:, : self.p] + center, out[:, self.p :] + center

    def _query_work(self, X_chunk, workspace):
        out = np.empty((len(X_chunk), 2 * self.p))
        todo = np.arange(len(X_chunk))
        if self.constant:
            W, total, queries = self.state.raw_weights(X_chunk, workspace)
            todo = self._simple_constant_bounds(out, W, total)
            if not len(todo):
                return out, np.zeros(len(X_chunk), dtype=bool)
            P, Q, empty = self.state.normalise(W, total, queries, workspace)
        else:
            P, Q, empty = self._weights(X_chunk, workspace)
        undefined = _undefined_rows(P, empty)
        for b in row_batches(len(todo), self.row_bytes):
            at = todo[b]
            fast, P_fast, slow, P_slow = self.state.split(
                _take(P, at), empty[at], self.fold is None
            )
            if len(fast):
                self._sparse_bounds(out, X_chunk, at[fast], P_fast, Q)
            if len(slow):
                self._dense_bounds(out, X_chunk, at, slow, P_slow, Q, empty)
        # A query without a prediction (empty under on_empty="nan").
        out[empty & undefined] = np.nan
        return out, empty

    def _simple_constant_bounds(self, out, W, total):
        """Degree 0 on brute force: the bounds of the rows whose weights
        are simple (:func:`._jackknife_constant.simple_rows`), from the raw
        scores ``W``. Returns the other rows."""
        top = W.max(axis=1)
        simple = simple_rows(total, top)
        rows = np.flatnonzero(simple)
        if len(rows):
            f = (W @ self.state.Y)[rows]
            ranks = (self.sorted_R, self.order, self.n - self.low + 1, self.high)
            out[rows] = constant_bounds(
                W, rows, self.state.Y, f, total[rows], top[rows], *ranks
            )
        return np.flatnonzero(~simple)

    def _sparse_bounds(self, out, X_chunk, rows, P, Q):
        """The bounds of ``rows`` with few keys of positive weight (their
        sparse weights ``P``), from their neighbours and a window of the
        sorted residuals (:func:`._order_statistics._select_sparse`)."""
        n, p = self.n, self.p
        W, cols = self.state.neighbours(P)
        fit, mu = self.state.sparse_leave_one_out(
            _take(X_chunk, rows), P, Q[rows], W, cols
        )
        keys = np.minimum(cols, n - 1)
        for j in range(p):
            place = np.where(cols < n, self.place[j][keys], -1)
            R = self.R_inf[keys, j]
            out[rows, j] = -_select_sparse(
                -fit[:, j], R - mu[:, :, j], place, self.S_inf[j], n - self.low + 1
            )
            out[rows, p + j] = _select_sparse(
                fit[:, j], R + mu[:, :, j], place, self.S_inf[j], self.high
            )

    def _dense_bounds(self, out, X_chunk, at, slow, P, Q, empty):
        """The bounds of the rows ``at[slow]`` (weights ``P``) from every
        leave-out fit, those of degree 0 bounded without them where they
        can be (:func:`_bounded_constant`)."""
        n, p = self.n, self.p
        sums = None
        if self.fold is None and self.state.degree == 0:
            done, bounds, sums = _bounded_constant(
                self.state, P, self.sorted_R, self.order, n - self.low + 1, self.high
            )
            out[at[slow[done]]] = bounds
            slow, P, sums = slow[~done], P[~done], sums[~done]
        if not len(slow):
            return
        rows = at[slow]
        X_rows = _take(X_chunk, rows)
        if sums is None:
            mu = self._query_fits(X_rows, P, Q[rows], empty[rows])
        else:  # the sums of the whole batch, as if none were done
            mu = self.state.leave_one_out(X_rows, P, Q[rows], empty[rows], f=sums)
        for j in range(p):
            mu_j = mu[:, :, j]
            ends = mu_j.min(axis=1), mu_j.max(axis=1)
            args = (self.sorted_R[j], self.order[j])
            out[rows, j] = -_select(mu_j, *args, n - self.low + 1, -1.0, ends)
            out[rows, p + j] = _select(mu_j, *args, self.high, 1.0, ends)


def _undefined_rows(P, empty):
    """The empty rows of weights ``P`` (dense or sparse) that hold NaN: no
    prediction there."""
    if isinstance(P, np.ndarray):
        undefined = np.zeros(len(empty), dtype=bool)
        rows = np.flatnonzero(empty)
        undefined[rows] = np.isnan(P[rows]).any(axis=1)
        return undefined
    undefined = np.zeros(P.shape[0], dtype=bool)
    undefined[_data_rows(P)[np.isnan(P.data)]] = True
    return undefined


def _bounded_constant(state, P, sorted_R, order, rank_low, rank_high):
    """Degree 0: the bounds of the rows of dense normalised weights ``P``
    whose leave-one-out fits are bounded without computing them
    (:func:`._jackknife_constant.constant_bounds`): rows of weights at most
    half of their total and at most 0.5, where
    :meth:`._deleted_fits._LeaveOut._constant` takes the closed form as it is.
    Returns the mask of the rows so bounded, their ``(lower, upper)`` as one
    array, and the sums ``P @ Y`` of all rows.
    """
    Y = state.Y
    f = _dot(P, Y)
    total = P.sum(axis=1)
    top = P.max(axis=1)
    done = simple_rows(total, top) & (top <= 0.5)
    rows = np.flatnonzero(done)
    if not len(rows):
        return done, np.empty((0, 2 * Y.shape[1])), f
    ranks = (sorted_R, order, rank_low, rank_high)
    bounds = constant_bounds(P, rows, Y, f[rows], total[rows], top[rows], *ranks)
    return done, bounds, f


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
