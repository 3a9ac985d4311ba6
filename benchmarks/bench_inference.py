"""Coverage of the confidence intervals, and the cost of standard errors.

On a linear truth ``y = 1 + 2 x + noise`` with ``x`` uniform on [0, 1] and
``degree=1`` (which reproduces lines, so the fit has no smoothing bias),
homoscedastic (sd 0.5) and heteroscedastic (sd ``0.2 + 0.8 x``) noise:

- the pointwise 95 % asymptotic interval (coverage averaged over queries
  and repetitions);
- the pointwise 95 % wild-bootstrap percentile-t interval;
- the simultaneous 95 % sup-t bands, bootstrap and asymptotic (the whole
  line covered at every query at once),

each with its Monte-Carlo standard error ``sqrt(c (1 - c) / R)`` over the R
repetitions (for the pointwise intervals the indicators of one data set are
correlated, so the error printed, computed from the per-set averages, is
the honest one). Then the time of ``predict(X, return_se=True)`` over that
of ``predict(X)``.

Run: ``python benchmarks/bench_inference.py [--repetitions 400]``.
"""

import argparse
import time

import numpy as np

from sklearn_kernelpool import KernelAttentionRegressor

QUERIES = np.linspace(0.05, 0.95, 12)[:, None]
TRUTH = 1 + 2 * QUERIES[:, 0]


def simulate(n, bandwidth, heteroscedastic, repetitions, n_resamples, seed=0):
    rng = np.random.RandomState(seed)
    reg = KernelAttentionRegressor(bandwidth=bandwidth, degree=1)
    results = {
        name: [] for name in ("asymptotic", "bootstrap", "sup-t boot", "sup-t asym")
    }
    for repetition in range(repetitions):
        X = rng.uniform(0, 1, (n, 1))
        scale = 0.2 + 0.8 * X[:, 0] if heteroscedastic else 0.5
        y = 1 + 2 * X[:, 0] + scale * rng.standard_normal(n)
        reg.fit(X, y)

        def covers(seed=repetition, **options):
            lower, upper = reg.confidence_interval(
                QUERIES, n_resamples=n_resamples, random_state=seed, **options
            )
            return (lower <= TRUTH) & (TRUTH <= upper)

        results["asymptotic"].append(covers().mean())
        results["bootstrap"].append(covers(method="bootstrap").mean())
        results["sup-t boot"].append(
            covers(method="bootstrap", simultaneous=True).all()
        )
        results["sup-t asym"].append(covers(simultaneous=True).all())
    return {
        name: (np.mean(values), np.std(values) / np.sqrt(len(values)))
        for name, values in results.items()
    }


def cost_ratio(n=5000, n_queries=2000, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(0, 1, (n, 1))
    y = X[:, 0] + rng.standard_normal(n)
    Q = rng.uniform(0, 1, (n_queries, 1))
    ratios = {}
    for kernel, degree in (("gaussian", 0), ("gaussian", 1), ("epanechnikov", 0)):
        reg = KernelAttentionRegressor(kernel, 0.05, degree=degree).fit(X, y)
        times = []
        for options in ({}, {"return_se": True}):
            start = time.perf_counter()
            reg.predict(Q, **options)
            times.append(time.perf_counter() - start)
        ratios[(kernel, degree)] = times[1] / times[0]
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=400)
    parser.add_argument("--n-resamples", type=int, default=499)
    args = parser.parse_args()
    print("coverage of 95 % intervals (nominal 0.95), +- Monte-Carlo s.e.")
    for n, bandwidth in ((120, 0.12), (200, 0.1), (500, 0.07)):
        for heteroscedastic in (False, True):
            noise = "hetero" if heteroscedastic else "homo  "
            results = simulate(
                n, bandwidth, heteroscedastic, args.repetitions, args.n_resamples
            )
            line = "  ".join(f"{k} {c:.3f}+-{e:.3f}" for k, (c, e) in results.items())
            print(f"n={n:4d} h={bandwidth:.2f} {noise}  {line}", flush=True)
    print("time of predict(return_se=True) / predict (n=5000 keys, 2000 queries)")
    for (kernel, degree), ratio in cost_ratio().items():
        print(f"  {kernel:13s} degree={degree}: {ratio:.1f}")


if __name__ == "__main__":
    main()
