"""KernelAttentionRegressorCV on unusual inputs: generators of splits,
one-point folds, classification scorers, data at extreme scales."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import KFold

from sklearn_kernelpool import KernelAttentionRegressorCV
from sklearn_kernelpool._cv import bandwidth_grid


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 2))
    return X, np.sin(4 * X[:, 0]) + X[:, 1]


@pytest.mark.parametrize("verbose", [0, 1])
def test_a_generator_of_splits_is_used_once(data, verbose, capsys):
    X, y = data
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    expected = KernelAttentionRegressorCV(bandwidths=[0.1, 0.3], cv=splits).fit(X, y)
    reg = KernelAttentionRegressorCV(
        bandwidths=[0.1, 0.3], cv=(split for split in splits), verbose=verbose
    ).fit(X, y)
    for s in range(4):
        key = f"split{s}_test_score"
        assert_array_equal(reg.cv_results_[key], expected.cv_results_[key])
    assert reg.bandwidth_ == expected.bandwidth_
    if verbose:
        assert "Fitting 4 folds for each of 2 candidates" in capsys.readouterr().out


@pytest.mark.parametrize("factor", [1e-200, 1e-300, 1e200])
def test_the_automatic_grid_scales_with_x(data, factor):
    X, _ = data
    assert_allclose(bandwidth_grid(X * factor, 7), bandwidth_grid(X, 7) * factor)


@pytest.mark.parametrize("exponent", [-1000, -700, 700])
def test_the_automatic_grid_of_x_times_a_power_of_two_is_exact(data, exponent):
    X, _ = data
    X = X.copy()
    X[3] = X[4]  # a duplicate, not a distinct point
    factor = 2.0**exponent
    assert_array_equal(bandwidth_grid(X * factor, 7), bandwidth_grid(X, 7) * factor)


def test_data_at_a_tiny_scale_is_refused_not_given_a_bandwidth_of_one(data):
    X, y = data
    with pytest.raises(ValueError, match=r"automatic bandwidths.*Rescale X"):
        KernelAttentionRegressorCV().fit(X * 1e-200, y)


def test_data_at_a_small_scale_selects_the_scaled_bandwidth(data):
    X, y = data
    factor = 2.0**-400
    expected = KernelAttentionRegressorCV(bandwidths=5).fit(X, y)
    reg = KernelAttentionRegressorCV(bandwidths=5).fit(X * factor, y)
    assert reg.bandwidth_ == expected.bandwidth_ * factor
    assert_allclose(
        reg.cv_results_["mean_test_score"], expected.cv_results_["mean_test_score"]
    )


def test_a_grid_starting_below_the_float64_range_is_refused():
    # Most distinct points 1e-300 apart, one point 1 away.
    X = np.array([[0.0], [1e-300], [2e-300], [3e-300], [1.0]])
    with pytest.raises(ValueError, match="Pass bandwidths as an array"):
        bandwidth_grid(X, 5)
