"""Memory bounds that follow what the data holds, and an unbounded budget.

The tree paths cut their chunks from the neighbours each query actually
has, the sparse attention weights refuse an output larger than memory before
building it, and ``working_memory=float("inf")`` is a valid setting of every
path.
"""

import warnings

import numpy as np
import pytest
from _array_api import strict_namespace
from _memory import traced_peak
from numpy.testing import assert_allclose
from scipy.sparse import csr_array
from sklearn import config_context
from sklearn.model_selection import KFold

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._engine import _weight_rows as _weights

TREES = ["kd_tree", "ball_tree"]


def _zero_inflated(n_features, seed=0):
    """Keys spread over [-1000, 1000], a tenth of them exactly at zero."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1e3, 1e3, size=(20_000, n_features))
    X[:2_000] = 0.0
    return X, rng.normal(size=len(X))


@pytest.mark.parametrize("algorithm", TREES)
@pytest.mark.parametrize("n_features", [1, 2])
def test_tree_chunks_follow_the_neighbours_met(algorithm, n_features):
    # A sample of the keys sees about 200 neighbours per key; the queries at
    # zero have 2,000 each. Chunks sized from the sample took five times the
    # budget; chunks cut from the counted neighbours stay within it.
    X, y = _zero_inflated(n_features)
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=1.0, algorithm=algorithm)
    reg.fit(X, y)
    Q = np.zeros((2_000, n_features))
    expected = np.full(2_000, y[np.linalg.norm(X, axis=1) < 1.0].mean())
    budget = 2 * 2**20
    for call in (lambda: reg.predict(Q), lambda: reg.predict(Q, return_std=True)[0]):
        pred, peak = traced_peak(call, working_memory=budget / 2**20)
        assert_allclose(pred, expected, rtol=1e-12)
        assert peak < budget + pred.nbytes + 2**18


@pytest.mark.parametrize("algorithm", TREES)
def test_tree_chunks_do_not_depend_on_the_order_of_the_queries(algorithm):
    # Sparse queries first, then dense ones: every chunk is cut from its own
    # queries' counts.
    X, y = _zero_inflated(2)
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=1.0)
    reg.set_params(algorithm=algorithm).fit(X, y)
    rng = np.random.default_rng(1)
    Q = np.vstack([rng.uniform(-1e3, 1e3, size=(1_000, 2)), np.zeros((1_000, 2))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        pred, peak = traced_peak(lambda: reg.predict(Q), working_memory=1)
        assert_allclose(pred, reg.set_params(algorithm="brute").fit(X, y).predict(Q))
    assert peak < 2**20 + pred.nbytes + 2**18


@pytest.mark.parametrize("algorithm", TREES)
def test_a_query_whose_neighbours_exceed_the_budget_is_a_chunk_alone(algorithm):
    X, y = _zero_inflated(2)
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=1.0, algorithm=algorithm)
    reg.fit(X, y)
    Q = np.zeros((5, 2))
    with config_context(working_memory=0.01):  # 10 KiB, 2,000 neighbours each
        batches, pairs = reg._pool._batches(Q)
        assert [(b.start, b.stop) for b in batches] == [(i, i + 1) for i in range(5)]
        assert pairs >= 5 * 2_000
        expected = y[np.linalg.norm(X, axis=1) < 1.0].mean()
        assert_allclose(reg.predict(Q), np.full(5, expected), rtol=1e-12)


def _sample_weight_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 2))
    return X, X[:, 0] + 0.1 * rng.normal(size=120), rng.uniform(0.5, 2.0, size=120)


INF = float("inf")


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("degree", [0, 1])
def test_infinite_working_memory_on_every_path(algorithm, degree):
    # float("inf") is what sklearn.set_config accepts for "no limit".
    X, y, w = _sample_weight_data()
    reg = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.8, algorithm=algorithm, degree=degree
    ).fit(X, y, sample_weight=w)
    Q = np.vstack([X[:40], [[50.0, 50.0]]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        expected = [
            reg.predict(Q),
            *reg.predict(Q, return_std=True),
            reg.attention_weights(Q),
            reg.attention_weights(Q, sparse=True).toarray(),
        ]
        with config_context(working_memory=INF):
            got = [
                reg.predict(Q),
                *reg.predict(Q, return_std=True),
                reg.attention_weights(Q),
                reg.attention_weights(Q, sparse=True).toarray(),
            ]
    for a, b in zip(got, expected, strict=True):
        assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_infinite_working_memory_classifier_and_cv():
    X, y, w = _sample_weight_data()
    clf = KernelAttentionClassifier(kernel="boxcar", algorithm="kd_tree")
    expected = clf.fit(X, y > 0, sample_weight=w).predict_proba(X)
    for cv in (None, KFold(3)):
        cv_reg = KernelAttentionRegressorCV(
            kernels=["epanechnikov", "gaussian"], bandwidths=[0.3, 1.0], cv=cv
        )
        scores = cv_reg.fit(X, y, sample_weight=w).cv_results_["mean_test_score"]
        with config_context(working_memory=INF):
            assert_allclose(clf.predict_proba(X), expected)
            got = cv_reg.fit(X, y, sample_weight=w).cv_results_["mean_test_score"]
        assert_allclose(got, scores, rtol=1e-12)


def test_infinite_working_memory_on_the_array_api_path():
    xp = strict_namespace()
    X, y, w = _sample_weight_data()
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.8)
    expected = reg.fit(X, y, sample_weight=w).predict(X)
    with config_context(array_api_dispatch=True, working_memory=INF):
        reg.fit(xp.asarray(X), xp.asarray(y), sample_weight=xp.asarray(w))
        got = np.asarray(reg.predict(xp.asarray(X))._array)
    assert_allclose(got, expected, rtol=1e-10)


def _far_queries():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2_000, 2))
    y = X[:, 0]
    return X, y, np.vstack([X[:10], rng.normal(size=(500, 2)) + 100.0])


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("on_empty", ["mean", "nan"])
def test_sparse_weights_larger_than_memory_are_refused_first(
    algorithm, on_empty, monkeypatch
):
    # 500 queries far from every key get a weight on each of the 2,000 keys:
    # a million entries (15 MiB), against 4 MiB of "physical memory".
    X, y, Q = _far_queries()
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.2)
    reg.set_params(algorithm=algorithm, on_empty=on_empty).fit(X, y)
    monkeypatch.setattr(_weights, "physical_memory", lambda: 4 * 2**20)
    with pytest.raises(MemoryError) as excinfo:
        reg.attention_weights(Q, sparse=True)
    message = str(excinfo.value)
    assert "(510, 2000)" in message
    assert "GiB" in message
    assert f"on_empty={on_empty!r}" in message
    assert "on_empty='nearest'" in message
    # Refused before any row of weights was built: at most the counting
    # pass's working memory (the 4 MiB buffer of the brute path, and for
    # queries this far from the keys the exact distances of a few rows at a
    # time) was used, well below the 15 MiB of the output.
    _, peak = traced_peak(
        lambda: pytest.raises(MemoryError, reg.attention_weights, Q, sparse=True)
    )
    assert peak < 10 * 2**20


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
def test_sparse_weights_that_fit_are_given(algorithm, monkeypatch):
    # The bound of every pair (2000 x 510) exceeds the limit; the counted
    # weights (the support of each query, the nearest key of the far ones)
    # fit it.
    X, y, Q = _far_queries()
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.2)
    reg.set_params(algorithm=algorithm, on_empty="nearest").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        expected = reg.attention_weights(Q)
        monkeypatch.setattr(_weights, "physical_memory", lambda: 4 * 2**20)
        got = reg.attention_weights(Q, sparse=True)
    assert isinstance(got, csr_array)
    assert_allclose(got.toarray(), expected, rtol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_the_one_dimensional_bound_on_neighbours_holds_for_every_query(seed):
    # The bound that lets one-dimensional chunks skip the count: no query,
    # inside, between or beyond the keys, has more keys in its widened
    # support than the fitted bound, which itself is met by some window.
    rng = np.random.default_rng(seed)
    keys = np.concatenate([np.zeros(300), rng.normal(size=700), np.arange(50.0)])
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.3)
    reg.set_params(algorithm="kd_tree").fit(keys[:, None], keys)
    scorer = reg._pool.scorer
    queries = np.concatenate([keys, rng.uniform(-5, 55, size=2000), [0.0]])
    scaled = queries[:, None] / 0.3
    counts = scorer.count(scaled)
    assert counts.max() <= scorer.max_neighbors
    assert scorer.max_neighbors <= counts.max() + 1  # the bound is tight
