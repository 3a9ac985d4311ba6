"""The guard of ``per_feature="auto"`` against its definition, and the
learning of the widths it judges.

The guard selects the isotropic bandwidth and learns the widths on each
training part only, predicts the held-out part with both, and keeps the
learned widths by the one-standard-error rule on the paired differences of
the held-out points' losses (:mod:`sklearn_kernelpool._widths._guard`).
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import minimize
from scipy.stats import sem
from sklearn.datasets import make_friedman1

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._search._quadratic_stage import without_quadratic_candidates
from sklearn_kernelpool._utils._width_rules import _weighted_spread
from sklearn_kernelpool._widths._guard import default_splits, guard_widths, paired_gain
from sklearn_kernelpool._widths._learning import learn_widths, loo_loss
from sklearn_kernelpool.kernels import KERNELS

GAUSSIAN = KERNELS["gaussian"]


@pytest.fixture
def weighted():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] ** 2 + X[:, 1] + 0.3 * rng.normal(size=60)
    w = rng.uniform(0.5, 2.0, size=60)
    w[0] = 0.0
    return X, y, w


def reference_guard(X, y, w, grid, degree):
    """The guard by explicit fold loops over the public estimators and plain
    sums: in each split, the isotropic bandwidth selected on the training
    part by KernelAttentionRegressorCV, the widths learned there by
    KernelAttentionRegressorCV(per_feature=True), both refitted and scored on
    the test part; the learned widths kept where their gain exceeds one
    standard error of the paired differences."""
    n = len(y)
    iso, learned = np.full(n, np.nan), np.full(n, np.nan)
    for train, test in default_splits(n):
        options = {"bandwidths": grid, "degree": degree, "n_neighbors": None}
        fits = [
            KernelAttentionRegressorCV(per_feature=False, **options).fit(
                X[train], y[train], sample_weight=w[train]
            ),
            KernelAttentionRegressorCV(per_feature=True, **options).fit(
                X[train], y[train], sample_weight=w[train]
            ),
        ]
        assert fits[1].per_feature_  # the learned widths, not the isotropic
        for fit, out in zip(fits, (iso, learned), strict=True):
            reg = KernelAttentionRegressor(bandwidth=fit.bandwidth_, degree=degree)
            reg.fit(X[train], y[train], sample_weight=w[train])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LocalLinearFallbackWarning)
                out[test] = reg.predict(X[test])
    total = sum(w)
    losses = [sum(w[i] * (p[i] - y[i]) ** 2 for i in range(n)) / total
              for p in (iso, learned)]  # fmt: skip
    d = [(iso[i] - y[i]) ** 2 - (learned[i] - y[i]) ** 2 for i in range(n)]
    gain = sum(w[i] * d[i] for i in range(n)) / total
    m = sum(1 for i in range(n) if w[i] > 0)
    variance = sum(w[i] ** 2 * (d[i] - gain) ** 2 for i in range(n)) * m / (m - 1)
    standard_error = np.sqrt(variance) / total
    return iso, learned, losses, standard_error, gain > standard_error


@pytest.mark.parametrize("degree", [0, 1])
def test_guard_equals_its_definition(weighted, degree):
    X, y, w = weighted
    grid = np.array([0.3, 0.6, 1.2, 2.4])
    iso, learned, losses, standard_error, keep = reference_guard(X, y, w, grid, degree)
    result = guard_widths(X, y[:, None], w, GAUSSIAN, grid, degree=degree)
    assert_allclose(result.isotropic_predictions[:, 0], iso, rtol=1e-12)
    assert_allclose(result.per_feature_predictions[:, 0], learned, rtol=1e-8)
    assert_allclose(result.isotropic_loss, losses[0], rtol=1e-10)
    assert_allclose(result.per_feature_loss, losses[1], rtol=1e-8)
    assert_allclose(result.standard_error, standard_error, rtol=1e-8)
    assert result.keep == keep
    # The estimator keeps the widths on the guard's verdict and reports its
    # out-of-fold errors.
    cv = KernelAttentionRegressorCV(
        bandwidths=grid, degree=degree, n_neighbors=None, per_feature="auto"
    ).fit(X, y, sample_weight=w)
    assert cv.per_feature_ == keep
    assert_allclose(cv.per_feature_scores_["isotropic"], losses[0], rtol=1e-10)
    assert_allclose(cv.per_feature_scores_["per_feature"], losses[1], rtol=1e-8)


def test_paired_standard_error_is_that_of_the_mean_difference():
    rng = np.random.default_rng(0)
    d = rng.standard_t(3, size=40)
    gain, standard_error = paired_gain(d, np.ones(40))
    assert_allclose(gain, d.mean(), rtol=1e-12)
    assert_allclose(standard_error, sem(d), rtol=1e-12)
    # Doubling a weight counts its difference as twice as heavy in the mean.
    w = np.ones(40)
    w[0] = 2.0
    assert_allclose(paired_gain(d, w)[0], (d.sum() + d[0]) / 41, rtol=1e-12)
    assert paired_gain(d[:1], np.ones(1))[1] == np.inf
    assert paired_gain(d[:3], np.array([1.0, 0.0, 0.0]))[1] == np.inf


def test_guard_keeps_isotropic_where_learned_widths_win_by_noise():
    # 80 noisy rows, one relevant feature of four: the learned widths beat
    # the isotropic width out of fold by less than one standard error, and
    # on fresh data they are far worse: they fitted the noise.
    rng = np.random.default_rng(9)
    X = rng.normal(size=(80, 4))
    y = X[:, 0] + 2.0 * rng.normal(size=80)
    X_new = rng.normal(size=(4000, 4))
    y_new = X_new[:, 0] + 2.0 * rng.normal(size=4000)
    options = {"bandwidths": 8, "degree": 0, "n_neighbors": None}
    auto = KernelAttentionRegressorCV(per_feature="auto", **options).fit(X, y)
    forced = KernelAttentionRegressorCV(per_feature=True, **options).fit(X, y)
    scores = auto.per_feature_scores_
    assert scores["per_feature"] < scores["isotropic"]  # a win, by noise
    assert not auto.per_feature_
    assert np.ndim(auto.bandwidth_) == 0
    grid = np.unique(auto.cv_results_["param_bandwidth"])
    result = guard_widths(X, y[:, None], np.ones(80), GAUSSIAN, grid)
    gain = result.isotropic_loss - result.per_feature_loss
    assert 0 < gain < result.standard_error
    assert forced.per_feature_
    auto_mse = np.mean((auto.predict(X_new) - y_new) ** 2)
    forced_mse = np.mean((forced.predict(X_new) - y_new) ** 2)
    assert auto_mse < forced_mse - 1.0


@pytest.mark.parametrize("degree", [0, 1])
def test_guard_keeps_learned_widths_of_an_irrelevant_feature(degree):
    # y depends on x0 only: the learned widths switch x1 off and win by many
    # standard errors.
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(300, 2))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=300)
    cv = KernelAttentionRegressorCV(
        bandwidths=8, degree=degree, n_neighbors=None, per_feature="auto"
    ).fit(X, y)
    assert cv.per_feature_
    assert cv.bandwidth_[1] > 10 * cv.bandwidth_[0]
    grid = np.unique(cv.cv_results_["param_bandwidth"])
    result = guard_widths(X, y[:, None], np.ones(300), GAUSSIAN, grid, degree=degree)
    assert result.keep
    gain = result.isotropic_loss - result.per_feature_loss
    assert gain > 2 * result.standard_error  # clearly, not at the margin


def test_guard_threads_over_the_splits(weighted):
    X, y, w = weighted
    grid = np.array([0.3, 0.6, 1.2, 2.4])
    one = guard_widths(X, y[:, None], w, GAUSSIAN, grid, degree=1)
    two = guard_widths(X, y[:, None], w, GAUSSIAN, grid, degree=1, n_jobs=2)
    assert_array_equal(one.isotropic_predictions, two.isotropic_predictions)
    assert_array_equal(one.per_feature_predictions, two.per_feature_predictions)
    assert one.standard_error == two.standard_error and one.keep == two.keep


# -- the learning the guard repeats ------------------------------------------
def full_multistart(X, Y, w, bandwidth, degree, n_starts=3):
    """The starts of learn_widths (the first ``n_starts``) run alone to tight
    convergence; the lowest loss."""
    spread = _weighted_spread(X[w > 0], w[w > 0])
    bounds = list(zip(np.log(spread / 1e3), np.log(spread * 1e3), strict=True))
    relative = spread / np.exp(np.mean(np.log(spread)))
    d = X.shape[1]
    starts = [np.full(d, np.log(bandwidth)), np.log(bandwidth * relative),
              np.full(d, np.log(2 * bandwidth))]  # fmt: skip
    best = None
    for start in starts[:n_starts]:
        result = minimize(
            lambda t: loo_loss(t, X, Y, w, GAUSSIAN, degree=degree)[:2],
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 1000, "ftol": 1e-13, "gtol": 1e-9},
        )
        if best is None or result.fun < best.fun:
            best = result
    return best.fun


@pytest.mark.parametrize("degree", [0, 1])
def test_raced_starts_lose_nothing_against_running_each_to_convergence(
    weighted, degree
):
    # The race and the tolerances stop early only where the loss is flat:
    # the learned loss is that of every start run to tight convergence.
    X, y, w = weighted
    X = X * np.array([1.0, 3.0, 0.5])  # starts that differ
    Y = y[:, None]
    widths, n_iter, loss, _ = learn_widths(X, Y, w, GAUSSIAN, 0.8, degree=degree)
    assert n_iter < 200
    assert loss <= full_multistart(X, Y, w, 0.8, degree) * (1 + 1e-6)


def test_switched_off_widths_go_to_their_bound():
    # Friedman's first function of seven features, degree 1: x3 and x4 enter
    # linearly (the local slope takes them) and x5, x6 not at all. The widths
    # of x4, x5 and x6 end at 1e3 times their spread, the bound that the flat
    # loss leads to, that of x3 at a finite optimum of a few spreads (about
    # 0.88, 2.9 spreads: the safeguarded local fits of narrow widths in x0-x2
    # keep it there), at no higher loss than the isotropic start run to tight
    # convergence.
    X, y = make_friedman1(n_samples=200, n_features=7, noise=0.5, random_state=0)
    w = np.ones(200)
    widths, _, loss, _ = learn_widths(X, y[:, None], w, GAUSSIAN, 0.3, degree=1)
    spread = _weighted_spread(X, w)
    assert_allclose(widths[4:], 1e3 * spread[4:], rtol=1e-12)
    assert 2.0 * spread[3] < widths[3] < 30.0 * spread[3]
    assert np.all(widths[:3] < spread[:3])
    assert loss <= full_multistart(X, y[:, None], w, 0.3, 1, n_starts=1) * (1 + 1e-6)


# -- the default search --------------------------------------------------------


def ethanol_like(n=88, seed=0):
    """A response linear in a feature of five levels and sharp in the other,
    as NOx is in the compression ratio and the equivalence ratio of R's
    ``lattice::ethanol`` (88 runs of an engine)."""
    rng = np.random.default_rng(seed)
    levels = rng.choice([-1.4, -0.8, -0.1, 0.6, 1.4], size=n)
    sharp = rng.uniform(-1.7, 1.7, size=n)
    y = 0.4 * levels + 2.5 * np.exp(-2.0 * (sharp - 0.3) ** 2)
    return np.column_stack([levels, sharp]), y + 0.15 * rng.normal(size=n)


def test_default_search_keeps_the_widths_that_win_out_of_fold():
    # The defaults learn one width per feature behind the guard: its verdict
    # and out-of-fold errors are those of the explicit fold loops, and the
    # kept widths predict fresh data better than the isotropic width.
    X, y = ethanol_like()
    search = KernelAttentionRegressorCV()
    assert search.get_params()["per_feature"] == "auto"
    search.fit(X, y)
    assert search.kernel_ == "gaussian" and search.n_neighbors_ is None
    fixed = (search.cv_results_["param_kernel"] == "gaussian") & np.ma.getmaskarray(
        search.cv_results_.get("param_n_neighbors", np.ma.masked_all(0))
    )
    grid = np.unique(search.cv_results_["param_bandwidth"][fixed].astype(float))
    w = np.ones(len(y))
    _, _, losses, _, keep = reference_guard(X, y, w, grid, search.degree_)
    assert keep and search.per_feature_
    assert_allclose(search.per_feature_scores_["isotropic"], losses[0], rtol=1e-10)
    assert_allclose(search.per_feature_scores_["per_feature"], losses[1], rtol=1e-8)
    assert search.bandwidth_.shape == (2,)
    assert_array_equal(search.best_estimator_.bandwidth, search.bandwidth_)
    # (the isotropic search of degrees 0 and 1, from which the widths are
    # learned: without the local quadratics that "auto" adds after them)
    with without_quadratic_candidates():
        isotropic = KernelAttentionRegressorCV(per_feature=False).fit(X, y)
        search = KernelAttentionRegressorCV().fit(X, y)
    X_new, y_new = ethanol_like(2000, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        errors = [np.mean((m.predict(X_new) - y_new) ** 2) for m in (search, isotropic)]
    assert errors[0] < 0.6 * errors[1]


def test_default_search_learns_widths_up_to_the_guard_size(monkeypatch):
    # 60 rows of positive weight and 2 features: 60 * (2 + 1) = 180.
    from sklearn_kernelpool._widths import _guard

    X, y = ethanol_like(70)
    w = np.ones(70)
    w[:10] = 0.0
    isotropic = KernelAttentionRegressorCV(per_feature=False).fit(X, y, w)
    monkeypatch.setattr(_guard, "GUARD_MAX_SIZE", 180)
    at_the_size = KernelAttentionRegressorCV().fit(X, y, w)
    assert at_the_size.per_feature_scores_ is not None
    monkeypatch.setattr(_guard, "GUARD_MAX_SIZE", 179)
    beyond = KernelAttentionRegressorCV().fit(X, y, w)
    assert beyond.per_feature_scores_ is None and not beyond.per_feature_
    assert beyond.bandwidth_ == isotropic.bandwidth_
    assert_array_equal(beyond.predict(X), isotropic.predict(X))


@pytest.mark.parametrize(
    "params",
    [
        {"kernels": ("epanechnikov",)},  # no log form
        {"linear_features": [0]},  # a partially linear search
    ],
    ids=["compact", "linear"],
)
def test_auto_learns_no_widths_where_they_do_not_apply(params):
    # Where the widths cannot be learned, "auto" (the default) keeps the
    # isotropic selection of per_feature=False; True still refuses.
    X, y = ethanol_like()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        search = KernelAttentionRegressorCV(per_feature="auto", **params).fit(X, y)
        isotropic = KernelAttentionRegressorCV(per_feature=False, **params).fit(X, y)
    assert not search.per_feature_ and search.per_feature_scores_ is None
    assert search.bandwidth_ == isotropic.bandwidth_
    assert search.best_score_ == isotropic.best_score_
    with pytest.raises(ValueError, match="per_feature=True"):
        KernelAttentionRegressorCV(per_feature=True, **params).fit(X, y)


def test_auto_learns_no_widths_of_one_feature():
    # One feature's width is the isotropic width, which the grid selects.
    X, y = ethanol_like()
    search = KernelAttentionRegressorCV(per_feature="auto").fit(X[:, 1:], y)
    assert search.per_feature_scores_ is None and not search.per_feature_
    assert np.ndim(search.bandwidth_) == 0


def test_guard_of_values_near_the_overflow():
    # Squared errors of values of 1e150 are near the largest float; the
    # paired standard error squares their differences.
    d = np.array([1.0, -2.0, 0.5, 3.0]) * 1e300
    gain, standard_error = paired_gain(d, np.ones(4))
    assert_allclose(gain, d.mean(), rtol=1e-12)
    assert_allclose(standard_error, sem(d / 1e300) * 1e300, rtol=1e-12)
