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

- the safeguarded fit without the key is
  ``ybar_k + s(D_k**2, r) (f0_k - ybar_k)`` with ``s``
  :func:`.._engine._safeguard.slope_shrinkage` and ``r`` the rank of the row
  (kept by the deletion), as the estimator refitted without the key
  predicts.

A key of weight zero leaves all of it unchanged. The pairs whose leverage is
within ``1e-6`` of one are flagged (``hard``) for the caller to compute by
the definition.
"""

import numpy as np

from .._engine import _safeguard
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


def may_shrink(distance_sq, rest, rank):
    """The rows some of whose fits without a key may be shrunk.

    By Cauchy-Schwarz in the metric of ``A``, ``p a**2 <= (1 - w) (1 +
    D**2)``, so that ``D_k**2 <= (D**2 + 1) / w - 1``: a row whose smallest
    ``w`` (``rest``, axis 1) keeps that within the radius has ``s = 1`` for
    every key. Rows with a leverage of one or more (``w <= 0``) and NaN
    bounds are kept.
    """
    radius_sq = _safeguard.SLOPE_RADIUS**2 * (rank + 1.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        bound = (distance_sq + 1.0) / np.maximum(rest.min(axis=1), 0.0) - 1.0
    return np.flatnonzero(~(bound <= radius_sq))


def safeguard(fits, ybar, p, values, distance_sq, rank, hard, rows=None):
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
    rank : ndarray of shape (n_rows,)
        The rank of each row's local covariance.
    hard : ndarray of bool of shape (n_rows, n_deleted)
        Pairs computed by the caller otherwise, left alone.
    rows : ndarray of int or None
        The rows of ``fits``, ``ybar`` and ``values`` that the others hold
        (None: all of them).
    """
    radius_sq = _safeguard.SLOPE_RADIUS**2 * (rank + 1.0)
    beyond = distance_sq > radius_sq[:, None]  # False where NaN
    beyond &= ~hard
    some = np.flatnonzero(beyond.any(axis=1))
    if not len(some):
        return
    p = np.broadcast_to(p, distance_sq.shape)
    values = np.broadcast_to(values, fits.shape)
    # Blocks of a quarter of the rows bound the temporaries.
    size = -(-len(fits) // 4)
    for start in range(0, len(some), size):
        at = some[start : start + size]
        target = at if rows is None else rows[at]
        s = np.where(
            beyond[at],
            _safeguard.slope_shrinkage(distance_sq[at], rank[at, None]),
            1.0,
        )
        w = p[at]
        local = values[target]  # a copy, made the local mean without the key
        mean = ybar[target, None, :]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            local -= mean
            local *= (w / (w - 1.0))[:, :, None]
            local += mean
            shrunk = fits[target]
            plain = shrunk.copy()
            shrunk -= local
            shrunk *= s[:, :, None]
        shrunk[s == 0.0] = 0.0  # the local mean, whatever the plain slope
        shrunk += local
        np.copyto(shrunk, plain, where=(s == 1.0)[:, :, None])
        fits[target] = shrunk


def _shrunk_fits(f, ybar, distance_sq, rank):
    """The safeguarded fits ``ybar + s (f - ybar)`` of whole rows, by the
    expression of :func:`safeguard` for a key of weight zero."""
    s = _safeguard.slope_shrinkage(distance_sq, rank)
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

    def _deleted(self, P, Q, cols, m, V, inv, rank, ybar, cross, expanded, slots=None):
        """The fits without keys, from the local fit of each row.

        Parameters
        ----------
        P : ndarray of shape (n_rows, n_keys)
            The normalised weights of the rows (queries) over the keys.
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
        rank : ndarray of shape (n_rows,)
            Their ranks.
        ybar : ndarray of shape (n_rows, n_outputs)
            The local means of the values.
        cross : ndarray of shape (n_rows, n_features, n_outputs)
            The local cross-covariances of the keys and values.
        expanded : bool
            Whether every key's fit is wanted at once (the dense rows of
            jackknife+), the closed form of :meth:`_deleted_every_key`.
        slots : tuple of ndarray or None
            The normalised weights and support indices ``(W, at)`` of the
            keys to delete, per row (index ``n``: padding); the fits ``f``
            are returned too.

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
            return self._deleted_every_key(P, m, A, g, beta, f, ybar, distance_sq, rank)
        if slots is not None:
            Psel, at = slots
            Ysel = _padded(self.Y)[at]
            K = _padded(self.keys)[at]
        elif cols is None:
            Psel, Ysel = P, self.Y[None]
            K = self.keys[None]
        else:
            Psel, Ysel = P[np.arange(r), cols][:, None], self.Y[cols][:, None, :]
            K = self.keys[cols][:, None, :]
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
        safeguard(kb, ybar, Psel, Ysel, distance_k, rank, hard)
        if slots is not None:
            return _shrunk_fits(f, ybar, distance_sq, rank), kb, hard
        return kb, hard

    def _deleted_every_key(self, P, m, A, g, beta, f, ybar, distance_sq, rank):
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
        ``p`` and ``1 - p s`` of each key (:func:`deleted_distance_sq`).
        """
        # a(k) = a0 + a . k, e(k, y) = y + b0 + b . k (per output).
        a0 = 1.0 + np.einsum("rf,rf->r", m, g)
        a = -g
        b0 = np.einsum("rfk,rf->rk", beta, m) - ybar
        b = -beta
        rest, hard = self._rest(P, m, A)
        # The distances of the query from the local means without each key,
        # on the rows where the safeguard may act.
        rows = may_shrink(distance_sq, rest, rank)
        if len(rows):
            Pr, rest_r = P[rows], rest[rows]
            distance_k = self._monomials(0, np.hstack([a0[:, None], a])[rows])
            distance_k = deleted_distance_sq(Pr, distance_k, rest_r, distance_sq[rows])
        mu = self._plain_deleted_fits(P, f, rest, a0, a, b0, b)
        if len(rows):
            rank, hard_r = rank[rows], hard[rows]
            safeguard(mu, ybar, Pr, self.Y[None], distance_k, rank, hard_r, rows)
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
