"""Native categorical features against one-hot encoding, on real tables.

5-fold shuffled cross-validated R^2 of ``KernelAttentionRegressorCV`` (its
bandwidth, and for native categories its lambda, selected by leave-one-out
inside each training fold) with the categorical columns declared as
``categorical_features`` against the same estimator on a one-hot encoding of
them (the full encoding for degree 0, drop-first for degree 1), numeric
columns standardised in both, on statsmodels' Grunfeld investment panel
(firm categorical) and its affairs survey ``fair`` (religiousness and both
occupations categorical; a random subsample of ``--n-fair`` rows).

Run: ``python benchmarks/bench_categorical.py``.
"""

import argparse
import time
import warnings

import pandas as pd
import statsmodels.api as sm
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sklearn_kernelpool import KernelAttentionRegressorCV


def datasets(n_fair, seed):
    grunfeld = sm.datasets.grunfeld.load_pandas().data
    X = grunfeld[["value", "capital", "year", "firm"]].astype({"firm": "category"})
    yield "grunfeld", X, grunfeld["invest"].to_numpy(), ["firm"]
    fair = sm.datasets.fair.load_pandas().data
    fair = fair.sample(n=min(n_fair, len(fair)), random_state=seed)
    categorical = ["religious", "occupation", "occupation_husb"]
    X = fair.drop(columns="affairs").astype({c: "category" for c in categorical})
    yield "fair", X, fair["affairs"].to_numpy(), categorical


def models(X, categorical, degree):
    numeric = [c for c in X.columns if c not in categorical]
    native = make_pipeline(
        ColumnTransformer(
            [("num", StandardScaler(), numeric)],
            remainder="passthrough",
            verbose_feature_names_out=False,
        ).set_output(transform="pandas"),
        KernelAttentionRegressorCV(
            bandwidths=15, degree=degree, categorical_features="from_dtype"
        ),
    )
    drop = "first" if degree == 1 else None
    onehot = make_pipeline(
        ColumnTransformer(
            [
                ("num", StandardScaler(), numeric),
                ("cat", OneHotEncoder(drop=drop, sparse_output=False), categorical),
            ]
        ),
        KernelAttentionRegressorCV(bandwidths=15, degree=degree),
    )
    return {"native": native, "one-hot": onehot}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-fair", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folds = KFold(5, shuffle=True, random_state=args.seed)
    print(f"{'data':9} {'n':>5} {'degree':>6} {'encoding':>8} {'R2':>7} {'time s':>7}")
    for name, X, y, categorical in datasets(args.n_fair, args.seed):
        for degree in (0, 1):
            for label, model in models(X, categorical, degree).items():
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r2 = cross_val_score(model, X, y, cv=folds, scoring="r2")
                elapsed = time.perf_counter() - start
                print(
                    f"{name:9} {len(y):5d} {degree:6d} {label:>8} "
                    f"{r2.mean():7.3f} {elapsed:7.1f}"
                )


if __name__ == "__main__":
    pd.set_option("display.width", 120)
    main()
