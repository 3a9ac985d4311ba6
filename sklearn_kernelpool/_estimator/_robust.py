"""Robust refits of :class:`KernelAttentionRegressor`: Cleveland's bisquare
reweighting (``robust_iterations``).

After the fit, each iteration computes the residuals of the in-sample fit at
the training rows, ``r_i = y_i - f(x_i)``, their scale ``s``, the weighted
median of ``|r_i|`` over the rows of positive sample weight, and the
robustness weights ``delta_i = B(r_i / (6 s))`` with the bisquare ``B(u) =
(1 - u**2)**2`` for ``|u| < 1`` and 0 beyond; then refits with the weights
``w_i * delta_i`` (W. S. Cleveland, "Robust locally weighted regression and
smoothing scatterplots", JASA 74, 1979, section 2). The engine takes the
``delta_i`` as its ``robustness_weight``: under ``n_neighbors`` the
neighbourhoods stay those of the sample weights, as in LOWESS.

With several outputs a row has one weight, from its largest scaled residual
``max_k |r_ik| / (6 s_k)``, each output scaled by its own median: a row is
down-weighted as much as its worst output says, and rescaling an output
changes nothing. Where ``s_k = 0`` (at least half the weight fitted
exactly), ``|r_ik| / (6 s_k)`` is taken as its limit: 0 for an exact fit,
infinite otherwise, as statsmodels' ``lowess`` does.

With ``degree=1`` the fit counts the training rows whose slope the
local-linear safeguard shrank in each in-sample fit, the final one included
(one more pass over the training rows), and warns of them: LOWESS
extrapolates the local line there (:func:`report_shrunk_slopes`).
"""

import warnings

import numpy as np

from .._inference._residuals import training_keys
from .._utils._warn import describe, warn
from .._utils._warnings import EmptyNeighborhoodWarning, LocalLinearFallbackWarning

# The bisquare vanishes at this many scales of the residuals (Cleveland).
_BISQUARE_SCALES = 6.0
# Residuals within this many units of rounding of the largest value of their
# output are those of an exact fit (the pooled sums round at about n eps).
_ROUNDING = 1e3 * float(np.finfo(np.float64).eps)


def weighted_median(values, weights):
    """The median of ``values`` under positive ``weights``.

    The smallest value whose cumulative weight reaches half the total; where
    the cumulative weight equals half the total exactly, the mean of that
    value and the next. With integer weights it is the median of the values
    repeated as many times (:func:`numpy.median`).
    """
    order = np.argsort(values, kind="stable")
    values, cumulative = values[order], np.cumsum(weights[order])
    half = cumulative[-1] / 2.0
    # "Equals half" up to the rounding of the running sum: weights 0.1 sum
    # to half of ten rows only within a few ulps.
    tolerance = 8.0 * np.finfo(np.float64).eps * cumulative[-1]
    i = int(np.searchsorted(cumulative, half - tolerance, side="left"))
    if abs(cumulative[i] - half) <= tolerance and i + 1 < len(values):
        return (values[i] + values[i + 1]) / 2.0
    return values[i]


def robustness_weights(residuals, sample_weight, tolerance=None):
    """Cleveland's bisquare weights of rows from their residuals.

    Parameters
    ----------
    residuals : ndarray of shape (n_samples, n_outputs)
        ``y - f(x)`` at the training rows; NaN where the fit is undefined.
    sample_weight : ndarray of shape (n_samples,)
        The sample weights; the scale is their weighted median of the
        absolute residuals, over the rows of positive weight and defined
        residuals.
    tolerance : ndarray of shape (n_outputs,) or None
        Residuals at most this large are rounding errors of an exact fit,
        taken as 0: a fit that is exact but for rounding (a constant output,
        say) has no outliers, where the median of its rounding errors would
        make outliers of half its rows.

    Returns
    -------
    delta : ndarray of shape (n_samples,)
        ``B(max_k |r_ik| / (6 s_k))``, in [0, 1]; 0 for rows of weight zero
        and rows without a fit.
    """
    absolute = np.abs(np.asarray(residuals, dtype=np.float64))
    if tolerance is not None:
        absolute[absolute <= tolerance] = 0.0
    rows = (sample_weight > 0) & ~np.any(np.isnan(absolute), axis=1)
    scaled = np.empty_like(absolute)
    for j in range(absolute.shape[1]):
        s = weighted_median(absolute[rows, j], sample_weight[rows])
        if s > 0:
            scaled[:, j] = absolute[:, j] / (_BISQUARE_SCALES * s)
        else:
            scaled[:, j] = np.where(absolute[:, j] == 0, 0.0, np.inf)
    u = np.max(scaled, axis=1)
    delta = np.zeros(len(u))
    inside = rows & (u < 1)
    delta[inside] = (1.0 - u[inside] ** 2) ** 2
    return delta


def refuse_robust(estimator, path):
    """Refuse ``robust_iterations > 0`` on a path that cannot refit."""
    if getattr(estimator, "robust_iterations", 0):
        raise ValueError(
            f"robust_iterations={estimator.robust_iterations} is not supported "
            f"{path}; use robust_iterations=0, or fit a NumPy array without "
            "linear_features."
        )


def fit_robust(estimator):
    """Refit ``estimator._pool`` ``robust_iterations`` times with Cleveland's
    robustness weights; sets ``robustness_weights_`` (None without
    iterations) and ``algorithm_``, and warns of the shrunk slopes of the
    in-sample fits (:func:`report_shrunk_slopes`)."""
    estimator.robustness_weights_ = None
    pool = estimator._pool
    sample_weight = pool._arguments["sample_weight"]
    values = np.asarray(estimator.values_, dtype=np.float64)
    values = values.reshape(len(values), -1)
    rows = np.flatnonzero(sample_weight > 0)
    keys = training_keys(estimator)[rows]
    # The rounding of a fit of values of this size (per output).
    tolerance = _ROUNDING * np.max(np.abs(values[rows]), axis=0, initial=0.0)
    counts = []  # the fit_counts of each in-sample fit (degree 1)
    for _ in range(estimator.robust_iterations):
        counts.append([])
        residuals = np.full_like(values, np.nan)
        fitted = _in_sample_fit(estimator, keys, counts[-1])
        residuals[rows] = values[rows] - fitted
        delta = robustness_weights(residuals, sample_weight, tolerance)
        delta = delta.astype(sample_weight.dtype, copy=False)
        estimator._pool = type(pool)(**{**pool._arguments, "robustness_weight": delta})
        # A copy: loading checks that the two agree.
        estimator.robustness_weights_ = delta.copy()
    estimator.algorithm_ = estimator._pool.algorithm
    if counts and estimator._pool.degree >= 1:
        counts.append(_final_fit_counts(estimator, keys))
        report_shrunk_slopes(estimator, counts, len(rows))


def report_shrunk_slopes(estimator, counts, n_queries):
    """Warn of the training rows whose slope the local-linear safeguard
    shrank in the in-sample fits of a robust fit.

    ``counts`` holds, per in-sample fit (the plain fit's first, the final
    fit's last), the :func:`.._engine._moments.fit_counts` of its chunks.
    Any shrinkage (``s < 1``) is warned of, mild or not: LOWESS extrapolates
    the local line where the safeguard shrinks it, so the robust fit departs
    from LOWESS at those rows, and at the rows whose weights they set.
    """
    totals = [np.sum(np.reshape(fit, (-1, 6)), axis=0) for fit in counts]
    per_fit = tuple(int(total[2]) for total in totals)
    if not any(per_fit):
        return
    n_singular, n_deficient, n_shrunk, _, shrinkage, n_fitted = totals[-1]
    arguments = estimator._pool._arguments
    configuration = describe(
        arguments["kernel"], arguments["bandwidth"], arguments.get("n_neighbors")
    )
    warn(
        LocalLinearFallbackWarning(
            f"Under {configuration} with robust_iterations="
            f"{estimator.robust_iterations}, training rows had a high "
            "leverage in an in-sample fit (far from the few keys that weigh "
            "on them, in units of the local spread of those keys, as where "
            "the robustness weights leave a row's keys on one side of it), "
            "and the local-linear safeguard shrank their slopes towards the "
            "local mean, where "
            "LOWESS extrapolates the local line: the robust fit departs from "
            "LOWESS at those rows and at the rows whose robustness weights "
            "they set. A larger bandwidth or n_neighbors avoids this. The "
            "warning's n_shrunk_per_fit attribute counts them in each "
            "in-sample fit, the plain fit's first and the final fit's last; "
            "n_shrunk, n_singular, n_rank_deficient, mean_shrinkage and "
            "n_queries are those of the final fit at the training rows.",
            n_singular=int(n_singular),
            n_queries=int(n_queries),
            n_rank_deficient=int(n_deficient),
            n_shrunk=int(n_shrunk),
            mean_shrinkage=float(shrinkage / n_fitted) if n_fitted else 0.0,
            n_shrunk_per_fit=per_fit,
        )
    )


def _final_fit_counts(estimator, keys):
    """The ``fit_counts`` of the final fit at the training ``keys``."""
    counts = []
    try:
        _pool_rows(estimator._pool, keys, estimator.n_jobs, counts)
    except ValueError:
        if estimator._pool.on_empty != "raise":
            raise
        # A row the final weights leave without keys, which predicting it
        # refuses (on_empty="raise"); the chunks counted every other row
        # before the refusal.
    return counts


def _in_sample_fit(estimator, keys, counts):
    """The fit at the training ``keys``, float64, without the fallback
    warnings (each iteration's own business), its local-linear
    ``fit_counts`` appended to ``counts``; NaN where ``on_empty="nan"``
    leaves a row without a fit."""
    pool = estimator._pool
    try:
        fitted = _pool_rows(pool, keys, estimator.n_jobs, counts)
    except ValueError as exc:
        if pool.on_empty != "raise":
            raise
        raise ValueError(
            "robust_iterations: a training row lost every key of its "
            "neighbourhood to the robustness weights, so it has no fit, "
            "which on_empty='raise' refuses; use a wider bandwidth or "
            "another on_empty policy."
        ) from exc
    return np.asarray(fitted, dtype=np.float64)


def _pool_rows(pool, keys, n_jobs, counts):
    """``pool.pool(keys)`` without the fallback warnings, the ``fit_counts``
    of its local-linear fits appended to ``counts`` (which the pool then
    leaves to the caller to report)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return pool.pool(keys, n_jobs=n_jobs, counts=counts)
