"""Per-feature widths of degree 1, the guard, degree='auto' and the grid's edges."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss
from sklearn.model_selection import KFold, ParameterGrid

from sklearn_kernelpool import (
    BandwidthEdgeWarning,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._search._grid import bandwidth_grid
from sklearn_kernelpool._widths._guard import default_splits, guard_widths
from sklearn_kernelpool._widths._learning import learn_widths, loo_loss
from sklearn_kernelpool.kernels import KERNELS

LOG_FORM = ["gaussian", "cauchy", "exponential"]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    X[7] = X[6]  # a duplicated key
    y = X[:, 0] ** 2 + X[:, 1] + 0.1 * rng.normal(size=50)
    w = rng.uniform(0.5, 2.0, size=50)
    w[:2] = [0.0, 3.0]
    return X, y, w


def refit_loo(X, Y, w, kernel, bandwidth, degree):
    """Leave-one-out predictions by refitting without each point."""
    predictions = np.empty_like(Y)
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        reg = KernelAttentionRegressor(
            kernel=kernel, bandwidth=bandwidth, degree=degree
        )
        reg.fit(X[keep], Y[keep], sample_weight=w[keep])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            predictions[i] = reg.predict(X[i : i + 1]).reshape(-1)
    return predictions


def numeric_gradient(theta, *args, **kwargs):
    step = 1e-6
    grad = np.empty_like(theta)
    for f in range(len(theta)):
        up, down = theta.copy(), theta.copy()
        up[f] += step
        down[f] -= step
        grad[f] = (
            loo_loss(up, *args, gradient=False, **kwargs)[0]
            - loo_loss(down, *args, gradient=False, **kwargs)[0]
        ) / (2 * step)
    return grad


# -- the local-linear leave-one-out loss --------------------------------------
@pytest.mark.parametrize("kernel", LOG_FORM)
def test_local_linear_loo_loss_equals_refitting(data, kernel):
    X, y, w = data
    Y = np.column_stack([y, np.cos(X[:, 2])])
    widths = np.array([0.7, 1.3, 2.5])
    loss, grad, pred = loo_loss(np.log(widths), X, Y, w, KERNELS[kernel], degree=1)
    slow = refit_loo(X, Y, w, kernel, widths, degree=1)
    assert_allclose(pred, slow, rtol=1e-9, atol=1e-10)
    expected = np.average(np.mean((slow - Y) ** 2, axis=1), weights=w)
    assert_allclose(loss, expected, rtol=1e-10)
    numeric = numeric_gradient(np.log(widths), X, Y, w, KERNELS[kernel], degree=1)
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def test_local_linear_loo_loss_in_small_chunks(data):
    # Rows in chunks of one under a tiny working_memory: the same numbers.
    from sklearn import config_context

    X, y, w = data
    theta = np.log([0.8, 1.1, 1.6])
    whole = loo_loss(theta, X, y[:, None], w, KERNELS["gaussian"], degree=1)
    with config_context(working_memory=1e-6):
        chunked = loo_loss(theta, X, y[:, None], w, KERNELS["gaussian"], degree=1)
    assert_allclose(chunked[0], whole[0], rtol=1e-12)
    assert_allclose(chunked[1], whole[1], rtol=1e-10)


def test_local_linear_rank_deficient_rows_get_the_minimum_norm_fit():
    # Points on a line in the plane: every local design has rank 1, and the
    # held-out fits are the minimum-norm ones of the fitted estimator: the
    # local-linear fit along the line, not the local mean.
    t = np.linspace(0, 1, 12)
    X = np.column_stack([t, 2 * t])
    y = np.sin(3 * t)
    w = np.ones(12)
    theta = np.log([0.3, 0.6])
    loss1, grad1, pred1 = loo_loss(
        theta, X, y[:, None], w, KERNELS["gaussian"], degree=1
    )
    loss0, _, pred0 = loo_loss(theta, X, y[:, None], w, KERNELS["gaussian"])
    assert not np.allclose(pred1, pred0)
    assert_allclose(pred1, refit_loo(X, y[:, None], w, "gaussian", [0.3, 0.6], 1))
    step = 1e-6
    for f in range(2):
        up, down = theta.copy(), theta.copy()
        up[f] += step
        down[f] -= step
        numeric = (
            loo_loss(up, X, y[:, None], w, KERNELS["gaussian"], False, degree=1)[0]
            - loo_loss(down, X, y[:, None], w, KERNELS["gaussian"], False, degree=1)[0]
        ) / (2 * step)
        assert_allclose(grad1[f], numeric, rtol=1e-5, atol=1e-9)


# -- the log-loss -------------------------------------------------------------
@pytest.mark.parametrize("kernel", LOG_FORM)
def test_log_loss_and_gradient(data, kernel):
    X, _, w = data
    labels = np.random.default_rng(3).integers(0, 3, size=len(X))
    Y = np.eye(3)[labels]
    widths = np.array([0.6, 1.0, 1.8])
    loss, grad, pred = loo_loss(
        np.log(widths), X, Y, w, KERNELS[kernel], objective="log_loss"
    )
    slow = refit_loo(X, Y, w, kernel, widths, degree=0)
    assert_allclose(pred, slow, rtol=1e-10)
    positive = w > 0
    expected = log_loss(labels[positive], slow[positive], sample_weight=w[positive])
    assert_allclose(loss, expected, rtol=1e-10)
    numeric = numeric_gradient(
        np.log(widths), X, Y, w, KERNELS[kernel], objective="log_loss"
    )
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def test_log_loss_is_clipped_like_scikit_learn():
    # Two far groups of one class each: held-out probabilities of 0 and 1,
    # clipped to [eps, 1 - eps]; the gradient is zero where they are clipped.
    X = np.array([[0.0], [0.1], [0.2], [50.0], [50.1], [50.2]])
    labels = np.array([0, 1, 0, 1, 1, 1])
    Y = np.eye(2)[labels]
    loss, grad, pred = loo_loss(
        np.log([0.05]), X, Y, np.ones(6), KERNELS["gaussian"], objective="log_loss"
    )
    assert_allclose(loss, log_loss(labels, pred), rtol=1e-12)
    assert np.isfinite(grad).all()


def test_unknown_objective(data):
    X, y, w = data
    with pytest.raises(ValueError, match="objective must be one of"):
        loo_loss(np.zeros(3), X, y[:, None], w, KERNELS["gaussian"], objective="l1")
    with pytest.raises(ValueError, match="needs degree=0"):
        loo_loss(np.zeros(3), X, y[:, None], w, KERNELS["gaussian"], degree=1,
                 objective="log_loss")  # fmt: skip


def test_learned_log_loss_widths_lower_the_log_loss(data):
    X, _, w = data
    labels = (X[:, 0] > 0).astype(int)  # the first feature decides
    Y = np.eye(2)[labels]
    widths, _, loss, _ = learn_widths(
        X, Y, w, KERNELS["gaussian"], 1.0, objective="log_loss"
    )
    isotropic = loo_loss(
        np.zeros(3), X, Y, w, KERNELS["gaussian"], False, objective="log_loss"
    )[0]
    assert loss < isotropic
    assert widths[0] < min(widths[1:])


# -- max_iter -----------------------------------------------------------------
def test_convergence_warning_at_max_iter(data):
    X, y, w = data
    reg = KernelAttentionRegressorCV(bandwidths=5, per_feature=True, max_iter=1)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        reg.fit(X, y)
    assert reg.n_iter_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reg.set_params(max_iter=200).fit(X, y)
    assert reg.n_iter_ < 200


@pytest.mark.parametrize(
    "params", [{"per_feature": "yes"}, {"max_iter": 0}, {"degree": "two"}]
)
def test_invalid_new_parameters(data, params):
    from sklearn.utils._param_validation import InvalidParameterError

    X, y, _ = data
    with pytest.raises(InvalidParameterError):
        KernelAttentionRegressorCV(**params).fit(X, y)


# -- per-feature widths of degree 1 in the estimator --------------------------
def test_per_feature_widths_for_local_linear():
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(200, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=200)
    reg = KernelAttentionRegressorCV(bandwidths=8, per_feature=True, degree=1)
    reg.fit(X, y)
    assert reg.per_feature_
    # The linear and the irrelevant features get wide widths (a linear
    # feature needs no locality under a local-linear fit).
    assert reg.bandwidth_[0] < min(reg.bandwidth_[1:])
    assert reg.best_estimator_.degree == 1
    assert_array_equal(reg.best_estimator_.bandwidth, reg.bandwidth_)
    loss = loo_loss(np.log(reg.bandwidth_), X, y[:, None], np.ones(200),
                    KERNELS["gaussian"], False, degree=1)[0]  # fmt: skip
    assert_allclose(-reg.best_score_, loss, rtol=1e-10)
    assert -reg.best_score_ < reg.cv_results_["loo_mse"].min()


# -- the guard ----------------------------------------------------------------
def test_guard_equals_its_definition(data):
    # Each split: the isotropic bandwidth selected by exact leave-one-out on
    # the training part (as KernelAttentionRegressorCV selects it), widths
    # learned from it there, both refitted and scored on the test part.
    X, y, w = data
    Y = y[:, None]
    grid = np.array([0.3, 0.6, 1.2, 2.4])
    result = guard_widths(X, Y, w, KERNELS["gaussian"], grid)
    iso = np.empty_like(Y)
    learned = np.empty_like(Y)
    for train, test in default_splits(len(X)):
        cv = KernelAttentionRegressorCV(
            bandwidths=grid, degree=0, n_neighbors=None, per_feature=False
        ).fit(X[train], y[train], sample_weight=w[train])
        h = cv.bandwidth_
        widths = learn_widths(X[train], Y[train], w[train], KERNELS["gaussian"], h)[0]
        for out, bandwidth in ((iso, h), (learned, widths)):
            reg = KernelAttentionRegressor(bandwidth=bandwidth)
            out[test] = reg.fit(X[train], y[train], sample_weight=w[train]).predict(
                X[test]
            )[:, None]
    assert_allclose(result.isotropic_predictions, iso, rtol=1e-12)
    assert_allclose(result.per_feature_predictions, learned, rtol=1e-8)
    for loss, pred in (
        (result.isotropic_loss, iso),
        (result.per_feature_loss, learned),
    ):
        assert_allclose(loss, np.average((pred - Y)[:, 0] ** 2, weights=w))
    gain = result.isotropic_loss - result.per_feature_loss
    assert result.keep == (gain > result.standard_error)  # one standard error


def test_guard_with_the_log_loss(data):
    X, _, w = data
    labels = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    Y = np.eye(2)[labels]
    result = guard_widths(
        X, Y, w, KERNELS["gaussian"], np.geomspace(0.2, 3, 6), objective="log_loss"
    )
    positive = w > 0
    for loss, pred in (
        (result.isotropic_loss, result.isotropic_predictions),
        (result.per_feature_loss, result.per_feature_predictions),
    ):
        expected = log_loss(labels[positive], pred[positive], sample_weight=w[positive])
        assert_allclose(loss, expected, rtol=1e-10)


def test_guard_keeps_isotropic_on_pure_noise():
    # A target independent of eight features, 50 rows: learned widths fit
    # the leave-one-out noise, and may beat the isotropic width out of fold
    # by chance, but not by more than one standard error. The guard keeps
    # the isotropic width in every draw, and its choice is better on fresh
    # data than forcing the learned widths.
    kept, auto_mse, forced_mse = 0, 0.0, 0.0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(50, 8))
        y = rng.normal(size=50)
        X_new, y_new = rng.normal(size=(2000, 8)), rng.normal(size=2000)
        auto = KernelAttentionRegressorCV(bandwidths=10, per_feature="auto").fit(X, y)
        forced = KernelAttentionRegressorCV(bandwidths=10, per_feature=True).fit(X, y)
        kept += not auto.per_feature_
        if auto.per_feature_scores_ is not None:
            scores = auto.per_feature_scores_
            assert not auto.per_feature_ or scores["per_feature"] < scores["isotropic"]
        auto_mse += np.mean((auto.predict(X_new) - y_new) ** 2)
        forced_mse += np.mean((forced.predict(X_new) - y_new) ** 2)
    assert kept == 5
    assert auto_mse < forced_mse


@pytest.mark.parametrize("degree", [0, 1])
def test_guard_keeps_learned_widths_with_an_irrelevant_feature(degree):
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(300, 3))
    y = np.sin(2 * X[:, 0]) + np.cos(X[:, 1]) + 0.2 * rng.normal(size=300)
    reg = KernelAttentionRegressorCV(bandwidths=8, per_feature="auto", degree=degree)
    reg.fit(X, y)
    assert reg.per_feature_
    scores = reg.per_feature_scores_
    assert scores["per_feature"] < scores["isotropic"]
    assert reg.bandwidth_[2] > 10 * reg.bandwidth_[0]


def test_guard_with_a_kfold_cv():
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(200, 3))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=200)
    cv = KFold(4, shuffle=True, random_state=0)
    reg = KernelAttentionRegressorCV(
        bandwidths=8, per_feature="auto", cv=cv, degree=0, n_neighbors=None
    )
    reg.fit(X, y)
    assert reg.per_feature_
    # best_score_: the mean R^2 over the splits of the widths learned on each
    # training part (the guard's out-of-fold predictions).
    result = guard_widths(
        X, y[:, None], np.ones(200), KERNELS["gaussian"],
        np.unique(reg.cv_results_["param_bandwidth"]), splits=list(cv.split(X)),
    )  # fmt: skip
    from sklearn.metrics import r2_score

    expected = np.mean(
        [
            r2_score(y[test], result.per_feature_predictions[test, 0])
            for _, test in cv.split(X)
        ]
    )
    assert_allclose(reg.best_score_, expected, rtol=1e-10)
    with pytest.raises(ValueError, match="per_feature='auto' judges"):
        reg.set_params(per_feature=True).fit(X, y)


# -- degree="auto" ------------------------------------------------------------
@pytest.mark.parametrize("cv", [None, 4])
def test_degree_auto_equals_scoring_each_degree(data, cv):
    X, y, w = data
    grid = [0.3, 0.6, 1.2, 2.4]
    auto = KernelAttentionRegressorCV(
        ("gaussian", "epanechnikov"),
        grid,
        degree="auto",
        cv=cv,
        n_neighbors=None,
        per_feature=False,
    ).fit(X, y, sample_weight=w)
    expected = list(
        ParameterGrid(
            {
                "degree": [0, 1],
                "kernel": ["gaussian", "epanechnikov"],
                "bandwidth": grid,
            }
        )
    )
    params = auto.cv_results_["params"]
    # The local quadratic candidates of "auto" come last.
    quadratic = [p.get("degree") == 2 for p in params]
    first = quadratic.index(True)
    assert all(quadratic[first:])
    params = params[:first]
    if cv is None:
        # Leave-one-out on a small table also scores the global line, last.
        line = params[-1]
        assert line["kernel"] == "constant" and line["degree"] == 1
        params = params[:-1]
    assert params == expected
    local = auto.cv_results_["param_kernel"] != "constant"
    for degree in (0, 1):
        alone = KernelAttentionRegressorCV(
            ("gaussian", "epanechnikov"), grid, degree=degree, cv=cv, n_neighbors=None
        ).fit(X, y, sample_weight=w)
        mine = (auto.cv_results_["param_degree"] == degree) & local
        mine[len(params) + (cv is None) :] = False
        assert_allclose(
            auto.cv_results_["mean_test_score"][mine],
            alone.cv_results_["mean_test_score"],
            rtol=1e-10,
        )
    assert auto.degree_ == auto.cv_results_["param_degree"][auto.best_index_]
    assert auto.best_estimator_.degree == auto.degree_


def test_degree_auto_picks_the_right_degree():
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X = rng.uniform(0, 1, size=(80, 1))
        trend = KernelAttentionRegressorCV(degree="auto").fit(
            X, 3 * X[:, 0] + 0.1 * rng.normal(size=80)
        )
        assert trend.degree_ == 1  # the boundary bias of a trend
        flat = KernelAttentionRegressorCV(degree="auto").fit(
            X, 0.1 * rng.normal(size=80)
        )
        assert flat.degree_ == 0  # no slope to spend a parameter on


def test_degree_auto_with_per_feature_learns_for_the_selected_degree():
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, size=(120, 2))
    y = 3 * X[:, 0] + 0.1 * rng.normal(size=120)
    reg = KernelAttentionRegressorCV(bandwidths=8, degree="auto", per_feature=True)
    reg.fit(X, y)
    assert reg.degree_ == 1
    loss = loo_loss(np.log(reg.bandwidth_), X, y[:, None], np.ones(120),
                    KERNELS["gaussian"], False, degree=1)[0]  # fmt: skip
    assert_allclose(-reg.best_score_, loss, rtol=1e-10)


# -- the edges of the grid ----------------------------------------------------
def test_automatic_grid_is_extended_to_an_interior_optimum():
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BandwidthEdgeWarning)
        reg = KernelAttentionRegressorCV(degree=0, n_neighbors=None).fit(X, y)
    scored = reg.cv_results_["param_bandwidth"]
    first = bandwidth_grid(X, 30)
    assert first[0] > scored[0]  # extended below
    assert np.all(np.diff(scored) > 0)  # in GridSearchCV's order
    assert np.isin(first, scored).all()
    assert first[0] > reg.bandwidth_ > scored[0]  # interior
    # The old edge, and the new best: 3464 against 3271.
    assert -reg.cv_results_["mean_test_score"][scored == first[0]][0] > 3400
    assert -reg.best_score_ < 3300
    # Each new candidate scores as scoring it alone does.
    new = scored[scored < first[0]]
    alone = KernelAttentionRegressorCV(bandwidths=new, degree=0, n_neighbors=None).fit(
        X, y
    )
    assert_allclose(
        reg.cv_results_["mean_test_score"][: len(new)],
        alone.cv_results_["mean_test_score"],
        rtol=1e-12,
    )


def test_automatic_grid_stops_at_the_limit_of_global_pooling():
    # A linear target under degree=1: the widest fit (the linear regression)
    # wins; the grid grows up to ten times its top and no warning is issued.
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(300, 1))
    y = 2 * X[:, 0] + rng.normal(size=300)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BandwidthEdgeWarning)
        reg = KernelAttentionRegressorCV(bandwidths=10, degree=1).fit(X, y)
    first = bandwidth_grid(X, 10)
    scored = reg.cv_results_["param_bandwidth"]
    assert scored.max() > first.max()
    assert scored.max() <= 10 * first.max() * (1 + 1e-12)
    assert reg.bandwidth_ == scored.max()


@pytest.mark.parametrize(
    "grid, edge", [([0.1, 0.2, 0.4], "largest"), ([2.0, 4.0, 8.0], "smallest")]
)
def test_edge_warning_with_a_given_grid(data, grid, edge):
    X, y, _ = data
    with pytest.warns(BandwidthEdgeWarning, match=f"the {edge} of the given"):
        reg = KernelAttentionRegressorCV(
            bandwidths=grid, degree=0, n_neighbors=None, per_feature=False
        ).fit(X, y)
    assert reg.bandwidth_ == (max(grid) if edge == "largest" else min(grid))
    assert_array_equal(reg.cv_results_["param_bandwidth"], grid)  # not extended
    with warnings.catch_warnings():
        warnings.simplefilter("error", BandwidthEdgeWarning)
        KernelAttentionRegressorCV(
            bandwidths=[0.1, 0.5, 2.0], degree=0, n_neighbors=None
        ).fit(X, y)
