"""AttentionWeightsDisplay and plot_kernels."""

import subprocess
import sys

import numpy as np
import pytest
from _matplotlib import close_figures, plt  # noqa: F401
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError

from sklearn_kernelpool import (
    AttentionWeightsDisplay,
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    plot_kernels,
)
from sklearn_kernelpool.kernels import KERNELS


def toy(n=30, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.normal(size=n)


def test_importing_the_package_does_not_import_matplotlib():
    code = "import sys, sklearn_kernelpool; print('matplotlib' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("degree", [0, 1])
def test_heatmap_is_the_attention_weights_with_sorted_keys(degree):
    X, y = toy()
    reg = KernelAttentionRegressor(bandwidth=0.6, degree=degree).fit(X, y)
    queries = np.linspace(0, 5, 17)[:, None]
    display = AttentionWeightsDisplay.from_estimator(reg, queries)
    order = np.argsort(X[:, 0])
    expected = reg.attention_weights(queries)[:, order]
    assert_array_equal(display.key_order, order)
    assert_allclose(display.weights, expected)
    assert_allclose(display.im_.get_array(), expected)
    assert display.keys_sorted
    assert display.colorbar_ is not None
    assert display.colorbar_.mappable is display.im_
    assert display.ax_.get_xlabel() == "training keys, sorted (column)"
    assert display.figure_ is display.ax_.figure
    # Sorted keys: the heaviest key of a query moves right as the query does.
    heaviest = X[order[np.argmax(display.weights, axis=1)], 0]
    assert np.all(np.diff(heaviest) >= 0)


def test_unsorted_and_several_features_keep_the_training_order():
    X, y = toy()
    reg = KernelAttentionRegressor(bandwidth=0.6).fit(X, y)
    display = AttentionWeightsDisplay.from_estimator(reg, X[:5], sort=False)
    assert_array_equal(display.key_order, np.arange(30))
    assert_allclose(display.weights, reg.attention_weights(X[:5]))
    assert not display.keys_sorted

    X2, y2 = toy(d=2)
    reg2 = KernelAttentionRegressor(bandwidth=0.8).fit(X2, y2)
    display = AttentionWeightsDisplay.from_estimator(reg2, X2[:4])
    assert_array_equal(display.key_order, np.arange(30))
    assert_allclose(display.im_.get_array(), reg2.attention_weights(X2[:4]))
    assert display.ax_.get_xlabel() == "training keys (column)"


def test_colour_scale_is_diverging_only_for_negative_weights():
    X, y = toy()
    pooled = KernelAttentionRegressor(bandwidth=0.6).fit(X, y)
    display = AttentionWeightsDisplay.from_estimator(pooled, X)
    assert display.im_.get_cmap().name == "Reds"
    assert display.im_.norm.vmin == 0
    local = KernelAttentionRegressor(bandwidth=2.0, degree=1).fit(X, y)
    queries = np.array([[-1.0], [6.0]])  # outside the data: negative weights
    weights = local.attention_weights(queries)
    assert weights.min() < 0
    display = AttentionWeightsDisplay.from_estimator(local, queries)
    assert display.im_.get_cmap().name == "RdBu_r"
    assert_allclose(display.im_.norm.vmin, -np.abs(weights).max())
    assert_allclose(display.im_.norm.vmax, np.abs(weights).max())


def test_rows_of_nan_weights_are_blank():
    X, y = toy()
    reg = KernelAttentionRegressor("boxcar", bandwidth=0.2, on_empty="nan")
    reg.fit(X, y)
    queries = np.array([[-5.0], [X[0, 0]], [20.0]])
    with pytest.warns(EmptyNeighborhoodWarning):
        display = AttentionWeightsDisplay.from_estimator(reg, queries)
    assert np.isnan(display.weights[[0, 2]]).all()
    assert display.im_.norm.vmin == 0 and display.im_.get_cmap().name == "Reds"
    with pytest.warns(EmptyNeighborhoodWarning):
        display = AttentionWeightsDisplay.from_estimator(reg, queries[[0]])
    assert display.im_.get_cmap().name == "Reds"


def test_classifier_and_search_estimators():
    X, y = toy()
    labels = (y > 0).astype(int)
    clf = KernelAttentionClassifier(bandwidth=0.5).fit(X, labels)
    display = AttentionWeightsDisplay.from_estimator(clf, X[:3])
    order = np.argsort(X[:, 0])
    assert_allclose(display.weights, clf.attention_weights(X[:3])[:, order])

    search = KernelAttentionRegressorCV(bandwidths=[0.3, 1.0], degree=0).fit(X, y)
    display = AttentionWeightsDisplay.from_estimator(search, X[:3])
    best = search.best_estimator_
    assert_allclose(display.weights, best.attention_weights(X[:3])[:, order])


def test_axes_are_reused_and_options_pass_through():
    X, y = toy()
    reg = KernelAttentionRegressor(bandwidth=0.6).fit(X, y)
    fig, (left, right) = plt.subplots(1, 2)
    display = AttentionWeightsDisplay.from_estimator(
        reg, X, ax=right, colorbar=False, cmap="viridis"
    )
    assert display.ax_ is right
    assert display.figure_ is fig
    assert display.colorbar_ is None
    assert display.im_.get_cmap().name == "viridis"
    assert len(fig.axes) == 2  # no colour bar axes added
    assert display.im_ in right.images and not left.images


def test_display_from_a_weight_matrix():
    weights = np.array([[0.25, 0.75], [1.0, 0.0]])
    display = AttentionWeightsDisplay(weights).plot(imshow_kw={"cmap": "Greys"})
    assert_allclose(display.im_.get_array(), weights)
    assert display.im_.get_cmap().name == "Greys"
    assert len(display.figure_.axes) == 2  # the heatmap and its colour bar


def test_heatmap_errors():
    X, y = toy()
    with pytest.raises(NotFittedError):
        AttentionWeightsDisplay.from_estimator(KernelAttentionRegressor(), X)
    reg = KernelAttentionRegressor(bandwidth=0.6).fit(X, y)
    with pytest.raises(ValueError, match="sort must be True or False"):
        AttentionWeightsDisplay.from_estimator(reg, X, sort="yes")
    from sklearn.linear_model import LinearRegression

    with pytest.raises(TypeError, match="attention_weights"):
        AttentionWeightsDisplay.from_estimator(LinearRegression().fit(X, y), X)


def test_plot_kernels_draws_every_builtin_kernel_once():
    ax = plot_kernels()
    names = list(dict.fromkeys(kernel.name for kernel in KERNELS.values()))
    assert [line.get_label() for line in ax.get_lines()] == names
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == names
    for line in ax.get_lines():
        x, values = line.get_xdata(), line.get_ydata()
        assert x[0] == -2.5 and x[-1] == 2.5
        assert_allclose(values, KERNELS[line.get_label()](x) * np.ones_like(x))


def test_plot_kernels_names_aliases_callables_and_axes():
    def bump(x):
        return np.maximum(1 - np.abs(x) ** 3, 0.0)

    fig, ax = plt.subplots()
    out = plot_kernels(["tophat", KERNELS["cauchy"], bump], ax=ax)
    assert out is ax
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["tophat", "cauchy", "bump"]
    x = lines[0].get_xdata()
    assert_allclose(lines[0].get_ydata(), (np.abs(x) < 1).astype(float))
    assert_allclose(lines[1].get_ydata(), 1 / (1 + x**2))
    assert_allclose(lines[2].get_ydata(), bump(x))
    single = plot_kernels("gaussian")
    assert [line.get_label() for line in single.get_lines()] == ["gaussian"]


@pytest.mark.parametrize(
    "kernels, message",
    [
        (["gaussian", "gausian"], "Unknown kernel 'gausian'"),
        ([3], "kernel names, Kernel objects or callables"),
        ([], "at least one kernel"),
    ],
)
def test_plot_kernels_errors(kernels, message):
    with pytest.raises(ValueError, match=message):
        plot_kernels(kernels)


def test_without_matplotlib_a_clear_import_error(monkeypatch):
    X, y = toy()
    reg = KernelAttentionRegressor(bandwidth=0.6).fit(X, y)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    message = (
        r"requires matplotlib.*pip install matplotlib"
        r".*pip install \"\.\[plot\]\".*from a clone"
    )
    with pytest.raises(ImportError, match="plot_kernels " + message):
        plot_kernels()
    with pytest.raises(ImportError, match="from_estimator " + message):
        AttentionWeightsDisplay.from_estimator(reg, X)
    with pytest.raises(ImportError, match=message):
        AttentionWeightsDisplay(np.eye(2)).plot()
