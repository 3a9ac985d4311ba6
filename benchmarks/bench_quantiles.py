"""Time conditional quantiles against predict, the coverage of CQR, and the
significance test against refits.

Usage::

    python benchmarks/bench_quantiles.py                  # 1e4 queries x 1e4 keys
    python benchmarks/bench_quantiles.py --n 2000         # a quicker run
    python benchmarks/bench_quantiles.py --section cqr    # the coverage of CQR
    python benchmarks/bench_quantiles.py --section significance

``predict_quantiles`` takes the weights of each chunk of queries in the
order of the values (the keys sorted once per output), sums them
cumulatively and searches every level at once; on a tree, the neighbours of
each query are ordered by their places among the sorted values, so that the
cost stays that of the neighbours. The ratio of its time to that of
``predict`` is printed per kernel and path, with that of ``predict_cdf``
(three values); one thread, the machine is shared and noisy: read the
ratios.

The ``cqr`` section draws heteroscedastic data (noise growing 6-fold across
x) and reports the share of fresh observations inside the 80 % intervals of
split and cross-fitted CQR and of jackknife+, with its Monte-Carlo standard
error, and the ratio of their mean widths in the noisiest and the calmest
fifths of x.

The ``significance`` section times :func:`significance_test` (n = 2,000,
d = 5, B = 399, degree 0 and 1) against a loop of refits as R np's
``npsigtest`` draws them (``benchmarks/bench_significance.py``, which also
runs alone with its own options), printing the ratio.
"""

import argparse
import functools
import time
import warnings

import numpy as np

from sklearn_kernelpool import KernelAttentionRegressor


def _time(call, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def timing(n, d, repeats, n_jobs):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.1, n)
    Q = rng.uniform(0, 1, (n, d))
    print(f"{n} queries x {n} keys, d={d}, n_jobs={n_jobs}")
    print(
        f"{'kernel':<13} {'algorithm':<9} {'predict':>9} {'quantiles':>10} "
        f"{'ratio':>6} {'cdf':>9} {'ratio':>6}"
    )
    for kernel, h in (("gaussian", 0.05), ("epanechnikov", 0.1)):
        reg = KernelAttentionRegressor(kernel=kernel, bandwidth=h, n_jobs=n_jobs)
        reg.fit(X, y)
        reg.predict_quantiles(Q[:10])  # the keys sorted once, on first use
        predict = _time(functools.partial(reg.predict, Q), repeats)
        quantiles = _time(functools.partial(reg.predict_quantiles, Q), repeats)
        cdf = _time(functools.partial(reg.predict_cdf, Q, [0.0, 0.5, 1.0]), repeats)
        print(
            f"{kernel:<13} {reg.algorithm_:<9} {predict:>8.2f}s {quantiles:>9.2f}s "
            f"{quantiles / predict:>6.1f} {cdf:>8.2f}s {cdf / predict:>6.1f}",
            flush=True,
        )


def _draw(rng, n):
    X = rng.uniform(0, 1, (n, 1))
    sd = 0.1 * (1 + 5 * X[:, 0])
    return X, 0.5 * np.sin(2 * np.pi * X[:, 0]) + sd * rng.normal(size=n)


def cqr_coverage(n, n_reps, n_fresh, level=0.8, seed=0):
    rng = np.random.default_rng(seed)
    grid = np.linspace(0, 1, 30)[:, None]
    methods = {
        "cqr, split": {"method": "cqr"},
        "cqr, 5 folds": {"method": "cqr", "cv": 5},
        "jackknife+": {"method": "jackknife+"},
    }
    hits = {name: [] for name in methods}
    ratios = {name: [] for name in methods}
    for _ in range(n_reps):
        X, y = _draw(rng, n)
        Xf, yf = _draw(rng, n_fresh)
        reg = KernelAttentionRegressor(bandwidth=0.05).fit(X, y)
        for name, options in methods.items():
            lower, upper = reg.prediction_interval(Xf, level=level, **options)
            hits[name].append(np.mean((lower <= yf) & (yf <= upper)))
            lower, upper = reg.prediction_interval(grid, level=level, **options)
            width = upper - lower
            ratios[name].append(np.mean(width[-6:]) / np.mean(width[:6]))
    print(
        f"coverage of {level:.0%} intervals: n={n}, {n_reps} repetitions x "
        f"{n_fresh} fresh points; noise sd 0.1 (1 + 5 x)"
    )
    for name in methods:
        h = np.asarray(hits[name])
        se = h.std(ddof=1) / np.sqrt(len(h))
        print(
            f"  {name:<14} {h.mean():.3f} +- {se:.3f}   width noisiest / calmest "
            f"fifth {np.mean(ratios[name]):.2f}"
        )


SECTIONS = ("timing", "cqr", "significance")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", choices=SECTIONS, action="append")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    sections = args.section or ["timing"]
    if "timing" in sections:
        timing(args.n, args.d, args.repeats, args.n_jobs)
    if "cqr" in sections:
        cqr_coverage(400, args.reps, 100)
    if "significance" in sections:
        import sys

        import bench_significance

        sys.argv = sys.argv[:1]  # its own defaults
        bench_significance.main()


if __name__ == "__main__":
    main()
