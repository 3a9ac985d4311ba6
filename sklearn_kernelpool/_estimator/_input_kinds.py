"""One way in: every kind of input of ``fit`` and of the queries, validated
alike.

Every estimator's ``fit`` calls :func:`validate_fit_input` once, and each of
its methods that take queries :func:`validate_query_input`. They tell the
kind of the input and validate it with that kind's checks, returning an
:class:`Input` whose ``kind`` says which path takes it:

- ``"dense"``: NumPy arrays, lists and DataFrames of numbers, as a float64
  or float32 ndarray (:mod:`.._utils._input`);
- ``"sparse"``: SciPy sparse matrices and arrays (and DataFrames of sparse
  columns), as CSR or CSC keys and CSR queries (:mod:`.._utils._sparse`);
- ``"categorical"``: dense input with categorical features
  (``categorical_features``), as one float array of its continuous columns
  followed by one column of category codes per categorical feature
  (:mod:`.._utils._categorical_input`);
- ``"array_api"``: under ``array_api_dispatch``, arrays of another array API
  namespace, kept in it and on their device (:mod:`._array_api`);
- ``"dask"``: dask arrays, checked without computing a value
  (:mod:`.._utils._dask_input`); the fit checks their values in its first
  pass over the rows (:mod:`.._binned._dask`);
- ``"linear"``: the training data of a partially linear fit
  (``linear_features``), dense NumPy arrays and DataFrames only: ``X`` as
  given (a DataFrame) or as an ndarray of its own dtype, with the kinds of
  its columns, read once (:mod:`._linear_columns`). Its kernel part is an
  estimator of its own, fitted on the kernel columns through this way in.

Every kind is validated alike, with scikit-learn's errors, which name the
argument (``X``, ``y``, ``sample_weight``) and the estimator:

- dtypes: float64 and float32 are kept (the predictions have the dtype of
  the training ``X``), other real numbers become float64
  (:func:`.._utils._validation.float_dtype`); complex numbers are refused,
  and so are dates, and strings out of the categorical features, with what
  to do instead;
- values: NaN and infinity are refused; sample weights must be finite and
  non-negative, with a positive sum;
- records: ``fit`` records ``n_features_in_`` and ``feature_names_in_`` by
  ``validate_data`` (which removes the names of an earlier fit when ``X``
  has none), and an estimator with ``categorical_features`` records
  ``is_categorical_`` (None where no feature is categorical) and
  ``categories_``; the queries are checked against them.

What a kind cannot take is refused here too: an estimator refuses the kinds
it has no path for (``kinds``), and categorical features declared by index,
mask or name need dense input (``"from_dtype"`` declares none of an array).
The options that a path cannot take are refused by the path: the trees and
the grid for sparse keys (:func:`.._utils._sparse.check_sparse_algorithm`),
those of the array API path (:func:`._array_api.check_array_api_parameters`)
and of the fit on dask arrays (:func:`.._binned._dask.check_dask_parameters`).

A new kind of input is one more name in :data:`KINDS`, told by its type in
:func:`input_kind`, with its checks in a module of its own and one more
branch of :func:`validate_fit_input` and :func:`validate_query_input`.
"""

from dataclasses import dataclass
from typing import Any

from scipy.sparse import issparse

from .._engine._array_api import is_array_api_pool
from .._utils._categorical_input import fit_mask
from .._utils._dask_input import (
    is_dask_array,
    validate_dask_fit,
    validate_dask_queries,
)
from .._utils._input import (
    check_numeric_target,
    validate_fit_data,
    validate_queries,
    validate_sample_weight,
)
from ._array_api import (
    array_api_namespace,
    check_same_namespace,
    validate_array_api_fit,
    validate_array_api_queries,
)
from ._linear_columns import linear_columns, validate_linear_input

KINDS = ("dense", "sparse", "categorical", "array_api", "dask")
# The kinds of the NumPy engine, which every estimator takes.
NUMPY_KINDS = ("dense", "sparse", "categorical")

# The options of ``validate_data`` for each target: the values of a
# regressor (numeric, one or more outputs), the labels of a classifier.
TARGETS = {
    "values": {"multi_output": True, "y_numeric": True},
    "labels": {},
}


@dataclass(frozen=True)
class Input:
    """Validated input, and the path that takes it.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    X : ndarray, sparse matrix, array of ``xp`` or dask array
        The keys or queries as the path takes them. ``"categorical"``: the
        continuous columns, then the category codes in the last
        ``n_categorical`` columns. ``"dask"``: the columns in one chunk.
    y : array or None
        The validated target of ``fit``; ``"dask"``: chunked like the rows
        of ``X``, its values checked by the fit.
    sample_weight : array or None
        The validated weights of ``fit``; None without weights.
    xp : namespace or None
        ``"array_api"``: the namespace of the arrays.
    n_categorical : int
        ``"categorical"``: the number of categorical features.
    columns : LinearColumns or None
        ``"linear"``: the kinds of the columns of ``X``
        (:class:`._linear_columns.LinearColumns`).
    """

    kind: str
    X: Any
    y: Any = None
    sample_weight: Any = None
    xp: Any = None
    n_categorical: int = 0
    columns: Any = None


def input_kind(X):
    """The kind of ``X`` by its type: ``"dask"``, ``"array_api"``,
    ``"sparse"`` or ``"dense"`` (which the validation makes
    ``"categorical"`` for categorical features, and ``"sparse"`` for a
    DataFrame of sparse columns)."""
    if is_dask_array(X):
        return "dask"
    if array_api_namespace(X) is not None:
        return "array_api"
    return "sparse" if issparse(X) else "dense"


def _describe(X, kind):
    """``X`` of ``kind``, in the words of an error."""
    if kind == "array_api":
        return f"X of the array API namespace {array_api_namespace(X).__name__}"
    return {"sparse": "sparse X", "dask": "a dask array X"}[kind]


def _check_taken(estimator, X, kind, kinds):
    """Refuse ``X`` of a kind that the estimator's ``fit`` has no path for."""
    if kind in kinds or kind in NUMPY_KINDS:
        return
    name = type(estimator).__name__
    if kind == "dask":
        raise ValueError(
            f"{name}.fit does not take dask arrays: it holds its training rows "
            "in memory (only KernelAttentionRegressor and "
            "KernelAttentionClassifier fit dask arrays, with "
            "algorithm='binned'). Compute X and y into NumPy arrays first, for "
            "example with X.compute()."
        )
    raise ValueError(
        f"{name}.fit does not take {_describe(X, kind)}: only "
        "KernelAttentionRegressor has an array API path. Convert X and y to "
        "NumPy arrays, for example with numpy.asarray."
    )


def _record_categorical(estimator, X, kind):
    """Record no categorical feature for ``X`` that is not dense, refusing
    the ones ``categorical_features`` declares of an array."""
    if hasattr(estimator, "categorical_features"):
        fit_mask(estimator, X, _describe(X, kind))


def validate_fit_input(
    estimator, X, y, sample_weight=None, *, target="values", kinds=NUMPY_KINDS
):
    """``X``, ``y`` and ``sample_weight`` of ``estimator.fit``, validated as
    an :class:`Input` of the path that fits them.

    Parameters
    ----------
    estimator : estimator
        The estimator being fitted: the errors name it, and it records what
        the module's docstring lists.
    X, y, sample_weight
        The arguments of ``fit``.
    target : {"values", "labels"}, default="values"
        ``"values"``: numeric ``y`` of one or more outputs (string targets
        refused with a pointer to the classifier); ``"labels"``: 1-D class
        labels, whose classes the classifier checks.
    kinds : tuple of str, default=NUMPY_KINDS
        The kinds the estimator has a path for; those of the NumPy engine
        are always taken, the others refused with what to do instead.
        ``("linear",)``: the partially linear fit, which takes dense input
        only.
    """
    if "linear" in kinds:
        X, y = validate_linear_input(estimator, X, y, reset=True)
        sample_weight = validate_sample_weight(sample_weight, X)
        return Input(
            "linear", X, y, sample_weight, columns=linear_columns(estimator, X)
        )
    kind = input_kind(X)
    _check_taken(estimator, X, kind, kinds)
    if kind == "dask":
        _record_categorical(estimator, X, kind)
        X, y, sample_weight = validate_dask_fit(estimator, X, y, sample_weight, target)
        return Input(kind, X, y, sample_weight)
    if kind == "array_api":
        _record_categorical(estimator, X, kind)
        check_numeric_target(estimator, y)
        xp = array_api_namespace(X)
        X, y, sample_weight = validate_array_api_fit(estimator, X, y, sample_weight, xp)
        return Input(kind, X, y, sample_weight, xp=xp)
    X, y = validate_fit_data(estimator, X, y, **TARGETS[target])
    sample_weight = validate_sample_weight(sample_weight, X)
    mask = getattr(estimator, "is_categorical_", None)
    if mask is not None:
        return Input("categorical", X, y, sample_weight, n_categorical=int(mask.sum()))
    return Input("sparse" if issparse(X) else "dense", X, y, sample_weight)


def validate_query_input(estimator, X, method="predict", kinds=NUMPY_KINDS):
    """The queries ``X`` of ``method`` of a fitted estimator, validated as an
    :class:`Input` of the path that takes them.

    An estimator fitted on arrays of another array API namespace takes
    queries of that namespace and device only; one fitted on the NumPy
    engine takes the NumPy engine's kinds (arrays of another namespace are
    refused, naming ``method``), and dask arrays lazily where ``kinds``
    holds ``"dask"`` (else ``validate_data`` computes them into NumPy
    arrays).
    """
    if is_dask_array(X) and "dask" in kinds:
        return Input("dask", validate_dask_queries(estimator, X))
    pool = getattr(estimator, "_pool", None)
    if is_array_api_pool(pool):
        X = validate_array_api_queries(estimator, X, method)
        return Input("array_api", X, xp=pool.xp)
    if array_api_namespace(X) is not None:
        check_same_namespace(estimator, X, method)
    X = validate_queries(estimator, X)
    mask = getattr(estimator, "is_categorical_", None)
    if mask is not None:
        return Input("categorical", X, n_categorical=int(mask.sum()))
    return Input("sparse" if issparse(X) else "dense", X)
