"""Limits: fit on 1e6 x 2 keys and predict 1e6 queries, compact kernel, tree.

Usage::

    python benchmarks/bench_limits.py            # n = m = 1e6
    python benchmarks/bench_limits.py --n 200000 # smaller

Prints the wall time and the peak memory traced by ``tracemalloc`` of
``fit`` and ``predict`` (``n_jobs=-1`` and ``n_jobs=None``), with peers in
the same run: building scikit-learn's ``KDTree`` on the same keys (the floor
of our ``fit``, which builds one) and ``RadiusNeighborsRegressor`` with the
same radius and uniform weights (the boxcar kernel), timed on the first
``--peer-queries`` queries and scaled to all.
"""

import argparse
import platform
import time
import tracemalloc

import numpy as np
from sklearn.neighbors import KDTree, RadiusNeighborsRegressor

from sklearn_kernelpool import KernelAttentionRegressor


def traced(func):
    """(result, seconds, peak MiB traced) of ``func()``."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = func()
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    return result, elapsed, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--m", type=int, default=1_000_000)
    parser.add_argument("--neighbors", type=float, default=32.0)
    parser.add_argument("--peer-queries", type=int, default=100_000)
    args = parser.parse_args()
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"Python {platform.python_version()}, NumPy {np.__version__}"
    )
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(args.n, 2))
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    Q = rng.uniform(size=(args.m, 2))
    # A disc of radius h holds about `neighbors` of the uniform keys.
    h = float(np.sqrt(args.neighbors / (np.pi * args.n)))
    inputs = (X.nbytes + y.nbytes + Q.nbytes) / 2**20
    print(
        f"n = {args.n} keys, m = {args.m} queries, d = 2, epanechikov, "
        f"h = {h:.2g} (~{args.neighbors:g} keys a query); inputs {inputs:.0f} MiB"
    )

    reg = KernelAttentionRegressor(kernel="epanechikov", bandwidth=h)
    _, t_fit, mem_fit = traced(lambda: reg.fit(X, y))
    _, t_tree, _ = traced(lambda: KDTree(X))
    print(
        f"fit: {t_fit:.2f} s, peak {mem_fit:.0f} MiB traced, algorithm_ = "
        f"{reg.algorithm_!r}; KDTree(X) alone {t_tree:.2f} s "
        f"(fit / KDTree: {t_fit / t_tree:.2f}x)"
    )

    output = args.m * 8 / 2**20
    for n_jobs in (-1, None):
        reg.set_params(n_jobs=n_jobs)
        pred, t_pred, mem_pred = traced(lambda: reg.predict(Q))
        print(
            f"predict, n_jobs={n_jobs}: {t_pred:.2f} s, peak {mem_pred:.0f} MiB "
            f"traced (output {output:.0f} MiB); finite: {bool(np.isfinite(pred).all())}"
        )

    k = min(args.peer_queries, args.m)
    peer = RadiusNeighborsRegressor(radius=h).fit(X, y)
    start = time.perf_counter()
    peer.predict(Q[:k])
    t_peer = (time.perf_counter() - start) * args.m / k
    boxcar = KernelAttentionRegressor(kernel="boxcar", bandwidth=h, n_jobs=-1)
    boxcar.fit(X, y)
    _, t_box, _ = traced(lambda: boxcar.predict(Q))
    print(
        f"RadiusNeighborsRegressor (uniform weights, {k} queries scaled to "
        f"{args.m}): {t_peer:.1f} s; boxcar predict {t_box:.2f} s "
        f"({t_peer / t_box:.1f}x faster)"
    )


if __name__ == "__main__":
    import warnings

    from sklearn_kernelpool import EmptyNeighborhoodWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.filterwarnings("ignore", "One or more samples have no neighbors")
        main()
