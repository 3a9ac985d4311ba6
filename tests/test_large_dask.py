"""Dask arrays in the cross-validated estimators: the large-table selection
of a dask array equals that of the same rows in memory, its predictions of
dask queries run chunk by chunk, and the exact search refuses them."""

import numpy as np
import pytest

from sklearn_kernelpool import KernelAttentionClassifierCV, KernelAttentionRegressorCV

da = pytest.importorskip("dask.array")
from _dask import local_client  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning"),
]


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2] + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.fixture(scope="module")
def client():
    with local_client() as client:
        yield client


def test_a_dask_fit_equals_the_fit_in_memory(client):
    X, y = _data(1500)
    weights = np.where(np.arange(1500) % 7 == 0, 0.0, 1.0)
    params = {"subsample": 500, "random_state": 2}
    in_memory = KernelAttentionRegressorCV(**params).fit(X, y, sample_weight=weights)
    chunked = KernelAttentionRegressorCV(**params).fit(
        da.from_array(X, chunks=300),
        da.from_array(y, chunks=300),
        sample_weight=da.from_array(weights, chunks=300),
    )
    for key in ("mean_test_score", "param_bandwidth", "param_kernel"):
        np.testing.assert_array_equal(
            chunked.cv_results_[key], in_memory.cv_results_[key]
        )
    assert chunked.best_params_ == in_memory.best_params_
    Q = _data(400, 1)[0]
    predicted = chunked.predict(da.from_array(Q, chunks=100))
    assert isinstance(predicted, da.Array)
    np.testing.assert_array_equal(predicted.compute(), in_memory.predict(Q))


def test_the_classifier_fits_dask_arrays(client):
    X, y = _data(1200, 3)
    labels = (y > 0.3).astype(int)
    params = {"subsample": 500, "random_state": 0, "kernels": ("gaussian",)}
    in_memory = KernelAttentionClassifierCV(**params).fit(X, labels)
    distributed = pytest.importorskip("distributed")
    with distributed.get_task_stream(client) as stream:
        chunked = KernelAttentionClassifierCV(**params).fit(
            da.from_array(X, chunks=400), da.from_array(labels, chunks=400)
        )
    assert "_split_rows" in _task_names(stream.data)
    np.testing.assert_array_equal(
        chunked.cv_results_["mean_test_score"], in_memory.cv_results_["mean_test_score"]
    )
    np.testing.assert_array_equal(chunked.predict_proba(X), in_memory.predict_proba(X))


def _task_names(records):
    """The functions of the tasks of a task stream, by their keys."""
    names = []
    for record in records:
        key = record["key"]
        key = key[0] if isinstance(key, tuple) else key
        names.append(str(key).split("-", 1)[0])
    return names


def test_the_held_out_rows_are_scored_in_blocks_on_the_workers(client):
    distributed = pytest.importorskip("distributed")
    from sklearn_kernelpool._utils._row_blocks import BLOCK_ROWS

    X, y = _data(2000)  # the subsample selects the Gaussian: two finalists
    params = {"subsample": 500, "random_state": 1}
    in_memory = KernelAttentionRegressorCV(**params).fit(X, y)
    with distributed.get_task_stream(client) as stream:
        chunked = KernelAttentionRegressorCV(**params).fit(
            da.from_array(X, chunks=500), da.from_array(y, chunks=500)
        )
    names = _task_names(stream.data)
    # The second-stage searches of the dense engines score their held-out
    # rows in blocks, as tasks (those of the neighbour lists in one call).
    blocks = -(-chunked.n_held_out_ // BLOCK_ROWS)
    assert blocks > 1
    assert names.count("_split_rows") >= blocks
    assert names.count("_split_rows") % blocks == 0
    np.testing.assert_array_equal(
        chunked.cv_results_["mean_test_score"], in_memory.cv_results_["mean_test_score"]
    )
    assert chunked.best_params_ == in_memory.best_params_
    np.testing.assert_array_equal(chunked.predict(X), in_memory.predict(X))


def test_without_a_distributed_client_the_blocks_run_on_the_default_scheduler(
    monkeypatch,
):
    import dask

    from sklearn_kernelpool._selection import _large_dask

    calls = []
    mapper = _large_dask.map_on_dask

    def counted(function, shared, blocks):
        calls.append(len(blocks))
        return mapper(function, shared, blocks)

    monkeypatch.setattr(_large_dask, "_client", lambda: None)
    monkeypatch.setattr("sklearn_kernelpool._selection._large.map_on_dask", counted)
    X, y = _data(1500, 5)
    params = {"subsample": 500, "random_state": 0, "kernels": ("epanechnikov",)}
    in_memory = KernelAttentionRegressorCV(**params).fit(X, y)
    with dask.config.set(scheduler="threads"):
        chunked = KernelAttentionRegressorCV(**params).fit(
            da.from_array(X, chunks=500), da.from_array(y, chunks=500)
        )
    assert calls and min(calls) > 1
    np.testing.assert_array_equal(
        chunked.cv_results_["mean_test_score"], in_memory.cv_results_["mean_test_score"]
    )
    assert chunked.best_params_ == in_memory.best_params_


@pytest.mark.parametrize("subsample", [None, "auto", 2000])
def test_the_exact_search_refuses_dask_arrays(client, subsample):
    X, y = _data(600)
    reg = KernelAttentionRegressorCV(subsample=subsample)
    with pytest.raises(ValueError, match="dask arrays only for the large-table"):
        reg.fit(da.from_array(X, chunks=200), da.from_array(y, chunks=200))
