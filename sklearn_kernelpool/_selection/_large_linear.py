"""The second stage of the large-table selection (:mod:`._large`) for a
partially linear model.

Where the subsample's search kept linear columns, its coefficients are
estimated from the leave-one-out residuals of every candidate, which the
split of the second stage cannot give. The second stage then scores the
kernel part alone, on the partial residuals ``y - Z coef_ - intercept_`` of
every row under the subsample's coefficients (Robinson 1988: the kernel part
is a smoother of those residuals), by the split of any kernel search. The
selected kernel part is refitted as the partially linear model on all the
rows, which estimates its coefficients anew at full ``n`` (the leave-one-out
fits of a compact kernel from its neighbour lists).
"""

import numpy as np
from sklearn.base import clone

from .._estimator._partially_linear_methods import _linear_parts


def is_partially_linear(first):
    """Whether the subsample search ``first`` kept linear columns."""
    return getattr(first.best_estimator_, "coef_", None) is not None


def residual_rows(first, data):
    """``(rows, changes)``: the kernel columns of ``data`` ``(X, y,
    weights)``, their partial residuals under ``first``'s coefficients and the
    weights; and the parameters of a search of the kernel part alone."""
    X, y, weights = data
    best = first.best_estimator_
    linear, X_kernel = _linear_parts(best, X)
    Y = np.asarray(y, dtype=np.float64)
    residuals = Y - (linear[:, 0] if Y.ndim == 1 else linear)
    kernel = best.kernel_regressor_
    changes = {
        "linear_features": None,
        "categorical_features": kernel.categorical_features,
        "ordered_features": kernel.ordered_features,
    }
    return (X_kernel, residuals, weights), changes


def refit_partially_linear(estimator, kept, first, data):
    """``estimator.best_estimator_``: the partially linear model of
    ``first`` with the kernel part ``kept`` selected, fitted on ``data``;
    the attributes of its columns as the subsample's search set them."""
    X, y, weights = data
    model = clone(first.best_estimator_).set_params(
        kernel=kept.kernel_,
        bandwidth=kept.bandwidth_,
        degree=kept.degree_,
        n_neighbors=kept.n_neighbors_,
    )
    estimator.best_estimator_ = model.fit(X, y, sample_weight=weights)
    estimator.linear_features_ = first.linear_features_
    for name in ("is_categorical_", "categories_", "is_ordered_"):
        setattr(estimator, name, getattr(model, name, None))
    estimator.n_features_in_ = first.n_features_in_
    estimator.__dict__.pop("feature_names_in_", None)
    if hasattr(first, "feature_names_in_"):
        estimator.feature_names_in_ = first.feature_names_in_
    estimator._effective_df = None
