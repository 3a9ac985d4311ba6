"""attention_weights(X, sparse=...): the weights predict uses, dense and sparse."""

import warnings

import numpy as np
import pytest
from _memory import traced_peak
from _reference import FORMULAS, local_fit, safeguarded_fit
from numpy.testing import assert_allclose, assert_array_equal
from scipy.sparse import csr_array

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._engine import _attention
from sklearn_kernelpool._engine import _weight_rows as _weights

PATHS = ["brute", "kd_tree", "ball_tree"]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(200, 2))
    Y = np.column_stack([np.sin(5 * X[:, 0]) + X[:, 1], np.cos(4 * X[:, 1])])
    w = rng.uniform(0.2, 3.0, size=200)
    w[::7] = 0.0
    Q = rng.uniform(-0.3, 1.3, size=(150, 2))  # some outside every support
    return X, Y, w, Q


def quietly(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return func(*args, **kwargs)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
@pytest.mark.parametrize("sparse", [False, True])
def test_weights_pool_to_the_predictions(data, path, degree, on_empty, sparse):
    X, Y, w, Q = data
    reg = KernelAttentionRegressor(
        "epanechnikov", bandwidth=0.15, degree=degree, on_empty=on_empty
    )
    reg.set_params(algorithm=path).fit(X, Y, sample_weight=w)
    weights = quietly(reg.attention_weights, Q, sparse=sparse)
    pred = quietly(reg.predict, Q)
    assert isinstance(weights, csr_array if sparse else np.ndarray)
    assert weights.shape == (len(Q), len(X))
    assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-10)
    assert_allclose(weights @ reg.values_, pred, rtol=1e-9, atol=1e-10)
    dense = weights.toarray() if sparse else weights
    assert np.all(dense[:, w == 0] == 0)
    if degree == 0:
        assert np.all(dense >= 0)
    else:
        assert np.any(dense < 0)  # the equivalent kernel at the edges
    if sparse:
        assert np.all(weights.data != 0)
        assert weights.has_sorted_indices
        assert_allclose(dense, quietly(reg.attention_weights, Q), atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "cauchy", "constant"])
@pytest.mark.parametrize("degree", [0, 1])
def test_weights_of_unbounded_kernels_match_the_reference(data, kernel, degree):
    X, Y, w, Q = data
    Q = Q[:20]
    reg = KernelAttentionRegressor(kernel, bandwidth=0.2, degree=degree)
    weights = quietly(reg.fit(X, Y, sample_weight=w).attention_weights, Q)
    if degree == 0:
        *_, expected = local_fit(X, Y, Q, FORMULAS[kernel], 0.2, w)
    else:
        # The queries beyond the keys get the safeguard's shrunk slopes.
        expected = safeguarded_fit(X, Y, Q, FORMULAS[kernel], 0.2, w)["weights"]
    assert_allclose(weights, expected, rtol=1e-8, atol=1e-12)
    assert_allclose(weights @ Y, quietly(reg.predict, Q), rtol=1e-10, atol=1e-12)
    sparse = quietly(reg.attention_weights, Q, sparse=True)
    assert_allclose(sparse.toarray(), weights, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("sparse", [False, True])
def test_nan_fallback_rows(path, sparse):
    X = np.array([[0.0], [1.0], [2.0]])
    reg = KernelAttentionRegressor(
        "boxcar", bandwidth=0.5, on_empty="nan", algorithm=path
    ).fit(X, [0.0, 1.0, 2.0])
    with pytest.warns(EmptyNeighborhoodWarning) as rec:
        weights = reg.attention_weights([[0.1], [9.0]], sparse=sparse)
    warning = rec.pop(EmptyNeighborhoodWarning).message
    assert (warning.n_empty, warning.n_queries) == (1, 2)
    dense = weights.toarray() if sparse else weights
    assert_array_equal(dense[0], [1.0, 0.0, 0.0])
    assert np.all(np.isnan(dense[1]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dtype_follows_the_training_keys(data, dtype):
    X, Y, w, Q = data
    reg = KernelAttentionRegressor("gaussian", bandwidth=0.2, degree=1)
    reg.fit(X.astype(dtype), Y, sample_weight=w)
    for sparse in (False, True):
        weights = quietly(reg.attention_weights, Q.astype(dtype), sparse=sparse)
        assert weights.dtype == dtype


def test_effective_number_of_neighbours():
    # On a grid of unit spacing the gaussian of width h spans about
    # 2 sqrt(pi) h keys: 1 / sum(w**2) of a row.
    x = np.arange(1000.0)[:, None]
    for h in (2.0, 10.0):
        reg = KernelAttentionRegressor(bandwidth=h).fit(x, x[:, 0])
        w = reg.attention_weights([[500.0]])
        assert_allclose(1 / np.sum(w**2, axis=1), 2 * np.sqrt(np.pi) * h, rtol=1e-3)


def test_sparse_tree_weights_never_go_dense():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(50_000, 2))
    Q = rng.uniform(size=(20_000, 2))
    reg = KernelAttentionRegressor(kernel="epanechikov", bandwidth=0.01)
    reg.fit(X, X[:, 0])
    assert reg.algorithm_ == "kd_tree"
    weights, peak = traced_peak(lambda: reg.attention_weights(Q, sparse=True))
    # About 16 neighbours a query: 320 000 non-zeros, 4 MB; dense, 8 GB.
    assert weights.nnz < 30 * len(Q)
    assert peak < 40 * 2**20


@pytest.mark.parametrize("degree", [0, 1])
def test_a_dense_matrix_too_large_for_memory_is_refused(degree):
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(200_000, 1))
    Q = rng.uniform(size=(2_000_000, 1))  # 3.2 TB of float64 weights
    reg = KernelAttentionRegressor("epanechikov", bandwidth=1e-6, degree=degree)
    reg.fit(X, X[:, 0])
    with pytest.raises(MemoryError, match="sparse=True"):
        reg.attention_weights(Q)


def test_a_failed_allocation_is_explained(data, monkeypatch):
    # Where the platform does not tell its memory, NumPy's own MemoryError
    # is caught and explained.
    X, Y, _, Q = data
    reg = KernelAttentionRegressor("epanechikov", bandwidth=0.3).fit(X, Y)

    def fail(*args, **kwargs):
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(_weights, "physical_memory", lambda: None)
    monkeypatch.setattr(_attention, "run_chunks", fail)
    with pytest.raises(MemoryError, match="sparse=True, which stores"):
        reg.attention_weights(Q)


@pytest.mark.parametrize("sparse", [1, "no", None])
def test_sparse_is_validated(data, sparse):
    X, Y, _, Q = data
    reg = KernelAttentionRegressor().fit(X, Y)
    with pytest.raises(ValueError, match="sparse must be True or False"):
        reg.attention_weights(Q, sparse=sparse)


def test_needs_a_fitted_estimator():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        KernelAttentionRegressor().attention_weights([[0.0]])
