"""The fits of :func:`._significance.significance_test`: the tested
regressor's parameters with its widths held, and the fit without the tested
feature, whose selections of columns (categorical, ordered and linear
features, by index, mask or name) and per-feature widths skip that feature."""

import numpy as np
from sklearn.base import clone

from .._utils._categorical_input import _is_dataframe, categorical_mask
from ._residuals import residual_variance


def frozen_params(regressor, mask):
    """The parameters of ``regressor`` with its fitted widths held."""
    params = regressor.get_params()
    params["bandwidth"] = np.copy(regressor.bandwidth_)
    if mask.any():
        params["categorical_features"] = mask
        params["categorical_bandwidth"] = np.asarray(
            regressor.categorical_bandwidth_, dtype=np.float64
        ).reshape(-1)
    return params


# The parameters that select columns of X, and those of one entry per
# continuous (False) or categorical (True) feature, with the value for none.
_SELECTIONS = ("categorical_features", "ordered_features", "linear_features")
_PER_FEATURE = {
    "bandwidth": (False, 1.0),
    "n_bins": (False, None),
    "categorical_bandwidth": (True, 0.1),
}


def null_params(params, X, mask, j):
    """``params`` of the fit without feature ``j``: every selection of columns
    mapped onto the other columns of ``X``, ``j``'s entry dropped from every
    per-feature parameter of its kind."""
    params = dict(params)
    for name in _SELECTIONS:
        params[name] = _without_column(params[name], X, j, name)
    position = np.count_nonzero(mask[:j] == mask[j])  # among its own kind
    for name, (categorical, unused) in _PER_FEATURE.items():
        if categorical == mask[j] and np.ndim(params[name]) == 1:
            entries = np.delete(np.asarray(params[name]), position)
            params[name] = entries if entries.size else unused
    if np.delete(mask, j).all():  # no continuous feature left: nothing to bin
        params["algorithm"] = "auto"
    return params


def _without_column(selection, X, j, name):
    """The columns that ``selection`` selects among those of ``X`` but ``j``,
    as a boolean mask of them (None for none); a string reads the columns
    that remain and is kept."""
    if selection is None or isinstance(selection, str):
        return selection
    selected = categorical_mask(selection, X, name=name)
    kept = None if selected is None else np.delete(selected, j)
    return kept if kept is not None and kept.any() else None


def null_fit(regressor, params, X, Y, j, mask):
    """The in-sample fit ``g`` of ``Y`` without feature ``j`` (by a clone of
    ``regressor`` with the frozen ``params``) and the scales
    ``|e_i| / sqrt(d_i)`` of its residuals, both of shape (n, K)."""
    sample_weight = regressor.sample_weight_
    if len(mask) == 1:  # no feature left: the weighted mean
        w = np.ones(len(Y)) if sample_weight is None else sample_weight
        w = w / w.sum()
        fitted = np.broadcast_to(w @ Y, Y.shape)
        d = 1.0 - 2.0 * w + w @ w
        return fitted, np.abs(Y - fitted) / np.sqrt(d)[:, None]
    null = clone(regressor).set_params(**null_params(params, X, mask, j))
    variance, fitted, _ = residual_variance(
        null.fit(drop_column(X, j), Y, sample_weight)
    )
    return fitted, np.sqrt(variance)


def drop_column(X, j):
    keep = np.delete(np.arange(X.shape[1]), j)
    return X.iloc[:, keep] if _is_dataframe(X) else X[:, keep]
