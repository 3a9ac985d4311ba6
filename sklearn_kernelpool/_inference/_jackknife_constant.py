"""Degree-0 jackknife+ on dense rows, from the weighted scores as they are.

With ``w_i`` the weighted score of key ``i`` at a query (its sample weight
included), ``T = sum_i w_i`` and ``f = sum_i w_i y_i``, the fit without key
``i`` is ``mu_{-i} = (f - w_i y_i) / (T - w_i)``, a ratio that does not
depend on the scale of the row: the rows need no normalisation, and the
residual of a training row needs only its own score and the two sums that
``predict`` forms. Where every key holds at most half of a row's total, the
denominators lose at most one bit and the formula is taken as it is
(:func:`simple_rows`); other rows (a key that holds most of the weight, an
empty neighbourhood) are left to the normalised weights of
:mod:`._conformal`.

The bounds of a row (:func:`constant_bounds`) select the two order
statistics of jackknife+ from a window of the residuals sorted once
(:func:`._order_statistics._select_window`): with ``s = max_i w_i / (T -
max_i w_i)`` and ``g = f / T``, ``mu_{-i} - g = w_i (g - y_i) / (T - w_i)``
lies within ``[-s (max_j y_j - g), s (g - min_j y_j)]``, so only the keys of
that window have their fits computed.
"""

import functools

import numpy as np

from ._order_statistics import _select_window


def simple_rows(total, top):
    """The rows whose fits without each key take the closed form as it is:
    a finite positive total, and no key above half of it (``top``: the
    largest score; scores are never negative)."""
    with np.errstate(invalid="ignore"):
        return np.isfinite(total) & (total > 0) & (top <= 0.5 * total)


def own_leave_one_out(W, Y, total, start):
    """The fits at training rows ``start, start + 1, ...`` without their own
    key, ``(f_i - w_ii y_i) / (T_i - w_ii)``, and the mask of the rows where
    the closed form holds (:func:`simple_rows`); ``W`` holds their weighted
    scores against every key of the support, ``total`` their row sums."""
    r = len(W)
    cols = np.arange(start, start + r)
    own = W[np.arange(r), cols]
    f = W @ Y
    done = simple_rows(total, own)
    f -= own[:, None] * Y[cols]
    with np.errstate(invalid="ignore", divide="ignore"):
        f /= (total - own)[:, None]
    return f, done


def constant_bounds(W, rows, Y, f, total, top, sorted_R, order, rank_low, rank_high):
    """The jackknife+ bounds of the ``rows`` of ``W`` (each simple, see
    :func:`simple_rows`), as one array ``(lower, upper)`` of shape
    ``(len(rows), 2 n_outputs)``.

    ``f``, ``total`` and ``top`` are the weighted sums of the values, the
    totals and the largest scores of those rows; ``sorted_R`` and ``order``
    the residuals of each output sorted once and their keys; ranks out of
    ``[1, n]`` give -inf or +inf. The fits of the window's keys are computed
    by the formula of the module, so the bounds are those of the fits of
    every key.
    """
    n, p = Y.shape
    bounds = np.empty((len(rows), 2 * p))
    share = top / (total - top)
    for j in range(p):
        y = Y[:, j]
        g = f[:, j] / total
        below, above = share * (y.max() - g), share * (g - y.min())
        slack = 1e-9 * (below + above + np.abs(g) + np.abs(y).max())
        lo, hi = g - below - slack, g + above + slack
        keys_j = order[j]
        fits = {}  # the fits of the widest window yet, of every row

        def values(sub, a, b, sign, j=j, y=y, keys_j=keys_j, fits=fits):
            # The windows of both bounds' selections are nested about the
            # residuals of their ranks, widest first (the same for a
            # symmetric level): their fits are computed once.
            if not fits or a < fits["start"] or b > fits["stop"]:
                keys = keys_j[a:b]
                weight = np.take(W, keys, axis=1)
                if len(rows) < len(W):
                    weight = weight[rows]
                mu = f[:, j, None] - weight * y[keys]
                mu /= np.subtract(total[:, None], weight, out=weight)
                fits.update(start=a, stop=b, mu=mu)
            at = fits["start"]
            chosen = fits["mu"][sub, a - at : b - at]
            return np.negative(chosen, out=chosen) if sign < 0 else chosen

        for column, rank, sign in ((j, rank_low, -1.0), (p + j, rank_high, 1.0)):
            if rank < 1 or rank > n:
                value = -np.inf if rank < 1 else np.inf  # as _select's
                bounds[:, column] = -value if sign < 0 else value
                continue
            ends = (-hi, -lo) if sign < 0 else (lo, hi)
            selected = _select_window(
                functools.partial(values, sign=sign),
                np.arange(len(rows)),
                *ends,
                sorted_R[j],
                rank,
            )
            bounds[:, column] = -selected if sign < 0 else selected
    return bounds
