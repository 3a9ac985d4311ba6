"""The intervals keep their promises: enough resamples for a quantile, and
the dtype of the predictions for every answer."""

import math

import numpy as np
import pytest

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)


def _data(dtype, n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(4 * X[:, 0]) + rng.normal(0, 0.1, n)
    return X.astype(dtype), y.astype(dtype)


@pytest.fixture(scope="module")
def regressor():
    X, y = _data(np.float64)
    return KernelAttentionRegressor(bandwidth=0.2, degree=1).fit(X, y), X[:5]


@pytest.mark.parametrize(
    "method, simultaneous",
    [("bootstrap", False), ("bootstrap", True), ("asymptotic", True)],
)
@pytest.mark.parametrize("level", [0.95, 0.9, 0.5])
def test_confidence_interval_refuses_fewer_resamples_than_its_tails_need(
    regressor, method, simultaneous, level
):
    # One resample gave a zero-width "95 %" interval that excluded the
    # estimate, two gave a tenth of the asymptotic width.
    reg, Q = regressor
    least = {0.95: 40, 0.9: 20, 0.5: 4}[level]
    assert least == math.ceil(round(2 / (1 - level), 9))
    options = dict(
        level=level, method=method, simultaneous=simultaneous, random_state=0
    )
    for too_few in sorted({1, 2, least - 1}):
        with pytest.raises(ValueError, match=rf"n_resamples={too_few} .*{least}"):
            reg.confidence_interval(Q, n_resamples=too_few, **options)
    lower, upper = reg.confidence_interval(Q, n_resamples=least, **options)
    assert np.all(upper > lower)


def test_asymptotic_pointwise_interval_ignores_n_resamples(regressor):
    reg, Q = regressor
    expected = reg.confidence_interval(Q)
    np.testing.assert_array_equal(reg.confidence_interval(Q, n_resamples=1), expected)


def test_one_resample_interval_no_longer_excludes_the_estimate(regressor):
    reg, Q = regressor
    with pytest.raises(ValueError, match="n_resamples=1 is too few for level=0.95"):
        reg.confidence_interval(Q, method="bootstrap", n_resamples=1)


REGRESSOR_CONFIGURATIONS = [
    dict(bandwidth=0.2),
    dict(bandwidth=0.2, degree=1),
    dict(kernel="epanechnikov", bandwidth=0.3, algorithm="kd_tree"),
    dict(kernel="epanechnikov", bandwidth=0.3, algorithm="binned", degree=1),
    dict(bandwidth=[0.2, 0.4], kernel="tricube", algorithm="ball_tree"),
]


def _answers(reg, Q):
    """Every array a fitted regressor answers, by name."""
    answers = {"predict": reg.predict(Q)}
    if hasattr(reg, "attention_weights"):  # not a method of the search
        answers["attention_weights"] = reg.attention_weights(Q)
    _, answers["std"], answers["se"] = reg.predict(Q, return_std=True, return_se=True)
    answers["gradient"], answers["gradient_se"] = reg.predict_gradient(
        Q, return_se=True
    )
    for method in ("asymptotic", "bootstrap"):
        for simultaneous in (False, True):
            bounds = reg.confidence_interval(
                Q,
                method=method,
                simultaneous=simultaneous,
                n_resamples=40,
                random_state=0,
            )
            answers[f"confidence_interval {method} {simultaneous}"] = bounds[0]
            answers[f"confidence_interval {method} {simultaneous} upper"] = bounds[1]
    for method in ("jackknife+", "cv+"):
        lower, upper = reg.prediction_interval(Q, method=method)
        answers[f"prediction_interval {method}"] = lower
        answers[f"prediction_interval {method} upper"] = upper
    return answers


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("params", REGRESSOR_CONFIGURATIONS, ids=repr)
def test_every_answer_of_the_regressor_keeps_the_dtype_of_X(params, dtype):
    # prediction_interval returned float64 for float32 X.
    X, y = _data(dtype)
    reg = KernelAttentionRegressor(**params).fit(X, y)
    for name, answer in _answers(reg, X[:6]).items():
        assert answer.dtype == dtype, name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_answer_of_a_categorical_and_a_selected_regressor_keeps_the_dtype(
    dtype,
):
    X, y = _data(dtype)
    X[:, 1] = np.floor(3 * X[:, 1])
    categorical = KernelAttentionRegressor(bandwidth=0.2, categorical_features=[1]).fit(
        X, y
    )
    selected = KernelAttentionRegressorCV(bandwidths=[0.1, 0.2], n_neighbors=None).fit(
        X, y
    )
    for reg in (categorical, selected):
        for name, answer in _answers(reg, X[:6]).items():
            assert answer.dtype == dtype, (type(reg).__name__, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_answer_of_the_classifier_keeps_the_dtype_of_X(dtype):
    X, y = _data(dtype)
    clf = KernelAttentionClassifier(bandwidth=0.2).fit(X, y > 0)
    Q = X[:6]
    for answer in (
        clf.predict_proba(Q),
        clf.predict_log_proba(Q),
        clf.attention_weights(Q),
    ):
        assert answer.dtype == dtype


def test_prediction_interval_bounds_equal_those_of_float64_to_float32_rounding():
    X, y = _data(np.float32)
    reg32 = KernelAttentionRegressor(bandwidth=0.2).fit(X, y)
    reg64 = KernelAttentionRegressor(bandwidth=0.2).fit(
        X.astype(np.float64), y.astype(np.float64)
    )
    Q = X[:6]
    for low32, low64 in zip(
        reg32.prediction_interval(Q),
        reg64.prediction_interval(Q.astype(np.float64)),
        strict=True,
    ):
        np.testing.assert_allclose(low32, low64, rtol=1e-4, atol=1e-5)
