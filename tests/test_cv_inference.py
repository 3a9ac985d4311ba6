"""KernelAttentionRegressorCV answers the inference questions with its best fit."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


def _refit(search, X, y):
    """A regressor fitted afresh at the search's selected parameters."""
    best = search.best_estimator_
    return KernelAttentionRegressor(**best.get_params()).fit(X, y)


@pytest.mark.parametrize("degree", [0, 1])
def test_every_answer_is_that_of_the_selected_regressor(degree):
    X, y = _data()
    Q = _data(15, seed=1)[0]
    search = KernelAttentionRegressorCV(degree=degree, n_neighbors=None).fit(X, y)
    reg = _refit(search, X, y)

    for ours, theirs in zip(
        search.predict(Q, return_std=True, return_se=True),
        reg.predict(Q, return_std=True, return_se=True),
        strict=True,
    ):
        assert_allclose(ours, theirs, rtol=1e-12)
    assert_allclose(search.predict(Q), reg.predict(Q), rtol=1e-12)
    for kwargs in (
        {},
        {"method": "bootstrap", "simultaneous": True, "n_resamples": 49},
    ):
        ours = search.confidence_interval(Q, random_state=0, **kwargs)
        theirs = reg.confidence_interval(Q, random_state=0, **kwargs)
        assert_allclose(ours, theirs, rtol=1e-12)
    for kwargs in ({}, {"method": "cv+", "cv": 4}):
        ours = search.prediction_interval(Q, level=0.8, **kwargs)
        assert_allclose(ours, reg.prediction_interval(Q, level=0.8, **kwargs))
    gradient, se = search.predict_gradient(Q, return_se=True)
    expected = reg.predict_gradient(Q, return_se=True)
    assert_allclose(gradient, expected[0], rtol=1e-12)
    assert_allclose(se, expected[1], rtol=1e-12)
    assert search.effective_df_ == pytest.approx(
        reg.smoother_diagnostics().effective_df, rel=1e-10
    )


def test_frames_keep_their_feature_names():
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "b"])
    search = KernelAttentionRegressorCV(n_neighbors=None).fit(frame, y)
    lower, upper = search.confidence_interval(frame.iloc[:5])
    assert np.all(lower < upper)
    lower, upper = search.prediction_interval(frame.iloc[:5])
    assert np.all(lower < upper)
    assert search.predict_gradient(frame.iloc[:5]).shape == (5, 2)
    with pytest.raises(ValueError, match="feature names"):
        search.predict_gradient(frame.iloc[:5, ::-1])


def test_unfitted_search_is_refused():
    from sklearn.exceptions import NotFittedError

    search = KernelAttentionRegressorCV()
    for method in ("confidence_interval", "prediction_interval", "predict_gradient"):
        with pytest.raises(NotFittedError):
            getattr(search, method)(np.zeros((2, 2)))


def test_bad_flags_name_themselves():
    X, y = _data()
    search = KernelAttentionRegressorCV(n_neighbors=None).fit(X, y)
    with pytest.raises(ValueError, match="return_se"):
        search.predict(X, return_se="yes")
    assert_array_equal(search.predict(X[:3]), search.best_estimator_.predict(X[:3]))


@pytest.mark.parametrize(
    "method",
    ["predict", "confidence_interval", "prediction_interval", "predict_gradient"],
)
def test_the_answers_take_the_arguments_of_the_regressor(method):
    import inspect

    ours = getattr(KernelAttentionRegressorCV, method)
    theirs = getattr(KernelAttentionRegressor, method)
    assert inspect.signature(ours) == inspect.signature(theirs)
    assert ours.__name__ == method
    doc = inspect.getdoc(ours)
    assert "best_estimator_" in doc and doc != inspect.getdoc(theirs)

    X, y = _data()
    search = KernelAttentionRegressorCV(n_neighbors=None).fit(X, y)
    answer = getattr(search, method)
    with pytest.raises(TypeError, match=rf"RegressorCV\.{method}\(\) got an unex"):
        answer(X[:2], no_such_argument=1)
    with pytest.raises(TypeError, match=rf"RegressorCV\.{method}\(\) missing"):
        answer()
    # Queries by keyword, as for a method written out.
    assert_allclose(
        answer(X=X[:2])[0], getattr(search.best_estimator_, method)(X[:2])[0]
    )
