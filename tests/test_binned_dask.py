"""algorithm="binned" on dask arrays: the map-reduce of the grid sums on a
local cluster equals the in-memory binned fit; predict maps dask queries;
the fitted model holds no rows; bad input is refused."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _dask import local_client
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
)
from sklearn_kernelpool._binned._binning import linear_bin
from sklearn_kernelpool._binned._engine import binned_columns

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

RTOL = 1e-12


@pytest.fixture(scope="module")
def client():
    with local_client() as client:
        yield client


def smooth(n, d=1, seed=0, n_outputs=None):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(6 * X.sum(axis=1)) + X[:, 0] ** 2 + 0.1 * rng.normal(size=n)
    if n_outputs is not None:
        y = np.column_stack([(j + 1) * y + j for j in range(n_outputs)])
    return X, y


def on_the_cluster(client, compute):
    with distributed.get_task_stream(client) as tasks:
        result = compute()
    assert len(tasks.data) > 0
    return result


def relative(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def same_grid(a, b):
    return (
        a.shape == b.shape
        and np.array_equal(a.lower, b.lower)
        and np.array_equal(a.step, b.step)
    )


@pytest.mark.slow  # the scale; the equality is tested on every path by default
def test_ten_million_rows_equal_the_in_memory_fit(client):
    n, chunk = 10_000_000, 1_250_000
    # The rows are drawn on the workers, partition by partition.
    rng = da.random.default_rng(0)
    X_lazy = rng.uniform(0, 1, (n, 1), chunks=(chunk, 1))
    y_lazy = da.sin(6 * X_lazy[:, 0]) + 0.1 * rng.normal(size=n, chunks=chunk)
    assert X_lazy.numblocks == (8, 1)
    params = dict(algorithm="binned", bandwidth=0.02)
    lazy = KernelAttentionRegressor(**params)
    on_the_cluster(client, lambda: lazy.fit(X_lazy, y_lazy))
    X, y = X_lazy.compute(), y_lazy.compute()
    memory = KernelAttentionRegressor(**params).fit(X, y)
    # The grid of the in-memory fit, and the grid sums of all rows at once.
    grid = lazy._pool.grid
    assert same_grid(grid, memory._pool.binned.grid)
    expected = linear_bin(grid, X, binned_columns(y[:, None], np.ones(n), y.mean()))
    assert np.all(
        np.abs(lazy._pool.sums - expected) <= RTOL * np.abs(expected).max(axis=0)
    )
    Q = np.linspace(0, 1, 201)[:, None]
    for got, want in zip(
        lazy.predict(Q, return_std=True),
        memory.predict(Q, return_std=True),
        strict=True,
    ):
        assert relative(got, want) < RTOL
    # The model holds the grid, not the rows: its pickle is a small fraction.
    assert len(pickle.dumps(lazy)) < 1e-3 * X.nbytes


# A coarse 2-D grid, the same for dask and NumPy keys.
@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.CoarseGridWarning")
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("d", [1, 2])
def test_weights_outputs_degree_and_spread(client, degree, d):
    X, y = smooth(200_000, d, seed=1, n_outputs=3)
    w = np.random.default_rng(2).uniform(0.1, 3, len(X))
    w[::7] = 0  # rows of weight zero are left out, as in memory
    # A coarser grid than the default keeps the 2-D FFTs quick.
    n_bins = None if d == 1 else 200
    params = dict(algorithm="binned", bandwidth=0.05, degree=degree, n_bins=n_bins)
    lazy = KernelAttentionRegressor(**params)
    on_the_cluster(
        client,
        lambda: lazy.fit(
            da.from_array(X, chunks=(30_000, d)),
            da.from_array(y, chunks=(50_000, 3)),
            sample_weight=da.from_array(w, chunks=40_000),
        ),
    )
    memory = KernelAttentionRegressor(**params).fit(X, y, sample_weight=w)
    assert same_grid(lazy._pool.grid, memory._pool.binned.grid)
    Q = np.random.default_rng(3).uniform(0.05, 0.95, (500, d))
    got, want = lazy.predict(Q, return_std=True), memory.predict(Q, return_std=True)
    assert got[0].shape == (500, 3)
    for a, b in zip(got, want, strict=True):
        assert relative(a, b) < RTOL
    assert lazy.algorithm_ == "binned"
    assert lazy.n_features_in_ == d
    assert lazy.bandwidth_ == 0.05


def test_predict_on_dask_queries(client):
    X, y = smooth(50_000)
    reg = KernelAttentionRegressor(algorithm="binned", bandwidth=0.05)
    reg.fit(da.from_array(X, chunks=(10_000, 1)), da.from_array(y, chunks=10_000))
    Q = np.random.default_rng(4).uniform(0, 1, (1000, 1))
    queries = da.from_array(Q, chunks=(300, 1))
    y_pred = reg.predict(queries)
    assert isinstance(y_pred, da.Array)
    assert y_pred.shape == (1000,)
    assert_array_equal(on_the_cluster(client, y_pred.compute), reg.predict(Q))
    mean, std = reg.predict(queries, return_std=True)
    assert isinstance(std, da.Array)
    want = reg.predict(Q, return_std=True)
    assert_array_equal(mean.compute(), want[0])
    assert_array_equal(std.compute(), want[1])
    # An estimator fitted in memory maps dask queries the same way, its
    # standard errors included.
    memory = KernelAttentionRegressor(bandwidth=0.05).fit(X[:2000], y[:2000])
    mean, se = memory.predict(queries, return_se=True)
    assert isinstance(se, da.Array)
    want = memory.predict(Q, return_se=True)
    assert_allclose(mean.compute(), want[0], rtol=1e-12)
    assert_allclose(se.compute(), want[1], rtol=1e-12)
    # Multi-output predictions keep their columns.
    Y = np.column_stack([y, 2 * y])
    reg.fit(da.from_array(X, chunks=(10_000, 1)), Y)
    assert reg.predict(queries).compute().shape == (1000, 2)
    with pytest.raises(ValueError, match="X has 2 features, but .* expecting 1"):
        reg.predict(da.from_array(np.zeros((10, 2))))


def test_holds_no_rows():
    X, y = smooth(20_000)
    reg = KernelAttentionRegressor(algorithm="binned", bandwidth=0.05)
    reg.fit(da.from_array(X, chunks=(5000, 1)), da.from_array(y, chunks=5000))
    assert reg.keys_ is None and reg.values_ is None
    Q = X[:5]
    for call in [
        lambda: reg.attention_weights(Q),
        lambda: reg.predict(Q, return_se=True),
        lambda: reg.confidence_interval(Q),
        lambda: reg.prediction_interval(Q),
        lambda: reg.predict_gradient(Q),
        lambda: reg.smoother_diagnostics(),
    ]:
        with pytest.raises(ValueError, match="fitted on a dask array with algorithm"):
            call()
    loaded = pickle.loads(pickle.dumps(reg))
    assert_array_equal(
        loaded.predict(Q, return_std=True), reg.predict(Q, return_std=True)
    )


@pytest.mark.parametrize("degree", [0, 1])
def test_empty_queries_on_the_grid(degree):
    """Far queries: the on_empty policy applied on the grid (whose sums hold
    the squared weights too for degree=1)."""
    rng = np.random.default_rng(5)
    X = np.concatenate([rng.uniform(0, 1, 5000), rng.uniform(3, 4, 5000)])[:, None]
    y = np.where(X[:, 0] < 2, 1.0, 5.0) + 0.01 * rng.normal(size=len(X))
    Q = np.array([[-1.0], [2.0], [9.0]])
    lazy = {"X": da.from_array(X, chunks=(2500, 1)), "y": da.from_array(y, 2500)}

    def fit(**params):
        params = dict(
            algorithm="binned", bandwidth=0.05, kernel="epanechnikov", **params
        )
        params.setdefault("degree", degree)
        return KernelAttentionRegressor(**params).fit(lazy["X"], lazy["y"])

    with pytest.warns(EmptyNeighborhoodWarning):
        mean, std = fit(on_empty="mean").predict(Q, return_std=True)
    assert_allclose(mean, np.average(y), rtol=1e-12)
    assert_allclose(std, np.std(y), rtol=1e-9)
    with pytest.warns(EmptyNeighborhoodWarning):
        assert np.all(np.isnan(fit(on_empty="nan").predict(Q)))
    with pytest.raises(ValueError, match="on_empty='raise'"):
        fit(on_empty="raise").predict(Q)
    # "nearest": the values binned onto the nearest node holding weight.
    with pytest.warns(EmptyNeighborhoodWarning):
        nearest = fit(on_empty="nearest").predict(Q)
    assert_allclose(nearest, [1.0, 1.0, 5.0], atol=0.05)
    # Queries with keys near them are not empty.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(on_empty="raise", degree=1).predict(np.array([[0.5], [3.5]]))


def test_a_local_linear_fit_of_an_earlier_release_is_refused_clearly():
    # An earlier release saved the grid sums of a fit on dask arrays without
    # the squared weights, from which the safeguard of degree=1 now reads
    # each query's n_eff; with no rows to bin them from, the model loads and
    # its predictions are refused, naming the cause. Those of degree 0 need
    # no squared weights and predict as they did.
    X, y = smooth(20_000)
    lazy = {"X": da.from_array(X, chunks=(5000, 1)), "y": da.from_array(y, 5000)}
    fitted = {}
    for degree in (0, 1):
        reg = KernelAttentionRegressor(
            algorithm="binned", bandwidth=0.05, degree=degree
        )
        fitted[degree] = reg.fit(lazy["X"], lazy["y"])
    state = fitted[1]._pool.__getstate__()
    assert state["sums"].shape[-1] == 4  # w, w (y - c), w (y - c)**2, w**2
    assert fitted[0]._pool.__getstate__()["sums"].shape[-1] == 3
    former = {**state, "sums": state["sums"][..., :3]}
    Q = X[:5]
    expected = fitted[0].predict(Q, return_std=True)
    for degree in (0, 1):
        fitted[degree]._pool.__setstate__({**former, "degree": degree})
        loaded = pickle.loads(pickle.dumps(fitted[degree]))
        if degree == 0:
            assert_array_equal(loaded.predict(Q, return_std=True), expected)
            continue
        with pytest.raises(ValueError, match="by an earlier release.*Fit it again"):
            loaded.predict(Q)


@pytest.mark.parametrize("degree", [0, 1])
def test_sparse_queries_of_a_fit_on_dask_arrays(degree):
    # Read dense a chunk at a time; the far ones get the nearest node's
    # values, as dense queries do.
    X, y = smooth(20_000, d=2)
    reg = KernelAttentionRegressor(algorithm="binned", bandwidth=0.05, degree=degree)
    reg.fit(da.from_array(X, chunks=(5000, 2)), da.from_array(y, chunks=5000))
    Q = np.vstack([X[:50], [[5.0, 5.0], [-2.0, 0.5]]])
    with pytest.warns(EmptyNeighborhoodWarning):
        expected = reg.predict(Q, return_std=True)
    with pytest.warns(EmptyNeighborhoodWarning):
        got = reg.predict(sp.csr_array(Q), return_std=True)
    assert_array_equal(got, expected)
    assert np.all(np.isfinite(expected))


def test_bad_input():
    X, y = smooth(20_000)
    Xd = da.from_array(X, chunks=(5000, 1))
    yd = da.from_array(y, chunks=5000)
    reg = KernelAttentionRegressor(algorithm="binned", bandwidth=0.05)
    X_nan = X.copy()
    X_nan[12_345] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        reg.fit(da.from_array(X_nan, chunks=(5000, 1)), yd)
    y_nan = y.copy()
    y_nan[7] = np.inf
    with pytest.raises(ValueError, match="Input y contains infinity"):
        reg.fit(Xd, da.from_array(y_nan, chunks=5000))
    with pytest.raises(ValueError, match="3 features, and the binned path takes one"):
        reg.fit(da.from_array(np.zeros((100, 3)), chunks=(50, 3)), yd[:100])
    with pytest.raises(ValueError, match=r"inconsistent .* \[20000, 19999\]"):
        reg.fit(Xd, yd[:-1])
    with pytest.raises(ValueError, match="non-negative"):
        reg.fit(Xd, yd, sample_weight=-np.ones(len(X)))
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        reg.fit(Xd[Xd[:, 0] > 0.5], yd[Xd[:, 0] > 0.5])
    with pytest.raises(ValueError, match="algorithm='brute'.*NumPy arrays"):
        KernelAttentionRegressor(algorithm="brute").fit(Xd, yd)
    with pytest.raises(ValueError, match="bandwidth='scott' needs the rows"):
        KernelAttentionRegressor(algorithm="binned", bandwidth="scott").fit(Xd, yd)
    # Chunks of y and the weights that differ from those of X are aligned.
    other = KernelAttentionRegressor(algorithm="binned", bandwidth=0.05).fit(
        da.from_array(X, chunks=(3000, 1)), da.from_array(y, chunks=7000)
    )
    reg.fit(Xd, yd)
    Q = X[:50]
    assert_allclose(other.predict(Q), reg.predict(Q), rtol=RTOL)


def test_auto_decides_on_the_span():
    X, y = smooth(200_000)
    lazy = (da.from_array(X, chunks=(50_000, 1)), da.from_array(y, chunks=50_000))
    reg = KernelAttentionRegressor(bandwidth=0.05).fit(*lazy)
    assert reg.algorithm_ == "binned"
    assert_allclose(
        reg.predict(X[:50]),
        KernelAttentionRegressor(bandwidth=0.05).fit(X, y).predict(X[:50]),
        rtol=RTOL,
    )
    # A width the default grid resolves too coarsely: an error naming the way.
    with pytest.raises(ValueError, match="pass algorithm='binned'.*NumPy arrays"):
        KernelAttentionRegressor(bandwidth=1e-5).fit(*lazy)


def test_float32_rows():
    X, y = smooth(50_000, seed=6)
    X32, y32 = X.astype(np.float32), y.astype(np.float32)
    params = dict(algorithm="binned", bandwidth=0.05)
    lazy = KernelAttentionRegressor(**params).fit(
        da.from_array(X32, chunks=(20_000, 1)), da.from_array(y32, chunks=20_000)
    )
    memory = KernelAttentionRegressor(**params).fit(X32, y32)
    Q = X32[:100]
    got, want = lazy.predict(Q), memory.predict(Q)
    assert got.dtype == want.dtype == np.float32
    assert_allclose(got, want, rtol=1e-6)
    assert lazy.predict(da.from_array(Q)).dtype == np.float32


def labelled(n, d, seed=0):
    X, y = smooth(n, d, seed=seed)
    labels = np.where(y > 0.5, "high", np.where(X[:, 0] > 0.5, "mid", "low"))
    weights = np.random.default_rng(seed + 1).uniform(0.5, 2.0, n)
    return X, labels, weights


# One feature by default: the map-reduce over two is that of the regressor
# above (the class indicators are its values); two with -m slow.
@pytest.mark.parametrize("d", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_classifier_equals_the_in_memory_fit(client, d):
    """The class indicators are the binned values: the probabilities of the
    fit on dask arrays equal those of the in-memory binned fit."""
    X, labels, weights = labelled(150_000, d, seed=d)
    chunk = 40_000
    params = dict(algorithm="binned", bandwidth=0.04)
    lazy = KernelAttentionClassifier(**params)
    on_the_cluster(
        client,
        lambda: lazy.fit(
            da.from_array(X, chunks=(chunk, d)),
            da.from_array(labels, chunks=chunk),
            da.from_array(weights, chunks=chunk),
        ),
    )
    memory = KernelAttentionClassifier(**params).fit(X, labels, weights)
    assert_array_equal(lazy.classes_, memory.classes_)
    assert lazy.algorithm_ == "binned" and lazy.keys_ is None
    Q = np.random.default_rng(7).uniform(-0.1, 1.1, (500, d))
    got, want = lazy.predict_proba(Q), memory.predict_proba(Q)
    assert np.max(np.abs(got - want)) < RTOL
    assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)
    assert_array_equal(lazy.predict(Q), memory.predict(Q))
    loaded = pickle.loads(pickle.dumps(lazy))
    assert_array_equal(loaded.predict_proba(Q), got)


def test_classifier_refuses_bad_labels():
    X, labels, _ = labelled(2000, 1)
    X_lazy = da.from_array(X, chunks=(500, 1))
    clf = KernelAttentionClassifier(algorithm="binned", bandwidth=0.1)
    continuous = da.from_array(X[:, 0] + 0.123, chunks=500)
    with pytest.raises(ValueError, match="Unknown label type"):
        clf.fit(X_lazy, continuous)
    with pytest.raises(ValueError, match="y should be a 1d array"):
        clf.fit(X_lazy, da.from_array(np.c_[labels, labels], chunks=(500, 2)))
    with pytest.raises(ValueError, match="algorithm='binned'"):
        KernelAttentionClassifier(algorithm="brute").fit(
            X_lazy, da.from_array(labels, chunks=500)
        )
