"""The answers of a :class:`KernelAttentionRegressor` fitted with
``linear_features``: each adds the linear part ``Z coef_ + intercept_`` to
what its kernel part ``kernel_regressor_`` gives on the other columns.

Each public method of the regressor asks :func:`is_partially_linear` first
and, for such a fit, returns the function of the same name here.
"""

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted

from ._base import check_flag
from ._linear_columns import validate_linear_input


def is_partially_linear(estimator):
    """Whether ``estimator`` was fitted with linear features."""
    return getattr(estimator, "_linear_design", None) is not None


def _linear_parts(estimator, X):
    """The linear part ``Z coef_ + intercept_`` of the queries (2-D, one
    column per output) and their kernel columns."""
    X, _ = validate_linear_input(estimator, X)
    design = estimator._linear_design
    Z = design.transform(X)
    coef = np.reshape(estimator.coef_, (-1, Z.shape[1]))
    linear = Z @ coef.T + np.reshape(estimator.intercept_, (1, -1))
    return linear, _safe_indexing(X, np.flatnonzero(~design.mask), axis=1)


def _add_linear(linear, fitted):
    """``fitted`` (a kernel part's output, 1-D for a 1-D ``y``) plus the
    linear part, in the dtype of ``fitted``."""
    linear = linear[:, 0] if np.ndim(fitted) == 1 else linear
    return (np.asarray(fitted, dtype=np.float64) + linear).astype(
        np.asarray(fitted).dtype, copy=False
    )


def predict(estimator, X, return_std, return_se):
    """:meth:`KernelAttentionRegressor.predict` of a partially linear fit."""
    check_is_fitted(estimator)
    check_flag("return_std", return_std)
    check_flag("return_se", return_se)
    linear, X_kernel = _linear_parts(estimator, X)
    pooled = estimator.kernel_regressor_.predict(
        X_kernel, return_std=return_std, return_se=return_se
    )
    outputs = list(pooled) if isinstance(pooled, tuple) else [pooled]
    outputs[0] = _add_linear(linear, outputs[0])
    return tuple(outputs) if len(outputs) > 1 else outputs[0]


def shifted_bounds(estimator, name, X, options):
    """The bounds of the interval method ``name`` of a partially linear fit:
    those of the kernel part shifted by the linear part, ``coef_`` held
    fixed."""
    check_is_fitted(estimator)
    linear, X_kernel = _linear_parts(estimator, X)
    bounds = getattr(estimator.kernel_regressor_, name)(X_kernel, **options)
    return tuple(_add_linear(linear, b) for b in bounds)


def predict_gradient(estimator, X, return_se):
    """:meth:`KernelAttentionRegressor.predict_gradient` of a partially
    linear fit: the kernel part's gradient in its columns, ``coef_`` in the
    linear ones."""
    check_is_fitted(estimator)
    check_flag("return_se", return_se)
    _, X_kernel = _linear_parts(estimator, X)
    kernel = estimator.kernel_regressor_.predict_gradient(X_kernel, return_se=return_se)
    kernel = kernel if return_se else (kernel,)
    coefs = (estimator.coef_, estimator.coef_se_)
    parts = tuple(
        _place(estimator._linear_design, part, coef)
        for part, coef in zip(kernel, coefs, strict=False)
    )
    return parts if return_se else parts[0]


def _place(design, kernel, coef):
    """The gradient (or its standard errors) of every feature: the kernel
    part's in its columns, ``coef`` (``coef_``, ``coef_se_``) in the numeric
    linear ones, NaN in the categorical linear ones (``design`` is the
    fit's :class:`._linear_columns.LinearDesign`)."""
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


def attention_weights(estimator, X, sparse):
    """The attention weights of a partially linear fit: its kernel part's on
    the kernel columns."""
    check_is_fitted(estimator)
    _, X_kernel = _linear_parts(estimator, X)
    return estimator.kernel_regressor_.attention_weights(X_kernel, sparse=sparse)


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
