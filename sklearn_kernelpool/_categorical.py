"""Unordered categorical features: the Li-Racine kernel and its encoding.

A categorical feature ``j`` enters the attention weight of a key through the
unordered kernel of Aitchison and Aitken (1976) in the form of Li and Racine
(2007): weight 1 for a key of the query's category, ``lambda_j`` in [0, 1]
for a key of another one. It multiplies the continuous kernel of the other
features::

    w_i * alpha(||(q_c - k_c) / h||) * prod_j lambda_j ** [q_j != k_j]

``lambda_j = 1`` ignores the feature, ``lambda_j = 0`` pools only the keys of
the query's category. Categories are learned in ``fit`` (any hashable
values); a category unseen in ``fit`` differs from every key.

The estimators hand the engine one float array per call: the continuous
columns first, then one column per categorical feature holding the
category's integer code (-1 for an unknown category). The engine splits it
(:func:`split_codes`) and applies :class:`CategoricalFactor` to its scores:
as ``sum_j [q_j != k_j] log lambda_j`` added to the log scores of kernels
with a log form (``-inf`` for ``lambda_j = 0``), as a product otherwise.

References
----------
J. Aitchison and C. G. G. Aitken, "Multivariate binary discrimination by the
kernel method", Biometrika 63 (1976). Q. Li and J. S. Racine, "Nonparametric
Econometrics: Theory and Practice", Princeton University Press (2007),
section 4.1.
"""

import sys
from numbers import Real

import numpy as np
from scipy.sparse import issparse
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    check_array,
)

# Codes are stored in the float columns of the keys: float32 holds every
# integer up to 2**24 exactly.
MAX_CATEGORIES = 2**24
# The factor of a chunk is computed in blocks of rows of about this size.
_BLOCK_BYTES = 2**21

CATEGORICAL_CONSTRAINTS = {
    "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
    "categorical_bandwidth": [Interval(Real, 0, 1, closed="both"), "array-like"],
}


# -- which features ----------------------------------------------------------
def _is_dataframe(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def _categorical_dtype(dtype):
    """Whether a pandas column dtype holds categories: category, object, string."""
    import pandas as pd

    return (
        isinstance(dtype, pd.CategoricalDtype)
        or pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
    )


def categorical_mask(categorical_features, X):
    """The boolean mask of the categorical features of ``X``, or None.

    ``categorical_features`` is None, ``"from_dtype"`` (the category, object
    and string columns of a pandas DataFrame; no feature of other input), an
    array-like of int indices, a boolean mask of shape (n_features,), or an
    array-like of feature names (for input with string column names).
    """
    if categorical_features is None:
        return None
    n_features = np.shape(X)[1] if np.ndim(X) == 2 or _is_dataframe(X) else None
    if n_features is None:
        return None  # validate_data explains the shape
    names = list(X.columns) if _is_dataframe(X) else None
    if isinstance(categorical_features, str):
        if categorical_features != "from_dtype":
            raise ValueError(
                "categorical_features must be None, 'from_dtype', or an "
                "array-like of int indices, bools or feature names; got "
                f"{categorical_features!r}."
            )
        if names is None:
            return None
        mask = np.array([_categorical_dtype(dt) for dt in X.dtypes], dtype=bool)
        return mask if mask.any() else None
    features = np.asarray(categorical_features)
    if features.ndim != 1:
        raise ValueError(
            "categorical_features must be a 1-D array-like of int indices, bools "
            f"or feature names; got an array of shape {features.shape}."
        )
    if features.size == 0:
        return None
    kind = features.dtype.kind
    if kind == "O" and all(isinstance(f, str) for f in features):
        kind = "U"
    if kind in ("U", "S"):
        if names is None or not all(isinstance(n, str) for n in names):
            raise ValueError(
                "categorical_features holds feature names, which need X with "
                "string column names (a DataFrame); pass int indices or a "
                "boolean mask for other input."
            )
        unknown = [f for f in features if f not in names]
        if unknown:
            raise ValueError(
                f"categorical_features names {unknown}, which are not feature "
                f"names of X; its feature names are {names}."
            )
        mask = np.isin(np.asarray(names, dtype=object), features)
    elif kind == "b":
        if features.shape[0] != n_features:
            raise ValueError(
                "categorical_features as a boolean mask must have shape "
                f"(n_features,) = ({n_features},); got {features.shape}."
            )
        mask = features.astype(bool)
    elif kind in ("i", "u"):
        if features.min() < -n_features or features.max() >= n_features:
            raise ValueError(
                "categorical_features as int indices must lie in "
                f"[0, n_features - 1] = [0, {n_features - 1}]; got "
                f"{features.tolist()}."
            )
        mask = np.zeros(n_features, dtype=bool)
        mask[features] = True
    else:
        raise ValueError(
            "categorical_features must be an array-like of int indices, bools "
            f"or feature names; got dtype {features.dtype}."
        )
    return mask if mask.any() else None


# -- the columns ---------------------------------------------------------------
def _columns(X, mask):
    """The categorical columns (object, one per feature) and the continuous
    part of ``X``, as they are."""
    if _is_dataframe(X):
        where = np.flatnonzero(mask)
        categorical = [X.iloc[:, j].to_numpy(dtype=object) for j in where]
        continuous = X.iloc[:, np.flatnonzero(~mask)]
        return categorical, continuous
    values = X if isinstance(X, np.ndarray) else np.asarray(X, dtype=object)
    if values.ndim != 2:
        raise ValueError(
            f"Expected a 2-D array for X; got {values.ndim} dimension(s). "
            "Reshape it, for example with X.reshape(-1, 1) for one feature."
        )
    categorical = [values[:, j].astype(object) for j in np.flatnonzero(mask)]
    return categorical, values[:, ~mask]


def _is_missing(column):
    """Missing entries of an object column: None, NaN, pandas' NA and NaT.

    pandas is optional and not imported here: where it was never imported,
    no entry can be one of its missing markers, and None and the values
    unequal to themselves (NaN, NaT) are the missing ones.
    """
    pd = sys.modules.get("pandas")
    if pd is None:
        return np.fromiter(map(_is_none_or_nan, column), dtype=bool, count=len(column))
    return np.asarray(pd.isna(column), dtype=bool)


def _is_none_or_nan(value):
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return False


def _check_column(column, j):
    missing = _is_missing(column)
    if missing.any():
        raise ValueError(
            f"Categorical feature {j} holds missing values ({column[missing][0]!r} "
            f"in {int(missing.sum())} row(s)); categories must not be missing. "
            "Fill them with a category of their own first, for example with "
            "SimpleImputer(strategy='constant', fill_value='missing')."
        )


def learn_categories(column, j):
    """The sorted categories of one column, and its integer codes."""
    _check_column(column, j)
    try:
        categories = np.unique(column)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in column})
        raise ValueError(
            f"Categorical feature {j} mixes values of types {kinds}, which "
            "cannot be sorted into categories; convert them to one type, for "
            "example with astype(str)."
        ) from exc
    if len(categories) > MAX_CATEGORIES:
        raise ValueError(
            f"Categorical feature {j} has {len(categories)} categories; at most "
            f"{MAX_CATEGORIES} are supported."
        )
    return categories, encode(column, categories, j)


def encode(column, categories, j):
    """Integer codes of the values of a column; -1 for unknown categories."""
    _check_column(column, j)
    index = {value: code for code, value in enumerate(categories)}
    return np.fromiter((index.get(v, -1) for v in column), np.intp, len(column))


def _continuous(estimator, X_cont, dtype, n_samples):
    """The continuous columns, validated as ``validate_data`` would."""
    from ._validation import check_no_dates, check_no_strings

    check_no_dates(X_cont)
    check_no_strings(X_cont)
    if np.shape(X_cont)[1] == 0:
        return np.empty((n_samples, 0), dtype=dtype or np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return check_array(
            X_cont,
            dtype=[np.float64, np.float32] if dtype is None else dtype,
            ensure_min_samples=1,
            estimator=estimator,
        )


def _combine(continuous, codes):
    out = np.empty(
        (len(continuous), continuous.shape[1] + len(codes)), continuous.dtype
    )
    out[:, : continuous.shape[1]] = continuous
    for i, c in enumerate(codes):
        out[:, continuous.shape[1] + i] = c
    return out


def _refuse_sparse(X):
    if issparse(X):
        raise ValueError(
            "categorical_features cannot be used with sparse X (a "
            f"{type(X).__name__} of shape {X.shape}): categorical features are "
            "columns of category values. Pass the categorical columns as they "
            "are in a dense array or DataFrame, or one-hot encode them and set "
            "categorical_features=None."
        )


def fit_columns(estimator, X):
    """Split ``X`` for ``fit``: the continuous columns then the codes, as one
    float array.

    Sets ``is_categorical_``, ``categories_``, ``n_features_in_`` and
    ``feature_names_in_``. Returns None when ``categorical_features``
    selects no feature (``is_categorical_`` None): the caller validates
    ``X`` as usual.
    """
    mask = categorical_mask(estimator.categorical_features, X)
    estimator.is_categorical_ = mask
    if mask is None:
        estimator.categories_ = []
        return None
    _refuse_sparse(X)
    _check_feature_names(estimator, X, reset=True)
    _check_n_features(estimator, X, reset=True)
    categorical, continuous = _columns(X, mask)
    n = len(categorical[0])
    if n == 0:
        raise ValueError(
            "Found array with 0 sample(s) while a minimum of 1 is required."
        )
    learned = [
        learn_categories(c, j)
        for c, j in zip(categorical, np.flatnonzero(mask), strict=True)
    ]
    estimator.categories_ = [c for c, _ in learned]
    continuous = _continuous(estimator, continuous, None, n)
    return _combine(continuous, [codes for _, codes in learned])


def query_columns(estimator, X, dtype):
    """Split the queries ``X`` of a fitted estimator like :func:`fit_columns`."""
    mask = estimator.is_categorical_
    _refuse_sparse(X)
    _check_feature_names(estimator, X, reset=False)
    _check_n_features(estimator, X, reset=False)
    categorical, continuous = _columns(X, mask)
    codes = [
        encode(c, categories, j)
        for c, categories, j in zip(
            categorical, estimator.categories_, np.flatnonzero(mask), strict=True
        )
    ]
    continuous = _continuous(estimator, continuous, dtype, len(categorical[0]))
    return _combine(continuous, codes)


def resolve_categorical_bandwidth(value, n_categorical):
    """``categorical_bandwidth`` as an ndarray of one lambda per feature."""
    try:
        lam = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        lam = None
    if lam is None or lam.ndim > 1 or (lam.ndim == 1 and lam.shape[0] != n_categorical):
        raise ValueError(
            "categorical_bandwidth must be a float in [0, 1] or an array-like of "
            f"shape (n_categorical_features,) = ({n_categorical},); got {value!r}."
        )
    if not np.all((lam >= 0) & (lam <= 1)):
        raise ValueError(
            f"categorical_bandwidth must lie in [0, 1]; got {np.ravel(lam).tolist()}."
        )
    return np.broadcast_to(lam, (n_categorical,)).copy()


# -- the engine ------------------------------------------------------------------
def split_codes(X, n_categorical):
    """The continuous columns and the integer codes of an engine array."""
    d = X.shape[1] - n_categorical
    return X[:, :d], X[:, d:].astype(np.intp)


class CategoricalFactor:
    """The product kernel ``prod_j lambda_j ** [q_j != k_j]`` over the keys.

    Parameters
    ----------
    key_codes : ndarray of int of shape (n_keys, n_categorical)
        The codes of the keys.
    lambdas : ndarray of shape (n_categorical,)
        The weights of a different category, in [0, 1].
    """

    def __init__(self, key_codes, lambdas):
        self.keys = np.ascontiguousarray(key_codes, dtype=np.intp)
        self.lambdas = np.asarray(lambdas, dtype=np.float64)
        with np.errstate(divide="ignore"):
            self.logs = np.log(self.lambdas)
        # Features of lambda 1 change nothing.
        self.active = np.flatnonzero(self.lambdas < 1)
        self.excludes = bool(np.any(self.lambdas == 0))

    def for_queries(self, codes):
        """The factor of these queries' codes, shape (n_queries, n_categorical)."""
        return _Bound(self, np.asarray(codes, dtype=np.intp))


class _Bound:
    """:class:`CategoricalFactor` of one chunk of queries."""

    def __init__(self, factor, codes):
        self.factor = factor
        self.codes = codes

    def __getitem__(self, rows):
        return _Bound(self.factor, self.codes[rows])

    @property
    def excludes(self):
        return self.factor.excludes

    def _blocks(self, out):
        """Row blocks of the first rows of ``out``, with a float and a bool
        buffer of a block each (at most 2 MiB together)."""
        n_keys = out.shape[1]
        step = max(1, _BLOCK_BYTES // (9 * max(n_keys, 1)))
        values = np.empty((step, n_keys), dtype=out.dtype)
        differ = np.empty((step, n_keys), dtype=bool)
        for start in range(0, len(self.codes), step):
            rows = slice(start, min(start + step, len(self.codes)))
            size = rows.stop - rows.start
            yield rows, values[:size], differ[:size]

    def _differ(self, rows, j, out):
        return np.not_equal(
            self.codes[rows, j, None], self.factor.keys[None, :, j], out=out
        )

    def add_log(self, out, scale=1.0):
        """Add ``scale * sum_j [q_j != k_j] log lambda_j`` to the first rows
        of ``out`` (``-inf`` where a feature of lambda 0 differs); ``scale``
        turns the natural logarithms into those of logits of another base."""
        for rows, values, differ in self._blocks(out):
            view = out[rows]
            for j in self.factor.active:
                self._differ(rows, j, differ)
                if self.factor.lambdas[j] == 0:
                    np.copyto(view, -np.inf, where=differ)
                else:
                    np.multiply(differ, self.factor.logs[j] * scale, out=values)
                    view += values
        return out

    def multiply(self, out):
        """Multiply the first rows of ``out`` by the factor."""
        for rows, values, differ in self._blocks(out):
            view = out[rows]
            for j in self.factor.active:
                self._differ(rows, j, differ)
                np.multiply(differ, self.factor.lambdas[j] - 1.0, out=values)
                values += 1.0
                view *= values
        return out

    def pairs(self, rows, cols):
        """The factor of the (query, key) pairs ``(rows, cols)``."""
        out = np.ones(len(rows))
        for j in self.factor.active:
            differ = self.codes[rows, j] != self.factor.keys[cols, j]
            out[differ] *= self.factor.lambdas[j]
        return out

    def dense(self):
        """The factor of every (query, key) pair, float64."""
        return self.multiply(np.ones((len(self.codes), len(self.factor.keys))))

    def scale_sparse(self, scores):
        """Multiply sparse (csr) scores by the factor, in place; explicit zeros
        of excluded pairs are removed."""
        rows = np.repeat(np.arange(scores.shape[0]), np.diff(scores.indptr))
        scores.data *= self.pairs(rows, scores.indices).astype(scores.data.dtype)
        if self.excludes:
            scores.eliminate_zeros()
        return scores


class Queries(tuple):
    """The engine's tuple of a chunk's queries, with their categorical factor."""

    def __new__(cls, parts, categorical):
        queries = super().__new__(cls, parts)
        queries.categorical = categorical
        return queries


def check_no_categorical(estimator):
    """Refuse categorical features on the array API path."""
    if estimator.categorical_features is not None:
        raise ValueError(
            "categorical_features works on NumPy arrays and pandas DataFrames "
            "only; arrays of other array API namespaces are pooled without "
            f"categorical features. Got categorical_features="
            f"{estimator.categorical_features!r}: pass NumPy input, or "
            "categorical_features=None."
        )
