"""Bandwidth selection on the binned path against the exact scores."""

import numpy as np
import pytest
from sklearn.model_selection import ShuffleSplit

from sklearn_kernelpool import (
    KernelAttentionClassifierCV,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._binned._binning import linear_bin
from sklearn_kernelpool._binned._engine import BinnedEngine
from sklearn_kernelpool._held_out._binned import BinnedHeldOut
from sklearn_kernelpool._held_out._pool import HeldOut
from sklearn_kernelpool.kernels import KERNELS


def smooth_data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, d))
    y = np.sin(4 * X).sum(axis=1) + X[:, 0] ** 2 + 0.2 * rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, size=n)
    return X, y, w


def search(algorithm, **params):
    options = {"n_neighbors": None, "algorithm": algorithm}
    options.update(params)
    return KernelAttentionRegressorCV(**options)


def relative(a, b):
    return np.max(np.abs(a / b - 1))


# Every kernel in one and two features; the gaussian in two features, whose
# wide support costs the binned grid most, with -m slow (the two-feature
# gaussian grid is compared with the exact scores under K-fold below).
@pytest.mark.parametrize(
    "n_features, kernel",
    [
        (d, kernel)
        if (d, kernel) != (2, "gaussian")
        else pytest.param(d, kernel, marks=pytest.mark.slow)
        for d in (1, 2)
        for kernel in ("gaussian", "epanechnikov", "tricube")
    ],
)
def test_loo_scores_match_exact(n_features, kernel):
    X, y, w = smooth_data(3000, n_features)
    widths = np.geomspace(0.08, 0.4, 6)
    exact = search("brute", kernels=kernel, bandwidths=widths).fit(X, y, w)
    binned = search("binned", kernels=kernel, bandwidths=widths).fit(X, y, w)
    assert sorted(binned.cv_results_) == sorted(exact.cv_results_)
    # The exact search adds local quadratic candidates after the others,
    # which the binned grid does not fit.
    n = len(binned.cv_results_["params"])
    assert set(exact.cv_results_["param_degree"][n:]) <= {2}
    for key in ("param_bandwidth", "param_degree", "param_kernel"):
        assert list(binned.cv_results_[key]) == list(exact.cv_results_[key][:n])
    for key in ("mean_test_score", "loo_mse"):
        assert relative(binned.cv_results_[key], exact.cv_results_[key][:n]) < 1e-3
    assert binned.best_estimator_.algorithm_ == "binned"


@pytest.mark.parametrize("degree", [0, 1])
def test_chosen_width_equal_or_adjacent(degree):
    X, y, _ = smooth_data(4000, 1, seed=1)
    widths = np.geomspace(0.005, 0.5, 20)
    kw = {"kernels": ["gaussian", "biweight"], "bandwidths": widths}
    exact = search("brute", degree=degree, **kw).fit(X, y)
    binned = search("binned", degree=degree, **kw).fit(X, y)
    assert binned.kernel_ == exact.kernel_
    i = np.searchsorted(widths, exact.bandwidth_)
    j = np.searchsorted(widths, binned.bandwidth_)
    assert abs(i - j) <= 1


# Test sets that partition the rows, in two features, and splits that do
# not, in one feature by default and in two with -m slow: the held-out sums
# of a split do not depend on the number of features, the cost of the
# two-feature gaussian grid does.
@pytest.mark.parametrize(
    "cv, d",
    [
        (5, 2),
        (ShuffleSplit(4, test_size=0.3, random_state=0), 1),
        pytest.param(
            ShuffleSplit(4, test_size=0.3, random_state=0), 2, marks=pytest.mark.slow
        ),
    ],
)
def test_kfold_scores_match_exact(cv, d):
    X, y, w = smooth_data(3000, d, seed=2)
    widths = np.geomspace(0.1, 0.4, 4)
    kw = {"kernels": ["gaussian", "triweight"], "bandwidths": widths, "cv": cv}
    exact = search("brute", **kw).fit(X, y, w)
    binned = search("binned", **kw).fit(X, y, w)
    assert sorted(binned.cv_results_) == sorted(exact.cv_results_)
    n = len(binned.cv_results_["params"])  # (then the local quadratics)
    for s in range(len(exact.cv_results_["params"]) and 4):
        key = f"split{s}_test_score"
        assert relative(binned.cv_results_[key], exact.cv_results_[key][:n]) < 1e-3


# One feature by default; two, on a grid of some 600,000 nodes binned once
# per key, with -m slow (the two-feature held-out scores are compared with
# the exact ones above).
@pytest.mark.parametrize("d", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_loo_is_the_binned_fit_without_the_key(d):
    """The held-out sums are the binned sums of the other keys, exactly:
    against binning every other row and interpolating, one key at a time."""
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, size=(200, d))
    Y = rng.normal(size=(200, 2))
    w = rng.uniform(0.5, 2.0, size=200)
    kernel = KERNELS["gaussian"]
    held = BinnedHeldOut(X, Y, w, [kernel], np.array([0.05, 0.2]), degree=1)
    pending = held.sums_excluding_groups(None)
    predicted, empty, *_ = held.predictions(pending, np.arange(200), degree=0)
    assert not empty.any()
    for m, h in enumerate(held.bandwidths):
        for i in (0, 17, 123):
            keep = np.arange(200) != i
            sums = linear_bin(held.grid, X[keep], held.columns[keep])
            engine = BinnedEngine(
                held.grid, sums, kernel, np.full(d, h), 0, held.center, 2
            )
            at, _ = engine.kernel_sums(X[i : i + 1])  # [y, 1]
            expected = at[0, :2] / at[0, -1] + held.center
            np.testing.assert_allclose(predicted[0, m, i], expected, rtol=1e-9)


def test_loo_degree_one_is_the_binned_fit_without_the_key():
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, size=(300, 1))
    Y = np.sin(3 * X) + 0.1 * rng.normal(size=(300, 1))
    w = np.ones(300)
    kernel = KERNELS["epanechnikov"]
    held = BinnedHeldOut(X, Y, w, [kernel], np.array([0.15]), degree=1)
    predicted = held.predictions(
        held.sums_excluding_groups(None), np.arange(300), degree=1
    )[0]
    for i in (0, 150, 299):
        keep = np.arange(300) != i
        sums = linear_bin(held.grid, X[keep], held.columns[keep])
        engine = BinnedEngine(held.grid, sums, kernel, [0.15], 1, held.center, 1)
        mean, _, bad = engine.predict(X[i : i + 1])
        assert not bad[0]
        np.testing.assert_allclose(predicted[0, 0, i], mean[0], rtol=1e-9)


@pytest.mark.parametrize("folds", [None, 5])
def test_held_out_safeguard_is_that_of_the_binned_fit_without_the_keys(folds):
    """The safeguard of a held-out local-linear fit reads Kish's n_eff of
    the keys it may hold: the binned sums of the squared weights held out as
    the other sums are (a key's own term subtracted under leave-one-out, the
    fold's grid under K-fold). Sparse keys of spread weights, whose held-out
    slopes are shrunk: against binning the other keys and predicting."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, size=(60, 1))
    Y = np.sin(3 * X) + 0.1 * rng.normal(size=(60, 1))
    w = rng.lognormal(0.0, 1.5, size=60)
    kernel = KERNELS["gaussian"]
    groups = None if folds is None else np.arange(60) % folds
    held = BinnedHeldOut(X, Y, w, [kernel], np.array([0.05]), degree=1)
    predicted, empty, singular, _, shrunk = held.predictions(
        held.sums_excluding_groups(groups), np.arange(60), groups, degree=1
    )
    assert not (empty.any() or singular.any())
    expected, factors = np.empty(60), np.empty(60)
    for i in range(60):
        keep = np.arange(60) != i if folds is None else groups != groups[i]
        sums = linear_bin(held.grid, X[keep], held.columns[keep])
        engine = BinnedEngine(held.grid, sums, kernel, [0.05], 1, held.center, 1)
        mean, _, bad, s = engine.predict(X[i : i + 1], return_shrinkage=True)
        assert not bad[0]
        expected[i], factors[i] = mean[0, 0], s[0]
    assert np.count_nonzero(factors < 1.0) >= 5
    np.testing.assert_array_equal(shrunk[0, 0], factors < 1.0)
    np.testing.assert_allclose(predicted[0, 0, :, 0], expected, rtol=1e-9)


def test_classifier_scores_match_exact():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, size=(1000, 2))
    y = (np.sin(5 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=1000) > 0.7).astype(int)
    widths = np.geomspace(0.05, 0.3, 5)
    exact = KernelAttentionClassifierCV(
        bandwidths=widths, n_neighbors=None, algorithm="brute"
    ).fit(X, y)
    binned = KernelAttentionClassifierCV(
        bandwidths=widths, n_neighbors=None, algorithm="binned"
    ).fit(X, y)
    assert sorted(binned.cv_results_) == sorted(exact.cv_results_)
    assert (
        relative(
            binned.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"]
        )
        < 1e-3
    )
    assert binned.best_estimator_.algorithm_ == "binned"


def test_auto_picks_binned_where_the_regressor_would():
    X, y, _ = smooth_data(100_000, 1, seed=6)
    widths = [0.05, 0.1, 0.2]
    fitted = search("auto", bandwidths=widths, degree=0).fit(X, y)
    assert fitted.best_estimator_.algorithm_ == "binned"
    small = search("auto", bandwidths=widths, degree=0).fit(X[:500], y[:500])
    assert small.best_estimator_.algorithm_ != "binned"


@pytest.mark.parametrize(
    "params, X_shape, match",
    [
        ({"n_neighbors": [5, 10]}, (200, 1), "n_neighbors"),
        ({"per_feature": True}, (200, 1), "per_feature"),
        ({"scoring": "gcv"}, (200, 1), "scoring='gcv'"),
        ({}, (200, 3), "3 features"),
        ({"categorical_features": [1]}, (200, 2), "categorical"),
    ],
)
def test_refusals(params, X_shape, match):
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, size=X_shape)
    if "categorical_features" in params:
        X[:, 1] = rng.integers(0, 3, size=X_shape[0])
    y = X[:, 0] + 0.1 * rng.normal(size=X_shape[0])
    options = {"bandwidths": [0.1, 0.3], "algorithm": "binned", **params}
    with pytest.raises(ValueError, match=match):
        KernelAttentionRegressorCV(**options).fit(X, y)


def test_n_neighbors_auto_scores_no_adaptive_candidate():
    X, y, _ = smooth_data(500, 1)
    fitted = KernelAttentionRegressorCV(bandwidths=[0.1, 0.3], algorithm="binned")
    fitted.fit(X, y)
    assert "param_n_neighbors" not in fitted.cv_results_
    assert fitted.n_neighbors_ is None


def test_empty_neighbourhoods_fall_back_as_exact():
    rng = np.random.default_rng(8)
    X = np.r_[rng.uniform(0, 1, size=(400, 1)), [[3.0]]]
    y = np.sin(4 * X[:, 0])
    kw = {"kernels": "epanechnikov", "bandwidths": [0.2, 0.4], "degree": 0}
    exact = search("brute", **kw).fit(X, y)
    binned = search("binned", **kw).fit(X, y)
    np.testing.assert_array_equal(
        binned.cv_results_["empty_fraction"], exact.cv_results_["empty_fraction"]
    )
    assert (
        relative(
            binned.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"]
        )
        < 1e-3
    )


def engel():
    statsmodels = pytest.importorskip("statsmodels.api")
    data = statsmodels.datasets.engel.load_pandas().data
    return data[["income"]].to_numpy(), data["foodexp"].to_numpy()


def sparse_tail(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.lognormal(0.0, 1.0, size=(n, 1))
    y = 2 * np.log1p(X[:, 0]) + np.sin(X[:, 0]) + 0.3 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize(
    "case, kernel, fraction",
    [
        ("engel", "gaussian", 50),
        ("engel", "epanechnikov", 50),
        ("engel", "laplacian", 50),
        ("sparse_tail", "gaussian", 200),
        ("sparse_tail", "epanechnikov", 200),
    ],
)
def test_local_linear_on_sparse_tails_matches_exact(case, kernel, fraction):
    """Keys isolated in a sparse tail: beyond the truncated gaussian of the
    other keys at narrow widths, or extrapolated from distant keys; their
    held-out fits are computed exactly, as the binned estimator does."""
    X, y = engel() if case == "engel" else sparse_tail()
    span = np.ptp(X)
    widths = np.geomspace(span / fraction, span / 4, 30 if case == "engel" else 20)
    kw = {"kernels": kernel, "bandwidths": widths, "degree": 1}
    exact = search("brute", **kw).fit(X, y)
    binned = search("binned", **kw).fit(X, y)
    want = exact.cv_results_["mean_test_score"]
    got = binned.cv_results_["mean_test_score"]
    finite = np.isfinite(want)
    assert finite.sum() >= len(widths) - 2
    assert relative(got[finite], want[finite]) < 1e-3
    i = np.searchsorted(widths, exact.bandwidth_)
    j = np.searchsorted(widths, binned.bandwidth_)
    assert abs(i - j) <= 1
    for key in ("empty_fraction", "singular_fraction"):
        np.testing.assert_array_equal(binned.cv_results_[key], exact.cv_results_[key])


def test_isolated_key_gets_its_exact_held_out_fit():
    """A key beyond the gaussian's truncation radius from every other key:
    its binned held-out weight is zero, the exact one is positive; it gets
    the exact leave-one-out prediction of both degrees."""
    rng = np.random.default_rng(9)
    X = np.r_[rng.uniform(0, 1, size=(300, 1)), [[2.0]]]
    Y = (np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=301))[:, None]
    w = np.ones(301)
    kernel = KERNELS["gaussian"]
    widths = np.array([0.1, 0.4])  # 10 and 2.5 widths away
    binned = BinnedHeldOut(X, Y, w, [kernel], widths, degree=1)
    exact = HeldOut(X, Y, w, [kernel], widths, degree=1)
    for degree in (0, 1):
        got = binned.predictions(
            binned.sums_excluding_groups(None), np.arange(301), degree=degree
        )
        want = exact.predictions(
            exact.sums_excluding_groups(None), np.arange(301), degree=degree
        )
        assert not got[1].any() and not want[1].any()
        np.testing.assert_allclose(got[0][0, :, 300], want[0][0, :, 300], rtol=1e-9)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-3, atol=1e-3)
