"""What the estimators share: their common parameters and the fitted engine."""

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._binned._pool import BinnedKernelPool, prefers_binned
from .._engine import _categorical
from .._engine._algorithm import ALGORITHMS, key_span
from .._engine._pooling import KernelPool, resolve_kernel
from .._utils._categorical_input import category_levels
from .._utils._input import N_JOBS_CONSTRAINT
from .._utils._sparse import (
    dense_keys,
    fitted_algorithm,
)
from .._utils._user_kernel import check_kernel_callable
from .._utils._width_rules import RULES_OF_THUMB, resolve_bandwidth
from ..kernels import KERNELS

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


def fit_pool(estimator, X, values, sample_weight, **options):
    """Fit the engine of ``estimator`` on the keys ``X`` and 2-D ``values``.

    ``X`` and ``sample_weight`` come validated from
    :func:`._input_kinds.validate_fit_input`. Resolves the bandwidth and
    builds the :class:`KernelPool` from the estimator's parameters;
    ``options`` go to the engine as they are. Sets the fitted attributes
    every estimator has:
    ``sample_weight_``, ``bandwidth_``, ``algorithm_`` and the engine
    ``_pool``. Sparse keys are made dense here, and ``algorithm="auto"``
    picks brute force for them (:mod:`.._utils._sparse`).
    """
    algorithm = fitted_algorithm(estimator.algorithm, X)
    X = dense_keys(X)
    estimator.sample_weight_ = sample_weight
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
        levels = category_levels(estimator)
        if levels is not None:
            options["categorical_levels"] = levels
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
        and options.get("degree", 0) < 2
        and prefers_binned(
            *X.shape,
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
