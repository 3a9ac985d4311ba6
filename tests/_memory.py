"""Peak memory of the package's public paths, for the memory-bound tests.

:func:`traced_peak` measures one call. :data:`MEMORY_PATHS` lists every
public path (``fit``; each algorithm, kernel family and dimension of
``predict``, ``return_std``, ``degree=1``, dense and sparse attention
weights, the conditional quantiles and distribution, each ``on_empty``
policy, the binned path's ``predict`` (one and two features, ``return_std``
with ``degree=1``, float32, several outputs, a fit on dask arrays), held to
its output and one chunk with no copy of the queries, the classifier's
``fit``, ``predict_proba`` and ``predict``, the CV's leave-one-out, K-fold,
per-feature, underflow and fallback routes, and the fit of a learned map,
with the trees on data whose neighbourhoods defeat an estimate made at fit
time), built at a size ``n``;
:func:`memory_budget` is the bound each must keep. ``tests/test_memory.py``
and ``benchmarks/bench_memory.py`` share them.
"""

import tracemalloc
import warnings
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest
from scipy import sparse as sp
from sklearn import config_context

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionProjection,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)


def traced_peak(call, working_memory=None):
    """``(result, peak bytes traced)`` of ``call()``, under a memory budget."""
    options = {} if working_memory is None else {"working_memory": working_memory}
    with config_context(**options):
        tracemalloc.start()
        try:
            result = call()
            return result, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def peak_predict_memory(reg, Q, working_memory):
    """Peak bytes traced while ``reg`` predicts ``Q`` under a memory budget."""
    return traced_peak(lambda: reg.predict(Q), working_memory)[1]


# -- the size of a result ------------------------------------------------------
def output_bytes(result):
    """Bytes held by the arrays of a result: ndarrays, sparse arrays, tuples,
    and fitted estimators with everything they hold (trees included)."""
    seen = set()

    def size(obj):
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            while isinstance(obj.base, np.ndarray):  # count a view's array once
                obj = obj.base
                if id(obj) in seen:
                    return 0
                seen.add(id(obj))
            return obj.nbytes
        if sp.issparse(obj):
            return sum(
                size(getattr(obj, a, None)) for a in ("data", "indices", "indptr")
            )
        if hasattr(obj, "get_arrays"):  # scikit-learn's KDTree and BallTree
            return sum(np.asarray(a).nbytes for a in obj.get_arrays())
        if isinstance(obj, dict):
            return sum(size(v) for v in obj.values())
        if isinstance(obj, list | tuple):
            return sum(size(v) for v in obj)
        if type(obj).__module__.startswith("sklearn_kernelpool"):
            return size(vars(obj)) if hasattr(obj, "__dict__") else 0
        return 0

    return size(result)


# -- the budget ------------------------------------------------------------------
# Beyond working_memory and the output, every path may hold a few MiB of fixed
# overhead (one 1 MiB block of brute scores, Python objects, the tracer's own
# rounding) and a few copies of its inputs (validated, scaled and centred).
FIXED_SLACK = 4 * 2**20
INPUT_COPIES = 4
# The CV may also hold the pooled sums of every held-out point and candidate,
# ``8 n`` bytes per column of moments and candidate, a few times over (the
# sums, their reordering, the predictions).
CV_COPIES = 4


def cv_columns(degree, n_features, n_outputs=1):
    """Columns of moments the CV pools per point and candidate: ``[y, 1]`` for
    degree 0, ``[k, upper(k k^T), y, k y^T, y^2, 1]`` for degree 1."""
    if degree == 0:
        return n_outputs + 1
    d, p = n_features, n_outputs
    return (d + 1) * (d + 2) // 2 + (d + 2) * p


def memory_budget(path, working_memory, output):
    """The peak bytes ``path`` may trace under ``working_memory`` MiB.

    ``working_memory * 2**20 + output + FIXED_SLACK + INPUT_COPIES * inputs``
    (no copy of the inputs on the binned paths),
    plus, for the CV, ``CV_COPIES * 8 * n * n_candidates * n_columns``. A
    sparse output counts twice: its chunks are held until they are joined.
    """
    budget = working_memory * 2**20 + output * (2 if path.sparse_output else 1)
    budget += FIXED_SLACK + path.input_copies * path.inputs
    budget += CV_COPIES * 8 * path.n * path.n_candidates * path.n_columns
    return budget


# -- the paths -------------------------------------------------------------------
@dataclass
class MemoryPath:
    """One public call, its data prepared and its estimator fitted."""

    call: object  # the call whose peak is measured, without arguments
    n: int  # training samples
    inputs: int  # bytes of the call's input arrays
    n_candidates: int = 0  # CV candidates
    n_columns: int = 0  # CV moments per point and candidate
    sparse_output: bool = False
    input_copies: int = INPUT_COPIES  # copies of the inputs the path may hold


def quietly(call):
    """``call()`` with the package's warnings (empty neighbourhoods, ...) off."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def _radius(n, d, neighbors=30):
    """Support radius that holds about ``neighbors`` of ``n`` uniform keys in
    the unit cube of dimension ``d`` (1 or 2)."""
    return neighbors / (2 * n) if d == 1 else float(np.sqrt(neighbors / (np.pi * n)))


def _data(n, m, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d))
    y = np.sin(6 * X[:, 0]) + X[:, -1] + 0.1 * rng.normal(size=n)
    Q = rng.uniform(size=(m, d))
    return X, y, Q


def _nbytes(*arrays):
    return sum(a.nbytes for a in arrays)


def _regressor_path(method, d, algorithm, kernel, **options):
    """A path of a fitted KernelAttentionRegressor on uniform data."""
    weights = method.startswith("weights")

    def build(n, m):
        m = max(m // 2, 1) if weights else m  # dense weights are m x n
        X, y, Q = _data(n, m, d)
        bandwidth = options.get("bandwidth") or _radius(n, d)
        if kernel == "gaussian":
            bandwidth /= 2
        params = {**options, "bandwidth": bandwidth}
        reg = KernelAttentionRegressor(kernel, algorithm=algorithm, **params)
        if method == "fit":
            return MemoryPath(partial(reg.fit, X, y), n, _nbytes(X, y))
        quietly(lambda: reg.fit(X, y))
        if method == "predict":
            call = partial(reg.predict, Q)
        elif method == "predict_std":
            call = partial(reg.predict, Q, return_std=True)
        elif method == "quantiles":
            call = partial(reg.predict_quantiles, Q, quantiles=(0.1, 0.5, 0.9))
        elif method == "cdf":
            call = partial(reg.predict_cdf, Q, np.linspace(-1.0, 2.0, 7))
        else:
            call = partial(reg.attention_weights, Q, sparse=method == "weights_sparse")
        return MemoryPath(
            call,
            n,
            _nbytes(Q),
            sparse_output=method == "weights_sparse",
        )

    return build


def _binned_path(d, method="predict", dask=False, dtype=np.float64, **options):
    """``predict`` of ``algorithm="binned"`` at a width of 1/25 of the
    range: the output and one chunk, no copy of the queries. The engine of
    ``return_std`` is built by a first call, so that the peak is the
    queries'; ``dask``: fitted on dask arrays (the grid sums only)."""

    def build(n, m):
        X, y, Q = _data(n, m, d)
        if options.get("n_outputs"):
            y = np.column_stack([y, y**2, -y])
        X, Q = X.astype(dtype), Q.astype(dtype)
        params = {k: v for k, v in options.items() if k != "n_outputs"}
        reg = KernelAttentionRegressor(
            "epanechikov", 1 / 25, algorithm="binned", **params
        )
        if dask:  # (the dask extra; .ci/run runs these paths with it)
            da = pytest.importorskip("dask.array")
            X, y = da.from_array(X, chunks=50_000), da.from_array(y, chunks=50_000)
        quietly(lambda: reg.fit(X, y))
        std = method == "predict_std"
        quietly(lambda: reg.predict(Q[:1], return_std=std))
        call = partial(reg.predict, Q, return_std=std)
        return MemoryPath(call, n, _nbytes(Q), input_copies=0)

    return build


def _empty_path(method, algorithm, on_empty):
    """Most queries with no key in a compact kernel's support."""

    def build(n, m):
        d = 2
        radius = 0.1 * _radius(n, d, neighbors=1)
        factory = _regressor_path(
            method,
            d,
            algorithm,
            "epanechikov",
            bandwidth=radius,
            on_empty=on_empty,
        )
        return factory(n, m)

    return build


def _classifier_path(method, algorithm, kernel):
    """``method`` of a KernelAttentionClassifier on three classes."""

    def build(n, m):
        X, y, Q = _data(n, m, 2)
        labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
        bandwidth = _radius(n, 2) / (2 if kernel == "gaussian" else 1)
        clf = KernelAttentionClassifier(kernel, bandwidth, algorithm=algorithm)
        if method == "fit":
            return MemoryPath(partial(clf.fit, X, labels), n, _nbytes(X, labels))
        clf.fit(X, labels)
        return MemoryPath(partial(getattr(clf, method), Q), n, _nbytes(Q))

    return build


def _cv_path(kernel, bandwidths, cv=None, degree=0, **options):
    """``KernelAttentionRegressorCV.fit`` on uniform 2-D data; ``bandwidths``
    in units of the radius holding about one key."""

    def build(n, m):
        d = 2
        X, y, _ = _data(n, 0, d)
        grid = [b * _radius(n, d, neighbors=1) for b in bandwidths]
        search = KernelAttentionRegressorCV(
            kernels=[kernel],
            bandwidths=grid,
            cv=cv,
            degree=degree,
            **{"n_neighbors": None, **options},
        )
        return MemoryPath(
            partial(search.fit, X, y),
            n,
            _nbytes(X, y),
            n_candidates=len(grid),
            # (degree 2 pools the moments of degree 1, and fits each point
            # from its weights)
            n_columns=cv_columns(min(degree, 1), d),
        )

    return build


def _cv_large_path(n, m):
    """The large-table selection of the defaults: an exact search on a
    subsample of 1,000 rows (the Gaussian and Epanechnikov kernels, 30
    widths and their extensions, both degrees, five counts), then the
    rescaled candidates on the held-out rows against all ``n``: bounded by
    the subsample's search and ``n`` moments, not by ``n`` candidates'
    sums (those of the exact search at n = 20,000 exceed the budget)."""
    d, sub = 2, 1000
    X, y, _ = _data(n, 0, d)
    search = KernelAttentionRegressorCV(subsample=sub, random_state=0)
    return MemoryPath(
        partial(search.fit, X, y),
        sub,
        _nbytes(X, y),
        n_candidates=2 * 40 * 2 + 10,
        n_columns=cv_columns(1, d),
    )


def _underflow_path(cv):
    """Gaussian with a width so small that every point's weights underflow."""

    def build(n, m):
        X, y, _ = _data(n, 0, 2)
        search = KernelAttentionRegressorCV(
            bandwidths=[1e-5, 0.1], cv=cv, degree=0, n_neighbors=None
        )
        return MemoryPath(
            partial(search.fit, X, y),
            n,
            _nbytes(X, y),
            n_candidates=2,
            n_columns=cv_columns(0, 2),
        )

    return build


def _projection_path(n, m):
    """``KernelAttentionProjection.fit`` on uniform 2-D data, a few
    iterations: its start scores 26 isotropic widths by leave-one-out, then
    each evaluation pools every pair in blocks."""
    X, y, _ = _data(n, 0, 2)
    projection = KernelAttentionProjection(init="identity", max_iter=2)
    return MemoryPath(
        partial(quietly, partial(projection.fit, X, y)),
        n,
        _nbytes(X, y),
        n_candidates=26,
        n_columns=cv_columns(0, 2),
    )


def _zero_inflated_path(algorithm):
    """A tenth of the keys at the origin and every query there: each query
    meets about ten times the neighbours that ``fit`` expects of a key."""

    def build(n, m):
        rng = np.random.default_rng(0)
        X = rng.uniform(size=(n, 2))
        X[rng.uniform(size=n) < 0.1] = 0.0
        y = X[:, 0] + X[:, 1]
        Q = np.zeros((m, 2))
        reg = KernelAttentionRegressor(
            "epanechikov", _radius(n, 2), algorithm=algorithm
        ).fit(X, y)
        return MemoryPath(partial(reg.predict, Q), n, _nbytes(Q))

    return build


def _sorted_queries_path(algorithm):
    """A fifth of the keys and queries in a disc of a tenth of the radius,
    the rest uniform; at least ``n / 2`` queries, sorted so that the disc's
    come first and fill whole chunks."""

    def build(n, m):
        m = max(m, n // 2)
        rng = np.random.default_rng(0)
        radius = _radius(n, 2)

        def points(k):
            P = rng.uniform(size=(k, 2))
            dense = rng.uniform(size=k) < 0.2
            P[dense] = 0.5 + 0.1 * radius * (rng.uniform(size=(dense.sum(), 2)) - 0.5)
            return P

        X, Q = points(n), points(m)
        Q = Q[np.argsort(np.abs(Q - 0.5).max(axis=1), kind="stable")]
        reg = KernelAttentionRegressor("epanechikov", radius, algorithm=algorithm)
        reg.fit(X, X[:, 0])
        return MemoryPath(partial(reg.predict, Q), n, _nbytes(Q))

    return build


def _paths():
    paths = {}
    for algorithm, kernel in (
        ("brute", "gaussian"),
        ("auto", "epanechikov"),
        ("kd_tree", "epanechikov"),
        ("ball_tree", "epanechikov"),
    ):
        paths[f"fit-{algorithm}-{kernel}"] = _regressor_path(
            "fit", 2, algorithm, kernel
        )
    for d in (1, 2):
        paths[f"predict-brute-gaussian-{d}d"] = _regressor_path(
            "predict", d, "brute", "gaussian"
        )
        for algorithm in ("brute", "kd_tree", "ball_tree"):
            paths[f"predict-{algorithm}-epanechikov-{d}d"] = _regressor_path(
                "predict", d, algorithm, "epanechikov"
            )
    for d in (1, 2):
        paths[f"predict-binned-{d}d"] = _binned_path(d)
        paths[f"predict-std-degree1-binned-{d}d"] = _binned_path(
            d, "predict_std", degree=1
        )
    paths["predict-binned-float32"] = _binned_path(2, dtype=np.float32)
    paths["predict-binned-outputs"] = _binned_path(2, "predict_std", n_outputs=3)
    paths["predict-binned-dask-fit"] = _binned_path(2, "predict_std", dask=True)
    for algorithm, kernel in (("brute", "gaussian"), ("kd_tree", "epanechikov")):
        paths[f"predict-std-{algorithm}-{kernel}"] = _regressor_path(
            "predict_std", 2, algorithm, kernel
        )
        paths[f"predict-degree1-{algorithm}-{kernel}"] = _regressor_path(
            "predict", 2, algorithm, kernel, degree=1
        )
        paths[f"predict-std-degree1-{algorithm}-{kernel}"] = _regressor_path(
            "predict_std", 2, algorithm, kernel, degree=1
        )
        for method in ("weights_dense", "weights_sparse"):
            paths[f"{method}-{algorithm}-{kernel}"] = _regressor_path(
                method, 2, algorithm, kernel
            )
        paths[f"weights_sparse-degree1-{algorithm}-{kernel}"] = _regressor_path(
            "weights_sparse", 2, algorithm, kernel, degree=1
        )
        # One engine thread: its chunks take the whole working_memory (with
        # more, each thread's share), so that one chunk's rows held while
        # the next is computed would show.
        for method in ("weights_dense", "predict_std"):
            paths[f"{method}-{algorithm}-{kernel}-one-thread"] = _regressor_path(
                method, 2, algorithm, kernel, n_jobs=1
            )
        for method in ("predict", "predict_std", "weights_sparse"):
            paths[f"{method}-degree2-{algorithm}-{kernel}"] = _regressor_path(
                method, 2, algorithm, kernel, degree=2
            )
    for on_empty in ("nearest", "mean", "nan"):
        for algorithm in ("brute", "kd_tree"):
            paths[f"predict-empty-{on_empty}-{algorithm}"] = _empty_path(
                "predict", algorithm, on_empty
            )
            paths[f"weights_sparse-empty-{on_empty}-{algorithm}"] = _empty_path(
                "weights_sparse", algorithm, on_empty
            )
    for algorithm, kernel in (("brute", "gaussian"), ("kd_tree", "epanechikov")):
        for method in ("fit", "predict_proba", "predict"):
            paths[f"classifier-{method}-{algorithm}-{kernel}"] = _classifier_path(
                method, algorithm, kernel
            )
    # The CV: bandwidths in units of the radius that holds about one point.
    smooth = [8.0, 16.0, 32.0, 64.0]
    for cv, name in ((None, "loo"), (5, "kfold")):
        for kernel in ("gaussian", "epanechikov"):
            for degree in (0, 1, 2):
                paths[f"cv-{name}-{kernel}-degree{degree}"] = _cv_path(
                    kernel, smooth, cv=cv, degree=degree
                )
        # Widths at which most points have no other point in their support.
        for on_empty in ("nearest", "mean", "nan"):
            paths[f"cv-{name}-empty-{on_empty}"] = _cv_path(
                "epanechikov", [0.1, 0.3, 30.0], cv=cv, on_empty=on_empty
            )
        paths[f"cv-{name}-underflow"] = _underflow_path(cv)
    paths["cv-loo-per_feature"] = _cv_path("gaussian", smooth, per_feature=True)
    # The in-sample criteria (the equivalent-kernel rows of degree 2).
    for degree in (1, 2):
        paths[f"cv-gcv-degree{degree}"] = _cv_path(
            "gaussian", smooth, degree=degree, scoring="gcv"
        )
    paths["cv-large"] = _cv_large_path
    # The conditional distribution, dense and from the trees' neighbours.
    for algorithm, kernel in (("brute", "gaussian"), ("kd_tree", "epanechikov")):
        for method in ("quantiles", "cdf"):
            paths[f"{method}-{algorithm}-{kernel}"] = _regressor_path(
                method, 2, algorithm, kernel
            )
    paths["projection-fit"] = _projection_path
    for algorithm in ("kd_tree", "ball_tree"):
        paths[f"tree-zero-inflated-{algorithm}"] = _zero_inflated_path(algorithm)
        paths[f"tree-sorted-queries-{algorithm}"] = _sorted_queries_path(algorithm)
    return paths


#: name -> ``build(n, m)``: the path prepared with ``n`` training samples and
#: ``m`` queries (half of them for the attention weights).
MEMORY_PATHS = _paths()


def measure(name, n, m, working_memory):
    """``(peak, output, budget)`` bytes of path ``name`` at size ``n``, ``m``."""
    path = quietly(lambda: MEMORY_PATHS[name](n, m))
    with config_context(working_memory=working_memory):
        result, peak = quietly(lambda: traced_peak(path.call))
    output = output_bytes(result)
    return peak, output, memory_budget(path, working_memory, output)
