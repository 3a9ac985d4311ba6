"""Ordered categorical features: the Li-Racine ordered kernel against plain
loops.

An ordered feature weighs a key ``lambda ** |a - b|``, with ``a`` and ``b``
the positions of the query's and the key's levels in their order (Li and
Racine, Nonparametric Econometrics, 2007, section 4.1); a level unseen in
``fit`` is at ``max(L - 1, 1)`` from every key.
"""

import math
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from _reference import FORMULAS
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)

GRADES = ["low", "mid", "high", "top"]  # declared order, not the sorted one
SIZES = [3, 7, 11, 13]
COMPACT = ["epanechnikov", "biweight", "boxcar"]


def ordered_weights(Xc, pos, Qc, qpos, ordered, levels, kernel, h, lambdas, sw=None):
    """``w_i alpha(||(q_c - k_c) / h||) prod_j lambda_j ** D_j`` by a double
    loop: ``D_j = |a - b|`` for an ordered feature (``max(L - 1, 1)`` for an
    unknown level, position None), ``[a != b]`` for an unordered one."""
    alpha = FORMULAS[kernel]
    n, m = len(pos), len(qpos)
    d = Xc.shape[1]
    h = np.broadcast_to(np.asarray(h, dtype=float), (d,))
    w = np.ones(n) if sw is None else sw
    W = np.zeros((m, n))
    for a in range(m):
        for i in range(n):
            u = math.sqrt(sum(((Qc[a, f] - Xc[i, f]) / h[f]) ** 2 for f in range(d)))
            factor = 1.0
            for j, lam in enumerate(lambdas):
                q, k = qpos[a][j], pos[i][j]
                if not ordered[j]:
                    far = float(q != k)
                elif q is None:
                    far = max(levels[j] - 1, 1)
                else:
                    far = abs(q - k)
                factor *= lam**far
            W[a, i] = w[i] * alpha(u) * factor
    return W


def frame(rng, n, unknown=False):
    """Two continuous features, an ordered pandas categorical ``grade``, an
    unordered ``colour`` and an integer ``size``."""
    sizes = SIZES + [5] if unknown else SIZES  # 5: a level unseen in fit
    return pd.DataFrame(
        {
            "u": rng.normal(size=n),
            "grade": pd.Categorical(
                rng.choice(GRADES, n), categories=GRADES, ordered=True
            ),
            "colour": rng.choice(["red", "green", "blue"], n),
            "v": rng.normal(size=n),
            "size": rng.choice(sizes, n),
        }
    )


def data(n=60, m=12, seed=0):
    rng = np.random.default_rng(seed)
    X = frame(rng, n)
    grade = X["grade"].cat.codes.to_numpy()
    y = X["u"] + np.sin(X["v"]) + grade + (X["colour"] == "red") + X["size"] / 5
    y = y.to_numpy() + rng.normal(scale=0.1, size=n)
    return X, y, frame(rng, m, unknown=True)


def positions(X, ordered):
    """Continuous columns and, per row, the positions of the levels (the
    colour as its string): the declared order of ``grade``, the sorted
    values of ``size``."""
    Xc = X[["u", "v"]].to_numpy(dtype=float)
    rows = []
    for g, c, s in zip(X["grade"], X["colour"], X["size"], strict=True):
        size = SIZES.index(s) if s in SIZES else None
        rows.append((GRADES.index(g) if ordered[0] else g, c, size))
    return Xc, rows


def expected_weights(X, Q, kernel, h, lambdas, sw=None, ordered=(True, False, True)):
    Xc, pos = positions(X, ordered)
    Qc, qpos = positions(Q, ordered)
    levels = [len(GRADES), 3, len(SIZES)]
    return ordered_weights(Xc, pos, Qc, qpos, ordered, levels, kernel, h, lambdas, sw)


def regressor(kernel="gaussian", h=1.5, lambdas=(0.3, 0.2, 0.5), **options):
    return KernelAttentionRegressor(
        kernel,
        h,
        categorical_features=["grade", "colour", "size"],
        categorical_bandwidth=list(lambdas),
        ordered_features=options.pop("ordered_features", ["grade", "size"]),
        **options,
    )


# -- the fitted estimator -------------------------------------------------------
@pytest.mark.parametrize("kernel", ["gaussian", "cauchy", *COMPACT])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_ordered_product_kernel_loop(kernel, weighted):
    X, y, Q = data()
    sw = np.random.default_rng(1).uniform(0.2, 3.0, len(y)) if weighted else None
    lambdas = (0.3, 0.2, 0.5)
    W = expected_weights(X, Q, kernel, [1.5, 2.5], lambdas, sw)
    P = W / W.sum(axis=1, keepdims=True)
    algorithms = ["brute"] + (["kd_tree", "ball_tree"] if kernel in COMPACT else [])
    for algorithm in algorithms:
        reg = regressor(kernel, [1.5, 2.5], lambdas, algorithm=algorithm)
        reg.fit(X, y, sample_weight=sw)
        assert_allclose(reg.predict(Q), P @ y, rtol=1e-10, atol=1e-12)
        assert_allclose(reg.attention_weights(Q), P, atol=1e-12)
        sparse = reg.attention_weights(Q, sparse=True).toarray()
        assert_allclose(sparse, P, atol=1e-12)
        _, std = reg.predict(Q, return_std=True)
        spread = np.sqrt(np.sum(P * (y[None] - (P @ y)[:, None]) ** 2, axis=1))
        assert_allclose(std, spread, rtol=1e-8, atol=1e-10)


def test_local_linear_matches_weighted_least_squares_loop():
    X, y, Q = data(n=80)
    W = expected_weights(X, Q, "gaussian", 2.0, (0.4, 0.3, 0.6))
    Xc, Qc = X[["u", "v"]].to_numpy(), Q[["u", "v"]].to_numpy()
    expected = np.empty(len(Q))
    for a in range(len(Q)):
        design = np.hstack([np.ones((len(Xc), 1)), Xc - Qc[a]])
        root = np.sqrt(W[a])[:, None]
        coef, *_ = np.linalg.lstsq(design * root, y * root[:, 0], rcond=None)
        expected[a] = coef[0]
    reg = regressor(h=2.0, lambdas=(0.4, 0.3, 0.6), degree=1).fit(X, y)
    assert_allclose(reg.predict(Q), expected, rtol=1e-8)


def test_fitted_attributes_and_codes_are_the_positions():
    X, y, Q = data()
    reg = regressor().fit(X, y)
    assert_array_equal(reg.is_categorical_, [False, True, True, False, True])
    assert_array_equal(reg.is_ordered_, [False, True, False, False, True])
    assert list(reg.categories_[0]) == GRADES  # the declared order
    assert list(reg.categories_[1]) == ["blue", "green", "red"]
    assert list(reg.categories_[2]) == SIZES  # the sorted values
    codes = reg.keys_[:, 2:]
    assert_array_equal(codes[:, 0], [GRADES.index(g) for g in X["grade"]])
    assert_array_equal(codes[:, 2], [SIZES.index(s) for s in X["size"]])
    assert_array_equal(reg._pool._arguments["categorical_levels"], [4, 0, 4])


def test_pandas_ordered_categoricals_are_picked_up_and_unordered_ones_unchanged():
    full, y, full_queries = data()
    X, Q = full.drop(columns="size"), full_queries.drop(columns="size")
    for frame_ in (X, Q):  # colour as an unordered pandas categorical
        frame_["colour"] = pd.Categorical(frame_["colour"])
    default = KernelAttentionRegressor(
        bandwidth=1.5, categorical_features="from_dtype", categorical_bandwidth=0.3
    ).fit(X, y)
    assert_array_equal(default.is_categorical_, [False, True, True, False])
    assert_array_equal(default.is_ordered_, [False, True, False, False])
    assert list(default.categories_[0]) == GRADES
    # The same as naming it, and as positions given as an ordered numeric column.
    named = KernelAttentionRegressor(
        bandwidth=1.5,
        categorical_features=["grade", "colour"],
        categorical_bandwidth=0.3,
        ordered_features=["grade"],
    ).fit(X, y)
    assert_allclose(named.predict(Q), default.predict(Q), rtol=1e-12)
    as_numbers = [X.copy(), Q.copy()]
    for frame_ in as_numbers:
        frame_["grade"] = frame_["grade"].cat.codes.astype(float)
    numeric = KernelAttentionRegressor(
        bandwidth=1.5,
        categorical_features=[1, 2],
        categorical_bandwidth=0.3,
        ordered_features=[1],
    ).fit(as_numbers[0], y)
    assert_allclose(numeric.predict(as_numbers[1]), default.predict(Q), rtol=1e-12)
    # (lambda 1: the size is not a feature here)
    W = expected_weights(full, full_queries, "gaussian", 1.5, (0.3, 0.3, 1.0))
    assert_allclose(default.predict(Q), W @ y / W.sum(axis=1), rtol=1e-10)
    # ordered_features=None: every categorical feature unordered, as before.
    plain = default.set_params(ordered_features=None).fit(X, y)
    assert plain.is_ordered_ is None and "categorical_levels" not in (
        plain._pool._arguments
    )
    W = expected_weights(
        full, full_queries, "gaussian", 1.5, (0.3, 0.3, 1.0), ordered=[False] * 3
    )
    assert_allclose(plain.predict(Q), W @ y / W.sum(axis=1), rtol=1e-10)


def test_two_levels_equal_the_unordered_kernel():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(
        {
            "x": rng.normal(size=50),
            "g": pd.Categorical(rng.choice(["no", "yes"], 50), ordered=True),
        }
    )
    y = X["x"].to_numpy() + (X["g"] == "yes") + rng.normal(scale=0.1, size=50)
    Q = X.iloc[:7].copy()
    Q.loc[Q.index[0], "g"] = "no"
    fits = [
        KernelAttentionRegressor(
            bandwidth=0.8,
            categorical_features=["g"],
            categorical_bandwidth=0.25,
            ordered_features=ordered,
        ).fit(X, y)
        for ordered in ("from_dtype", None)
    ]
    assert fits[0].is_ordered_ is not None and fits[1].is_ordered_ is None
    for method in ("predict", "attention_weights", "predict_gradient"):
        assert_allclose(*(getattr(f, method)(Q) for f in fits), rtol=1e-12)
    assert_allclose(
        *(f.predict(Q, return_se=True)[1] for f in fits), rtol=1e-12, equal_nan=True
    )
    assert_allclose(*(f.confidence_interval(Q) for f in fits), rtol=1e-12)


def test_lambda_zero_gives_the_cell_means_and_one_ignores_the_feature():
    X, y, Q = data()
    cats = X[["grade", "size"]]
    queries = Q[["grade", "size"]].iloc[[0, 1, 2]]
    queries = queries[queries["size"].isin(SIZES)]
    reg = KernelAttentionRegressor(
        categorical_features=[0, 1], categorical_bandwidth=0.0, ordered_features=[0, 1]
    ).fit(cats, y)
    for (_, q), pred in zip(queries.iterrows(), reg.predict(queries), strict=True):
        cell = (cats["grade"] == q["grade"]) & (cats["size"] == q["size"])
        if cell.any():
            assert_allclose(pred, y[cell.to_numpy()].mean(), rtol=1e-12)
    ignored = regressor(lambdas=(1.0, 0.2, 0.5)).fit(X, y)
    without = KernelAttentionRegressor(
        "gaussian",
        1.5,
        categorical_features=["colour", "size"],
        categorical_bandwidth=[0.2, 0.5],
        ordered_features=["size"],
    ).fit(X.drop(columns="grade"), y)
    assert_allclose(
        ignored.predict(Q), without.predict(Q.drop(columns="grade")), rtol=1e-12
    )


def test_only_an_ordered_feature_is_the_exponential_kernel_of_the_positions():
    # lambda ** |a - b| = exp(-|a - b| / h) with h = -1 / log(lambda): the fit
    # of the positions as a continuous feature, standard errors, intervals
    # and leave-one-out search included.
    X, y, Q = data(n=50)
    lam = 0.4
    h = -1.0 / math.log(lam)
    grades, qgrades = X[["grade"]], Q[["grade"]]
    reg = KernelAttentionRegressor(
        categorical_features="from_dtype", categorical_bandwidth=lam
    ).fit(grades, y)
    pos = X["grade"].cat.codes.to_numpy(float)[:, None]
    qpos = Q["grade"].cat.codes.to_numpy(float)[:, None]
    exp = KernelAttentionRegressor("exponential", h, algorithm="brute").fit(pos, y)
    assert_allclose(reg.predict(qgrades), exp.predict(qpos), rtol=1e-12)
    assert_allclose(
        reg.predict(qgrades, return_se=True), exp.predict(qpos, return_se=True)
    )
    assert_allclose(reg.confidence_interval(qgrades), exp.confidence_interval(qpos))
    assert_allclose(
        reg.smoother_diagnostics().effective_df, exp.smoother_diagnostics().effective_df
    )


def test_unknown_level_is_at_the_distance_of_the_farthest_levels():
    X, y, _ = data()
    reg = KernelAttentionRegressor(
        categorical_features=["size"], categorical_bandwidth=0.5, ordered_features=[0]
    ).fit(X[["size"]], y)
    weights = reg.attention_weights(pd.DataFrame({"size": [5]}))
    assert_allclose(weights, np.full((1, len(y)), 1 / len(y)))  # 0.5 ** 3 each
    # A pandas categorical's levels are those of its dtype, seen in fit or not.
    g = pd.Categorical(["a", "c"], categories=["a", "b", "c"], ordered=True)
    reg = KernelAttentionRegressor(
        categorical_features="from_dtype", categorical_bandwidth=0.5
    ).fit(pd.DataFrame({"g": g}), [0.0, 1.0])
    assert list(reg.categories_[0]) == ["a", "b", "c"]
    queries = pd.DataFrame({"g": pd.Categorical(["a", "b"], categories=g.categories)})
    assert_allclose(reg.predict(queries), [0.25 / 1.25, 0.5])


def test_predict_gradient_matches_central_differences():
    X, y, Q = data()
    reg = regressor(h=[1.0, 1.5]).fit(X, y)
    Q = Q[Q["size"].isin(SIZES)].reset_index(drop=True)
    grad = reg.predict_gradient(Q)
    assert np.all(np.isnan(grad[:, [1, 2, 4]]))
    for column, f in (("u", 0), ("v", 3)):
        up, down = Q.copy(), Q.copy()
        up[column] += 1e-6
        down[column] -= 1e-6
        numeric = (reg.predict(up) - reg.predict(down)) / 2e-6
        assert_allclose(grad[:, f], numeric, rtol=1e-5, atol=1e-7)


def test_classifier_matches_ordered_product_kernel_loop():
    X, y, Q = data()
    labels = np.where(y > np.median(y), "high", "low")
    W = expected_weights(X, Q, "gaussian", 1.5, (0.3, 0.2, 0.5))
    P = W / W.sum(axis=1, keepdims=True)
    clf = KernelAttentionClassifier(
        bandwidth=1.5,
        categorical_features=["grade", "colour", "size"],
        categorical_bandwidth=[0.3, 0.2, 0.5],
        ordered_features=["grade", "size"],
    ).fit(X, labels)
    expected = np.column_stack([P @ (labels == c) for c in clf.classes_])
    assert_allclose(clf.predict_proba(Q), expected, rtol=1e-10, atol=1e-12)


def test_partially_linear_kernel_part_is_ordered():
    X, y, Q = data()
    reg = KernelAttentionRegressor(
        bandwidth=1.5,
        categorical_features=["grade", "colour", "size"],
        categorical_bandwidth=0.3,
        ordered_features=["grade", "size"],
        linear_features=["v"],
    ).fit(X, y)
    assert_array_equal(reg.is_ordered_, [False, True, False, False, True])
    kernel = reg.kernel_regressor_
    assert_array_equal(kernel.is_ordered_, [False, True, False, True])
    Xk, Qk = X.drop(columns="v"), Q.drop(columns="v")
    W = expected_weights(
        Xk.assign(v=0.0), Qk.assign(v=0.0), "gaussian", 1.5, (0.3, 0.3, 0.3)
    )
    P = W / W.sum(axis=1, keepdims=True)
    expected = Q["v"].to_numpy() * reg.coef_[0] + reg.intercept_ + P @ kernel.values_
    assert_allclose(reg.predict(Q), expected.ravel(), rtol=1e-10)


# -- the search -----------------------------------------------------------------
def _refit_predictions(X, y, sw, params, degree, splits):
    pred = np.empty(len(y))
    for train, test in splits:
        reg = regressor(
            params["kernel"],
            params["bandwidth"],
            [params["categorical_bandwidth"]] * 3,
            degree=degree,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reg.fit(
                X.iloc[train], y[train], sample_weight=None if sw is None else sw[train]
            )
            pred[test] = reg.predict(X.iloc[test])
    return pred


# Two of the matrix in the default run, the others with -m slow.
LOO_CASES = [
    pytest.param(
        kernel,
        degree,
        weighted,
        marks=()
        if (kernel, degree, weighted)
        in {("gaussian", 1, True), ("epanechnikov", 0, False)}
        else pytest.mark.slow,
    )
    for kernel in ("gaussian", "epanechnikov")
    for degree in (0, 1)
    for weighted in (False, True)
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kernel, degree, weighted", LOO_CASES)
def test_leave_one_out_equals_refitting_without_each_point(kernel, degree, weighted):
    from sklearn.model_selection import LeaveOneOut

    X, y, _ = data(n=40)
    sw = np.random.default_rng(5).uniform(0.5, 2, len(y)) if weighted else None
    lambdas = [0.0, 0.3, 1.0]
    cv = KernelAttentionRegressorCV(
        kernels=kernel,
        bandwidths=[1.0, 2.5],
        degree=degree,
        n_neighbors=None,
        categorical_features=["grade", "colour", "size"],
        ordered_features=["grade", "size"],
        categorical_bandwidths=lambdas,
    ).fit(X, y, sample_weight=sw)
    assert_array_equal(cv.is_ordered_, [False, True, False, False, True])
    w = np.ones(len(y)) if sw is None else sw
    splits = list(LeaveOneOut().split(X))
    results = cv.cv_results_
    for c, params in enumerate(results["params"]):
        pred = _refit_predictions(X, y, sw, params, degree, splits)
        mse = np.sum(w * (pred - y) ** 2) / w.sum()
        assert_allclose(results["loo_mse"][c], mse, rtol=1e-8)
    best = cv.best_estimator_
    assert_array_equal(best.is_ordered_, cv.is_ordered_)
    assert_allclose(best.categorical_bandwidth_, [cv.categorical_bandwidth_] * 3)


@pytest.mark.filterwarnings("ignore")
def test_kfold_equals_refitting_each_fold():
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold

    X, y, _ = data(n=50)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    cv = KernelAttentionRegressorCV(
        kernels=["gaussian", "biweight"],
        bandwidths=[1.5, 3.0],
        degree=0,
        cv=splits,
        n_neighbors=None,
        categorical_features=["grade", "colour", "size"],
        ordered_features=["grade", "size"],
        categorical_bandwidths=[0.1, 0.5],
    ).fit(X, y)
    for c, params in enumerate(cv.cv_results_["params"]):
        for s, (train, test) in enumerate(splits):
            pred = _refit_predictions(X, y, None, params, 0, [(train, test)])
            assert_allclose(
                cv.cv_results_[f"split{s}_test_score"][c],
                r2_score(y[test], pred[test]),
                rtol=1e-8,
            )


LEVEL_KINDS = ["int", "object", "pandas", "unordered"]
# lambda 0 and a narrow width leave some held-out rows no key (on_empty), or
# few keys for a slope (the safeguard).
QUIET = pytest.mark.filterwarnings(
    "ignore::sklearn_kernelpool.EmptyNeighborhoodWarning",
    "ignore::sklearn_kernelpool.LocalLinearFallbackWarning",
)


def rare_levels(kind, n=40, seed=7):
    """``x`` and a five-level ``g`` of ``kind``: its third level held by one
    row, its fourth by rows 10 and 11 only (one fold of an unshuffled
    5-fold), so that refits miss levels; ``kind`` "unordered" is the int
    column unordered."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    level = rng.choice([0, 1, 4], n)
    level[25] = 2
    level[[10, 11]] = 3
    y = np.sin(x) + 0.6 * level + rng.normal(scale=0.2, size=n)
    if kind in ("int", "unordered"):
        g = np.array([1, 2, 4, 8, 16])[level]
    elif kind == "object":
        g = np.array(["a", "b", "c", "d", "e"], dtype=object)[level]
    else:
        g = pd.Categorical.from_codes(level, list("abcde"), ordered=True)
    ordered = None if kind == "unordered" else ["g"]
    return pd.DataFrame({"x": x, "g": g}), y, ordered


def _refits(X, y, sw, params, ordered, degree, splits):
    """The held-out predictions of KernelAttentionRegressor refitted on each
    training part with ``params``, by a plain loop."""
    pred = np.full(len(y), np.nan)
    for train, test in splits:
        reg = KernelAttentionRegressor(
            params["kernel"],
            params["bandwidth"],
            degree=degree,
            categorical_features=["g"],
            categorical_bandwidth=params["categorical_bandwidth"],
            ordered_features=ordered,
        )
        reg.fit(X.iloc[train], y[train], None if sw is None else sw[train])
        pred[test] = reg.predict(X.iloc[test])
    return pred


def _rare_level_search(kind, cv, degree=0, sw=None):
    from sklearn.model_selection import LeaveOneOut

    X, y, ordered = rare_levels(kind)
    search = KernelAttentionRegressorCV(
        bandwidths=[0.4, 1.2],
        degree=degree,
        n_neighbors=None,
        cv=cv,
        categorical_features=["g"],
        ordered_features=ordered,
        categorical_bandwidths=[0.0, 0.5],
        linear_features=None,
    ).fit(X, y, sample_weight=sw)
    splits = list(LeaveOneOut().split(X)) if cv is None else list(cv.split(X))
    return X, y, ordered, search, splits


@QUIET
@pytest.mark.parametrize(
    "kind, degree",
    [
        pytest.param(kind, degree, marks=pytest.mark.slow)
        if degree and kind in ("pandas", "unordered")
        else (kind, degree)
        for kind in LEVEL_KINDS
        for degree in (0, 1)
    ],
)
def test_leave_one_out_of_a_level_held_by_one_row_equals_refits(kind, degree):
    # A refit without the only row of a level numbers the others 0..L-2:
    # that row is an unknown level, as the search's held-out fit reads it.
    X, y, ordered, search, splits = _rare_level_search(kind, None, degree)
    results = search.cv_results_
    for c, params in enumerate(results["params"]):
        pred = _refits(X, y, None, params, ordered, degree, splits)
        assert_allclose(results["loo_mse"][c], np.mean((pred - y) ** 2), rtol=1e-10)


@QUIET
@pytest.mark.parametrize("kind", LEVEL_KINDS)
@pytest.mark.parametrize("cv", ["kfold", "shuffle"])
def test_kfold_with_levels_missing_from_a_training_part_equals_refits(kind, cv):
    # "kfold" partitions the rows (one pass for all folds); "shuffle" does not
    # (one pass per split). Weights of zero still bring their levels.
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold, ShuffleSplit

    sw = np.random.default_rng(3).uniform(0.5, 2.0, 40)
    sw[[0, 11]] = 0.0
    cv = KFold(5) if cv == "kfold" else ShuffleSplit(4, test_size=8, random_state=5)
    X, y, ordered, search, splits = _rare_level_search(kind, cv, sw=sw)
    results = search.cv_results_
    for c, params in enumerate(results["params"]):
        for s, (train, test) in enumerate(splits):
            pred = _refits(X, y, sw, params, ordered, 0, [(train, test)])
            expected = r2_score(y[test], pred[test], sample_weight=sw[test])
            assert_allclose(
                results[f"split{s}_test_score"][c], expected, rtol=1e-10, atol=1e-12
            )


@pytest.mark.parametrize("cv", [None, "kfold"])
def test_held_out_weights_of_the_refits_are_those_of_refitted_estimators(cv):
    # The weights from which local-linear held-out fits are solved again
    # where their moments cancel.
    from sklearn_kernelpool._held_out._categorical import CategoricalHeldOut
    from sklearn_kernelpool._held_out._fits import allowed_keys
    from sklearn_kernelpool.kernels import KERNELS

    X, y, _ = rare_levels("object")
    n = len(y)
    options = {
        "categorical_features": ["g"],
        "categorical_bandwidth": 0.5,
        "ordered_features": ["g"],
    }
    codes = KernelAttentionRegressor(**options).fit(X, y).keys_[:, 1:]
    held_out = CategoricalHeldOut(
        X[["x"]].to_numpy(),
        codes,
        [0.5],
        y[:, None],
        np.ones(n),
        [KERNELS["gaussian"]],
        [0.8],
        degree=1,
        levels=[5],
        sorted_levels=[True],
    )
    groups = None if cv is None else np.arange(n) // 8  # KFold(5)
    held_out.sums_excluding_groups(groups)
    points = np.arange(n)
    scores = held_out._refit_scores((0, 0), points, allowed_keys(points, n, groups))
    for i in points:
        train = points != i if cv is None else groups != groups[i]
        reg = KernelAttentionRegressor("gaussian", 0.8, **options)
        expected = reg.fit(X[train], y[train]).attention_weights(X.iloc[[i]])[0]
        weights = scores[i, train] / scores[i].sum()
        assert_allclose(weights, expected, rtol=1e-10, atol=1e-15)


@QUIET
def test_learned_lambdas_with_a_level_held_by_one_row_score_as_refits():
    X, y, _ = rare_levels("int", n=60)
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.4, 1.2],
        n_neighbors=None,
        categorical_features=["g"],
        ordered_features=["g"],
        categorical_bandwidths=[0.3, 0.7],
        per_feature=True,
    ).fit(X, y)
    assert cv.per_feature_
    params = cv.best_estimator_.get_params()
    pred = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        reg = KernelAttentionRegressor(**params).fit(X[keep], y[keep])
        pred[i] = reg.predict(X.iloc[[i]])[0]
    assert_allclose(cv.best_score_, -np.mean((pred - y) ** 2), rtol=1e-8)


@QUIET
@pytest.mark.parametrize("degree", [0, 1])
def test_in_sample_criteria_with_a_level_held_by_one_row_are_the_full_fits(degree):
    # GCV is the criterion of the fit of all the rows, which knows the level.
    X, y, ordered = rare_levels("int")
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.4, 1.2],
        degree=degree,
        n_neighbors=None,
        scoring="gcv",
        categorical_features=["g"],
        ordered_features=ordered,
        categorical_bandwidths=[0.3, 0.7],
    ).fit(X, y)
    for c, params in enumerate(cv.cv_results_["params"]):
        reg = KernelAttentionRegressor(
            params["kernel"],
            params["bandwidth"],
            degree=degree,
            categorical_features=["g"],
            categorical_bandwidth=params["categorical_bandwidth"],
            ordered_features=ordered,
        ).fit(X, y)
        summary = reg.smoother_diagnostics()
        assert_allclose(cv.cv_results_["gcv"][c], summary.gcv, rtol=1e-9)
        assert_allclose(cv.cv_results_["effective_df"][c], summary.effective_df)


@pytest.mark.parametrize("kernel", ["gaussian", "cauchy"])
@pytest.mark.parametrize("degree", [0, 1])
def test_lambda_gradient_matches_central_differences(kernel, degree):
    from scipy.optimize import approx_fprime

    from sklearn_kernelpool._widths._categorical import loo_objective
    from sklearn_kernelpool.kernels import KERNELS

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    codes = np.column_stack([rng.integers(0, 5, 30), rng.integers(0, 3, 30)])
    Y = X[:, :1] + codes[:, :1] + rng.normal(scale=0.1, size=(30, 1))
    w = rng.uniform(0.5, 2, 30)
    levels = np.array([5, 0])  # the first ordered, the second not
    theta = np.log([0.7, 1.3, 0.2, 0.6])

    def objective(t):
        return loo_objective(t, X, codes, Y, w, KERNELS[kernel], degree, levels)

    grad = objective(theta)[1]
    numeric = approx_fprime(theta, lambda t: objective(t)[0], 1e-7)
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)
    # The ordered distances change the objective.
    plain = loo_objective(theta, X, codes, Y, w, KERNELS[kernel], degree)[0]
    assert not np.isclose(objective(theta)[0], plain)


@pytest.mark.filterwarnings("ignore")
def test_per_feature_learns_ordered_lambdas_on_the_refit_error():
    rng = np.random.default_rng(2)
    n = 80
    x = rng.uniform(-2, 2, n)
    grade = rng.integers(0, 5, n)
    noise = rng.integers(0, 4, n)
    y = np.sin(x) + 0.8 * grade + rng.normal(scale=0.2, size=n)
    X = np.column_stack([x, grade, noise])
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.3, 1.0],
        categorical_features=[1, 2],
        ordered_features=[1, 2],
        categorical_bandwidths=[0.1, 0.5],
        per_feature=True,
    ).fit(X, y)
    lam = cv.categorical_bandwidth_
    # (about 0.07 for the informative grade, 0.47 for the noise)
    assert cv.per_feature_ and lam.shape == (2,) and lam[0] < 0.1 < 0.3 < lam[1]
    params = cv.best_estimator_.get_params()
    pred = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        reg = KernelAttentionRegressor(**params).fit(X[keep], y[keep])
        pred[i] = reg.predict(X[i : i + 1])[0]
    assert_allclose(cv.best_score_, -np.mean((pred - y) ** 2), rtol=1e-8)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own
def test_two_levels_equal_statsmodels_wang_van_ryzin():
    # Wang and van Ryzin's kernel weighs 1 - l the query's level and
    # (1 - l) / 2 * l ** |a - b| another: relative to the query's level,
    # l ** |a - b| / 2, which for two levels is our lambda = l / 2.
    KernelReg = pytest.importorskip("statsmodels.nonparametric.api").KernelReg
    rng = np.random.default_rng(4)
    n, h, l_sm = 60, 0.6, 0.3
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 2, n)])
    y = X[:, 0] ** 2 + X[:, 1] + rng.normal(scale=0.1, size=n)
    Q = np.column_stack([rng.normal(size=7), rng.integers(0, 2, 7)])
    sm = KernelReg(y, X, var_type="co", reg_type="lc", bw=[h, l_sm])
    reg = KernelAttentionRegressor(
        bandwidth=h,
        categorical_features=[1],
        ordered_features=[1],
        categorical_bandwidth=l_sm / 2,
    ).fit(X, y)
    assert_allclose(reg.predict(Q), sm.fit(Q)[0], rtol=1e-8)


# -- persistence and errors -----------------------------------------------------
def test_pickle_round_trip_and_altered_levels_are_refused():
    from sklearn_kernelpool._engine._pooling import ON_EMPTY
    from sklearn_kernelpool._engine._saved_state import check_pool_arguments

    X, y, Q = data()
    reg = regressor().fit(X, y)
    loaded = pickle.loads(pickle.dumps(reg))
    assert_array_equal(loaded.predict(Q), reg.predict(Q))
    arguments = reg._pool._arguments
    for levels in ([4, 0], [4, 0, 2], [4, -1, 4], [4.0, 0.0, 4.0]):
        with pytest.raises(ValueError, match="Cannot load"):
            check_pool_arguments(
                {**arguments, "categorical_levels": np.array(levels)}, ON_EMPTY
            )


def test_a_pickle_of_an_earlier_release_stays_unordered():
    X, y, Q = data()
    reg = regressor(ordered_features=None).fit(X, y)
    expected = reg.predict(Q)
    # As an earlier release saved it: no ordered_features, no is_ordered_.
    del reg.ordered_features, reg.is_ordered_
    loaded = pickle.loads(pickle.dumps(reg))
    assert loaded.get_params()["ordered_features"] is None
    assert loaded.is_ordered_ is None
    assert_array_equal(loaded.predict(Q), expected)
    cv = KernelAttentionRegressorCV(bandwidths=[1.0], n_neighbors=None, degree=0)
    del cv.ordered_features
    assert pickle.loads(pickle.dumps(cv)).get_params()["ordered_features"] is None


def test_errors():
    X, y, _ = data()
    with pytest.raises(ValueError, match=r"ordered_features must name categorical"):
        regressor(ordered_features=["u"]).fit(X, y)
    with pytest.raises(ValueError, match="ordered_features holds feature names"):
        KernelAttentionRegressor(categorical_features=[0], ordered_features=["a"]).fit(
            np.ones((4, 2)), np.ones(4)
        )
    with pytest.raises(ValueError, match="ordered_features"):
        regressor(ordered_features="sorted").fit(X, y)
    with pytest.raises(ValueError, match=r"ordered_features as int indices"):
        regressor(ordered_features=[7]).fit(X, y)
