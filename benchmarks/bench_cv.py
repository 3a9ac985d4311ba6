"""Time KernelAttentionRegressorCV against its peers, in one run.

Usage::

    python benchmarks/bench_cv.py             # every case (several minutes)
    python benchmarks/bench_cv.py --quick     # smaller sizes, no statsmodels
    python benchmarks/bench_cv.py --blocks    # the block size of the pair pass
    python benchmarks/bench_cv.py --only per_feature  # one case
    python benchmarks/bench_cv.py --only degree       # local-linear candidates
    python benchmarks/bench_cv.py --only folds        # many folds
    python benchmarks/bench_cv.py --only quadratic    # local quadratics

Cases:

1. ``loo``: exact leave-one-out over 30 gaussian bandwidths, n = 5000,
   d = 4, against ``GridSearchCV(..., cv=LeaveOneOut())`` (timed on a subset
   of the candidates and splits and scaled to all of them: it refits once
   per candidate and split) and ``GridSearchCV(..., cv=5)`` over the same
   grid (timed in full).
2. ``per_feature``: ``per_feature=True`` against statsmodels
   ``KernelReg(reg_type="lc", bw="cv_ls")`` on the same data, n = 2000,
   d = 1 and 2: the leave-one-out error of both widths (computed by the same
   exact function) and the time of each fit (statsmodels timed once).
3. ``diabetes``: ``make_pipeline(StandardScaler(), KernelAttentionRegressorCV(
   per_feature=True))`` under 5-fold shuffled CV (seed 0) on scikit-learn's
   diabetes data, against the isotropic selection.
4. ``kfold``: ``cv=KFold(5, shuffle=True)`` against ``GridSearchCV`` with the
   same splitter and grid: the largest score difference and the time ratio.
5. ``folds``: ``KFold(K, shuffle=True)`` for K = 5, 20, 100 and 200 at
   n = 1000, d = 4, degrees 0 and 1: each time over that of leave-one-out.
   Every fold pools the same pairs, so the ratios should stay near 1. Before
   the held-out pass let blocks span folds, 200 folds cost 77x leave-one-out
   with degree 0 and 35x with degree 1 (100 folds: 37x and 10x); after, 1.4x
   and 1.3x (same run, shared machine).
6. ``degree``: local-linear candidates (``degree=1``), n = 2000, d = 2, 30
   gaussian bandwidths: leave-one-out against the same selection with
   ``degree=0`` (the cost of the wider moments), and ``KFold(5, shuffle=True)``
   against ``GridSearchCV(KernelAttentionRegressor(degree=1))`` with the same
   splitter and grid. The largest score gap is at the narrowest widths,
   whose nearly singular local designs amplify rounding in both.
7. ``quadratic``: the default search (``degree="auto"``, which scores local
   quadratics after degrees 0 and 1) at n = 4000, d = 5, against the same
   search without them (the target of issue 40: at most 2x); and
   ``degree=2`` under ``KFold(5, shuffle=True)`` over 10 gaussian widths at
   n = 1000, d = 2, against ``GridSearchCV(KernelAttentionRegressor(
   degree=2))`` with the same splitter and grid (score gap and time ratio).

``GridSearchCV`` is timed twice, as it runs and with BLAS limited to one
thread (as our scoring runs it), and its faster time is used. Ratios are what
to read: the machine is shared and its absolute times drift.
"""

import argparse
import gc
import os
import platform
import time
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    cross_val_score,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._held_out import _fits
from sklearn_kernelpool._held_out import _pool as _loo
from sklearn_kernelpool._held_out import _sums as _held_out_sums
from sklearn_kernelpool._widths._learning import loo_loss
from sklearn_kernelpool.kernels import KERNELS


def peer_timed(func):
    """The peer's best time: as it runs, and with BLAS on one thread.

    Our scoring runs BLAS on one thread; on a small, shared machine a
    multi-threaded BLAS can be several times slower on the peer's small
    products, so the faster of the two is the fair time to compare with.
    """
    t_default, result = timed(func)
    with threadpool_limits(limits=1, user_api="blas"):
        t_single, result = timed(func)
    return min(t_default, t_single), result


def timed(func, repeats=1):
    """Median time of ``repeats`` calls and the last result."""
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), result


def make_data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, -1] ** 2 + 0.3 * rng.normal(size=n)
    return X, y


def case_loo(n, d, n_bandwidths, sub_candidates, sub_splits, repeats):
    X, y = make_data(n, d)
    ours = KernelAttentionRegressorCV(bandwidths=n_bandwidths)
    t_ours, ours = timed(lambda: ours.fit(X, y), repeats)
    grid = ours.cv_results_["param_bandwidth"]

    # GridSearchCV with leave-one-out: a subset of candidates and splits.
    candidates = grid[:: max(len(grid) // sub_candidates, 1)][:sub_candidates]
    points = np.linspace(0, n - 1, sub_splits).astype(int)
    splits = [(np.delete(np.arange(n), i), np.array([i])) for i in points]
    search = GridSearchCV(
        KernelAttentionRegressor(),
        {"bandwidth": list(candidates)},
        cv=splits,
        scoring="neg_mean_squared_error",
        refit=False,
    )
    t_sub, search = peer_timed(lambda: search.fit(X, y))
    t_loo = t_sub * (len(grid) / len(candidates)) * (n / len(points))
    # Its scores on those splits are our leave-one-out errors of those points.
    held_out = _loo.HeldOut(
        X, y[:, None], np.ones(n), [KERNELS["gaussian"]], np.asarray(candidates)
    )
    pred, _ = _fits.solve_moments(held_out.sums_excluding_groups(None))
    ours_sub = -np.mean((pred[0][:, points, 0] - y[points]) ** 2, axis=1)
    gap = np.max(np.abs(ours_sub - search.cv_results_["mean_test_score"]))

    search5 = GridSearchCV(
        KernelAttentionRegressor(), {"bandwidth": list(grid)}, cv=5, refit=False
    )
    t_five, _ = peer_timed(lambda: search5.fit(X, y))
    print(
        f"loo: n={n} d={d} {len(grid)} bandwidths, gaussian: ours {t_ours:.2f} s; "
        f"GridSearchCV(LeaveOneOut) {t_loo:.0f} s (timed on {len(candidates)} "
        f"candidates x {len(points)} splits = {t_sub:.1f} s, scaled); "
        f"GridSearchCV(cv=5) {t_five:.2f} s"
    )
    print(
        f"  ratio vs GridSearchCV(LeaveOneOut): {t_loo / t_ours:.0f}x (target >= 50x)"
    )
    print(f"  ratio vs GridSearchCV(cv=5):        {t_five / t_ours:.2f}x (target > 1x)")
    print(f"  max |score gap| on the timed splits: {gap:.1e}")


def case_per_feature(n, d):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    X, y = make_data(n, d, seed=1)
    ours = KernelAttentionRegressorCV(per_feature=True)
    t_ours, ours = timed(lambda: ours.fit(X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' own runtime warnings
        t_sm, sm = timed(
            lambda: KernelReg(y, X, var_type="c" * d, reg_type="lc", bw="cv_ls")
        )
    sm_bw = np.asarray(sm.bw, dtype=float)
    w, Y, gauss = np.ones(n), y[:, None], KERNELS["gaussian"]
    loo_ours = loo_loss(np.log(ours.bandwidth_), X, Y, w, gauss, gradient=False)[0]
    if np.all(sm_bw > 0) and np.all(np.isfinite(sm_bw)):
        loo_sm = loo_loss(np.log(sm_bw), X, Y, w, gauss, gradient=False)[0]
    else:
        loo_sm = np.nan
    print(
        f"per_feature: n={n} d={d}: ours {t_ours:.2f} s, widths "
        f"{np.round(ours.bandwidth_, 4).tolist()}, LOO MSE {loo_ours:.6f}; "
        f"statsmodels cv_ls {t_sm:.1f} s, widths {np.round(sm_bw, 4).tolist()}, "
        f"LOO MSE {loo_sm:.6f}"
    )
    print(
        f"  time ratio {t_sm / t_ours:.0f}x (target >= 20x); LOO MSE ours - "
        f"statsmodels {loo_ours - loo_sm:+.1e} (target <= 0)"
    )


def case_diabetes():
    X, y = load_diabetes(return_X_y=True)
    cv = KFold(5, shuffle=True, random_state=0)
    for per_feature in (True, False):
        model = make_pipeline(
            StandardScaler(), KernelAttentionRegressorCV(per_feature=per_feature)
        )
        seconds, scores = timed(lambda m=model: cross_val_score(m, X, y, cv=cv))
        what = "per_feature=True " if per_feature else "isotropic        "
        target = " (target >= 0.42 in < 16 s)" if per_feature else ""
        print(
            f"diabetes {what}: R^2 {scores.mean():.4f} "
            f"(folds {np.round(scores, 3).tolist()}), {seconds:.2f} s{target}"
        )


def case_kfold(n, d, n_bandwidths, repeats):
    X, y = make_data(n, d, seed=2)
    cv = KFold(5, shuffle=True, random_state=0)
    ours = KernelAttentionRegressorCV(bandwidths=n_bandwidths, cv=cv)
    t_ours, ours = timed(lambda: ours.fit(X, y), repeats)
    grid = list(ours.cv_results_["param_bandwidth"])
    search = GridSearchCV(KernelAttentionRegressor(), {"bandwidth": grid}, cv=cv)
    t_gs, search = peer_timed(lambda: search.fit(X, y))
    gap = np.max(
        np.abs(
            ours.cv_results_["mean_test_score"] - search.cv_results_["mean_test_score"]
        )
    )
    same = ours.best_params_["bandwidth"] == search.best_params_["bandwidth"]
    print(
        f"kfold: n={n} d={d} {len(grid)} bandwidths, KFold(5, shuffle): ours "
        f"{t_ours:.2f} s, GridSearchCV {t_gs:.2f} s"
    )
    print(
        f"  ratio {t_gs / t_ours:.2f}x (target >= 3x); max |score gap| {gap:.1e}; "
        f"same choice: {same}"
    )


def case_folds(n, d, n_bandwidths, repeats):
    """The cost of K-fold scores as the number of folds grows, against
    leave-one-out (n folds of one point, by its own pass): every fold pools
    the same number of pairs, so the time should barely grow."""
    X, y = make_data(n, d, seed=3)
    params = dict(bandwidths=n_bandwidths, n_neighbors=None)
    print(f"folds: n={n} d={d} {n_bandwidths} bandwidths, time over leave-one-out")
    for degree in (0, 1):
        ours = KernelAttentionRegressorCV(degree=degree, **params)
        t_loo, _ = timed(lambda ours=ours: ours.fit(X, y), repeats)
        line = f"  degree {degree}: leave-one-out {t_loo:.2f} s;"
        for k in (5, 20, 100, 200):
            cv = KFold(k, shuffle=True, random_state=0)
            ours = KernelAttentionRegressorCV(degree=degree, cv=cv, **params)
            t, _ = timed(lambda ours=ours: ours.fit(X, y), repeats)
            line += f" {k} folds {t / t_loo:.1f}x"
        print(line)


def against_grid_search(ours, degree, X, y, repeats):
    """Fit ``ours`` (a ``KernelAttentionRegressorCV`` of ``degree``) with
    ``KFold(5, shuffle=True)`` and time
    ``GridSearchCV(KernelAttentionRegressor(degree=degree))`` over the same
    widths and splits. Returns ours' seconds and fitted search, the peer's
    seconds and the largest gap between the two searches' mean scores."""
    cv = KFold(5, shuffle=True, random_state=0)
    t_ours, ours = timed(lambda: ours.set_params(cv=cv).fit(X, y), repeats)
    grid = list(ours.cv_results_["param_bandwidth"])
    search = GridSearchCV(
        KernelAttentionRegressor(degree=degree),
        {"bandwidth": grid},
        cv=cv,
        refit=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrow widths' singular designs
        seconds, search = peer_timed(lambda: search.fit(X, y))
    ours_scores = ours.cv_results_["mean_test_score"]
    gap = np.max(np.abs(ours_scores - search.cv_results_["mean_test_score"]))
    return t_ours, ours, seconds, gap


def case_degree(n, d, n_bandwidths, repeats):
    X, y = make_data(n, d, seed=3)
    zero = KernelAttentionRegressorCV(bandwidths=n_bandwidths)
    t_zero, zero = timed(lambda: zero.fit(X, y), repeats)
    one = KernelAttentionRegressorCV(bandwidths=n_bandwidths, degree=1)
    t_one, one = timed(lambda: one.fit(X, y), repeats)
    kfold = KernelAttentionRegressorCV(
        bandwidths=n_bandwidths, degree=1, n_neighbors=None, per_feature=False
    )
    t_kfold, kfold, t_gs, gap = against_grid_search(kfold, 1, X, y, repeats)
    grid = kfold.cv_results_["param_bandwidth"]
    print(
        f"degree: n={n} d={d} {len(grid)} bandwidths, gaussian: LOO degree=0 "
        f"{t_zero:.2f} s, degree=1 {t_one:.2f} s (LOO MSE {-zero.best_score_:.4f} "
        f"-> {-one.best_score_:.4f}); KFold(5) degree=1 ours {t_kfold:.2f} s, "
        f"GridSearchCV {t_gs:.2f} s"
    )
    print(
        f"  cost of degree=1 over degree=0 (LOO): {t_one / t_zero:.2f}x; ratio vs "
        f"GridSearchCV(degree=1, KFold(5)): {t_gs / t_kfold:.2f}x; max |score "
        f"gap| {gap:.1e}"
    )


def case_quadratic(repeats):
    from sklearn_kernelpool._search._quadratic_stage import (
        without_quadratic_candidates,
    )

    X, y = make_data(4000, 5, seed=4)
    t_auto, auto = timed(lambda: KernelAttentionRegressorCV().fit(X, y), repeats)

    def lower():
        with without_quadratic_candidates():
            return KernelAttentionRegressorCV().fit(X, y)

    t_low, low = timed(lower, repeats)
    print(
        f"quadratic: n=4000 d=5 defaults {t_auto:.2f} s (degree {auto.degree_}, "
        f"LOO MSE {-auto.best_score_:.4f}), without the local quadratics "
        f"{t_low:.2f} s (degree {low.degree_}, {-low.best_score_:.4f}): "
        f"{t_auto / t_low:.2f}x"
    )
    X, y = make_data(1000, 2, seed=5)
    ours = KernelAttentionRegressorCV(bandwidths=10, degree=2, n_neighbors=None)
    t_ours, ours, t_gs, gap = against_grid_search(ours, 2, X, y, repeats)
    grid = ours.cv_results_["param_bandwidth"]
    print(
        f"  degree=2 KFold(5) n=1000 d=2 {len(grid)} widths: ours {t_ours:.2f} s, "
        f"GridSearchCV {t_gs:.2f} s ({t_gs / t_ours:.1f}x); max |score gap| {gap:.1e}"
    )


def case_blocks(n, d):
    X, y = make_data(n, d)
    grid = KernelAttentionRegressorCV()._bandwidth_grid(X)
    held_out = _loo.HeldOut(X, y[:, None], np.ones(n), [KERNELS["gaussian"]], grid)
    default = _held_out_sums.BLOCK
    for block in (64, 128, 256, 512, 1024):
        _held_out_sums.BLOCK = block
        seconds, _ = timed(lambda: held_out.sums_excluding_groups(None), 3)
        print(f"block {block:5d}: {seconds:.3f} s")
    _held_out_sums.BLOCK = default


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--blocks", action="store_true")
    parser.add_argument(
        "--only",
        choices=[
            "loo",
            "kfold",
            "folds",
            "diabetes",
            "per_feature",
            "degree",
            "quadratic",
        ],
        default=None,
    )
    args = parser.parse_args()
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} "
        f"cores, Python {platform.python_version()}, NumPy {np.__version__}"
    )
    if args.blocks:
        case_blocks(5000, 4)
        return
    if args.quick:
        case_loo(1000, 4, 30, 3, 50, repeats=1)
        case_diabetes()
        case_kfold(1000, 4, 30, repeats=1)
        case_folds(500, 4, 30, repeats=1)
        case_degree(1000, 2, 30, repeats=1)
        return
    if args.only in (None, "loo"):
        case_loo(5000, 4, 30, 3, 100, repeats=3)
    if args.only in (None, "kfold"):
        case_kfold(2000, 4, 30, repeats=3)
    if args.only in (None, "folds"):
        case_folds(1000, 4, 30, repeats=3)
    if args.only in (None, "degree"):
        case_degree(2000, 2, 30, repeats=3)
    if args.only in (None, "quadratic"):
        case_quadratic(repeats=3)
    if args.only in (None, "diabetes"):
        case_diabetes()
    if args.only in (None, "per_feature"):
        for d in (1, 2):
            case_per_feature(2000, d)


if __name__ == "__main__":
    main()
