"""Concurrent use, determinism and the memory bound of prediction.

Every test runs over ``CONFIGURATIONS``: a factory of an unfitted estimator
per engine path and kernel family, and ``predict_of`` says how to get the
output to compare (``predict_proba`` for the classifier, the predictions and
their standard deviations side by side for ``return_std``); other estimators
join by adding factories.
"""

import pickle
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _memory import peak_predict_memory
from joblib import hash as joblib_hash
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from threadpoolctl import ThreadpoolController, threadpool_info, threadpool_limits

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._engine import _query_chunks as _chunk_plan
from sklearn_kernelpool._utils._threads import (
    _in_own_thread,
    engine_threads,
    single_threaded_blas,
)

CONFIGURATIONS = {
    "brute-gaussian": lambda: KernelAttentionRegressor(bandwidth=0.05),
    "brute-cauchy": lambda: KernelAttentionRegressor(kernel="cauchy", bandwidth=0.1),
    "brute-epanechikov": lambda: KernelAttentionRegressor(
        kernel="epanechikov", bandwidth=0.15, algorithm="brute"
    ),
    "kd_tree-biweight": lambda: KernelAttentionRegressor(
        kernel="biweight", bandwidth=0.15, algorithm="kd_tree"
    ),
    "ball_tree-tricube": lambda: KernelAttentionRegressor(
        kernel="tricube", bandwidth=0.15, algorithm="ball_tree"
    ),
    "kd_tree-1d-boxcar": lambda: KernelAttentionRegressor(
        kernel="boxcar", bandwidth=0.05, algorithm="kd_tree"
    ),
    "classifier-brute-gaussian": lambda: KernelAttentionClassifier(bandwidth=0.05),
    "classifier-kd_tree-biweight": lambda: KernelAttentionClassifier(
        kernel="biweight", bandwidth=0.15, algorithm="kd_tree"
    ),
    "degree1-brute-gaussian": lambda: KernelAttentionRegressor(bandwidth=0.1, degree=1),
    "degree1-kd_tree-epanechikov": lambda: KernelAttentionRegressor(
        kernel="epanechikov", bandwidth=0.25, degree=1, algorithm="kd_tree"
    ),
    "std-brute-cauchy": lambda: KernelAttentionRegressor(
        kernel="cauchy", bandwidth=0.1
    ),
    "std-degree1-ball_tree-tricube": lambda: KernelAttentionRegressor(
        kernel="tricube", bandwidth=0.25, degree=1, algorithm="ball_tree"
    ),
}


def _names(slow=()):
    """Every configuration; those in ``slow`` run with -m slow only."""
    return [
        pytest.param(name, marks=pytest.mark.slow) if name in slow else name
        for name in CONFIGURATIONS
    ]


# Local-linear fits on a tree are the slowest configurations: by default the
# threads run the one with the spread on ball_tree, the runs, chunkings and
# n_jobs the one on kd_tree; each runs both with -m slow.
THREADS_CONFIGURATIONS = _names(slow={"degree1-kd_tree-epanechikov"})
RUNS_SLOW = {"std-degree1-ball_tree-tricube"}
# float32 on one configuration of each path (brute, tree, classifier, local
# linear, spread) by default; on the others with -m slow.
FLOAT32_DEFAULT = {
    "brute-gaussian",
    "kd_tree-biweight",
    "classifier-brute-gaussian",
    "degree1-brute-gaussian",
    "std-brute-cauchy",
}


def _runs_cases():
    cases = []
    for dtype in (np.float64, np.float32):
        for name in CONFIGURATIONS:
            default = name not in RUNS_SLOW
            if dtype == np.float32:
                default = name in FLOAT32_DEFAULT
            marks = [] if default else [pytest.mark.slow]
            cases.append(
                pytest.param(name, dtype, id=f"{name}-{dtype.__name__}", marks=marks)
            )
    return cases


# Far queries fall back, which warns; catch_warnings is not thread-safe, so
# the filter is set for the whole module instead.
pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning"),
]


def predict_of(estimator, X):
    """The output compared between runs, threads and chunkings."""
    if isinstance(estimator, KernelAttentionClassifier):
        return estimator.predict_proba(X)
    if getattr(estimator, "_return_std", False):
        return np.hstack(estimator.predict(X, return_std=True))
    return estimator.predict(X)


def make_data(name, dtype=np.float64, n=400, m=1500):
    rng = np.random.default_rng(0)
    d = 1 if "1d" in name else 3
    X = rng.uniform(size=(n, d)).astype(dtype)
    Y = np.column_stack([np.sin(6 * X[:, 0]), X.sum(axis=1)])
    w = rng.uniform(0.5, 2.0, size=n)
    # Some queries far outside the keys: gaussian rows that underflow and
    # are recomputed, compact-kernel queries that fall back to the nearest.
    Q = rng.uniform(-0.3, 1.3, size=(m, d)).astype(dtype)
    Q[::50] += 40.0
    return X, Y, w, Q


def fitted(name, dtype=np.float64):
    X, Y, w, Q = make_data(name, dtype)
    estimator = CONFIGURATIONS[name]()
    if isinstance(estimator, KernelAttentionClassifier):
        Y = np.digitize(Y[:, 0], [-0.5, 0.5])  # three classes
    estimator.fit(X, Y, sample_weight=w)
    # Marks the configurations whose output includes the standard deviations.
    estimator._return_std = name.startswith("std-")
    return estimator, Q


@pytest.mark.parametrize("name", THREADS_CONFIGURATIONS)
def test_threads_predict_identically_and_leave_the_estimator_unchanged(name):
    reg, Q = fitted(name)
    with config_context(working_memory=0.1):  # several chunks per call
        expected = predict_of(reg, Q)
    before = joblib_hash(reg)

    def predict(_):
        # scikit-learn's configuration is thread-local: set it in the worker.
        with config_context(working_memory=0.1):
            return predict_of(reg, Q)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(predict, range(16)))
    for result in results:
        assert_array_equal(result, expected)
    assert joblib_hash(reg) == before


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_pickle_round_trip_after_predictions(name):
    reg, Q = fitted(name)
    # The first return_std or degree=1 prediction caches the engine's
    # matrices of moments, which pickles leave out: the hash stays.
    before = joblib_hash(reg)
    expected = predict_of(reg, Q)
    assert joblib_hash(reg) == before
    restored = pickle.loads(pickle.dumps(reg))
    assert joblib_hash(reg) == before
    assert_array_equal(predict_of(restored, Q), expected)
    # The trees, and the counters of their work, are not saved: rebuilt.
    assert "scorer" not in restored._pool.__getstate__()["arguments"]
    # And the original keeps predicting after being pickled.
    assert_array_equal(predict_of(reg, Q), expected)


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_threads_predicting_first_agree(name):
    # The first prediction fills the engine's caches: threads that all start
    # cold race to fill them, and must still agree with a warm estimator.
    warm, Q = fitted(name)
    expected = predict_of(warm, Q[:300])
    cold, _ = fitted(name)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: predict_of(cold, Q[:300]), range(8)))
    for result in results:
        assert_array_equal(result, expected)


@pytest.mark.parametrize("name, dtype", _runs_cases())
def test_bitwise_identical_across_runs_chunk_sizes_and_n_jobs(name, dtype, monkeypatch):
    # Small jobs run in one thread anyway: make these use threads. Brute
    # chunks are capped near the cache size: lift the cap, so that
    # working_memory changes their size.
    monkeypatch.setattr(_chunk_plan, "MIN_THREADED_PAIRS", 0)
    monkeypatch.setattr(_chunk_plan, "CHUNK_BYTES", 2**26)
    reg, Q = fitted(name, dtype)
    base = predict_of(reg, Q)
    assert base.dtype == dtype
    rerun, _ = fitted(name, dtype)
    assert_array_equal(predict_of(rerun, Q), base)
    chunk_rows = set()
    for working_memory in (0.02, 1.0, 4.0, 16.0):
        with config_context(working_memory=working_memory):
            chunk_rows.add(reg._pool._batches(Q)[0][0].stop)
            # BLAS runs one thread in the engine: local-linear products of
            # moments are rounded the same whatever n_jobs too.
            for n_jobs in (None, 1, 2, -1):
                reg.set_params(n_jobs=n_jobs)
                assert_array_equal(predict_of(reg, Q), base)
    assert len(chunk_rows) > 1  # the chunk size did change


@pytest.mark.parametrize("name", ["brute-gaussian", "brute-cauchy"])
def test_a_query_alone_agrees_to_rounding(name):
    # The products run on fixed blocks of rows and BLAS may round a row
    # differently by its place in a block: a query predicted alone agrees
    # with the same query in a batch to rounding, not always to the bit.
    reg, Q = fitted(name)
    batch = predict_of(reg, Q)
    alone = np.vstack([predict_of(reg, Q[i : i + 1]) for i in range(0, len(Q), 37)])
    assert_allclose(alone, batch[::37], rtol=1e-13, atol=1e-14)


def test_memory_bound_with_queries_of_hundreds_of_mib():
    # 1.6 million queries of 16 features (195 MiB) against 64 keys: the
    # attention matrix would take 780 MiB.
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(64, 16))
    Q = np.tile(rng.uniform(size=(1000, 16)), (1600, 1))
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, X[:, :2])
    output = Q.shape[0] * 2 * 8
    # Beyond its output, predict holds 4 MiB of working memory and the
    # chunk's copies of its queries per thread, as scikit-learn's
    # working_memory is per job.
    n_threads = engine_threads(reg.n_jobs)
    bound = output + n_threads * 8 * 2**20
    assert peak_predict_memory(reg, Q, working_memory=4) < bound


# -- BLAS threads -------------------------------------------------------------


def blas_threads():
    return [
        info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"
    ]


@pytest.fixture(autouse=True)
def two_blas_threads():
    """BLAS of two threads where it has one (the workers of pytest-xdist,
    see conftest.py), so that the limits the engine sets are tested."""
    if max(blas_threads(), default=1) > 1:
        yield
        return
    # (from a thread that ends, as the engine sets its limits: some OpenBLAS
    # builds ignore a change made by another thread while the one that last
    # changed them is alive)
    limiter = _in_own_thread(lambda: ThreadpoolController().limit(limits=2))
    try:
        yield
    finally:
        _in_own_thread(limiter.restore_original_limits)


# The data every thread shares, read-only: nothing may write into it.
SHARED = make_data("cv", n=300, m=600)
for _array in SHARED:
    _array.setflags(write=False)


def cv_job(name):
    """A fit, a CV search or predictions on the shared data: what threads run."""
    X, Y, w, Q = SHARED
    estimator = {
        "loo": lambda: KernelAttentionRegressorCV(bandwidths=4, n_jobs=2),
        "kfold": lambda: KernelAttentionRegressorCV(
            kernels=["gaussian", "epanechikov"], bandwidths=3, cv=3, n_jobs=2
        ),
        "per_feature": lambda: KernelAttentionRegressorCV(
            bandwidths=3, per_feature=True, n_jobs=2
        ),
        "degree1": lambda: KernelAttentionRegressorCV(bandwidths=3, degree=1, n_jobs=2),
        "predict": lambda: KernelAttentionRegressor(bandwidth=0.1, n_jobs=2),
        "tree": lambda: KernelAttentionRegressor(
            kernel="biweight", bandwidth=0.2, algorithm="kd_tree", n_jobs=-1
        ),
        "degree1-predict": lambda: KernelAttentionRegressor(bandwidth=0.2, degree=1),
    }[name]()
    estimator.fit(X, Y, sample_weight=w)
    outputs = [estimator.predict(Q)]
    if isinstance(estimator, KernelAttentionRegressor):
        outputs += estimator.predict(Q, return_std=True)
    else:
        outputs.append(estimator.cv_results_["mean_test_score"])
    return outputs


CV_JOBS = [
    "loo",
    "kfold",
    "per_feature",
    "degree1",
    "predict",
    "tree",
    "degree1-predict",
]


# The larger pool, where more limits overlap, by default; four with -m slow.
@pytest.mark.parametrize("n_threads", [pytest.param(4, marks=pytest.mark.slow), 8])
def test_threads_running_cv_leave_the_blas_threads_as_they_were(n_threads):
    # threadpoolctl's limits are process-wide: limits entered and left by
    # several threads at once used to leave BLAS at one thread for good.
    # BLAS gets two threads where it has one (limits=None changes nothing).
    limits = None if max(blas_threads()) > 1 else 2
    with threadpool_limits(limits=limits, user_api="blas"):
        before = blas_threads()
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(cv_job, [*CV_JOBS, *CV_JOBS]))
        assert blas_threads() == before


def test_eight_threads_mixing_fit_predict_and_cv_agree_with_serial_runs():
    jobs = CV_JOBS
    before = blas_threads()
    serial = {name: cv_job(name) for name in jobs}
    assert blas_threads() == before
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(cv_job, jobs * 3))
    for name, result in zip(jobs * 3, results, strict=True):
        for got, expected in zip(result, serial[name], strict=True):
            assert_array_equal(got, expected, err_msg=name)
    assert blas_threads() == before


def test_single_threaded_blas_nests_and_restores_the_limits():
    before = blas_threads()
    with single_threaded_blas():
        assert set(blas_threads()) == {1}
        # The default thread count is the BLAS count outside the engine.
        assert engine_threads(None) == max(before)
        with single_threaded_blas():
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}
    assert blas_threads() == before
    assert engine_threads(None) == max(before)
    assert engine_threads(1) == 1
    # A failure inside still restores them.
    with pytest.raises(RuntimeError), single_threaded_blas():
        raise RuntimeError
    assert blas_threads() == before


@pytest.mark.parametrize("n_jobs", [None, 1, 2, -1])
def test_blas_runs_one_thread_inside_predict_whatever_n_jobs(n_jobs, monkeypatch):
    # BLAS threads on the engine's small blocks cost more than they save:
    # the engine holds BLAS to one thread and uses its own threads instead.
    monkeypatch.setattr(_chunk_plan, "MIN_THREADED_PAIRS", 0)
    seen = []

    def kernel(x):
        seen.append(max(blas_threads()))
        return np.exp(-(np.asarray(x) ** 2))

    X, Y, _, Q = make_data("brute", n=200, m=600)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.2, n_jobs=n_jobs)
    before = blas_threads()
    with config_context(working_memory=0.02):
        reg.fit(X, Y)
        seen.clear()
        reg.predict(Q)
    assert seen and set(seen) == {1}
    assert blas_threads() == before
    if n_jobs is None:
        assert engine_threads(n_jobs) == max(before)


def test_the_categorical_held_out_sums_run_blas_on_one_thread(monkeypatch):
    # Their products are of a few rows against every key, where BLAS threads
    # cost more than they save (as in the dense pass of the other searches).
    from sklearn_kernelpool._held_out import _categorical

    seen = []
    original = _categorical.pairwise_squared

    def spy(*args, **kwargs):
        # The sums' batches (the refits of rows whose moments cancel, of
        # whole rows of keys, keep the threads, as in the dense pass).
        if sys._getframe(1).f_code.co_name == "_sums":
            seen.append(tuple(blas_threads()))
        return original(*args, **kwargs)

    monkeypatch.setattr(_categorical, "pairwise_squared", spy)
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=(300, 2)), rng.integers(0, 3, 300)])
    y = X[:, 0] + X[:, 2] + rng.normal(scale=0.1, size=300)
    # Two BLAS threads, set from a thread that ends (as the engine sets its
    # limits: some OpenBLAS builds ignore a change made by another thread
    # while the one that last changed them is alive).
    limiter = _in_own_thread(lambda: ThreadpoolController().limit(limits=2))
    try:
        before = blas_threads()
        if max(before, default=1) < 2:
            pytest.skip("this BLAS cannot be set to two threads")
        KernelAttentionRegressorCV(
            bandwidths=3, categorical_features=[2], linear_features=None
        ).fit(X, y)
        assert blas_threads() == before
    finally:
        _in_own_thread(limiter.restore_original_limits)
    assert seen and set(seen) == {tuple(1 for _ in before)}
