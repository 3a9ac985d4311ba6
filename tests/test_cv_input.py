"""KernelAttentionRegressorCV on unusual inputs: generators of splits,
one-sample folds, classification scorers, data at extreme scales."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.metrics import accuracy_score, make_scorer, r2_score
from sklearn.model_selection import KFold, LeaveOneOut

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV
from sklearn_kernelpool._search._grid import bandwidth_grid


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 2))
    return X, np.sin(4 * X[:, 0]) + X[:, 1]


@pytest.mark.parametrize("verbose", [0, 1])
def test_a_generator_of_splits_is_used_once(data, verbose, capsys):
    X, y = data
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    expected = KernelAttentionRegressorCV(
        bandwidths=[0.1, 0.3], cv=splits, degree=0, n_neighbors=None
    ).fit(X, y)
    reg = KernelAttentionRegressorCV(
        bandwidths=[0.1, 0.3],
        cv=(split for split in splits),
        verbose=verbose,
        degree=0,
        n_neighbors=None,
    ).fit(X, y)
    for s in range(4):
        key = f"split{s}_test_score"
        assert_array_equal(reg.cv_results_[key], expected.cv_results_[key])
    # The guard of the learned widths judges them on the same splits.
    assert_array_equal(reg.bandwidth_, expected.bandwidth_)
    assert reg.per_feature_scores_ == expected.per_feature_scores_
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
    options = {"bandwidths": 5, "degree": 0, "n_neighbors": None}
    expected = KernelAttentionRegressorCV(per_feature=False, **options).fit(X, y)
    reg = KernelAttentionRegressorCV(per_feature=False, **options).fit(X * factor, y)
    assert reg.bandwidth_ == expected.bandwidth_ * factor
    assert_allclose(
        reg.cv_results_["mean_test_score"], expected.cv_results_["mean_test_score"]
    )


def test_a_grid_starting_below_the_float64_range_is_refused():
    # Most distinct points 1e-300 apart, one point 1 away.
    X = np.array([[0.0], [1e-300], [2e-300], [3e-300], [1.0]])
    with pytest.raises(ValueError, match="Pass bandwidths as an array"):
        bandwidth_grid(X, 5)


@pytest.mark.parametrize(
    "cv, scoring",
    [
        (40, None),
        (LeaveOneOut(), None),
        (40, "r2"),
        (40, "explained_variance"),  # 1 on one sample, whatever the prediction
        (40, "d2_absolute_error_score"),
    ],
)
def test_one_sample_folds_with_an_undefined_score_are_refused(data, cv, scoring):
    X, y = data
    reg = KernelAttentionRegressorCV(bandwidths=[0.1, 0.3], cv=cv, scoring=scoring)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=r"single sample.*use cv=None") as error:
            reg.fit(X, y)
    assert not caught, [str(w.message) for w in caught]
    assert f"cv={cv!r}" in str(error.value)
    assert "empty" not in str(error.value)


def test_one_sample_folds_with_a_defined_score_match_leave_one_out(data):
    """Splits of one sample, scored per sample, average the absolute errors
    of the exact leave-one-out."""
    X, y = data
    params = dict(bandwidths=[0.1, 0.3], scoring="neg_max_error")
    kfold = KernelAttentionRegressorCV(cv=40, **params).fit(X, y)
    loo = KernelAttentionRegressorCV(
        bandwidths=[0.1, 0.3], scoring="neg_mean_absolute_error"
    ).fit(X, y)
    assert_allclose(
        kfold.cv_results_["mean_test_score"], loo.cv_results_["mean_test_score"]
    )


def test_leave_one_out_scores_with_a_metric_without_weights(data):
    """neg_max_error takes no sample_weight: without weights, none is passed."""
    X, y = data
    reg = KernelAttentionRegressorCV(
        bandwidths=[0.1, 0.3], scoring="neg_max_error", degree=0, n_neighbors=None
    )
    reg.fit(X, y)
    for h, score in zip([0.1, 0.3], reg.cv_results_["mean_test_score"], strict=True):
        errors = [
            abs(
                KernelAttentionRegressor(bandwidth=h)
                .fit(np.delete(X, i, axis=0), np.delete(y, i))
                .predict(X[i : i + 1])[0]
                - y[i]
            )
            for i in range(len(y))
        ]
        assert_allclose(score, -max(errors))


@pytest.mark.parametrize(
    "scoring",
    [
        "accuracy",
        "f1",
        "balanced_accuracy",
        "roc_auc",
        "neg_log_loss",
        "adjusted_rand_score",
        make_scorer(accuracy_score),
    ],
)
@pytest.mark.parametrize("cv", [None, 3])
def test_a_classification_scorer_is_refused(data, scoring, cv):
    X, y = data
    reg = KernelAttentionRegressorCV(bandwidths=[0.1, 0.3], cv=cv, scoring=scoring)
    with pytest.raises(ValueError, match=r"^scoring=.*needs a regression scorer"):
        reg.fit(X, y)


@pytest.mark.parametrize(
    "scoring",
    [
        "r2",
        "explained_variance",
        "neg_max_error",
        "neg_mean_absolute_error",
        "neg_mean_squared_error",
        "neg_root_mean_squared_error",
        "neg_median_absolute_error",
        "neg_mean_poisson_deviance",
        "d2_absolute_error_score",
        make_scorer(r2_score),
    ],
)
@pytest.mark.parametrize("cv", [None, 3])
def test_a_regression_scorer_scores_every_candidate(data, scoring, cv):
    X, y = data
    y = y + 2.0  # positive, for the deviances
    reg = KernelAttentionRegressorCV(bandwidths=[0.1, 0.3], cv=cv, scoring=scoring)
    reg.fit(X, y)
    assert np.all(np.isfinite(reg.cv_results_["mean_test_score"]))


def test_a_metric_without_weights_is_refused_with_sample_weight(data):
    X, y = data
    reg = KernelAttentionRegressorCV(bandwidths=[0.1, 0.3], scoring="neg_max_error")
    with pytest.raises(ValueError, match="scoring='neg_max_error' must accept"):
        reg.fit(X, y, sample_weight=np.ones(len(y)))
