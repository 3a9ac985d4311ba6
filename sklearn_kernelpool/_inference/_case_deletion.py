"""Local-linear fits without one key, by case deletion, safeguard included.

The part of :class:`._deleted_fits._LeaveOut` that turns the local fit of a
query into the fits of the estimator refitted without each key, at that
query. With ``p`` the normalised weight of the deleted key ``k``,
``v = k - m``, ``A = C^+`` the pseudo-inverse of the local covariance (not
shrunk), ``g = A (m - q)``, ``a = 1 - v . g``, ``w = 1 - p (1 + v^T A v)``
(one minus the local leverage of the key) and ``e`` the residual of the key
from the plain local line:

- the plain local-linear fit without the key is ``f0 - p a e / w``
  (Sherman-Morrison; with ``C^+`` too, where the deletion keeps the rank
  of the design, ``w > 0``);
- the local mean of the values without it is
  ``ybar_k = ybar - p (y_k - ybar) / (1 - p)``, its local mean of the keys
  ``m_k = m - p v / (1 - p)``, its covariance
  ``C_k = (C - p v v^T / (1 - p)) / (1 - p)`` and the pseudo-inverse of that
  ``(1 - p) (A + p A v v^T A / w)``, so that the squared Mahalanobis
  distance of the query from ``m_k`` simplifies to::

      D_k**2 = (1 - p) D**2 - p + p (1 - p) a**2 / w,   D**2 = (q - m) . A (q - m);

- the sum of the squared normalised weights without the key, from that of
  the row ``kish = sum_j p_j**2``, is ``kish_k = (kish - p**2) / (1 - p)**2``
  (Kish's ``1 / n_eff`` of the keys that remain,
  :func:`.._engine._safeguard.kish_ratio`, :class:`DeletedKeys`; where the
  key holds more than half of the weight, from the other keys themselves,
  free of the cancellation of ``kish - p**2``);
- the safeguarded fit without the key is
  ``ybar_k + s(D_k**2, kish_k) (f0_k - ybar_k)`` with ``s``
  :func:`.._engine._safeguard.slope_shrinkage` of the leverage
  ``(1 + D_k**2) kish_k`` of the query in the fit without the key, as the
  estimator refitted without the key predicts.

A key of weight zero leaves all of it unchanged. The pairs whose leverage is
within ``1e-6`` of one are flagged (``hard``) for the caller to compute by
the definition.

No deletion shrinks a slope where the leverage of the query stays at most
:data:`.._engine._safeguard.MAX_LEVERAGE` after any single deletion, which a
bound of the row tells without the terms of each key (:func:`leverage_bound`,
:func:`may_shrink`): by Cauchy-Schwarz in the metric of ``A``, ``p a**2 <=
(1 - w) (1 + D**2)``, so that ``1 + D_k**2 <= (1 - p) (1 + D**2) / w``, and
with ``kish - p**2 <= kish``::

    (1 + D_k**2) kish_k <= (1 + D**2) kish / (w (1 - p))
                        <= (1 + D**2) kish / (min w (1 - max p)),

the leverage of the row divided by its smallest ``w`` and by one minus its
largest weight.
"""

import numpy as np
from scipy.sparse import csr_array, issparse

from .._engine import _safeguard
from .._engine._protocol import square_sums
from ._sparse_case_deletion import _padded

# Leverages this close to one drop the rank of the local design.
_LEVERAGE_MARGIN = 1e-6


def deleted_distance_sq(p, a, rest, distance_sq):
    """``D_k**2 = (1 - p) (D**2 + p a**2 / w) - p`` (see the module
    docstring), per row (axis 0) and deleted key (axis 1).

    ``a`` is overwritten with the result; ``distance_sq`` has one value per
    row.
    """
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        a *= a
        a *= p
        a /= rest
        a += distance_sq[:, None]
        a *= 1.0 - p
        a -= p
    return a


class DeletedKeys:
    """Rows of normalised weights and the key deleted at each slot of a case
    deletion: Kish's ``1 / n_eff`` of the keys that remain.

    Parameters
    ----------
    weights : ndarray or sparse array of shape (n_rows, n_keys)
        The normalised weights of the rows.
    keys : ndarray of int broadcastable to (n_rows, n_deleted)
        The column of ``weights`` of the key deleted at each slot.
    kernel : Kernel
        The kernel of the weights (:func:`.._engine._safeguard.kish_ratio`).
    kish : ndarray of shape (n_rows,) or None
        ``sum_j p_j**2`` of each row, if known.
    """

    def __init__(self, weights, keys, kernel, kish=None):
        self.weights, self.keys, self.kernel = weights, keys, kernel
        if kish is None:
            squares = square_sums(weights, weights.shape[0])
            kish = _safeguard.kish_ratio(squares, 1.0, kernel)
        self.kish = kish

    def kish_without(self, p, block=slice(None)):
        """``kish_k`` of the rows ``block`` (a slice) without each deleted
        key, of normalised weights ``p`` (see the module docstring); a key
        that holds more than half of its row's weight is deleted from the
        row itself, two-pass."""
        start = block.start or 0
        squares = np.multiply(p, p)
        np.subtract(self.kish[block, None], squares, out=squares)
        totals = np.subtract(1.0, p)
        big = p > 0.5  # at most one key per row
        if big.any():
            rows, at = np.nonzero(big)
            keys = self.keys[block] if len(self.keys) > 1 else self.keys
            keys = np.broadcast_to(keys, p.shape)[rows, at]
            totals[rows, at], squares[rows, at] = _without(
                self.weights, start + rows, keys
            )
        return _safeguard.kish_ratio(squares, totals, self.kernel)


def _without(weights, rows, keys):
    """The sums and the sums of squares of ``weights[rows]``, each row
    without its key ``keys``."""
    if issparse(weights):
        other = csr_array(weights[rows], dtype=np.float64, copy=True)
        other.data[other.indices == np.repeat(keys, np.diff(other.indptr))] = 0.0
        totals = np.asarray(other.sum(axis=1), dtype=np.float64).ravel()
    else:
        other = np.array(weights[rows], dtype=np.float64)
        other[np.arange(len(rows)), keys] = 0.0
        totals = other.sum(axis=1)
    return totals, square_sums(other, len(rows))


def leverage_bound(distance_sq, kish, rest, p):
    """An upper bound of the leverage of each row's query after the deletion
    of any one key: ``(1 + D**2) kish / (min w (1 - max p))`` (see the module
    docstring), with ``w`` (``rest``) and ``p`` the keys' on axis 1;
    infinite or NaN where a key has a leverage of one or more (``w <= 0``).
    """
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        room = np.maximum(rest.min(axis=1), 0.0) * (1.0 - p.max(axis=1))
        return (1.0 + distance_sq) * kish / room


def may_shrink(distance_sq, kish, rest, p):
    """The rows some of whose fits without a key may be shrunk: those whose
    :func:`leverage_bound` exceeds :data:`.._engine._safeguard.MAX_LEVERAGE`
    or is NaN (a row within it has ``s = 1`` for every key; a ``kish`` of 0,
    the constant kernel's, keeps none)."""
    bound = leverage_bound(distance_sq, kish, rest, p)
    return np.flatnonzero(~(bound <= _safeguard.MAX_LEVERAGE))


def safeguard(fits, ybar, p, values, distance_sq, deleted, hard, rows=None):
    """Shrink the slopes of the fits without keys, in place.

    Parameters
    ----------
    fits : ndarray of shape (n_rows, n_deleted, n_outputs)
        The plain local-linear fits without each key, overwritten with the
        safeguarded ones.
    ybar : ndarray of shape (n_rows, n_outputs)
        The local means of the values with every key.
    p : ndarray broadcastable to (n_rows, n_deleted)
        The normalised weights of the deleted keys.
    values : ndarray broadcastable to (n_rows, n_deleted, n_outputs)
        Their values.
    distance_sq : ndarray of shape (n_rows, n_deleted)
        Their :func:`deleted_distance_sq`.
    deleted : DeletedKeys
        The rows of weights and the deleted keys, for the ``kish_k`` of the
        fits without them.
    hard : ndarray of bool of shape (n_rows, n_deleted)
        Pairs computed by the caller otherwise, left alone.
    rows : ndarray of int or None
        The rows of ``fits``, ``ybar`` and ``values`` that the others hold
        (None: all of them).
    """
    p = np.broadcast_to(p, distance_sq.shape)
    values = np.broadcast_to(values, fits.shape)
    # Blocks of a quarter of the rows bound the temporaries.
    size = max(-(-len(fits) // 4), 1)
    for start in range(0, len(distance_sq), size):
        block = slice(start, start + size)
        kish = deleted.kish_without(p[block], block)
        s = _safeguard.slope_shrinkage(distance_sq[block], kish)
        s[hard[block]] = 1.0
        some = np.flatnonzero((s < 1.0).any(axis=1))
        if len(some):
            at = start + some
            target = at if rows is None else rows[at]
            fits[target] = _shrink_block(
                fits[target], ybar[target], p[at], values[target], s[some]
            )


def _shrink_block(fits, ybar, p, local, s):
    """``ybar_k + s (fits - ybar_k)`` of a block of rows, ``local`` (a copy
    of the keys' values) made the local means ``ybar_k`` without the keys."""
    mean = ybar[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        local -= mean
        local *= (p / (p - 1.0))[:, :, None]
        local += mean
        shrunk = fits
        plain = shrunk.copy()
        shrunk -= local
        shrunk *= s[:, :, None]
    shrunk[s == 0.0] = 0.0  # the local mean, whatever the plain slope
    shrunk += local
    np.copyto(shrunk, plain, where=(s == 1.0)[:, :, None])
    return shrunk


def _shrunk_fits(f, ybar, distance_sq, kish):
    """The safeguarded fits ``ybar + s (f - ybar)`` of whole rows, by the
    expression of :func:`safeguard` for a key of weight zero."""
    s = _safeguard.slope_shrinkage(distance_sq, kish)
    rows = np.flatnonzero(s < 1.0)
    if len(rows):
        f = f.copy()
        with np.errstate(invalid="ignore", over="ignore"):
            slope = s[rows, None] * (f[rows] - ybar[rows])
        slope[s[rows] == 0.0] = 0.0
        f[rows] = ybar[rows] + slope
    return f


class CaseDeletion:
    """Case-deletion fits (a part of :class:`._deleted_fits._LeaveOut`)."""

    def _deleted(self, P, Q, cols, m, V, inv, ybar, cross, expanded, slots=None):
        """The fits without keys, from the local fit of each row.

        Parameters
        ----------
        P : ndarray or sparse array of shape (n_rows, n_keys)
            The normalised weights of the rows (queries) over the keys
            (sparse with ``slots`` only).
        Q : ndarray of shape (n_rows, n_features)
            The queries, in the frame of the keys.
        cols : ndarray of shape (n_rows,) or None
            One key to delete per row (a training row's own key), or None
            for every key, or for the keys of ``slots``.
        m : ndarray of shape (n_rows, n_features)
            The local means of the keys.
        V, inv : ndarray of shape (n_rows, n_features, n_features), \
                (n_rows, n_features)
            The eigenvectors and inverted eigenvalues of the local
            covariances (not shrunk by the safeguard).
        ybar : ndarray of shape (n_rows, n_outputs)
            The local means of the values.
        cross : ndarray of shape (n_rows, n_features, n_outputs)
            The local cross-covariances of the keys and values.
        expanded : bool
            Whether every key's fit is wanted at once (the dense rows of
            jackknife+), the closed form of :meth:`_deleted_every_key`.
        slots : tuple of ndarray or None
            The normalised weights and support indices ``(W, at)`` of the
            keys to delete, per row (index ``n``: padding), and ``sum_j
            p_j**2`` of each row; the fits ``f`` are returned too.

        Returns
        -------
        The fits of the rows without each deleted key, shape (n_rows,
        n_deleted, n_outputs) (and the plain fits ``f`` with ``slots``).
        """
        r = len(m)
        A = np.einsum("rfe,re,rge->rfg", V, inv, V)  # C^+
        g = np.einsum("rfg,rg->rf", A, m - Q)
        beta = np.einsum("rfg,rgk->rfk", A, cross)
        f = ybar - np.einsum("rfk,rf->rk", beta, m - Q)  # the plain fits
        distance_sq = np.einsum("rf,rf->r", g, m - Q)
        if expanded and cols is None and slots is None:
            return self._deleted_every_key(P, m, A, g, beta, f, ybar, distance_sq)
        kish = None
        if slots is not None:
            Psel, at, kish = slots
            Ysel = _padded(self.Y)[at]
            K = _padded(self.keys)[at]
        elif cols is None:
            Psel, Ysel = P, self.Y[None]
            K = self.keys[None]
            at = np.arange(P.shape[1])[None]
        else:
            Psel, Ysel = P[np.arange(r), cols][:, None], self.Y[cols][:, None, :]
            K = self.keys[cols][:, None, :]
            at = cols[:, None]
        Kc = K - m[:, None, :]
        kg = np.einsum("rcf,rf->rc", Kc, g)
        quad = np.einsum("rcf,rfg,rcg->rc", Kc, A, Kc)
        kb = np.einsum("rcf,rfk->rck", Kc, beta)
        # In place, in the order of the formula: leverage = Psel (1 + quad),
        # a = 1 - kg, ell = Psel a, factor = ell / (1 - leverage).
        quad += 1.0
        quad *= Psel
        rest = np.subtract(1.0, quad, out=quad)  # 1 - leverage
        a = np.subtract(1.0, kg, out=kg)
        distance_k = deleted_distance_sq(Psel, a.copy(), rest, distance_sq)
        ell = np.multiply(a, Psel, out=a)
        kb -= Ysel
        kb += ybar[:, None, :]  # minus the residuals of the keys
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            factor = np.divide(ell, rest, out=ell)
            kb *= factor[:, :, None]
            kb += f[:, None, :]
        hard = rest > _LEVERAGE_MARGIN
        np.logical_not(hard, out=hard)
        if hard.any():
            hard &= Psel > 0
        Psel = np.broadcast_to(Psel, rest.shape)
        deleted = DeletedKeys(P, at, self.pool.kernel, kish)
        safeguard(kb, ybar, Psel, Ysel, distance_k, deleted, hard)
        if slots is not None:
            return _shrunk_fits(f, ybar, distance_sq, deleted.kish), kb, hard
        return kb, hard

    def _deleted_every_key(self, P, m, A, g, beta, f, ybar, distance_sq):
        """The case-deletion fits of every key, expanded in the monomials of
        the keys and values (:meth:`_monomials`).

        With ``a(k) = 1 - (k - m) . g``, the residual ``e(k, y) = y - ybar -
        beta . (k - m)`` and ``s(k) = 1 + (k - m)^T A (k - m)``, a key's
        plain fit is ``f - p a e / (1 - p s)``; ``a e`` and ``s`` are
        polynomials of degree two, and ``a`` of degree one, in ``(k, y)``
        whose coefficients depend on the row only, so they come from one
        product of the rows' coefficients with the keys' monomials (their
        cancellation is that of the expanded moments, bounded by
        :func:`.._engine._local_linear.cancelled`). The safeguard then needs ``a``,
        ``p`` and ``1 - p s`` of each key (:func:`deleted_distance_sq`,
        :class:`DeletedKeys`), on the rows where it may act
        (:func:`may_shrink`).
        """
        # a(k) = a0 + a . k, e(k, y) = y + b0 + b . k (per output).
        a0 = 1.0 + np.einsum("rf,rf->r", m, g)
        a = -g
        b0 = np.einsum("rfk,rf->rk", beta, m) - ybar
        b = -beta
        rest, hard = self._rest(P, m, A)
        kish = _safeguard.kish_ratio(square_sums(P, len(P)), 1.0, self.pool.kernel)
        # The distances of the query from the local means without each key,
        # on the rows where the safeguard may act.
        rows = may_shrink(distance_sq, kish, rest, P)
        if len(rows):
            Pr, rest_r = P[rows], rest[rows]
            distance_k = self._monomials(0, np.hstack([a0[:, None], a])[rows])
            distance_k = deleted_distance_sq(Pr, distance_k, rest_r, distance_sq[rows])
            keys = np.arange(P.shape[1])[None]
            deleted = DeletedKeys(Pr, keys, self.pool.kernel, kish[rows])
        mu = self._plain_deleted_fits(P, f, rest, a0, a, b0, b)
        if len(rows):
            hard_r = hard[rows]
            safeguard(mu, ybar, Pr, self.Y[None], distance_k, deleted, hard_r, rows)
        return mu, hard

    def _rest(self, P, m, A):
        """``1 - p s`` of every key, and the keys of positive weight where it
        is not above ``_LEVERAGE_MARGIN`` (none where it is above for all)."""
        r, d = m.shape
        i, j = np.triu_indices(d)
        twice = np.where(i == j, 1.0, 2.0)
        Am = np.einsum("rfg,rg->rf", A, m)
        # s: 1 + m^T A m - 2 (A m) . k + k^T A k.
        lev = np.hstack(
            [
                (1.0 + np.einsum("rf,rf->r", Am, m))[:, None],
                -2.0 * Am,
                A[:, i, j] * twice,
                np.zeros((r, 1 + d)),
            ]
        )
        # 1 - leverage, the same for every output (its y terms are zero).
        rest = self._monomials(0, lev)
        rest *= P
        np.subtract(1.0, rest, out=rest)
        hard = rest > _LEVERAGE_MARGIN  # False where NaN
        if hard.all():
            hard = np.zeros_like(hard)
        else:
            np.logical_not(hard, out=hard)
            hard &= P > 0
        return rest, hard

    def _plain_deleted_fits(self, P, f, rest, a0, a, b0, b):
        """The plain fits ``f - p a e / (1 - p s)`` of every key deleted, of
        shape (rows, keys, outputs)."""
        r, d = a.shape
        k = b0.shape[1]
        n = len(self.keys)
        i, j = np.triu_indices(d)
        mu = np.empty((r, n, k)) if k > 1 else None
        for o in range(k):
            ab = a[:, i] * b[:, j, o] + np.where(i == j, 0.0, a[:, j] * b[:, i, o])
            coef = np.hstack(
                [
                    (a0 * b0[:, o])[:, None],
                    a0[:, None] * b[:, :, o] + b0[:, o, None] * a,
                    ab,
                    a0[:, None],
                    a,
                ]
            )
            # num = f - p a e / rest, in place.
            num = self._monomials(o, coef)
            num *= P
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                num /= rest
            np.subtract(f[:, o, None], num, out=num)
            if k == 1:
                mu = num[:, :, None]
            else:
                mu[:, :, o] = num
        return mu

    def _monomials(self, output, coef):
        """``coef @ M`` with ``M`` the monomials of degree at most two in the
        keys, and the value of ``output`` times one and the keys, as rows:
        ``1, k, k_a k_b (a <= b), y, y k``; ``coef`` may hold the first
        columns only."""
        key = ("monomials", output)
        if key not in self._cache:
            K, y = self.keys, self.Y[:, output, None]
            i, j = np.triu_indices(K.shape[1])
            terms = np.hstack([np.ones((len(K), 1)), K, K[:, i] * K[:, j], y, y * K])
            self._cache[key] = np.ascontiguousarray(terms.T)
        return coef @ self._cache[key][: coef.shape[1]]
