"""Time KernelAttentionRegressor.predict against its peers, in one run.

Usage::

    python benchmarks/bench_predict.py            # the full table (minutes)
    python benchmarks/bench_predict.py --quick    # a sub-minute subset
    python benchmarks/bench_predict.py --crossover  # brute against the trees
    python benchmarks/bench_predict.py --chunks   # the brute chunk size
    python benchmarks/bench_predict.py --memory   # peak RSS of a 1e6-query predict
    python benchmarks/bench_predict.py --targets --repeats 5  # the target cases
    python benchmarks/bench_predict.py --local-linear  # degree=1 and return_std
    python benchmarks/bench_predict.py --float32  # float32 over float64, by stage

Peers, on the same data in the same process:

- ``broadcast``: the Dive into Deep Learning style NumPy implementation that
  materialises the (m, n, d) differences (skipped past ``--broadcast-gib``);
- ``statsmodels``: ``KernelReg(var_type="c" * d, reg_type="lc", bw=[h] * d)``
  for the gaussian, timed on a subset of the queries and scaled to all of
  them (it loops over queries in Python); its predictions are asserted equal
  to ours;
- ``radius_nn``: scikit-learn's ``RadiusNeighborsRegressor`` with a callable
  weight, for the compact kernels;
- ``floor``: the distance GEMM plus one ``exp`` over all m * n logits, with
  the same number of threads: what no implementation of the gaussian can
  beat.

Times are medians of repeats; the ratios are what to read, since the machine
is shared and noisy.
"""

import argparse
import functools
import gc
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn import config_context
from sklearn.neighbors import KDTree, RadiusNeighborsRegressor

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    LocalLinearFallbackWarning,
    kernels,
)
from sklearn_kernelpool._engine import _query_chunks as _chunk_plan

N_CPUS = os.cpu_count() or 1


def median_time(func, repeats):
    func()  # warm up: caches, thread pools, lazy imports
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def interleaved_times(funcs, repeats):
    """Best times of ``funcs`` (a dict), run in turn in every repeat.

    Taking turns spreads the drifts of a shared machine over all of them,
    and the fastest repeat is the one least disturbed by other work, so the
    ratios stay meaningful when the absolute times do not.
    """
    for func in funcs.values():
        func()  # warm up
    times = {key: [] for key in funcs}
    for _ in range(repeats):
        for key, func in funcs.items():
            gc.collect()
            start = time.perf_counter()
            func()
            times[key].append(time.perf_counter() - start)
    return {key: min(t) for key, t in times.items()}


def make_data(n, m, d, dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    y = (np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)).astype(dtype)
    Q = rng.normal(size=(m, d)).astype(dtype)
    return X, y, Q


def bandwidth_for(X, Q, neighbors):
    """The radius holding about ``neighbors`` keys around a query."""
    tree = KDTree(X.astype(np.float64))
    probe = Q[:: max(len(Q) // 200, 1)].astype(np.float64)
    dist, _ = tree.query(probe, k=int(min(max(neighbors, 1), len(X))))
    return float(np.median(dist[:, -1]))


# -- the peers ----------------------------------------------------------------
def broadcast_predict(X, y, Q, kernel, h):
    """The Dive into Deep Learning style: all (m, n, d) differences at once."""
    dist = np.sqrt(((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)) / h
    np.seterr(invalid="ignore", divide="ignore")  # queries with no neighbour
    if kernel == "gaussian":
        logits = -0.5 * dist**2
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
    else:
        weights = getattr(kernels, kernel)(dist)
    return (weights @ y) / weights.sum(axis=1)


def statsmodels_predict(X, y, Q, h, reg_type="lc"):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    d = X.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # statsmodels' own
        model = KernelReg(y, X, var_type="c" * d, reg_type=reg_type, bw=[h] * d)
        return model.fit(Q)[0]


def radius_nn(X, y, kernel, h):
    f = getattr(kernels, kernel)

    def weight(distances):
        # scikit-learn hands a ragged object array of distance arrays.
        if distances.dtype == object:
            return np.array([f(d / h) for d in distances], dtype=object)
        return f(distances / h)

    return RadiusNeighborsRegressor(radius=h, weights=weight).fit(X, y)


def floor_time(X, Q, h, n_threads, repeats):
    """One GEMM giving every gaussian logit, plus one exp over them.

    The augmented product [q, 1, -|q|^2 / 2] . [k, -|k|^2 / 2, 1] yields the
    logits -||q - k||^2 / 2 (in units of h) directly; computed in row blocks
    so that no m * n array is ever held.
    """
    Qs, Xs = Q / h, X / h
    Qa = np.column_stack([Qs, np.ones(len(Q)), -0.5 * (Qs**2).sum(1)]).astype(Q.dtype)
    Ka = np.vstack([Xs.T, -0.5 * (Xs**2).sum(1), np.ones(len(X))]).astype(X.dtype)
    blocks = np.array_split(np.arange(len(Q)), max(len(Q) // 1000, 1))

    def block(rows):
        logits = Qa[rows] @ Ka
        np.exp(logits, out=logits)

    def run():
        if n_threads == 1:
            for rows in blocks:
                block(rows)
        else:
            with ThreadPoolExecutor(n_threads) as pool:
                list(pool.map(block, blocks))

    from threadpoolctl import threadpool_limits

    limits = 1 if n_threads > 1 else None
    with threadpool_limits(limits=limits, user_api="blas"), np.errstate(under="ignore"):
        return median_time(run, repeats)


# -- the table ----------------------------------------------------------------
def ours(X, y, kernel, h, algorithm="auto", n_jobs=None):
    reg = KernelAttentionRegressor(
        kernel=kernel, bandwidth=h, algorithm=algorithm, n_jobs=n_jobs
    )
    return reg.fit(X, y)


def quiet(func):
    def wrapped(*args):
        with warnings.catch_warnings():
            # Both estimators warn about queries without neighbours.
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            warnings.filterwarnings("ignore", "One or more samples have no neighbors")
            return func(*args)

    return wrapped


@quiet
def bench_case(n, m, d, dtype, kernel, neighbors, args):
    X, y, Q = make_data(n, m, d, dtype)
    h = bandwidth_for(X, Q, neighbors)
    row = {
        "n": n,
        "m": m,
        "d": d,
        "dtype": np.dtype(dtype).name,
        "kernel": kernel,
        "neighbors": neighbors,
        "h": h,
    }
    # The largest cases (1e9 pairs) are timed once, and in one thread only
    # where a target asks for it, to keep the full run within half an hour.
    big = n * m >= 10**9 and not args.targets
    reps = 1 if big else args.repeats
    reg = ours(X, y, kernel, h, n_jobs=-1)
    row["algorithm"] = reg.algorithm_
    pred = reg.predict(Q)
    row["ours"] = median_time(lambda: reg.predict(Q), reps)
    reg1 = ours(X, y, kernel, h, n_jobs=1)
    row["ours_1thread"] = None if big else median_time(lambda: reg1.predict(Q), reps)
    if reg.algorithm_ != "brute":
        brute = ours(X, y, kernel, h, algorithm="brute", n_jobs=-1)
        row["brute"] = median_time(lambda: brute.predict(Q), max(reps // 2, 1))
        # Brute force rounds logits by about eps * (radius / h)**2.
        tol = 1e-6 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(brute.predict(Q), pred, rtol=tol, atol=tol)
    if kernel == "gaussian":
        row["floor"] = floor_time(X, Q, h, N_CPUS, reps)
    temp_gib = n * m * d * np.dtype(dtype).itemsize / 2**30
    if temp_gib <= args.broadcast_gib:
        t = median_time(lambda: broadcast_predict(X, y, Q, kernel, h), 1)
        row["broadcast"] = t
        row["broadcast_temp_gib"] = temp_gib
    else:
        row["broadcast"] = None
        row["broadcast_temp_gib"] = temp_gib
    if kernel == "gaussian" and dtype == np.float64 and not args.no_statsmodels:
        subset = Q[: args.statsmodels_queries // (5 if big else 1)]
        start = time.perf_counter()
        theirs = statsmodels_predict(X, y, subset, h)
        elapsed = time.perf_counter() - start
        row["statsmodels"] = elapsed * m / len(subset)
        # Same estimator, same h, no conversion: equal up to the rounding of
        # the logits, about eps * (data radius / h)**2 in the GEMM.
        gap = np.max(np.abs(theirs - pred[: len(subset)])) / np.max(np.abs(y))
        row["statsmodels_gap"] = float(gap)
        assert gap < 1e-9, f"statsmodels disagrees by {gap:.2e} of max |y|"
    if KERNEL_IS_COMPACT[kernel]:
        rnr = radius_nn(X.astype(np.float64), y, kernel, h)
        subset = Q[: args.radius_nn_queries // (5 if big else 1)]
        row["radius_nn"] = median_time(lambda: rnr.predict(subset), 1) * m / len(subset)
    return row


KERNEL_IS_COMPACT = {name: k.is_compact for name, k in kernels.KERNELS.items()}


def fmt_time(t):
    if t is None:
        return "skip"
    return f"{t * 1e3:9.1f}" if t < 10 else f"{t:8.1f}s"


def ratio(a, b):
    return "" if a is None or b is None else f"{a / b:7.1f}x"


def print_table(rows):
    header = (
        f"{'n':>7} {'m':>7} {'d':>2} {'dtype':>7} {'kernel':>11} {'nbrs':>6} "
        f"{'path':>9} {'ours ms':>9} {'1thr ms':>9} {'/floor':>7} "
        f"{'brute/':>8} {'bcast/':>8} {'sm/':>8} {'rnn/':>8} {'sm gap':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        floor = r.get("floor")
        gap = format(r["statsmodels_gap"], ".0e") if "statsmodels_gap" in r else ""
        print(
            f"{r['n']:>7} {r['m']:>7} {r['d']:>2} {r['dtype']:>7} {r['kernel']:>11} "
            f"{r['neighbors']:>6} {r['algorithm']:>9} {fmt_time(r['ours']):>9} "
            f"{fmt_time(r['ours_1thread']):>9} "
            f"{ratio(r['ours'], floor) if floor else '':>7} "
            f"{ratio(r.get('brute'), r['ours']):>8} "
            f"{ratio(r.get('broadcast'), r['ours']):>8} "
            f"{ratio(r.get('statsmodels'), r['ours']):>8} "
            f"{ratio(r.get('radius_nn'), r['ours']):>8} "
            f"{gap:>8}"
        )
    print(
        "\nours: n_jobs=-1; 1thr: n_jobs=1; /floor: ours over the GEMM + exp "
        "floor with as many threads;\nX/: the peer's time over ours (larger is "
        "better for us). bcast: full-broadcast NumPy; sm: statsmodels\nKernelReg "
        "and rnn: RadiusNeighborsRegressor with a callable weight, both timed on "
        "the first\nqueries and scaled to all (they loop over queries); "
        "sm gap: max |ours - statsmodels| / max |y|."
    )


TARGET_CASES = [
    ((10_000, 10_000, 8), np.float64, "gaussian", 32),
    ((10_000, 10_000, 8), np.float32, "gaussian", 32),
    ((100_000, 10_000, 1), np.float64, "epanechikov", 32),
]


def table(args):
    if args.targets:
        cases = TARGET_CASES
    elif args.quick:
        cases = [
            (size, dtype, "gaussian", 32)
            for size in [(1000, 1000, 1), (5000, 5000, 8)]
            for dtype in (np.float64, np.float32)
        ]
        cases.append(((50_000, 5000, 1), np.float64, "epanechikov", 32))
    else:
        sizes = [
            (1000, 1000, 1),
            (10_000, 10_000, 1),
            (10_000, 10_000, 8),
            (100_000, 10_000, 1),
            (100_000, 10_000, 8),
        ]
        cases = [
            (s, dt, k, nb)
            for s in sizes
            for dt in (np.float64, np.float32)
            for k in ("gaussian", "epanechikov")
            for nb in (32, s[0] // 10)
        ]
    rows = []
    for (n, m, d), dtype, kernel, neighbors in cases:
        row = bench_case(n, m, d, dtype, kernel, neighbors, args)
        rows.append(row)
        print(
            f"  done n={n} m={m} d={d} {np.dtype(dtype).name} {kernel} "
            f"nbrs={neighbors}: {row['ours'] * 1e3:.1f} ms",
            file=sys.stderr,
        )
    print_table(rows)
    f32 = [
        r
        for r in rows
        if (r["n"], r["m"], r["d"], r["kernel"], r["neighbors"])
        == (10_000, 10_000, 8, "gaussian", 32)
    ]
    if len(f32) == 2:
        r64, r32 = sorted(f32, key=lambda r: r["dtype"] != "float64")
        print(
            f"\nfloat32 speed-up at n = m = 1e4, d = 8, gaussian: "
            f"{r64['ours'] / r32['ours']:.2f}x (medians, one dtype after the other)"
        )
    if args.targets:
        # The float32 target, timed the way its ratio is read: both dtypes
        # in turn within every repeat.
        print()
        float32_speed(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


# -- the other modes ------------------------------------------------------------
@quiet
def crossover(args):
    """Brute against the trees, by dimension and neighbourhood fraction."""
    n, m = (20_000, 2_000) if not args.quick else (5_000, 500)
    fractions = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
    print(f"{'d':>3} {'fraction':>9} {'brute ms':>9} {'kd ms':>9} {'ball ms':>9}  best")
    for d in (1, 2, 4, 8, 16):
        X, y, Q = make_data(n, m, d, np.float64)
        for fraction in fractions:
            h = bandwidth_for(X, Q, fraction * n)
            times = {}
            for path in ("brute", "kd_tree", "ball_tree"):
                reg = ours(X, y, "epanechikov", h, algorithm=path)
                predict = lambda reg=reg, Q=Q: reg.predict(Q)  # noqa: E731
                times[path] = median_time(predict, args.repeats)
            best = min(times, key=times.get)
            ms = "".join(f"{times[p] * 1e3:>10.1f}" for p in times)
            print(f"{d:>3} {fraction:>9}{ms}  {best}")


def chunks(args):
    """The brute chunk size: the buffer near the cache, or larger."""
    X, y, Q = make_data(10_000, 10_000, 8, np.float64)
    reg = ours(X, y, "gaussian", 1.0)
    for size in (2**17, 2**19, 2**20, 2**21, 2**22, 2**23, 2**25):
        _chunk_plan.CHUNK_BYTES = size
        t = median_time(lambda: reg.predict(Q), args.repeats)
        print(f"buffer {size / 2**20:6.2f} MiB: {t * 1e3:8.1f} ms")


@quiet
def local_leverage(X, Q, h):
    """``(1 + D**2) / n_eff`` of each query's Gaussian local-linear fit: the
    leverage that the safeguard of ``degree=1`` reads (a plain loop)."""
    leverage = np.empty(len(Q))
    for i, q in enumerate(Q):
        a = np.exp(-0.5 * np.sum((X - q) ** 2, axis=1) / h**2)
        p = a / a.sum()
        m = p @ X
        C = (X - m).T @ ((X - m) * p[:, None])
        D2 = (q - m) @ np.linalg.pinv(C) @ (q - m)
        leverage[i] = (1.0 + D2) * (p @ p)
    return leverage


def local_linear(args):
    """degree=1 and return_std against plain pooling and statsmodels' "ll"."""
    cases = [(2_000, 2_000, 1), (5_000, 5_000, 2), (5_000, 5_000, 4)]
    if not args.quick:
        cases += [(20_000, 20_000, 2), (20_000, 20_000, 8)]
    print(
        f"{'n':>7} {'m':>7} {'d':>2} {'lc ms':>8} {'lc+std':>7} {'ll ms':>8} "
        f"{'ll+std':>7} {'ll/lc':>6} {'sm ll/':>8} {'sm gap':>8} {'shrunk':>8}"
    )
    for n, m, d in cases:
        X, y, Q = make_data(n, m, d, np.float64)
        h = bandwidth_for(X, Q, 32)
        variants = {}
        for degree in (0, 1):
            reg = KernelAttentionRegressor(bandwidth=h, degree=degree).fit(X, y)
            for std in (False, True):
                predict = functools.partial(reg.predict, Q, return_std=std)
                variants[degree, std] = predict
        times = interleaved_times(variants, args.repeats)
        sm, gap, shrunk = "", "", ""
        if not args.no_statsmodels:
            k = min(args.statsmodels_queries, m)
            start = time.perf_counter()
            expected = statsmodels_predict(X, y, Q[:k], h, reg_type="ll")
            sm_time = (time.perf_counter() - start) * m / k
            sm = f"{sm_time / times[1, False]:.0f}x"
            # statsmodels fits the plain local line; ours shrinks the slope
            # where its leverage exceeds one: the gap is over the others.
            kept = local_leverage(X, Q[:k], h) <= 1.0
            diff = np.abs(reg.predict(Q[:k]) - expected)[kept]
            gap = f"{np.max(diff):.0e}"
            shrunk = f"{k - np.count_nonzero(kept)}/{k}"
        print(
            f"{n:>7} {m:>7} {d:>2} {times[0, False] * 1e3:>8.1f} "
            f"{times[0, True] / times[0, False]:>6.2f}x {times[1, False] * 1e3:>8.1f} "
            f"{times[1, True] / times[1, False]:>6.2f}x "
            f"{times[1, False] / times[0, False]:>5.1f}x {sm:>8} {gap:>8} {shrunk:>8}"
        )
    print(
        "\nlc: degree=0, ll: degree=1 (gaussian, about 32 keys within h), best of "
        "the repeats; +std: the time with return_std=True over the time without;"
        "\nsm ll/: statsmodels "
        "KernelReg(reg_type='ll') over ours, timed on the first queries and scaled; "
        "sm gap: max |ours - statsmodels| over the compared queries whose leverage "
        "(1 + D^2) / n_eff is at most one, beside how many of them the safeguard "
        "shrinks."
    )


def stage_times(X, Q, h, dtype, repeats):
    """The stages of the brute gaussian, alone, on cache-sized blocks.

    The distance GEMM of the augmented queries, one ``exp`` (or ``exp2``,
    which the engine runs on float32 logits, in base 2) over the logits and
    the pooling GEMM against ``[y, 1]``: where the time of ``predict`` goes,
    measured the way the engine runs them, block by block.
    """
    Qs, Xs = (Q / h).astype(np.float64), (X / h).astype(np.float64)
    Qa = np.column_stack([Qs, np.ones(len(Q)), -0.5 * (Qs**2).sum(1)]).astype(dtype)
    Ka = np.vstack([Xs.T, -0.5 * (Xs**2).sum(1), np.ones(len(X))]).astype(dtype)
    pool = np.ones((len(X), 2), dtype=dtype)
    rows = max(_chunk_plan.CHUNK_BYTES // (np.dtype(dtype).itemsize * len(X)), 1)
    blocks = [slice(i, min(i + rows, len(Q))) for i in range(0, len(Q), rows)]
    buffer = np.empty((rows, len(X)), dtype=dtype)
    logits = Qa[:rows] @ Ka

    def gemm():
        for b in blocks:
            np.matmul(Qa[b], Ka, out=buffer[: b.stop - b.start])

    def exp():
        for b in blocks:
            np.exp(logits[: b.stop - b.start], out=buffer[: b.stop - b.start])

    def exp2():
        for b in blocks:
            np.exp2(logits[: b.stop - b.start], out=buffer[: b.stop - b.start])

    def pooling():
        for b in blocks:
            buffer[: b.stop - b.start] @ pool

    stages = {"gemm": gemm, "exp": exp, "exp2": exp2, "pool": pooling}
    return interleaved_times(stages, repeats)


@quiet
def float32_speed(args):
    """float32 over float64 on the brute gaussian, n = m = 1e4, d = 8.

    At h = 1 on standardised data and at the 32-neighbour width of the
    table, in one thread and in all of them; then the same stages alone
    (:func:`stage_times`), whose ratios bound what ``predict`` can gain.
    """
    from threadpoolctl import threadpool_limits

    n = m = 5_000 if args.quick else 10_000
    X, y, Q = make_data(n, m, 8, np.float64)
    widths = {"h = 1": 1.0, "32 neighbours": bandwidth_for(X, Q, 32)}
    print(
        f"gaussian, brute, n = m = {n}, d = 8; best of {args.repeats} interleaved "
        "repeats\n"
    )
    print(
        f"{'width':>14} {'threads':>7} {'f64 ms':>8} {'f32 ms':>8} {'ratio':>6} "
        f"{'max rel err':>11}"
    )
    for label, h in widths.items():
        fitted = {
            dt: KernelAttentionRegressor(bandwidth=h, algorithm="brute").fit(
                X.astype(dt), y.astype(dt)
            )
            for dt in (np.float64, np.float32)
        }
        queries = {dt: Q.astype(dt) for dt in fitted}
        expected = fitted[np.float64].predict(Q)
        got = fitted[np.float32].predict(queries[np.float32])
        err = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
        for threads in (1, N_CPUS):
            for reg in fitted.values():
                reg.set_params(n_jobs=threads)
            funcs = {
                np.dtype(dt).name: functools.partial(fitted[dt].predict, queries[dt])
                for dt in fitted
            }
            with threadpool_limits(threads):
                t = interleaved_times(funcs, args.repeats)
            print(
                f"{label:>14} {threads:>7} {t['float64'] * 1e3:>8.1f} "
                f"{t['float32'] * 1e3:>8.1f} {t['float64'] / t['float32']:>5.2f}x "
                f"{err:>11.1e}"
            )
    print("\nthe stages alone, one thread, h = 1:")
    with threadpool_limits(1):
        stages = {dt: stage_times(X, Q, 1.0, dt, args.repeats) for dt in ("f8", "f4")}
    for stage in stages["f8"]:
        t64, t32 = stages["f8"][stage], stages["f4"][stage]
        print(f"{stage:>14} {t64 * 1e3:>8.1f} {t32 * 1e3:>8.1f} {t64 / t32:>5.2f}x")


# The peak RSS of the child: VmHWM, which (unlike ru_maxrss) does not carry
# the parent's peak across fork and exec; ru_maxrss where /proc is missing.
MEMORY_CHILD = """
import resource, sys, numpy as np
from sklearn_kernelpool import KernelAttentionRegressor
def peak_kib():
    try:
        with open("/proc/self/status") as f:
            return int(next(l for l in f if l.startswith("VmHWM")).split()[1])
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
m, n, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
X = rng.normal(size=(n, d)); y = rng.normal(size=n); Q = rng.normal(size=(m, d))
reg = KernelAttentionRegressor(bandwidth=1.0, n_jobs=-1).fit(X, y)
reg.predict(Q[:1000])
before = peak_kib()
out = reg.predict(Q)
after = peak_kib()
print(before, after, X.nbytes + y.nbytes + Q.nbytes + out.nbytes)
"""


def memory(args):
    m = 100_000 if args.quick else 1_000_000
    n, d = 10_000, 8
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(m), str(n), str(d)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    elapsed = time.perf_counter() - start
    before, after, data = (int(v) for v in out)
    before, after = before / 2**10, after / 2**10  # ru_maxrss is in KiB
    data_mib = data / 2**20
    print(
        f"predict of m = {m} queries against n = {n} keys, d = {d}, gaussian, "
        f"n_jobs=-1 ({elapsed:.1f} s in all)"
    )
    print(
        f"peak RSS before predict {before:.0f} MiB, after {after:.0f} MiB; "
        f"inputs and output {data_mib:.0f} MiB"
    )
    print(
        f"peak RSS growth in predict: {after - before:.0f} MiB; the dense "
        f"attention matrix would take {m * n * 8 / 2**30:.0f} GiB"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--crossover", action="store_true")
    parser.add_argument("--chunks", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument(
        "--local-linear", action="store_true", help="degree=1 and return_std"
    )
    parser.add_argument(
        "--targets", action="store_true", help="only the cases of the targets"
    )
    parser.add_argument(
        "--float32", action="store_true", help="float32 over float64, by stage"
    )
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--broadcast-gib", type=float, default=7.0)
    parser.add_argument("--statsmodels-queries", type=int, default=200)
    parser.add_argument("--radius-nn-queries", type=int, default=2000)
    parser.add_argument("--no-statsmodels", action="store_true")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = 3
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
        f"{N_CPUS} cores, Python {platform.python_version()}, NumPy {np.__version__}"
    )
    if args.crossover:
        crossover(args)
    elif args.chunks:
        chunks(args)
    elif args.memory:
        memory(args)
    elif args.local_linear:
        local_linear(args)
    elif args.float32:
        float32_speed(args)
    else:
        table(args)
        if not args.quick and not args.targets:
            print()
            memory(args)


if __name__ == "__main__":
    with config_context(assume_finite=False):
        main()
