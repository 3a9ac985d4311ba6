"""Conformalized quantile regression (CQR) intervals of attention pooling.

Romano, Patterson and Candes ("Conformalized quantile regression", NeurIPS
2019) calibrate the conditional quantiles ``q_lo``, ``q_hi`` at levels
``(1 - level) / 2`` and ``(1 + level) / 2`` (:mod:`._quantiles`) on rows that
their fit did not see, with the scores

    E_i = max(q_lo(x_i) - y_i, y_i - q_hi(x_i)),

so that the interval ``[q_lo(x) - Q, q_hi(x) + Q]`` widens (or narrows) the
quantile band by a constant ``Q``, and its width follows the local spread of
``y``. Two calibrations, over the ``n`` training rows of positive weight:

- split: the engine refitted on the proper training rows (the others get
  weight zero) gives the scores of the calibration rows, ``Q`` is their
  ``ceil(level (m + 1))``-th smallest (``m`` calibration rows; infinite
  above ``m``), and the interval comes from the same fit: it covers a new
  observation exchangeable with the calibration rows with probability at
  least ``level`` (Theorem 1 of the paper);
- cross-fitted (K folds, as CV+): the engine refitted without each fold
  ``S_k`` gives the scores of its rows, and the bounds are the
  ``floor(alpha (n + 1))``-th smallest of ``q_lo^{-k(i)}(x) - E_i`` and the
  ``ceil((1 - alpha) (n + 1))``-th smallest of ``q_hi^{-k(i)}(x) + E_i``,
  ``alpha = 1 - level``: the CV+ construction of Barber, Candes, Ramdas and
  Tibshirani (Ann. Statist. 49 (2021)) with the CQR scores, whose coverage
  is at least ``1 - 2 alpha - sqrt(2 / n)`` for folds of equal size (the
  nested-set form of Gupta, Kuchibhotla and Ramdas, Pattern Recognition 127
  (2022)).

The refits keep the fitted widths and every other argument of the engine,
``n_neighbors`` included: a refit with fewer rows than that is refused
before any is made (:func:`check_refit_neighbors`), not made with fewer
neighbours, which would calibrate another smoother than the one fitted.
The queries that a refit leaves without keys are reported by an
:class:`EmptyNeighborhoodWarning`, as by ``predict``; the calibration rows
are not. A score that is NaN (a calibration row with no key under ``on_empty="nan"``)
counts as infinite.
"""

import warnings
from numbers import Integral

import numpy as np
from sklearn.model_selection import KFold, ShuffleSplit, check_cv

from .._utils._input import validate_queries
from .._utils._warnings import EmptyNeighborhoodWarning
from .._utils._working_memory import row_batches
from ._deleted_fits import exact_engine
from ._order_statistics import order_ranks
from ._quantiles import check_quantile_support, pool_quantiles

# The split of cv=None: a fixed random half of the rows calibrates.
DEFAULT_SPLIT = ShuffleSplit(n_splits=1, test_size=0.5, random_state=0)


def partition_folds(splits, n):
    """The fold of each of ``n`` rows from the splits' test sets, which must
    partition them into at least 2 folds."""
    fold = np.full(n, -1)
    for k, (_, test) in enumerate(splits):
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
    if fold.max() < 1:
        raise ValueError("cv must give at least 2 folds.")
    return fold


def fold_splitter(cv, n, accepted="an int >= 2"):
    """``cv`` of :meth:`KernelAttentionRegressor.prediction_interval` as a
    splitter of ``n`` rows: an int ``K`` in ``[2, n]`` is
    :class:`~sklearn.model_selection.KFold` without shuffling; a splitter is
    taken as it is. ``accepted`` names what the error message accepts."""
    if isinstance(cv, Integral) and not isinstance(cv, (bool, np.bool_)):
        if not 2 <= cv <= n:
            raise ValueError(
                f"cv must be an int in [2, n] with n={n} the number of training "
                f"rows of positive sample weight, or a cross-validation "
                f"splitter; got cv={cv!r}."
            )
        return KFold(int(cv))
    if isinstance(cv, (bool, np.bool_, str)) or not hasattr(cv, "split"):
        raise ValueError(
            f"cv must be {accepted} or a cross-validation splitter with a "
            f"split method; got {cv!r}."
        )
    return check_cv(cv)


def cqr_calibration(cv, n):
    """The calibration of ``method="cqr"``: ``(train, calibration)`` index
    arrays for a split, or the fold of each row for the cross-fit."""
    if cv is None:
        cv = DEFAULT_SPLIT
    cv = fold_splitter(cv, n, "None, an int >= 2")
    splits = list(cv.split(np.zeros((n, 1))))
    if len(splits) != 1:
        return partition_folds(splits, n)
    train, calibration = (np.asarray(part, dtype=np.intp) for part in splits[0])
    if (
        not len(train)
        or not len(calibration)
        or np.intersect1d(train, calibration).size
    ):
        raise ValueError(
            "cv with one split must give disjoint, non-empty training and "
            "calibration (test) rows."
        )
    return train, calibration


class _Refits:
    """The engine of a fitted estimator refitted without some of its rows
    of positive weight, and the quantiles of those fits."""

    def __init__(self, estimator, level):
        self.pool = exact_engine(estimator)
        self.support = self.pool.support
        arguments = self.pool._arguments
        self.keys = np.asarray(arguments["keys"])[self.support]
        values = np.asarray(arguments["values"], dtype=np.float64)
        self.Y = values.reshape(values.shape[0], -1)[self.support]
        self.levels = np.array([(1 - level) / 2, (1 + level) / 2])
        self.n_jobs = estimator.n_jobs

    def without(self, removed):
        """The engine without the support rows ``removed``."""
        pool = self.pool
        weights = np.array(pool._arguments["sample_weight"], dtype=np.float64)
        weights[self.support[removed]] = 0.0
        return type(pool)(**{**pool._arguments, "sample_weight": weights})

    def quantiles(self, pool, X, quiet=False):
        """``(q_lo, q_hi)`` of ``pool`` at ``X``, each (n_queries, n_outputs)."""
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            try:
                q = pool_quantiles(pool, X, self.levels, self.n_jobs)
            except ValueError as exc:
                if pool.on_empty != "raise":
                    raise
                raise ValueError(
                    "prediction_interval(method='cqr'): a fit without the "
                    "calibration rows has no key of positive weight near a "
                    "query or a calibration row, which on_empty='raise' "
                    "refuses; choose another on_empty policy or a wider "
                    "bandwidth."
                ) from exc
        return q[:, 0], q[:, 1]

    def scores(self, pool, rows):
        """The CQR scores of the support ``rows`` under ``pool``, NaN as
        infinity."""
        low, high = self.quantiles(pool, self.keys[rows], quiet=True)
        Y = self.Y[rows]
        E = np.maximum(low - Y, Y - high)
        return np.where(np.isnan(E), np.inf, E)


def cqr_interval(estimator, X, level, calibration):
    """The bounds of ``prediction_interval(method="cqr")``, shape
    (n_queries, n_outputs) each, float64."""
    check_quantile_support(estimator, "prediction_interval(method='cqr')")
    X = validate_queries(estimator, X)
    refits = _Refits(estimator, level)
    check_refit_neighbors(refits.pool, calibration)
    if isinstance(calibration, tuple):
        return _split_interval(refits, X, level, calibration[1])
    return _cross_interval(refits, X, level, calibration)


def check_refit_neighbors(pool, calibration):
    """Refuse adaptive widths of more neighbours than the refits hold.

    A refit keeps ``n_neighbors`` and holds the rows outside the
    calibration part (split) or outside one fold (cross-fit); the error
    names that part and what fits: the largest usable ``n_neighbors``, and
    a ``cv`` whose refits hold enough rows.
    """
    k = getattr(pool, "n_neighbors", None)
    n = len(pool.support)
    rows = f"{n} training rows"
    if n < pool.n_samples_fit:
        rows += " of positive sample weight"
    if isinstance(calibration, tuple):
        m = len(calibration[1])
        held = n - m
        part = (
            f"the training part of its split, {held} of the {rows} (the "
            f"other {m} calibrate)"
        )
    else:
        held = n - int(np.bincount(calibration).max())
        part = (
            f"the rows outside each fold of cv, {held} of the {rows} in the "
            "refit without the largest fold"
        )
    if k is None or k <= held:
        return
    advice = f"Use n_neighbors <= {held}"
    if k < n:
        folds = max(2, -(-n // (n - k)))  # the fewest folds leaving k rows
        advice += (
            f", or cv=ShuffleSplit(n_splits=1, test_size={n - k}, "
            f"random_state=0) (a calibration part of {n - k} rows) or "
            f"cv={folds} (cross-fitted, refits of at least {k} rows)"
        )
    raise ValueError(
        "prediction_interval(method='cqr') refits the quantiles, with the "
        f"same n_neighbors, on {part}: n_neighbors={k} exceeds them. "
        f"{advice}."
    )


def _split_interval(refits, X, level, calibration):
    """Split CQR: the quantiles of the fit without the calibration rows,
    widened by the ``ceil(level (m + 1))``-th smallest of their scores."""
    pool = refits.without(calibration)
    E = refits.scores(pool, calibration)
    m = len(calibration)
    _, rank = order_ranks(level, m)
    Q = np.full(E.shape[1], np.inf) if rank > m else np.sort(E, axis=0)[rank - 1]
    low, high = refits.quantiles(pool, X)
    return low - Q, high + Q


def _cross_interval(refits, X, level, fold):
    """Cross-fitted CQR: the order statistics of ``q_lo^{-k(i)}(x) - E_i``
    and ``q_hi^{-k(i)}(x) + E_i`` over the rows ``i``, queries in batches
    within ``working_memory``."""
    n, p = refits.Y.shape
    n_folds = int(fold.max()) + 1
    E = np.empty((n, p))
    low = np.empty((n_folds, X.shape[0], p))
    high = np.empty_like(low)
    for k in range(n_folds):
        rows = np.flatnonzero(fold == k)
        pool = refits.without(rows)
        E[rows] = refits.scores(pool, rows)
        low[k], high[k] = refits.quantiles(pool, X)
    rank_low, rank_high = order_ranks(level, n)
    lower = np.empty(low.shape[1:])
    upper = np.empty_like(lower)
    for batch in row_batches(low.shape[1], 16 * n):
        for j in range(p):
            values = low[fold, batch, j].T - E[:, j]
            lower[batch, j] = _order_statistic(values, rank_low)
            values = high[fold, batch, j].T + E[:, j]
            upper[batch, j] = _order_statistic(values, rank_high)
    # A query without quantiles (on_empty="nan") has no interval.
    undefined = np.isnan(low).any(axis=0) | np.isnan(high).any(axis=0)
    lower[undefined] = np.nan
    upper[undefined] = np.nan
    return lower, upper


def _order_statistic(values, rank):
    """The ``rank``-th smallest of each row (-inf below 1, +inf above the
    number of columns)."""
    n = values.shape[1]
    if rank < 1:
        return np.full(len(values), -np.inf)
    if rank > n:
        return np.full(len(values), np.inf)
    return np.partition(values, rank - 1, axis=1)[:, rank - 1]
