"""Adaptive (nearest-neighbour) widths against fixed widths on real data.

Usage::

    python benchmarks/bench_adaptive.py

``make_pipeline(StandardScaler(), KernelAttentionRegressorCV(...))`` under
5-fold shuffled cross-validation (seed 0), R^2 averaged over the folds, for
the kernels gaussian and tricube and three candidate sets selected by exact
leave-one-out inside each training fold:

- ``fixed``: the default grid of 30 isotropic bandwidths;
- ``adaptive``: ``bandwidths=None`` and ``n_neighbors`` in
  (3, 5, 8, 12, 20, 30, 50, 80);
- ``both``: the fixed grid and the neighbour counts together.

Data: statsmodels' ``engel`` (235 households, income -> food expenditure, a
heteroscedastic curve whose incomes thin out to the right), on its own
scales and in logs, and scikit-learn's diabetes (442 rows, 10 features);
``degree`` 0 and 1. Each line prints R^2 and the time of the 5 outer fits.
"""

import time
import warnings

import numpy as np
import statsmodels.api as sm
from sklearn.datasets import load_diabetes
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import KernelAttentionRegressorCV

COUNTS = [3, 5, 8, 12, 20, 30, 50, 80]
CANDIDATES = {
    "fixed": {},
    "adaptive": {"bandwidths": None, "n_neighbors": COUNTS},
    "both": {"n_neighbors": COUNTS},
}


def data_sets():
    engel = sm.datasets.engel.load_pandas().data
    income, food = engel[["income"]].to_numpy(), engel["foodexp"].to_numpy()
    return {
        "engel": (income, food),
        "engel (log-log)": (np.log(income), np.log(food)),
        "diabetes": load_diabetes(return_X_y=True),
    }


def main():
    warnings.simplefilter("ignore")
    outer = KFold(5, shuffle=True, random_state=0)
    for name, (X, y) in data_sets().items():
        for degree in (0, 1):
            row = []
            for label, params in CANDIDATES.items():
                model = make_pipeline(
                    StandardScaler(),
                    KernelAttentionRegressorCV(
                        kernels=["gaussian", "tricube"], degree=degree, **params
                    ),
                )
                start = time.perf_counter()
                r2 = cross_val_score(model, X, y, cv=outer, scoring="r2")
                seconds = time.perf_counter() - start
                row.append(f"{label} {r2.mean():.4f} ({seconds:.1f} s)")
            print(f"{name:16s} degree={degree}: " + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
