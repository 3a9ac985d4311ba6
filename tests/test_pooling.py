"""The pooling engine: every path, the chunks, the threads and the memory."""

import warnings

import joblib
import numpy as np
import pytest
from _memory import peak_predict_memory
from _reference import FORMULAS, nadaraya_watson
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import clone, config_context

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
)
from sklearn_kernelpool._engine import _brute
from sklearn_kernelpool._engine import _query_chunks as _chunk_plan
from sklearn_kernelpool._utils._threads import engine_threads
from sklearn_kernelpool.kernels import KERNELS

COMPACT = sorted({k.name for k in KERNELS.values() if k.is_compact})
UNBOUNDED = sorted({k.name for k in KERNELS.values() if not k.is_compact})
PATHS = ["brute", "kd_tree", "ball_tree"]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(200, 3))
    Y = np.column_stack([np.sin(5 * X[:, 0]) + X[:, 1], np.cos(4 * X[:, 2])])
    w = rng.uniform(0.2, 3.0, size=200)
    Q = rng.uniform(-0.2, 1.2, size=(150, 3))  # some outside every support
    return X, Y, w, Q


def predict_quietly(reg, Q):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        return reg.predict(Q)


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("bandwidth", [0.15, [0.1, 0.2, 0.3]])
@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
def test_every_path_gives_the_same_predictions(data, kernel, bandwidth, on_empty):
    X, Y, w, Q = data
    results = {}
    for path in PATHS:
        reg = KernelAttentionRegressor(
            kernel=kernel, bandwidth=bandwidth, algorithm=path, on_empty=on_empty
        ).fit(X, Y, sample_weight=w)
        assert reg.algorithm_ == path
        with pytest.warns(EmptyNeighborhoodWarning) as record:
            results[path] = reg.predict(Q)
        results[path, "warning"] = str(record[0].message)
    for path in PATHS[1:]:
        assert_allclose(results[path], results["brute"], rtol=1e-12, atol=1e-14)
        assert results[path, "warning"] == results["brute", "warning"]
    assert np.isnan(results["brute"]).any() == (on_empty == "nan")


@pytest.mark.parametrize("kernel", COMPACT)
def test_every_path_matches_the_slow_reference(data, kernel):
    X, Y, w, _ = data
    Q = np.random.default_rng(1).uniform(0.2, 0.8, size=(30, 3))
    expected = nadaraya_watson(X, Y, Q, FORMULAS[kernel], 0.3, w)
    for path in PATHS:
        reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.3, algorithm=path)
        pred = reg.fit(X, Y, sample_weight=w).predict(Q)
        assert_allclose(pred, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("path", PATHS)
def test_float32_on_every_path(data, path):
    X, Y, w, Q = data
    reg = KernelAttentionRegressor(kernel="biweight", bandwidth=0.3, algorithm=path)
    pred32 = predict_quietly(reg.fit(X.astype(np.float32), Y, w), Q)
    assert pred32.dtype == np.float32
    pred64 = predict_quietly(clone(reg).fit(X, Y, w), Q)
    assert_allclose(pred32, pred64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kernel", COMPACT)
def test_key_exactly_at_the_support_radius_gets_weight_zero(path, kernel):
    X = np.array([[0.0, 0.0], [3.0, 4.0], [-3.0, 4.0], [0.0, 10.0]])
    y = np.array([1.0, 100.0, 200.0, 300.0])
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=5.0, algorithm=path)
    # Keys 1 and 2 lie at distance exactly 5 of the first query.
    assert_array_equal(reg.fit(X, y).predict([[0.0, 0.0]]), [1.0])
    # Key 0 is the only one at distance 5 of this query, the others farther:
    # the neighbourhood is empty and the nearest key, key 0, gives the value.
    with pytest.warns(EmptyNeighborhoodWarning) as rec:
        assert_array_equal(reg.predict([[0.0, -5.0]]), [1.0])
    warning = rec.pop(EmptyNeighborhoodWarning).message
    assert (warning.n_empty, warning.n_queries) == (1, 1)


@pytest.mark.parametrize("path", PATHS)
def test_nearest_fallback_ties_on_every_path(path):
    X = np.array([[0.0], [2.0], [2.0], [5.0]])
    y = np.array([0.0, 10.0, 30.0, 50.0])
    w = np.array([1.0, 1.0, 3.0, 0.0])  # the zero-weight key is never nearest
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5, algorithm=path)
    reg.fit(X, y, sample_weight=w)
    with pytest.warns(EmptyNeighborhoodWarning) as rec:
        pred = reg.predict([[1.0], [4.9], [-3.0]])
    warning = rec.pop(EmptyNeighborhoodWarning).message
    assert (warning.n_empty, warning.n_queries) == (3, 3)
    # 1.0 is equidistant from 0.0 and the two keys at 2.0.
    assert_allclose(pred, [(0 + 10 + 90) / 5, (10 + 90) / 4, 0.0], rtol=1e-14)


@pytest.mark.parametrize("path", ["kd_tree", "ball_tree"])
@pytest.mark.parametrize("kernel", UNBOUNDED)
def test_trees_need_a_compact_kernel(data, path, kernel):
    X, Y, _, _ = data
    with pytest.raises(ValueError, match=f"algorithm='{path}' needs a kernel of"):
        KernelAttentionRegressor(kernel=kernel, algorithm=path).fit(X, Y)
    with pytest.raises(ValueError, match="compact support"):
        KernelAttentionRegressor(kernel=np.exp, algorithm=path).fit(X, Y)


def test_auto_chooses_by_support_and_neighbourhood_size():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(20_000, 1))
    y = X[:, 0]
    fit = lambda **kw: KernelAttentionRegressor(**kw).fit(X, y)  # noqa: E731
    assert fit(kernel="gaussian", bandwidth=1e-3).algorithm_ == "brute"
    assert fit(kernel="epanechikov", bandwidth=1e-3).algorithm_ == "kd_tree"
    assert fit(kernel="epanechikov", bandwidth=10.0).algorithm_ == "brute"
    X4 = rng.uniform(size=(20_000, 4))
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.1).fit(X4, y)
    assert reg.algorithm_ == "kd_tree"  # about 3e-4 of the keys in a support
    assert reg.set_params(bandwidth=0.5).fit(X4, y).algorithm_ == "brute"
    X8 = rng.uniform(size=(20_000, 8))
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.2).fit(X8, y)
    assert reg.algorithm_ == "brute"  # trees did not pay off from 8 features on
    small = KernelAttentionRegressor(kernel="boxcar", bandwidth=1e-3)
    assert small.fit(X[:100], y[:100]).algorithm_ == "brute"


@pytest.mark.parametrize("path", PATHS)
def test_chunk_boundaries(data, path, monkeypatch):
    # Brute chunks are whole blocks of products: small blocks, several chunks.
    monkeypatch.setattr(_brute, "_MAX_BLOCK_ROWS", 8)
    X, Y, w, _ = data
    rng = np.random.default_rng(2)
    reg = KernelAttentionRegressor(kernel="tricube", bandwidth=0.4, algorithm=path)
    reg.fit(X, Y, sample_weight=w)
    with config_context(working_memory=0.05):
        batches, _ = reg._pool._batches(rng.uniform(0.2, 0.8, size=(1000, 3)))
        n_rows = batches[0].stop
        assert 1 < n_rows < 200
        for m in (1, n_rows - 1, n_rows, n_rows + 1, 2 * n_rows + 1):
            Q = rng.uniform(0.2, 0.8, size=(m, 3))
            expected = nadaraya_watson(X, Y, Q, FORMULAS["tricube"], 0.4, w)
            assert_allclose(reg.predict(Q), expected, rtol=1e-12)


@pytest.mark.parametrize("path", PATHS)
def test_one_key(path):
    reg = KernelAttentionRegressor(kernel="cosine", bandwidth=1.0, algorithm=path)
    reg.fit([[1.0, 2.0]], [[3.0, 4.0]])
    assert_array_equal(reg.predict([[1.5, 2.0]]), [[3.0, 4.0]])
    with pytest.warns(EmptyNeighborhoodWarning):
        assert_array_equal(reg.predict([[9.0, 9.0]]), [[3.0, 4.0]])


@pytest.mark.parametrize(
    "path, kernel",
    [("brute", "gaussian"), ("brute", "epanechikov")]
    + [(tree, "epanechikov") for tree in PATHS[1:]],
)
def test_n_jobs_gives_identical_results(data, path, kernel, monkeypatch):
    # Small jobs run in one thread anyway: make these use threads.
    monkeypatch.setattr(_chunk_plan, "MIN_THREADED_PAIRS", 0)
    calls = []
    original = _chunk_plan.Parallel
    monkeypatch.setattr(
        _chunk_plan, "Parallel", lambda *a, **k: calls.append(k) or original(*a, **k)
    )
    X, Y, w, Q = data
    Q = np.tile(Q, (20, 1))
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.2, algorithm=path)
    reg.fit(X, Y, sample_weight=w)
    with config_context(working_memory=0.02):
        base = predict_quietly(reg.set_params(n_jobs=1), Q)
        for n_jobs in (2, 3, -1):
            assert_array_equal(predict_quietly(reg.set_params(n_jobs=n_jobs), Q), base)
        assert_array_equal(predict_quietly(reg.set_params(n_jobs=None), Q), base)
    # n_jobs=None runs as many threads as BLAS would have.
    assert len(calls) == 3 + (engine_threads(None) > 1)


@pytest.mark.parametrize("backend", ["loky", "multiprocessing"])
@pytest.mark.parametrize("path", PATHS)
def test_n_jobs_under_a_process_backend_gives_identical_results(
    data, path, backend, monkeypatch
):
    # The threads of predict write into shared arrays: an enclosing process
    # backend must not take their place.
    monkeypatch.setattr(_chunk_plan, "MIN_THREADED_PAIRS", 0)
    X, Y, w, Q = data
    Q = np.tile(Q, (20, 1))
    reg = KernelAttentionRegressor(kernel="epanechikov", bandwidth=0.2, algorithm=path)
    reg.fit(X, Y, sample_weight=w)
    with config_context(working_memory=0.02):
        base = predict_quietly(reg, Q)
        with joblib.parallel_backend(backend, n_jobs=2):
            threaded = predict_quietly(reg.set_params(n_jobs=2), Q)
    assert_array_equal(threaded, base)


def test_brute_memory_stays_bounded():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 4))
    Q = rng.normal(size=(4_000, 4))
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, X[:, 0])
    # The full attention matrix would take 4000 * 20000 * 8 bytes = 640 MB.
    assert peak_predict_memory(reg, Q, working_memory=4) < 8 * 2**20


def test_tree_memory_stays_bounded():
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(50_000, 2))
    Q = rng.uniform(size=(50_000, 2))
    reg = KernelAttentionRegressor(kernel="epanechikov", bandwidth=0.05)
    reg.fit(X, X[:, 0])
    assert reg.algorithm_ == "kd_tree"
    # About 400 neighbours a query: 20 million pairs if done at once.
    assert peak_predict_memory(reg, Q, working_memory=2) < 12 * 2**20


@pytest.mark.parametrize("path", PATHS)
def test_predict_never_writes_into_fitted_arrays(tmp_path, data, path):
    X, Y, w, Q = data
    keys = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", shape=X.shape)
    keys[:] = X
    keys.flush()
    keys = np.load(tmp_path / "X.npy", mmap_mode="r")
    for a in (Y, w, Q):
        a.setflags(write=False)
    reg = KernelAttentionRegressor(kernel="biweight", bandwidth=0.3, algorithm=path)
    reg.fit(keys, Y, sample_weight=w)
    predict_quietly(reg, Q)
    predict_quietly(reg, Q)
    assert_array_equal(reg.keys_, X)
    assert_array_equal(reg.values_, Y)
    assert_array_equal(reg.sample_weight_, w)


@pytest.mark.parametrize("path", PATHS)
def test_attention_weights_pool_to_the_predictions(data, path):
    X, Y, w, Q = data
    w = w.copy()
    w[::7] = 0.0
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.2, algorithm=path)
    reg.fit(X, Y, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        weights = reg._pool.attention_weights(Q)
        pred = reg.predict(Q)
    assert weights.shape == (len(Q), len(X))
    assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(weights[:, ::7] == 0)
    assert_allclose(weights @ Y, pred, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", COMPACT)
def test_one_feature_paths_agree_with_duplicates_and_far_queries(kernel):
    # With one feature the k-d tree is a sorted array searched by bisection.
    rng = np.random.default_rng(3)
    X = np.round(rng.uniform(0, 10, size=(300, 1)), 1)  # many duplicate keys
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 0] ** 2])
    w = rng.integers(0, 3, size=300).astype(float)
    Q = np.concatenate([rng.uniform(-2, 12, size=(200, 1)), X[:20], [[-50.0]]])
    preds = []
    for path in PATHS:
        reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.25, algorithm=path)
        preds.append(predict_quietly(reg.fit(X, Y, sample_weight=w), Q))
    for pred in preds[1:]:
        assert_allclose(pred, preds[0], rtol=1e-12, atol=1e-14)
    positive = w > 0
    nearest = X[positive][np.argmin(np.abs(X[positive, 0] - (-50.0)))]
    tied = positive & (X[:, 0] == nearest[0])
    assert_allclose(preds[0][-1], np.average(Y[tied], axis=0, weights=w[tied]))


@pytest.mark.parametrize("kernel", ["gaussian", "epanechikov", "cauchy"])
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_float32_keeps_its_precision_at_small_bandwidths(kernel, offset):
    # Keys hundreds of bandwidths from their centre: float32 products would
    # lose ~eps32 * (800)**2 = 0.04 of a logit; such chunks widen to float64.
    rng = np.random.default_rng(5)
    X = (rng.normal(size=(5000, 1)) + offset).astype(np.float32)
    y = np.sin(3 * X[:, 0].astype(np.float64))
    Q = X[::7] + np.float32(0.001)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.005, algorithm="brute")
    pred32 = predict_quietly(reg.fit(X, y), Q)
    pred64 = predict_quietly(clone(reg).fit(X.astype(np.float64), y), Q)
    assert pred32.dtype == np.float32
    assert_allclose(pred32, pred64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bandwidth", [0.5, 1.0, 2.0])
def test_float32_gaussian_on_standardised_data(bandwidth):
    # The gaussian's float32 logits widen only for queries far from the
    # keys' centre: the rest keep float32 products, within 1e-5 of float64
    # whatever the spread of the keys (two clusters, one 60 widths away).
    rng = np.random.default_rng(7)
    X = np.vstack([rng.normal(size=(3000, 8)), rng.normal(size=(200, 8)) + 60.0])
    y = np.sin(2 * X[:, 0]) + X[:, 1]
    Q = np.vstack(
        [rng.normal(size=(300, 8)) * 1.5, X[-5:] + 0.1, np.full((2, 8), 30.0)]
    )
    reg = KernelAttentionRegressor(bandwidth=bandwidth, algorithm="brute")
    pred64 = clone(reg).fit(X, y).predict(Q)
    pred32 = reg.fit(X.astype(np.float32), y.astype(np.float32)).predict(
        Q.astype(np.float32)
    )
    assert pred32.dtype == np.float32
    assert_allclose(pred32, pred64, rtol=0, atol=1e-5 * np.abs(y).max())


def test_float32_gaussian_keeps_rows_near_the_centre_narrow():
    # Which float32 rows of the gaussian's logits get a float64 product:
    # those far from the centre of the keys, not all of them because of the
    # farthest key.
    rng = np.random.default_rng(8)
    X = np.vstack([rng.normal(size=(2000, 8)), np.full((1, 8), 25.0)])
    reg = KernelAttentionRegressor(bandwidth=1.0, algorithm="brute")
    reg.fit(X.astype(np.float32), X[:, 0].astype(np.float32))
    pool = reg._pool
    Q = np.vstack([np.zeros((1, 8)), np.full((1, 8), 1.0), np.full((1, 8), 20.0)])
    centred = pool._queries(Q.astype(np.float32))[1]
    scorer = pool.scorer
    Q1 = scorer.augment(centred, np.empty((scorer.padded(3), 10)))
    widen = scorer._widen(Q1, logits=True)[:3]
    assert_array_equal(widen, [False, False, True])
    # The squared distances of the other kernels keep the bound on the
    # largest key, which widens every row here.
    assert scorer._widen(Q1, logits=False)[:3].all()
