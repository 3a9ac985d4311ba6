"""Memory of local-linear pooling (degree=1) with many features.

Where the moment matrix (``(d + 1)(d + 2) / 2 + ...`` columns per key) would
exceed its share of ``working_memory``, each query's local normal equations
are summed from its weighted keys, one batch of queries at a time: the
results equal those of the moment matrix, the traced peak stays within
``working_memory`` plus the inputs, a query whose system alone exceeds
``working_memory`` is solved alone under a LocalLinearMemoryWarning, and one
that exceeds the physical memory is refused.
"""

import warnings

import numpy as np
import pytest
from _memory import traced_peak
from numpy.testing import assert_allclose
from sklearn import config_context

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
    LocalLinearMemoryWarning,
)
from sklearn_kernelpool._engine import _centred_fit
from sklearn_kernelpool._engine import _moments as _moment_pooling
from sklearn_kernelpool._engine import _weight_rows as _weights
from sklearn_kernelpool._held_out import _sums as _held_out_sums

MIB = 2**20
PATHS = ["brute", "kd_tree", "ball_tree"]


def calls(reg, Q):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        warnings.simplefilter("ignore", LocalLinearMemoryWarning)
        return [
            reg.predict(Q),
            *reg.predict(Q, return_std=True),
            reg.attention_weights(Q),
            reg.attention_weights(Q, sparse=True).toarray(),
        ]


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_per_query_equations_equal_the_moment_matrix(algorithm, dtype, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(80, 3)).astype(dtype)
    X[:, 2] = 1.0 - X[:, 1]  # a collinear pair: rank-deficient designs
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2
    Q = np.vstack([rng.uniform(0.1, 0.9, size=(30, 3)), [[5.0, 5.0, 5.0]]])
    Q = Q.astype(dtype)
    w = rng.uniform(0.5, 2.0, size=80)
    reg = KernelAttentionRegressor(
        "epanechnikov", 0.4, algorithm=algorithm, degree=1, on_empty="nearest"
    ).fit(X, y, sample_weight=w)
    pool = reg._pool
    assert pool.moments.uses_moment_matrix()
    expected = calls(reg, Q)
    monkeypatch.setattr(_moment_pooling, "MOMENT_MATRIX_FLOOR", 0)
    with config_context(working_memory=1e-6):
        assert not pool.moments.uses_moment_matrix()
        got = calls(reg, Q)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    for a, b in zip(got, expected, strict=True):
        assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.slow
def test_many_features_few_queries_stay_within_a_few_hundred_mib():
    # 2,000 features: the moment matrix would take 8 n (d + 1)(d + 2) / 2
    # bytes, 6.4 GB for 400 keys.
    rng = np.random.default_rng(0)
    n, d = 400, 2000
    X = rng.normal(size=(n, d))
    y = X[:, 0] + rng.normal(size=n)
    reg = KernelAttentionRegressor(bandwidth=np.sqrt(d), degree=1).fit(X, y)
    assert 8 * n * reg._pool.moments.moment_columns > 6e9
    Q = X[:2] + 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a fallback nor one at a time
        (mean, std), peak = traced_peak(lambda: reg.predict(Q, return_std=True))
    assert peak <= _centred_fit.fit_bytes(n, d) + 4 * X.nbytes + 4 * MIB
    assert peak < 300 * MIB
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))


def test_hundreds_of_features_within_working_memory():
    rng = np.random.default_rng(0)
    n, d = 5000, 200
    X = rng.normal(size=(n, d))
    y = X[:, 0] + rng.normal(size=n)
    reg = KernelAttentionRegressor(bandwidth=np.sqrt(d), degree=1).fit(X, y)
    Q = X[:10] + 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mean, peak = traced_peak(lambda: reg.predict(Q), working_memory=64)
    assert peak <= 64 * MIB + 4 * X.nbytes
    # The fit of one query by a loop: the minimum-norm weighted least squares.
    u = np.sqrt(np.sum((X - Q[0]) ** 2, axis=1)) / np.sqrt(d)
    root = np.sqrt(np.exp(-0.5 * u * u))[:, None]
    design = np.hstack([np.ones((n, 1)), X - Q[0]]) * root
    coef = np.linalg.lstsq(design, y[:, None] * root, rcond=None)[0]
    assert_allclose(mean[0], coef[0, 0], rtol=1e-8)


def test_a_query_over_working_memory_goes_alone_with_one_warning():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 300))
    y = X[:, 0] + rng.normal(size=60)
    reg = KernelAttentionRegressor(bandwidth=30.0, degree=1).fit(X, y)
    Q = X[:6] + 0.01
    expected = reg.predict(Q)
    with config_context(working_memory=1):
        with pytest.warns(LocalLinearMemoryWarning, match="one at a time") as record:
            got = reg.predict(Q)
            weights = reg.attention_weights(Q)
    assert len(record) == 2  # one per call
    message = record[0].message
    assert message.row_bytes == _centred_fit.fit_bytes(60, 300)
    assert message.row_bytes > message.working_memory_bytes
    assert_allclose(got, expected, rtol=1e-10)
    assert_allclose(weights @ y, expected, rtol=1e-10)


def test_a_query_over_the_physical_memory_is_refused(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 300))
    reg = KernelAttentionRegressor(bandwidth=30.0, degree=1).fit(X, X[:, 0])
    monkeypatch.setattr(_weights, "physical_memory", lambda: 2 * MIB)
    for call in (reg.predict, reg.attention_weights):
        with config_context(working_memory=1):  # no moment matrix
            with pytest.raises(MemoryError, match="300 features.*physical memory"):
                call(X[:2])


def test_cv_sums_over_the_physical_memory_are_refused(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 20))
    y = X[:, 0]
    search = KernelAttentionRegressorCV("gaussian", [3.0, 6.0], degree=1, n_jobs=1)
    # 231 + 22 columns of moments for 20 features and the sum of the squared
    # weights, two candidates, 50 points and three copies: 0.6 MiB.
    held = 8 * 50 * 254 * 2 * 3
    monkeypatch.setattr(_held_out_sums, "physical_memory", lambda: held - 1)
    with pytest.raises(MemoryError, match=r"50 points and 2 candidates.*degree=1"):
        search.fit(X, y)
    monkeypatch.setattr(_held_out_sums, "physical_memory", lambda: held)
    search.fit(X, y)
