"""Leave-one-out fits at queries whose weights are nonzero on few keys.

The part of :class:`._deleted_fits._LeaveOut` that works on the sparse weights
of the neighbours of each query (the tree paths, compact kernels): the fits
``mu_{-j}(q)`` for the keys ``j`` of positive weight only, a key of weight
zero leaving the fit unchanged.
"""

import numpy as np

from .._engine import _local_linear
from .._engine._protocol import square_sums
from .._engine._safeguard import kish_ratio

# A leave-out denominator below this (in units of the query's total weight)
# has lost the weights of the remaining keys to underflow: computed exactly.
_TINY_REST = 1e-150


def _padded(A):
    """``A`` and a row of zeros (the index of padding)."""
    return np.vstack([A, np.zeros((1,) + A.shape[1:])])


class SparseLeaveOut:
    """Sparse leave-one-out fits (a part of :class:`._deleted_fits._LeaveOut`)."""

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
            fit, mu, hard = self._sparse_linear(X_rows, P, Q, own, at, W)
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

    def _sparse_linear(self, X_rows, P, Q, own, at, W):
        """Degree 1 on sparse rows: :meth:`_deleted` at the given keys, the
        sums of the squared weights from the neighbours ``W``; rows whose
        moments cancel by the dense :meth:`_linear`."""
        r, n = P.shape
        k = self.Y.shape[1]
        layout = self.pool.moments.layout
        total = np.asarray(P.sum(axis=1)).ravel()
        kish = kish_ratio(square_sums(W, r), total, self.pool.kernel)
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
            m, V, inv, _, _ = _local_linear._local_geometry(
                means, Q[rows], layout, shrunk=False
            )
            ybar = means[:, layout.values]
            cross = means[:, layout.cross].reshape(-1, m.shape[1], k)
            cross -= m[:, :, None] * ybar[:, None, :]
            slots = (own[rows] / total[rows, None], at[rows], kish[rows])
            Pr = Pn if len(rows) == r else Pn[rows]
            fit[rows], mu[rows], hard[rows] = self._deleted(
                Pr, Q[rows], None, m, V, inv, ybar, cross, True, slots=slots
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
