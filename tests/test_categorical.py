"""Categorical features: the Li-Racine unordered kernel against plain loops."""

import math
import pickle
import sys

import numpy as np
import pandas as pd
import pytest
from _reference import FORMULAS
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import clone, config_context

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
)

COMPACT = ["boxcar", "epanechikov", "epanechnikov", "biweight", "triweight"]
COMPACT += ["tricube", "cosine"]
UNBOUNDED = ["gaussian", "exponential", "cauchy", "constant"]


def product_weights(Xc, codes, Qc, qcodes, kernel, h, lambdas, sample_weight=None):
    """The weights ``w_i alpha(||(q_c - k_c)/h||) prod_j lambda_j^[q_j != k_j]``
    by a double loop."""
    alpha = FORMULAS[kernel]
    n, m = len(codes), len(qcodes)
    d = Xc.shape[1]
    h = np.broadcast_to(np.asarray(h, dtype=float), (d,))
    lambdas = np.broadcast_to(np.asarray(lambdas, dtype=float), (codes.shape[1],))
    w = np.ones(n) if sample_weight is None else sample_weight
    W = np.zeros((m, n))
    for a in range(m):
        for i in range(n):
            u = math.sqrt(sum(((Qc[a, f] - Xc[i, f]) / h[f]) ** 2 for f in range(d)))
            factor = 1.0
            for j in range(codes.shape[1]):
                if qcodes[a][j] != codes[i][j]:
                    factor *= lambdas[j]
            W[a, i] = w[i] * alpha(u) * factor
    return W


def local_linear_loop(W, Xc, Qc, y):
    """Intercepts of weighted least squares ``y ~ b + beta . (k_c - q_c)``,
    one query at a time: the categorical features get no slope."""
    out = np.empty(len(Qc))
    for a in range(len(Qc)):
        design = np.hstack([np.ones((len(Xc), 1)), Xc - Qc[a]])
        root = np.sqrt(W[a])[:, None]
        coef, *_ = np.linalg.lstsq(design * root, y * root[:, 0], rcond=None)
        out[a] = coef[0]
    return out


def mixed_data(n=60, m=9, seed=0):
    """Two continuous features and two categorical ones (strings, ints)."""
    rng = np.random.default_rng(seed)
    Xc = rng.normal(size=(n, 2))
    colour = rng.choice(["red", "green", "blue"], n)
    size = rng.choice([3, 7, 11, 13], n)
    y = Xc[:, 0] + np.sin(Xc[:, 1]) + (colour == "red") * 2.0 + size / 5.0
    y += rng.normal(scale=0.1, size=n)
    X = pd.DataFrame({"u": Xc[:, 0], "colour": colour, "v": Xc[:, 1], "size": size})
    Qc = rng.normal(size=(m, 2))
    Q = pd.DataFrame(
        {
            "u": Qc[:, 0],
            "colour": rng.choice(["red", "green", "blue"], m),
            "v": Qc[:, 1],
            "size": rng.choice([3, 7, 11, 13], m),
        }
    )
    return X, y, Q


def split(X):
    """Continuous columns and tuples of categories, as the loop takes them."""
    Xc = X[["u", "v"]].to_numpy(dtype=float)
    codes = list(zip(X["colour"], X["size"], strict=True))
    return Xc, np.array(codes, dtype=object)


@pytest.mark.parametrize("kernel", UNBOUNDED + COMPACT)
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_product_kernel_loop(kernel, weighted):
    X, y, Q = mixed_data()
    rng = np.random.default_rng(1)
    sw = rng.uniform(0.2, 3.0, len(y)) if weighted else None
    h, lambdas = [1.5, 2.5], [0.3, 0.05]
    Xc, codes = split(X)
    Qc, qcodes = split(Q)
    W = product_weights(Xc, codes, Qc, qcodes, kernel, h, lambdas, sw)
    expected = W @ y / W.sum(axis=1)
    algorithms = ["brute"] + (["kd_tree", "ball_tree"] if kernel in COMPACT else [])
    for algorithm in algorithms:
        reg = KernelAttentionRegressor(
            kernel,
            h,
            algorithm=algorithm,
            categorical_features=["colour", "size"],
            categorical_bandwidth=lambdas,
        ).fit(X, y, sample_weight=sw)
        assert_allclose(reg.predict(Q), expected, rtol=1e-10, atol=1e-12)
        p = reg.attention_weights(Q)
        assert_allclose(p, W / W.sum(axis=1, keepdims=True), atol=1e-12)
        sparse = reg.attention_weights(Q, sparse=True).toarray()
        assert_allclose(sparse, p, atol=1e-12)
        _, std = reg.predict(Q, return_std=True)
        P = W / W.sum(axis=1, keepdims=True)
        spread = np.sqrt(np.sum(P * (y[None] - expected[:, None]) ** 2, axis=1))
        assert_allclose(std, spread, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "cauchy"])
def test_local_linear_gives_categories_no_slope(kernel):
    X, y, Q = mixed_data(n=80)
    h, lambdas = 2.5, 0.4
    Xc, codes = split(X)
    Qc, qcodes = split(Q)
    sw = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    W = product_weights(Xc, codes, Qc, qcodes, kernel, h, lambdas, sw)
    expected = local_linear_loop(W, Xc, Qc, y)
    reg = KernelAttentionRegressor(
        kernel,
        h,
        degree=1,
        categorical_features=[1, 3],
        categorical_bandwidth=lambdas,
    ).fit(X, y, sample_weight=sw)
    assert_allclose(reg.predict(Q), expected, rtol=1e-8, atol=1e-10)
    # The equivalent kernel reproduces the prediction.
    assert_allclose(reg.attention_weights(Q) @ y, expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree", [0, 1])
def test_only_categorical_features(kernel, degree):
    X, y, Q = mixed_data()
    X = X[["colour", "size"]].astype({"size": "category"})
    Q = Q[["colour", "size"]].astype({"size": "category"})
    lambdas = [0.2, 0.6]
    codes = X.to_numpy(dtype=object)
    qcodes = Q.to_numpy(dtype=object)
    zeros = np.zeros((len(X), 1))
    W = product_weights(
        zeros, codes, np.zeros((len(Q), 1)), qcodes, kernel, 1.0, lambdas
    )
    reg = KernelAttentionRegressor(
        kernel,
        degree=degree,
        categorical_features="from_dtype",
        categorical_bandwidth=lambdas,
    ).fit(X, y)
    assert_array_equal(reg.is_categorical_, [True, True])
    # No continuous feature: no slope, the local mean.
    assert_allclose(reg.predict(Q), W @ y / W.sum(axis=1), rtol=1e-10)


def test_lambda_one_ignores_the_feature_and_zero_keeps_its_category():
    X, y, Q = mixed_data()
    ignore = KernelAttentionRegressor(
        bandwidth=0.7,
        categorical_features=["colour", "size"],
        categorical_bandwidth=1.0,
    ).fit(X, y)
    plain = KernelAttentionRegressor(bandwidth=0.7).fit(X[["u", "v"]], y)
    assert_allclose(ignore.predict(Q), plain.predict(Q[["u", "v"]]), rtol=1e-12)
    # lambda 0 on colour: the fit on the keys of the query's colour alone.
    exact = KernelAttentionRegressor(
        bandwidth=0.7,
        categorical_features=["colour", "size"],
        categorical_bandwidth=[0.0, 1.0],
    ).fit(X, y)
    for colour in ["red", "green", "blue"]:
        rows = (X["colour"] == colour).to_numpy()
        queries = Q[Q["colour"] == colour]
        if not len(queries):
            continue
        alone = KernelAttentionRegressor(bandwidth=0.7).fit(
            X[rows][["u", "v"]], y[rows]
        )
        assert_allclose(
            exact.predict(queries), alone.predict(queries[["u", "v"]]), rtol=1e-10
        )


def test_unknown_category_differs_from_every_key():
    X, y, Q = mixed_data()
    Q = Q.copy()
    Q["colour"] = ["purple"] * len(Q)
    Xc, codes = split(X)
    Qc, qcodes = split(Q)
    W = product_weights(Xc, codes, Qc, qcodes, "gaussian", 1.0, [0.3, 0.5])
    reg = KernelAttentionRegressor(
        categorical_features=["colour", "size"], categorical_bandwidth=[0.3, 0.5]
    ).fit(X, y)
    assert_allclose(reg.predict(Q), W @ y / W.sum(axis=1), rtol=1e-10)


def test_lambda_zero_empty_neighbourhood_gets_nearest_continuous_key():
    X, y, Q = mixed_data()
    Q = Q.copy()
    Q["colour"] = "purple"
    reg = KernelAttentionRegressor(
        categorical_features=["colour"],
        categorical_bandwidth=0.0,
    ).fit(X.drop(columns="size"), y)
    with pytest.warns(EmptyNeighborhoodWarning):
        pred = reg.predict(Q.drop(columns="size"))
    Xc, _ = split(X)
    Qc, _ = split(Q)
    nearest = np.argmin(((Qc[:, None] - Xc[None]) ** 2).sum(axis=2), axis=1)
    assert_allclose(pred, y[nearest])
    with pytest.raises(ValueError, match="on_empty='raise'"):
        reg.set_params(on_empty="raise").fit(X.drop(columns="size"), y).predict(
            Q.drop(columns="size")
        )


def test_input_forms_agree():
    X, y, Q = mixed_data()
    params = {"bandwidth": 0.8, "categorical_bandwidth": [0.2, 0.4]}
    by_name = KernelAttentionRegressor(
        categorical_features=["colour", "size"], **params
    ).fit(X, y)
    expected = by_name.predict(Q)
    as_category = X.astype({"colour": "category", "size": "category"})
    q_category = Q.astype({"colour": "category", "size": "category"})
    for features, data, queries in [
        ([1, 3], X, Q),
        ([False, True, False, True], X, Q),
        ("from_dtype", as_category, q_category),
        ("from_dtype", X.astype({"size": str}), Q.astype({"size": str})),
        ([1, 3], X.to_numpy(dtype=object), Q.to_numpy(dtype=object)),
        ([1, 3], X.to_numpy(dtype=object).tolist(), Q.to_numpy(dtype=object).tolist()),
    ]:
        reg = KernelAttentionRegressor(categorical_features=features, **params)
        reg.fit(data, y)
        assert_array_equal(reg.is_categorical_, [False, True, False, True])
        assert_allclose(reg.predict(queries), expected, rtol=1e-12)
    assert [list(c) for c in by_name.categories_] == [
        ["blue", "green", "red"],
        [3, 7, 11, 13],
    ]


def test_sample_weight_two_is_a_duplicated_row():
    X, y, Q = mixed_data(n=30)
    sw = np.ones(len(y))
    sw[[2, 5]] = 2
    doubled = pd.concat([X, X.iloc[[2, 5]]], ignore_index=True)
    y2 = np.concatenate([y, y[[2, 5]]])
    # (lambdas at which the safeguard keeps every slope: it counts keys by
    # their weights scale-free, so that a weight of 2 is not two rows where
    # it shrinks one)
    kw = {"bandwidth": 0.9, "categorical_features": [1, 3], "degree": 1}
    kw["categorical_bandwidth"] = 0.5
    a = KernelAttentionRegressor(**kw).fit(X, y, sample_weight=sw).predict(Q)
    b = KernelAttentionRegressor(**kw).fit(doubled, y2).predict(Q)
    assert_allclose(a, b, rtol=1e-10)


def test_working_memory_pickle_and_dtype():
    X, y, Q = mixed_data(n=300, m=200)
    reg = KernelAttentionRegressor(
        "epanechnikov", 1.2, categorical_features=[1, 3], categorical_bandwidth=0.3
    ).fit(X, y)
    expected = reg.predict(Q)
    with config_context(working_memory=1):
        assert_array_equal(reg.predict(Q), expected)
        assert_array_equal(
            reg.set_params(algorithm="kd_tree").fit(X, y).predict(Q), reg.predict(Q)
        )
    loaded = pickle.loads(pickle.dumps(reg))
    assert_array_equal(loaded.predict(Q), reg.predict(Q))
    X32 = X.astype({"u": np.float32, "v": np.float32})
    for lambdas in (0.3, [0.0, 0.5]):
        # The gaussian's float32 logits (in base 2) take the categorical
        # factor in the same base: float32 agrees with float64.
        reg = KernelAttentionRegressor(
            categorical_features=[1, 3], categorical_bandwidth=lambdas
        )
        pred32 = (
            clone(reg).fit(X32, y).predict(Q.astype({"u": np.float32, "v": np.float32}))
        )
        assert pred32.dtype == np.float32
        assert_allclose(pred32, reg.fit(X, y).predict(Q), rtol=0, atol=1e-5)


def test_classifier_matches_product_kernel_loop():
    X, y, Q = mixed_data()
    labels = np.where(y > np.median(y), "high", "low")
    Xc, codes = split(X)
    Qc, qcodes = split(Q)
    W = product_weights(Xc, codes, Qc, qcodes, "gaussian", 0.9, [0.1, 0.5])
    clf = KernelAttentionClassifier(
        bandwidth=0.9,
        categorical_features="from_dtype",
        categorical_bandwidth=[0.1, 0.5],
    ).fit(X.astype({"size": "category"}), labels)
    onehot = (labels[:, None] == clf.classes_[None]).astype(float)
    assert_allclose(
        clf.predict_proba(Q.astype({"size": "category"})),
        W @ onehot / W.sum(axis=1, keepdims=True),
        rtol=1e-10,
    )


def test_errors():
    X, y, Q = mixed_data()
    with pytest.raises(ValueError, match="categorical_features"):
        KernelAttentionRegressor().fit(X, y)  # strings, no categorical_features
    with pytest.raises(ValueError, match="categorical_features"):
        KernelAttentionRegressor(categorical_features=["size"]).fit(X, y)
    with pytest.raises(ValueError, match="missing"):
        bad = X.copy()
        bad.loc[3, "colour"] = None
        KernelAttentionRegressor(categorical_features=[1, 3]).fit(bad, y)
    with pytest.raises(ValueError, match="categorical_bandwidth"):
        KernelAttentionRegressor(
            categorical_features=[1, 3], categorical_bandwidth=[0.1, 0.2, 0.3]
        ).fit(X, y)
    with pytest.raises(ValueError, match="categorical_bandwidth"):
        KernelAttentionRegressor(
            categorical_features=[1, 3], categorical_bandwidth=[0.1, 1.5]
        ).fit(X, y)
    with pytest.raises(ValueError, match="categorical_bandwidth"):
        KernelAttentionRegressor(categorical_bandwidth=1.5).fit(X[["u", "v"]], y)
    with pytest.raises(ValueError, match=r"\[0, n_features - 1\]"):
        KernelAttentionRegressor(categorical_features=[1, 7]).fit(X, y)
    with pytest.raises(ValueError, match="not feature names"):
        KernelAttentionRegressor(categorical_features=["colour", "shape"]).fit(X, y)
    with pytest.raises(ValueError, match="string column names"):
        KernelAttentionRegressor(categorical_features=["colour"]).fit(
            X.to_numpy(dtype=object), y
        )
    with pytest.raises(ValueError, match="shape"):
        KernelAttentionRegressor(categorical_features=[True, False]).fit(X, y)
    with pytest.raises(ValueError, match="bandwidth has shape"):
        KernelAttentionRegressor(
            bandwidth=[1.0, 1.0, 1.0], categorical_features=[1, 3]
        ).fit(X, y)
    reg = KernelAttentionRegressor(categorical_features=[1, 3]).fit(X, y)
    with pytest.raises(ValueError, match="feature"):
        reg.predict(Q.iloc[:, :3])
    reg.fit(X.to_numpy(dtype=object), y)
    with pytest.raises(ValueError, match="4 features"):
        reg.predict(Q.to_numpy(dtype=object)[:, :3])


# -- selection of lambda by cross-validation ------------------------------------
def _held_out_by_refitting(X, y, sw, kernel, h, lam, degree, splits, on_empty):
    """Held-out predictions of a refit without each point / fold."""
    pred = np.empty(len(y))
    for train, test in splits:
        reg = KernelAttentionRegressor(
            kernel,
            h,
            degree=degree,
            on_empty=on_empty,
            categorical_features=[1, 3],
            categorical_bandwidth=lam,
        )
        reg.fit(
            X.iloc[train], y[train], sample_weight=None if sw is None else sw[train]
        )
        pred[test] = reg.predict(X.iloc[test])
    return pred


# Each degree with and without weights by default, over an unbounded, a
# compact and a heavy-tailed kernel; every combination with -m slow.
LEAVE_ONE_OUT_DEFAULT = {
    (False, 0, "gaussian"),
    (True, 1, "epanechnikov"),
    (True, 0, "cauchy"),
    (False, 1, "cauchy"),
}


def _leave_one_out_cases():
    cases = []
    for weighted in (False, True):
        for degree in (0, 1):
            for kernel in ("gaussian", "epanechnikov", "cauchy"):
                case = (weighted, degree, kernel)
                marks = [] if case in LEAVE_ONE_OUT_DEFAULT else [pytest.mark.slow]
                cases.append(
                    pytest.param(
                        kernel,
                        degree,
                        weighted,
                        id="-".join(map(str, case)),
                        marks=marks,
                    )
                )
    return cases


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kernel, degree, weighted", _leave_one_out_cases())
def test_leave_one_out_equals_refitting_without_each_point(kernel, degree, weighted):
    from sklearn.model_selection import LeaveOneOut

    from sklearn_kernelpool import KernelAttentionRegressorCV

    X, y, _ = mixed_data(n=40)
    sw = np.random.default_rng(5).uniform(0.5, 2, len(y)) if weighted else None
    grid, lambdas = [0.8, 2.0], [0.0, 0.3, 1.0]
    cv = KernelAttentionRegressorCV(
        kernels=kernel,
        bandwidths=grid,
        degree=degree,
        categorical_features=["colour", "size"],
        categorical_bandwidths=lambdas,
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cv.fit(X, y, sample_weight=sw)
    splits = list(LeaveOneOut().split(X))
    w = np.ones(len(y)) if sw is None else sw
    results = cv.cv_results_
    assert_allclose(results["param_categorical_bandwidth"], np.tile(lambdas, 2))
    for c, params in enumerate(results["params"]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = _held_out_by_refitting(
                X,
                y,
                sw,
                kernel,
                params["bandwidth"],
                params["categorical_bandwidth"],
                degree,
                splits,
                "nearest",
            )
        mse = np.sum(w * (pred - y) ** 2) / w.sum()
        assert_allclose(results["loo_mse"][c], mse, rtol=1e-8)
    best = results["params"][cv.best_index_]
    assert cv.categorical_bandwidth_ == best["categorical_bandwidth"]
    assert_allclose(
        cv.best_estimator_.categorical_bandwidth_, [best["categorical_bandwidth"]] * 2
    )
    assert_allclose(cv.predict(X), cv.best_estimator_.predict(X))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("partition", [True, False])
def test_kfold_equals_refitting_each_fold(degree, partition):
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold, ShuffleSplit

    from sklearn_kernelpool import KernelAttentionRegressorCV

    X, y, _ = mixed_data(n=50)
    if partition:
        splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    else:
        splits = list(ShuffleSplit(3, test_size=0.3, random_state=0).split(X))
    cv = KernelAttentionRegressorCV(
        kernels=["gaussian", "biweight"],
        bandwidths=[1.0, 3.0],
        degree=degree,
        cv=splits,
        categorical_features=[1, 3],
        categorical_bandwidths=[0.1, 0.5],
    ).fit(X, y)
    for c, params in enumerate(cv.cv_results_["params"]):
        for s, (train, test) in enumerate(splits):
            pred = _held_out_by_refitting(
                X,
                y,
                None,
                params["kernel"],
                params["bandwidth"],
                params["categorical_bandwidth"],
                degree,
                [(train, test)],
                "nearest",
            )
            assert_allclose(
                cv.cv_results_[f"split{s}_test_score"][c],
                r2_score(y[test], pred[test]),
                rtol=1e-8,
            )


def test_cv_only_categorical_and_errors():
    from sklearn_kernelpool import KernelAttentionRegressorCV

    X, y, Q = mixed_data(n=40)
    cv = KernelAttentionRegressorCV(
        categorical_features=[0, 1], categorical_bandwidths=[0.0, 0.5, 1.0], degree=1
    ).fit(X[["colour", "size"]], y)
    assert cv.best_estimator_.predict(Q[["colour", "size"]]).shape == (len(Q),)
    assert_allclose(
        cv.predict(Q[["colour", "size"]]),
        cv.best_estimator_.predict(Q[["colour", "size"]]),
    )
    with pytest.raises(ValueError, match="categorical_bandwidths"):
        KernelAttentionRegressorCV(
            categorical_features=[1, 3], categorical_bandwidths=[0.5, 2.0]
        ).fit(X, y)
    with pytest.raises(ValueError, match="per_feature"):
        KernelAttentionRegressorCV(
            categorical_features=[1, 3], per_feature=True, cv=3
        ).fit(X, y)


def test_altered_categorical_engine_arguments_are_refused():
    from sklearn_kernelpool._engine._pooling import ON_EMPTY
    from sklearn_kernelpool._engine._saved_state import check_pool_arguments

    X, y, _ = mixed_data()
    reg = KernelAttentionRegressor(
        bandwidth=[1.0, 2.0], categorical_features=[1, 3], categorical_bandwidth=0.3
    ).fit(X, y)
    arguments = reg._pool._arguments
    check_pool_arguments(dict(arguments), ON_EMPTY)
    negative, fraction = arguments["keys"].copy(), arguments["keys"].copy()
    negative[0, -1] = -1.0
    fraction[0, -2] = 0.5
    for change in [
        {"categorical_bandwidth": np.array([0.3, 1.5])},
        {"categorical_bandwidth": np.array([0.3, np.nan])},
        {"categorical_bandwidth": np.full(5, 0.3)},
        {"keys": negative},
        {"keys": fraction},
        {"bandwidth": np.ones(4)},
    ]:
        with pytest.raises(ValueError, match="Cannot load"):
            check_pool_arguments({**arguments, **change}, ON_EMPTY)
    # An engine saved without categorical features loads as before.
    plain = KernelAttentionRegressor().fit(X[["u", "v"]], y)
    saved = dict(plain._pool._arguments)
    del saved["categorical_bandwidth"]
    check_pool_arguments(saved, ON_EMPTY)


def test_array_api_path_refuses_categorical_features():
    from _array_api import strict_namespace

    xp = strict_namespace()
    X = np.arange(12.0).reshape(6, 2)
    y = np.arange(6.0)
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="categorical_features"):
            KernelAttentionRegressor(categorical_features=[1]).fit(
                xp.asarray(X), xp.asarray(y)
            )


@pytest.mark.parametrize("kernel", ["gaussian", "cauchy", "exponential"])
def test_width_and_lambda_gradient_matches_finite_differences(kernel):
    from scipy.optimize import approx_fprime

    from sklearn_kernelpool._widths._categorical import loo_objective
    from sklearn_kernelpool.kernels import KERNELS

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    codes = rng.integers(0, 3, (30, 2))
    Y = X[:, :1] + codes[:, :1] + rng.normal(scale=0.1, size=(30, 1))
    w = rng.uniform(0.5, 2, 30)
    theta = np.log([0.7, 1.3, 0.2, 0.6])
    value, grad = loo_objective(theta, X, codes, Y, w, KERNELS[kernel])
    numeric = approx_fprime(
        theta, lambda t: loo_objective(t, X, codes, Y, w, KERNELS[kernel])[0], 1e-7
    )
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


@pytest.mark.filterwarnings("ignore")
def test_per_feature_learns_a_lambda_per_categorical_feature():
    from sklearn_kernelpool import KernelAttentionRegressorCV

    rng = np.random.default_rng(2)
    n = 80
    x = rng.uniform(-2, 2, n)
    informative = rng.integers(0, 3, n)
    noise = rng.integers(0, 3, n)
    y = np.sin(x) + 1.5 * informative + rng.normal(scale=0.2, size=n)
    X = np.column_stack([x, informative, noise])
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.3, 1.0],
        categorical_features=[1, 2],
        categorical_bandwidths=[0.1, 0.5],
        per_feature=True,
    ).fit(X, y)
    lam = cv.categorical_bandwidth_
    assert lam.shape == (2,) and lam[0] < 0.05 < 0.5 < lam[1]
    assert cv.best_score_ > np.max(cv.cv_results_["mean_test_score"])
    # The learned score is the leave-one-out error of refitting the selected
    # model (of the selected degree) without each point.
    params = cv.best_estimator_.get_params()
    assert_allclose(params["bandwidth"], cv.bandwidth_)
    assert_allclose(params["categorical_bandwidth"], lam)
    pred = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        reg = KernelAttentionRegressor(**params).fit(X[keep], y[keep])
        pred[i] = reg.predict(X[i : i + 1])[0]
    assert_allclose(cv.best_score_, -np.mean((pred - y) ** 2), rtol=1e-8)
    assert_allclose(cv.best_estimator_.categorical_bandwidth_, lam)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # statsmodels' own
def test_equals_statsmodels_unordered_kernel():
    # statsmodels' Aitchison-Aitken kernel weighs 1 - l a key of the query's
    # category and l / (c - 1) one of another: the ratio is our lambda. (Its
    # local-linear fit also gives the category codes a slope; ours does not.)
    reg_type = "lc"
    KernelReg = pytest.importorskip("statsmodels.nonparametric.api").KernelReg
    rng = np.random.default_rng(4)
    n, c, h, l_sm = 60, 3, 0.6, 0.3
    X = np.column_stack([rng.normal(size=n), rng.integers(0, c, n)])
    y = X[:, 0] ** 2 + X[:, 1] + rng.normal(scale=0.1, size=n)
    Q = np.column_stack([rng.normal(size=7), rng.integers(0, c, 7)])
    sm = KernelReg(y, X, var_type="cu", reg_type=reg_type, bw=[h, l_sm])
    expected = sm.fit(Q)[0]
    reg = KernelAttentionRegressor(
        bandwidth=h,
        categorical_features=[1],
        categorical_bandwidth=l_sm / ((c - 1) * (1 - l_sm)),
    ).fit(X, y)
    assert_allclose(reg.predict(Q), expected, rtol=1e-8)


def test_callable_kernel_gets_the_factor():
    X, y, Q = mixed_data()
    Xc, codes = split(X)
    Qc, qcodes = split(Q)
    W = product_weights(Xc, codes, Qc, qcodes, "cauchy", 0.5, [0.2, 0.0])
    reg = KernelAttentionRegressor(
        lambda u: 1.0 / (1.0 + u**2),
        0.5,
        categorical_features=[1, 3],
        categorical_bandwidth=[0.2, 0.0],
        on_empty="nan",
    ).fit(X, y)
    with np.errstate(invalid="ignore"):
        expected = W @ y / W.sum(axis=1)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        assert_allclose(reg.predict(Q), expected, rtol=1e-10)


def test_numpy_categories_without_pandas(monkeypatch):
    # pandas is optional: object arrays of categories work without it, and
    # their missing entries (None, NaN) are still refused.
    rng = np.random.default_rng(3)
    X = np.empty((40, 2), dtype=object)
    X[:, 0] = rng.uniform(0, 1, 40)
    X[:, 1] = rng.choice(["a", "b", "c"], 40)
    y = X[:, 0].astype(float) + (X[:, 1] == "b")
    with_pandas = KernelAttentionRegressor(categorical_features=[1]).fit(X, y)
    expected = with_pandas.predict(X[:5])
    # A process that never imported pandas.
    monkeypatch.delitem(sys.modules, "pandas")
    reg = KernelAttentionRegressor(categorical_features=[1]).fit(X, y)
    assert_array_equal(reg.predict(X[:5]), expected)
    for missing in (None, float("nan"), np.nan):
        bad = X.copy()
        bad[3, 1] = missing
        with pytest.raises(ValueError, match="Categorical feature 1 holds missing"):
            KernelAttentionRegressor(categorical_features=[1]).fit(bad, y)
    assert "pandas" not in sys.modules
