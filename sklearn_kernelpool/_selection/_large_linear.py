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
from sklearn.utils._indexing import _safe_indexing

from .._estimator._linear_columns import validate_linear_input
from .._estimator._partially_linear_methods import _linear_parts


def is_partially_linear(first):
    """Whether the subsample search ``first`` kept linear columns."""
    return getattr(first.best_estimator_, "coef_", None) is not None


def residual_rows(first, data):
    """``(rows, changes)``: the kernel columns of ``data`` ``(X, y,
    weights)``, their partial residuals under ``first``'s coefficients and the
    weights; and the parameters of a search of the kernel part alone.

    A row whose linear columns hold a category the subsample did not draw
    (a rare one) has no coefficient to take its partial residual: it gets
    weight zero here, and the refit on all the rows estimates its
    coefficient (:func:`partially_linear_model`)."""
    X, y, weights = data
    best = first.best_estimator_
    X, _ = validate_linear_input(best, X)
    design = best._linear_design
    seen = design.seen_rows(X)
    Y = np.asarray(y, dtype=np.float64)
    Y = Y.reshape(len(Y), -1)
    residuals = np.zeros_like(Y)
    if seen.all():
        linear, _ = _linear_parts(best, X)
        residuals = Y - linear
    else:
        rows = np.flatnonzero(seen)
        linear, _ = _linear_parts(best, _safe_indexing(X, rows))
        residuals[rows] = Y[rows] - linear
        weights = np.ones(len(Y)) if weights is None else np.array(weights, float)
        weights[~seen] = 0.0
    X_kernel = _safe_indexing(X, np.flatnonzero(~design.mask), axis=1)
    kernel = best.kernel_regressor_
    changes = {
        "linear_features": None,
        "categorical_features": kernel.categorical_features,
        "ordered_features": kernel.ordered_features,
    }
    residuals = residuals[:, 0] if np.ndim(y) == 1 else residuals
    return (X_kernel, residuals, weights), changes


def partially_linear_model(kept, first, data):
    """The partially linear model of ``first`` with the kernel part
    ``kept`` selected, fitted on ``data`` ``(X, y, weights)``; a
    :class:`.._estimator._identification.NotIdentifiedError` where a linear
    column is not identified at full ``n``."""
    X, y, weights = data
    model = clone(first.best_estimator_).set_params(
        kernel=kept.kernel_,
        bandwidth=kept.bandwidth_,
        degree=kept.degree_,
        n_neighbors=kept.n_neighbors_,
    )
    return model.fit(X, y, sample_weight=weights)


def adopt_partially_linear(estimator, model, first):
    """``estimator.best_estimator_``: the fitted partially linear ``model``;
    the attributes of its columns as the subsample's search ``first`` set
    them."""
    estimator.best_estimator_ = model
    estimator.linear_features_ = first.linear_features_
    for name in ("is_categorical_", "categories_", "is_ordered_"):
        setattr(estimator, name, getattr(model, name, None))
    estimator.n_features_in_ = first.n_features_in_
    estimator.__dict__.pop("feature_names_in_", None)
    if hasattr(first, "feature_names_in_"):
        estimator.feature_names_in_ = first.feature_names_in_
    estimator._effective_df = None
