"""The partially linear model (``linear_features``): Robinson's double-residual
estimate and its standard errors against slow references, the fit and its
methods against plain loops, and its cross-validation."""

import math
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from _frames import wage_like
from _reference import FORMULAS, nadaraya_watson
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn import clone
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
    skops_trusted_types,
)


def simulated(n=80, seed=0, beta=(1.5, -2.0), noise=0.3):
    """``y = Z beta + sin(2 x) + noise`` with ``Z`` correlated with ``x``:
    columns ``[x, z1, z2]``, ``z2`` binary."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    z1 = np.cos(x) + rng.normal(size=n)
    z2 = (rng.uniform(size=n) < 0.5 + 0.3 * np.tanh(x)).astype(float)
    Z = np.column_stack([z1, z2])
    y = Z @ np.asarray(beta) + np.sin(2 * x) + noise * rng.normal(size=n)
    return np.column_stack([x, Z]), y


def loo_nadaraya_watson(X, V, kernel, h, weights=None, groups=None):
    """Leave-one-out Nadaraya-Watson fits of the columns of ``V`` by a double
    loop: row ``i`` pooled over the rows of other groups (other rows)."""
    n = len(X)
    alpha = FORMULAS[kernel]
    w = np.ones(n) if weights is None else weights
    groups = np.arange(n) if groups is None else groups
    out = np.empty_like(V)
    for i in range(n):
        num, den = np.zeros(V.shape[1]), 0.0
        for j in range(n):
            if groups[j] == groups[i]:
                continue
            a = w[j] * alpha(math.sqrt(np.sum(((X[i] - X[j]) / h) ** 2)))
            num += a * V[j]
            den += a
        out[i] = num / den
    return out


def double_residual_reference(y, Z, fits, weights=None):
    """Robinson's estimate from the leave-one-out fits of ``[y, Z]`` by
    ``numpy.linalg.lstsq``, its intercept, and the HC0 sandwich standard
    errors by an explicit sum of outer products."""
    n = len(y)
    w = np.ones(n) if weights is None else weights
    e_y = y - fits[:, 0]
    E = Z - fits[:, 1:]
    root = np.sqrt(w)
    coef = np.linalg.lstsq(E * root[:, None], e_y * root, rcond=None)[0]
    intercept = np.sum(w * (y - Z @ coef)) / np.sum(w)
    u = e_y - E @ coef
    bread = np.zeros((Z.shape[1], Z.shape[1]))
    meat = np.zeros_like(bread)
    for i in range(n):
        bread += w[i] * np.outer(E[i], E[i])
        meat += w[i] * u[i] ** 2 * np.outer(E[i], E[i])
    inverse = np.linalg.inv(bread)
    se = np.sqrt(np.diag(inverse @ meat @ inverse))
    return coef, intercept, se


# -- the estimate --------------------------------------------------------------
@pytest.mark.parametrize("kernel, h", [("gaussian", 0.4), ("epanechnikov", 0.9)])
def test_coef_is_the_double_residual_estimate_of_leave_one_out_loops(kernel, h):
    X, y = simulated(n=70, seed=1)
    reg = KernelAttentionRegressor(kernel, h, linear_features=[1, 2]).fit(X, y)
    fits = loo_nadaraya_watson(X[:, :1], np.column_stack([y, X[:, 1:]]), kernel, h)
    coef, intercept, se = double_residual_reference(y, X[:, 1:], fits)
    assert_allclose(reg.coef_, coef, rtol=1e-10)
    assert_allclose(reg.intercept_, intercept, rtol=1e-10)
    assert_allclose(reg.coef_se_, se, rtol=1e-8)
    assert_array_equal(reg.linear_feature_names_, ["x1", "x2"])
    assert_array_equal(reg.is_linear_, [False, True, True])


@pytest.mark.parametrize(
    "params",
    [
        {"degree": 1, "bandwidth": 0.5},
        {"bandwidth": [0.5, 2.0]},
        {"n_neighbors": 12, "bandwidth": 1.3},
        {"degree": 1, "n_neighbors": 15},
        {"bandwidth": 0.6, "categorical_features": [1], "categorical_bandwidth": 0.2},
        {"kernel": "biweight", "bandwidth": 1.5, "algorithm": "kd_tree"},
    ],
    ids=[
        "degree1",
        "per-feature",
        "adaptive",
        "adaptive-degree1",
        "categorical",
        "tree",
    ],
)
def test_coef_uses_the_leave_one_out_refits_of_the_kernel_part(params):
    """The leave-one-out fits are those of the kernel part refitted without
    each row, whatever its options."""
    rng = np.random.default_rng(2)
    n = 50
    X, y = simulated(n=n, seed=3)
    X = np.column_stack([X[:, 0], rng.integers(0, 3, n), X[:, 1:]])
    if params.get("categorical_features") is None:
        X[:, 1] = rng.normal(size=n) + X[:, 0]
    reg = KernelAttentionRegressor(linear_features=[2, 3], **params).fit(X, y)
    Z = X[:, 2:]
    V = np.column_stack([y, Z])
    fits = np.empty_like(V)
    for i in range(n):
        keep = np.arange(n) != i
        part = KernelAttentionRegressor(**params).fit(X[keep, :2], V[keep])
        with warnings.catch_warnings():
            # A refit may shrink the slope of its left-out row (degree 1).
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            fits[i] = part.predict(X[i : i + 1, :2])[0]
    coef, intercept, se = double_residual_reference(y, Z, fits)
    assert_allclose(reg.coef_, coef, rtol=1e-8, atol=1e-10)
    assert_allclose(reg.intercept_, intercept, rtol=1e-8)
    assert_allclose(reg.coef_se_, se, rtol=1e-6)


def test_predict_is_the_linear_part_plus_the_pooled_partial_residuals():
    X, y = simulated(n=60, seed=4)
    Q, _ = simulated(n=7, seed=5)
    for degree in (0, 1):
        reg = KernelAttentionRegressor(
            bandwidth=0.4, degree=degree, linear_features=[1, 2]
        ).fit(X, y)
        residuals = y - X[:, 1:] @ reg.coef_ - reg.intercept_
        assert_allclose(reg.values_, residuals, rtol=1e-13)
        linear = Q[:, 1:] @ reg.coef_ + reg.intercept_
        if degree == 0:
            pooled = nadaraya_watson(
                X[:, :1], residuals, Q[:, :1], FORMULAS["gaussian"], 0.4
            )
        else:
            pooled = reg.attention_weights(Q) @ residuals
        assert_allclose(reg.predict(Q), linear + pooled, rtol=1e-12, atol=1e-12)
        kernel = KernelAttentionRegressor(bandwidth=0.4, degree=degree)
        kernel.fit(X[:, :1], residuals)
        assert_allclose(reg.predict(Q), linear + kernel.predict(Q[:, :1]), rtol=1e-12)


def test_multi_output_coef_per_output():
    X, y = simulated(n=60, seed=6)
    Y = np.column_stack([y, 2 * y + X[:, 1]])
    reg = KernelAttentionRegressor(bandwidth=0.4, linear_features=[1, 2]).fit(X, Y)
    assert reg.coef_.shape == (2, 2) and reg.intercept_.shape == (2,)
    for o in range(2):
        single = KernelAttentionRegressor(bandwidth=0.4, linear_features=[1, 2])
        single.fit(X, Y[:, o])
        assert_allclose(reg.coef_[o], single.coef_, rtol=1e-10)
        assert_allclose(reg.coef_se_[o], single.coef_se_, rtol=1e-8)
        assert_allclose(reg.predict(X[:5])[:, o], single.predict(X[:5]), rtol=1e-10)


def test_coef_recovers_the_truth_when_z_correlates_with_x():
    """``y = Z beta + sin(x) + x**2 + noise`` with ``z1 = cos(x) + noise``:
    least squares with ``x`` as a linear control is confounded by ``x**2``,
    the double-residual estimate is not."""
    beta = np.array([1.5, -2.0])
    X, _ = simulated(n=2000, seed=7)
    rng = np.random.default_rng(70)
    x, Z = X[:, 0], X[:, 1:]
    y = Z @ beta + np.sin(x) + x**2 + 0.5 * rng.normal(size=len(x))
    assert abs(np.corrcoef(x**2, Z[:, 0])[0, 1]) > 0.3
    reg = KernelAttentionRegressor(bandwidth=0.2, linear_features=[1, 2]).fit(X, y)
    assert np.all(np.abs(reg.coef_ - beta) < 3 * reg.coef_se_)
    assert np.all(reg.coef_se_ < 0.05)
    design = np.column_stack([np.ones(len(y)), X])
    ols = np.linalg.lstsq(design, y, rcond=None)[0][2:]
    assert np.abs(ols[0] - beta[0]) > 10 * reg.coef_se_[0]


def test_standard_errors_cover_at_the_nominal_rate():
    """The 95% intervals of 200 seeded replications with heteroscedastic
    noise: coverage within three Monte-Carlo standard errors of 0.95."""
    beta = np.array([1.0, -0.5])
    rng = np.random.default_rng(12345)
    R, n = 200, 400
    hits = np.zeros(2)
    for _ in range(R):
        x = rng.uniform(-2, 2, n)
        Z = np.column_stack(
            [
                np.cos(x) + rng.normal(size=n),
                (rng.uniform(size=n) < 0.5 + 0.2 * np.tanh(x)).astype(float),
            ]
        )
        noise = rng.normal(size=n) * (0.5 + 0.25 * np.abs(x))
        y = Z @ beta + np.sin(2 * x) + noise
        reg = KernelAttentionRegressor(bandwidth=0.25, linear_features=[1, 2])
        reg.fit(np.column_stack([x, Z]), y)
        hits += np.abs(reg.coef_ - beta) <= 1.959964 * reg.coef_se_
    bound = 3 * math.sqrt(0.95 * 0.05 / R)
    assert np.all(np.abs(hits / R - 0.95) <= bound), hits / R


def test_integer_weights_are_rows_repeated_and_left_out_together():
    X, y = simulated(n=40, seed=8)
    rng = np.random.default_rng(9)
    w = rng.integers(1, 4, len(y)).astype(float)
    reg = KernelAttentionRegressor(bandwidth=0.5, linear_features=[1, 2])
    reg.fit(X, y, sample_weight=w)
    rows = np.repeat(np.arange(len(y)), w.astype(int))
    Xr, yr = X[rows], y[rows]
    fits = loo_nadaraya_watson(
        Xr[:, :1], np.column_stack([yr, Xr[:, 1:]]), "gaussian", 0.5, groups=rows
    )
    coef, intercept, se = double_residual_reference(yr, Xr[:, 1:], fits)
    assert_allclose(reg.coef_, coef, rtol=1e-10)
    assert_allclose(reg.intercept_, intercept, rtol=1e-10)
    assert_allclose(reg.coef_se_, se, rtol=1e-8)
    # The kernel part pools the repeated rows.
    Q, _ = simulated(n=5, seed=10)
    kernel = KernelAttentionRegressor(bandwidth=0.5).fit(
        Xr[:, :1], yr - Xr[:, 1:] @ coef - intercept
    )
    expected = Q[:, 1:] @ coef + intercept + kernel.predict(Q[:, :1])
    assert_allclose(reg.predict(Q), expected, rtol=1e-10)


def test_rows_of_weight_zero_change_nothing():
    X, y = simulated(n=50, seed=11)
    w = np.ones(len(y))
    w[::7] = 0.0
    reg = KernelAttentionRegressor(bandwidth=0.5, linear_features=[1, 2])
    reg.fit(X, y, sample_weight=w)
    kept = KernelAttentionRegressor(bandwidth=0.5, linear_features=[1, 2])
    kept.fit(X[w > 0], y[w > 0])
    assert_allclose(reg.coef_, kept.coef_, rtol=1e-10)
    assert_allclose(reg.coef_se_, kept.coef_se_, rtol=1e-8)
    assert_allclose(reg.predict(X), kept.predict(X), rtol=1e-10)


# -- categorical and named columns ------------------------------------------
def test_categorical_columns_are_one_hot_encoded_first_category_dropped():
    X, y = wage_like(seed=1)
    reg = KernelAttentionRegressor(bandwidth=0.3, linear_features="categorical")
    reg.fit(X, y)
    assert_array_equal(
        reg.linear_feature_names_,
        ["colour_green", "colour_red", "colour_white", "union_yes"],
    )
    Z = pd.get_dummies(X[["colour", "union"]], drop_first=True, dtype=float)
    fits = loo_nadaraya_watson(
        X[["x"]].to_numpy(), np.column_stack([y, Z]), "gaussian", 0.3
    )
    coef, intercept, se = double_residual_reference(y, Z.to_numpy(), fits)
    assert_allclose(reg.coef_, coef, rtol=1e-10)
    assert_allclose(reg.coef_se_, se, rtol=1e-8)
    assert_allclose(reg.coef_, [0.7, -0.4, 1.2, 0.5], atol=5 * reg.coef_se_.max())
    assert_array_equal(reg.is_categorical_, [False, True, True])
    assert_array_equal(reg.categories_[0], ["blue", "green", "red", "white"])
    assert reg.kernel_regressor_.n_features_in_ == 1
    # The same columns by name, and by a mask.
    by_name = clone(reg).set_params(linear_features=["colour", "union"]).fit(X, y)
    by_mask = clone(reg).set_params(linear_features=[False, True, True]).fit(X, y)
    for other in (by_name, by_mask):
        assert_allclose(other.coef_, reg.coef_, rtol=1e-13)
        assert_allclose(other.predict(X), reg.predict(X), rtol=1e-13)


def test_categorical_features_split_between_the_two_parts():
    X, y = wage_like(seed=2)
    reg = KernelAttentionRegressor(
        bandwidth=0.3,
        categorical_features=["colour", "union"],
        categorical_bandwidth=[0.2, 0.5],
        linear_features=["union"],
    ).fit(X, y)
    kernel = reg.kernel_regressor_
    assert_array_equal(kernel.feature_names_in_, ["x", "colour"])
    assert_allclose(kernel.categorical_bandwidth_, [0.2])
    assert_array_equal(reg.linear_feature_names_, ["union_yes"])
    residuals = y - (X["union"] == "yes").to_numpy() * reg.coef_[0] - reg.intercept_
    assert_allclose(reg.values_, residuals, rtol=1e-12)
    expected = KernelAttentionRegressor(
        bandwidth=0.3, categorical_features=[1], categorical_bandwidth=0.2
    ).fit(X[["x", "colour"]], residuals)
    linear = (X["union"] == "yes").to_numpy() * reg.coef_[0] + reg.intercept_
    assert_allclose(reg.predict(X), linear + expected.predict(X[["x", "colour"]]))


def test_feature_names_are_checked_at_predict():
    X, y = wage_like(seed=3)
    reg = KernelAttentionRegressor(bandwidth=0.3, linear_features="categorical")
    reg.fit(X, y)
    with pytest.raises(ValueError, match="feature names"):
        reg.predict(X[["colour", "x", "union"]])
    with pytest.raises(ValueError, match="missing:\n- union"):
        reg.predict(X[["x", "colour"]])


def test_an_unseen_category_of_a_linear_column_is_refused_at_predict():
    X, y = wage_like(seed=4)
    reg = KernelAttentionRegressor(bandwidth=0.3, linear_features=["colour"])
    reg.set_params(categorical_features=["union"]).fit(X, y)
    Q = X.iloc[:3].copy()
    Q["colour"] = ["blue", "purple", "red"]
    with pytest.raises(ValueError, match="'colour' holds categories not seen.*purple"):
        reg.predict(Q)
    # An unseen category of the kernel part differs from every key, as usual.
    Q = X.iloc[:3].copy()
    Q["union"] = Q["union"].astype(str)
    Q.loc[Q.index[0], "union"] = "maybe"
    assert np.all(np.isfinite(reg.predict(Q)))


# -- the other methods -------------------------------------------------------
def test_methods_are_the_kernel_part_shifted_by_the_linear_part():
    X, y = simulated(n=80, seed=12)
    Q, _ = simulated(n=6, seed=13)
    reg = KernelAttentionRegressor(bandwidth=0.4, degree=1, linear_features=[1, 2])
    reg.fit(X, y)
    kernel = reg.kernel_regressor_
    linear = Q[:, 1:] @ reg.coef_ + reg.intercept_
    mean, std, se = reg.predict(Q, return_std=True, return_se=True)
    k_mean, k_std, k_se = kernel.predict(Q[:, :1], return_std=True, return_se=True)
    assert_allclose(mean, linear + k_mean, rtol=1e-13)
    assert_allclose(std, k_std)
    assert_allclose(se, k_se)
    for method in ("confidence_interval", "prediction_interval"):
        bounds = getattr(reg, method)(Q)
        k_bounds = getattr(kernel, method)(Q[:, :1])
        for b, k in zip(bounds, k_bounds, strict=True):
            assert_allclose(b, linear + k, rtol=1e-13)
    weights = reg.attention_weights(Q)
    assert_allclose(weights @ reg.values_ + linear, mean, rtol=1e-12)
    gradient, gradient_se = reg.predict_gradient(Q, return_se=True)
    k_gradient, k_gradient_se = kernel.predict_gradient(Q[:, :1], return_se=True)
    assert_allclose(gradient[:, 0], k_gradient[:, 0])
    assert_allclose(gradient[:, 1:], np.tile(reg.coef_, (6, 1)))
    assert_allclose(gradient_se[:, 0], k_gradient_se[:, 0])
    assert_allclose(gradient_se[:, 1:], np.tile(reg.coef_se_, (6, 1)))
    with pytest.raises(
        ValueError, match="linear_features=\\[1, 2\\].*kernel_regressor_"
    ):
        reg.smoother_diagnostics()


def test_gradient_of_a_categorical_linear_column_is_nan():
    X, y = wage_like(seed=5)
    reg = KernelAttentionRegressor(bandwidth=0.3, linear_features="categorical")
    gradient = reg.fit(X, y).predict_gradient(X.iloc[:4])
    assert gradient.shape == (4, 3)
    assert np.all(np.isfinite(gradient[:, 0])) and np.all(np.isnan(gradient[:, 1:]))


def test_refitting_without_linear_features_forgets_them():
    X, y = simulated(n=40, seed=14)
    reg = KernelAttentionRegressor(bandwidth=0.5, linear_features=[2]).fit(X, y)
    reg.set_params(linear_features=None).fit(X, y)
    for name in ("coef_", "coef_se_", "intercept_", "kernel_regressor_"):
        assert not hasattr(reg, name)
    plain = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
    assert_array_equal(reg.predict(X), plain.predict(X))
    reg.set_params(linear_features=[2]).fit(X, y)
    assert not hasattr(reg, "_pool") and reg.coef_.shape == (1,)


def test_pickle_and_skops_round_trips():
    X, y = wage_like(seed=6)
    reg = KernelAttentionRegressor(bandwidth=0.3, linear_features="categorical")
    reg.fit(X, y)
    loaded = pickle.loads(pickle.dumps(reg))
    assert_array_equal(loaded.predict(X), reg.predict(X))
    sio = pytest.importorskip("skops.io")
    loaded = sio.loads(sio.dumps(reg), trusted=skops_trusted_types())
    assert_array_equal(loaded.predict(X), reg.predict(X))
    assert_array_equal(loaded.coef_se_, reg.coef_se_)


# -- validation ----------------------------------------------------------------
@pytest.mark.parametrize(
    "value, message",
    [
        ("linear", "linear_features' parameter .* must be"),
        ([3], "linear_features as int indices must lie in .* = \\[0, 2\\]"),
        ([True, False], "linear_features as a boolean mask must have shape"),
        (["z1"], "linear_features holds feature names, which need X with string"),
        ([0, 1, 2], "makes every one of the 3 features linear"),
        ("categorical", "linear_features='categorical' makes every categorical"),
        ([[0, 1]], "linear_features must be a 1-D array-like"),
        ([], r"linear_features=\[\] selects no column; pass linear_features=None"),
        ([False] * 3, "selects no column; pass linear_features=None"),
    ],
)
def test_invalid_linear_features_are_refused_naming_the_parameter(value, message):
    X, y = simulated(n=30, seed=15)
    reg = KernelAttentionRegressor(linear_features=value)
    with pytest.raises((ValueError, InvalidParameterError), match=message):
        reg.fit(X, y)


def test_collinear_linear_columns_are_refused():
    X, y = simulated(n=30, seed=16)
    collinear = np.column_stack([X, 2 * X[:, 1] - 1.0])
    with pytest.raises(ValueError, match="collinear: 'x3' is a linear combination"):
        KernelAttentionRegressor(linear_features=[1, 2, 3]).fit(collinear, y)
    constant = np.column_stack([X, np.full(len(y), 4.0)])
    with pytest.raises(ValueError, match="collinear: 'x3'"):
        KernelAttentionRegressor(linear_features=[3]).fit(constant, y)


def test_sparse_input_is_refused_naming_linear_features():
    X, y = simulated(n=30, seed=17)
    reg = KernelAttentionRegressor(linear_features=[1])
    with pytest.raises(ValueError, match="linear_features takes dense"):
        reg.fit(sparse.csr_array(X), y)
    assert not reg.__sklearn_tags__().input_tags.sparse
    assert KernelAttentionRegressor().__sklearn_tags__().input_tags.sparse


# -- the cross-validated estimator -------------------------------------------
@pytest.mark.parametrize("degree", [0, 1])
def test_cv_leave_one_out_with_coef_held_equals_a_refit_loop(degree):
    X, y = simulated(n=45, seed=18)
    grid = [0.25, 0.5, 1.0]
    search = KernelAttentionRegressorCV(
        bandwidths=grid, degree=degree, n_neighbors=None, linear_features=[1, 2]
    ).fit(X, y)
    Z = X[:, 1:]
    for c, h in enumerate(grid):
        reg = KernelAttentionRegressor(
            bandwidth=h, degree=degree, linear_features=[1, 2]
        ).fit(X, y)
        residuals = y - Z @ reg.coef_ - reg.intercept_
        predictions = np.empty(len(y))
        for i in range(len(y)):
            keep = np.arange(len(y)) != i
            part = KernelAttentionRegressor(bandwidth=h, degree=degree)
            part.fit(X[keep, :1], residuals[keep])
            linear = Z[i] @ reg.coef_ + reg.intercept_
            predictions[i] = linear + part.predict(X[i : i + 1, :1])[0]
        mse = np.mean((y - predictions) ** 2)
        assert_allclose(search.cv_results_["loo_mse"][c], mse, rtol=1e-9)
    best = search.best_estimator_
    assert best.linear_features == [1, 2] and search.linear_features_ == [1, 2]
    again = KernelAttentionRegressor(
        bandwidth=search.bandwidth_, degree=degree, linear_features=[1, 2]
    ).fit(X, y)
    assert_allclose(best.coef_, again.coef_, rtol=1e-13)
    assert_allclose(search.predict(X), again.predict(X), rtol=1e-13)


def test_cv_adaptive_candidates_with_linear_features():
    X, y = simulated(n=45, seed=19)
    search = KernelAttentionRegressorCV(
        bandwidths=None, n_neighbors=[8, 16], degree=0, linear_features=[1, 2]
    ).fit(X, y)
    reg = KernelAttentionRegressor(n_neighbors=8, linear_features=[1, 2]).fit(X, y)
    residuals = y - X[:, 1:] @ reg.coef_ - reg.intercept_
    predictions = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        part = KernelAttentionRegressor(n_neighbors=8).fit(X[keep, :1], residuals[keep])
        predictions[i] = X[i, 1:] @ reg.coef_ + reg.intercept_
        predictions[i] += part.predict(X[i : i + 1, :1])[0]
    assert_allclose(
        search.cv_results_["loo_mse"][0], np.mean((y - predictions) ** 2), rtol=1e-9
    )


def test_auto_picks_linear_for_additive_categories_and_kernel_for_interactions():
    X, y = wage_like(n=240, seed=20)
    search = KernelAttentionRegressorCV(
        bandwidths=8, n_neighbors=None, linear_features="auto"
    ).fit(X, y)
    assert search.linear_features_ == "categorical"
    scores = search.linear_scores_
    assert (
        scores["linear"]
        > scores["kernel"]
        == np.max(
            search.cv_results_["mean_test_score"][
                search.cv_results_["param_linear_features"] == None  # noqa: E711
            ]
        )
    )
    assert search.best_params_["linear_features"] == "categorical"
    assert search.cv_results_["params"][search.best_index_]["linear_features"] == (
        "categorical"
    )
    assert search.cv_results_["rank_test_score"][search.best_index_] == 1
    assert_array_equal(
        search.best_estimator_.linear_feature_names_,
        ["colour_green", "colour_red", "colour_white", "union_yes"],
    )
    assert search.predict(X).shape == (240,)

    X, y = wage_like(n=240, seed=21, interaction=True)
    search.fit(X, y)
    assert search.linear_features_ is None
    assert search.linear_scores_["kernel"] > search.linear_scores_["linear"]
    assert not hasattr(search.best_estimator_, "coef_")
    assert search.best_params_["linear_features"] is None


def test_auto_without_categorical_features_or_with_kfold_keeps_the_kernel():
    X, y = simulated(n=40, seed=22)
    search = KernelAttentionRegressorCV(bandwidths=5, linear_features="auto")
    search.fit(X, y)
    assert search.linear_features_ is None and search.linear_scores_ is None
    X, y = wage_like(n=60, seed=23)
    search.set_params(cv=3, n_neighbors=None).fit(X, y)
    assert search.linear_features_ is None and search.linear_scores_ is None
    assert_array_equal(search.best_estimator_.is_categorical_, [False, True, True])


@pytest.mark.parametrize(
    "options, message",
    [
        ({"cv": 3}, "cv=3"),
        ({"per_feature": True}, "per_feature=True"),
        ({"scoring": "gcv"}, "scoring='gcv'"),
    ],
)
def test_cv_refuses_what_it_cannot_score_with_linear_features(options, message):
    X, y = simulated(n=30, seed=24)
    search = KernelAttentionRegressorCV(bandwidths=3, linear_features=[1], **options)
    with pytest.raises(ValueError, match=f"linear_features=\\[1\\] .*{message}"):
        search.fit(X, y)


def test_cv_effective_df_is_refused_for_a_partially_linear_fit():
    X, y = simulated(n=30, seed=25)
    search = KernelAttentionRegressorCV(bandwidths=3, linear_features=[1, 2])
    search.fit(X, y)
    assert not hasattr(search, "effective_df_")
    with pytest.raises(AttributeError, match="linear_features"):
        search.effective_df_  # noqa: B018


def test_cv_with_linear_features_validates_the_queries():
    X, y = wage_like(n=60, seed=26)
    search = KernelAttentionRegressorCV(
        bandwidths=[0.3, 0.6, 1.2], n_neighbors=None, linear_features="categorical"
    ).fit(X, y)
    assert_array_equal(search.is_categorical_, [False, True, True])
    assert_array_equal(search.feature_names_in_, ["x", "colour", "union"])
    assert_allclose(search.predict(X), search.best_estimator_.predict(X))
    with pytest.raises(ValueError, match="feature names"):
        search.predict(X[["union", "x", "colour"]])
