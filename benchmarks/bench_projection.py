"""Time, memory and accuracy of ``KernelAttentionProjection`` (MLKR) against
the dense MLKR of metric-learn and a dense NumPy reimplementation, in one run.

Usage::

    python benchmarks/bench_projection.py            # full run
    python benchmarks/bench_projection.py --quick    # about a minute
    python benchmarks/bench_projection.py --seeds 0 1 2 3 4
    python benchmarks/bench_projection.py --only evaluation fit
    python benchmarks/bench_projection.py --blas-threads 0   # BLAS default

Tables:

0. ``check``: on a small case (200 x 5, a random 3 x 5 map), the loss and
   the gradient of ours against the dense reimplementation (and metric-learn
   where it imports). Our loss is the weighted mean squared error
   ``sum_i w_i ||y_i - f_i||^2 / (W n_outputs)`` with the gaussian
   ``exp(-u^2 / 2)``; MLKR's cost is the plain sum with ``exp(-u^2)``. So
   ours at ``sqrt(2) A`` times ``n`` is MLKR's cost at ``A``, and ours'
   gradient there times ``n sqrt(2)`` is MLKR's gradient: the line prints the
   largest relative difference after that rescaling (rounding: ~1e-15).
1. ``evaluation``: milliseconds per evaluation of the loss and its gradient
   at 1,500 x 10 (a full 10 x 10 map, gaussian), the median of several
   repetitions on the same data in the same process, taken in turns so that
   each sees the same load of the shared machine, of ours
   (``_widths._projection_loss.projection_loss``, row blocks within
   ``working_memory``), of metric-learn's ``MLKR._loss`` and of the dense
   reimplementation, with the ratios ``peer / ours``.
2. ``fit``: seconds per fit at 1,500 x 10 with ``max_iter=50``:
   ``KernelAttentionProjection(init="identity", max_iter=50).fit`` (its
   start selection included), ours' L-BFGS-B alone from the same start
   (``learn_projection``), the dense reimplementation driven by the same
   SciPy L-BFGS-B in the same parameters (our map of the standardised
   features; L-BFGS-B is not invariant to their scale), with the same
   start, the same loss scale (``y`` in units of its variance, the cost
   over ``n``) and the same ``max_iter`` and ``gtol``, so that the two
   follow the same iterates up to rounding, and metric-learn's
   ``MLKR(init=start, max_iter=50).fit`` (its own cost scale and
   tolerance).
3. ``memory``: the peak traced by ``tracemalloc`` of one evaluation of ours
   at 40,000 x 6 (10,000 x 6 with ``--quick``; a full 6 x 6 map, the default
   ``working_memory``), with the bytes one ``n x n`` float64 matrix of the
   dense approach would take (computed, not run: metric-learn holds four of
   them at once, the distances, the softmax, ``W`` and ``W + W^T``), and the
   traced peaks of both at the timing size for contrast. One evaluation at
   40,000 rows takes about 20 seconds on a shared two-core machine (up to a
   minute under load); the full run, about three minutes.
4. ``accuracy``: the R^2 of the out-of-fold predictions of 5-fold shuffled
   ``KFold`` (seeds ``--seeds``, default 0 1 2; 0 alone with ``--quick``),
   mean and standard deviation over the seeds, of the pipelines
   ``StandardScaler`` then ``KernelAttentionRegressorCV(degree=0)``
   (isotropic), the same with ``per_feature=True``,
   ``KernelAttentionProjection()`` with ``KernelAttentionRegressor(
   bandwidth=1.0)`` (learned full map) and the same with ``n_components=2``,
   and ``KernelAttentionRegressorCV(degree=0, projection="auto")`` where this
   version has the keyword (``n/a`` otherwise), on a single-index model
   ``y = sin(2 w.x) + 0.1 e`` (x ~ N(0, I_10), w a dense unit vector, n =
   600), a two-index model in rotated coordinates ``y = sin(u_1) + u_2^2 / 2
   + 0.1 e``, ``u = Q x`` for a random rotation ``Q`` (d = 8, n = 600), and
   scikit-learn's diabetes table (442 x 10).

metric-learn 0.7.0 passes the keyword ``force_all_finite`` to
``check_array`` and ``check_X_y``, which scikit-learn 1.8 removed: where
scikit-learn no longer accepts it, ``metric_learn._util``'s two names are
replaced, for this process, by wrappers that pass it on as
``ensure_all_finite``. Its ``MLKR._loss`` needs no input checks and is
called directly on an ``MLKR()`` instance. Without metric-learn its rows say
so and the rest runs.

The BLAS runs one thread unless ``--blas-threads`` says otherwise (0: its
own default), and the evaluation table is printed at its default too: on a
machine shared with other work, the threads of OpenBLAS wait on each other
at every product, which costs the many small products of the row blocks
most. Ratios are what to read: the machine is shared and its absolute
times drift.
"""

import argparse
import inspect
import os
import platform
import time
import tracemalloc
import warnings

import numpy as np
import scipy
import sklearn
from scipy.optimize import minimize
from scipy.special import logsumexp
from sklearn.datasets import load_diabetes
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_array
from threadpoolctl import threadpool_info, threadpool_limits

import sklearn_kernelpool
from sklearn_kernelpool import (
    KernelAttentionProjection,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._projection import start_widths
from sklearn_kernelpool._widths._guard import _select_isotropic
from sklearn_kernelpool._widths._projection_learning import (
    feature_scale,
    learn_projection,
)
from sklearn_kernelpool._widths._projection_loss import projection_loss
from sklearn_kernelpool.kernels import KERNELS

try:
    import metric_learn
    import metric_learn._util
    from metric_learn import MLKR
except ImportError:  # the peer is optional
    metric_learn = MLKR = None

GAUSSIAN = KERNELS["gaussian"]
# Our gaussian is exp(-u^2 / 2), MLKR's exp(-u^2): ours at SQRT2 * A pools
# as MLKR at A.
SQRT2 = np.sqrt(2.0)
TIMING_SHAPE = (1500, 10)
FIT_MAX_ITER = 50
MEMORY_ROWS = {"full": 40_000, "quick": 10_000}
MEMORY_FEATURES = 6
REPEATS = {"full": 15, "quick": 5}
N_SPLITS = 5
GB = 1e9
MIB = 2**20
COLUMNS = ("isotropic", "per-feature", "learned full A", "learned rank 2", "guarded")


# The peers ----------------------------------------------------------------


def dense_mlkr(A, X, y):
    """MLKR's cost and gradient as metric-learn computes them, with dense
    ``n x n`` matrices: ``cost = sum_i (yhat_i - y_i)^2``, ``yhat_i`` the
    softmax of ``-||A (x_i - x_j)||^2`` over ``j != i`` pooling ``y``."""
    Z = X @ A.T
    norms = np.einsum("ij,ij->i", Z, Z)
    dist = norms[:, None] + norms[None, :] - 2.0 * (Z @ Z.T)
    np.maximum(dist, 0.0, out=dist)
    np.fill_diagonal(dist, np.inf)
    softmax = np.exp(-dist - logsumexp(-dist, axis=1)[:, None])
    yhat = softmax @ y
    residual = yhat - y
    cost = residual @ residual
    # dcost / ddist_ij = -2 W_ij; W has zero row sums, so the Laplacian of
    # W + W^T has the column sums of W on its diagonal.
    W = softmax * residual[:, None] * (y[None, :] - yhat[:, None])
    W_sym = W + W.T
    np.fill_diagonal(W_sym, -W.sum(axis=0))
    grad = 4.0 * (Z.T @ W_sym) @ X
    return cost, grad


def fit_dense(X, y, start, max_iter, tol):
    """The dense reimplementation under the L-BFGS-B of
    :func:`learn_projection`: same parameters (our map of the standardised
    features ``theta``, MLKR's ``theta / sqrt(2)``: L-BFGS-B is not invariant
    to their scale), same start, same loss scale (``y`` in units of its
    variance, the cost over ``n``), same options."""
    y = (y - y.mean()) / y.std()
    n = len(y)
    scale = feature_scale(X, np.ones(n))
    X, start = X / scale, start * scale

    def fun(theta):
        cost, grad = dense_mlkr(theta.reshape(start.shape) / SQRT2, X, y)
        return cost / n, grad.ravel() / (n * SQRT2)

    return minimize(
        fun,
        start.ravel(),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "gtol": tol},
    )


def _ensure_all_finite(check):
    def checked(*args, force_all_finite=True, **kwargs):
        kwargs.setdefault("ensure_all_finite", force_all_finite)
        return check(*args, **kwargs)

    return checked


def patch_metric_learn():
    """Let metric-learn 0.7.0 check its inputs under a scikit-learn without
    ``force_all_finite``; what was done, as a phrase."""
    if metric_learn is None:
        return "not installed"
    if "force_all_finite" in inspect.signature(check_array).parameters:
        return metric_learn.__version__
    util = metric_learn._util
    if not getattr(util.check_array, "_patched", False):
        for name in ("check_array", "check_X_y"):
            wrapped = _ensure_all_finite(getattr(util, name))
            wrapped._patched = True
            setattr(util, name, wrapped)
    return f"{metric_learn.__version__} (force_all_finite patched)"


def metric_learn_loss():
    """``(A, X, y) -> (cost, flat grad)`` of metric-learn's ``MLKR._loss``,
    or None."""
    if MLKR is None:
        return None
    model = MLKR()
    model.n_iter_ = 0

    def loss(A, X, y):
        return model._loss(A.ravel(), X, y)

    return loss


def ours(A, X, Y, weights):
    """Our loss and gradient at ``A`` (no predictions kept)."""
    loss, grad, _ = projection_loss(A, X, Y, weights, GAUSSIAN)
    return loss, grad


# Data ---------------------------------------------------------------------


def timing_data(n, d, seed=0):
    """Standard normal keys, a smooth target of two of them plus noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


def single_index(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, 10))
    w = rng.normal(size=10)
    w /= np.linalg.norm(w)
    return X, np.sin(2 * X @ w) + 0.1 * rng.normal(size=600)


def two_index(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, 8))
    Q, R = np.linalg.qr(rng.normal(size=(8, 8)))
    Q *= np.sign(np.diag(R))  # a uniformly random rotation
    U = X @ Q.T
    return X, np.sin(U[:, 0]) + U[:, 1] ** 2 / 2 + 0.1 * rng.normal(size=600)


def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), y


DATASETS = {
    "single-index (600 x 10)": single_index,
    "two-index rotated (600 x 8)": two_index,
    "diabetes (442 x 10)": diabetes,
}


# Tables -------------------------------------------------------------------


def median_ms(functions, repeats):
    """The median wall time of each of ``functions`` (a dict of callables),
    in milliseconds; the repetitions take turns, so that every function sees
    the same load of the shared machine."""
    times = {name: [] for name in functions}
    for function in functions.values():
        function()  # warm-up
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * float(np.median(t)) for name, t in times.items()}


def relative_difference(a, b):
    """The largest difference over the largest magnitude of ``b``."""
    a, b = np.ravel(a), np.ravel(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def check(args):
    rng = np.random.default_rng(1)
    X, y = timing_data(200, 5, seed=1)
    A = rng.normal(scale=0.5, size=(3, 5))
    n = len(y)
    loss, grad = ours(SQRT2 * A, X, y[:, None], np.ones(n))
    loss, grad = n * loss, n * SQRT2 * grad
    cost, dense_grad = dense_mlkr(A, X, y)
    print(
        "\ncheck (200 x 5, a 3 x 5 map): ours rescaled against the dense MLKR: "
        f"loss {relative_difference(loss, cost):.1e}, "
        f"gradient {relative_difference(grad, dense_grad):.1e} "
        "(max relative difference)"
    )
    peer = metric_learn_loss()
    if peer is not None:
        ml_cost, ml_grad = peer(A, X, y)
        print(
            "check: ours rescaled against metric-learn's MLKR._loss: "
            f"loss {relative_difference(loss, ml_cost):.1e}, "
            f"gradient {relative_difference(grad, ml_grad):.1e}"
        )


def evaluation(args):
    n, d = TIMING_SHAPE
    X, y = timing_data(n, d)
    Y, weights = y[:, None], np.ones(n)
    A = np.eye(d)
    repeats = REPEATS[args.mode]
    functions = {"ours (row blocks)": lambda: ours(A, X, Y, weights)}
    peer = metric_learn_loss()
    if peer is not None:
        functions["metric-learn MLKR._loss"] = lambda: peer(A / SQRT2, X, y)
    functions["dense reimplementation"] = lambda: dense_mlkr(A / SQRT2, X, y)
    print(
        f"\nevaluation: loss + gradient at {n} x {d}, a full {d} x {d} map, "
        f"gaussian; median of {repeats}"
    )
    print(f" {'':26} {'BLAS threads':>12} {'ms':>9}  peer/ours")
    for threads in dict.fromkeys((args.blas_threads, args.default_threads)):
        with threadpool_limits(threads, user_api="blas"):
            rows = median_ms(functions, repeats)
        for name, ms in rows.items():
            ratio = ms / rows["ours (row blocks)"]
            print(f" {name:26} {threads:12d} {ms:9.1f}  {ratio:9.2f}")
    if peer is None:
        print(" metric-learn: not installed")


def fit(args):
    n, d = TIMING_SHAPE
    X, y = timing_data(n, d)
    weights = np.ones(n)
    Y = y[:, None]
    # The start of init="identity", as the estimator computes it.
    h = _select_isotropic(
        X, Y, weights, GAUSSIAN, start_widths(X, weights), 0, "squared_error"
    )
    start = np.eye(d) / h
    projection = KernelAttentionProjection(init="identity", max_iter=FIT_MAX_ITER)
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        begin = time.perf_counter()
        projection.fit(X, y)
        rows["ours: fit (with its start)"] = (
            time.perf_counter() - begin,
            projection.n_iter_,
            projection.loss_,
        )
        begin = time.perf_counter()
        learned = learn_projection(
            X, Y, weights, GAUSSIAN, start, max_iter=FIT_MAX_ITER, warn=False
        )
        rows["ours: L-BFGS-B alone"] = (
            time.perf_counter() - begin,
            learned.n_iter,
            learned.loss,
        )
        begin = time.perf_counter()
        result = fit_dense(X, y, start, FIT_MAX_ITER, projection.tol)
        rows["dense: L-BFGS-B, same start"] = (
            time.perf_counter() - begin,
            result.nit,
            result.fun,
        )
        note = patch_metric_learn()
        if MLKR is not None:
            model = MLKR(init=start / SQRT2, max_iter=FIT_MAX_ITER)
            begin = time.perf_counter()
            try:
                model.fit(X, y)
                # Its n_iter_ counts evaluations; its cost is in y's units.
                cost, _ = dense_mlkr(model.components_, X, y)
                rows["metric-learn MLKR.fit"] = (
                    time.perf_counter() - begin,
                    None,
                    cost / n / y.var(),
                )
            except Exception as error:  # its checks may break anew
                note = f"{note}; fit failed: {type(error).__name__}: {error}"
    print(
        f"\nfit: {n} x {d}, max_iter={FIT_MAX_ITER}, start eye / h, h = {h:.3g} "
        f"(metric-learn {note})"
    )
    print(f" {'':29} {'s':>7} {'iter':>5} {'LOO loss':>9}  peer/ours")
    reference = rows["ours: L-BFGS-B alone"][0]
    for name, (seconds, n_iter, loss) in rows.items():
        iters = "" if n_iter is None else n_iter
        print(
            f" {name:29} {seconds:7.2f} {iters:>5} {loss:9.4f}  "
            f"{seconds / reference:9.2f}"
        )
    print(" (LOO loss: 1 - R^2 of the leave-one-out fits; peer/ours against L-BFGS-B")
    print("  alone)")


def traced_peak(function):
    """The result of ``function()``, the peak traced during it, and seconds."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    begin = time.perf_counter()
    try:
        result = function()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak, time.perf_counter() - begin


def memory(args):
    n, d = MEMORY_ROWS[args.mode], MEMORY_FEATURES
    X, y = timing_data(n, d)
    Y, weights = y[:, None], np.ones(n)
    print(
        f"\nmemory: traced peak of one loss + gradient, full {d} x {d} map, "
        f"working_memory = {sklearn.get_config()['working_memory']} MiB"
    )
    print(f" {'':34} {'traced':>10} {'seconds':>8}")
    _, peak, seconds = traced_peak(lambda: ours(np.eye(d), X, Y, weights))
    verdict = "under 1 GB" if peak < GB else "OVER 1 GB"
    print(f" {f'ours, {n} x {d}':34} {peak / MIB:7.1f} MiB {seconds:8.1f}  {verdict}")
    matrix = n * n * 8
    print(
        f" {f'dense, {n} x {d} (computed)':34} {matrix / GB:7.1f} GB "
        f"per n x n matrix, {4 * matrix / GB:.1f} GB for four"
    )
    m, e = TIMING_SHAPE
    X, y = timing_data(m, e)
    for name, function in (
        (f"ours, {m} x {e}", lambda: ours(np.eye(e), X, y[:, None], np.ones(m))),
        (f"dense, {m} x {e}", lambda: dense_mlkr(np.eye(e), X, y)),
    ):
        _, peak, seconds = traced_peak(function)
        print(f" {name:34} {peak / MIB:7.1f} MiB {seconds:8.2f}")


def pipelines(guarded):
    """The pipelines of the accuracy table; None where this version lacks
    one."""
    return {
        "isotropic": make_pipeline(
            StandardScaler(), KernelAttentionRegressorCV(degree=0)
        ),
        "per-feature": make_pipeline(
            StandardScaler(), KernelAttentionRegressorCV(degree=0, per_feature=True)
        ),
        "learned full A": make_pipeline(
            StandardScaler(),
            KernelAttentionProjection(),
            KernelAttentionRegressor(bandwidth=1.0),
        ),
        "learned rank 2": make_pipeline(
            StandardScaler(),
            KernelAttentionProjection(n_components=2),
            KernelAttentionRegressor(bandwidth=1.0),
        ),
        "guarded": (
            make_pipeline(
                StandardScaler(),
                KernelAttentionRegressorCV(degree=0, projection="auto"),
            )
            if guarded
            else None
        ),
    }


def accuracy(args):
    guarded = "projection" in KernelAttentionRegressorCV().get_params()
    seeds = args.seeds
    print(
        f"\naccuracy: R^2 of {N_SPLITS}-fold shuffled out-of-fold predictions, "
        f"mean (sd) over seeds {' '.join(map(str, seeds))}"
    )
    print(" guarded = KernelAttentionRegressorCV(degree=0, projection='auto')")
    print(f" {'':28}" + "".join(f"{name:>17}" for name in COLUMNS) + f"{'time':>8}")
    for label, make in DATASETS.items():
        X, y = make()
        cells = []
        begin = time.perf_counter()
        for model in pipelines(guarded).values():
            if model is None:
                cells.append(f"{'n/a':>17}")
                continue
            scores = []
            for seed in seeds:
                cv = KFold(N_SPLITS, shuffle=True, random_state=seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    predictions = cross_val_predict(model, X, y, cv=cv)
                scores.append(r2_score(y, predictions))
            cells.append(f"{np.mean(scores):9.4f} ({np.std(scores):.3f})")
        seconds = time.perf_counter() - begin
        print(f" {label:28}" + "".join(cells) + f"{seconds:7.0f}s", flush=True)


CASES = {
    "check": check,
    "evaluation": evaluation,
    "fit": fit,
    "memory": memory,
    "accuracy": accuracy,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about a minute")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="KFold seeds (0 1 2)"
    )
    parser.add_argument("--only", nargs="+", choices=sorted(CASES))
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="threads of the BLAS (default 1; 0: the BLAS's own default)",
    )
    args = parser.parse_args()
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    args.default_threads = max([pool["num_threads"] for pool in blas] or [1])
    args.blas_threads = args.blas_threads or args.default_threads
    args.mode = "quick" if args.quick else "full"
    if args.seeds is None:
        args.seeds = [0] if args.quick else [0, 1, 2]
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} "
        f"CPUs, Python {platform.python_version()}; sklearn-kernelpool "
        f"{sklearn_kernelpool.__version__}, scikit-learn {sklearn.__version__}, "
        f"NumPy {np.__version__}, SciPy {scipy.__version__}, metric-learn "
        f"{patch_metric_learn()}; BLAS threads {args.blas_threads} (its default "
        f"{args.default_threads}); {args.mode} run",
        flush=True,
    )
    with threadpool_limits(args.blas_threads, user_api="blas"):
        for name, case in CASES.items():
            if args.only is None or name in args.only:
                case(args)


if __name__ == "__main__":
    main()
