"""Bad input gets a clear error that names the problem."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import KernelAttentionRegressor

rng = np.random.default_rng(0)
X = rng.uniform(size=(6, 2))
y = rng.uniform(size=6)


def with_nan(a):
    a = a.copy()
    a.flat[1] = np.nan
    return a


def with_inf(a):
    a = a.copy()
    a.flat[1] = np.inf
    return a


FIT_CASES = {
    "nan in X": (with_nan(X), y, None, "Input X contains NaN"),
    "inf in X": (with_inf(X), y, None, "Input X contains infinity"),
    "nan in y": (X, with_nan(y), None, "Input y contains NaN"),
    "inf in y": (X, with_inf(y), None, "Input y contains infinity"),
    "empty X": (np.empty((0, 2)), np.empty(0), None, "0 sample"),
    "no features": (np.empty((6, 0)), y, None, "0 feature"),
    "3-D X": (rng.uniform(size=(6, 2, 2)), y, None, "dim 3"),
    "3-D y": (X, y[:, None, None], None, "dim 3"),
    "complex X": (X + 1j, y, None, "Complex data not supported"),
    "complex y": (X, y + 1j, None, "Complex data not supported"),
    "object X": (np.array([["a", "b"]] * 6, dtype=object), y, None, "convert string"),
    "string y": (X, np.array(list("abcdef")), None, "convert string"),
    "mismatched lengths": (X, y[:5], None, "inconsistent numbers of samples"),
    "negative weight": (X, y, np.r_[1.0, -1.0, 1, 1, 1, 1], "non-negative"),
    "all-zero weights": (X, y, np.zeros(6), "at least one non-zero"),
    "nan weight": (X, y, with_nan(np.ones(6)), "sample_weight contains NaN"),
    "weights of wrong length": (X, y, np.ones(5), r"sample_weight\.shape"),
    "2-D weights": (X, y, np.ones((6, 1)), "1D array"),
}


@pytest.mark.parametrize("case", FIT_CASES, ids=list(FIT_CASES))
def test_bad_fit_input_raises_a_clear_error(case):
    X_bad, y_bad, sample_weight, message = FIT_CASES[case]
    with pytest.raises(ValueError, match=message):
        KernelAttentionRegressor().fit(X_bad, y_bad, sample_weight=sample_weight)


PARAMETER_CASES = {
    "zero bandwidth": ({"bandwidth": 0.0}, InvalidParameterError, "'bandwidth'"),
    "negative bandwidth": ({"bandwidth": -1}, InvalidParameterError, "'bandwidth'"),
    "nan bandwidth": ({"bandwidth": np.nan}, InvalidParameterError, "'bandwidth'"),
    "inf bandwidth": ({"bandwidth": np.inf}, InvalidParameterError, "'bandwidth'"),
    "unknown rule": ({"bandwidth": "scot"}, InvalidParameterError, "'scott'"),
    "too few widths": ({"bandwidth": [1.0]}, ValueError, "n_features = 2"),
    "too many widths": ({"bandwidth": [1.0] * 3}, ValueError, "n_features = 2"),
    "2-D widths": ({"bandwidth": [[1.0, 1.0]]}, ValueError, r"shape \(1, 2\)"),
    "negative width": ({"bandwidth": [1.0, -2.0]}, ValueError, "finite float > 0"),
    "zero width": ({"bandwidth": [1.0, 0.0]}, ValueError, "finite float > 0"),
    "nan width": ({"bandwidth": [np.nan, 1.0]}, ValueError, "finite float > 0"),
    "inf width": ({"bandwidth": [np.inf, 1.0]}, ValueError, "finite float > 0"),
    "string widths": ({"bandwidth": ["a", "b"]}, ValueError, "real numbers"),
    "complex widths": ({"bandwidth": [1j, 1.0]}, ValueError, "real numbers"),
    "unknown kernel": ({"kernel": "gauss"}, InvalidParameterError, "'epanechikov'"),
    "unknown on_empty": ({"on_empty": "zero"}, InvalidParameterError, "'nearest'"),
    "unknown algorithm": ({"algorithm": "fast"}, InvalidParameterError, "'brute'"),
    "float n_jobs": ({"n_jobs": 1.5}, InvalidParameterError, "'n_jobs'"),
}


@pytest.mark.parametrize("case", PARAMETER_CASES, ids=list(PARAMETER_CASES))
def test_bad_parameters_raise_a_clear_error(case):
    params, error, message = PARAMETER_CASES[case]
    with pytest.raises(error, match=message):
        KernelAttentionRegressor(**params).fit(X, y)


def test_unknown_kernel_error_lists_every_valid_name():
    with pytest.raises(InvalidParameterError) as excinfo:
        KernelAttentionRegressor(kernel="gauss").fit(X, y)
    for name in ("gaussian", "boxcar", "constant", "epanechikov", "epanechnikov"):
        assert f"'{name}'" in str(excinfo.value)


def negative(x):
    return x - 0.5


def returns_nan(x):
    return np.where(x > 0.3, np.nan, 1.0)


def returns_inf(x):
    return np.where(x > 0.3, np.inf, 1.0)


def flattens(x):
    return np.exp(-x).ravel()


def returns_complex(x):
    return np.exp(-x) + 0j


@pytest.mark.parametrize(
    "kernel, message",
    [
        (negative, "'negative' returned negative weights"),
        (returns_nan, "'returns_nan' returned NaN or infinite"),
        (returns_inf, "'returns_inf' returned NaN or infinite"),
        (flattens, "'flattens' returned an array of shape"),
        (returns_complex, "'returns_complex' returned values of dtype complex"),
    ],
)
def test_bad_callable_kernel_output_names_the_kernel(kernel, message):
    reg = KernelAttentionRegressor(kernel=kernel).fit(X, y)
    with pytest.raises(ValueError, match=message):
        reg.predict(X)


PREDICT_CASES = {
    "wrong feature count": (rng.uniform(size=(3, 3)), "X has 3 features"),
    "nan query": (with_nan(X), "Input X contains NaN"),
    "inf query": (with_inf(X), "Input X contains infinity"),
    "1-D query": (X[0], "Expected 2D array"),
    "empty queries": (np.empty((0, 2)), "0 sample"),
    "complex query": (X + 1j, "Complex data not supported"),
}


@pytest.mark.parametrize("case", PREDICT_CASES, ids=list(PREDICT_CASES))
def test_bad_predict_input_raises_a_clear_error(case):
    queries, message = PREDICT_CASES[case]
    reg = KernelAttentionRegressor().fit(X, y)
    with pytest.raises(ValueError, match=message):
        reg.predict(queries)


def test_predict_before_fit():
    with pytest.raises(NotFittedError, match="not fitted"):
        KernelAttentionRegressor().predict(X)
