"""Per-feature widths learned on GCV and AICc (``scoring="gcv"``/``"aicc"``
with ``per_feature``)."""

import warnings

import numpy as np
import pytest
from _reference import kish, slope_factor
from numpy.testing import assert_allclose

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._widths._criteria import criterion_loss
from sklearn_kernelpool._widths._guard import (
    _select_isotropic,
    default_splits,
    guard_widths,
)
from sklearn_kernelpool._widths._learning import learn_widths
from sklearn_kernelpool.kernels import KERNELS

LOG_FORM = ["gaussian", "cauchy", "exponential"]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    X[7] = X[6]  # a duplicated key
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=40)
    w = rng.uniform(0.5, 2.0, size=40)
    w[:2] = [0.0, 3.0]
    return X, y, w


def slow_criteria(X, Y, w, kernel, widths, degree):
    """GCV and AICc from the dense smoother matrix, one weighted least-squares
    problem per training point (the definitions, not the library's pass).

    The local-linear rows are those of the safeguard of
    :mod:`sklearn_kernelpool._engine._safeguard`: the slope shrunk by ``s`` of
    the leverage ``(1 + D**2) sum_j p_j**2``, so the row is ``(1 - s) p + s``
    times the plain one (both sum to one)."""
    alpha = KERNELS[kernel]
    Z = X / widths
    keep = np.flatnonzero(w > 0)
    n = len(keep)
    fits = np.empty((n, Y.shape[1]))
    trace = 0.0
    for r, i in enumerate(keep):
        a = w * alpha(np.linalg.norm(Z - Z[i], axis=1))
        U = np.ones((len(X), 1)) if degree == 0 else np.c_[np.ones(len(X)), X - X[i]]
        row = np.linalg.pinv(U.T @ (a[:, None] * U))[0] @ (U * a[:, None]).T
        if degree == 1:
            p = a / a.sum()
            m = p @ X
            C = (X - m).T @ (p[:, None] * (X - m))
            D2 = (X[i] - m) @ np.linalg.pinv(C) @ (X[i] - m)
            s = slope_factor(D2, kish(p))
            row = (1 - s) * p + s * row
        fits[r] = row @ Y
        trace += row[i]
    v = w[keep] / w[keep].sum()
    sigma2 = np.mean(v @ (Y[keep] - fits) ** 2)
    gcv = sigma2 / (1 - trace / n) ** 2
    aicc = np.log(sigma2) + (1 + trace / n) / (1 - (trace + 2) / n)
    return {"gcv": gcv, "aicc": aicc}


@pytest.mark.parametrize("criterion", ["gcv", "aicc"])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("kernel", LOG_FORM)
def test_criterion_and_gradient(data, kernel, degree, criterion):
    # Sample weights (one zero), two outputs, a duplicated key: the value
    # equals the definition and the fitted estimator's diagnostics, the
    # gradient central differences.
    X, y, w = data
    Y = np.c_[y, np.cos(X[:, 2])]
    widths = np.array([0.7, 1.3, 2.0])
    theta = np.log(widths)
    loss, grad, fits = criterion_loss(
        theta, X, Y, w, KERNELS[kernel], degree=degree, criterion=criterion
    )
    expected = slow_criteria(X, Y, w, kernel, widths, degree)[criterion]
    # The exponential kernel's square root turns rounding into ~1e-8.
    rtol = 1e-6 if kernel == "exponential" else 1e-10
    assert_allclose(loss, expected, rtol=rtol)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=widths, degree=degree)
    summary = reg.fit(X, Y, sample_weight=w).smoother_diagnostics()
    assert_allclose(loss, summary[criterion], rtol=rtol)
    assert_allclose(fits[w > 0], summary.fitted[w > 0], rtol=rtol, atol=1e-12)
    step = 1e-6
    numeric = np.empty(3)
    for f in range(3):
        up, down = theta.copy(), theta.copy()
        up[f] += step
        down[f] -= step
        numeric[f] = (
            criterion_loss(
                up, X, Y, w, KERNELS[kernel], False, degree=degree, criterion=criterion
            )[0]
            - criterion_loss(
                down,
                X,
                Y,
                w,
                KERNELS[kernel],
                False,
                degree=degree,
                criterion=criterion,
            )[0]
        ) / (2 * step)
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def test_unknown_criterion(data):
    X, y, w = data
    with pytest.raises(ValueError, match="'gcv'"):
        criterion_loss(
            np.zeros(3), X, y[:, None], w, KERNELS["gaussian"], criterion="aic"
        )


def test_interpolating_widths_have_an_infinite_criterion():
    # Widths so narrow that every point pools only itself: tr = n.
    X = np.arange(10.0)[:, None]
    y = np.sin(X[:, 0])
    loss, grad, _ = criterion_loss(
        np.log([1e-3]), X, y[:, None], np.ones(10), KERNELS["gaussian"]
    )
    assert loss == np.inf
    assert_allclose(grad, 0.0)


@pytest.mark.parametrize("criterion", ["gcv", "aicc"])
def test_learned_widths_are_a_local_minimum(data, criterion):
    X, y, w = data
    kernel = KERNELS["gaussian"]
    widths, _, loss, fits = learn_widths(
        X, y[:, None], w, kernel, 1.0, objective=criterion
    )
    theta = np.log(widths)
    assert_allclose(
        loss,
        criterion_loss(theta, X, y[:, None], w, kernel, False, criterion=criterion)[0],
    )
    assert (
        loss
        < criterion_loss(
            np.zeros(3), X, y[:, None], w, kernel, False, criterion=criterion
        )[0]
    )
    rng = np.random.default_rng(1)
    for _ in range(10):
        moved = theta + 0.05 * rng.normal(size=3)
        other = criterion_loss(
            moved, X, y[:, None], w, kernel, False, criterion=criterion
        )
        assert other[0] >= loss - 1e-10


@pytest.fixture
def irrelevant():
    # The third feature is noise: the criterion widens it.
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(80, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.2 * rng.normal(size=80)
    return X, y


@pytest.mark.parametrize("scoring", ["gcv", "aicc"])
@pytest.mark.parametrize("degree", [0, 1])
def test_cv_learns_widths_on_the_criterion(irrelevant, scoring, degree):
    X, y = irrelevant
    cv = KernelAttentionRegressorCV(
        bandwidths=8, scoring=scoring, per_feature=True, degree=degree, n_neighbors=None
    ).fit(X, y)
    assert cv.per_feature_
    assert cv.bandwidth_[2] > 5 * cv.bandwidth_[0]
    # The score is the negated criterion of the learned widths, as the
    # fitted estimator's diagnostics compute it, and beats the isotropic
    # candidates' scores in cv_results_.
    summary = cv.best_estimator_.smoother_diagnostics()
    assert_allclose(cv.best_score_, -summary[scoring], rtol=1e-10)
    assert_allclose(cv.effective_df_, summary.effective_df, rtol=1e-10)
    assert cv.best_score_ > np.max(cv.cv_results_["mean_test_score"])
    assert_allclose(cv.best_estimator_.bandwidth, cv.bandwidth_)


def test_cv_keeps_the_isotropic_width_unless_the_criterion_falls():
    # One feature: the grid has found the minimum of the criterion, and the
    # refinement is kept only where it is lower still.
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(60, 1))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=60)
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.02, 0.05, 0.1, 0.2, 0.4],
        scoring="aicc",
        per_feature=True,
        degree=0,
        n_neighbors=None,
    ).fit(X, y)
    best = np.max(cv.cv_results_["mean_test_score"])
    assert cv.best_score_ >= best
    assert cv.per_feature_ == (cv.best_score_ > best)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own
def test_widths_match_statsmodels_kernelreg_aic():
    # statsmodels' KernelReg(reg_type="lc", bw="aic") minimises the same AICc
    # over per-variable widths (Nelder-Mead): its criterion at our widths is
    # ours, and ours is as low but for the bound of the irrelevant feature's
    # width (1e3 times its spread, where it takes ~1e7).
    kernel_regression = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression"
    )
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, size=(40, 2))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=40)
    cv = KernelAttentionRegressorCV(
        kernels="gaussian",
        scoring="aicc",
        per_feature=True,
        degree=0,
        n_neighbors=None,
    ).fit(X, y)
    reg = kernel_regression.KernelReg(y, X, var_type="cc", reg_type="lc", bw="aic")
    theirs = float(reg.aic_hurvich(reg.bw)[0])
    at_ours = float(reg.aic_hurvich(cv.bandwidth_)[0])
    assert_allclose(-cv.best_score_, at_ours, rtol=1e-10)
    assert -cv.best_score_ <= theirs + 1e-5
    assert_allclose(cv.bandwidth_[0], reg.bw[0], rtol=1e-3)
    assert cv.bandwidth_[1] > 100 * cv.bandwidth_[0]


@pytest.mark.parametrize("criterion", ["gcv", "aicc"])
def test_guard_selects_and_learns_on_the_criterion(data, criterion):
    # Each training part: the isotropic bandwidth of least criterion (as
    # KernelAttentionRegressorCV(scoring=criterion) selects it), widths
    # learned on the criterion from it; both judged by the squared error of
    # their predictions of the test part.
    X, y, w = data
    Y = y[:, None]
    grid = np.array([0.3, 0.6, 1.2, 2.4])
    kernel = KERNELS["gaussian"]
    result = guard_widths(X, Y, w, kernel, grid, objective=criterion)
    iso, learned = np.empty_like(Y), np.empty_like(Y)
    for train, test in default_splits(len(X)):
        cv = KernelAttentionRegressorCV(
            bandwidths=grid,
            degree=0,
            n_neighbors=None,
            scoring=criterion,
            per_feature=False,
        ).fit(X[train], y[train], sample_weight=w[train])
        h = _select_isotropic(X[train], Y[train], w[train], kernel, grid, 0, criterion)
        assert h == cv.bandwidth_
        widths = learn_widths(
            X[train], Y[train], w[train], kernel, h, objective=criterion
        )[0]
        for out, bandwidth in ((iso, h), (learned, widths)):
            reg = KernelAttentionRegressor(bandwidth=bandwidth)
            reg.fit(X[train], y[train], sample_weight=w[train])
            out[test] = reg.predict(X[test])[:, None]
    assert_allclose(result.isotropic_predictions, iso, rtol=1e-12)
    assert_allclose(result.per_feature_predictions, learned, rtol=1e-8)
    for loss, pred in (
        (result.isotropic_loss, iso),
        (result.per_feature_loss, learned),
    ):
        assert_allclose(loss, np.average((pred - Y)[:, 0] ** 2, weights=w))


def test_cv_auto_with_a_criterion_runs_the_guard(irrelevant):
    X, y = irrelevant
    cv = KernelAttentionRegressorCV(
        bandwidths=8, scoring="aicc", per_feature="auto", degree=0, n_neighbors=None
    ).fit(X, y)
    scores = cv.per_feature_scores_
    assert scores is not None
    assert scores["per_feature"] < scores["isotropic"]
    assert cv.per_feature_
    assert_allclose(
        cv.best_score_, -cv.best_estimator_.smoother_diagnostics().aicc, rtol=1e-10
    )


def test_criteria_with_per_feature_refuse_categorical_features():
    rng = np.random.default_rng(0)
    X = np.c_[rng.normal(size=30), rng.integers(0, 3, size=30)]
    y = X[:, 0] + X[:, 1]
    cv = KernelAttentionRegressorCV(
        scoring="aicc", per_feature=True, categorical_features=[1], n_neighbors=None
    )
    with pytest.raises(ValueError, match="lambdas on the leave-one-out error"):
        cv.fit(X, y)


def test_gcv_is_infinite_with_less_than_one_residual_degree_of_freedom():
    # n - tr below one: the residuals and n - tr both vanish, and their
    # ratio is rounding error that an optimiser would chase.
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(80, 3))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.normal(size=80)
    kernel = KERNELS["gaussian"]
    for widths, finite in (([1e-3, 1e-3, 1e-3], False), ([0.3, 1e3, 1e3], True)):
        loss, grad, _ = criterion_loss(
            np.log(widths),
            X,
            y[:, None],
            np.ones(80),
            kernel,
            degree=1,
            criterion="gcv",
        )
        assert np.isfinite(loss) == finite
        assert np.all(np.isfinite(grad))
    cv = KernelAttentionRegressorCV(
        kernels=["gaussian", "cauchy"],
        degree="auto",
        n_neighbors=None,
        scoring="gcv",
        per_feature=True,
    ).fit(X, y)
    assert cv.per_feature_
    assert cv.effective_df_ <= 79
    assert cv.bandwidth_[1] > 100 * cv.bandwidth_[0]
    X_new = rng.uniform(-2, 2, size=(2000, 3))
    with warnings.catch_warnings():
        # (at the narrow width of the first feature, about 6% of the queries
        # get slopes shrunk towards the local mean, some by more than half)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        predictions = cv.predict(X_new)
    assert np.mean((predictions - np.sin(2 * X_new[:, 0])) ** 2) < 0.01
