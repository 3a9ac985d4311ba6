"""Loading altered files: every alteration refused with a clear error, no crash.

A fitted engine saves only what rebuilds it (the training data and the
parameters), which loading checks before it rebuilds the engine, trees
included, as ``fit`` built it: no index array, node bound or count of a tree
is ever read from a file. The checks run against skops files (loaded with
:func:`skops_trusted_types`, the documented recipe) and pickles; the
alterations that crashed the process when trees were saved run in a
subprocess, so that a crash fails the test instead of ending pytest.
"""

import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import sklearn_kernelpool
from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    skops_trusted_types,
)
from sklearn_kernelpool._engine._pooling import KernelPool
from sklearn_kernelpool.kernels import KERNELS

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 2))
Y = X[:, 0] - X[:, 1] ** 2
QUERIES = RNG.normal(size=(20, 2))
REFUSED = "Cannot load this fitted estimator"


def fitted(algorithm="kd_tree"):
    return KernelAttentionRegressor(
        kernel="epanechikov", bandwidth=0.5, algorithm=algorithm
    ).fit(X, Y)


def with_pool_arguments(estimator, **changes):
    """A pickle of ``estimator`` whose engine saves altered arguments."""
    pool = estimator._pool
    arguments = {**pool._arguments, **changes}
    original = KernelPool.__getstate__
    try:
        KernelPool.__getstate__ = lambda self: {"arguments": arguments}
        return pickle.dumps(estimator)
    finally:
        KernelPool.__getstate__ = original


def _nan_at_first(array):
    array = array.astype(np.float64)
    array.flat[0] = np.nan
    return array


ALTERATIONS = {
    "keys-nan": {"keys": _nan_at_first(X)},
    "keys-inf": {"keys": np.where(X > 1, np.inf, X)},
    "keys-1d": {"keys": X[:, 0]},
    "keys-int": {"keys": X.astype(np.int64)},
    "keys-object": {"keys": X.astype(object)},
    "keys-empty": {"keys": X[:0]},
    "keys-list": {"keys": X.tolist()},
    "values-rows": {"values": Y[:-1, None]},
    "values-nan": {"values": _nan_at_first(Y[:, None])},
    "values-3d": {"values": Y[:, None, None]},
    "weights-negative": {"sample_weight": -np.ones(len(X))},
    "weights-zero": {"sample_weight": np.zeros(len(X))},
    "weights-nan": {"sample_weight": _nan_at_first(np.ones(len(X)))},
    "weights-length": {"sample_weight": np.ones(len(X) + 1)},
    "bandwidth-nan": {"bandwidth": np.array(np.nan)},
    "bandwidth-negative": {"bandwidth": np.array(-0.5)},
    "bandwidth-zero": {"bandwidth": np.array([0.5, 0.0])},
    "bandwidth-shape": {"bandwidth": np.array([0.5, 0.5, 0.5])},
    "bandwidth-2d": {"bandwidth": np.full((2, 2), 0.5)},
    "kernel-name": {"kernel": "epanechikov"},
    "kernel-support": {"kernel": replace(KERNELS["epanechikov"], support=-1.0)},
    "kernel-support-nan": {"kernel": replace(KERNELS["epanechikov"], support=np.nan)},
    "kernel-swapped": {
        "kernel": replace(KERNELS["epanechikov"], function=KERNELS["boxcar"].function)
    },
    "kernel-user": {"kernel": KERNELS["gaussian"], "user_kernel": True},
    "on_empty": {"on_empty": "ignore"},
    "algorithm": {"algorithm": "octree"},
    "degree": {"degree": 7},
    "user_kernel": {"user_kernel": "yes"},
}


@pytest.mark.parametrize("name", ALTERATIONS)
def test_altered_engine_arguments_are_refused(name):
    dumped = with_pool_arguments(fitted(), **ALTERATIONS[name])
    with pytest.raises(ValueError, match=REFUSED):
        pickle.loads(dumped)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
def test_a_saved_engine_holds_no_tree_and_predicts_the_same(algorithm):
    estimator = fitted(algorithm)
    expected = estimator.predict(QUERIES)
    state = estimator._pool.__getstate__()
    assert set(state) == {"arguments"}
    assert state["arguments"]["keys"] is estimator.keys_  # saved once
    loaded = pickle.loads(pickle.dumps(estimator))
    assert_array_equal(loaded.predict(QUERIES), expected)
    assert loaded._pool.algorithm == estimator._pool.algorithm


def test_a_state_of_tree_internals_is_refused():
    # What engines used to save: their derived arrays and the tree itself.
    estimator = fitted()
    state = {k: v for k, v in vars(estimator._pool).items() if k != "_arguments"}
    pool = KernelPool.__new__(KernelPool)
    with pytest.raises(ValueError, match=REFUSED):
        pool.__setstate__(state)


# -- skops files --------------------------------------------------------------


def _skops_rewrite(dumped, edit):
    """The skops file ``dumped`` with ``edit(schema, arrays)`` applied."""
    source = zipfile.ZipFile(io.BytesIO(dumped))
    schema = json.loads(source.read("schema.json"))
    arrays = {
        name: np.load(io.BytesIO(source.read(name)), allow_pickle=False)
        for name in source.namelist()
        if name.endswith(".npy")
    }
    edit(schema, arrays)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        target.writestr("schema.json", json.dumps(schema))
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, array, allow_pickle=False)
            target.writestr(name, buffer.getvalue())
    return out.getvalue()


def _argument_nodes(schema):
    pool = schema["content"]["content"]["_pool"]
    return pool["content"]["content"]["arguments"]["content"]


def _set_array(name, change):
    def edit(schema, arrays):
        file = _argument_nodes(schema)[name]["file"]
        arrays[file] = change(arrays[file])

    return edit


def _set_json(name, content):
    def edit(schema, arrays):
        node = _argument_nodes(schema)[name]
        node["content"] = json.dumps(content)
        node["__id__"] = 1  # skops loads objects of one id once: a new one

    return edit


SKOPS_ALTERATIONS = {
    "keys-nan": _set_array("keys", _nan_at_first),
    "keys-shape": _set_array("keys", lambda a: a[:, :1]),
    "keys-rows": _set_array("keys", lambda a: a[:-5]),
    "values-rows": _set_array("values", lambda a: np.vstack([a, a])),
    "weights-negative": _set_array("sample_weight", lambda a: -a),
    "weights-nan": _set_array("sample_weight", _nan_at_first),
    "bandwidth-nan": _set_array("bandwidth", lambda a: np.full_like(a, np.nan)),
    "bandwidth-negative": _set_array("bandwidth", lambda a: -a),
    "on_empty": _set_json("on_empty", "bogus"),
    "degree": _set_json("degree", -1),
    "algorithm": _set_json("algorithm", "octree"),
}


@pytest.mark.parametrize("name", SKOPS_ALTERATIONS)
def test_altered_skops_files_are_refused(name):
    sio = pytest.importorskip("skops.io")
    dumped = sio.dumps(fitted())
    # Unaltered, the file loads under the recipe and predicts the same.
    loaded = sio.loads(dumped, trusted=skops_trusted_types())
    assert_array_equal(loaded.predict(QUERIES), fitted().predict(QUERIES))
    altered = _skops_rewrite(dumped, SKOPS_ALTERATIONS[name])
    with pytest.raises(ValueError, match=REFUSED):
        sio.loads(altered, trusted=skops_trusted_types())


def test_classifier_skops_file_with_altered_weights_is_refused():
    sio = pytest.importorskip("skops.io")
    estimator = KernelAttentionClassifier(
        kernel="biweight", bandwidth=0.5, algorithm="ball_tree"
    ).fit(X, Y > 0)
    altered = _skops_rewrite(
        sio.dumps(estimator), _set_array("sample_weight", lambda a: -a)
    )
    with pytest.raises(ValueError, match=REFUSED):
        sio.loads(altered, trusted=skops_trusted_types())


# -- the alterations that used to crash, in a subprocess -----------------------

# Each builds an engine state in the layout engines used to save, with a
# k-d tree whose internals are altered, loads it and predicts: trusting the
# tree crashed the process (out-of-range indices or node bounds) or gave
# wrong predictions (negative indices).
CRASH_SCRIPT = """
import pickle, sys
import numpy as np
from sklearn.neighbors import KDTree
from sklearn_kernelpool import KernelAttentionRegressor

rng = np.random.default_rng(0)
X = rng.normal(size=(3000, 3))
reg = KernelAttentionRegressor(
    kernel="epanechikov", bandwidth=0.5, algorithm="kd_tree"
).fit(X, X[:, 0])
tree = reg._pool.scorer.tree
state = list(tree.__getstate__())
alteration = sys.argv[1]
if alteration == "indices-out-of-range":
    state[1] = state[1] + 10**9
elif alteration == "indices-negative":
    state[1] = -state[1] - 1
elif alteration == "node-bounds":
    state[2] = state[2].copy()
    state[2]["idx_end"] = 10**9
elif alteration == "counts-negative":
    state[4] = -5
altered = KDTree.__new__(KDTree)
altered.__setstate__(tuple(state))
reg._pool.scorer.tree = altered
pool_state = {k: v for k, v in vars(reg._pool).items() if k != "_arguments"}
KernelPool = type(reg._pool)
original = KernelPool.__getstate__
KernelPool.__getstate__ = lambda self: pool_state
dumped = pickle.dumps(reg)
KernelPool.__getstate__ = original
try:
    pickle.loads(dumped).predict(rng.normal(size=(500, 3)))
except ValueError as exc:
    print("refused:", exc)
else:
    print("loaded")
"""


@pytest.mark.parametrize(
    "alteration",
    ["indices-out-of-range", "indices-negative", "node-bounds", "counts-negative"],
)
@pytest.mark.slow
def test_altered_tree_internals_are_refused_without_a_crash(alteration):
    # The script imports the package under test, wherever it is.
    root = str(Path(sklearn_kernelpool.__file__).parents[1])
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CRASH_SCRIPT), alteration],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("refused:"), result.stdout + result.stderr
    assert REFUSED in result.stdout


def test_estimator_attributes_that_disagree_with_the_engine_are_refused():
    classifier = KernelAttentionClassifier(bandwidth=0.5).fit(X, Y > 0)
    classifier.classes_ = np.array([False])  # two classes in the engine
    with pytest.raises(ValueError, match="classes_"):
        pickle.loads(pickle.dumps(classifier))
    regressor = fitted()
    regressor.n_features_in_ = 3
    with pytest.raises(ValueError, match="n_features_in_"):
        pickle.loads(pickle.dumps(regressor))


def test_a_sample_weight_attribute_that_is_not_the_engines_is_refused():
    # The standard errors read sample_weight_, the predictions the engine's
    # weights: a file whose two disagree would give intervals of other data.
    weights = np.linspace(0.5, 2.0, len(X))
    weighted = KernelAttentionRegressor(bandwidth=0.5).fit(X, Y, sample_weight=weights)
    loaded = pickle.loads(pickle.dumps(weighted))
    assert_array_equal(loaded.sample_weight_, weights)
    for tampered_weights in (None, weights[::-1].copy(), weights[:-1].copy()):
        tampered = pickle.loads(pickle.dumps(weighted))
        tampered.sample_weight_ = tampered_weights
        with pytest.raises(ValueError, match="sample_weight_"):
            pickle.loads(pickle.dumps(tampered))
    unweighted = fitted()
    unweighted.sample_weight_ = np.full(len(X), 2.0)
    with pytest.raises(ValueError, match="sample_weight_"):
        pickle.loads(pickle.dumps(unweighted))
    # Unit weights given explicitly are the fit without weights.
    ones = KernelAttentionRegressor(bandwidth=0.5).fit(
        X, Y, sample_weight=np.ones(len(X))
    )
    ones.sample_weight_ = None
    assert_array_equal(pickle.loads(pickle.dumps(ones)).predict(X), ones.predict(X))


def _partially_linear():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + np.sin(X[:, 1]) + 0.1 * rng.normal(size=60)
    return KernelAttentionRegressor(bandwidth=0.8, linear_features=[0]).fit(X, y)


@pytest.mark.parametrize(
    "alteration, refused",
    [
        (lambda m: setattr(m._linear_design, "mask", np.array([1, 0, 0])), "mask"),
        (lambda m: setattr(m._linear_design, "mask", np.ones(3, bool)), "mask"),
        (lambda m: setattr(m, "coef_", np.zeros(2)), "coef_"),
        (lambda m: setattr(m, "coef_se_", np.zeros(3)), "coef_se_"),
        (  # a kernel part of one feature, where two are not linear
            lambda m: setattr(
                m,
                "kernel_regressor_",
                KernelAttentionRegressor(bandwidth=0.5).fit(X[:, :1], Y),
            ),
            "kernel_regressor_",
        ),
    ],
)
def test_altered_parts_of_a_partially_linear_fit_are_refused(alteration, refused):
    model = _partially_linear()
    Q = np.random.default_rng(8).normal(size=(5, 3))
    assert_array_equal(pickle.loads(pickle.dumps(model)).predict(Q), model.predict(Q))
    alteration(model)
    with pytest.raises(ValueError, match=refused):
        pickle.loads(pickle.dumps(model))


# -- a search, and its large-table selection --------------------------------------
def _large_fit(classifier=False):
    rng = np.random.default_rng(4)
    X_large = rng.uniform(-2, 2, size=(900, 2))
    y_large = np.sin(2 * X_large[:, 0]) + 0.2 * rng.normal(size=900)
    if classifier:
        return KernelAttentionClassifierCV(subsample=500, random_state=0).fit(
            X_large, y_large > 0
        )
    return KernelAttentionRegressorCV(subsample=500, random_state=0).fit(
        X_large, y_large
    )


def _other_row(search):
    """The index of a row of cv_results_ whose parameters are not the best's."""
    rows = search.cv_results_["params"]
    return next(i for i, row in enumerate(rows) if row != search.best_params_)


SEARCH_ALTERATIONS = {
    "best_params": (
        lambda s: setattr(s, "best_params_", s.cv_results_["params"][_other_row(s)]),
        "best_params_",
    ),
    "best_index": (lambda s: setattr(s, "best_index_", _other_row(s)), "best_params_"),
    "best_index-range": (lambda s: setattr(s, "best_index_", 10**6), "best_index_"),
    "best_estimator-kernel": (
        lambda s: setattr(s.best_estimator_, "kernel", "boxcar"),
        "best_estimator_",
    ),
    "subsample": (lambda s: setattr(s, "subsample_", -500), "subsample_"),
    "n_held_out": (lambda s: setattr(s, "n_held_out_", 2.5), "n_held_out_"),
}


@pytest.fixture(scope="module")
def large_fits():
    return {False: _large_fit(), True: _large_fit(classifier=True)}


@pytest.mark.parametrize("classifier", [False, True])
@pytest.mark.parametrize("name", SEARCH_ALTERATIONS)
def test_a_search_that_disagrees_with_itself_is_refused(large_fits, name, classifier):
    search = large_fits[classifier]
    assert search.subsample_ == 500 and search.n_held_out_ == 400
    query = X[:5]
    method = "predict_proba" if classifier else "predict"
    loaded = pickle.loads(pickle.dumps(search))
    assert_array_equal(getattr(loaded, method)(query), getattr(search, method)(query))
    alter, refused = SEARCH_ALTERATIONS[name]
    alter(loaded)
    with pytest.raises(ValueError, match=f"{REFUSED}: {refused}"):
        pickle.loads(pickle.dumps(loaded))
    sio = pytest.importorskip("skops.io")
    with pytest.raises(ValueError, match=f"{REFUSED}: {refused}"):
        sio.loads(sio.dumps(loaded), trusted=skops_trusted_types())


@pytest.mark.parametrize("name", ["keys-nan", "weights-negative", "degree"])
def test_the_model_of_a_large_fit_with_altered_engine_arguments_is_refused(
    large_fits, name
):
    search = large_fits[False]
    best = search.best_estimator_
    changes = ALTERATIONS[name]
    if name == "keys-nan":
        changes = {"keys": _nan_at_first(best._pool._arguments["keys"])}
    if name == "weights-negative":
        changes = {"sample_weight": -np.ones(len(best._pool._arguments["keys"]))}
    pool = best._pool
    arguments = {**pool._arguments, **changes}
    original = KernelPool.__getstate__
    try:
        KernelPool.__getstate__ = lambda self: {"arguments": arguments}
        dumped = pickle.dumps(search)
    finally:
        KernelPool.__getstate__ = original
    with pytest.raises(ValueError, match=REFUSED):
        pickle.loads(dumped)
