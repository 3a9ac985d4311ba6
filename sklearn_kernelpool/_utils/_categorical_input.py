"""The input side of categorical features: which features are categorical, and
the engine array of the keys and the queries.

The estimators hand the engine one float array per call: the continuous
columns first, then one column per categorical feature holding the category's
integer code (-1 for an unknown category). :mod:`.._engine._categorical` holds the
kernel that uses the codes.

The input goes through ``validate_data`` first, in
:func:`._input.validate_fit_data` and :func:`._input.validate_queries`, with
the checks of the dense path but those of the values: its shape, samples,
features, feature names and target. The values are checked here, column by
column: the categories must not be missing, the continuous columns are
validated as the dense path validates ``X``.
"""

import sys

import numpy as np
from sklearn.utils.validation import _num_features, check_array

from ._validation import FLOAT_DTYPES, check_no_dates, check_no_strings

# Codes are stored in the float columns of the keys: float32 holds every
# integer up to 2**24 exactly.
MAX_CATEGORIES = 2**24


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


def categorical_mask(categorical_features, X, name="categorical_features"):
    """The boolean mask of the categorical features of ``X``, or None.

    ``categorical_features`` is None, ``"from_dtype"`` (the category, object
    and string columns of a pandas DataFrame; no feature of other input), an
    array-like of int indices, a boolean mask of shape (n_features,), or an
    array-like of feature names (for input with string column names).
    ``name`` is the parameter the errors name.
    """
    if categorical_features is None:
        return None
    try:
        n_features = _num_features(X)
    except (TypeError, IndexError):
        return None  # not 2-D: validate_data explains the shape
    if n_features == 0:
        return None  # validate_data explains the missing features
    names = list(X.columns) if _is_dataframe(X) else None
    if isinstance(categorical_features, str):
        return _mask_from_dtypes(categorical_features, X, names, name)
    features = np.asarray(categorical_features)
    if features.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array-like of int indices, bools "
            f"or feature names; got an array of shape {features.shape}."
        )
    if features.size == 0:
        return None
    mask = _mask_of_features(features, names, n_features, name)
    return mask if mask.any() else None


def _mask_from_dtypes(categorical_features, X, names, name):
    """The mask of ``"from_dtype"``: the category, object and string columns
    of a DataFrame, None for other input or no such column."""
    if categorical_features != "from_dtype":
        raise ValueError(
            f"{name} must be None, 'from_dtype', or an "
            "array-like of int indices, bools or feature names; got "
            f"{categorical_features!r}."
        )
    if names is None:
        return None
    mask = np.array([_categorical_dtype(dt) for dt in X.dtypes], dtype=bool)
    return mask if mask.any() else None


def _mask_of_features(features, names, n_features, name):
    """The mask of a non-empty 1-D array of names, bools or int indices."""
    kind = features.dtype.kind
    if kind == "O" and all(isinstance(f, str) for f in features):
        kind = "U"
    if kind in ("U", "S"):
        return _mask_of_names(features, names, name)
    if kind == "b":
        if features.shape[0] != n_features:
            raise ValueError(
                f"{name} as a boolean mask must have shape "
                f"(n_features,) = ({n_features},); got {features.shape}."
            )
        return features.astype(bool)
    if kind in ("i", "u"):
        if features.min() < -n_features or features.max() >= n_features:
            raise ValueError(
                f"{name} as int indices must lie in "
                f"[0, n_features - 1] = [0, {n_features - 1}]; got "
                f"{features.tolist()}."
            )
        mask = np.zeros(n_features, dtype=bool)
        mask[features] = True
        return mask
    raise ValueError(
        f"{name} must be an array-like of int indices, bools "
        f"or feature names; got dtype {features.dtype}."
    )


def _mask_of_names(features, names, name):
    """The mask of feature names, which need X with string column names."""
    if names is None or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"{name} holds feature names, which need X with "
            "string column names (a DataFrame); pass int indices or a "
            "boolean mask for other input."
        )
    unknown = [f for f in features if f not in names]
    if unknown:
        raise ValueError(
            f"{name} names {unknown}, which are not feature "
            f"names of X; its feature names are {names}."
        )
    return np.isin(np.asarray(names, dtype=object), features)


def _is_ordered_dtype(dtype):
    import pandas as pd

    return isinstance(dtype, pd.CategoricalDtype) and bool(dtype.ordered)


def ordered_mask(ordered_features, X, categorical):
    """The boolean mask of the ordered categorical features of ``X``, or None.

    ``ordered_features`` is None (no feature), ``"from_dtype"`` (the
    categorical features that are ordered pandas categorical columns) or
    takes the forms of ``categorical_features`` (:func:`categorical_mask`),
    naming categorical features only; ``categorical`` is the mask of those.
    """
    if categorical is None or ordered_features is None:
        return None
    if isinstance(ordered_features, str) and ordered_features == "from_dtype":
        if not _is_dataframe(X):
            return None
        mask = np.array([_is_ordered_dtype(dt) for dt in X.dtypes], dtype=bool)
        mask &= categorical
        return mask if mask.any() else None
    mask = categorical_mask(ordered_features, X, name="ordered_features")
    if mask is not None and np.any(mask & ~categorical):
        raise ValueError(
            "ordered_features must name categorical features only; features "
            f"{np.flatnonzero(mask & ~categorical).tolist()} are not among "
            "categorical_features. Declare them categorical too, or leave them "
            "out of ordered_features."
        )
    return mask


def declares_array_features(categorical_features):
    """Whether ``categorical_features`` declares categorical features of an
    array, whatever its values.

    Only None, ``"from_dtype"`` (which reads the dtypes of a DataFrame), an
    empty array-like and a boolean mask of False declare none; every other
    value declares some, or is refused by ``fit``. SciPy sparse ``X`` holds
    no categories: an estimator takes it only when this is False.
    """
    if categorical_features is None or isinstance(categorical_features, str):
        return False
    try:
        features = np.asarray(categorical_features)
    except (TypeError, ValueError):  # ragged: fit refuses it
        return True
    if features.dtype.kind == "b":
        return bool(features.any())
    return features.size > 0


# -- the columns ---------------------------------------------------------------
def _columns(X, mask):
    """The categorical columns (object, one per feature) and the continuous
    part of ``X`` (2-D, validated by ``validate_data``), as they are."""
    if _is_dataframe(X):
        where = np.flatnonzero(mask)
        categorical = [X.iloc[:, j].to_numpy(dtype=object) for j in where]
        continuous = X.iloc[:, np.flatnonzero(~mask)]
        return categorical, continuous
    values = X if isinstance(X, np.ndarray) else np.asarray(X, dtype=object)
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
            f"in {int(missing.sum())} row(s)); categories must not be missing "
            "(NaN, None, pandas.NA or NaT). Fill them with a category of their "
            "own first, for example with "
            "SimpleImputer(strategy='constant', fill_value='missing')."
        )


def _check_finite(values, j):
    """Refuse infinite numbers among ``values`` of categorical feature ``j``,
    as the dense path refuses them in ``X``."""
    found = next(
        (v for v in values if isinstance(v, (float, np.floating)) and np.isinf(v)),
        None,
    )
    if found is not None:
        raise ValueError(
            f"Categorical feature {j} holds an infinite value ({found!r}); "
            "categories must be finite. Replace it with a category of its own "
            "first, for example with a string."
        )


def learn_categories(column, j):
    """The sorted categories of one column, and its integer codes."""
    _check_column(column, j)
    try:
        categories = np.unique(column)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in column})
        # A TypeError, as scikit-learn's encoders raise for such values.
        raise TypeError(
            f"Categorical feature {j} holds values of types {kinds}, which "
            "cannot be sorted into categories: its argument must be uniformly "
            "strings or numbers (or of one other sortable type). Convert them "
            "to one type, for example with astype(str)."
        ) from exc
    _check_finite(categories, j)
    if len(categories) > MAX_CATEGORIES:
        raise ValueError(
            f"Categorical feature {j} has {len(categories)} categories; at most "
            f"{MAX_CATEGORIES} are supported."
        )
    return categories, encode(column, categories, j)


def learn_levels(column, j, declared):
    """The levels of an ordered feature in their order, and its codes (the
    positions): ``declared``, the categories of a pandas categorical column,
    all of them, or else the sorted values (:func:`learn_categories`)."""
    if declared is None:
        return learn_categories(column, j)
    _check_column(column, j)
    if len(declared) > MAX_CATEGORIES:
        raise ValueError(
            f"Categorical feature {j} has {len(declared)} categories; at most "
            f"{MAX_CATEGORIES} are supported."
        )
    return declared, encode(column, declared, j)


def _declared_order(X, j):
    """The categories of column ``j`` of a DataFrame of a pandas categorical
    dtype, in their order; None for other columns and input."""
    if not _is_dataframe(X):
        return None
    import pandas as pd

    dtype = X.dtypes.iloc[j]
    if not isinstance(dtype, pd.CategoricalDtype):
        return None
    return np.array(list(dtype.categories), dtype=object)


def category_levels(estimator):
    """The engine's ``categorical_levels`` of a fitted estimator: the number
    of levels of each ordered categorical feature, 0 for an unordered one;
    None where no feature is ordered (and for estimators fitted by earlier
    releases, which knew no ordered feature)."""
    categorical = getattr(estimator, "is_categorical_", None)
    ordered = getattr(estimator, "is_ordered_", None)
    if categorical is None or ordered is None:
        return None
    return np.array(
        [
            len(levels) if is_ordered else 0
            for levels, is_ordered in zip(
                estimator.categories_, ordered[categorical], strict=True
            )
        ],
        dtype=np.intp,
    )


def sorted_levels(estimator, X):
    """Which categorical features of ``estimator``, fitted on ``X``, are
    ordered by their sorted values (:func:`learn_levels` without declared
    categories), which a fit on other rows numbers among its own values;
    None where none is. Those of a pandas categorical column keep the
    positions of its categories in every fit."""
    categorical = getattr(estimator, "is_categorical_", None)
    ordered = getattr(estimator, "is_ordered_", None)
    if categorical is None or ordered is None:
        return None
    where = np.flatnonzero(categorical)
    mask = np.array(
        [ordered[j] and _declared_order(X, j) is None for j in where], dtype=bool
    )
    return mask if mask.any() else None


def encode(column, categories, j):
    """Integer codes of the values of a column; -1 for unknown categories."""
    _check_column(column, j)
    index = {value: code for code, value in enumerate(categories)}
    codes = np.fromiter((index.get(v, -1) for v in column), np.intp, len(column))
    _check_finite(column[codes < 0], j)
    return codes


def _continuous(estimator, X_cont, n_samples):
    """The continuous columns, validated as ``validate_data`` validates ``X``
    on the dense path."""
    check_no_dates(X_cont)
    check_no_strings(X_cont)
    if np.shape(X_cont)[1] == 0:
        return np.empty((n_samples, 0), dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return check_array(
            X_cont, dtype=list(FLOAT_DTYPES), input_name="X", estimator=estimator
        )


def _combine(continuous, codes):
    out = np.empty(
        (len(continuous), continuous.shape[1] + len(codes)), continuous.dtype
    )
    out[:, : continuous.shape[1]] = continuous
    for i, c in enumerate(codes):
        out[:, continuous.shape[1] + i] = c
    return out


def refuse_categorical(X, what):
    """Refuse categorical features of ``X`` that is not dense: ``what`` says
    what it is, in the words of the error (``"sparse X"``...)."""
    raise ValueError(
        f"categorical_features cannot be used with {what} (a "
        f"{type(X).__name__} of shape {tuple(X.shape)}): categorical features "
        "are columns of category values. Pass the categorical columns as they "
        "are in a dense NumPy array or DataFrame, or one-hot encode them and "
        "set categorical_features=None."
    )


def fitted_categorical_mask(estimator):
    """Which features a fitted estimator read as categorical: its
    ``is_categorical_``, or none of its ``n_features_in_``."""
    mask = getattr(estimator, "is_categorical_", None)
    if mask is None:
        return np.zeros(estimator.n_features_in_, dtype=bool)
    return np.asarray(mask, dtype=bool)


def fit_mask(estimator, X, what=None):
    """The mask of the categorical features of the training ``X``, or None.

    Sets ``is_categorical_`` to it, ``is_ordered_`` to the mask of the
    ordered ones (:func:`ordered_mask`) and ``categories_`` to an empty
    list (:func:`fit_columns` learns them). ``X`` that is not dense
    (``what`` says what it is: ``"sparse X"``...) takes none: the features
    that ``categorical_features`` declares of an array are refused.
    """
    if what is not None and declares_array_features(estimator.categorical_features):
        refuse_categorical(X, what)
    mask = categorical_mask(estimator.categorical_features, X)
    estimator.is_categorical_ = mask
    estimator.is_ordered_ = ordered_mask(
        getattr(estimator, "ordered_features", None), X, mask
    )
    estimator.categories_ = []
    return mask


def fit_columns(estimator, X, mask):
    """Split ``X`` for ``fit``: the continuous columns then the codes, as one
    float array.

    ``X`` has passed ``validate_data`` (:func:`._input.validate_fit_data`);
    ``mask`` is :func:`fit_mask` of it. Sets ``categories_``: those of an
    ordered feature in their order (:func:`learn_levels`), the codes their
    positions.
    """
    categorical, continuous = _columns(X, mask)
    ordered = getattr(estimator, "is_ordered_", None)
    ordered = np.zeros_like(mask) if ordered is None else ordered
    learned = [
        learn_levels(c, j, _declared_order(X, j))
        if ordered[j]
        else learn_categories(c, j)
        for c, j in zip(categorical, np.flatnonzero(mask), strict=True)
    ]
    estimator.categories_ = [c for c, _ in learned]
    continuous = _continuous(estimator, continuous, len(categorical[0]))
    return _combine(continuous, [codes for _, codes in learned])


def query_columns(estimator, X):
    """Split the queries ``X`` of a fitted estimator like :func:`fit_columns`.

    ``X`` has passed ``validate_data`` (:func:`._input.validate_queries`).
    """
    mask = estimator.is_categorical_
    categorical, continuous = _columns(X, mask)
    codes = [
        encode(c, categories, j)
        for c, categories, j in zip(
            categorical, estimator.categories_, np.flatnonzero(mask), strict=True
        )
    ]
    continuous = _continuous(estimator, continuous, len(categorical[0]))
    return _combine(continuous, codes)
