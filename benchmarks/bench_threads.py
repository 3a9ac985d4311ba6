"""Time predict by ``n_jobs``: the default against one thread and all cores.

Usage::

    python benchmarks/bench_threads.py                 # 8000 x 8000
    python benchmarks/bench_threads.py --n 20000       # 20000 x 20000
    python benchmarks/bench_threads.py --kernel epanechikov --algorithm kd_tree

Prints the median time of ``predict`` with ``n_jobs=None`` (the default),
``n_jobs=1`` and ``n_jobs=-1``, and each over the fastest of the three: the
default should stay within 2x of the best. The BLAS thread count is printed
before and after, and must not change. Times are the best of the repeats,
which other processes on a shared machine disturb least; the ratios are
what to read.
"""

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_info

from sklearn_kernelpool import KernelAttentionRegressor


def blas_threads():
    return [info["num_threads"] for info in threadpool_info()]


def best_time(func, repeats):
    func()  # warm up: caches, thread pools
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000, help="keys and queries")
    parser.add_argument("--d", type=int, default=8, help="features")
    parser.add_argument("--kernel", default="gaussian")
    parser.add_argument("--algorithm", default="auto")
    parser.add_argument("--bandwidth", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, args.d))
    y = X[:, 0] + np.sin(X[:, 1])
    Q = rng.normal(size=(args.n, args.d))
    reg = KernelAttentionRegressor(
        kernel=args.kernel, bandwidth=args.bandwidth, algorithm=args.algorithm
    ).fit(X, y)
    print(
        f"predict, n = m = {args.n}, d = {args.d}, {args.kernel}, "
        f"{reg.algorithm_}; {os.cpu_count()} CPUs; BLAS threads {blas_threads()}"
    )
    times, outputs = {}, {}
    for n_jobs in (None, 1, -1):
        reg.set_params(n_jobs=n_jobs)
        times[n_jobs] = best_time(lambda: reg.predict(Q), args.repeats)
        outputs[n_jobs] = reg.predict(Q)
    best = min(times.values())
    for n_jobs, seconds in times.items():
        print(
            f"  n_jobs={n_jobs!s:>4}: {seconds:7.3f} s, {seconds / best:5.2f}x the best"
        )
    same = all(np.array_equal(outputs[None], out) for out in outputs.values())
    print(f"  bitwise identical across n_jobs: {same}")
    print(f"  BLAS threads after: {blas_threads()}")


if __name__ == "__main__":
    main()
