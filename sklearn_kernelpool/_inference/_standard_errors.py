"""Standard errors and confidence intervals of the fitted mean function.

The fit is a linear smoother, ``f(q) = sum_i l_i(q) y_i`` with ``l(q)`` the
row of :meth:`attention_weights` (the equivalent-kernel weights for
``degree=1``), so its variance given the keys is ``sum_i l_i(q)**2
sigma_i**2``, with the variances ``sigma_i**2`` of the training values
estimated from the residuals (:func:`._residuals.residual_variance`).
"""

import math
import warnings
from fractions import Fraction
from numbers import Integral, Real

import numpy as np
from scipy.stats import norm
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import (
    Interval,
    StrOptions,
    validate_parameter_constraints,
)

from .._engine._array_api import is_array_api_pool
from .._utils._input import validate_queries
from .._utils._warnings import EmptyNeighborhoodWarning, LocalLinearFallbackWarning
from .._utils._working_memory import row_batches
from ._residuals import (
    fit_weights,
    residual_parts,
    smoother_rows,
    training_keys,
    variance_from_residuals,
)

INTERVAL_CONSTRAINTS = {
    "level": [Interval(Real, 0, 1, closed="neither")],
    "method": [StrOptions({"asymptotic", "bootstrap"})],
    "simultaneous": ["boolean"],
    "n_resamples": [Interval(Integral, 1, None, closed="left")],
    "random_state": ["random_state"],
}


def check_numpy_estimator(estimator, option):
    """Refuse ``option`` on an estimator fitted on arrays of another namespace."""
    if is_array_api_pool(estimator._pool):
        raise ValueError(
            f"{option} works on NumPy arrays only: this estimator was fitted on "
            "arrays of another array API namespace. Fit it on NumPy arrays "
            "(e.g. convert with numpy.asarray) to get standard errors and "
            "confidence intervals."
        )


def check_resample_count(n_resamples, level):
    """Refuse fewer resamples than ``ceil(2 / (1 - level))``.

    The bounds are the ``(1 -+ level) / 2`` quantiles of the draws (the
    ``level`` quantile of their maxima for a band): with fewer draws a tail
    beyond a quantile holds less than one of them, and the "interval" is the
    range of a few draws, of zero width for one. ``level`` is read as the
    decimal it prints as, so that 0.95 asks for 40.
    """
    least = math.ceil(2 / (1 - Fraction(repr(float(level)))))
    if n_resamples < least:
        raise ValueError(
            f"n_resamples={n_resamples} is too few for level={level}: the "
            f"bounds are quantiles of the draws, and need at least "
            f"ceil(2 / (1 - level)) = {least} draws so that each tail holds "
            "one; hundreds give stable bounds. Raise n_resamples (the default "
            "is 999) or lower level."
        )


def _quiet_rows(estimator, X, share=1):
    """:func:`smoother_rows` of validated ``X`` within ``working_memory /
    share``, without the fallback warnings (the caller's ``predict``
    already reports its queries')."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        yield from smoother_rows(estimator, X, validated=True, share=share)


def _residuals(estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return residual_parts(estimator)


def standard_error(estimator, X, variance=None):
    """``sqrt(sum_i l_i(q)**2 sigma_i**2)`` per query and output, 2-D.

    ``X`` is validated. ``variance`` defaults to :func:`residual_variance`.
    """
    if variance is None:
        variance = _residuals(estimator)[0]
    out = np.empty((X.shape[0], variance.shape[1]))
    for batch, rows in _quiet_rows(estimator, X):
        out[batch] = np.sqrt(np.square(rows) @ variance)
    return out


def confidence_interval(
    estimator,
    X,
    *,
    level=0.95,
    method="asymptotic",
    simultaneous=False,
    n_resamples=999,
    random_state=None,
):
    """The ``(lower, upper)`` of ``KernelAttentionRegressor.confidence_interval``."""
    validate_parameter_constraints(
        INTERVAL_CONSTRAINTS,
        {
            "level": level,
            "method": method,
            "simultaneous": simultaneous,
            "n_resamples": n_resamples,
            "random_state": random_state,
        },
        caller_name="confidence_interval",
    )
    if method == "bootstrap" or simultaneous:
        check_resample_count(n_resamples, level)
    check_numpy_estimator(estimator, "confidence_interval")
    estimator._check_numpy_queries(X, "confidence_interval")
    X = validate_queries(estimator, X)
    dtype = estimator._pool.dtype
    centre = np.asarray(
        estimator._pool.pool(X, n_jobs=estimator.n_jobs), dtype=np.float64
    )
    variance, fitted, _, denominator = _residuals(estimator)
    se = standard_error(estimator, X, variance)
    if method == "asymptotic" and not simultaneous:
        z = norm.ppf(0.5 + level / 2)
        low, high = np.full_like(se, -z), np.full_like(se, z)
    else:
        rng = check_random_state(random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        resampling = _Resampling(
            estimator,
            variance,
            fitted,
            denominator,
            bootstrap=method == "bootstrap",
            n_resamples=int(n_resamples),
            seed=seed,
        )
        if simultaneous:
            critical = resampling.sup_t_quantile(X, se, level)
            low, high = -np.broadcast_to(critical, se.shape), critical
        else:
            low, high = resampling.t_quantiles(X, se, level)
    # f - t se covers E[f] when (f - E f) / se is below t: percentile-t.
    lower = centre - high * se
    upper = centre - low * se
    return (
        estimator._shape_like_y(lower.astype(dtype, copy=False)),
        estimator._shape_like_y(upper.astype(dtype, copy=False)),
    )


# The resamples, the queries' rows and their studentised draws, and the
# smoother rows of a pass each get a third of ``working_memory``.
_SHARE = 3


class _Resampling:
    """Draws of the studentised deviations ``t(q) = (f(q) - E f(q)) / se(q)``.

    ``bootstrap=True``: the wild bootstrap with Rademacher multipliers,
    ``y*_i = f(x_i) + v_i sigma_i``, re-studentised with the same variance
    estimator on the residuals of ``y*``. ``bootstrap=False``: the Gaussian
    plug-in, ``t(q) = l(q) . (sigma * g) / se(q)``, ``g`` standard normal.
    Resamples are drawn in blocks within ``working_memory``, from one stream
    whatever the block size.
    """

    def __init__(
        self, estimator, variance, fitted, denominator, *, bootstrap, n_resamples, seed
    ):
        self.estimator = estimator
        self.variance = variance
        weights = fit_weights(estimator)
        if weights is not None:
            # Rows of weight zero have zero columns in L; their fit may be NaN.
            fitted = np.where((weights == 0)[:, None], 0.0, fitted)
        self.fitted = fitted
        self.keys = training_keys(estimator)
        self.denominator = denominator
        self.bootstrap = bootstrap
        self.n_resamples = n_resamples
        self.seed = seed
        self.scale = np.sqrt(variance)  # (n, k)
        n, k = variance.shape
        # The noise, y*, its fit, residuals and variances: a few (n, b k).
        self.blocks = list(row_batches(n_resamples, _SHARE * 6 * 8 * n * k))

    def _noise(self):
        """Yield ``(block, noise)``, noise ``(n, b * k)`` ordered (b, k)."""
        generator = np.random.default_rng(self.seed)
        n, k = self.variance.shape
        for block in self.blocks:
            b = block.stop - block.start
            if self.bootstrap:
                draws = np.where(generator.random((b, n)) < 0.5, -1.0, 1.0)
            else:
                draws = generator.standard_normal((b, n))
            noise = draws.T[:, :, None] * self.scale[:, None, :]
            yield block, noise.reshape(n, b * k)

    def _variances(self, noise):
        """The re-studentising variances ``(n, b * k)`` of one block."""
        n, k = self.variance.shape
        if not self.bootstrap:
            return None
        b = noise.shape[1] // k
        resampled = np.repeat(self.fitted[:, None, :], b, axis=1).reshape(n, b * k)
        resampled += noise
        estimator = self.estimator
        weights = fit_weights(estimator)
        residuals = np.empty_like(resampled)
        for batch, rows in _quiet_rows(estimator, self.keys, _SHARE):
            residuals[batch] = resampled[batch] - rows @ resampled
        if weights is not None:
            # Rows of weight zero (NaN rows under on_empty="nan") never count.
            residuals[weights == 0] = 0.0
        return variance_from_residuals(
            np.square(residuals, out=residuals), self.denominator, weights
        )

    def _t(self, rows, noise, variances, se):
        """Studentised deviations ``(m, b, k)`` of one block of resamples."""
        k = self.variance.shape[1]
        m = rows.shape[0]
        deviation = (rows @ noise).reshape(m, -1, k)
        if variances is None:
            scale = np.broadcast_to(se[:, None, :], deviation.shape)
        else:
            scale = np.sqrt(np.square(rows) @ variances).reshape(m, -1, k)
        return np.divide(
            deviation, scale, out=np.zeros_like(deviation), where=scale > 0
        )

    def t_quantiles(self, X, se, level):
        """Per query, the ``(1 -+ level) / 2`` quantiles of ``t``, ``(m, k)``."""
        n, k = self.variance.shape
        m = X.shape[0]
        low, high = np.empty((m, k)), np.empty((m, k))
        probabilities = [0.5 - level / 2, 0.5 + level / 2]
        for group in row_batches(m, _SHARE * 8 * (n + 2 * self.n_resamples * k)):
            rows = np.empty((group.stop - group.start, n))
            for batch, part in _quiet_rows(self.estimator, X[group], _SHARE):
                rows[batch] = part
            t = np.empty((rows.shape[0], self.n_resamples, k))
            for block, noise in self._noise():
                variances = self._variances(noise)
                t[:, block] = self._t(rows, noise, variances, se[group])
            low[group], high[group] = np.quantile(t, probabilities, axis=1)
        return low, high

    def sup_t_quantile(self, X, se, level):
        """The ``level`` quantile of ``max_q |t(q)|`` per output, ``(k,)``."""
        k = self.variance.shape[1]
        largest = np.zeros((self.n_resamples, k))
        for block, noise in self._noise():
            variances = self._variances(noise)
            for batch, rows in _quiet_rows(self.estimator, X, _SHARE):
                t = np.abs(self._t(rows, noise, variances, se[batch]))
                largest[block] = np.maximum(largest[block], t.max(axis=0))
        return np.quantile(largest, level, axis=0)
