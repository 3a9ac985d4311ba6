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

from . import _categorical, _categorical_input
from ._algorithm import ALGORITHMS, key_span, prefers_binned
from ._bandwidth import RULES_OF_THUMB, resolve_bandwidth
from ._binned_pool import BinnedKernelPool
from ._pooling import KernelPool, resolve_kernel
from ._sparse import (
    FIT_FORMATS,
    QUERY_FORMATS,
    check_sparse_algorithm,
    dense_keys,
    fitted_algorithm,
)
from ._user_kernel import check_kernel_callable
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


def check_dense_features(X, name="X", strings=True):
    """Refuse dates and strings (unless not ``strings``), with what to do
    instead.

    SciPy sparse ``X`` holds numbers only, and passes (:mod:`._sparse`).
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


def _value_checks(mask):
    """The checks of the values of ``X`` by ``validate_data``: all of them
    without categorical features (``mask`` None); with them, none, as the
    values are checked column by column (:mod:`._categorical_input`)."""
    if mask is None:
        return {"dtype": [np.float64, np.float32]}
    return {"dtype": None, "ensure_all_finite": False}


def validate_fit_data(estimator, X, y, **options):
    """``validate_data`` of the training data, dates and strings refused.

    SciPy sparse ``X`` is kept as CSR or CSC; a tree ``algorithm`` is
    refused for it (:mod:`._sparse`).

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
        mask = _categorical_input.fit_mask(estimator, X)
    check_dense_features(X, strings=mask is None)
    # scikit-learn spots non-finite input by a sum, which warns before its
    # clear error when +inf and -inf meet.
    with np.errstate(invalid="ignore", over="ignore"):
        X_valid, y = validate_data(
            estimator, X, y, accept_sparse=FIT_FORMATS, **_value_checks(mask), **options
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
    if mask is not None:
        _categorical_input.refuse_sparse(X)
    check_dense_features(X, strings=mask is None)
    with np.errstate(invalid="ignore", over="ignore"):
        X_valid = validate_data(
            estimator,
            X,
            reset=False,
            accept_sparse=QUERY_FORMATS,
            **_value_checks(mask),
        )
    if mask is None:
        return X_valid
    return _categorical_input.query_columns(estimator, X)


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
    ``_pool``. Sparse keys are made dense here, and ``algorithm="auto"``
    picks brute force for them (:mod:`._sparse`).
    """
    algorithm = fitted_algorithm(estimator.algorithm, X)
    X = dense_keys(X)
    estimator.sample_weight_ = validate_sample_weight(sample_weight, X)
    weights = (
        np.ones(X.shape[0], dtype=X.dtype)
        if estimator.sample_weight_ is None
        else estimator.sample_weight_
    )
    continuous = X
    mask = getattr(estimator, "is_categorical_", None)
    if mask is not None:
        n_categorical = int(np.count_nonzero(mask))
        lambdas = _categorical.resolve_categorical_bandwidth(
            estimator.categorical_bandwidth, n_categorical
        )
        estimator.categorical_bandwidth_ = lambdas
        options["categorical_bandwidth"] = lambdas
        continuous = X[:, : X.shape[1] - n_categorical]
        if continuous.shape[1] == 0:
            # No continuous feature: the bandwidth is not used.
            continuous = np.zeros((X.shape[0], 1), dtype=X.dtype)
    estimator.bandwidth_ = resolve_bandwidth(estimator.bandwidth, continuous, weights)
    if callable(estimator.kernel):
        check_kernel_callable(estimator.kernel, X.dtype)
    if options.get("n_neighbors") is not None:
        options["n_neighbors"] = int(options["n_neighbors"])
    engine = KernelPool
    n_bins = getattr(estimator, "n_bins", None)
    if algorithm == "binned" or (
        algorithm == "auto"
        and mask is None
        and not callable(estimator.kernel)
        and options.get("n_neighbors") is None
        and prefers_binned(
            X.shape[0],
            X.shape[1],
            estimator.bandwidth_,
            key_span(X),
            resolve_kernel(estimator.kernel),
            n_bins,
        )
    ):
        engine, algorithm = BinnedKernelPool, "binned"
        options["n_bins"] = n_bins
    estimator._pool = engine(
        X,
        values,
        weights,
        resolve_kernel(estimator.kernel),
        estimator.bandwidth_,
        estimator.on_empty,
        user_kernel=callable(estimator.kernel),
        algorithm=algorithm,
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
