"""Bandwidths chosen by leave-one-out, GCV and AICc, against statsmodels.

Usage::

    python benchmarks/bench_diagnostics.py           # both data sets
    python benchmarks/bench_diagnostics.py --quick   # engel only, no timing

On statsmodels' Engel food-expenditure data (food expenditure on income,
n = 235) and scikit-learn's diabetes data (progression on body-mass index,
n = 442), with the gaussian kernel, ``KernelAttentionRegressorCV`` selects
the bandwidth of local-constant (``degree=0``) and local-linear
(``degree=1``) fits on one log-spaced grid of 80 bandwidths by
``scoring=None`` (exact leave-one-out), ``"gcv"`` and ``"aicc"``.
statsmodels' ``KernelReg(..., bw="aic")`` (the same corrected AIC, minimised
by Nelder-Mead from its rule of thumb) and ``bw="cv_ls"`` (leave-one-out)
are the peers; its ``aic_hurvich`` is also evaluated on our grid (statsmodels
uses the local-constant trace for ``reg_type="ll"`` too, so it equals our
AICc for degree 0 only). Each row shows the bandwidth, the effective degrees
of freedom there and the exact leave-one-out MSE there (the same function
for every row). Last, the time of ``scoring="gcv"`` against ``scoring=None``
on n = 2000: the criteria come from the leave-one-out pass (fixed widths:
the leave-one-out sums completed with each point's own key; adaptive widths:
the in-sample sums pooled from the same distances at the point's own width).
"""

import argparse
import time
import warnings

import numpy as np

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV


def load():
    from sklearn.datasets import load_diabetes
    from statsmodels.datasets import engel

    frame = engel.load_pandas().data
    sets = {"engel": (frame[["income"]].to_numpy(), frame["foodexp"].to_numpy())}
    X, y = load_diabetes(return_X_y=True)
    sets["diabetes (bmi)"] = (X[:, [2]] / X[:, 2].std(), y)
    return sets


def loo_mse(X, y, h, degree):
    cv = KernelAttentionRegressorCV(bandwidths=[h], degree=degree, n_neighbors=None)
    return float(cv.fit(X, y).cv_results_["loo_mse"][0])


def df_at(X, y, h, degree):
    reg = KernelAttentionRegressor(bandwidth=h, degree=degree).fit(X, y)
    return reg.smoother_diagnostics().effective_df


def compare(name, X, y):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    spread = float(X.std())
    grid = np.geomspace(spread / 50, spread * 5, 80)
    print(f"\n{name}: n = {len(y)}, grid {grid[0]:.4g} .. {grid[-1]:.4g} (80)")
    print(f"{'degree':>6} {'method':<34} {'bandwidth':>10} {'df':>7} {'loo_mse':>12}")
    for degree in (0, 1):
        rows = []
        for scoring in (None, "gcv", "aicc"):
            cv = KernelAttentionRegressorCV(
                bandwidths=grid, degree=degree, n_neighbors=None, scoring=scoring
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cv.fit(X, y)
            label = f"ours scoring={scoring or 'loo'}"
            rows.append((label, cv.bandwidth_))
        reg_type = "ll" if degree else "lc"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for bw in ("aic", "cv_ls"):
                start = time.perf_counter()
                peer = KernelReg(y, X, var_type="c", reg_type=reg_type, bw=bw)
                seconds = time.perf_counter() - start
                rows.append((f"statsmodels bw={bw!r} ({seconds:.1f} s)", peer.bw[0]))
            values = [peer.aic_hurvich(np.array([h]))[0] for h in grid]
        rows.append(("statsmodels aic_hurvich, grid argmin", grid[np.argmin(values)]))
        for label, h in rows:
            print(
                f"{degree:>6} {label:<34} {h:>10.4g} {df_at(X, y, h, degree):>7.2f} "
                f"{loo_mse(X, y, h, degree):>12.6g}"
            )


def timing(n=2000):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(n, 2))
    y = np.sin(4 * X[:, 0]) + X[:, 1] + rng.normal(scale=0.2, size=n)
    print(f"\nn = {n}, d = 2, time of scoring='gcv' against scoring=None (loo)")
    cases = [
        ("30 fixed bandwidths, degree 0", {"degree": 0, "n_neighbors": None}),
        ("30 fixed bandwidths, degree 1", {"degree": 1, "n_neighbors": None}),
        ("30 fixed bandwidths, degree auto", {"degree": "auto", "n_neighbors": None}),
        ("5 neighbour counts, degree 0", {"degree": 0, "bandwidths": None}),
    ]
    for label, params in cases:
        times = {}
        for scoring in (None, "gcv"):
            best = np.inf
            for _ in range(3):
                cv = KernelAttentionRegressorCV(
                    **{"bandwidths": 30, **params}, scoring=scoring
                )
                start = time.perf_counter()
                cv.fit(X, y)
                best = min(best, time.perf_counter() - start)
            times[scoring] = best
        print(
            f"  {label:<34} loo {times[None]:6.2f} s, gcv {times['gcv']:6.2f} s "
            f"(ratio {times['gcv'] / times[None]:.2f})"
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--timing", action="store_true", help="the timing alone")
    parser.add_argument("--n", type=int, default=2000, help="samples of the timing")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # narrow local-linear candidates warn
    if args.timing:
        timing(args.n)
        return
    sets = load()
    for name, (X, y) in sets.items():
        compare(name, X, y)
        if args.quick:
            return
    timing(args.n)


if __name__ == "__main__":
    main()
