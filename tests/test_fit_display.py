"""FitDisplay: the data, the fit along one feature, its confidence and
prediction bands (from ``confidence_interval`` and ``prediction_interval``)."""

import sys

import numpy as np
import pytest
from _matplotlib import close_figures, plt  # noqa: F401
from numpy.testing import assert_allclose
from sklearn.exceptions import NotFittedError

from sklearn_kernelpool import (
    FitDisplay,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)


def toy(n=60, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    y = np.sin(X[:, 0]) + X[:, 1:].sum(axis=1) + 0.2 * rng.normal(size=n)
    return X, y


def test_one_feature_line_and_bands_are_the_estimator_outputs():
    X, y = toy()
    reg = KernelAttentionRegressor(bandwidth=0.5, degree=1).fit(X, y)
    display = FitDisplay.from_estimator(reg, X, y, prediction=0.8)
    grid = np.linspace(X.min(), X.max(), 100)
    assert_allclose(display.grid, grid)
    assert_allclose(display.grid_X, grid[:, None])
    assert_allclose(display.line_.get_xdata(), grid)
    assert_allclose(display.line_.get_ydata(), reg.predict(grid[:, None]))
    assert_allclose(display.scatter_.get_offsets(), np.column_stack([X[:, 0], y]))

    lower, upper = reg.confidence_interval(
        grid[:, None], level=0.95, method="asymptotic", simultaneous=False
    )
    assert_allclose(display.confidence_band[0], lower)
    assert_allclose(display.confidence_band[1], upper)
    p_lower, p_upper = reg.prediction_interval(grid[:, None], level=0.8)
    assert_allclose(display.prediction_band[0], p_lower)
    assert_allclose(display.prediction_band[1], p_upper)
    # The polygons drawn are the bands.
    for collection, (low, high) in [
        (display.band_, (lower, upper)),
        (display.prediction_band_, (p_lower, p_upper)),
    ]:
        vertices = collection.get_paths()[0].vertices
        for edge in (low, high):
            points = np.column_stack([grid, edge])
            distance = np.abs(points[:, None, :] - vertices[None, :, :]).sum(axis=2)
            assert distance.min(axis=1).max() < 1e-12
    legend = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert legend == ["80% prediction band", "95% confidence band", "data", "fit"]
    assert display.ax_.get_xlabel() == "x"


def test_no_bands_and_axes_reuse():
    X, y = toy()
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
    fig, (left, right) = plt.subplots(1, 2)
    display = FitDisplay.from_estimator(
        reg, X, y, confidence=None, ax=right, grid_resolution=7
    )
    assert display.ax_ is right and display.figure_ is fig
    assert display.band_ is None and display.confidence_band is None
    assert display.prediction_band_ is None and display.prediction_band is None
    assert len(display.grid) == 7
    assert list(right.lines) == [display.line_] and not left.lines


def test_other_features_at_their_median_and_feature_by_name():
    pd = pytest.importorskip("pandas")
    X, y = toy(d=3)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    reg = KernelAttentionRegressor(bandwidth=1.0, degree=1).fit(frame, y)
    display = FitDisplay.from_estimator(reg, frame, y, feature="b", confidence=0.9)
    grid_X = display.grid_X
    assert list(grid_X.columns) == ["a", "b", "c"]
    assert_allclose(grid_X["b"], np.linspace(X[:, 1].min(), X[:, 1].max(), 100))
    assert_allclose(grid_X["a"], np.median(X[:, 0]))
    assert_allclose(grid_X["c"], np.median(X[:, 2]))
    assert_allclose(display.line_.get_ydata(), reg.predict(grid_X))
    lower, upper = reg.confidence_interval(grid_X, level=0.9)
    assert_allclose(display.confidence_band[0], lower)
    assert_allclose(display.confidence_band[1], upper)
    assert display.ax_.get_xlabel() == "b"
    same = FitDisplay.from_estimator(reg, frame, y, feature=1, confidence=None)
    assert_allclose(same.line_.get_ydata(), display.line_.get_ydata())


def test_multi_output_draws_the_chosen_target():
    X, y = toy()
    Y = np.column_stack([y, -2 * y])
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, Y)
    display = FitDisplay.from_estimator(reg, X, Y, target=1, prediction=0.9)
    grid_X = display.grid_X
    assert_allclose(display.line_.get_ydata(), reg.predict(grid_X)[:, 1])
    assert_allclose(display.y, Y[:, 1])
    lower, upper = reg.confidence_interval(grid_X)
    assert_allclose(display.confidence_band[0], lower[:, 1])
    assert_allclose(display.confidence_band[1], upper[:, 1])
    p_lower, p_upper = reg.prediction_interval(grid_X, level=0.9)
    assert_allclose(display.prediction_band[0], p_lower[:, 1])
    assert_allclose(display.prediction_band[1], p_upper[:, 1])


def test_simultaneous_bootstrap_band_is_reproducible():
    X, y = toy(n=40)
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
    kw = {"method": "bootstrap", "simultaneous": True, "random_state": 0}
    display = FitDisplay.from_estimator(reg, X, y, grid_resolution=20, **kw)
    lower, upper = reg.confidence_interval(display.grid_X, level=0.95, **kw)
    assert_allclose(display.confidence_band[0], lower)
    assert_allclose(display.confidence_band[1], upper)


def test_search_estimator_draws_its_best_fit():
    X, y = toy()
    search = KernelAttentionRegressorCV(bandwidths=[0.3, 1.0], degree=0).fit(X, y)
    display = FitDisplay.from_estimator(search, X, y)
    best = search.best_estimator_
    assert_allclose(display.line_.get_ydata(), best.predict(display.grid_X))
    lower, upper = best.confidence_interval(display.grid_X)
    assert_allclose(display.confidence_band[0], lower)
    assert_allclose(display.confidence_band[1], upper)


def test_display_from_arrays():
    grid = np.linspace(0, 1, 5)
    display = FitDisplay(
        grid=grid,
        fitted=grid**2,
        x=[0.1, 0.9],
        y=[0.0, 1.0],
        confidence_band=(grid**2 - 0.1, grid**2 + 0.1),
        feature_name="dose",
    ).plot(line_kw={"color": "k"})
    assert_allclose(display.line_.get_ydata(), grid**2)
    assert display.band_ is not None and display.prediction_band_ is None
    assert display.ax_.get_xlabel() == "dose"
    legend = [text.get_text() for text in display.ax_.get_legend().get_texts()]
    assert legend == ["confidence band", "data", "fit"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"confidence": 1.5}, "confidence must be a float in"),
        ({"confidence": 0}, "confidence must be a float in"),
        ({"prediction": "0.9"}, "prediction must be a float in"),
        ({"feature": 3}, r"feature must be a column index in \[0, 2\)"),
        ({"feature": "age"}, "feature 'age' is not a feature name"),
        ({"feature": 0.5}, "feature must be a column index or a feature name"),
        ({"target": 1}, r"target must be an output index in \[0, 1\)"),
        ({"grid_resolution": 1}, "grid_resolution must be an integer >= 2"),
        ({"y": np.zeros(3)}, "inconsistent numbers of samples"),
    ],
)
def test_invalid_parameters(kwargs, message):
    X, y = toy(d=2)
    reg = KernelAttentionRegressor(bandwidth=1.0).fit(X, y)
    kwargs = {"y": y, **kwargs}
    with pytest.raises(ValueError, match=message):
        FitDisplay.from_estimator(reg, X, **kwargs)


def test_unfitted_estimators_and_classifiers_are_refused():
    X, y = toy()
    with pytest.raises(NotFittedError):
        FitDisplay.from_estimator(KernelAttentionRegressor(), X, y)
    clf = KernelAttentionClassifier(bandwidth=0.5).fit(X, y > 0)
    with pytest.raises(TypeError, match="FitDisplay draws regressors"):
        FitDisplay.from_estimator(clf, X, y > 0)


def test_without_matplotlib_a_clear_import_error(monkeypatch):
    X, y = toy()
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"FitDisplay.from_estimator requires"):
        FitDisplay.from_estimator(reg, X, y)


def test_categorical_features_held_at_their_most_frequent_value():
    pd = pytest.importorskip("pandas")
    X, y = toy(d=2)
    rng = np.random.default_rng(1)
    colour = rng.choice(["red", "blue", "blue", "green"], size=len(y))
    frame = pd.DataFrame({"a": X[:, 0], "colour": colour, "b": X[:, 1]})
    frame["colour"] = frame["colour"].astype("category")
    reg = KernelAttentionRegressor(bandwidth=1.0, categorical_features="from_dtype")
    reg.fit(frame, y)
    display = FitDisplay.from_estimator(reg, frame, y, feature="b", confidence=None)
    grid_X = display.grid_X
    assert grid_X["colour"].dtype == frame["colour"].dtype
    assert (grid_X["colour"] == pd.Series(colour).mode()[0]).all()
    assert_allclose(grid_X["a"], np.median(X[:, 0]))
    assert_allclose(display.line_.get_ydata(), reg.predict(grid_X))
    with pytest.raises(ValueError, match="feature 'colour' is categorical"):
        FitDisplay.from_estimator(reg, frame, y, feature="colour", confidence=None)

    # The same with an object array and column indices.
    objects = np.column_stack([X[:, 0], colour, X[:, 1]]).astype(object)
    objects[:, [0, 2]] = X
    reg = KernelAttentionRegressor(bandwidth=1.0, categorical_features=[1])
    reg.fit(objects, y)
    display = FitDisplay.from_estimator(reg, objects, y, feature=2, confidence=None)
    assert (display.grid_X[:, 1] == pd.Series(colour).mode()[0]).all()
    assert_allclose(display.grid_X[:, 0].astype(float), np.median(X[:, 0]))
    assert_allclose(display.line_.get_ydata(), reg.predict(display.grid_X))
