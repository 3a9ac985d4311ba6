"""Queries and searches on a dask cluster: same numbers as without it."""

import warnings

import joblib
import numpy as np
import pytest
from _dask import local_client
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(400, 2))
Y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * RNG.normal(size=400)
LABELS = np.digitize(Y, [-1.0, 1.0])  # three classes
QUERIES = RNG.normal(size=(1000, 2))
CHUNK = 250


@pytest.fixture(scope="module")
def client():
    with local_client() as client:
        yield client


@pytest.fixture
def queries():
    return da.from_array(QUERIES, chunks=(CHUNK, 2))


def _chunk_by_chunk(method):
    """The NumPy result, chunk by chunk like the dask graph."""
    return np.concatenate(
        [method(QUERIES[i : i + CHUNK]) for i in range(0, len(QUERIES), CHUNK)]
    )


def _ran_on_the_cluster(client, compute):
    with distributed.get_task_stream(client) as tasks:
        result = compute()
    assert len(tasks.data) > 0
    return result


def test_map_blocks_predict(client, queries):
    reg = KernelAttentionRegressor(bandwidth=0.3).fit(X, Y)
    lazy = queries.map_blocks(reg.predict, drop_axis=1, dtype=np.float64)
    got = _ran_on_the_cluster(client, lazy.compute)
    assert_array_equal(got, _chunk_by_chunk(reg.predict))
    # Chunks change the BLAS blocking, so the whole array agrees to rounding.
    assert_allclose(got, reg.predict(QUERIES), rtol=1e-12, atol=1e-12)


def test_map_blocks_predict_proba(client, queries):
    clf = KernelAttentionClassifier(bandwidth=0.3).fit(X, LABELS)
    n_classes = len(clf.classes_)
    lazy = queries.map_blocks(
        clf.predict_proba, chunks=(queries.chunks[0], (n_classes,)), dtype=np.float64
    )
    got = _ran_on_the_cluster(client, lazy.compute)
    assert got.shape == (len(QUERIES), n_classes)
    assert_array_equal(got, _chunk_by_chunk(clf.predict_proba))
    assert_allclose(got, clf.predict_proba(QUERIES), rtol=1e-12, atol=1e-12)


def test_parallel_post_fit(client, queries):
    wrappers = pytest.importorskip("dask_ml.wrappers")
    reg = KernelAttentionRegressor(bandwidth=0.3).fit(X, Y)
    lazy = wrappers.ParallelPostFit(KernelAttentionRegressor(bandwidth=0.3))
    lazy.fit(X, Y)
    predicted = lazy.predict(queries)
    assert isinstance(predicted, da.Array)
    got = _ran_on_the_cluster(client, predicted.compute)
    assert_array_equal(got, _chunk_by_chunk(reg.predict))

    clf = KernelAttentionClassifier(bandwidth=0.3).fit(X, LABELS)
    lazy = wrappers.ParallelPostFit(KernelAttentionClassifier(bandwidth=0.3))
    lazy.fit(X, LABELS)
    got = _ran_on_the_cluster(client, lazy.predict_proba(queries).compute)
    assert_array_equal(got, _chunk_by_chunk(clf.predict_proba))
    assert_array_equal(lazy.predict(QUERIES), clf.predict(QUERIES))


def test_grid_search_under_the_dask_backend(client):
    grid = {"bandwidth": [0.1, 0.3, 1.0], "kernel": ["gaussian", "cauchy"]}
    cv = KFold(4, shuffle=True, random_state=0)
    local = GridSearchCV(KernelAttentionRegressor(), grid, cv=cv).fit(X, Y)
    search = GridSearchCV(KernelAttentionRegressor(), grid, cv=cv, n_jobs=-1)
    with joblib.parallel_backend("dask"):
        _ran_on_the_cluster(client, lambda: search.fit(X, Y))
    assert search.best_params_ == local.best_params_
    assert_allclose(
        search.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"]
    )
    assert_array_equal(search.predict(QUERIES), local.predict(QUERIES))


@pytest.mark.parametrize("degree", [0, 1])
def test_regressor_cv_under_the_dask_backend(client, degree):
    params = dict(bandwidths=8, cv=5, degree=degree, n_jobs=2)
    local = KernelAttentionRegressorCV(**params).fit(X, Y)
    with joblib.parallel_backend("dask"):
        search = KernelAttentionRegressorCV(**params).fit(X, Y)
    assert search.best_params_ == local.best_params_
    assert_array_equal(
        search.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"]
    )
    with warnings.catch_warnings():
        # (degree 1: the queries far in the tails get shrunk slopes)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        assert_array_equal(search.predict(QUERIES), local.predict(QUERIES))
