"""What the estimators share: their common parameters and the fitted engine."""

from numbers import Integral, Real

import numpy as np
from scipy.sparse import issparse
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from ._algorithm import ALGORITHMS
from ._bandwidth import RULES_OF_THUMB, resolve_bandwidth
from ._brute import check_kernel_callable
from ._pooling import KernelPool, resolve_kernel
from ._validation import check_no_dates, check_no_strings, first_string
from .kernels import KERNELS

# joblib's convention: None, -1 for all processors, -2 for all but one...; 0
# has no meaning.
N_JOBS_CONSTRAINT = [
    None,
    Interval(Integral, None, -1, closed="right"),
    Interval(Integral, 1, None, closed="left"),
]

# The constraints of the parameters every estimator has, but ``on_empty``,
# whose accepted policies depend on the estimator.
POOL_PARAMETER_CONSTRAINTS = {
    "kernel": [StrOptions(set(KERNELS)), callable],
    "bandwidth": [
        Interval(Real, 0, np.inf, closed="neither"),
        StrOptions(set(RULES_OF_THUMB)),
        "array-like",
    ],
    "algorithm": [StrOptions(set(ALGORITHMS))],
    "n_jobs": N_JOBS_CONSTRAINT,
}


def check_dense_features(X, name="X"):
    """Refuse sparse matrices, dates and strings, with what to do instead."""
    if issparse(X):
        raise TypeError(
            f"Sparse data was passed for {name} (a {type(X).__name__} of shape "
            f"{X.shape}), but dense data is required. In a Pipeline, have the "
            "step before output dense data, for example "
            "OneHotEncoder(sparse_output=False) or "
            "ColumnTransformer(..., sparse_threshold=0); outside one, "
            f"{name}.toarray() densifies it."
        )
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


def validate_fit_data(estimator, X, y, **options):
    """``validate_data`` of the training data, sparse input, dates and strings
    refused.

    ``options`` go to :func:`~sklearn.utils.validation.validate_data`; the
    keys are float64 or float32. With ``y_numeric=True``, string targets are
    refused.
    """
    check_dense_features(X)
    if options.get("y_numeric"):
        check_numeric_target(estimator, y)
    # scikit-learn spots non-finite input by a sum, which warns before its
    # clear error when +inf and -inf meet.
    with np.errstate(invalid="ignore", over="ignore"):
        return validate_data(estimator, X, y, dtype=[np.float64, np.float32], **options)


def validate_queries(estimator, X):
    """``validate_data`` of the queries of a fitted estimator, sparse input,
    dates and strings refused."""
    check_dense_features(X)
    with np.errstate(invalid="ignore", over="ignore"):
        return validate_data(estimator, X, reset=False, dtype=[np.float64, np.float32])


def validate_sample_weight(sample_weight, X):
    """Non-negative, finite weights with a positive sum, or None.

    The weights are float64 whatever X is: a weight need not fit float32
    (the engine rescales the weights before they meet float32 data).
    """
    if sample_weight is None:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
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


def fit_pool(estimator, X, values, sample_weight, **options):
    """Fit the engine of ``estimator`` on the keys ``X`` and 2-D ``values``.

    Validates the sample weights, resolves the bandwidth and builds the
    :class:`KernelPool` from the estimator's parameters; ``options`` go to
    the engine as they are. Sets the fitted attributes every estimator has:
    ``sample_weight_``, ``bandwidth_``, ``algorithm_`` and the engine
    ``_pool``.
    """
    estimator.sample_weight_ = validate_sample_weight(sample_weight, X)
    weights = (
        np.ones(X.shape[0], dtype=X.dtype)
        if estimator.sample_weight_ is None
        else estimator.sample_weight_
    )
    estimator.bandwidth_ = resolve_bandwidth(estimator.bandwidth, X, weights)
    if callable(estimator.kernel):
        check_kernel_callable(estimator.kernel, X.dtype)
    if options.get("n_neighbors") is not None:
        options["n_neighbors"] = int(options["n_neighbors"])
    estimator._pool = KernelPool(
        X,
        values,
        weights,
        resolve_kernel(estimator.kernel),
        estimator.bandwidth_,
        estimator.on_empty,
        user_kernel=callable(estimator.kernel),
        algorithm=estimator.algorithm,
        **options,
    )
    estimator.algorithm_ = estimator._pool.algorithm
    return estimator._pool


def check_flag(name, value):
    """Refuse a ``return_std`` or ``sparse`` that is not a boolean."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}.")


def pooled_attention_weights(estimator, X, sparse):
    """The ``attention_weights(X, sparse=...)`` of a fitted estimator."""
    check_is_fitted(estimator)
    check_flag("sparse", sparse)
    X = validate_queries(estimator, X)
    return estimator._pool.attention_weights(X, n_jobs=estimator.n_jobs, sparse=sparse)
