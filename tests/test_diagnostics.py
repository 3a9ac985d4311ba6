"""Effective degrees of freedom, GCV and AICc of the smoother on its data."""

import math

import numpy as np
import pytest
from _reference import FORMULAS, kish, slope_factor
from _reference_quadratic import guarded_fit
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV


def smoother_matrix(
    X, kernel, h, w=None, degree=0, n_neighbors=None, codes=None, lam=None
):
    """The smoother matrix ``L`` on the training keys, by a loop over rows.

    Row ``i``: the weights ``a_j = w_j alpha(||x_i - x_j|| / h_i)`` (times
    ``lam`` per categorical feature of another category), normalised for
    ``degree=0``; for ``degree=1`` the intercept row of the weighted least
    squares on the design ``[1, x_j - x_i]``, ``e1^T (Z^T A Z)^{-1} Z^T A``,
    with the slope shrunk by the safeguard's factor ``s`` at the row's
    leverage (``p + s (l - p)`` for the unshrunk row ``l``, see
    ``_reference.slope_factor``). A local-linear row whose keys of
    non-negligible weight do not spread (relative to their spread about the
    mean of the keys) is the local mean,
    as the estimator's design of rank 0. With ``n_neighbors`` ``h_i`` is
    ``h`` times the distance from ``x_i`` to
    its ``k``-th nearest key of positive weight (itself the first). For
    ``degree=2`` (fixed widths), the rows of the guarded local quadratic
    (``_reference_quadratic.guarded_fit``).
    """
    X = np.asarray(X, dtype=float)
    n = len(X)
    w = np.ones(n) if w is None else np.asarray(w, dtype=float)
    if degree == 2:
        assert n_neighbors is None and codes is None
        return guarded_fit(X, X[:, 0], X, FORMULAS[kernel], h, w)["weights"]
    alpha = FORMULAS[kernel]
    L = np.zeros((n, n))
    for i in range(n):
        d = np.array([math.sqrt(np.sum((X[i] - X[j]) ** 2)) for j in range(n)])
        width = h
        if n_neighbors is not None:
            width = h * np.sort(d[w > 0])[n_neighbors - 1]
        a = np.array([w[j] * alpha(d[j] / width) for j in range(n)])
        if codes is not None:
            a *= np.prod(np.where(codes[i] != codes, lam, 1.0), axis=1)
        p = a / a.sum()
        centred = X - p @ X
        spread = np.sum(p @ centred**2)
        if degree == 0 or spread <= 1e-13 * np.sum(p @ (X - X.mean(axis=0)) ** 2):
            # Rank 0 (the weight on one key): the local mean.
            L[i] = p
            continue
        Z = np.hstack([np.ones((n, 1)), X - X[i]])
        L[i] = np.linalg.solve(Z.T @ (a[:, None] * Z), (a[:, None] * Z).T)[0]
        offset = X[i] - p @ X
        distance_sq = offset @ np.linalg.pinv(centred.T @ (p[:, None] * centred))
        s = slope_factor(distance_sq @ offset, kish(p, kernel == "constant"))
        L[i] = p + s * (L[i] - p)
    return L


def reference_criteria(L, y, w=None):
    """``(trace, sigma2, gcv, aicc)`` from an explicit smoother matrix."""
    n_rows = len(y)
    w = np.ones(n_rows) if w is None else np.asarray(w, dtype=float)
    keep = w > 0
    n = np.count_nonzero(keep)
    trace = np.trace(L[np.ix_(keep, keep)])
    e = (y - L @ y).reshape(n_rows, -1)
    sigma2 = np.mean(w[keep] @ e[keep] ** 2) / w[keep].sum()
    gcv = n * (n * sigma2) / (n - trace) ** 2 if trace < n else np.inf
    aicc = np.inf
    if trace + 2 < n:  # else the correction's denominator is not positive
        aicc = np.log(sigma2) + (1 + trace / n) / (1 - (trace + 2) / n)
    return trace, sigma2, gcv, aicc


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 4, size=(40, 1))
    y = np.sin(2 * X[:, 0]) + X[:, 0] + rng.normal(scale=0.3, size=40)
    return X, y


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_regressor_diagnostics_match_the_explicit_smoother(data, degree, kernel):
    X, y = data
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    for weights in (None, w):
        reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.6, degree=degree)
        summary = reg.fit(X, y, sample_weight=weights).smoother_diagnostics()
        L = smoother_matrix(X, kernel, 0.6, weights, degree)
        trace, sigma2, gcv, aicc = reference_criteria(L, y, weights)
        assert_allclose(summary.self_weight, np.diag(L), rtol=1e-10)
        assert_allclose(summary.fitted, L @ y, rtol=1e-10)
        assert_allclose(summary.effective_df, trace, rtol=1e-10)
        assert_allclose(summary.sigma2, sigma2, rtol=1e-10)
        assert_allclose(summary.rss, len(y) * sigma2, rtol=1e-10)
        assert_allclose(summary.gcv, gcv, rtol=1e-10)
        assert_allclose(summary.aicc, aicc, rtol=1e-10)
        assert summary.n_observations == len(y)


def test_degree_zero_self_weight_is_the_kernel_at_zero_over_the_pooled_weight(data):
    # L_ii = w_i alpha(0) / sum_j w_j alpha(u_ij), the self term included.
    X, y = data
    w = np.random.default_rng(2).uniform(0.5, 2.0, len(y))
    reg = KernelAttentionRegressor(bandwidth=0.3).fit(X, y, sample_weight=w)
    d = np.abs(X - X.T)
    expected = w / (np.exp(-0.5 * (d / 0.3) ** 2) @ w)
    assert_allclose(reg.smoother_diagnostics().self_weight, expected, rtol=1e-12)


def test_multi_output_averages_the_residual_mean_squares(data):
    X, y = data
    Y = np.column_stack([y, 3 * y**2])
    summary = KernelAttentionRegressor(bandwidth=0.5).fit(X, Y).smoother_diagnostics()
    L = smoother_matrix(X, "gaussian", 0.5)
    trace, sigma2, gcv, aicc = reference_criteria(L, Y)
    assert summary.fitted.shape == Y.shape
    assert_allclose([summary.sigma2, summary.gcv, summary.aicc], [sigma2, gcv, aicc])


def test_weights_zero_rows_count_for_nothing(data):
    X, y = data
    rng = np.random.default_rng(3)
    X_more = np.vstack([X, rng.uniform(0, 4, size=(5, 1))])
    y_more = np.concatenate([y, rng.normal(size=5) * 100])
    w = np.r_[np.ones(len(y)), np.zeros(5)]
    for degree in (0, 1):
        base = KernelAttentionRegressor(bandwidth=0.4, degree=degree).fit(X, y)
        more = KernelAttentionRegressor(bandwidth=0.4, degree=degree)
        more.fit(X_more, y_more, sample_weight=w)
        a, b = base.smoother_diagnostics(), more.smoother_diagnostics()
        assert_array_equal(b.self_weight[len(y) :], 0.0)
        assert np.all(np.isnan(b.fitted[len(y) :]))
        for key in ("effective_df", "sigma2", "gcv", "aicc"):
            assert_allclose(b[key], a[key], rtol=1e-10)
        assert b.n_observations == len(y)


def test_weight_two_and_a_duplicated_row(data):
    # Weight 2 gives the fit, the sum of the self weights and the residual
    # mean square of a duplicated row; n counts rows, so GCV and AICc
    # differ; scaling every weight changes nothing.
    X, y = data
    w = np.ones(len(y))
    w[:3] = 2.0
    twice = KernelAttentionRegressor(bandwidth=0.4).fit(X, y, sample_weight=w)
    copies = KernelAttentionRegressor(bandwidth=0.4)
    copies.fit(np.vstack([X, X[:3]]), np.r_[y, y[:3]])
    a, b = twice.smoother_diagnostics(), copies.smoother_diagnostics()
    assert_allclose(b.fitted[: len(y)], a.fitted, rtol=1e-12)
    assert_allclose(b.effective_df, a.effective_df, rtol=1e-12)
    assert_allclose(b.sigma2, a.sigma2, rtol=1e-12)
    assert b.n_observations == a.n_observations + 3
    assert not np.isclose(b.gcv, a.gcv, rtol=1e-6)
    scaled = KernelAttentionRegressor(bandwidth=0.4).fit(X, y, sample_weight=5 * w)
    c = scaled.smoother_diagnostics()
    for key in ("effective_df", "sigma2", "gcv", "aicc"):
        assert_allclose(c[key], a[key], rtol=1e-12)


def test_interpolating_fits_have_infinite_criteria():
    X = np.arange(6.0)[:, None]
    y = np.array([0.0, 1.0, 0.0, 2.0, 1.0, 3.0])
    summary = KernelAttentionRegressor(bandwidth=0.01).fit(X, y).smoother_diagnostics()
    assert summary.effective_df == 6.0
    assert summary.gcv == np.inf and summary.aicc == np.inf
    # tr + 2 >= n while tr <= n - 1: AICc alone is infinite.
    summary = KernelAttentionRegressor(bandwidth=0.5).fit(X, y).smoother_diagnostics()
    assert 4 <= summary.effective_df <= 5
    assert np.isfinite(summary.gcv) and summary.aicc == np.inf
    # n - 1 < tr < n: less than one residual degree of freedom, GCV too.
    summary = KernelAttentionRegressor(bandwidth=0.25).fit(X, y).smoother_diagnostics()
    assert 5 < summary.effective_df < 6
    assert summary.gcv == np.inf and summary.aicc == np.inf


@pytest.mark.parametrize("scoring", ["gcv", "aicc"])
@pytest.mark.parametrize("degree", [0, 1])
def test_cv_scores_every_candidate_by_the_criterion(data, scoring, degree):
    X, y = data
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(y))
    w[5] = 0.0
    grid = [0.1, 0.2, 0.4, 0.8, 1.6]
    cv = KernelAttentionRegressorCV(
        bandwidths=grid, degree=degree, n_neighbors=None, scoring=scoring
    ).fit(X, y, sample_weight=w)
    reference = np.array(
        [
            reference_criteria(smoother_matrix(X, "gaussian", h, w, degree), y, w)
            for h in grid
        ]
    )
    results = cv.cv_results_
    assert_allclose(results["effective_df"], reference[:, 0], rtol=1e-10)
    assert_allclose(results["gcv"], reference[:, 2], rtol=1e-10)
    assert_allclose(results["aicc"], reference[:, 3], rtol=1e-10)
    column = {"gcv": 2, "aicc": 3}[scoring]
    assert_allclose(results["mean_test_score"], -reference[:, column], rtol=1e-10)
    best = int(np.argmin(reference[:, column]))
    assert cv.bandwidth_ == grid[best]
    assert cv.best_score_ == -results[scoring][best]
    assert cv.effective_df_ == results["effective_df"][best]
    # The leave-one-out columns are still there.
    assert np.all(np.isfinite(results["loo_mse"]))
    summary = cv.best_estimator_.smoother_diagnostics()
    assert_allclose(summary.effective_df, cv.effective_df_, rtol=1e-12)
    assert_allclose(summary[scoring], -cv.best_score_, rtol=1e-12)


def test_cv_degree_auto_and_adaptive_candidates(data):
    X, y = data
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.2, 0.5], n_neighbors=[4, 8], scoring="gcv"
    ).fit(X, y)
    results = cv.cv_results_
    for i, p in enumerate(results["params"]):
        k = p.get("n_neighbors")
        L = smoother_matrix(X, "gaussian", p["bandwidth"], None, p["degree"], k)
        trace, _, gcv, aicc = reference_criteria(L, y)
        assert_allclose(results["effective_df"][i], trace, rtol=1e-10)
        assert_allclose(results["gcv"][i], gcv, rtol=1e-10)
        assert_allclose(results["aicc"][i], aicc, rtol=1e-10)
    best = int(np.argmin(results["gcv"]))
    assert cv.best_index_ == best
    assert cv.n_neighbors_ == results["params"][best].get("n_neighbors")


def test_cv_categorical_candidates(data):
    X, y = data
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 3, size=(len(y), 1))
    Xc = np.hstack([X, codes])
    y = y + codes[:, 0]
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.3, 0.9],
        categorical_features=[1],
        categorical_bandwidths=[0.0, 0.5],
        degree=0,
        scoring="aicc",
    ).fit(Xc, y)
    results = cv.cv_results_
    for i, p in enumerate(results["params"]):
        lam = p["categorical_bandwidth"]
        L = smoother_matrix(X, "gaussian", p["bandwidth"], codes=codes, lam=lam)
        trace, _, _, aicc = reference_criteria(L, y)
        assert_allclose(results["effective_df"][i], trace, rtol=1e-10)
        assert_allclose(results["aicc"][i], aicc, rtol=1e-10)
    assert cv.best_index_ == int(np.argmin(results["aicc"]))


def test_cv_effective_df_with_the_default_scoring(data):
    X, y = data
    cv = KernelAttentionRegressorCV(bandwidths=[0.2, 0.5, 1.0], degree=1).fit(X, y)
    L = smoother_matrix(X, "gaussian", cv.bandwidth_, degree=1)
    assert_allclose(cv.effective_df_, np.trace(L), rtol=1e-10)
    assert "effective_df" not in cv.cv_results_


def test_cv_effective_df_at_learned_per_feature_widths():
    rng = np.random.default_rng(6)
    X = rng.uniform(0, 1, size=(60, 2))
    y = np.sin(6 * X[:, 0]) + rng.normal(scale=0.1, size=60)
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.05, 0.1, 0.2, 0.4], per_feature=True, degree=0, n_neighbors=None
    ).fit(X, y)
    assert cv.per_feature_
    L = smoother_matrix(X / cv.bandwidth_, "gaussian", 1.0)
    assert_allclose(cv.effective_df_, np.trace(L), rtol=1e-10)


@pytest.mark.parametrize("scoring", ["gcv", "aicc"])
def test_cv_refuses_what_the_criteria_do_not_apply_to(data, scoring):
    X, y = data
    cv = KernelAttentionRegressorCV(bandwidths=[0.2, 0.5], scoring=scoring, cv=5)
    with pytest.raises(ValueError, match="takes no cross-validation splits"):
        cv.fit(X, y)


def test_an_unknown_scoring_names_the_criteria(data):
    X, y = data
    with pytest.raises(ValueError, match="'gcv'"):
        KernelAttentionRegressorCV(scoring="gvc").fit(X, y)


@pytest.mark.parametrize("on_empty", ["raise", "nearest"])
def test_an_empty_row_of_weight_zero_neither_warns_nor_raises(data, on_empty):
    # Every row of positive weight pools itself; a row of weight zero far
    # from the others would fall back, and is no observation.
    X, y = data
    X_more, y_more = np.vstack([X, [[100.0]]]), np.r_[y, 1.0]
    w = np.r_[np.ones(len(y)), 0.0]
    reg = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.5, on_empty=on_empty
    )
    summary = reg.fit(X_more, y_more, sample_weight=w).smoother_diagnostics()
    base = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.5).fit(X, y)
    assert_allclose(summary.gcv, base.smoother_diagnostics().gcv, rtol=1e-12)
    cv = KernelAttentionRegressorCV(
        kernels="epanechnikov", bandwidths=[0.5, 1.0], on_empty="nearest", degree=0
    )
    cv.fit(X_more, y_more, sample_weight=w)
    assert_allclose(
        cv.effective_df_, cv.best_estimator_.smoother_diagnostics().effective_df
    )


@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own
def test_aicc_equals_statsmodels_aic_hurvich_for_local_constant(data):
    # statsmodels' KernelReg(bw="aic") minimises the same criterion (its
    # trace is the local-constant one whatever reg_type, so degree 0 only).
    kernel_regression = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression"
    )
    X, y = data
    grid = [0.1, 0.2, 0.4, 0.8]
    cv = KernelAttentionRegressorCV(
        bandwidths=grid, degree=0, n_neighbors=None, scoring="aicc"
    ).fit(X, y)
    reg = kernel_regression.KernelReg(y, X, var_type="c", reg_type="lc", bw=[0.3])
    expected = [float(reg.aic_hurvich(np.array([h]))[0]) for h in grid]
    assert_allclose(cv.cv_results_["aicc"], expected, rtol=1e-10)


def test_categorical_frame_with_string_categories():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(7)
    labels = rng.choice(["north", "south", "east"], size=30)
    X = pd.DataFrame({"x": rng.uniform(0, 2, 30), "region": labels})
    y = X["x"].to_numpy() + (labels == "north")
    reg = KernelAttentionRegressor(
        bandwidth=0.4, categorical_features=["region"], categorical_bandwidth=0.2
    )
    summary = reg.fit(X, y).smoother_diagnostics()
    codes = np.unique(labels, return_inverse=True)[1][:, None]
    L = smoother_matrix(X[["x"]].to_numpy(), "gaussian", 0.4, codes=codes, lam=0.2)
    assert_allclose(summary.self_weight, np.diag(L), rtol=1e-10)
    assert_allclose(summary.fitted, L @ y, rtol=1e-10)


def test_sparse_keys_give_the_dense_summaries(data):
    sparse = pytest.importorskip("scipy.sparse")
    X, y = data
    X2 = np.hstack([X, np.zeros_like(X)])
    dense = KernelAttentionRegressor(bandwidth=0.5).fit(X2, y).smoother_diagnostics()
    for container in (sparse.csr_matrix, sparse.csc_array):
        reg = KernelAttentionRegressor(bandwidth=0.5).fit(container(X2), y)
        summary = reg.smoother_diagnostics()
        assert_allclose(summary.self_weight, dense.self_weight, rtol=1e-12)
        assert_allclose(summary.gcv, dense.gcv, rtol=1e-12)


def test_effective_df_falls_as_the_bandwidth_grows_and_needs_a_fit(data):
    # Degree 0: L_ii = 1 / (1 + sum_j alpha(u_ij) / alpha(0)), each term of
    # the sum non-decreasing in h for kernels that fall with distance.
    X, y = data
    grid = np.geomspace(0.01, 10, 12)
    for kernel in ("gaussian", "epanechnikov", "cauchy"):
        cv = KernelAttentionRegressorCV(
            kernels=kernel, bandwidths=grid, degree=0, n_neighbors=None, scoring="gcv"
        )
        df = cv.fit(X, y).cv_results_["effective_df"]
        assert np.all(np.diff(df) <= 1e-12)
        assert df[0] > 0.8 * len(y) and df[-1] == pytest.approx(1, rel=0.05)
    with pytest.raises(NotFittedError):
        _ = KernelAttentionRegressorCV().effective_df_
    with pytest.raises(NotFittedError):
        KernelAttentionRegressor().smoother_diagnostics()


@pytest.fixture
def no_smoother_rows(monkeypatch):
    """Make the in-sample pass of the smoother rows raise."""

    def refuse(*args, **kwargs):
        raise AssertionError("one more pass over the pairs of points")

    monkeypatch.setattr(
        "sklearn_kernelpool._selection._delegation.smoother_diagnostics", refuse
    )


@pytest.mark.parametrize("degree", [0, 1, "auto"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "boxcar"])
def test_cv_criteria_come_from_the_leave_one_out_pass(
    data, kernel, degree, no_smoother_rows
):
    # The in-sample fit and L_ii of every candidate of degree 0 or 1 are
    # completed from the leave-one-out sums; no smoother rows are computed
    # by the estimator (those of degree="auto"'s local quadratics come from
    # their equivalent-kernel rows in the search's engine).
    X, y = data
    Y = np.column_stack([y, np.cos(3 * X[:, 0])])
    w = np.random.default_rng(8).uniform(0.5, 2.0, len(y))
    w[[3, 17]] = 0.0
    grid = [0.5, 1.0, 2.0]
    cv = KernelAttentionRegressorCV(
        kernels=kernel, bandwidths=grid, degree=degree, n_neighbors=None, scoring="gcv"
    ).fit(X, Y, sample_weight=w)
    results = cv.cv_results_
    for i, p in enumerate(results["params"]):
        L = smoother_matrix(X, kernel, p["bandwidth"], w, p.get("degree", degree))
        trace, _, gcv, aicc = reference_criteria(L, Y, w)
        assert_allclose(results["effective_df"][i], trace, rtol=1e-10)
        assert_allclose(results["gcv"][i], gcv, rtol=1e-10)
        assert_allclose(results["aicc"][i], aicc, rtol=1e-10)
    assert cv.effective_df_ == results["effective_df"][cv.best_index_]
    degrees = {p.get("degree", degree) for p in results["params"]}
    assert degrees == ({0, 1, 2} if degree == "auto" else {degree})


@pytest.mark.parametrize("degree", [0, 1])
def test_cv_criteria_of_rows_recomputed_after_underflow(degree, no_smoother_rows):
    # Narrow gaussians: the leave-one-out weights of the isolated points
    # underflow and their rows are recomputed with a shift, which the self
    # term must share. The point at 29.01 weighs 1e-280, about 100 times its
    # neighbour's kernel weight: its own weight is about 0.99, not 1.
    X = np.r_[0.0, 0.1, 0.3, 0.45, 0.7, 1.0, 10.0, 10.2, 10.4, 20.0, 29.01][:, None]
    y = np.sin(X[:, 0]) + np.r_[0.1, -0.2, 0.3, 0.0, -0.1, 0.2, 0.1, -0.3, 0, 1, 2]
    w = np.ones(len(y))
    w[-1] = 1e-280
    grid = [0.1, 0.25, 0.5]
    cv = KernelAttentionRegressorCV(
        bandwidths=grid,
        degree=degree,
        n_neighbors=None,
        scoring="aicc",
        on_empty="nearest",
    ).fit(X, y, sample_weight=w)
    results = cv.cv_results_
    for i, h in enumerate(grid):
        L = smoother_matrix(X, "gaussian", h, w, degree)
        trace, _, gcv, aicc = reference_criteria(L, y, w)
        assert_allclose(results["effective_df"][i], trace, rtol=1e-10)
        assert_allclose(results["gcv"][i], gcv, rtol=1e-10)
        assert_allclose(results["aicc"][i], aicc, rtol=1e-10)
    # (local-constant; the local-linear fit through two points interpolates)
    assert 0.5 < smoother_matrix(X, "gaussian", 0.25, w)[-1, -1] < 0.999


@pytest.mark.parametrize("degree", [0, 1])
def test_cv_categorical_criteria_from_the_same_pass(data, degree, no_smoother_rows):
    X, y = data
    codes = np.random.default_rng(9).integers(0, 3, size=(len(y), 1))
    w = np.random.default_rng(10).uniform(0.5, 2.0, len(y))
    for kernel in ("gaussian", "epanechnikov"):
        cv = KernelAttentionRegressorCV(
            kernels=kernel,
            bandwidths=[1.0, 2.0],
            categorical_features=[1],
            categorical_bandwidths=[0.0, 0.3, 1.0],
            degree=degree,
            scoring="gcv",
        ).fit(np.hstack([X, codes]), y + codes[:, 0], sample_weight=w)
        results = cv.cv_results_
        for i, p in enumerate(results["params"]):
            lam = p["categorical_bandwidth"]
            L = smoother_matrix(
                X, kernel, p["bandwidth"], w, degree, codes=codes, lam=lam
            )
            trace, _, gcv, _ = reference_criteria(L, y + codes[:, 0], w)
            assert_allclose(results["effective_df"][i], trace, rtol=1e-10)
            assert_allclose(results["gcv"][i], gcv, rtol=1e-10)


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_cv_adaptive_criteria_from_the_same_distances(
    data, kernel, degree, no_smoother_rows
):
    # In the fit on all the data a point is its own nearest key: its width
    # is its (k - 1)-th neighbour distance among the others, computed from
    # the distances of its leave-one-out row; no smoother rows.
    X, y = data
    w = np.random.default_rng(12).uniform(0.5, 2.0, len(y))
    w[[4, 9]] = 0.0
    cv = KernelAttentionRegressorCV(
        kernels=kernel,
        bandwidths=None,
        n_neighbors=[5, 12],
        degree=degree,
        scoring="gcv",
    ).fit(X, y, sample_weight=w)
    results = cv.cv_results_
    for i, p in enumerate(results["params"]):
        L = smoother_matrix(X, kernel, 1.0, w, degree, p["n_neighbors"])
        trace, _, gcv, aicc = reference_criteria(L, y, w)
        assert_allclose(results["effective_df"][i], trace, rtol=1e-10)
        assert_allclose(results["gcv"][i], gcv, rtol=1e-10)
        assert_allclose(results["aicc"][i], aicc, rtol=1e-10)


def test_cv_local_linear_criteria_of_rows_whose_moments_cancel(no_smoother_rows):
    # A tight cluster far from the centre of the keys: its moments about the
    # global centre cancel and its rows are fitted again about their means.
    rng = np.random.default_rng(11)
    X = np.r_[rng.uniform(0, 1, 30), 1e4 + rng.uniform(0, 0.05, 12)][:, None]
    y = 3 * X[:, 0] + np.sin(20 * X[:, 0]) + rng.normal(scale=0.1, size=len(X))
    w = rng.uniform(0.5, 2.0, len(y))
    grid = [0.03, 0.1]
    cv = KernelAttentionRegressorCV(
        bandwidths=grid, degree=1, n_neighbors=None, scoring="gcv"
    ).fit(X, y, sample_weight=w)
    for i, h in enumerate(grid):
        trace, _, gcv, _ = reference_criteria(
            smoother_matrix(X, "gaussian", h, w, 1), y, w
        )
        assert_allclose(cv.cv_results_["effective_df"][i], trace, rtol=1e-10)
        assert_allclose(cv.cv_results_["gcv"][i], gcv, rtol=1e-10)


def test_cv_local_linear_criteria_of_collinear_features(data, no_smoother_rows):
    # Keys [x, 2x]: every local design is rank-deficient, and the
    # minimum-norm fit at a key is the projection on the same column space
    # as for x alone, at the bandwidth scaled by |(1, 2)| = sqrt(5).
    X, y = data
    grid = np.array([0.3, 0.6, 1.2])
    cv = KernelAttentionRegressorCV(
        bandwidths=np.sqrt(5) * grid, degree=1, n_neighbors=None, scoring="gcv"
    ).fit(np.hstack([X, 2 * X]), y)
    assert np.all(cv.cv_results_["rank_deficient_fraction"] == 1)
    for i, h in enumerate(grid):
        trace, _, gcv, _ = reference_criteria(
            smoother_matrix(X, "gaussian", h, degree=1), y
        )
        assert_allclose(cv.cv_results_["effective_df"][i], trace, rtol=1e-9)
        assert_allclose(cv.cv_results_["gcv"][i], gcv, rtol=1e-9)
