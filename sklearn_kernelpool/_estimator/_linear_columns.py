"""The linear columns of a partially linear model: which they are, and their
encoding into the design ``Z``.

``linear_features`` names the columns as ``categorical_features`` does
(indices, a mask, feature names) or as ``"categorical"``.
:class:`LinearDesign` one-hot encodes the categorical ones with
:class:`~sklearn.preprocessing.OneHotEncoder`, their first category dropped,
and keeps the numeric ones as they are; :func:`check_collinear` refuses a
design whose coefficients the data cannot determine.
"""

from typing import NamedTuple

import numpy as np
from scipy.sparse import issparse
from sklearn.preprocessing import OneHotEncoder
from sklearn.utils.validation import check_array, validate_data

from .._utils._categorical_input import (
    _categorical_dtype,
    _is_dataframe,
    categorical_mask,
    encode,
    learn_categories,
    ordered_mask,
)
from .._utils._dask_input import is_dask_array
from .._utils._input import check_numeric_target
from ._array_api import array_api_namespace
from ._identification import NotIdentifiedError

# The accepted values of ``linear_features``, in the errors.
ACCEPTED = (
    "None, 'categorical', or an array-like of int indices, a boolean mask "
    "or feature names"
)


# -- which columns -------------------------------------------------------------
def categorical_columns(categorical_features, X):
    """The categorical features of ``X`` as ``linear_features="categorical"``
    reads them: those of ``categorical_features``, or where it is None the
    category, object and string columns of a DataFrame; None when none."""
    if categorical_features is None:
        categorical_features = "from_dtype"
    return categorical_mask(categorical_features, X)


def linear_mask(linear_features, categorical_features, X, categorical=None):
    """The boolean mask of the linear columns of ``X``.

    ``categorical`` is the mask of ``categorical_features`` where the caller
    has it. Refuses ``"categorical"`` without categorical features, a
    selection of no column, and a mask that leaves no column to the kernel.
    """
    if isinstance(linear_features, str):
        if linear_features != "categorical":
            raise ValueError(
                f"linear_features must be {ACCEPTED}; got {linear_features!r}."
            )
        mask = categorical
        if mask is None:
            mask = categorical_columns(categorical_features, X)
        if mask is None:
            raise ValueError(
                "linear_features='categorical' makes every categorical feature "
                "linear, and X has none (categorical_features="
                f"{categorical_features!r}, and no column of a DataFrame of dtype "
                "category, object or string). Pass the linear columns by index, "
                "mask or name, or linear_features=None."
            )
    else:
        mask = categorical_mask(linear_features, X, name="linear_features")
        if mask is None:
            raise ValueError(
                f"linear_features={linear_features!r} selects no column; pass "
                "linear_features=None for a fit without a linear part."
            )
    if mask.all():
        raise ValueError(
            f"linear_features={linear_features!r} makes every one of the "
            f"{mask.size} features linear, which leaves nothing to the kernel: "
            "keep at least one feature out of linear_features, or fit a linear "
            "model such as sklearn.linear_model.LinearRegression."
        )
    return mask


class LinearColumns(NamedTuple):
    """The kinds of the columns of a partially linear fit's ``X``, read once
    by the one way in (:func:`._input_kinds.validate_fit_input`).

    ``categorical`` is the mask of ``categorical_features`` (None without),
    ``linear`` that of the linear columns, ``ordered`` that of the ordered
    categorical features (None without).
    """

    categorical: object
    linear: np.ndarray
    ordered: object


def linear_columns(estimator, X):
    """The :class:`LinearColumns` of the validated ``X`` of ``estimator``."""
    categorical = categorical_mask(estimator.categorical_features, X)
    linear = linear_mask(
        estimator.linear_features, estimator.categorical_features, X, categorical
    )
    ordered = ordered_mask(estimator.ordered_features, X, categorical)
    return LinearColumns(categorical, linear, ordered)


def refuse_linear_input(X):
    """Refuse ``X`` of a kind the partially linear model has no path for."""
    if issparse(X) or is_dask_array(X) or array_api_namespace(X) is not None:
        raise ValueError(
            "linear_features takes dense NumPy arrays and DataFrames only; got "
            f"a {type(X).__name__}. Make X dense NumPy, or set "
            "linear_features=None."
        )


def validate_linear_input(estimator, X, y=None, reset=False):
    """``X`` (and ``y``) validated as the partially linear model takes them:
    a DataFrame as given, other input as an ndarray."""
    refuse_linear_input(X)
    options = {"dtype": None, "ensure_all_finite": False}
    with np.errstate(invalid="ignore", over="ignore"):
        if y is None:
            X_valid = validate_data(estimator, X, reset=reset, **options)
        else:
            check_numeric_target(estimator, y)
            X_valid, y = validate_data(
                estimator,
                X,
                y,
                reset=reset,
                multi_output=True,
                y_numeric=True,
                **options,
            )
    X = X if _is_dataframe(X) else np.asarray(X_valid)
    return X, y


def _holds_strings(column):
    return column.dtype == object and any(isinstance(v, str) for v in column)


def _column(X, j):
    """Column ``j`` of a DataFrame or of a 2-D ndarray, 1-D."""
    if _is_dataframe(X):
        return X.iloc[:, j].to_numpy()
    return X[:, j]


class LinearDesign:
    """The encoding of the linear columns into the design ``Z``.

    A linear column that is categorical (in ``categorical_features``, of a
    DataFrame dtype category, object or string, or holding strings) is
    one-hot encoded by :class:`~sklearn.preprocessing.OneHotEncoder` with its
    first category dropped; a numeric one enters as it is.

    Parameters
    ----------
    mask : ndarray of bool of shape (n_features,)
        The linear columns.
    categorical : ndarray of bool of shape (n_features,) or None
        The categorical features of ``categorical_features``.
    names : ndarray of str
        The feature names (``x0``, ``x1``... without names).
    """

    def __init__(self, mask, categorical, names):
        self.mask = mask
        self.columns = np.flatnonzero(mask)
        self.categorical = categorical
        self.names = names

    def fit_transform(self, X):
        """Learn the categories of the categorical linear columns; ``Z``."""
        encoded = np.zeros(len(self.columns), dtype=bool)
        for i, j in enumerate(self.columns):
            column = _column(X, j)
            encoded[i] = (
                (self.categorical is not None and self.categorical[j])
                or (_is_dataframe(X) and _categorical_dtype(X.dtypes.iloc[j]))
                or _holds_strings(np.asarray(column))
            )
        self.encoded = encoded
        self.categories = []
        codes = []
        for j in self.columns[encoded]:
            categories, column_codes = learn_categories(
                np.asarray(_column(X, j), dtype=object), j
            )
            self.categories.append(categories)
            codes.append(column_codes)
        self.encoder = None
        if codes:
            self.encoder = OneHotEncoder(
                categories=[np.arange(len(c)) for c in self.categories],
                drop="first",
                handle_unknown="error",
                sparse_output=False,
                dtype=np.float64,
            ).fit(np.column_stack(codes))
        names = []
        categories = iter(self.categories)
        for i, j in enumerate(self.columns):
            if encoded[i]:
                names += [f"{self.names[j]}_{c}" for c in next(categories)[1:]]
            else:
                names.append(str(self.names[j]))
        self.feature_names = np.asarray(names, dtype=object)
        return self.transform(X)

    def seen_rows(self, X):
        """Whether each row of ``X`` holds, in its categorical linear
        columns, only categories seen in fit (:meth:`transform` refuses
        the others)."""
        seen = np.ones(X.shape[0], dtype=bool)
        for categories, j in zip(
            self.categories, self.columns[self.encoded], strict=True
        ):
            seen &= encode(np.asarray(_column(X, j), dtype=object), categories, j) >= 0
        return seen

    def transform(self, X):
        """The design ``Z`` (float64) of the linear columns of ``X``."""
        n = X.shape[0]
        codes = []
        for categories, j in zip(
            self.categories, self.columns[self.encoded], strict=True
        ):
            column = np.asarray(_column(X, j), dtype=object)
            column_codes = encode(column, categories, j)
            if np.any(column_codes < 0):
                unseen = sorted({repr(v) for v in column[column_codes < 0]})
                raise ValueError(
                    f"Linear feature {self.names[j]!r} holds categories not seen "
                    f"in fit: {', '.join(unseen[:5])}. A linear column has one "
                    "coefficient per category learned in fit; leave the feature "
                    "out of linear_features to pool it in the kernel part, where "
                    "an unseen category differs from every key."
                )
            codes.append(column_codes)
        dummies = self.encoder.transform(np.column_stack(codes)) if codes else None
        blocks, start = [], 0
        categories = iter(self.categories)
        for i, j in enumerate(self.columns):
            if self.encoded[i]:
                width = len(next(categories)) - 1
                blocks.append(dummies[:, start : start + width])
                start += width
            else:
                column = np.asarray(_column(X, j))
                blocks.append(
                    check_array(
                        column.reshape(n, 1),
                        dtype=np.float64,
                        input_name=f"linear feature {self.names[j]!r}",
                    )
                )
        return np.hstack(blocks) if blocks else np.empty((n, 0))


def check_collinear(Z, weights, names):
    """Refuse linear columns collinear with each other or with the intercept
    (among the rows of positive weight), naming the first dependent one."""
    positive = weights > 0
    w = weights[positive] / weights[positive].sum()
    # Each column in units of its root mean square, so that the rank test
    # is relative to each column's size, not to the largest one's.
    norms = np.sqrt(w @ Z[positive] ** 2)
    scaled = Z[positive] / np.where(norms > 0, norms, 1.0)
    centred = (scaled - w @ scaled) * np.sqrt(w)[:, None]
    tol = max(centred.shape) * np.finfo(np.float64).eps
    for p in range(1, Z.shape[1] + 1):
        s = np.linalg.svd(centred[:, :p], compute_uv=False)
        if s[-1] <= tol:
            raise NotIdentifiedError(
                f"The linear columns are collinear: {names[p - 1]!r} is a linear "
                "combination of the intercept and the columns before it "
                f"({list(names[: p - 1])}) among the rows of positive weight, so "
                "coef_ is not determined. Drop the redundant column from "
                "linear_features (a constant column, a duplicated one, or the "
                "dummies of categories that always occur together)."
            )
