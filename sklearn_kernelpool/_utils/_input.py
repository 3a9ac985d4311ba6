"""The validation of the input of the NumPy engine, for ``fit`` and the
queries: NumPy arrays, lists and DataFrames, with categorical columns too
(:mod:`._categorical_input`), and SciPy sparse matrices (:mod:`._sparse`).

The estimators reach it through the one way in of every kind of input,
:mod:`.._estimator._input_kinds`, which sends the arrays of other array API
namespaces and dask arrays to their own checks, written with the same rules
and errors.
"""

import inspect
from numbers import Integral

import numpy as np
from scipy.sparse import issparse
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import _check_sample_weight, validate_data

from . import _categorical_input
from ._sparse import FIT_FORMATS, QUERY_FORMATS, check_sparse_algorithm
from ._validation import FLOAT_DTYPES, check_no_dates, check_no_strings, first_string

# joblib's convention: None, -1 for all processors, -2 for all but one...; 0
# has no meaning.
N_JOBS_CONSTRAINT = [
    None,
    Interval(Integral, None, -1, closed="right"),
    Interval(Integral, 1, None, closed="left"),
]


def check_dense_features(X, name="X", strings=True):
    """Refuse dates and strings (unless not ``strings``), with what to do
    instead.

    SciPy sparse ``X`` holds numbers only, and passes (:mod:`.._utils._sparse`).
    """
    if issparse(X):
        return
    if strings:
        check_no_dates(X, name)
        check_no_strings(X)


def check_numeric_target(estimator, y):
    """Refuse string targets for a regressor, pointing to the classifier."""
    value, _ = first_string(y)
    if value is not None:
        raise ValueError(
            f"y holds strings, for example {value!r}; "
            f"{type(estimator).__name__} needs numeric y. To predict class "
            "labels, use KernelAttentionClassifier."
        )


def _value_checks(mask, X):
    """The checks of the values of ``X`` by ``validate_data``: all of them
    without categorical features (``mask`` None); with them, none, as the
    values are checked column by column (:mod:`._categorical_input`).

    A DataFrame is then read as objects, so that no column is converted to
    a number along with the others (scikit-learn converts the boolean and
    nullable columns of a DataFrame first, with all the others to one float
    dtype, which the categories' strings do not take).
    """
    if mask is None:
        return {"dtype": list(FLOAT_DTYPES)}
    if not _categorical_input._is_dataframe(X):
        return {"dtype": None, "ensure_all_finite": False}
    # (the complex columns that scikit-learn refuses before any conversion)
    if any(getattr(dtype, "kind", "") == "c" for dtype in X.dtypes):
        raise ValueError(f"Complex data not supported\n{X}\n")
    return {"dtype": object, "ensure_all_finite": False}


def validate_fit_data(estimator, X, y, **options):
    """``validate_data`` of the training data, dates and strings refused.

    SciPy sparse ``X`` is kept as CSR or CSC; a tree ``algorithm`` is
    refused for it (:mod:`.._utils._sparse`).

    ``options`` go to :func:`~sklearn.utils.validation.validate_data`; the
    keys are float64 or float32. With ``y_numeric=True``, string targets are
    refused. Every ``X`` passes ``validate_data``, which checks its shape,
    samples, features and feature names, and ``y``, with scikit-learn's
    errors. For an estimator with categorical features
    (``categorical_features``), the keys are its continuous columns followed
    by the integer codes of its categories (:mod:`._categorical_input`).
    """
    if options.get("y_numeric"):
        check_numeric_target(estimator, y)
    mask = None
    if hasattr(estimator, "categorical_features"):
        what = "sparse X" if issparse(X) else None
        mask = _categorical_input.fit_mask(estimator, X, what)
    check_dense_features(X, strings=mask is None)
    # scikit-learn spots non-finite input by a sum, which warns before its
    # clear error when +inf and -inf meet.
    with np.errstate(invalid="ignore", over="ignore"):
        X_valid, y = validate_data(
            estimator,
            X,
            y,
            accept_sparse=FIT_FORMATS,
            **_value_checks(mask, X),
            **options,
        )
    if mask is not None:
        return _categorical_input.fit_columns(estimator, X, mask), y
    # After the validation, which makes frames of sparse columns sparse.
    check_sparse_algorithm(estimator.algorithm, X_valid)
    return X_valid, y


def validate_queries(estimator, X):
    """``validate_data`` of the queries of a fitted estimator, dates and
    strings refused; SciPy sparse queries become CSR.

    With categorical features, the queries as the engine takes them: their
    continuous columns followed by the codes of their categories.
    """
    mask = getattr(estimator, "is_categorical_", None)
    if mask is not None and issparse(X):
        _categorical_input.refuse_categorical(X, "sparse X")
    check_dense_features(X, strings=mask is None)
    with np.errstate(invalid="ignore", over="ignore"):
        X_valid = validate_data(
            estimator,
            X,
            reset=False,
            accept_sparse=QUERY_FORMATS,
            **_value_checks(mask, X),
        )
    if mask is None:
        return X_valid
    return _categorical_input.query_columns(estimator, X)


# scikit-learn >= 1.7 refuses all-zero weights itself, in other words: the
# error below is the one of every kind of input, on every release.
_ZERO_WEIGHTS = (
    {"allow_all_zero_weights": True}
    if "allow_all_zero_weights" in inspect.signature(_check_sample_weight).parameters
    else {}
)


def validate_sample_weight(sample_weight, X):
    """Non-negative, finite weights with a positive sum, or None.

    The weights are float64 whatever X is: a weight need not fit float32
    (the engine rescales the weights before they meet float32 data).
    """
    if sample_weight is None:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, **_ZERO_WEIGHTS
        )
    if np.any(sample_weight < 0):
        raise ValueError(
            "sample_weight must be non-negative; got "
            f"{int(np.sum(sample_weight < 0))} negative weight(s)."
        )
    if not np.any(sample_weight > 0):
        raise ValueError(
            "Sample weights must contain at least one non-zero number; "
            "all sample_weight are zero."
        )
    return sample_weight
