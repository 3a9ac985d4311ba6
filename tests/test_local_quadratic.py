"""Local quadratic fits (degree=2) against the references and their properties."""

import pickle
import warnings

import numpy as np
import pytest
from _reference import FORMULAS, safeguarded_fit
from _reference_quadratic import guarded_fit, quadratic_fit
from numpy.testing import assert_allclose
from scipy import sparse
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._inference._deleted_fits import _LeaveOut
from sklearn_kernelpool._inference._residuals import residual_variance
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted(FORMULAS)


def quietly(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return func(*args, **kwargs)


def _data(d, n=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(2 * X.sum(axis=1)) + X[:, 0] ** 2 + 0.1 * rng.normal(size=n)
    Y = np.column_stack([y, np.cos(3 * X[:, -1])])
    Q = rng.uniform(-1.2, 1.2, size=(15, d))
    w = rng.uniform(0.5, 2.0, size=n)
    return X, y, Y, Q, w


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_the_guarded_reference(d, kernel, weighted):
    X, y, Y, Q, w = _data(d)
    sample_weight = w if weighted else None
    bandwidth = np.linspace(1.0, 1.4, d)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=bandwidth, degree=2)
    reg.fit(X, Y, sample_weight=sample_weight)
    ref = guarded_fit(X, Y, Q, FORMULAS[kernel], bandwidth, sample_weight)
    mean, std = quietly(reg.predict, Q, return_std=True)
    assert_allclose(mean, ref["mean"], rtol=1e-8, atol=1e-10)
    assert_allclose(std, ref["std"], rtol=1e-8, atol=1e-10)
    weights = quietly(reg.attention_weights, Q)
    assert_allclose(weights, ref["weights"], atol=1e-10)
    assert_allclose(weights.sum(axis=1), 1.0)
    gradient = quietly(reg.predict_gradient, Q)
    assert_allclose(gradient, ref["gradient"], rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube", "cauchy"])
def test_equals_the_plain_weighted_least_squares_quadratic(d, kernel):
    # Wide widths and inner queries: the safeguard keeps every term, and the
    # fit is the dense weighted least-squares quadratic of each query.
    X, y, _, _, w = _data(d, n=120)
    Q = np.random.default_rng(1).uniform(-0.5, 0.5, size=(10, d))
    ref = guarded_fit(X, y, Q, FORMULAS[kernel], 2.0, w)
    assert np.all(ref["quadratic_shrinkage"] == 1.0)
    mean, weights, gradient = quadratic_fit(X, y, Q, FORMULAS[kernel], 2.0, w)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=2.0, degree=2)
    reg.fit(X, y, sample_weight=w)
    assert_allclose(reg.predict(Q), mean[:, 0], rtol=1e-8, atol=1e-10)
    assert_allclose(reg.attention_weights(Q), weights, atol=1e-10)
    assert_allclose(reg.predict_gradient(Q), gradient[:, :, 0], atol=1e-8)


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
@pytest.mark.parametrize("kernel", ["epanechikov", "boxcar", "tricube"])
def test_the_trees_give_brute_force(algorithm, kernel):
    X, y, _, Q, w = _data(2, n=80)
    fits = [
        KernelAttentionRegressor(kernel, 0.6, degree=2, algorithm=a).fit(X, y, w)
        for a in ("brute", algorithm)
    ]
    for method in ("predict", "attention_weights", "predict_gradient"):
        a, b = (quietly(getattr(reg, method), Q) for reg in fits)
        assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def test_adaptive_widths_match_the_reference_at_each_querys_width():
    X, y, _, Q, w = _data(2, n=60)
    reg = KernelAttentionRegressor("epanechnikov", 1.5, degree=2, n_neighbors=25)
    reg.fit(X, y, sample_weight=w)
    mean = quietly(reg.predict, Q)
    for q, got in zip(Q, mean, strict=True):
        radius = np.sort(np.linalg.norm(X - q, axis=1))[24]
        ref = guarded_fit(X, y, q[None], FORMULAS["epanechnikov"], 1.5 * radius, w)
        assert_allclose(got, ref["mean"][0, 0], rtol=1e-8, atol=1e-10)


def test_categorical_features_weigh_the_keys_of_other_levels():
    X, y, _, Q, w = _data(2, n=60)
    rng = np.random.default_rng(3)
    codes, query_codes = rng.integers(0, 3, 60), rng.integers(0, 3, len(Q))
    reg = KernelAttentionRegressor(
        bandwidth=0.7, degree=2, categorical_features=[2], categorical_bandwidth=0.3
    )
    reg.fit(np.column_stack([X, codes]), y, sample_weight=w)
    mean = reg.predict(np.column_stack([Q, query_codes]))
    for q, c, got in zip(Q, query_codes, mean, strict=True):
        factor = np.where(codes == c, 1.0, 0.3)
        ref = guarded_fit(X, y, q[None], FORMULAS["gaussian"], 0.7, w * factor)
        assert_allclose(got, ref["mean"][0, 0], rtol=1e-8, atol=1e-10)


def test_a_feature_of_two_levels_gets_no_quadratic_term_along_itself():
    # Its square is a linear function of it: the quadratic block is
    # rank-deficient, and the minimum-norm fit is that of the reference.
    rng = np.random.default_rng(4)
    X = np.column_stack([rng.uniform(-1, 1, 80), rng.integers(0, 2, 80)])
    y = X[:, 0] ** 2 + 0.5 * X[:, 1] + 0.05 * rng.normal(size=80)
    Q = np.column_stack([rng.uniform(-0.8, 0.8, 10), rng.integers(0, 2, 10)])
    ref = guarded_fit(X, y, Q, FORMULAS["gaussian"], 1.0)
    assert np.all(ref["quadratic_rank"] == 2)
    reg = KernelAttentionRegressor(bandwidth=1.0, degree=2).fit(X, y)
    assert_allclose(reg.predict(Q), ref["mean"][:, 0], rtol=1e-8, atol=1e-10)
    assert np.all(np.isfinite(reg.predict(Q)))


def test_the_safeguarded_quadratic_is_continuous_along_a_ray_leaving_the_data():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, size=(40, 1))
    y = np.sin(5 * X[:, 0]) + 0.1 * rng.normal(size=40)
    Q = np.linspace(0.5, 2.5, 2001)[:, None]
    reg = KernelAttentionRegressor(bandwidth=0.15, degree=2).fit(X, y)
    mean = quietly(reg.predict, Q)
    ref = guarded_fit(X, y, Q[::50], FORMULAS["gaussian"], 0.15)
    assert_allclose(mean[::50], ref["mean"][:, 0], rtol=1e-8, atol=1e-10)
    s1, s2 = ref["shrinkage"], ref["quadratic_shrinkage"]
    assert np.all(s2 <= s1) and s2[0] == 1.0 and s2[-1] < 1e-3
    # No jump: a step of 1e-3 moves the fit by a bounded amount.
    assert np.max(np.abs(np.diff(mean))) < 0.05
    # Far from the data the quadratic terms are gone: the local line remains.
    line = safeguarded_fit(X, y, Q[-1:], FORMULAS["gaussian"], 0.15)["mean"]
    assert_allclose(mean[-1], line[0, 0], atol=1e-3 * np.ptp(y))


def test_float32_keys_give_the_float64_fit():
    X, y, _, Q, w = _data(2)
    fits = [
        KernelAttentionRegressor(bandwidth=0.8, degree=2).fit(X.astype(t), y, w)
        for t in (np.float64, np.float32)
    ]
    got = fits[1].predict(Q.astype(np.float32))
    assert got.dtype == np.float32
    assert_allclose(got, fits[0].predict(Q), rtol=1e-4, atol=1e-4)


def test_standard_errors_and_diagnostics_follow_the_equivalent_kernel():
    X, y, _, Q, w = _data(2, n=60)
    reg = KernelAttentionRegressor("tricube", 1.2, degree=2).fit(X, y, w)
    L_query = guarded_fit(X, y, Q, FORMULAS["tricube"], 1.2, w)["weights"]
    L_train = guarded_fit(X, y, X, FORMULAS["tricube"], 1.2, w)["weights"]
    variance = residual_variance(reg)[0][:, 0]
    _, se = reg.predict(Q, return_se=True)
    assert_allclose(se, np.sqrt(L_query**2 @ variance), rtol=1e-8)
    diagnostics = reg.smoother_diagnostics()
    assert_allclose(diagnostics["effective_df"], np.trace(L_train), rtol=1e-9)
    assert_allclose(diagnostics["fitted"], L_train @ y, rtol=1e-9, atol=1e-12)


def _criteria(L, y, w):
    """``(trace, gcv, aicc)`` of an explicit smoother matrix (the formulas of
    :meth:`KernelAttentionRegressor.smoother_diagnostics`)."""
    keep = w > 0
    n = np.count_nonzero(keep)
    trace = np.trace(L[np.ix_(keep, keep)])
    sigma2 = w[keep] @ (y - L @ y)[keep] ** 2 / w.sum()
    gcv = n * n * sigma2 / (n - trace) ** 2
    aicc = np.log(sigma2) + (1 + trace / n) / (1 - (trace + 2) / n)
    return trace, gcv, aicc


def _assert_the_criteria_of_refits(results, scoring, X, y, w, **options):
    """Every candidate's effective_df and criterion in ``results`` equal
    :meth:`smoother_diagnostics` of the estimator of degree 2 fitted with
    its parameters (and ``options``)."""
    for i, params in enumerate(results["params"]):
        reg = KernelAttentionRegressor(**{**params, "degree": 2}, **options)
        diagnostics = quietly(reg.fit(X, y, w).smoother_diagnostics)
        assert_allclose(results["effective_df"][i], diagnostics.effective_df, 1e-9)
        assert_allclose(results[scoring][i], diagnostics[scoring], rtol=1e-9)


@pytest.mark.parametrize("scoring", ["gcv", "aicc"])
@pytest.mark.parametrize(
    "options",
    [{}, {"algorithm": "kd_tree"}, {"n_neighbors": [12, 20], "bandwidths": None}],
    ids=["brute", "tree", "adaptive"],
)
def test_the_search_scores_the_in_sample_criteria_of_the_reference(scoring, options):
    X, y, _, _, w = _data(2, n=40)
    w[[3, 7]] = 0.0  # no observations: counted nowhere
    options = {"bandwidths": [0.6, 1.0, 1.6], **options}
    search = KernelAttentionRegressorCV(
        kernels=["gaussian", "tricube"], degree=2, scoring=scoring, **options
    )
    quietly(search.fit, X, y, sample_weight=w)
    results = search.cv_results_
    _assert_the_criteria_of_refits(results, scoring, X, y, w)
    for i, params in enumerate(results["params"]):
        if params.get("n_neighbors") is None:
            alpha, h = FORMULAS[params["kernel"]], params["bandwidth"]
            L = guarded_fit(X, y, X, alpha, h, w)["weights"]
            expected = _criteria(L, y, w)
            assert_allclose(results["effective_df"][i], expected[0], rtol=1e-9)
            assert_allclose(results[scoring][i], expected[(scoring == "aicc") + 1])
    assert search.best_index_ == int(np.argmin(results[scoring]))
    assert search.best_score_ == -results[scoring][search.best_index_]


def test_the_in_sample_criteria_of_categorical_candidates():
    X, y, _, _, w = _data(2, n=48)
    X = np.column_stack([X, np.arange(48) % 3])
    y = y + X[:, 2]
    options = {"categorical_features": [2]}
    search = KernelAttentionRegressorCV(
        bandwidths=[0.8, 1.4], categorical_bandwidths=[0.0, 0.4], **options
    )
    search.set_params(degree=2, scoring="gcv")
    results = quietly(search.fit, X, y, sample_weight=w).cv_results_
    _assert_the_criteria_of_refits(results, "gcv", X, y, w, **options)


def test_the_in_sample_criteria_of_points_left_to_the_exact_fit():
    # A feature of two levels: every quadratic block is singular, so every
    # point's in-sample fit and self weight come from its equivalent kernel.
    X, y, _, _, w = _data(2, n=40)
    X[:, 1] = np.arange(40) % 2
    search = KernelAttentionRegressorCV(bandwidths=[0.7, 1.5], degree=2, scoring="aicc")
    results = quietly(search.fit, X, y, sample_weight=w).cv_results_
    _assert_the_criteria_of_refits(results, "aicc", X, y, w)


def test_degree_auto_scores_local_quadratics_by_the_criterion():
    # A weak curvature in noise: the quadratic has the lowest AICc, which
    # selects it (the one-SE rule of the leave-one-out losses would not).
    rng = np.random.default_rng(14)
    X = rng.uniform(-1, 1, size=(60, 2))
    y = 0.3 * X[:, 0] ** 2 + np.sin(2 * X[:, 1]) + 0.3 * rng.normal(size=60)
    search = quietly(KernelAttentionRegressorCV(scoring="aicc").fit, X, y)
    results = search.cv_results_
    quadratic = [i for i, p in enumerate(results["params"]) if p["degree"] == 2]
    assert quadratic and search.degree_ == 2
    for i in quadratic:
        reg = KernelAttentionRegressor(**results["params"][i]).fit(X, y)
        assert_allclose(results["aicc"][i], reg.smoother_diagnostics().aicc, 1e-9)
    assert search.best_index_ == int(np.argmin(results["aicc"]))


@pytest.mark.parametrize(("kernel", "h"), [("gaussian", 0.4), ("epanechikov", 1.0)])
def test_the_leave_out_fits_of_the_intervals_equal_refits(kernel, h):
    X, y, _, _, w = _data(2, n=30)
    Q = np.vstack([X[:3], np.random.default_rng(6).uniform(-1, 1, (4, 2))])
    reg = KernelAttentionRegressor(kernel, h, degree=2).fit(X, y, w)
    state = _LeaveOut(reg)
    P, queries, empty = state.weights(Q, reg._pool.scorer.workspace(len(Q)))
    loo = state.leave_one_out(Q, P, queries, empty)[:, :, 0] + state.center
    fold = np.arange(len(X)) % 4
    kfold = state.leave_folds_out(Q, P, queries, empty, fold, 4)[:, :, 0]
    n = len(X)
    for i in range(n):
        keep = np.arange(n) != i
        refit = KernelAttentionRegressor(kernel, h, degree=2)
        expected = refit.fit(X[keep], y[keep], w[keep]).predict(Q)
        assert_allclose(loo[:, i], expected, rtol=1e-8, atol=1e-9)
    for k in range(4):
        keep = fold != k
        refit = KernelAttentionRegressor(kernel, h, degree=2)
        expected = refit.fit(X[keep], y[keep], w[keep]).predict(Q)
        assert_allclose(kfold[:, k] + state.center, expected, rtol=1e-8, atol=1e-9)
    low, high = reg.prediction_interval(Q, level=0.8)
    assert np.all(low <= high)


def _refit_scores(X, y, w, params, splits, extra):
    """The negative weighted MSE of leave-one-out refits (test rows of one
    point), or the mean R^2 of the folds' refits."""
    scores = []
    for p in params:
        pred, fold_scores = np.empty(len(y)), []
        for train, test in splits:
            reg = KernelAttentionRegressor(degree=2, **extra, **p)
            reg.fit(X[train], y[train], w[train])
            pred[test] = quietly(reg.predict, X[test])
            if len(test) > 1:
                score = r2_score(y[test], pred[test], sample_weight=w[test])
                fold_scores.append(score)
        loo = -np.average((y - pred) ** 2, weights=w)
        scores.append(np.mean(fold_scores) if fold_scores else loo)
    return np.array(scores)


@pytest.mark.parametrize("cv", [None, KFold(4, shuffle=True, random_state=0)])
@pytest.mark.parametrize(
    "options",
    [
        {"bandwidths": [0.3, 0.6, 1.2], "n_neighbors": None},
        {"bandwidths": None, "n_neighbors": [10, 20]},
        {"bandwidths": [0.6, 1.2], "n_neighbors": None, "categorical": True},
    ],
    ids=["fixed", "adaptive", "categorical"],
)
def test_the_search_scores_equal_refits(cv, options):
    X, y, _, _, w = _data(2, n=40)
    options = dict(options)
    extra = {}
    if options.pop("categorical", False):
        X = np.column_stack([X, np.random.default_rng(7).integers(0, 3, len(X))])
        extra = {"categorical_features": [2]}
        options["categorical_bandwidths"] = [0.2, 0.5]
    search = KernelAttentionRegressorCV(
        kernels=["gaussian", "epanechikov"], degree=2, cv=cv, **extra, **options
    )
    search.fit(X, y, sample_weight=w)
    n = len(X)
    splits = (
        [(np.delete(np.arange(n), j), np.array([j])) for j in range(n)]
        if cv is None
        else list(cv.split(X))
    )
    params = search.cv_results_["params"]
    expected = _refit_scores(X, y, w, params, splits, extra)
    assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-9)
    assert search.degree_ == 2 and search.best_estimator_.degree == 2


def test_paths_without_quadratic_fits_refuse_it_by_name():
    X, y, *_ = _data(2)
    message = "degree=2.*not available with {}.*kd_tree"
    for reg, data, what in [
        (KernelAttentionRegressor(degree=2, algorithm="binned"), X, "algorithm"),
        (KernelAttentionRegressor(degree=2), sparse.csr_array(X), "SciPy sparse"),
        (KernelAttentionRegressor(degree=2, linear_features=[1]), X, "linear"),
    ]:
        with pytest.raises(ValueError, match=message.format(what)):
            reg.fit(data, y)
    for options in ({"per_feature": True}, {"algorithm": "binned"}):
        with pytest.raises(ValueError, match="degree=2.*cannot take"):
            KernelAttentionRegressorCV(degree=2, **options).fit(X, y)
    assert not KernelAttentionRegressor(degree=2).__sklearn_tags__().input_tags.sparse


def test_a_saved_quadratic_fit_predicts_the_same():
    X, y, _, Q, w = _data(3)
    reg = KernelAttentionRegressor("biweight", 1.5, degree=2).fit(X, y, w)
    loaded = pickle.loads(pickle.dumps(reg))
    assert_allclose(quietly(loaded.predict, Q), quietly(reg.predict, Q), rtol=0, atol=0)


def test_every_registered_kernel_is_covered():
    assert {k.name for k in KERNELS.values()} <= set(CANONICAL)


def test_the_pooled_held_out_fits_equal_the_exact_ones_or_leave_them():
    from sklearn_kernelpool._engine._local_quadratic import (
        QuadraticLayout,
        quadratic_fit,
        quadratic_kernel,
    )
    from sklearn_kernelpool._held_out._quadratic_moments import pooled_quadratic

    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, size=(300, 2)) + 50.0  # far from the origin
    y = (np.sin(2 * X[:, 0]) + X[:, 1] ** 2)[:, None]
    Q = X[:40]
    W = np.exp(-0.5 * np.sum((Q[:, None] - X[None]) ** 2, axis=2) / 0.3**2)
    W[np.arange(40), np.arange(40)] = 0.0  # leave-one-out
    gaussian = KERNELS["gaussian"]
    mean, ok, s1, _ = pooled_quadratic(W, X, y, Q, gaussian)
    p = W / W.sum(axis=1, keepdims=True)
    layout = QuadraticLayout(2, 1, len(X))
    exact = quadratic_fit(p, X, y, Q, layout, False, None, True, kernel=gaussian)
    # (a point at the corner of the data may be left to the exact fit)
    assert ok.mean() > 0.9
    assert_allclose(mean[ok], exact[0][ok], rtol=1e-10, atol=1e-12)
    assert_allclose(s1[ok], exact[3][ok], rtol=1e-10)
    # With its own key, the point's equivalent-kernel weight is p_ii own.
    W[np.arange(40), np.arange(40)] = 1.0
    _, ok, _, own = pooled_quadratic(W, X, y, Q, gaussian)
    p = W / W.sum(axis=1, keepdims=True)
    L, _, _ = quadratic_kernel(p, X, Q, layout, None, kernel=gaussian)
    diagonal = L[np.arange(40), np.arange(40)]
    assert_allclose((p[np.arange(40), np.arange(40)] * own)[ok], diagonal[ok], 1e-9)
    # A feature of two levels: the quadratic block is singular, the points
    # are left to the exact fit.
    X[:, 1] = rng.integers(0, 2, len(X))
    _, ok, _, _ = pooled_quadratic(W, X, y, X[:40], gaussian)
    assert not ok.any()


def test_auto_scores_the_local_quadratic_at_the_learned_widths():
    # Learned per-feature widths are kept; the local quadratic at them (times
    # 1, 1.5, 2.25) is scored by exact leave-one-out and kept where it wins.
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (120, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 - X[:, 2] + 0.2 * rng.normal(size=120)
    search = KernelAttentionRegressorCV().fit(X, y)
    assert search.per_feature_ and search.degree_ == 2
    # (as the learned widths: best_params_ is the isotropic candidate, a row
    # of cv_results_, which a loaded search checks)
    assert search.best_params_ == search.cv_results_["params"][search.best_index_]
    assert pickle.loads(pickle.dumps(search)).degree_ == 2
    quadratic = search.per_feature_scores_["quadratic"]
    multiplier = max(quadratic, key=quadratic.get)
    assert search.best_score_ == quadratic[multiplier]
    learned = search.bandwidth_ / multiplier
    n = len(y)
    for m, score in quadratic.items():
        pred = np.empty(n)
        for i in range(n):
            keep = np.arange(n) != i
            reg = KernelAttentionRegressor(search.kernel_, m * learned, degree=2)
            pred[i] = quietly(reg.fit(X[keep], y[keep]).predict, X[i : i + 1])[0]
        assert_allclose(score, -np.mean((pred - y) ** 2), rtol=1e-9)
    assert_allclose(search.best_estimator_.bandwidth, search.bandwidth_)
    assert search.best_estimator_.degree == 2


def test_auto_scores_the_local_quadratic_at_the_learned_widths_by_aicc():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (120, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 - X[:, 2] + 0.2 * rng.normal(size=120)
    search = quietly(KernelAttentionRegressorCV(scoring="aicc").fit, X, y)
    assert search.per_feature_
    quadratic = search.per_feature_scores_["quadratic"]
    learned = search.bandwidth_ / max(quadratic, key=quadratic.get)
    for m, score in quadratic.items():
        reg = KernelAttentionRegressor(search.kernel_, m * learned, degree=2)
        assert_allclose(-score, reg.fit(X, y).smoother_diagnostics().aicc, 1e-9)
    # (degree 2 is kept where its criterion is lower: no one-SE rule here)
    assert search.degree_ == 2
    assert_allclose(search.best_score_, max(quadratic.values()), rtol=1e-9)
    assert_allclose(search.best_estimator_.bandwidth, search.bandwidth_)


def test_a_constant_feature_leaves_its_points_to_the_exact_fit():
    # Its products have no spread: the pooled normal matrices are singular,
    # and every point is fitted one by one, without a warning.
    rng = np.random.default_rng(9)
    X = rng.uniform(-2, 2, (80, 2))
    y = X[:, 0] ** 2 + np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=80)
    X = np.column_stack([X, np.full(80, 5.0)])
    search = KernelAttentionRegressorCV(degree=2, bandwidths=[0.8, 1.6])
    search.fit(X, y)
    params = search.cv_results_["params"]
    expected = _refit_scores(
        X,
        y,
        np.ones(80),
        params,
        [(np.delete(np.arange(80), j), [j]) for j in range(80)],
        {},
    )
    assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-9)


def test_the_significance_test_takes_the_linear_coefficients_of_degree_2():
    from sklearn_kernelpool import significance_test

    rng = np.random.default_rng(10)
    X = rng.uniform(-1, 1, (60, 2))
    y = X[:, 0] ** 2 + 0.1 * rng.normal(size=60)
    reg = KernelAttentionRegressor("boxcar", 1.0, degree=2).fit(X, y)
    result = quietly(significance_test, reg, X, y, features=[0, 1], n_resamples=19)
    assert len(result.pvalues) == 2
