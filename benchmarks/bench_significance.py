"""The time of significance_test against a loop of refits, as R np's
``npsigtest`` (bootstrap I) computes the draws.

On ``y = sin(3 x0) + x1 + noise`` with five uniform features, n = 2,000
rows and B = 399 draws, for ``degree=0`` and ``degree=1``:

- ``significance_test``: for each feature the fit without it, then all the
  draws of all the features as outputs of one fit, their gradients in one
  pass, each along its own feature;
- the loop: for each feature and each draw, a refit of the full model on
  the draw's targets and its gradients (``predict_gradient``), as
  ``npsigtest`` re-estimates the model per draw. Its time is measured on
  ``--timed`` draws per feature and extrapolated to B (the refits are all
  alike), after the null fits, measured in full.

Run: ``python benchmarks/bench_significance.py [--n 2000] [--n-resamples 399]``.
"""

import argparse
import time

import numpy as np

from sklearn_kernelpool import KernelAttentionRegressor, significance_test


def data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + rng.normal(scale=0.5, size=n)
    return X, y


def loop_time(reg, X, y, n_resamples, timed, seed=0):
    """Seconds of the loop of refits: the null fits in full, the draws of
    ``timed`` per feature times ``n_resamples / timed``."""
    rng = np.random.default_rng(seed)
    n, d = X.shape
    null_seconds = draw_seconds = 0.0
    for j in range(d):
        start = time.perf_counter()
        keep = np.delete(np.arange(d), j)
        null = KernelAttentionRegressor(
            bandwidth=reg.bandwidth_[keep], degree=reg.degree
        ).fit(X[:, keep], y)
        fitted = null.predict(X[:, keep])
        residuals = y - fitted
        null_seconds += time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(timed):
            y_star = fitted + residuals * rng.choice([-1.0, 1.0], n)
            full = KernelAttentionRegressor(bandwidth=reg.bandwidth_, degree=reg.degree)
            gradient = full.fit(X, y_star).predict_gradient(X)[:, j]
            np.mean(gradient**2)
        draw_seconds += (time.perf_counter() - start) * n_resamples / timed
    return null_seconds + draw_seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--features", type=int, default=5)
    parser.add_argument("--n-resamples", type=int, default=399)
    parser.add_argument("--timed", type=int, default=5)
    args = parser.parse_args()
    X, y = data(args.n, args.features)
    print(
        f"n={args.n}, d={args.features}, B={args.n_resamples}: seconds "
        "(the loop extrapolated from "
        f"{args.timed} draws per feature)"
    )
    for degree in (0, 1):
        reg = KernelAttentionRegressor(
            bandwidth=np.full(args.features, 0.3), degree=degree
        ).fit(X, y)
        start = time.perf_counter()
        result = significance_test(
            reg, X, y, n_resamples=args.n_resamples, random_state=0
        )
        ours = time.perf_counter() - start
        loop = loop_time(reg, X, y, args.n_resamples, args.timed)
        print(
            f"  degree={degree}: significance_test {ours:6.2f}  loop of refits "
            f"{loop:7.1f}  ratio {loop / ours:5.1f}   p-values "
            + " ".join(f"{p:.4f}" for p in result.pvalues),
            flush=True,
        )


if __name__ == "__main__":
    main()
