"""How close local polynomials can come to GP-ARD on the smooth tables.

Usage::

    python benchmarks/bench_smooth_limits.py                      # all three
    python benchmarks/bench_smooth_limits.py --data mcycle --seeds 0-1

On the folds of ``bench_accuracy.py`` (``KFold(5, shuffle=True)``, seeds
``--seeds``, features standardised on the training part), each row is paired
fold by fold against ``GaussianProcessRegressor`` with an anisotropic RBF and
a white-noise kernel (GP-ARD, as ``bench_accuracy.py`` defines it): the mean
gap of R² and its standard error. The rows:

- ``defaults``: ``KernelAttentionRegressorCV()``;
- ``degree=2``: ``KernelAttentionRegressorCV(degree=2)`` (up to five
  features);
- ``best width, degree D, kernel K``: ``KernelAttentionRegressor`` at the one
  isotropic width, of a grid of 30, whose mean gap over all the folds is the
  largest. The width is chosen with the test parts in view: a rule that
  selects a width on each training part beats the row only by finding, fold
  by fold, widths better on the test parts than the best common one, so
  that the row is what a width selection can be expected to reach at most;
- ``degree=1 at the GP's length scales`` (several features): the search of
  one common factor (``per_feature=False``, exact leave-one-out) on the keys
  divided by the length scales of the GP fitted on the same training part,
  which shows what widths of the GP's proportions give a local line.

The targets of the smooth tables (``bench_accuracy.py``, ``PAIRED_RULES``)
ask for a gap of at least ``-max(0.005, se)``.
"""

import argparse
import sys
import warnings

import numpy as np
from _tables import DATASETS, SMOOTH_DATA
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV

#: The isotropic widths (standardised units) of the rows of the best width.
WIDTHS = np.geomspace(0.03, 5.0, 30)
BEST_WIDTH_KERNELS = ("gaussian", "epanechikov", "tricube")


def gp_ard(n_features):
    """GP-ARD as ``bench_accuracy.py`` defines it."""
    kernel = ConstantKernel() * RBF(
        length_scale=np.ones(n_features), length_scale_bounds=(1e-2, 1e3)
    ) + WhiteKernel(noise_level_bounds=(1e-6, 1e1))
    return GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)


def fold_scores(X, y, train, test):
    """R² of every row on one split: a dict of name -> score, and the
    best-width rows as name -> scores over ``WIDTHS``."""
    scaler = StandardScaler().fit(X[train])
    X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
    y_train, y_test = y[train], y[test]
    d = X.shape[1]
    gp = gp_ard(d).fit(X_train, y_train)
    scores = {"GP-ARD": r2_score(y_test, gp.predict(X_test))}
    search = KernelAttentionRegressorCV().fit(X_train, y_train)
    scores["defaults"] = r2_score(y_test, search.predict(X_test))
    degrees = (1, 2) if d <= 5 else (1,)
    if 2 in degrees:
        search = KernelAttentionRegressorCV(degree=2).fit(X_train, y_train)
        scores["degree=2"] = r2_score(y_test, search.predict(X_test))
    if d > 1:
        scales = np.atleast_1d(gp.kernel_.k1.k2.length_scale)
        search = KernelAttentionRegressorCV(per_feature=False, degree=1)
        search.fit(X_train / scales, y_train)
        name = "degree=1 at the GP's length scales"
        scores[name] = r2_score(y_test, search.predict(X_test / scales))
    widths = {}
    for degree in degrees:
        for kernel in BEST_WIDTH_KERNELS:
            widths[f"best width, degree {degree}, {kernel}"] = [
                r2_score(
                    y_test,
                    KernelAttentionRegressor(kernel, h, degree=degree)
                    .fit(X_train, y_train)
                    .predict(X_test),
                )
                for h in WIDTHS
            ]
    return scores, widths


def report(name, scores, widths):
    """Print each row's mean R² and its paired gap to GP-ARD."""
    reference = np.asarray(scores["GP-ARD"])
    rows = {key: np.asarray(value) for key, value in scores.items()}
    for key, value in widths.items():
        value = np.asarray(value)  # (folds, widths)
        best = int(np.argmax(np.mean(value - reference[:, None], axis=0)))
        rows[f"{key} (h={WIDTHS[best]:.3g})"] = value[:, best]
    print(f"== {name}: {len(reference)} folds, gap to GP-ARD (se)")
    for key, value in rows.items():
        gap = value - reference
        se = gap.std(ddof=1) / np.sqrt(len(gap)) if len(gap) > 1 else np.nan
        bound = -max(0.005, se) if np.isfinite(se) else -0.005
        verdict = "meets" if gap.mean() >= bound else "short of"
        line = f"  {key:52s} R2 {value.mean():.4f}"
        if key != "GP-ARD":
            line += f"  gap {gap.mean():+.4f} ({se:.4f}) {verdict} {bound:+.4f}"
        print(line)


def seeds_arg(text):
    """``"0-4"`` or ``"0,2"`` -> a list of ints."""
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(part) for part in text.split(",")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=SMOOTH_DATA)
    parser.add_argument("--seeds", type=seeds_arg, default=seeds_arg("0-4"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # the GP's bounds, the fits' fallbacks
    for name in args.data:
        X, y, _, _ = DATASETS[name][0]()
        X = np.asarray(X, dtype=float)
        scores, widths = {}, {}
        for seed in args.seeds:
            folds = KFold(5, shuffle=True, random_state=seed)
            for train, test in folds.split(X):
                fold, fold_widths = fold_scores(X, y, train, test)
                for key, value in fold.items():
                    scores.setdefault(key, []).append(value)
                for key, value in fold_widths.items():
                    widths.setdefault(key, []).append(value)
        report(name, scores, widths)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
