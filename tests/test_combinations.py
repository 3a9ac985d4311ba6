"""The options of the estimators together: adaptive widths, categorical
features and sparse input."""

import math

import numpy as np
import pytest
from _reference import FORMULAS
from scipy.sparse import csr_matrix

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV


def adaptive_categorical_fit(X, codes, y, Q, q_codes, alpha, k, lam, weights):
    """Local-constant pooling by a loop: width ``d_k`` (the distance in the
    continuous columns to the k-th nearest key), times the Li-Racine factor
    ``lam ** (number of differing categories)``."""
    out = np.empty(len(Q))
    for j, q in enumerate(Q):
        d = np.sqrt(((X - q) ** 2).sum(axis=1))
        radius = np.sort(d)[k - 1]
        a = np.empty(len(X))
        for i in range(len(X)):
            u = d[i] / radius if radius > 0 else (0.0 if d[i] == 0 else math.inf)
            base = alpha(u) if math.isfinite(u) else 0.0
            a[i] = weights[i] * base * lam ** np.sum(codes[i] != q_codes[j])
        out[j] = a @ y / a.sum()
    return out


@pytest.mark.parametrize(
    "kernel, algorithm",
    [
        ("gaussian", "brute"),
        ("exponential", "brute"),
        ("epanechnikov", "brute"),
        ("epanechnikov", "kd_tree"),
        ("tricube", "ball_tree"),
    ],
)
def test_adaptive_widths_with_categorical_features(kernel, algorithm):
    rng = np.random.default_rng(0)
    n, m = 80, 25
    X = rng.normal(size=(n, 2))
    codes = rng.integers(0, 3, size=(n, 2))
    y = X[:, 0] + codes[:, 0] + rng.normal(scale=0.1, size=n)
    weights = rng.uniform(0.5, 2.0, size=n)
    Q = rng.normal(size=(m, 2))
    q_codes = rng.integers(0, 4, size=(m, 2))  # 3 is an unknown category
    Q[0] = X[3]  # a query on a key
    q_codes[0] = codes[3]
    lam, k = 0.3, 7
    reg = KernelAttentionRegressor(
        kernel=kernel,
        algorithm=algorithm,
        n_neighbors=k,
        categorical_features=[2, 3],
        categorical_bandwidth=lam,
    ).fit(np.hstack([X, codes]), y, sample_weight=weights)
    expected = adaptive_categorical_fit(
        X, codes, y, Q, q_codes, FORMULAS[kernel], k, lam, weights
    )
    np.testing.assert_allclose(
        reg.predict(np.hstack([Q, q_codes])), expected, rtol=1e-10, atol=1e-12
    )


def test_categorical_features_refuse_sparse_x():
    X = csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="categorical_features cannot be used"):
        KernelAttentionRegressor(categorical_features=[1]).fit(X, [1.0, 2.0, 3.0])
    dense = KernelAttentionRegressor(categorical_features=[1]).fit(
        X.toarray(), [1.0, 2.0, 3.0]
    )
    with pytest.raises(ValueError, match="categorical_features cannot be used"):
        dense.predict(X)


def test_cv_refuses_neighbour_counts_with_categorical_features():
    rng = np.random.default_rng(1)
    X = np.hstack([rng.normal(size=(30, 1)), rng.integers(0, 2, size=(30, 1))])
    search = KernelAttentionRegressorCV(n_neighbors=[3, 5], categorical_features=[1])
    with pytest.raises(ValueError, match="cannot be combined with"):
        search.fit(X, rng.normal(size=30))


def test_adaptive_widths_on_sparse_keys_equal_dense():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 4)) * (rng.uniform(size=(60, 4)) < 0.5)
    y = rng.normal(size=60)
    Q = rng.normal(size=(10, 4)) * (rng.uniform(size=(10, 4)) < 0.5)
    for degree in (0, 1):
        reg = KernelAttentionRegressor(n_neighbors=8, degree=degree)
        dense = reg.fit(X, y).predict(Q)
        sparse = reg.fit(csr_matrix(X), y).predict(csr_matrix(Q))
        np.testing.assert_allclose(sparse, dense, rtol=1e-12, atol=1e-14)


def test_degree_auto_scores_degree_zero_alone_where_local_linear_cannot_fit():
    # 20 points of 10 000 features: no local-linear slope is determined, and
    # the held-out moments would need terabytes; "auto" scores degree 0 and
    # selects it, and so does a search restricted to degree 0.
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(20, 10_000))
    y = rng.uniform(size=20)
    auto = KernelAttentionRegressorCV(bandwidths=[5.0, 10.0, 20.0]).fit(X, y)
    assert auto.degree_ == 0
    assert "param_degree" not in auto.cv_results_
    zero = KernelAttentionRegressorCV(bandwidths=[5.0, 10.0, 20.0], degree=0).fit(X, y)
    np.testing.assert_allclose(
        auto.cv_results_["mean_test_score"], zero.cv_results_["mean_test_score"]
    )
