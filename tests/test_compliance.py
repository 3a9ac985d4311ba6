"""Scores, attributes, messages and persistence that scikit-learn's
conventions and the documentation promise."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.optimize import approx_fprime

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV
from sklearn_kernelpool.kernels import KERNELS


def _mixed_data(n=60, seed=0):
    """A slope in one continuous feature, a shift by one categorical feature
    and a categorical feature of noise."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 2))
    informative = rng.integers(0, 3, n)
    noise = rng.integers(0, 2, n)
    y = 1.5 * x[:, 0] + np.sin(2 * x[:, 1]) + informative
    y += rng.normal(scale=0.2, size=n)
    return np.column_stack([x, informative, noise]), y


def _refitted_loo(reg, X, y):
    """Leave-one-out predictions of ``reg``'s parameters, refitting without
    each row."""
    pred = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        pred[i] = reg.fit(X[keep], y[keep]).predict(X[i : i + 1])[0]
    return pred


@pytest.mark.parametrize("degree", [1, "auto"])
def test_categorical_per_feature_score_is_of_the_refitted_degree(degree):
    # The widths and lambdas are learned, and scored, on the leave-one-out
    # error of the degree that is refitted.
    X, y = _mixed_data()
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.3, 1.0],
        degree=degree,
        categorical_features=[2, 3],
        categorical_bandwidths=[0.1, 0.5],
        per_feature=True,
    ).fit(X, y)
    assert cv.degree_ == 1 and cv.per_feature_
    best = cv.best_estimator_
    assert best.degree == 1
    assert_allclose(best.bandwidth, cv.bandwidth_)
    pred = _refitted_loo(KernelAttentionRegressor(**best.get_params()), X, y)
    assert_allclose(cv.best_score_, -np.mean((pred - y) ** 2), rtol=1e-8)


@pytest.mark.parametrize("kernel", ["gaussian", "cauchy", "exponential"])
def test_categorical_per_feature_score_is_of_the_refitted_degree_gradient(kernel):
    from sklearn_kernelpool._categorical_widths import loo_objective

    X, y = _mixed_data(n=30, seed=1)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2, len(y))
    Y = np.column_stack([y, rng.normal(size=len(y))])
    codes = X[:, 2:].astype(int)
    theta = np.log([0.7, 1.3, 0.2, 0.6])

    def objective(t):
        return loo_objective(t, X[:, :2], codes, Y, w, KERNELS[kernel], degree=1)

    numeric = approx_fprime(theta, lambda t: objective(t)[0], 1e-7)
    assert_allclose(objective(theta)[1], numeric, rtol=1e-5, atol=1e-8)
