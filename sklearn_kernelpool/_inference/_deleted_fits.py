"""Leave-out fits at the queries from the weights of the prediction.

:class:`_LeaveOut` gives, at every query, the fits ``mu_{-i}(q)`` of the
model without each training row ``i`` (jackknife+) or without each fold
(CV+), by the closed forms of :mod:`._conformal` (the deleted weight for
degree 0, the case-deletion formula of the local weighted least squares for
degree 1, its slope shrunk by the safeguard of the fit without the row:
:mod:`._case_deletion`; for degree 2 those of the nested local fits,
:mod:`._quadratic_deletion`), and by the definition (an engine built without the
row) where they are undefined; on dense weights or on the sparse weights of
the neighbours. The fits without a fold are those of the local fits over
the kept keys, safeguard included, its effective number of keys that of
the kept keys (:func:`.._engine._local_linear.solve`).
"""

import warnings

import numpy as np
from scipy.sparse import csr_array

from .._engine import _centred_fit, _local_linear
from .._engine._local_quadratic import quadratic_fit
from .._engine._protocol import square_sums
from .._engine._safeguard import kish_ratio
from .._utils._warnings import EmptyNeighborhoodWarning, LocalLinearFallbackWarning
from .._utils._working_memory import working_memory_bytes
from ._case_deletion import CaseDeletion
from ._quadratic_deletion import deleted_quadratic
from ._sparse_case_deletion import _TINY_REST, SparseLeaveOut


class _LeaveOut(SparseLeaveOut, CaseDeletion):
    """The engine of a fitted estimator and its fits without some rows."""

    def __init__(self, estimator):
        pool = self.pool = exact_engine(estimator)
        self.support = pool.support
        values = np.asarray(estimator.values_, dtype=np.float64)
        values = values.reshape(values.shape[0], -1)[self.support]
        # Centred values: leave-out fits are differences of weighted sums.
        self.center = np.mean(values, axis=0)
        self.Y = values - self.center
        self.keys = pool.keys.astype(np.float64)
        self.degree = pool.degree
        self.moments = self.degree == 1 and pool.moments.uses_moment_matrix()
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
            if self.degree == 1:
                # The local moments in the order of the keys, whatever the
                # chunk: ill-conditioned local fits round alike.
                P.sort_indices()
            return P, queries[1], empty
        return np.asarray(P, dtype=np.float64), queries[1], empty

    def raw_weights(self, X_chunk, workspace):
        """Dense weighted scores of a chunk (float64, not normalised), their
        row sums, and the chunk's queries; :meth:`normalise` makes them the
        weights of :meth:`weights`."""
        queries = self.pool._queries(X_chunk)
        W, total = self.pool._weighted_scores(queries, workspace, sparse=False)
        if W.dtype != np.float64:
            W = W.astype(np.float64)
            total = W.sum(axis=1)
        return W, total, queries

    def normalise(self, W, total, queries, workspace):
        """The weights, queries and empty rows of :meth:`weights` from
        :meth:`raw_weights` (``W`` is divided in place)."""
        P, empty = self.pool._normalise_scores(W, total, queries, workspace, False)
        return P, queries[1], empty

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
        if self.degree >= 1 and not self.moments:
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

    # -- leave-one-out ---------------------------------------------------------
    def leave_one_out(self, X_chunk, P, Q, empty, cols=None, f=None):
        """``mu_{-i}(q)`` for the rows of a chunk, centred.

        Shape ``(n_rows, n_keys, n_outputs)``, or ``(n_rows, 1, n_outputs)``
        for one column per row (``cols``: the support index of each row).
        ``f``: the weighted sums ``P @ Y`` of degree 0, if computed.
        """
        r, n = P.shape
        if cols is None:
            Psel = P
        else:
            Psel = P[np.arange(r), cols][:, None]
        local = np.zeros(r, dtype=bool)
        if self.degree >= 1:  # weights are never negative: a finite sum
            local = ~empty & np.isfinite(P.sum(axis=1))  # has finite terms
        if np.all(local):
            mu, hard = self._linear(P, Q, cols)
        elif not np.any(local):
            mu, hard = self._constant(P, cols, f)
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

    def _constant(self, P, cols, f=None):
        """Degree 0: ``(f - p_i y_i) / (1 - p_i)``, the denominators exact."""
        Y = self.Y
        if f is None:
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
        """Degree 1: ``f - l_i r_i / (1 - h_ii)``, then the safeguard of
        each fit without a key (:mod:`._case_deletion`).

        The local fit from the pooled moments, and the per-key terms
        expanded about the local mean of the keys (their cancellation is
        bounded as in :func:`.._engine._local_linear.cancelled`); rows whose moments
        cancel are computed about their own local means.
        """
        P = P / P.sum(axis=1, keepdims=True)
        if self.degree == 2:
            layout = self.pool.moments.quadratic_layout
            kernel = self.pool.kernel
            return deleted_quadratic(P, self.keys, self.Y, Q, layout, kernel, cols)
        layout = self.pool.moments.layout
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
                m, V, inv, _, _ = _local_linear._local_geometry(
                    means, Q[rows], layout, shrunk=False
                )
                ybar = means[:, layout.values]
                cross = means[:, layout.cross].reshape(-1, d, k)
                cross -= m[:, :, None] * ybar[:, None, :]
                sub = None if cols is None else cols[rows]
                fit = self._deleted(P[rows], Q[rows], sub, m, V, inv, ybar, cross, True)
                if not np.any(redo):
                    return fit
                mu = np.empty((r,) + fit[0].shape[1:])
                hard = np.zeros((r, fit[0].shape[1]), dtype=bool)
                mu[rows], hard[rows] = fit
        rows = np.flatnonzero(redo)
        if len(rows):
            Pr = P[rows]
            m, cov, scale = _centred_fit.centred_geometry(Pr, self.keys, layout)
            V, inv, _, _ = _local_linear._pseudo_inverse(cov, scale, layout, None)
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

    # -- leave-fold-out --------------------------------------------------------
    def leave_folds_out(self, X_chunk, P, Q, empty, fold, n_folds):
        """``mu_{-S_k}(q)`` for every fold ``k``: (n_rows, n_folds, n_outputs)."""
        r = len(P)
        mu = np.empty((r, n_folds, self.Y.shape[1]))
        local = np.zeros(r, dtype=bool)
        if self.degree >= 1:
            local = ~empty & np.all(np.isfinite(P), axis=1)
        layout = self.pool.moments.layout
        if self.degree == 2:
            layout = self.pool.moments.quadratic_layout
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
        """The local-linear fits of normalised rows over the kept keys, the
        safeguard's kish that of the kept keys."""
        Pk = Pk / Pk.sum(axis=1, keepdims=True)
        keys, Y = self.keys[keep], self.Y[keep]
        kernel = self.pool.kernel
        if self.degree == 2:
            return quadratic_fit(Pk, keys, Y, Q, layout, False, kernel=kernel)[0]
        if self.moments:
            matrix = self._cache.get(("moments", k))
            if matrix is None:
                matrix = self._moment_matrix[keep]
                self._cache[("moments", k)] = matrix
            sums = _dot(Pk, matrix)
            kish = kish_ratio(square_sums(Pk, len(Pk)), 1.0, kernel)
            mean, _, _ = _local_linear.solve(sums, Q, layout, False, kish=kish)
            redo = np.flatnonzero(_local_linear.cancelled(sums, layout))
        else:
            mean = np.empty((len(Pk), Y.shape[1]))
            redo = np.arange(len(Pk))
        if len(redo):
            mean[redo] = _centred_fit.centred_fit(
                Pk[redo], keys, Y, Q[redo], layout, False, kernel=kernel
            )[0]
        return mean


def exact_engine(estimator):
    """The engine of an estimator's rows: on the binned path, its exact
    engine (the leave-out fits need every key's weight)."""
    pool = estimator._pool
    return getattr(pool, "exact_pool", pool)


def _dot(A, B):
    """``A @ B`` (rows of weights times columns of keys or values)."""
    return A @ B


def _dense(P):
    """A batch of weights as an array."""
    return P if isinstance(P, np.ndarray) else P.toarray()


def _data_rows(P):
    """The row of each stored entry of a CSR array."""
    return np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
