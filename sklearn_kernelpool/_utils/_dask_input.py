"""Dask arrays given to ``fit`` and ``predict``: the checks that need no
value, made when the arrays are given (:mod:`.._estimator._input_kinds`).

A dask array's values are computed on its cluster: here only its shape,
dtype, chunks and features are checked, with the errors that
``validate_data`` gives NumPy input, and ``fit`` records
``n_features_in_`` and ``feature_names_in_`` by ``validate_data`` itself.
The values are checked in the first pass of the fit over the rows
(:mod:`.._binned._dask`), with the same errors
(:func:`._validation.raise_not_finite`).
"""

import warnings
from numbers import Number

import numpy as np
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import check_consistent_length, validate_data

from ._validation import check_no_dates

# The dtype kinds of real numbers, which the arrays must hold.
REAL_KINDS = "biuf"


def is_dask_array(X):
    """Whether ``X`` is a dask array (without importing dask)."""
    return type(X).__module__.startswith("dask.") and hasattr(X, "__dask_graph__")


def _check_dtype(array, name, numeric_target=None):
    """Refuse dates, complex numbers and other non-numbers, from the dtype.

    ``numeric_target`` names the estimator whose ``y`` must be numeric: its
    strings are refused as :func:`._input.check_numeric_target` refuses
    those of NumPy input.
    """
    kind = array.dtype.kind
    if kind in REAL_KINDS:
        return
    check_no_dates(array, name)
    if kind == "c":
        raise ValueError(f"Complex data not supported\n{array!r}\n")
    if numeric_target is not None and kind in "OUS":
        raise ValueError(
            f"y holds strings (a dask array of dtype {array.dtype}); "
            f"{numeric_target} needs numeric y. To predict class labels, use "
            "KernelAttentionClassifier."
        )
    raise ValueError(
        f"{name} is a dask array of dtype {array.dtype}; it must hold real "
        "numbers (a dask array's values are not read before the fit, so "
        "strings and objects cannot be converted). Convert it, for example "
        f"with {name}.astype(float)."
    )


def _check_x_shape(estimator, X):
    """scikit-learn's errors for a dask ``X`` that is not 2-D, or empty."""
    name = type(estimator).__name__
    if X.ndim == 1:
        raise ValueError(
            f"Expected 2D array, got 1D array instead:\narray={X!r}.\n"
            "Reshape your data either using array.reshape(-1, 1) if your data "
            "has a single feature or array.reshape(1, -1) if it contains a "
            "single sample."
        )
    if X.ndim != 2:
        raise ValueError(f"Found array with dim {X.ndim}. {name} expected <= 2.")
    for size, what in [(X.shape[0], "sample"), (X.shape[1], "feature")]:
        if size == 0:
            raise ValueError(
                f"Found array with 0 {what}(s) (shape={X.shape}) while a "
                f"minimum of 1 is required by {name}."
            )


def _check_known_chunks(array, name):
    if is_dask_array(array) and any(np.isnan(c) for c in array.chunks[0]):
        raise ValueError(
            f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() "
            "before fit."
        )


def _rows_like(array, X):
    """``array`` as a dask array chunked like the rows of ``X``."""
    import dask.array as da

    chunks = X.chunks[:1] + tuple((s,) for s in array.shape[1:])
    if not is_dask_array(array):
        return da.from_array(np.asarray(array), chunks=chunks)
    return array.rechunk(chunks)


def _check_target(estimator, y, target):
    """``y`` checked as ``validate_data`` checks the target ``target``
    (``"values"`` or ``"labels"``)."""
    name = type(estimator).__name__
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None")
    if not is_dask_array(y):
        y = np.asarray(y)
    if target == "values":
        _check_dtype(y, "y", numeric_target=name)
        if y.ndim > 2:
            raise ValueError(f"Found array with dim {y.ndim}. {name} expected <= 2.")
        return y
    if y.dtype.kind == "c":  # labels of any other dtype
        raise ValueError(f"Complex data not supported\n{y!r}\n")
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please "
            "change the shape of y to (n_samples, ), for example using ravel().",
            DataConversionWarning,
            stacklevel=5,
        )
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(
            f"y should be a 1d array, got an array of shape {y.shape} instead."
        )
    return y


def _check_sample_weight(sample_weight, n_samples):
    """The weights' shape and dtype, checked as scikit-learn checks those of
    NumPy input; a number weighs every row."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, Number):
        return np.full(n_samples, float(sample_weight))
    if not is_dask_array(sample_weight):
        sample_weight = np.asarray(sample_weight)
    _check_dtype(sample_weight, "sample_weight")
    if sample_weight.ndim != 1:
        raise ValueError(
            "Sample weights must be 1D array or scalar, got "
            f"{sample_weight.ndim}D array. Expected either a scalar value or a "
            f"1D array of length {n_samples}."
        )
    if sample_weight.shape != (n_samples,):
        raise ValueError(
            f"sample_weight.shape == {sample_weight.shape}, expected {(n_samples,)}!"
        )
    return sample_weight


def validate_dask_fit(estimator, X, y, sample_weight, target):
    """``(X, y, sample_weight)`` of a fit on the dask array ``X``, checked
    without computing a value: ``y`` and the weights (dask or NumPy arrays)
    chunked like the rows of ``X``, the columns of ``X`` in one chunk.

    Records ``n_features_in_`` and ``feature_names_in_`` (none: removes
    those of an earlier fit) as ``validate_data`` does. ``target`` is
    ``"values"`` (numeric, one or more outputs) or ``"labels"`` (1-D class
    labels).
    """
    _check_x_shape(estimator, X)
    _check_dtype(X, "X")
    _check_known_chunks(X, "X")
    validate_data(estimator, X, skip_check_array=True, reset=True)
    y = _check_target(estimator, y, target)
    _check_known_chunks(y, "y")
    check_consistent_length(X, y)
    sample_weight = _check_sample_weight(sample_weight, X.shape[0])
    _check_known_chunks(sample_weight, "sample_weight")
    X = X.rechunk({1: -1})
    y = _rows_like(y, X)
    if sample_weight is not None:
        sample_weight = _rows_like(sample_weight, X)
    return X, y, sample_weight


def validate_dask_queries(estimator, X):
    """The dask queries ``X`` of a fitted estimator, checked as
    ``validate_data`` checks NumPy queries (their shape, dtype, number of
    features and names), the columns in one chunk."""
    _check_x_shape(estimator, X)
    _check_dtype(X, "X")
    validate_data(estimator, X, skip_check_array=True, reset=False)
    return X.rechunk({1: -1})
