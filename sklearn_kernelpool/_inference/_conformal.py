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
  :mod:`.._engine._local_linear` at the Mahalanobis distance of ``q`` from the local
  mean without the key, which follows from the same terms
  (:mod:`._case_deletion`): the fit of the estimator refitted without
  ``i``.

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

from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import check_cv

from .._utils._input import validate_queries
from .._utils._working_memory import row_batches
from ._deleted_fits import _data_rows, _dot, _LeaveOut, exact_engine
from ._jackknife_constant import constant_bounds, own_leave_one_out, simple_rows
from ._order_statistics import _select, _select_sparse, order_ranks

METHODS = ("jackknife+", "cv+")


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


def prediction_interval(estimator, X, level, method, cv):
    """The bounds of :meth:`KernelAttentionRegressor.prediction_interval`.

    Returns ``(lower, upper)`` of shape (n_queries, n_outputs).
    """
    if exact_engine(estimator).__class__.__name__ != "KernelPool":
        raise ValueError(
            "prediction_interval works on NumPy arrays only; the estimator was "
            "fitted on arrays of another array API namespace."
        )
    n = len(exact_engine(estimator).support)
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
    # Degree 0 on dense rows: from the weighted scores as they are (most rows).
    constant = fold is None and state.degree == 0 and pool.algorithm == "brute"
    # A chunk holds its weights, the leave-out fits of its rows are computed
    # in batches of rows: each within half of working_memory (a block of
    # brute-force rows, one row, at least).
    row_bytes = 2 * state.row_bytes(width)
    chunk_bytes = 16 * state.keys.shape[0]
    if constant:  # the window of the selection: at most a row of scores
        chunk_bytes = 8 * state.keys.shape[0]

    # The residuals R_i = |y_i - mu_{-i}(x_i)|, chunk by chunk.
    counter = _Counter()

    def residual_work(X_chunk, workspace):
        start = counter.advance(len(X_chunk))
        if constant:
            W, total, queries = state.raw_weights(X_chunk, workspace)
            out, done = own_leave_one_out(W, state.Y, total, start)
            todo = np.flatnonzero(~done)
            if not len(todo):
                return out, np.zeros(len(X_chunk), dtype=bool)
            P, Q, empty = state.normalise(W, total, queries, workspace)
        else:
            P, Q, empty = state.weights(X_chunk, workspace, sparse=fold is None)
            out = np.empty((len(X_chunk), p))
            todo = np.arange(len(X_chunk))
        for b in row_batches(len(todo), row_bytes):
            at = todo[b]
            fast, P_fast, slow, P_slow = state.split(
                _take(P, at), empty[at], fold is None
            )
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
        out = np.empty((len(X_chunk), 2 * p))
        todo = np.arange(len(X_chunk))
        if constant:
            W, total, queries = state.raw_weights(X_chunk, workspace)
            top = W.max(axis=1)
            simple = simple_rows(total, top)
            rows = np.flatnonzero(simple)
            if len(rows):
                f, total_, top_ = (W @ state.Y)[rows], total[rows], top[rows]
                ranks = (sorted_R, order, n - low + 1, high)
                out[rows] = constant_bounds(W, rows, state.Y, f, total_, top_, *ranks)
            if len(rows) == len(X_chunk):
                return out, np.zeros(len(X_chunk), dtype=bool)
            todo = np.flatnonzero(~simple)
            P, Q, empty = state.normalise(W, total, queries, workspace)
        else:
            P, Q, empty = state.weights(X_chunk, workspace, sparse=fold is None)
        if isinstance(P, np.ndarray):
            undefined = np.zeros(len(X_chunk), dtype=bool)
            rows = np.flatnonzero(empty)
            undefined[rows] = np.isnan(P[rows]).any(axis=1)
        else:
            undefined = np.zeros(len(X_chunk), dtype=bool)
            undefined[_data_rows(P)[np.isnan(P.data)]] = True
        for b in row_batches(len(todo), row_bytes):
            at = todo[b]
            fast, P_fast, slow, P_slow = state.split(
                _take(P, at), empty[at], fold is None
            )
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
            sums = None
            if len(slow) and fold is None and state.degree == 0:
                done, bounds, sums = _bounded_constant(
                    state, P_slow, sorted_R, order, n - low + 1, high
                )
                out[at[slow[done]]] = bounds
                slow, P_slow, sums = slow[~done], P_slow[~done], sums[~done]
            if len(slow):
                rows = at[slow]
                X_rows = _take(X_chunk, rows)
                if sums is None:
                    mu = query_fits(X_rows, P_slow, Q[rows], empty[rows])
                else:  # the sums of the whole batch, as if none were done
                    mu = state.leave_one_out(
                        X_rows, P_slow, Q[rows], empty[rows], f=sums
                    )
                for j in range(p):
                    mu_j = mu[:, :, j]
                    ends = mu_j.min(axis=1), mu_j.max(axis=1)
                    args = (sorted_R[j], order[j])
                    out[rows, j] = -_select(mu_j, *args, n - low + 1, -1.0, ends)
                    out[rows, p + j] = _select(mu_j, *args, high, 1.0, ends)
        # A query without a prediction (empty under on_empty="nan").
        out[empty & undefined] = np.nan
        return out, empty

    out = _run(pool, X, query_work, chunk_bytes, 2 * p)
    return out[:, :p] + state.center, out[:, p:] + state.center


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
