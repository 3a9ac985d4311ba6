"""The order statistics of jackknife+ and CV+ intervals.

The interval of Barber, Candes, Ramdas and Tibshirani (Ann. Statist. 49
(2021)) at a query is ``[q_low{mu_{-i}(q) - R_i}, q_high{mu_{-i}(q) +
R_i}]``: order statistics of ``n`` values per query, of the ranks of
:func:`order_ranks`, selected here from the residuals sorted once
(:func:`_select` for dense leave-out fits, :func:`_select_sparse` for a
query whose weights are nonzero on few keys).
"""

from fractions import Fraction

import numpy as np

_EPS = float(np.finfo(np.float64).eps)


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


def _select(mu, sorted_R, order, rank, sign=1.0, extremes=None):
    """The ``rank``-th smallest of ``sign * mu[r, i] + R_i`` for each row ``r``.

    ``sorted_R`` holds the residuals in increasing order, ``order`` their
    indices; ``sign`` is 1 or -1 (the lower bound selects from ``R_i -
    mu[r, i]``, without a negated copy of ``mu``); ``extremes``: the minimum
    and maximum of each row of ``mu``, if known. With ``lo``, ``hi`` the
    extremes of a row of ``sign * mu`` and ``t`` the ``rank``-th smallest
    residual, the answer lies in ``[lo + t, hi + t]``: a key whose residual
    is below ``t - (hi - lo)`` has a value below it and one above ``t + (hi -
    lo)`` a value above it (margins widened by the rounding), so only the
    keys between are selected from (a contiguous run of ``sorted_R``), by
    partial selection (:func:`_select_window`). The values are those of the
    full computation, so is the result. Rows with a non-finite entry are
    selected from all their values (:func:`_order_statistic`). Ranks out of
    ``[1, n]`` give -inf or +inf.
    """
    r, n = mu.shape
    if rank < 1:
        return np.full(r, -np.inf)
    if rank > n:
        return np.full(r, np.inf)
    out = np.empty(r)
    lo, hi = (mu.min(axis=1), mu.max(axis=1)) if extremes is None else extremes
    if sign < 0:
        lo, hi = -hi, -lo
    finite = np.isfinite(lo) & np.isfinite(hi)
    rows = np.flatnonzero(finite)
    if len(rows):

        def values(rows, a, b):
            chosen = mu[rows[:, None], order[None, a:b]]
            return np.negative(chosen, out=chosen) if sign < 0 else chosen

        out[rows] = _select_window(values, rows, lo[rows], hi[rows], sorted_R, rank)
    rows = np.flatnonzero(~finite)
    if len(rows):
        R = np.empty(n)
        R[order] = sorted_R
        values = (sign * mu[rows] + R)[:, :, None]
        out[rows] = _order_statistic(values, rank, 1.0)[:, 0]
    return out


def _select_window(values, rows, lo, hi, sorted_R, rank):
    """The ``rank``-th smallest of ``v[r, i] + R_i`` for each of ``rows``,
    given bounds ``lo <= v[r, i] <= hi`` (finite) of each row.

    ``values(rows, a, b)`` returns a new array of the values ``v`` of the
    keys at places ``a`` to ``b`` of ``sorted_R`` for those rows. A row's
    answer is selected from its window of residuals (see :func:`_select`);
    the windows of all rows are centred on the same residual and nested, so
    rows whose windows are of similar widths (within a factor of two) are
    selected together, over the widest of their windows, by one partition:
    the keys of the wider window outside a row's own lie on their side of
    its answer, which is the same order statistic of the wider window. The
    groups come widest first: the first call of ``values`` asks for the
    window that holds all the others.
    """
    pivot = sorted_R[rank - 1]
    margin = (hi - lo) + 8 * _EPS * (np.abs(lo) + np.abs(hi) + pivot)
    start = np.searchsorted(sorted_R, pivot - margin, side="left")
    stop = np.searchsorted(sorted_R, pivot + margin, side="right")
    out = np.empty(len(rows))
    group = np.log2(stop - start).astype(np.intp)  # the windows hold >= 1 key
    for g in np.unique(group)[::-1]:  # the widest window first
        at = np.flatnonzero(group == g)
        a, b = int(start[at].min()), int(stop[at].max())
        chosen = values(rows[at], a, b)
        chosen += sorted_R[a:b]
        chosen.partition(rank - 1 - a, axis=1)
        out[at] = chosen[:, rank - 1 - a]
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
    # Partial selection, the rows of each place together.
    place = rank - 1 - below
    out = np.empty(r)
    for k in np.unique(place):
        rows = np.flatnonzero(place == k)
        chosen = candidates[rows]
        chosen.partition(k, axis=1)
        out[rows] = chosen[:, k]
    return out


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
