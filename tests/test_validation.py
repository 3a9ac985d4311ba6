"""Bad input gets a clear error that names the problem."""

import math

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._engine import _weight_rows as _weights

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
    "object X": (np.array([["a", "b"]] * 6, dtype=object), y, None, "X holds strings"),
    "string y": (X, np.array(list("abcdef")), None, "y holds strings"),
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
        (flattens, "'flattens' must return an array of the shape of its input"),
        (returns_complex, "'returns_complex' returned values of dtype complex"),
    ],
)
def test_bad_callable_kernel_output_names_the_kernel(kernel, message):
    with pytest.raises(ValueError, match=message):
        KernelAttentionRegressor(kernel=kernel).fit(X, y).predict(X)


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


# -- errors a user meets: each names the parameter, the value and the fix ----


@pytest.mark.parametrize(
    "estimator", [KernelAttentionRegressor(), KernelAttentionRegressorCV(bandwidths=2)]
)
def test_string_targets_point_to_the_classifier(estimator):
    labels = ["cat", "dog"] * 3
    name = type(estimator).__name__
    with pytest.raises(
        ValueError,
        match=rf"y holds strings, for example 'cat'; {name} needs numeric y\. "
        r"To predict class labels, use KernelAttentionClassifier\.",
    ):
        estimator.fit(X, labels)


@pytest.mark.parametrize(
    "kernel, raised",
    [
        (lambda u: math.exp(-u), "TypeError"),
        (lambda u: 1.0 - u if u < 1 else 0.0, "ValueError: The truth value"),
    ],
    ids=["math.exp", "if"],
)
@pytest.mark.parametrize(
    "estimator", [KernelAttentionRegressor, KernelAttentionClassifier]
)
def test_a_scalar_kernel_is_refused_in_fit_with_the_vectorised_forms(
    estimator, kernel, raised
):
    with pytest.raises(
        ValueError,
        match=rf"kernel='<lambda>' failed on an ndarray of scaled distances "
        rf"\({raised}.*must return the weights elementwise.*np\.exp\(-u\) "
        r"rather than math\.exp\(-u\).*np\.vectorize",
    ):
        estimator(kernel=kernel).fit(X, y > 0.5)


def test_a_vectorized_scalar_kernel_is_accepted():
    vectorized = np.vectorize(lambda u: math.exp(-u))
    reg = KernelAttentionRegressor(kernel=vectorized).fit(X, y)
    expected = KernelAttentionRegressor(kernel="exponential").fit(X, y).predict(X)
    np.testing.assert_allclose(reg.predict(X), expected, rtol=1e-12)


def first_column(u):
    return np.exp(-u)[:, :1]


def first_three_columns(u):
    return np.exp(-u)[:, :3]


def test_a_kernel_that_changes_the_shape_is_refused_in_fit():
    with pytest.raises(
        ValueError,
        match=r"kernel 'first_column' must return an array of the shape of its "
        r"input.*: fit tried it on 2 queries and 3 keys, one weight per query "
        r"and key; it returned 1 weight\(s\) per query\. Apply elementwise "
        r"operations only",
    ):
        KernelAttentionRegressor(kernel=first_column).fit(X, y)


def test_a_shape_error_met_in_predict_states_the_rule():
    # Right on fit's small probe, wrong on the (queries, keys) distances.
    reg = KernelAttentionRegressor(kernel=first_three_columns).fit(X, y)
    with pytest.raises(
        ValueError,
        match=r"'first_three_columns' must return an array of the shape of its "
        r"input, the scaled distances of queries \(rows\) to keys \(columns\): "
        rf"for {len(X)} queries and {len(X)} keys, one weight per query and "
        r"key; it returned 3 weight\(s\) per query",
    ):
        reg.predict(X)


def test_a_zero_dimensional_bandwidth_is_a_float():
    reg = KernelAttentionRegressor(bandwidth=np.array(0.5)).fit(X, y)
    assert type(reg.bandwidth_) is float and reg.bandwidth_ == 0.5
    expected = KernelAttentionRegressor(bandwidth=0.5).fit(X, y).predict(X)
    assert_array_equal(reg.predict(X), expected)
    clf = KernelAttentionClassifier(bandwidth=np.float32(0.5)).fit(X, y > 0.5)
    assert clf.bandwidth_ == 0.5


@pytest.mark.parametrize("bad", [np.array(-1.0), np.array(0.0), np.array(np.nan)])
def test_a_bad_zero_dimensional_bandwidth_is_refused(bad):
    with pytest.raises(ValueError, match="bandwidth must be a finite float > 0; got"):
        KernelAttentionRegressor(bandwidth=bad).fit(X, y)


@pytest.mark.parametrize(
    "estimator",
    [KernelAttentionRegressor, KernelAttentionClassifier, KernelAttentionRegressorCV],
)
def test_n_jobs_zero_is_refused_in_fit(estimator):
    with pytest.raises(
        InvalidParameterError,
        match=r"'n_jobs' parameter .* must be None, an int in the range "
        r"\(-inf, -1\] or an int in the range \[1, inf\)\. Got 0",
    ):
        estimator(n_jobs=0).fit(X, y > 0.5)


STRING_FRAME = pd.DataFrame({"size": X[:, 0], "colour": list("rgbrgb")})
ENCODERS = "ColumnTransformer that applies a OneHotEncoder or an OrdinalEncoder"


@pytest.mark.parametrize(
    "X_bad, where",
    [
        (STRING_FRAME, "'r' in column 'colour'"),
        (STRING_FRAME.to_numpy(), "'r' in column 1"),
        (STRING_FRAME.to_numpy().astype(str), "'r' in column 1"),
    ],
    ids=["DataFrame", "object", "str"],
)
def test_a_string_column_suggests_an_encoder(X_bad, where):
    with pytest.raises(
        ValueError,
        match=rf"X holds strings, for example {where}; "
        rf"X must be numeric\. .*{ENCODERS}",
    ):
        KernelAttentionRegressor().fit(X_bad, y)


def test_strings_of_numbers_are_still_converted():
    as_text = X.astype(str)
    expected = KernelAttentionRegressor().fit(X, y).predict(X)
    assert_array_equal(KernelAttentionRegressor().fit(as_text, y).predict(X), expected)


def test_string_queries_suggest_an_encoder():
    reg = KernelAttentionRegressor().fit(STRING_FRAME[["size"]].assign(n=1.0), y)
    with pytest.raises(ValueError, match=rf"'r' in column 'n'.*{ENCODERS}"):
        reg.predict(STRING_FRAME[["size"]].assign(n="r"))


def test_one_hot_encoders_fit_in_a_pipeline():
    # Sparse (the encoders' default) and dense one-hot columns alike.
    labels = pd.DataFrame({"colour": list("rgbrgb")})
    for encoder in (
        OneHotEncoder(),
        OneHotEncoder(sparse_output=False),
        ColumnTransformer([("onehot", OneHotEncoder(), ["colour"])]),
        ColumnTransformer(
            [("onehot", OneHotEncoder(), ["colour"])], sparse_threshold=0
        ),
    ):
        make_pipeline(encoder, KernelAttentionRegressor()).fit(labels, y).predict(
            labels
        )


@pytest.mark.parametrize(
    "params, advice",
    [
        (
            {"kernel": "gaussian"},
            r"'gaussian' kernel has unbounded support, so every weight is "
            r"positive and sparse=True would not save memory: ask for fewer "
            r"queries at a time \(at most about 2 per call\)\. predict needs no "
            r"weight matrix\.",
        ),
        (
            {"kernel": "boxcar", "bandwidth": 0.3},
            r"Ask for sparse=True, which stores only the non-zero weights, the "
            r"keys inside the kernel's support, or ask for fewer queries",
        ),
        (
            {"kernel": "boxcar", "bandwidth": 0.3, "on_empty": "mean"},
            r"Ask for sparse=True, which stores only the weights inside the "
            r"kernel's support \(queries that fall back to on_empty='mean' "
            r"still weigh every key\), or ask for fewer queries",
        ),
    ],
    ids=["unbounded", "compact", "compact-mean"],
)
def test_memory_error_advice_fits_the_kernel(params, advice, monkeypatch):
    reg = KernelAttentionRegressor(**params).fit(X, y)
    # A machine of 400 bytes: 6 x 6 float64 weights (288 bytes) fit, 60 x 6 not.
    monkeypatch.setattr(_weights, "physical_memory", lambda: 400)
    reg.attention_weights(X)
    queries = np.repeat(X, 10, axis=0)
    with pytest.raises(MemoryError, match=r"A dense \(60, 6\) matrix .* " + advice):
        reg.attention_weights(queries)


@pytest.mark.parametrize(
    "params, advice",
    [
        (
            {"kernel": "gaussian"},
            r"'gaussian' kernel has unbounded support, so every weight is "
            r"positive and a sparse matrix is larger than a dense one: ask for "
            r"sparse=False and fewer queries at a time",
        ),
        (
            {"kernel": "boxcar", "bandwidth": 0.3},
            r"ask for fewer queries at a time, or use a smaller bandwidth",
        ),
        (
            {"kernel": "boxcar", "bandwidth": 0.3, "on_empty": "mean"},
            r"Queries that fall back to on_empty='mean' weigh every key: use "
            r"on_empty='nearest'",
        ),
    ],
    ids=["unbounded", "compact", "compact-mean"],
)
def test_sparse_memory_error_does_not_suggest_sparse(params, advice, monkeypatch):
    reg = KernelAttentionRegressor(**params).fit(X, y)

    def unable_to_allocate(*args, **kwargs):
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(_weights, "assemble_sparse", unable_to_allocate)
    with pytest.raises(MemoryError, match=r"\(sparse=True\) does not fit .*" + advice):
        reg.attention_weights(X, sparse=True)
