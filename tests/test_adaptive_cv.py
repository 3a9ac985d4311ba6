"""KernelAttentionRegressorCV with adaptive-width candidates (n_neighbors)."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import KFold, ShuffleSplit

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)


def _data(n=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2)) * np.where(rng.random((n, 1)) < 0.5, 0.4, 1.5)
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


def _refit_predict(params, degree, X, y, w, train, test, on_empty="nearest"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        reg = KernelAttentionRegressor(
            params["kernel"],
            params["bandwidth"],
            degree=degree,
            n_neighbors=params.get("n_neighbors"),
            on_empty=on_empty,
        )
        reg.fit(X[train], y[train], sample_weight=None if w is None else w[train])
        return reg.predict(X[test])


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("weighted", [False, True])
def test_leave_one_out_equals_refitting(degree, weighted):
    """Every candidate's leave-one-out error equals refitting without each
    point: the point's own key is not its neighbour."""
    X, y = _data(30)
    X[1] = X[0]  # a duplicate: its own copy is the other's nearest neighbour
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 2.0, len(X)) if weighted else None
    if weighted:
        w[3] = 0.0
    cv = KernelAttentionRegressorCV(
        kernels=["gaussian", "boxcar"],
        bandwidths=[0.5],
        n_neighbors=[1, 6],
        degree=degree,
    ).fit(X, y, sample_weight=w)
    weights = np.ones(len(X)) if w is None else w
    for params, mse in zip(
        cv.cv_results_["params"], cv.cv_results_["loo_mse"], strict=True
    ):
        errors = np.empty(len(X))
        for i in range(len(X)):
            train = np.flatnonzero(np.arange(len(X)) != i)
            pred = _refit_predict(params, degree, X, y, w, train, [i])
            errors[i] = (pred[0] - y[i]) ** 2
        want = errors @ weights / weights.sum()
        # Local-linear fits on a single neighbour's width are ill-conditioned.
        rtol = 1e-9 if degree == 0 else 1e-7
        np.testing.assert_allclose(mse, want, rtol=rtol, err_msg=str(params))


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize(
    "cv", [KFold(4, shuffle=True, random_state=0), ShuffleSplit(3, random_state=0)]
)
def test_kfold_equals_refitting(degree, cv):
    """K-fold scores (a partition, and splits that are not one) equal
    refitting on each training part: its keys are the neighbours."""
    X, y = _data(40)
    rng = np.random.default_rng(2)
    w = rng.uniform(0.5, 2.0, len(X))
    search = KernelAttentionRegressorCV(
        kernels=["gaussian", "epanechnikov"],
        bandwidths=[0.6],
        n_neighbors=[3, 10],
        degree=degree,
        cv=cv,
        scoring="neg_mean_squared_error",
    ).fit(X, y, sample_weight=w)
    splits = list(cv.split(X))
    for c, params in enumerate(search.cv_results_["params"]):
        for s, (train, test) in enumerate(splits):
            pred = _refit_predict(params, degree, X, y, w, train, test)
            want = -np.average((pred - y[test]) ** 2, weights=w[test])
            got = search.cv_results_[f"split{s}_test_score"][c]
            np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=str(params))


def test_results_and_best_estimator():
    X, y = _data()
    fixed = KernelAttentionRegressorCV(
        bandwidths=[0.2, 0.5, 1.0], degree=0, n_neighbors=None
    ).fit(X, y)
    both = KernelAttentionRegressorCV(
        kernels=["gaussian", "tricube"],
        bandwidths=[0.2, 0.5, 1.0],
        n_neighbors=7,
        degree=0,
    ).fit(X, y)
    results = both.cv_results_
    # The fixed candidates keep their order; the adaptive ones follow.
    n_fixed = 6
    assert [p["kernel"] for p in results["params"][n_fixed:]] == ["gaussian", "tricube"]
    assert results["params"][n_fixed] == {
        "bandwidth": 1.0,
        "kernel": "gaussian",
        "n_neighbors": 7,
    }
    gaussian_fixed = [
        i for i in range(n_fixed) if results["param_kernel"][i] == "gaussian"
    ]
    np.testing.assert_allclose(
        results["mean_test_score"][gaussian_fixed], fixed.cv_results_["mean_test_score"]
    )
    mask = np.ma.getmaskarray(results["param_n_neighbors"])
    np.testing.assert_array_equal(mask, np.arange(8) < n_fixed)
    assert list(results["param_n_neighbors"][n_fixed:]) == [7, 7]
    np.testing.assert_array_equal(results["param_bandwidth"][n_fixed:], 1.0)
    assert "param_n_neighbors" not in fixed.cv_results_
    assert fixed.n_neighbors_ is None

    adaptive = KernelAttentionRegressorCV(
        bandwidths=None, n_neighbors=[2, 5, 9], degree=0
    ).fit(X, y)
    assert len(adaptive.cv_results_["params"]) == 3
    best = adaptive.best_params_
    assert adaptive.n_neighbors_ == best["n_neighbors"] in (2, 5, 9)
    assert adaptive.bandwidth_ == 1.0
    assert adaptive.best_estimator_.n_neighbors == adaptive.n_neighbors_
    np.testing.assert_array_equal(
        adaptive.predict(X),
        KernelAttentionRegressor(n_neighbors=adaptive.n_neighbors_)
        .fit(X, y)
        .predict(X),
    )


def test_errors():
    X, y = _data(10)
    with pytest.raises(ValueError, match="bandwidths=None .* needs n_neighbors"):
        KernelAttentionRegressorCV(bandwidths=None, degree=0, n_neighbors=None).fit(
            X, y
        )
    with pytest.raises(ValueError, match="per_feature=True .* n_neighbors"):
        KernelAttentionRegressorCV(per_feature=True, n_neighbors=3, degree=0).fit(X, y)
    with pytest.raises(ValueError, match="n_neighbors must be None, an int"):
        KernelAttentionRegressorCV(n_neighbors=[3, 0], degree=0).fit(X, y)
    with pytest.raises(ValueError, match="n_neighbors must be None, an int"):
        KernelAttentionRegressorCV(n_neighbors=[], degree=0).fit(X, y)
    # Leave-one-out: at most n - 1 other points.
    with pytest.raises(
        ValueError, match=r"n_neighbors=10 exceeds .* other than the held-out one \(9 "
    ):
        KernelAttentionRegressorCV(n_neighbors=[2, 10], degree=0).fit(X, y)
    KernelAttentionRegressorCV(n_neighbors=9, degree=0).fit(X, y)
    # K-fold: at most the training part's points.
    with pytest.raises(ValueError, match=r"n_neighbors=9 exceeds .* weight \(8 "):
        KernelAttentionRegressorCV(n_neighbors=9, cv=5, degree=0).fit(X, y)


def test_threads_and_working_memory_do_not_change_the_scores():
    from sklearn import config_context

    X, y = _data(120)
    options = dict(bandwidths=None, n_neighbors=[4, 15], kernels=["gaussian", "cosine"])
    one = KernelAttentionRegressorCV(**options, degree=0).fit(X, y).cv_results_
    with config_context(working_memory=0.01):
        many = (
            KernelAttentionRegressorCV(n_jobs=2, **options, degree=0)
            .fit(X, y)
            .cv_results_
        )
    # As for fixed widths: the same scores, up to the rounding of the batches.
    np.testing.assert_allclose(
        many["mean_test_score"], one["mean_test_score"], rtol=1e-13
    )


def test_verbose_names_the_neighbour_counts(capsys):
    X, y = _data(30)
    KernelAttentionRegressorCV(
        bandwidths=2, n_neighbors=[3, 6], verbose=3, degree=0
    ).fit(X, y)
    out = capsys.readouterr().out
    assert "(1 kernel(s) x 2 bandwidths + 2 neighbour counts)" in out
    assert "kernel='gaussian', n_neighbors=6: score=" in out
