"""The array API path of the estimator: its checks, ``fit`` and queries.

With ``sklearn.config_context(array_api_dispatch=True)``, arrays that are not
NumPy's (PyTorch tensors, CuPy arrays...) are validated here, for the one way
in of every kind of input (:mod:`._input_kinds`), with ``validate_data``, and
fitted into the engine of :mod:`.._engine._array_api`, in their own namespace
and on their own device; what only the NumPy engine does is refused with a
clear error.
"""

import math

import numpy as np
from sklearn import get_config
from sklearn.utils._array_api import (
    _is_numpy_namespace,
    _max_precision_float_dtype,
    device,
    get_namespace,
)
from sklearn.utils.validation import check_array, validate_data

from .._engine._array_api import ArrayAPIPool, is_array_api_pool
from .._utils._categorical_input import declares_array_features
from .._utils._sparse import check_not_sparse_array_api
from .._utils._width_rules import RULES_OF_THUMB, resolve_bandwidth
from ..kernels import KERNELS

try:  # scikit-learn >= 1.8
    from sklearn.utils._array_api import move_to as _move_to
except ImportError:  # pragma: no cover - scikit-learn < 1.8
    _move_to = None


def array_api_namespace(X):
    """The namespace of ``X`` when the array API path pools it, else None.

    That is when ``array_api_dispatch`` is on and ``X`` is not a NumPy
    array (nor a list, a DataFrame...).
    """
    if not get_config()["array_api_dispatch"]:
        return None
    xp, _ = get_namespace(X)
    return None if _is_numpy_namespace(xp) else xp


def _move(array, xp, device_):
    """``array`` in namespace ``xp`` on ``device_``."""
    if array is None:
        return None
    if _move_to is not None:
        return _move_to(array, xp=xp, device=device_)
    return xp.asarray(array, device=device_)


def takes_array_api(estimator):
    """Whether the parameters of ``estimator`` take arrays of other
    namespaces: its ``array_api_support`` tag (degree 0, a named kernel,
    brute force, fixed widths, no categorical feature declared of an array,
    no linear feature and no robustness iteration)."""
    return (
        estimator.degree == 0
        and not getattr(estimator, "robust_iterations", 0)
        and not callable(estimator.kernel)
        and estimator.algorithm in ("auto", "brute")
        and estimator.n_neighbors is None
        and not declares_array_features(estimator.categorical_features)
        and estimator.linear_features is None
    )


def check_array_api_parameters(estimator):
    """Refuse, for non-NumPy input, what only the NumPy engine does."""
    if estimator.algorithm in ("kd_tree", "ball_tree", "binned"):
        raise ValueError(
            f"algorithm={estimator.algorithm!r} works on NumPy arrays only; "
            "arrays of other namespaces (PyTorch, CuPy...) are pooled by brute "
            "force: use algorithm='brute' or 'auto', or NumPy input."
        )
    if estimator.degree != 0:
        raise ValueError(
            f"degree={estimator.degree} (local-linear pooling) works on NumPy "
            "arrays only; use degree=0 with arrays of other namespaces, or "
            "NumPy input."
        )
    if getattr(estimator, "n_neighbors", None) is not None:
        raise ValueError(
            f"n_neighbors={estimator.n_neighbors} (adaptive widths) works on "
            "NumPy arrays only; use n_neighbors=None with arrays of other "
            "namespaces, or NumPy input."
        )
    if callable(estimator.kernel):
        raise ValueError(
            "A callable kernel works on NumPy arrays only; with arrays of other "
            "namespaces use one of the kernel names of "
            "sklearn_kernelpool.kernels.KERNELS, or NumPy input."
        )


def _name(xp):
    """The name of a namespace, without array-api-compat's wrapper."""
    if _is_numpy_namespace(xp):
        return "numpy"
    return xp.__name__.rpartition("array_api_compat.")[2]


def check_same_namespace(estimator, X, method):
    """Refuse queries of another namespace or device than the training keys
    (NumPy's, on the CPU, for an estimator fitted on the NumPy engine or
    without an engine of its own, as the searches)."""
    pool = getattr(estimator, "_pool", None)
    if is_array_api_pool(pool):
        fitted, fitted_device = _name(pool.xp), device(estimator.keys_)
    else:
        fitted, fitted_device = "numpy", "cpu"
    if get_config()["array_api_dispatch"]:
        xp, _ = get_namespace(X)
        name = _name(xp)
        if name == fitted and device(X) == fitted_device:
            return
        what = f"{method} ({name}, device {device(X)})"
    else:
        what = f"{method} (array_api_dispatch is off)"
    raise ValueError(
        f"Inputs passed to {type(estimator).__name__}.{method}() must use the "
        "same namespace and the same device as those passed to fit(): "
        f"fit ({fitted}, device {fitted_device}), {what}. Call it "
        "under sklearn.config_context(array_api_dispatch=True) with arrays "
        "like those of fit."
    )


def _rule_of_thumb(rule, X, weights, xp):
    """The ``"scott"`` or ``"silverman"`` bandwidths, as in
    :mod:`.._utils._width_rules`.

    ``X`` and ``weights`` are in the precise float dtype of the device.
    """
    scale = xp.max(xp.abs(X), axis=0)
    scale = xp.where(scale > 0, scale, xp.ones_like(scale))
    X = X / scale
    unit = xp.max(weights)
    relative = weights / unit
    total = xp.sum(relative)
    mean = xp.sum(relative[:, None] * X, axis=0) / total
    variance = xp.sum(relative[:, None] * (X - mean) ** 2, axis=0) / total
    spread = xp.sqrt(variance) * scale
    spread = xp.where(spread > 0, spread, xp.ones_like(spread))
    d = X.shape[1]
    log_n = math.log(float(total)) + math.log(float(unit))
    if rule == "silverman":
        log_n -= math.log(4.0 / (d + 2))
    h = spread * math.exp(-log_n / (d + 4))
    if not bool(xp.all(xp.isfinite(h) & (h > 0))):
        raise ValueError(
            f"The {rule!r} rule gives bandwidths {h} for this X and these "
            "sample weights; pass a bandwidth > 0 instead, or rescale X."
        )
    return h


def _sample_weight(sample_weight, X, xp, device_, dtype):
    """Validated non-negative weights with a positive sum, or None."""
    if sample_weight is None:
        return None
    if not hasattr(sample_weight, "shape"):  # a list or a number
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
    sample_weight = _move(sample_weight, xp, device_)
    sample_weight = xp.astype(xp.asarray(sample_weight, device=device_), dtype)
    if sample_weight.ndim == 0:
        sample_weight = xp.full(X.shape[0], sample_weight, dtype=dtype, device=device_)
    if sample_weight.shape != (X.shape[0],):
        raise ValueError(
            f"sample_weight.shape == {tuple(sample_weight.shape)}, expected "
            f"{(X.shape[0],)}!"
        )
    # scikit-learn's errors for NaN and infinity, as for NumPy weights.
    check_array(sample_weight, ensure_2d=False, dtype=None, input_name="sample_weight")
    n_negative = int(xp.sum(xp.astype(sample_weight < 0, xp.int64)))
    if n_negative:
        raise ValueError(
            f"sample_weight must be non-negative; got {n_negative} negative weight(s)."
        )
    if not bool(xp.any(sample_weight > 0)):
        raise ValueError(
            "Sample weights must contain at least one non-zero number; "
            "all sample_weight are zero."
        )
    return sample_weight


def validate_array_api_fit(estimator, X, y, sample_weight, xp):
    """``(X, y, sample_weight)`` of a fit on arrays of the namespace ``xp``,
    validated as every kind of input is (:mod:`._input_kinds`), in that
    namespace and on the device of ``X``; the options only the NumPy engine
    has are refused first."""
    check_array_api_parameters(estimator)
    device_ = device(X)
    precise = _max_precision_float_dtype(xp, device_)
    dtypes = [precise] if precise == xp.float32 else [precise, xp.float32]
    X, y = validate_data(
        estimator, X, y, dtype=dtypes, multi_output=True, y_numeric=True
    )
    y = _move(y, xp, device_)
    sample_weight = _sample_weight(sample_weight, X, xp, device_, precise)
    return X, y, sample_weight


def fit_array_api(estimator, X, y, sample_weight, xp):
    """``fit`` of the regressor on arrays of the namespace ``xp``, validated
    by :func:`validate_array_api_fit`.

    Sets the fitted attributes the NumPy path sets, as arrays of ``xp`` on
    the device of ``X``, and the engine ``_pool``.
    """
    device_ = device(X)
    precise = _max_precision_float_dtype(xp, device_)
    estimator.sample_weight_ = weights = sample_weight
    if weights is None:
        weights = xp.ones(X.shape[0], dtype=precise, device=device_)
    bandwidth = estimator.bandwidth
    if isinstance(bandwidth, str) and bandwidth in RULES_OF_THUMB:
        bandwidth = _rule_of_thumb(bandwidth, xp.astype(X, precise), weights, xp)
    else:
        bandwidth = resolve_bandwidth(bandwidth, X, None)
        if not isinstance(bandwidth, float):
            bandwidth = xp.asarray(bandwidth, dtype=precise, device=device_)
    estimator.bandwidth_ = bandwidth
    estimator._pool = ArrayAPIPool(
        X,
        xp.reshape(y, (X.shape[0], -1)),
        weights,
        KERNELS[estimator.kernel],
        bandwidth,
        estimator.on_empty,
        xp,
    )
    estimator.algorithm_ = "brute"
    estimator.keys_ = X
    estimator.values_ = y
    return estimator


def validate_array_api_queries(estimator, X, method):
    """``validate_data`` of the queries, in the dtype of the training keys."""
    check_not_sparse_array_api(X, method)
    check_same_namespace(estimator, X, method)
    pool = estimator._pool
    X = validate_data(estimator, X, reset=False, dtype=[pool.dtype])
    return X
