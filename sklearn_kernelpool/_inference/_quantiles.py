"""Conditional quantiles and distribution functions of attention pooling.

The normalised attention weights ``p_i(q)`` of a query (``degree=0``: non
negative, summing to one) define a distribution of ``y`` given ``q``, the
attention-weighted empirical distribution of the training values (the
conditional distribution of quantile regression forests, Meinshausen,
"Quantile regression forests", JMLR 7 (2006), with kernel weights in place
of the forest's)::

    F(y | q) = sum_i p_i(q) 1{y_i <= y},
    Q(tau | q) = min {y_i : F(y_i | q) >= tau - t}.

The keys are sorted by their values once per output
(:attr:`.._engine._pooling.KernelPool.value_order`, cached on the engine and
never saved); a chunk of queries gets its weights from the engine, takes
them in that order, and their cumulative sum, divided by its last entry
(the total, 1 up to rounding), is ``F`` at the sorted values.
A quantile is then a binary search per level and query in that cumulative
sum, a distribution function a search of the thresholds in the sorted
values: no sort per query. Chunks hold their dense weights, the weights
in the order of the values, their float64 cumulative sum and, for levels 0
and 1, the signs of the weights, within ``working_memory``.

For ``0 < tau < 1``, the tolerance ``t = 64 (eps + n eps_64)``, with
``eps`` the machine epsilon of the dtype of the fit and ``n`` the number of
keys, absorbs the rounding of the weights and of their cumulative sum: a
cumulative weight that reaches ``tau`` exactly in exact arithmetic (two keys
of weight 1/2 and ``tau=0.5``) reaches it here too, and the quantile is the
lower key, as the definition says; the search asks for a positive
cumulative weight as well. The two ends take no tolerance: level 0 is the
smallest value of positive weight (the limit ``tau -> 0+``), level 1 the
largest, however small its weight, read from the signs of the weights
before they are summed (a tiny weight after the others may not change their
rounded sum). So the quantiles at 0 and 1 are exactly symmetric under ``y
-> -y`` on every path, and those at ``tau`` and ``1 - tau`` away from a jump
of ``F``.
"""

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from .._engine._array_api import is_array_api_pool
from .._utils._input import validate_queries
from ._deleted_fits import exact_engine

# Bytes per key that a chunk holds per query: three float64 arrays (the
# dense weights, the weights in the order of the values, their cumulative
# sum) and the signs of the weights of levels 0 and 1.
_ROW_BYTES = 8 * 3 + 1
_TINY = float(np.nextafter(0.0, 1.0))


def check_quantile_support(estimator, method):
    """Refuse the fits whose attention weights are no distribution here."""
    if getattr(estimator, "degree", 0) != 0:
        raise ValueError(
            f"{method} needs degree=0: the equivalent-kernel weights of the "
            "local polynomial fits (degree=1 or 2) can be negative, so their "
            "cumulative sum is no distribution function; got degree="
            f"{estimator.degree!r}. Use degree=0."
        )
    if is_array_api_pool(estimator._pool):
        raise ValueError(
            f"{method} works on NumPy arrays only; this estimator was fitted "
            "on arrays of another array API namespace."
        )


class LevelInterval(Interval):
    """The constraint of a quantile level in ``_parameter_constraints``:
    a real number in [0, 1] that is not a boolean (Python's booleans are
    integers, which ``Interval(Real, 0, 1)`` would take)."""

    def __init__(self):
        super().__init__(Real, 0, 1, closed="both")

    def is_satisfied_by(self, val):
        return _is_level(val) and super().is_satisfied_by(val)

    def __str__(self):
        return f"{super().__str__()}, not a boolean"


def _is_level(value):
    """Whether ``value`` is a real number other than a boolean."""
    return isinstance(value, Real) and not isinstance(value, (bool, np.bool_))


def _levels_array(quantiles):
    """``quantiles`` as float64, or None where an entry is no real number
    or is a boolean. The entries of a list are checked one by one: NumPy
    reads ``[0.5, True]`` as floats, and ``"0.5"`` as a number."""
    raw = np.asarray(quantiles)
    if raw.dtype.kind not in "iufO":
        return None
    listed = raw.dtype.kind == "O" or not isinstance(quantiles, np.ndarray | np.generic)
    if listed and not all(map(_is_level, np.asarray(quantiles, dtype=object).ravel())):
        return None
    return raw.astype(np.float64)


def check_levels(quantiles, name="quantiles"):
    """The levels as a 1-D float64 array in [0, 1], and whether one float
    was given (the answers then have no axis of levels). Strings and
    booleans are refused, inside a list too."""
    try:
        levels = _levels_array(quantiles)
    except (TypeError, ValueError):
        levels = None
    if (
        levels is None
        or levels.ndim > 1
        or levels.size == 0
        or not np.all((levels >= 0) & (levels <= 1))
    ):
        raise ValueError(
            f"{name} must be a float or a non-empty 1-D array-like of floats "
            f"in [0, 1], not strings or booleans; got {quantiles!r}."
        )
    return levels.reshape(-1), levels.ndim == 0


def check_thresholds(y_values, n_outputs):
    """The values of :meth:`predict_cdf` as (n_values, n_outputs) float64
    (a 1-D array is the same for every output)."""
    try:
        values = np.asarray(y_values)
        numeric = values.dtype.kind in "biuf"  # not strings, dates, objects
        values = values.astype(np.float64) if numeric else None
    except (TypeError, ValueError):
        values = None
    accepted = (
        f"y_values must be a non-empty 1-D array-like of numbers, or of shape "
        f"(n_values, {n_outputs}) with one column per output, without NaN; got "
        f"{y_values!r}."
    )
    if (
        values is None
        or values.ndim not in (1, 2)
        or values.shape[0] == 0
        or np.any(np.isnan(values))
    ):
        raise ValueError(accepted)
    if values.ndim == 2 and values.shape[1] != n_outputs:
        raise ValueError(accepted)
    if values.ndim == 1:
        values = np.repeat(values[:, None], n_outputs, axis=1)
    return values


def tolerance(pool):
    """The tolerance ``t`` of the cumulative weights (see the module)."""
    n = pool.keys.shape[0]
    eps = float(np.finfo(pool.dtype).eps)
    return 64.0 * (eps + n * float(np.finfo(np.float64).eps))


def sorted_values(pool):
    """The values of the keys in increasing order, shape (n_outputs, n_keys),
    in the dtype of the fit (the scaled values multiplied back, exactly)."""
    order = pool.value_order
    values = np.take_along_axis(pool.values, order.T, axis=0)
    return np.ascontiguousarray((values * pool.value_scale).T)


def first_reaching(C, threshold):
    """The first column of each row of ``C`` (rows non-decreasing) that is
    at least ``threshold`` (n_rows, n_thresholds), by a binary search of
    every row and threshold at once; the number of columns where none is
    (and in a row of NaN: 0). Shape (n_rows, n_thresholds)."""
    n_rows, n = C.shape
    rows = np.arange(n_rows)[:, None]
    lo = np.zeros(threshold.shape, dtype=np.intp)
    hi = np.full(threshold.shape, n, dtype=np.intp)
    for _ in range(n.bit_length()):
        mid = (lo + hi) >> 1
        below = (C[rows, np.minimum(mid, n - 1)] < threshold) & (lo < hi)
        lo = np.where(below, mid + 1, lo)
        hi = np.where(below, hi, mid)
    return lo


class ChunkDistribution:
    """The work of ``pool._run_chunks``: quantiles or distribution functions
    of a chunk of queries.

    Parameters
    ----------
    pool : KernelPool
        The exact engine (weights of every key).
    levels : ndarray of shape (n_levels,) or None
        The quantile levels; None for the distribution functions.
    thresholds : ndarray of shape (n_values, n_outputs) or None
        The values at which the distribution functions are evaluated.
    shift : ndarray of shape (n_queries, n_outputs) or None
        Subtracted from the thresholds of each query (a partially linear
        fit's linear part); the chunks must then run in order, on one
        thread.
    """

    def __init__(self, pool, levels=None, thresholds=None, shift=None):
        self.pool = pool
        self.order = pool.value_order
        # The place of each key in the order of each output's values.
        self.place = np.empty_like(self.order)
        np.put_along_axis(
            self.place, self.order, np.arange(self.order.shape[1])[None, :], axis=1
        )
        self.sorted = sorted_values(pool)
        self.levels = levels
        # Levels 0 and 1 read the first and last key of positive weight.
        self.ends = levels is not None and bool(np.any((levels == 0) | (levels == 1)))
        self.t = tolerance(pool)
        self.thresholds = thresholds
        self.shift = shift
        self.position = 0
        # The trees' weights are sparse: their neighbours are ordered alone.
        self.sparse = pool.algorithm != "brute"

    def __call__(self, X_chunk, workspace):
        """``(rows, empty)``: per query the answers of every output, output
        by output (levels or thresholds within)."""
        pool = self.pool
        queries = pool._queries(X_chunk)
        P, empty = pool._normalized_scores(queries, workspace, sparse=self.sparse)
        n_rows = P.shape[0]
        start = self.position
        self.position += n_rows
        parts = []
        for j, order in enumerate(self.order):
            if isinstance(P, np.ndarray):
                W = np.take(P, order, axis=1).astype(np.float64, copy=False)
                ranks = None
            else:
                W, ranks = _ordered_rows(P, self.place[j])
            cumulative = _Cumulative(W, ranks, ends=self.ends)
            if self.levels is None:
                parts.append(self._distribution(cumulative, j, start))
            else:
                parts.append(self._quantiles(cumulative, j))
        out = np.concatenate(parts, axis=1)
        if pool.on_empty == "nan":
            out[empty] = np.nan
        return out, empty

    def _quantiles(self, cumulative, j):
        """The quantiles of output ``j`` from the cumulative weights."""
        return self.sorted[j][cumulative.quantile_places(self.levels, self.t)]

    def _distribution(self, cumulative, j, start):
        """``F`` of output ``j`` at its thresholds from the cumulative
        weights: the weight of the keys up to the last value <= y."""
        n_rows = len(cumulative.total)
        thresholds = np.broadcast_to(
            self.thresholds[:, j], (n_rows, len(self.thresholds))
        )
        if self.shift is not None:
            thresholds = thresholds - self.shift[start : start + n_rows, j, None]
        places = np.searchsorted(self.sorted[j], thresholds, side="right")
        return cumulative.below(places)


class _Cumulative:
    """The cumulative weights of a chunk in the order of the values.

    ``W`` holds, per row, the weights in that order: of every key
    (``ranks`` None), or of the row's keys of positive weight in their
    order, whose places among all the keys are ``ranks`` (padded with
    ``n``); it is summed in place into ``C``. The sums are read divided by
    their total, the last entry of each row (1 up to rounding), so that
    ``F`` is 1 exactly at the largest value. With ``ends``, the first and
    last place of positive weight of each row are found first, from the
    weights themselves: a weight too small to change the rounded sum of
    those before it still has its place.
    """

    def __init__(self, W, ranks, ends=False):
        self.ranks = ranks
        self.ends = _positive_ends(W) if ends else None
        self.C = np.cumsum(W, axis=1, out=W)
        self.total = self.C[:, -1]

    def quantile_places(self, levels, t):
        """The place of the quantile of each row at each level: the first
        value where ``F >= tau - t`` (and ``F > 0``) for ``0 < tau < 1``,
        the first and last value of positive weight at 0 and 1. Shape
        (n_rows, n_levels)."""
        total = self.total[:, None]
        # A positive cumulative weight, and at most the total (which
        # rounding may leave below tau - t: then the largest value).
        reach = np.clip(levels - t, _TINY, 1.0)
        at = first_reaching(self.C, np.minimum(reach[None, :] * total, total))
        if self.ends is not None:
            first, last = self.ends
            at[:, levels == 0] = first[:, None]
            at[:, levels == 1] = last[:, None]
        if self.ranks is None:
            return at
        return self.ranks[np.arange(len(at))[:, None], at]

    def below(self, places):
        """``F`` at the values before ``places`` (n_rows, n_values): the
        total weight of the keys of the first ``places`` values."""
        if self.ranks is None:
            counts = places
        else:
            counts = first_reaching(self.ranks, places)
        rows = np.arange(len(counts))[:, None]
        F = self.C[rows, np.maximum(counts - 1, 0)] / self.total[:, None]
        F[counts == 0] = 0.0
        return F


def _positive_ends(W):
    """The first and the last column of positive weight of each row of
    ``W`` (0 and the last column in a row without one)."""
    positive = W > 0
    first = positive.argmax(axis=1)
    last = W.shape[1] - 1 - positive[:, ::-1].argmax(axis=1)
    return first, last


def _ordered_rows(P, place):
    """The weights of the sparse rows ``P`` in the order of the values
    (``place`` of each key), padded with zeros, and the places of each,
    padded with ``n``: one sort of the chunk's pairs by (row, place)."""
    P = P.tocsr()
    n_rows, n = P.shape
    counts = np.diff(P.indptr)
    width = max(int(counts.max(initial=0)), 1)
    rows = np.repeat(np.arange(n_rows), counts)
    ranks = place[P.indices]
    order = np.argsort(rows * (n + 1) + ranks, kind="stable")
    at = np.arange(len(rows)) - np.repeat(P.indptr[:-1], counts)
    W = np.zeros((n_rows, width))
    R = np.full((n_rows, width), n, dtype=np.intp)
    W[rows, at] = P.data[order]
    R[rows, at] = ranks[order]
    return W, R


def _run(pool, X, work, n_jobs, width):
    """The chunks' answers, shape (n_queries, n_outputs, width)."""
    extra = _ROW_BYTES * pool.keys.shape[0]
    out = pool._run_chunks(X, None, work, n_jobs, extra_row_bytes=extra)
    p = pool.n_outputs
    flat = np.concatenate(out) if out else np.empty((0, p * width))
    return flat.reshape(-1, p, width)


def pool_quantiles(pool, X, levels, n_jobs=None):
    """The quantiles at ``levels`` of a :class:`KernelPool` at the validated
    queries ``X``: shape (n_queries, n_levels, n_outputs), float64."""
    work = ChunkDistribution(pool, levels=levels)
    return _run(pool, X, work, n_jobs, len(levels)).transpose(0, 2, 1)


def predict_quantiles(estimator, X, levels):
    """The conditional quantiles of a fitted regressor at ``levels``:
    shape (n_queries, n_levels, n_outputs), in the dtype of the fit."""
    check_quantile_support(estimator, "predict_quantiles")
    pool = exact_engine(estimator)
    X = validate_queries(estimator, X)
    out = pool_quantiles(pool, X, levels, estimator.n_jobs)
    return out.astype(pool.dtype, copy=False)


def predict_cdf(estimator, X, thresholds, shift=None):
    """The conditional distribution functions of a fitted regressor at the
    ``thresholds`` of shape (n_values, n_outputs), less ``shift`` per query
    (see :class:`ChunkDistribution`): shape (n_queries, n_values,
    n_outputs), float64."""
    check_quantile_support(estimator, "predict_cdf")
    pool = exact_engine(estimator)
    X = validate_queries(estimator, X)
    work = ChunkDistribution(pool, thresholds=thresholds, shift=shift)
    n_jobs = estimator.n_jobs if shift is None else 1
    return _run(pool, X, work, n_jobs, len(thresholds)).transpose(0, 2, 1)
