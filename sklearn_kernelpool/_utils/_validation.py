"""Checks of the values of the data, beyond scikit-learn's validation.

scikit-learn's ``validate_data`` rejects NaN and infinity; these helpers
give its rules and errors to the values it does not see (:func:`float_dtype`,
:func:`raise_not_finite`), refuse dates and strings with what to do instead,
reject what is finite but cannot be computed with, with an error that says
what to change, and rescale what can be computed exactly after rescaling.
"""

import datetime

import numpy as np
from sklearn.utils.validation import check_array

# The dtypes the keys and queries keep; other real numbers become the first.
FLOAT_DTYPES = (np.float64, np.float32)

_TEMPORAL = (
    datetime.date,
    datetime.time,
    datetime.timedelta,
    np.datetime64,
    np.timedelta64,
)


def float_dtype(dtype):
    """The dtype of keys or queries given as ``dtype``: float64 and float32
    are kept, other real numbers become float64, as ``validate_data`` with
    ``dtype=FLOAT_DTYPES`` converts them."""
    dtype = np.dtype(dtype)
    return dtype if dtype in FLOAT_DTYPES else np.dtype(np.float64)


def raise_not_finite(estimator, name, has_nan, dtype):
    """Raise the error of ``validate_data`` for NaN (``has_nan``) or
    infinity among the values ``name`` of ``dtype``.

    For values that ``validate_data`` does not see (the rows of dask arrays,
    checked in a pass of their own): every kind of input gets the same
    message, naming the argument and the estimator.
    """
    value = np.nan if has_nan else np.inf
    check_array(
        np.full(1, value, dtype=dtype),
        ensure_2d=False,
        dtype=None,
        input_name=name,
        estimator=estimator,
    )
    raise AssertionError("check_array took a non-finite value")  # pragma: no cover


def _dtypes(X):
    """The dtypes of ``X``: one per column of a DataFrame, object for a list."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None and not hasattr(X, "dtype"):  # a DataFrame
        return list(dtypes)
    if hasattr(X, "dtype"):
        return [X.dtype]
    return [np.dtype(object)]  # a list: look at its values


def _object_values(X):
    """``X`` as an object ndarray, or None when it is ragged."""
    try:
        return np.asarray(X, dtype=object)
    except ValueError:
        return None  # ragged: validate_data says so


def check_no_dates(X, name="X"):
    """Reject date, time and duration columns.

    scikit-learn turns them into numbers in whatever unit they are stored in
    (days, seconds, nanoseconds...), which a bandwidth cannot know about.
    """
    dtypes = _dtypes(X)
    found = next((dt for dt in dtypes if getattr(dt, "kind", "") in ("m", "M")), None)
    if found is None and any(getattr(dt, "kind", "") == "O" for dt in dtypes):
        values = _object_values(X)
        if values is None:
            return
        found = next(
            (type(v) for v in values.ravel() if isinstance(v, _TEMPORAL)), None
        )
    if found is not None:
        found = getattr(found, "__name__", found)
        raise ValueError(
            f"{name} holds dates, times or durations ({found}); their numeric "
            "value depends on the unit they are stored in, which a bandwidth "
            "cannot know. Convert them to numbers in a unit of your choice, "
            "for example (dates - origin) / np.timedelta64(1, 'D')."
        )


def _is_text(value):
    """Whether ``value`` is a string (or bytes) that is not a number."""
    if not isinstance(value, (str, bytes)):
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


def first_string(X):
    """The first string (or bytes) of ``X`` that is not a number, and the
    index of its column.

    Returns ``(None, None)`` when ``X`` holds none; the column is None for
    input of less than two dimensions. Strings of numbers (``"1.5"``) are
    left to ``validate_data``, which converts them.
    """
    if not any(getattr(dt, "kind", "") in ("O", "U", "S") for dt in _dtypes(X)):
        return None, None
    values = _object_values(X)
    if values is None:
        return None, None
    flat = values.ravel()
    at = next((i for i, v in enumerate(flat) if _is_text(v)), None)
    if at is None:
        return None, None
    column = at % values.shape[1] if values.ndim == 2 else None
    return flat[at], column


def check_no_strings(X):
    """Refuse a feature matrix with strings, with the encoders to use."""
    value, column = first_string(X)
    if value is None:
        return
    names = getattr(X, "columns", None)
    where = ""
    if column is not None:
        where = f" in column {column}"
        if names is not None:
            where = f" in column {names[column]!r}"
    raise ValueError(
        f"X holds strings, for example {value!r}{where}; X must be numeric. "
        "Encode such columns first, for example in a Pipeline with a "
        "ColumnTransformer that applies a OneHotEncoder or an OrdinalEncoder "
        "to them, or declare them categorical with the estimator's "
        "categorical_features parameter (for example "
        "categorical_features='from_dtype' for a DataFrame)."
    )


def coordinate_limit(dtype, n_features):
    """The largest coordinate of scaled data whose squared distances are finite.

    With every coordinate at most this in absolute value, norms are at most
    ``sqrt(finfo.max) / 8`` and every term of the distance expansion
    ``|q|^2 + |k|^2 - 2 q.k`` (centred data included) stays below
    ``finfo.max / 4``.
    """
    return float(np.sqrt(np.finfo(dtype).max) / 8 / np.sqrt(n_features))


def check_squares(values, name, squares):
    """Refuse float64 ``values`` (2-D) whose squares, summed, would overflow.

    For the arithmetic that squares the data as it is: the squared distances
    of unscaled keys, the squared errors of values. ``squares`` names them in
    the message.
    """
    limit = coordinate_limit(np.float64, values.shape[1])
    largest = float(np.max(np.abs(values), initial=0.0))
    if not largest <= limit:
        raise ValueError(
            f"{name} has values up to {largest:.3g}; past {limit:.3g} (float64, "
            f"{values.shape[1]} columns) {squares} overflow. Rescale {name} "
            "(for example with a StandardScaler)."
        )


def scale_coordinates(X, bandwidth, dtype, name):
    """``X / bandwidth`` in float64, refusing coordinates that would overflow.

    ``dtype`` is the dtype of the work: for float32 the squared distances
    must fit float32 (coordinates below about 2e18 bandwidths), for float64
    they must fit float64 (below about 1e153 bandwidths).
    """
    with np.errstate(over="ignore"):
        scaled = X.astype(np.float64) / bandwidth
    limit = coordinate_limit(dtype, X.shape[1])
    # The largest magnitude, without a temporary of the size of X.
    largest = max(float(scaled.max(initial=0.0)), -float(scaled.min(initial=0.0)))
    if not largest <= limit:
        raise ValueError(
            f"{name} divided by the bandwidth has coordinates up to "
            f"{largest:.3g}; past {limit:.3g} ({np.dtype(dtype).name}, "
            f"{X.shape[1]} features) squared distances overflow. Rescale X "
            "(for example with a StandardScaler) or use a larger bandwidth."
        )
    return scaled


def power_of_two_below(x):
    """2**e with 2**e <= x < 2**(e + 1), elementwise, for x > 0; 1 for x == 0."""
    _, exponent = np.frexp(x)
    return np.where(x > 0, np.ldexp(1.0, exponent - 1), 1.0)


def relative_weights(sample_weight, dtype):
    """Positive sample weights divided by a power of two near their maximum.

    Attention weights are ratios, so a common factor changes nothing, and a
    power of two divides exactly; the largest weight becomes about 1 and no
    sum of weights can overflow. Every relative weight must then be a
    normal number of ``dtype`` with room to spare, at least
    ``finfo.tiny / finfo.eps`` (about 1e-292 in float64, 1e-31 in float32),
    so that its products with kernel values above ``eps`` keep their full
    precision: a subnormal weight carries only a few significant bits and
    would silently skew the predictions of queries that only its key
    reaches. Wider ranges are refused rather than rounded.
    """
    w = np.asarray(sample_weight, dtype=np.float64)
    relative = (w / power_of_two_below(w.max())).astype(dtype)
    info = np.finfo(dtype)
    if not np.all(relative >= info.tiny / info.eps):
        span = np.log10(w.max()) - np.log10(w.min())
        hint = "" if np.dtype(dtype) == np.float64 else ", or use float64 X"
        limit = np.log10(info.eps / info.tiny)
        raise ValueError(
            f"sample_weight spans too wide a range for {np.dtype(dtype).name}: "
            f"the largest weight is about 1e{span:.0f} times the smallest "
            f"positive one, past the 1e{limit:.0f} that {np.dtype(dtype).name} "
            "carries at full precision. Set the weights of negligible rows to "
            f"zero (or drop those rows){hint}."
        )
    return relative


def scale_values(values, dtype):
    """Values divided, per output, by a power of two near their magnitude.

    Returns the scaled values in ``dtype`` and the scales: pooled values are
    multiplied back by them. Sums of scaled values cannot overflow, and the
    division and multiplication are exact. Values beyond the range of
    ``dtype`` (the dtype of the predictions) are refused.
    """
    values = np.asarray(values, dtype=np.float64)
    largest = np.max(np.abs(values), axis=0, initial=0.0)
    if np.any(largest > np.finfo(dtype).max):
        name = np.dtype(dtype).name
        raise ValueError(
            f"y has values up to {largest.max():.3g}, beyond the range of "
            f"{name}, the dtype of the predictions for {name} X. Pass X as "
            "float64, or rescale y."
        )
    scale = power_of_two_below(largest)
    return (values / scale).astype(dtype), scale.astype(dtype)
