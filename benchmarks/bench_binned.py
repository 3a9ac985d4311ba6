"""Time the binned path (algorithm="binned") against the exact paths and KDEpy.

Usage::

    python benchmarks/bench_binned.py            # every row (a few minutes)
    python benchmarks/bench_binned.py --quick    # smaller sizes (under a minute)
    python benchmarks/bench_binned.py --crossover  # binned against exact by n
    python benchmarks/bench_binned.py --memory   # peak RSS of predict, by queries
    python benchmarks/bench_binned.py --dask     # fit on a local cluster, 1e7, 1e8 rows
    python benchmarks/bench_binned.py --cv       # bandwidth selection, 30 widths
    python benchmarks/bench_binned.py --kdepy    # the KDEpy row alone

Rows (ratios are what to read; the machine is shared and noisy):

- 1-D gaussian, n keys x n queries: fit + predict of the binned path
  against the fastest exact path at the same width (brute force for the
  gaussian, timed on a subset of the queries and scaled to all of them),
  and the relative error of the binned predictions on that subset;
- 1-D, 10 n keys: fit + predict time of the binned path;
- 2-D epanechnikov, n x n: binned against the k-d tree at the same width
  (timed on a subset of queries and scaled), and the error;
- KDEpy: its FFTKDE applied to Nadaraya-Watson, two FFT densities (of the
  weights and of the weights times the values, shifted positive) on one
  grid, their ratio interpolated to the queries, against the binned path
  with the same grid size and kernel (the median of three runs of each);
- memory: peak RSS growth of predict on m and 10 m queries, each in a fresh
  subprocess;
- dask (``--dask``): the fit of 1-D rows drawn by ``dask.array.random`` in
  partitions on a local cluster of two single-threaded worker processes (the
  rows never reach the client; each of the fit's two passes draws them
  again, timed alone as "draw"), against the in-memory binned fit of the
  same rows (timed up to 2e7 rows, scaled linearly beyond), and the largest
  relative difference of their predictions.
- ``--cv``: KernelAttentionRegressorCV scoring 30 gaussian widths by
  leave-one-out on n noisy 1-D rows with ``algorithm="binned"`` (degree 0,
  and degree "auto"), against the exact leave-one-out timed on a subset and
  scaled by the pairs (n / n_sub)**2; on that subset, the largest relative
  difference of the binned scores from the exact ones and the chosen widths.
"""

import argparse
import resource
import subprocess
import sys
import time

import numpy as np

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV


def data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(6 * X.sum(axis=1)) + X[:, 0] ** 2
    return X, y


def timed(func):
    start = time.perf_counter()
    out = func()
    return time.perf_counter() - start, out


def binned_run(X, y, Q, **params):
    est = KernelAttentionRegressor(algorithm="binned", **params)
    return timed(lambda: est.fit(X, y).predict(Q))


def exact_scaled(X, y, Q, n_sub, algorithm, **params):
    """Time of fit + predict on all of Q, from predict on n_sub queries."""
    est = KernelAttentionRegressor(algorithm=algorithm, **params)
    t_fit, _ = timed(lambda: est.fit(X, y))
    t_sub, pred = timed(lambda: est.predict(Q[:n_sub]))
    return t_fit + t_sub * len(Q) / n_sub, pred


def row(name, binned, exact, error=None, target=""):
    ratio = exact / binned if exact else float("nan")
    err = "" if error is None else f"  error {error:.2e}"
    print(
        f"{name:<40} binned {binned:7.2f} s  other {exact:9.2f} s  "
        f"ratio {ratio:7.1f}x{err}  {target}",
        flush=True,
    )


def one_d(n, n_sub):
    X, y = data(n, 1)
    Q, _ = data(n, 1, seed=1)
    h = 1 / 25
    tb, pb = binned_run(X, y, Q, bandwidth=h)
    te, pe = exact_scaled(X, y, Q, n_sub, "brute", bandwidth=h)
    error = np.max(np.abs(pb[:n_sub] - pe)) / np.std(y)
    row(f"1-D gaussian {n:.0e} x {n:.0e}", tb, te, error, "(target >= 10x, <= 1e-3)")
    X, y = data(10 * n, 1)
    tb, _ = binned_run(X, y, Q[: n // 10], bandwidth=h)
    print(f"1-D gaussian {10 * n:.0e} keys: fit + predict {tb:.2f} s (target <= 3 s)")


def two_d(n, n_sub):
    X, y = data(n, 2)
    Q, _ = data(n, 2, seed=1)
    h = 1 / 25
    params = dict(kernel="epanechnikov", bandwidth=h)
    tb, pb = binned_run(X, y, Q, **params)
    te, pe = exact_scaled(X, y, Q, n_sub, "kd_tree", **params)
    error = np.max(np.abs(pb[:n_sub] - pe)) / np.std(y)
    row(f"2-D epanechnikov {n:.0e} x {n:.0e}", tb, te, error, "(target >= 10x)")


def kdepy(n):
    try:
        from KDEpy import FFTKDE
    except ImportError:
        print("KDEpy: not installed, row skipped (pip install KDEpy)")
        return
    X, y = data(n, 1)
    Q, _ = data(n, 1, seed=1)
    h = 1 / 25
    est = KernelAttentionRegressor(algorithm="binned", bandwidth=h)
    tb, pb = timed(lambda: est.fit(X, y).predict(Q))
    n_grid = int(est._pool.n_bins[0])
    shift = 1.0 - y.min()

    def nadaraya_watson():
        lo, hi = X.min() - 8 * h, X.max() + 8 * h
        grid = np.linspace(lo, hi, n_grid)
        x = X[:, 0]
        den = FFTKDE(kernel="gaussian", bw=h).fit(x).evaluate(grid)
        num = FFTKDE(kernel="gaussian", bw=h).fit(x, weights=y + shift)
        num = num.evaluate(grid) * np.sum(y + shift) / len(y)
        return np.interp(Q[:, 0], grid, num / den) - shift

    # The median of three alternating runs of each (the machine is shared).
    ours, theirs = [tb], []
    for _ in range(3):
        theirs.append(timed(nadaraya_watson)[0])
        ours.append(timed(lambda: est.fit(X, y).predict(Q))[0])
    tb, tk = np.median(ours[1:]), np.median(theirs)
    pk = nadaraya_watson()
    error = np.max(np.abs(pb - pk)) / np.std(y)
    row(f"KDEpy FFTKDE N-W {n:.0e} x {n:.0e}", tb, tk, error, "(target ratio >= 1/1.5)")


def memory_child(m):
    # Keys few enough that the fit's own peak stays below predict's.
    X, y = data(10_000, 1)
    est = KernelAttentionRegressor(algorithm="binned", bandwidth=1 / 25).fit(X, y)
    Q = np.empty((m, 1))
    np.random.default_rng(1).random(out=Q)  # no temporary
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    est.predict(Q)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print((after - before) / 1024)


def memory(m):
    growth = []
    for size in (m, 10 * m):
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(size)],
            capture_output=True,
            text=True,
            check=True,
        )
        growth.append(float(out.stdout.split()[-1]))
    print(
        f"memory: peak RSS growth of predict {growth[0]:.0f} MiB on {m:.0e} "
        f"queries, {growth[1]:.0f} MiB on {10 * m:.0e}, of which the outputs "
        f"{8 * m / 2**20:.0f} and {80 * m / 2**20:.0f} MiB (target: the rest flat)"
    )


def crossover():
    for d, kernel in [(1, "gaussian"), (1, "epanechnikov"), (2, "epanechnikov")]:
        for n in (10_000, 30_000, 100_000, 300_000):
            X, y = data(n, d)
            Q, _ = data(n, d, seed=1)
            params = dict(kernel=kernel, bandwidth=1 / 25)
            tb, _ = binned_run(X, y, Q, **params)
            algorithm = "brute" if kernel == "gaussian" else "kd_tree"
            te, _ = exact_scaled(X, y, Q, min(n, 5000), algorithm, **params)
            row(f"crossover {d}-D {kernel} n={n}", tb, te)


def in_memory_fit(X, y, Q, params):
    """Time of the in-memory binned fit, and its predictions at Q."""
    memory = KernelAttentionRegressor(**params)
    t_mem, _ = timed(lambda: memory.fit(X, y))
    return t_mem, memory.predict(Q)


def dask_fit(sizes, chunk=2_500_000):
    import dask.array as da
    from distributed import Client, LocalCluster

    params = dict(algorithm="binned", bandwidth=0.01)
    Q = np.linspace(0, 1, 1001)[:, None]
    per_row = None
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        for n in sizes:
            rng = da.random.default_rng(0)
            X = rng.uniform(0, 1, (n, 1), chunks=(min(n, chunk), 1))
            y = da.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=n, chunks=min(n, chunk))
            t_draw, _ = timed(lambda X=X, y=y: (X.sum() + y.sum()).compute())
            lazy = KernelAttentionRegressor(**params)
            t_dask, _ = timed(lambda lazy=lazy, X=X, y=y: lazy.fit(X, y))
            if n <= 20_000_000:
                t_mem, want = in_memory_fit(X.compute(), y.compute(), Q, params)
                difference = np.max(np.abs(lazy.predict(Q) - want)) / np.abs(want).max()
                per_row = t_mem / n
                label = "in memory"
            else:
                t_mem, difference, label = per_row * n, None, "in memory, scaled"
            print(
                f"dask fit n={n:.0e} ({X.numblocks[0]} partitions): cluster "
                f"{t_dask:6.2f} s (draw alone {t_draw:5.2f} s), {label} "
                f"{t_mem:6.2f} s, cluster / in memory {t_dask / t_mem:5.2f}"
                + ("" if difference is None else f", difference {difference:.1e}"),
                flush=True,
            )


def selection(n, n_sub):
    X, y = data(n, 1)
    y = y + 0.3 * np.random.default_rng(2).normal(size=n)
    widths = np.geomspace(0.005, 0.3, 30)

    def search(algorithm, degree):
        return KernelAttentionRegressorCV(
            bandwidths=widths, degree=degree, n_neighbors=None, algorithm=algorithm
        )

    for degree in (0, "auto"):
        tb, _ = timed(lambda d=degree: search("binned", d).fit(X, y))
        te, exact = timed(lambda d=degree: search("brute", d).fit(X[:n_sub], y[:n_sub]))
        binned = search("binned", degree).fit(X[:n_sub], y[:n_sub])
        scores = binned.cv_results_["mean_test_score"]
        reference = exact.cv_results_["mean_test_score"]
        agreement = np.max(np.abs(scores / reference - 1))
        row(
            f"CV 30 widths degree={degree} n={n:.0e}",
            tb,
            te * (n / n_sub) ** 2,
            agreement,
            "(target: seconds; scores within 1e-3)",
        )
        print(
            f"    chosen on {n_sub} rows: binned {binned.bandwidth_:.4g} "
            f"(degree {binned.degree_}), exact {exact.bandwidth_:.4g} "
            f"(degree {exact.degree_})",
            flush=True,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--crossover", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--dask", action="store_true")
    parser.add_argument("--cv", action="store_true")
    parser.add_argument("--kdepy", action="store_true")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dask:
        dask_fit([1_000_000, 10_000_000] if args.quick else [10_000_000, 100_000_000])
        return
    if args.memory_child:
        memory_child(args.memory_child)
        return
    if args.crossover:
        crossover()
        return
    n = 100_000 if args.quick else 1_000_000
    # Imports and first-call setup are not timed.
    warm_X, warm_y = data(1000, 2)
    binned_run(warm_X[:, :1], warm_y, warm_X[:, :1], bandwidth=0.1)
    binned_run(warm_X, warm_y, warm_X, bandwidth=0.1)
    if args.memory:
        memory(n)
        return
    if args.cv:
        selection(n, 4000 if args.quick else 10_000)
        return
    if args.kdepy:
        kdepy(n)
        return
    one_d(n, 2000)
    two_d(n, 20_000)
    kdepy(n)
    memory(n // 10 if args.quick else n)


if __name__ == "__main__":
    main()
