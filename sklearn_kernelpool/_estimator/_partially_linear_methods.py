"""The methods of a :class:`KernelAttentionRegressor` fitted with
``linear_features``: each adds the linear part ``Z coef_ + intercept_`` to
what its kernel part ``kernel_regressor_`` gives on the other columns.

Without ``linear_features`` every method is that of the plain estimator.
"""

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted

from ._base import check_flag
from ._pool_estimator import PoolEstimatorMixin
from ._regression_inspection import InspectionMethods
from ._regression_intervals import IntervalMethods
from ._regression_paths import PredictionMethods


def _documented_by(method):
    """Give the decorated method the docstring of ``method``."""

    def decorate(function):
        function.__doc__ = method.__doc__
        return function

    return decorate


def is_partially_linear(estimator):
    """Whether ``estimator`` was fitted with linear features."""
    return getattr(estimator, "_linear_design", None) is not None


class PartiallyLinearMethods:
    """What a :class:`KernelAttentionRegressor` fitted with ``linear_features``
    answers: its kernel part's answer on the kernel columns, plus the linear
    part where it has one."""

    def _linear_parts(self, X):
        """The linear part ``Z coef_ + intercept_`` of the queries (2-D, one
        column per output) and their kernel columns."""
        from ._partially_linear import validate_linear_input

        X, _ = validate_linear_input(self, X)
        design = self._linear_design
        Z = design.transform(X)
        coef = np.reshape(self.coef_, (-1, Z.shape[1]))
        linear = Z @ coef.T + np.reshape(self.intercept_, (1, -1))
        return linear, _safe_indexing(X, np.flatnonzero(~design.mask), axis=1)

    def _add_linear(self, linear, fitted):
        """``fitted`` (a kernel part's output, 1-D for a 1-D ``y``) plus the
        linear part, in the dtype of ``fitted``."""
        linear = linear[:, 0] if np.ndim(fitted) == 1 else linear
        return (np.asarray(fitted, dtype=np.float64) + linear).astype(
            np.asarray(fitted).dtype, copy=False
        )

    @_documented_by(PredictionMethods.predict)
    def predict(self, X, return_std=False, return_se=False):
        if not is_partially_linear(self):
            return super().predict(X, return_std=return_std, return_se=return_se)
        check_is_fitted(self)
        check_flag("return_std", return_std)
        check_flag("return_se", return_se)
        linear, X_kernel = self._linear_parts(X)
        pooled = self.kernel_regressor_.predict(
            X_kernel, return_std=return_std, return_se=return_se
        )
        outputs = list(pooled) if isinstance(pooled, tuple) else [pooled]
        outputs[0] = self._add_linear(linear, outputs[0])
        return tuple(outputs) if len(outputs) > 1 else outputs[0]

    @_documented_by(IntervalMethods.confidence_interval)
    def confidence_interval(
        self,
        X,
        *,
        level=0.95,
        method="asymptotic",
        simultaneous=False,
        n_resamples=999,
        random_state=None,
    ):
        options = {
            "level": level,
            "method": method,
            "simultaneous": simultaneous,
            "n_resamples": n_resamples,
            "random_state": random_state,
        }
        return self._shifted_bounds("confidence_interval", X, options)

    @_documented_by(IntervalMethods.prediction_interval)
    def prediction_interval(self, X, *, level=0.9, method="jackknife+", cv=None):
        options = {"level": level, "method": method, "cv": cv}
        return self._shifted_bounds("prediction_interval", X, options)

    def _shifted_bounds(self, name, X, options):
        """The bounds of the interval method ``name``: those of the kernel
        part shifted by the linear part, ``coef_`` held fixed."""
        if not is_partially_linear(self):
            return getattr(super(), name)(X, **options)
        check_is_fitted(self)
        linear, X_kernel = self._linear_parts(X)
        bounds = getattr(self.kernel_regressor_, name)(X_kernel, **options)
        return tuple(self._add_linear(linear, b) for b in bounds)

    @_documented_by(InspectionMethods.predict_gradient)
    def predict_gradient(self, X, return_se=False):
        if not is_partially_linear(self):
            return super().predict_gradient(X, return_se=return_se)
        check_is_fitted(self)
        check_flag("return_se", return_se)
        _, X_kernel = self._linear_parts(X)
        kernel = self.kernel_regressor_.predict_gradient(X_kernel, return_se=return_se)
        kernel = kernel if return_se else (kernel,)
        parts = tuple(
            self._place(part, coef)
            for part, coef in zip(kernel, (self.coef_, self.coef_se_), strict=False)
        )
        return parts if return_se else parts[0]

    def _place(self, kernel, coef):
        """The gradient (or its standard errors) of every feature: the
        kernel part's in its columns, ``coef`` (``coef_``, ``coef_se_``) in
        the numeric linear ones, NaN in the categorical linear ones."""
        design = self._linear_design
        shape = (kernel.shape[0], len(design.mask), *kernel.shape[2:])
        out = np.full(shape, np.nan, dtype=kernel.dtype)
        out[:, ~design.mask] = kernel
        # (n_outputs, n_linear_columns) whatever the shape of y
        coef = np.reshape(coef, (-1, len(design.feature_names)))
        start, categories = 0, iter(design.categories)
        for is_encoded, j in zip(design.encoded, design.columns, strict=True):
            if is_encoded:
                start += len(next(categories)) - 1
                continue
            value = coef[:, start]
            out[:, j] = value[0] if kernel.ndim == 2 else value
            start += 1
        return out

    @_documented_by(PoolEstimatorMixin.attention_weights)
    def attention_weights(self, X, *, sparse=False):
        if not is_partially_linear(self):
            return super().attention_weights(X, sparse=sparse)
        check_is_fitted(self)
        _, X_kernel = self._linear_parts(X)
        return self.kernel_regressor_.attention_weights(X_kernel, sparse=sparse)

    @_documented_by(InspectionMethods.smoother_diagnostics)
    def smoother_diagnostics(self):
        if is_partially_linear(self):
            refuse_smoother_diagnostics(self)
        return super().smoother_diagnostics()


def refuse_smoother_diagnostics(estimator, error=ValueError):
    """Refuse the smoother diagnostics of a partially linear fit."""
    raise error(
        f"The smoother diagnostics (effective degrees of freedom, GCV, AICc) "
        f"are those of a kernel smoother; this {type(estimator).__name__} was "
        f"fitted with linear_features={estimator.linear_features!r}, whose fit "
        "adds a linear part estimated from leave-one-out residuals. Read those "
        "of its kernel part, kernel_regressor_.smoother_diagnostics(), or fit "
        "with linear_features=None."
    )
