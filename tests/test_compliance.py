"""Scores, attributes, messages and persistence that scikit-learn's
conventions and the documentation promise."""

import ast
import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.optimize import approx_fprime
from sklearn.base import is_classifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import (
    InvalidParameterError,
    validate_parameter_constraints,
)

import sklearn_kernelpool
from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
    skops_trusted_types,
)
from sklearn_kernelpool.kernels import KERNELS


def _mixed_data(n=60, seed=0):
    """A slope in one continuous feature, a shift by one categorical feature
    and a categorical feature of noise."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, 2))
    informative = rng.integers(0, 3, n)
    noise = rng.integers(0, 2, n)
    y = 1.5 * x[:, 0] + np.sin(2 * x[:, 1]) + informative
    y += rng.normal(scale=0.2, size=n)
    return np.column_stack([x, informative, noise]), y


def _refitted_loo(reg, X, y):
    """Leave-one-out predictions of ``reg``'s parameters, refitting without
    each row."""
    pred = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        with warnings.catch_warnings():
            # (a held-out row far from the others gets a shrunk slope)
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            pred[i] = reg.fit(X[keep], y[keep]).predict(X[i : i + 1])[0]
    return pred


@pytest.mark.parametrize("degree", [1, "auto"])
def test_categorical_per_feature_score_is_of_the_refitted_degree(degree):
    # The widths and lambdas are learned, and scored, on the leave-one-out
    # error of the degree that is refitted.
    X, y = _mixed_data()
    cv = KernelAttentionRegressorCV(
        bandwidths=[0.3, 1.0],
        degree=degree,
        categorical_features=[2, 3],
        categorical_bandwidths=[0.1, 0.5],
        per_feature=True,
    ).fit(X, y)
    assert cv.degree_ == 1 and cv.per_feature_
    best = cv.best_estimator_
    assert best.degree == 1
    assert_allclose(best.bandwidth, cv.bandwidth_)
    pred = _refitted_loo(KernelAttentionRegressor(**best.get_params()), X, y)
    assert_allclose(cv.best_score_, -np.mean((pred - y) ** 2), rtol=1e-8)


@pytest.mark.parametrize("kernel", ["gaussian", "cauchy", "exponential"])
def test_categorical_per_feature_score_is_of_the_refitted_degree_gradient(kernel):
    from sklearn_kernelpool._widths._categorical import loo_objective

    X, y = _mixed_data(n=30, seed=1)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 2, len(y))
    Y = np.column_stack([y, rng.normal(size=len(y))])
    codes = X[:, 2:].astype(int)
    theta = np.log([0.7, 1.3, 0.2, 0.6])

    def objective(t):
        return loo_objective(t, X[:, :2], codes, Y, w, KERNELS[kernel], degree=1)

    numeric = approx_fprime(theta, lambda t: objective(t)[0], 1e-7)
    assert_allclose(objective(theta)[1], numeric, rtol=1e-5, atol=1e-8)


# -- skops: every kind of fitted model ----------------------------------------


def _persistence_data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y, rng.normal(size=(25, 2))


def _fit_kind(kind):
    """``kind`` fitted, and the queries it predicts."""
    X, y, Q = _persistence_data()
    labels = (y > 0).astype(int)
    if kind == "dask_binned":
        da = pytest.importorskip("dask.array")
        # The default scheduler: no cluster needed for a binned fit.
        model = KernelAttentionRegressor(bandwidth=0.5, algorithm="binned")
        return model.fit(da.from_array(X, chunks=100), da.from_array(y, chunks=100)), Q
    if kind == "categorical":
        codes = np.arange(len(y)) % 3
        X, Q = np.column_stack([X, codes]), np.column_stack([Q, np.arange(25) % 3])
        return KernelAttentionRegressor(
            bandwidth=0.5, categorical_features=[2], categorical_bandwidth=0.3
        ).fit(X, y + codes), Q
    estimators = {
        "regressor": KernelAttentionRegressor(bandwidth=0.5),
        "classifier": KernelAttentionClassifier(bandwidth=0.5),
        "regressor_cv": KernelAttentionRegressorCV(bandwidths=3, degree=0),
        "classifier_cv": KernelAttentionClassifierCV(bandwidths=3),
        "binned": KernelAttentionRegressor(bandwidth=0.5, algorithm="binned"),
        "adaptive": KernelAttentionRegressor(n_neighbors=10),
        "per_feature": KernelAttentionRegressor(bandwidth=[0.3, 0.6]),
        "degree1": KernelAttentionRegressor(bandwidth=0.5, degree=1),
    }
    model = estimators[kind]
    return model.fit(X, labels if is_classifier(model) else y), Q


KINDS = [
    "regressor",
    "classifier",
    "regressor_cv",
    "classifier_cv",
    "binned",
    "categorical",
    "adaptive",
    "per_feature",
    "degree1",
    "dask_binned",
]


def _predictions(model, Q):
    methods = ["predict", "predict_proba"] if is_classifier(model) else ["predict"]
    return [np.asarray(getattr(model, method)(Q)) for method in methods]


@pytest.mark.parametrize("kind", KINDS)
def test_skops_trusted_types_cover_every_fitted_kind(kind):
    sio = pytest.importorskip("skops.io")
    model, Q = _fit_kind(kind)
    expected = _predictions(model, Q)
    dumped = sio.dumps(model)
    trusted = skops_trusted_types()
    assert set(sio.get_untrusted_types(data=dumped)) <= set(trusted)
    loaded = sio.loads(dumped, trusted=trusted)
    assert type(loaded) is type(model)
    for got, want in zip(_predictions(loaded, Q), expected, strict=True):
        assert_array_equal(got, want)


# -- n_iter_ ------------------------------------------------------------------


def _n_iter_case(case, max_iter=200):
    """A CV estimator that learns per-feature widths, and its data."""
    X, y = _mixed_data(n=50, seed=3)
    if case == "regressor":
        model = KernelAttentionRegressorCV(
            bandwidths=3, per_feature=True, degree=0, max_iter=max_iter
        )
        return model, X[:, :2], y
    if case == "categorical":
        model = KernelAttentionRegressorCV(
            bandwidths=[0.3, 1.0],
            categorical_features=[2, 3],
            categorical_bandwidths=[0.1, 0.5],
            per_feature=True,
            degree=0,
            max_iter=max_iter,
        )
        return model, X, y
    model = KernelAttentionClassifierCV(bandwidths=3, per_feature=True)
    return model.set_params(max_iter=max_iter), X[:, :2], (y > 1.5).astype(int)


@pytest.mark.parametrize("case", ["regressor", "categorical", "classifier"])
def test_cv_n_iter_is_the_iterations_of_the_width_learning(case, monkeypatch):
    from sklearn_kernelpool._widths import _categorical as _categorical_widths
    from sklearn_kernelpool._widths import _learning as _widths

    runs = []

    def recorded(module):
        minimize = module.minimize

        def run(*args, **kwargs):
            runs.append(minimize(*args, **kwargs))
            return runs[-1]

        monkeypatch.setattr(module, "minimize", run)

    recorded(_widths)
    recorded(_categorical_widths)
    model, X, y = _n_iter_case(case)
    model.fit(X, y)
    # The start that gave the widths: the first of the smallest loss.
    winner = runs[int(np.argmin([run.fun for run in runs]))]
    assert 1 <= model.n_iter_ == winner.nit <= model.max_iter


@pytest.mark.parametrize("case", ["regressor", "categorical", "classifier"])
def test_cv_n_iter_is_the_iterations_of_the_width_learning_capped(case):
    model, X, y = _n_iter_case(case, max_iter=1)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        model.fit(X, y)
    assert model.n_iter_ == 1


@pytest.mark.parametrize(
    "model, columns",
    [
        (KernelAttentionRegressorCV(bandwidths=3, per_feature=False), slice(0, 2)),
        (KernelAttentionClassifierCV(bandwidths=3), slice(0, 2)),
        # Nothing learned with categorical features under "auto".
        (
            KernelAttentionRegressorCV(
                bandwidths=3, categorical_features=[2, 3], per_feature="auto"
            ),
            slice(0, 4),
        ),
    ],
    ids=["regressor", "classifier", "categorical_auto"],
)
def test_cv_n_iter_is_the_iterations_of_the_width_learning_none(model, columns):
    X, y = _mixed_data(n=50, seed=3)
    if is_classifier(model):
        y = (y > 1.5).astype(int)
    assert model.fit(X[:, columns], y).n_iter_ == 1
    assert not model.per_feature_


# -- a user kernel that changes the shape -------------------------------------


def _keeps_three_columns(u):
    return np.exp(-u)[:, :3]


@pytest.mark.parametrize(
    "call",
    ["predict", "predict_std", "attention_weights", "degree1", "cross_val_score"],
)
def test_shape_changing_kernel_message_names_queries_and_keys(call):
    from sklearn import config_context
    from sklearn.model_selection import cross_val_score

    rng = np.random.default_rng(0)
    X, Q = rng.normal(size=(3000, 2)), rng.normal(size=(172, 2))
    y = X[:, 0]
    model = KernelAttentionRegressor(
        kernel=_keeps_three_columns, bandwidth=0.5, degree=int(call == "degree1")
    )
    n_queries, n_keys = len(Q), len(X)
    with config_context(working_memory=1):  # several chunks of queries
        with pytest.raises(ValueError) as error:
            if call == "cross_val_score":
                n_queries, n_keys = 1000, 2000
                cross_val_score(model, X, y, cv=3, error_score="raise")
            else:
                model.fit(X, y)
                if call == "attention_weights":
                    model.attention_weights(Q)
                else:
                    model.predict(Q, return_std=call == "predict_std")
    message = str(error.value)
    assert f"for {n_queries} queries and {n_keys} keys" in message
    assert "it returned 3 weight(s) per query" in message
    assert "shape (" not in message


# -- docs/coming_from.rst against the API -------------------------------------

COMING_FROM = Path(__file__).resolve().parents[1] / "docs" / "coming_from.rst"
ESTIMATORS = [
    KernelAttentionRegressor,
    KernelAttentionClassifier,
    KernelAttentionRegressorCV,
    KernelAttentionClassifierCV,
]


def _table_rows(text):
    """(their cell, our cell) of every row of the page's list-tables."""
    rows = []
    for line in text.splitlines():
        if line.startswith("   * - "):
            rows.append([line[7:]])
        elif line.startswith("     - ") and rows and len(rows[-1]) == 1:
            rows[-1].append(line[7:])
        elif line.startswith("       ") and rows and rows[-1] and line.strip():
            rows[-1][-1] += " " + line.strip()
        elif not line.startswith(" "):
            rows.append(None)  # the end of a table, or text between them
    return [tuple(row) for row in rows if row is not None and len(row) == 2]


def _accepted(name, value):
    """Whether some estimator takes ``name=value``."""
    for estimator in ESTIMATORS:
        constraints = estimator._parameter_constraints.get(name)
        if constraints is None:
            continue
        try:
            validate_parameter_constraints(
                {name: constraints}, {name: value}, estimator.__name__
            )
        except InvalidParameterError:
            continue
        return True
    return False


def test_coming_from_names_our_parameters_and_options():
    rows = _table_rows(COMING_FROM.read_text(encoding="utf-8"))
    pair = r"\b(\w+) ?= ?((?:\"[^\"]*\")|[^,)\s]+)"
    # The other packages' parameters, which our column names in comparisons.
    theirs = {name for cell, _ in rows for name, _ in re.findall(pair, cell)}
    literals = re.findall(r"``(.+?)``", " ".join(cell for _, cell in rows))
    assert literals
    parameters = {
        name
        for estimator in ESTIMATORS
        for name in inspect.signature(estimator).parameters
    }
    checked = 0
    for literal in literals:
        for name, value in re.findall(r"\b(\w+)=((?:\"[^\"]*\")|[^,)\s]+)", literal):
            if name in theirs and name not in parameters:
                continue
            assert name in parameters, literal
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                continue  # a symbol of the page: h, k, r
            assert _accepted(name, value), literal
            checked += 1
        call = re.match(r"(\w+)\(", literal)
        if call is not None:
            # A method of an estimator, or a public class.
            assert any(hasattr(e, call[1]) for e in ESTIMATORS) or hasattr(
                sklearn_kernelpool, call[1]
            ), literal
    assert checked >= 20


def test_coming_from_names_our_parameters_and_options_aic():
    rows = _table_rows(COMING_FROM.read_text(encoding="utf-8"))
    aic = [ours for theirs, ours in rows if "aic" in theirs]
    assert len(aic) == 2  # statsmodels' bw="aic", np's bwmethod="cv.aic"
    for ours in aic:
        assert ':class:`KernelAttentionRegressorCV` with ``scoring="aicc"``' in ours
        assert "no counterpart" not in ours
