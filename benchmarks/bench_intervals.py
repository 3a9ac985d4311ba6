"""Time jackknife+ prediction intervals against predict, and their coverage.

Usage::

    python benchmarks/bench_intervals.py              # 1e4 queries x 1e4 keys
    python benchmarks/bench_intervals.py --n 2000     # a quicker run
    python benchmarks/bench_intervals.py --coverage   # the coverage simulation

``KernelAttentionRegressor.prediction_interval`` computes every fit without
one training row in closed form from the weights of the prediction, so it
costs two passes over the keys (the queries, and the training rows for the
leave-one-out residuals) and the selection of two order statistics per query.
On a tree the fits and order statistics of a query come from its
neighbours (a key of weight zero leaves the fit unchanged) and a window of
the sorted residuals; other rows are dense over every key. On dense rows of
``degree=0`` whose weights are at most half of their total, the fits
without each key are bounded from the largest weight, and only the keys of
the window of sorted residuals that the bounds leave are computed: no
(queries x keys) array of leave-one-out fits; on the brute-force path both
passes take these rows from the kernel scores as they are (not
normalised). At 1e4 x 1e4, one thread, the code before and after this
change timed alternately in two runs (median of 3 each; the machine was
shared): the interval on the brute-force path with the gaussian kernel cost
4.3 ``predict`` calls (before 6.3-7.9) with ``degree=0`` and 5.9-6.5
(6.2-8.1) with ``degree=1``; on a k-d tree with the Epanechikov kernel 4.3-4.4
(5.0-5.2) with ``degree=0`` and 6.4-8.5 (7.0-7.9) with ``degree=1``. Two
calls are the floor: the residuals take a pass over the training rows. The
ratio of the two times is printed per kernel and degree (the machine is
shared and noisy: read the ratios).

The coverage simulation draws data from a linear truth (``degree=1``, no
smoothing bias) and a smooth curve, with homoscedastic and heteroscedastic
noise, and reports the share of fresh observations inside the 90 % jackknife+
and 5-fold CV+ intervals with its Monte-Carlo standard error.
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


def ratios(n, d, repeats, n_jobs):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.1, n)
    Q = rng.uniform(0, 1, (n, d))
    print(f"{n} queries x {n} keys, d={d}, n_jobs={n_jobs}")
    print(
        f"{'kernel':<12} {'deg':>3} {'algorithm':<9} {'predict':>9} "
        f"{'interval':>9} {'ratio':>6}"
    )
    for degree in (0, 1):
        for kernel, h in (("gaussian", 0.05), ("epanechikov", 0.1)):
            reg = KernelAttentionRegressor(
                kernel=kernel, bandwidth=h, degree=degree, n_jobs=n_jobs
            ).fit(X, y)
            predict = _time(functools.partial(reg.predict, Q), repeats)
            interval = _time(functools.partial(reg.prediction_interval, Q), repeats)
            print(
                f"{kernel:<12} {degree:>3} {reg.algorithm_:<9} {predict:>8.2f}s "
                f"{interval:>8.2f}s {interval / predict:>6.1f}",
                flush=True,
            )


def coverage(n, n_reps, n_fresh, seed=0):
    rng = np.random.default_rng(seed)
    cases = [
        ("linear, homoscedastic", lambda x: 1 + 2 * x, lambda x: 0.3, 1, 0.3),
        (
            "linear, heteroscedastic",
            lambda x: 1 + 2 * x,
            lambda x: 0.1 + 0.5 * x,
            1,
            0.3,
        ),
        (
            "sine, homoscedastic",
            lambda x: np.sin(2 * np.pi * x),
            lambda x: 0.3,
            1,
            0.08,
        ),
        ("sine, degree 0", lambda x: np.sin(2 * np.pi * x), lambda x: 0.3, 0, 0.05),
    ]
    print(
        f"coverage of 90 % intervals: n={n}, {n_reps} repetitions x "
        f"{n_fresh} fresh points"
    )
    for name, truth, noise, degree, h in cases:
        hits = {"jackknife+": [], "cv+": []}
        for _ in range(n_reps):
            X = rng.uniform(0, 1, (n, 1))
            y = truth(X[:, 0]) + noise(X[:, 0]) * rng.normal(size=n)
            Xf = rng.uniform(0, 1, (n_fresh, 1))
            yf = truth(Xf[:, 0]) + noise(Xf[:, 0]) * rng.normal(size=n_fresh)
            reg = KernelAttentionRegressor(bandwidth=h, degree=degree).fit(X, y)
            for method in hits:
                lower, upper = reg.prediction_interval(Xf, level=0.9, method=method)
                hits[method].append(np.mean((lower <= yf) & (yf <= upper)))
        for method, h_ in hits.items():
            h_ = np.asarray(h_)
            se = h_.std(ddof=1) / np.sqrt(len(h_))
            print(f"  {name:<26} {method:<10} {h_.mean():.3f} +- {se:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--coverage", action="store_true")
    parser.add_argument("--reps", type=int, default=400)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.coverage:
        coverage(300, args.reps, 100)
    else:
        ratios(args.n, args.d, args.repeats, args.n_jobs)


if __name__ == "__main__":
    main()
