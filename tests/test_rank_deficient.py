"""Local-linear fits of rank-deficient local designs (degree=1).

The reference is a loop over the queries that solves each query's weighted
least-squares problem with ``numpy.linalg.lstsq``, the minimum-norm
(Moore--Penrose) solution, on the design ``[1, k - m]`` centred on the local
mean ``m`` of the keys, and evaluates the fit at the query. Where the
query's offset ``q - m`` lies in the span of the local key deviations, this
equals the minimum-norm solution on the design ``[1, k - q]`` and the fit of
the design with the redundant columns dropped.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose
from sklearn.model_selection import KFold, cross_val_score

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool.kernels import KERNELS

PATHS = ["brute", "kd_tree", "ball_tree"]


def quietly(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return func(*args, **kwargs)


def attention(X, q, kernel, h, w):
    u = np.sqrt(np.sum(((X - q) / h) ** 2, axis=1))
    return w * KERNELS[kernel].function(u)


def min_norm_fit(X, Y, Q, kernel, h, w=None, design_of=None):
    """``(mean, std, weights)`` of the minimum-norm local fits by a loop.

    ``design_of``, if given, maps the keys and the query to the columns of
    the design (default: the keys themselves); the kernel weights are those
    of the keys ``X`` whatever the design.
    """
    w = np.ones(len(X)) if w is None else w
    Y = Y.reshape(len(X), -1)
    design_of = design_of or (lambda Z: Z)
    mean = np.empty((len(Q), Y.shape[1]))
    std, weights = np.empty_like(mean), np.empty((len(Q), len(X)))
    for j, q in enumerate(Q):
        p = attention(X, q, kernel, h, w)
        p = p / p.sum()
        K = design_of(X) / h
        k_q = design_of(q[None])[0] / h
        m = p @ K
        root = np.sqrt(p)[:, None]
        design = np.hstack([np.ones((len(X), 1)), K - m]) * root
        rcond = 1e-10  # the designs here are exactly rank-deficient or well posed
        coef = np.linalg.lstsq(design, Y * root, rcond=rcond)[0]
        at_query = np.concatenate([[1.0], k_q - m])
        mean[j] = at_query @ coef
        residuals = Y - np.hstack([np.ones((len(X), 1)), K - m]) @ coef
        std[j] = np.sqrt(p @ residuals**2)
        # The row of the hat matrix that gives the prediction at the query.
        weights[j] = at_query @ np.linalg.pinv(design, rcond=rcond) * root.T
    return mean, std, weights


def one_hot_data(n=60, seed=0):
    """Two numeric columns and a full one-hot block of four categories."""
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(n, 2))
    category = rng.integers(0, 4, size=n)
    one_hot = np.eye(4)[category]
    y = numeric[:, 0] - 0.5 * numeric[:, 1] ** 2 + category + rng.normal(0, 0.1, n)
    return np.hstack([numeric, one_hot]), y, category


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_full_one_hot_matches_the_minimum_norm_loop(algorithm, kernel):
    X, y, _ = one_hot_data()
    Y = np.column_stack([y, np.cos(X[:, 0])])
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X))
    Q = one_hot_data(15, seed=2)[0]
    Q[:5, 2:] = 0.0  # off the span of the keys: no category at all
    h = 3.0 if kernel == "epanechnikov" else 1.0
    if algorithm != "brute" and not KERNELS[kernel].is_compact:
        pytest.skip("the trees take compact kernels")
    reg = KernelAttentionRegressor(kernel, h, algorithm=algorithm, degree=1)
    reg.fit(X, Y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LocalLinearFallbackWarning)
        mean, std = reg.predict(Q, return_std=True)
        weights = reg.attention_weights(Q)
    expected_mean, expected_std, expected_weights = min_norm_fit(X, Y, Q, kernel, h, w)
    assert_allclose(mean, expected_mean, rtol=1e-8, atol=1e-8)
    assert_allclose(std, expected_std, rtol=1e-7, atol=1e-8)
    assert_allclose(weights, expected_weights, atol=1e-9)
    assert_allclose(weights @ Y, mean, atol=1e-9)
    assert_allclose(weights.sum(axis=1), 1.0)
    sparse = reg.attention_weights(Q, sparse=True).toarray()
    assert_allclose(sparse, weights, atol=1e-12)


def test_in_the_span_the_intercept_is_that_of_the_dropped_column():
    # Queries whose category is among the keys: the minimum-norm fit equals
    # the least-squares fit on the design with one column of the block
    # dropped (same weights), and the minimum-norm fit on [1, k - q].
    X, y, category = one_hot_data()
    Q = X[::7] + np.hstack([np.full((len(X[::7]), 2), 0.1), np.zeros((9, 4))])
    reg = KernelAttentionRegressor("gaussian", 1.5, degree=1).fit(X, y)
    mean = reg.predict(Q)
    dropped, _, _ = min_norm_fit(X, y, Q, "gaussian", 1.5, design_of=lambda Z: Z[:, :5])
    assert_allclose(mean, dropped[:, 0], rtol=1e-9)
    for q, fit in zip(Q, mean, strict=True):
        p = attention(X, q, "gaussian", 1.5, np.ones(len(X)))
        root = np.sqrt(p / p.sum())[:, None]
        design = np.hstack([np.ones((len(X), 1)), (X - q) / 1.5]) * root
        coef = np.linalg.lstsq(design, y[:, None] * root, rcond=1e-10)[0]
        assert_allclose(coef[0, 0], fit, rtol=1e-9)


def test_fewer_neighbours_than_features_get_a_slope():
    # Three features; the boxcar window of each query holds two keys: a
    # design of rank 1, whose fit is the line through them, and no warning.
    X = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, 0.2], [10.0, 0.0, 0.0], [11, 1, 0]])
    y = np.array([1.0, 3.0, 0.0, -2.0])
    Q = np.array([[0.3, 0.2, 0.1], [10.5, 0.4, -0.2]])
    for algorithm in PATHS:
        reg = KernelAttentionRegressor("boxcar", 2.0, algorithm=algorithm, degree=1)
        reg.fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mean = reg.predict(Q)
        expected, _, _ = min_norm_fit(X, y, Q, "boxcar", 2.0)
        assert_allclose(mean, expected[:, 0], rtol=1e-10)
        # Along the line through the two keys, at the projection of the query.
        t = (Q[0] - X[0]) @ (X[1] - X[0]) / np.sum((X[1] - X[0]) ** 2)
        assert_allclose(mean[0], 1.0 + 2.0 * t)


def test_only_designs_of_rank_zero_warn():
    X, y, _ = one_hot_data()
    # Identical keys: the weight of the last query is on keys at one point.
    X = np.vstack([X, np.tile([[9.0, 9.0, 1.0, 0.0, 0.0, 0.0]], (3, 1))])
    y = np.concatenate([y, [1.0, 2.0, 6.0]])
    Q = np.vstack([X[:4], [[9.1, 9.0, 1.0, 0.0, 0.0, 0.0]]])
    reg = KernelAttentionRegressor("epanechnikov", 1.5, degree=1).fit(X, y)
    with pytest.warns(LocalLinearFallbackWarning) as record:
        mean = reg.predict(Q)
    message = record.pop(LocalLinearFallbackWarning).message
    assert (message.n_singular, message.n_queries) == (1, 5)
    assert message.n_rank_deficient == 4  # the one-hot block is collinear
    assert_allclose(mean[-1], 3.0)  # the local mean of the identical keys


def test_cv_reports_the_rank_deficient_fraction_and_matches_refitting():
    X, y, _ = one_hot_data(40)
    grid = [1.0, 2.0]
    reg = KernelAttentionRegressorCV("gaussian", grid, degree=1).fit(X, y)
    assert_allclose(reg.cv_results_["rank_deficient_fraction"], 1.0)
    assert_allclose(reg.cv_results_["singular_fraction"], 0.0)
    for c, h in enumerate(grid):
        errors = []
        for i in range(len(X)):
            keep = np.arange(len(X)) != i
            fit = KernelAttentionRegressor("gaussian", h, degree=1)
            errors.append(fit.fit(X[keep], y[keep]).predict(X[i : i + 1])[0] - y[i])
        assert_allclose(reg.cv_results_["loo_mse"][c], np.mean(np.square(errors)))
    folds = list(KFold(4, shuffle=True, random_state=0).split(X))
    reg = KernelAttentionRegressorCV("gaussian", grid, degree=1, cv=folds).fit(X, y)
    assert_allclose(reg.cv_results_["rank_deficient_fraction"], 1.0)
    drop_first = KernelAttentionRegressorCV("gaussian", grid, degree=1)
    results = drop_first.fit(X[:, :5], y).cv_results_
    assert_allclose(results["rank_deficient_fraction"], 0.0)


def test_full_and_drop_first_one_hot_agree_on_real_data():
    # Grunfeld's investment data: eleven firms (one-hot encoded, in full or
    # without the first), value, capital and year standardised; the log of
    # the investment. 3-fold shuffled R^2 of the CV estimator (each fold
    # learns fourteen widths behind the guard: three folds keep the test
    # within seconds, and agree to 1e-4 as five do to 1e-3).
    sm = pytest.importorskip("statsmodels.api")
    data = sm.datasets.grunfeld.load_pandas().data
    numeric = data[["value", "capital", "year"]]
    numeric = ((numeric - numeric.mean()) / numeric.std()).to_numpy()
    firm = data["firm"].astype("category")
    y = np.log(data["invest"].to_numpy())
    cv = KFold(3, shuffle=True, random_state=0)
    scores = {}
    for drop_first in (False, True):
        one_hot = pd.get_dummies(firm, drop_first=drop_first).to_numpy(float)
        X = np.hstack([numeric, one_hot])
        reg = KernelAttentionRegressorCV(degree=1)
        scores[drop_first] = quietly(cross_val_score, reg, X, y, cv=cv).mean()
    assert scores[False] > 0.95
    assert abs(scores[False] - scores[True]) < 0.01


def test_off_the_span_the_fit_shifts_with_the_values():
    # A query with no category at all is off the span of the keys' one-hot
    # deviations: the design centred on the local mean takes no slope along
    # the undetermined direction, so that the fit moves with a shift of the
    # values (the minimum-norm solution on [1, k - q] would shrink the
    # intercept towards zero instead, and depend on the origin of y).
    X, y, _ = one_hot_data()
    Q = one_hot_data(6, seed=3)[0]
    Q[:, 2:] = 0.0
    reg = KernelAttentionRegressor("gaussian", 1.0, degree=1)
    mean = reg.fit(X, y).predict(Q)
    assert_allclose(reg.fit(X, y + 1000.0).predict(Q), mean + 1000.0, rtol=1e-10)
    p = attention(X, Q[0], "gaussian", 1.0, np.ones(len(X)))
    root = np.sqrt(p / p.sum())[:, None]
    design = np.hstack([np.ones((len(X), 1)), X - Q[0]]) * root
    shifted = np.linalg.lstsq(design, (y[:, None] + 1000.0) * root, rcond=1e-10)[0]
    assert abs(shifted[0, 0] - (mean[0] + 1000.0)) > 1.0
