"""Saving and loading fitted estimators: pickle, joblib and skops."""

import copy
import functools
import io
import os
import pickle
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.ensemble import BaggingRegressor
from sklearn.model_selection import cross_validate
from sklearn.multioutput import MultiOutputRegressor

import sklearn_kernelpool
from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionQuantileRegressor,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    skops_trusted_types,
)
from sklearn_kernelpool.kernels import _REGISTRY, KERNELS

try:  # joblib >= 1.5 depends on cloudpickle; earlier releases vendor it
    import cloudpickle
except ImportError:  # pragma: no cover
    from joblib.externals import cloudpickle

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2500, 2))
Y = X[:, 0] - X[:, 1] ** 2 + 0.1 * RNG.normal(size=2500)
QUERIES = RNG.normal(size=(40, 2))


def module_kernel(x):
    """A user kernel pickle can save: a top-level function of a module."""
    return 1.0 / (1.0 + np.asarray(x) ** 4)


def _configurations():
    """(id, estimator, n_features, dtype) over every estimator and path."""
    yield "brute", KernelAttentionRegressor(algorithm="brute"), 2, np.float64
    yield "brute32", KernelAttentionRegressor(algorithm="brute"), 2, np.float32
    yield (
        "kd_tree",
        KernelAttentionRegressor(
            kernel="epanechnikov", bandwidth=0.3, algorithm="kd_tree"
        ),
        2,
        None,
    )
    yield (
        "ball_tree",
        KernelAttentionRegressor(
            kernel="biweight", bandwidth=0.3, algorithm="ball_tree"
        ),
        2,
        None,
    )
    yield (
        "sorted_keys",
        KernelAttentionRegressor(kernel="boxcar", bandwidth=0.3, algorithm="kd_tree"),
        1,
        None,
    )
    yield (
        "tree32",
        KernelAttentionRegressor(kernel="tricube", bandwidth=0.4, algorithm="kd_tree"),
        2,
        np.float32,
    )
    yield "degree1", KernelAttentionRegressor(bandwidth=0.5, degree=1), 2, None
    yield (
        "degree1_tree",
        KernelAttentionRegressor(
            kernel="cosine", bandwidth=0.5, algorithm="ball_tree", degree=1
        ),
        2,
        None,
    )
    yield "degree2", KernelAttentionRegressor(bandwidth=0.8, degree=2), 2, None
    yield (
        "degree2_tree",
        KernelAttentionRegressor(
            kernel="tricube", bandwidth=0.9, algorithm="kd_tree", degree=2
        ),
        2,
        None,
    )
    yield "per_feature", KernelAttentionRegressor(bandwidth=[0.3, 0.6]), 2, None
    yield (
        "binned",
        KernelAttentionRegressor(
            bandwidth=[0.3, 0.6], algorithm="binned", degree=1, n_bins=[400, 300]
        ),
        2,
        None,
    )
    yield (
        "binned32",
        KernelAttentionClassifier(kernel="biweight", bandwidth=0.5, algorithm="binned"),
        1,
        np.float32,
    )
    yield (
        "user_kernel",
        KernelAttentionRegressor(kernel=module_kernel, bandwidth=0.5),
        2,
        None,
    )
    yield "classifier", KernelAttentionClassifier(bandwidth=0.5), 2, None
    yield (
        "classifier_tree",
        KernelAttentionClassifier(
            kernel="epanechikov", bandwidth=0.5, algorithm="kd_tree"
        ),
        2,
        None,
    )
    yield "cv", KernelAttentionRegressorCV(bandwidths=4, cv=3), 2, None
    yield "cv_degree1", KernelAttentionRegressorCV(bandwidths=3, degree=1), 2, None
    yield "cv_degree2", KernelAttentionRegressorCV(bandwidths=3, degree=2), 2, None
    # The large-table selection: a subsample's search, then one split.
    yield (
        "cv_large",
        KernelAttentionRegressorCV(bandwidths=4, subsample=600, random_state=0),
        2,
        None,
    )
    yield "classifier_cv", KernelAttentionClassifierCV(bandwidths=3), 2, None
    yield (
        "cv_per_feature",
        # Degree 0: learning degree-1 widths on these rows takes ~10 s a fit.
        KernelAttentionRegressorCV(bandwidths=3, per_feature=True, degree=0),
        2,
        None,
    )
    yield (
        "partially_linear",
        KernelAttentionRegressor(bandwidth=0.5, degree=1, linear_features=[1]),
        2,
        None,
    )
    yield (
        "cv_partially_linear",
        KernelAttentionRegressorCV(bandwidths=3, n_neighbors=None, linear_features=[1]),
        2,
        None,
    )
    yield (
        "cv_projection",
        # A forced map of rank 1: the search holds a KernelAttentionProjection.
        KernelAttentionRegressorCV(
            bandwidths=3, n_neighbors=None, degree=0, projection=1, max_iter=20
        ),
        2,
        None,
    )
    yield (
        "quantile",
        KernelAttentionQuantileRegressor(kernel="epanechnikov", quantile=0.9),
        2,
        None,
    )


CONFIGURATIONS = list(_configurations())
IDS = [config[0] for config in CONFIGURATIONS]


def _fitted(estimator, n_features, dtype):
    X_fit = X[:, :n_features]
    if dtype is not None:
        X_fit = X_fit.astype(dtype)
    y = (Y > 0).astype(int) if is_classifier(estimator) else Y
    estimator.fit(X_fit, y)
    return estimator


@functools.cache
def _fitted_with_outputs(name):
    """A configuration fitted once, and its :func:`_outputs`, shared by the
    round trips below: none of them changes the estimator it saves."""
    _, estimator, n_features, dtype = CONFIGURATIONS[IDS.index(name)]
    fitted = _fitted(clone(estimator), n_features, dtype)
    return fitted, _outputs(fitted, n_features)


def _outputs(estimator, n_features):
    """Everything the estimator predicts on the queries, with two threads.

    Computing the spread and running threads fills the engine's caches, so
    the round trips below also save what prediction leaves behind.
    """
    Q = QUERIES[:, :n_features]
    if isinstance(estimator, KernelAttentionClassifier):
        return [estimator.predict(Q), estimator.predict_proba(Q)]
    if isinstance(estimator, KernelAttentionQuantileRegressor):
        # The order of the values, cached on first use, is not saved.
        return [estimator.predict(Q), estimator.predict_quantiles(Q)]
    if isinstance(estimator, KernelAttentionRegressor):
        estimator.set_params(n_jobs=2)
        return [*estimator.predict(Q, return_std=True), estimator.predict(Q)]
    return [estimator.predict(Q)]


def _assert_same_outputs(loaded, outputs, n_features):
    for got, expected in zip(_outputs(loaded, n_features), outputs, strict=True):
        assert_array_equal(got, expected)


def _pickle(estimator):
    return pickle.loads(pickle.dumps(estimator))


def _joblib(estimator):
    buffer = io.BytesIO()
    joblib.dump(estimator, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


@pytest.mark.parametrize("round_trip", [_pickle, _joblib], ids=["pickle", "joblib"])
@pytest.mark.parametrize("name, estimator, n_features, dtype", CONFIGURATIONS, ids=IDS)
def test_round_trip_predicts_the_same(round_trip, name, estimator, n_features, dtype):
    estimator = clone(estimator)
    unfitted = round_trip(estimator)
    assert unfitted.get_params() == estimator.get_params()
    assert not hasattr(unfitted, "n_features_in_")

    fitted, outputs = _fitted_with_outputs(name)
    loaded = round_trip(fitted)
    assert type(loaded) is type(fitted)
    _assert_same_outputs(loaded, outputs, n_features)
    # Loaded estimators save again, and load to the same predictions.
    _assert_same_outputs(round_trip(loaded), outputs, n_features)


def test_pickle_after_predictions_is_unchanged():
    # Nothing prediction leaves behind (caches, tree counters) changes what
    # is saved once the caches are filled.
    estimator = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.3, algorithm="kd_tree"
    ).fit(X, Y)
    estimator.predict(QUERIES, return_std=True)
    first = pickle.dumps(estimator)
    estimator.predict(QUERIES, return_std=True)
    estimator.set_params(n_jobs=2).predict(QUERIES)
    assert pickle.dumps(estimator.set_params(n_jobs=None)) == first


@pytest.mark.parametrize(
    "estimator",
    [KernelAttentionRegressor(bandwidth=0.5), KernelAttentionClassifier(bandwidth=0.5)],
)
def test_lambda_kernel_fitted_pickle_error_names_the_kernel(estimator):
    kernel = lambda x: np.exp(-np.asarray(x))  # noqa: E731
    estimator.set_params(kernel=kernel)
    y = (Y > 0).astype(int) if is_classifier(estimator) else Y
    estimator.fit(X, y)
    with pytest.raises(pickle.PicklingError) as excinfo:
        pickle.dumps(estimator)
    message = str(excinfo.value)
    assert repr(kernel) in message
    assert "<lambda>" in message
    assert type(estimator).__name__ in message
    assert "top level of a module" in message
    with pytest.raises(pickle.PicklingError, match="top level of a module"):
        joblib.dump(estimator, io.BytesIO())


@pytest.mark.parametrize(
    "estimator",
    [KernelAttentionRegressor(bandwidth=0.5), KernelAttentionClassifier(bandwidth=0.5)],
)
def test_lambda_kernel_deepcopy_and_unfitted_pickle_work(estimator):
    # Only pickling a fitted estimator needs the kernel saved by reference:
    # a deep copy keeps the function, and cloudpickle-based tools ship
    # unfitted estimators by value.
    kernel = lambda x: np.exp(-np.asarray(x))  # noqa: E731
    estimator = clone(estimator).set_params(kernel=kernel)
    with pytest.raises((pickle.PicklingError, AttributeError), match="lambda"):
        pickle.dumps(estimator)  # the pickler's own error
    shipped = cloudpickle.loads(cloudpickle.dumps(estimator))
    assert shipped.get_params()["kernel"](0.0) == 1.0
    y = (Y > 0).astype(int) if is_classifier(estimator) else Y
    estimator.fit(X, y)
    copied = copy.deepcopy(estimator)
    assert copied.kernel is kernel
    assert copied._pool is not estimator._pool
    assert_array_equal(copied.predict(QUERIES), estimator.predict(QUERIES))


@pytest.mark.parametrize("name, estimator, n_features, dtype", CONFIGURATIONS, ids=IDS)
def test_deepcopy_predicts_the_same(name, estimator, n_features, dtype):
    fitted, outputs = _fitted_with_outputs(name)
    copied = copy.deepcopy(fitted)
    _assert_same_outputs(copied, outputs, n_features)
    _assert_same_outputs(_pickle(copied), outputs, n_features)


def test_nested_function_kernel_fitted_pickle_error():
    def local_kernel(x):
        return np.exp(-np.asarray(x))

    estimator = KernelAttentionRegressor(kernel=local_kernel, bandwidth=0.5).fit(X, Y)
    with pytest.raises(pickle.PicklingError, match="local_kernel"):
        pickle.dumps(estimator)


@pytest.fixture(params=["by_reference", "by_value"])
def shipped_kernel(request):
    """``module_kernel``, shipped to workers by reference or by value.

    cloudpickle ships a function of a script's ``__main__`` by value, and in
    the worker it is no longer found by reference: registering this module
    does the same to ``module_kernel``.
    """
    if request.param == "by_value":
        module = sys.modules[__name__]
        cloudpickle.register_pickle_by_value(module)
        request.addfinalizer(lambda: cloudpickle.unregister_pickle_by_value(module))
    return module_kernel


@pytest.mark.slow
def test_loky_ships_fitted_estimators_with_a_module_kernel(shipped_kernel):
    # Workers fit and send the fitted estimators back through cloudpickle.
    Y2 = np.column_stack([Y, X[:, 0]])
    reg = KernelAttentionRegressor(kernel=shipped_kernel, bandwidth=0.5)
    expected = clone(reg).fit(X, Y).predict(QUERIES)

    results = cross_validate(reg, X, Y, cv=2, return_estimator=True, n_jobs=2)
    for estimator in results["estimator"]:
        assert estimator.predict(QUERIES).shape == (len(QUERIES),)
    multi = MultiOutputRegressor(reg, n_jobs=2).fit(X, Y2)
    assert_array_equal(multi.predict(QUERIES)[:, 0], expected)
    bagging = BaggingRegressor(reg, n_estimators=2, n_jobs=2, random_state=0)
    assert bagging.fit(X, Y).predict(QUERIES).shape == (len(QUERIES),)
    # And round trips in this process.
    fitted = clone(reg).fit(X, Y)
    for dumps, loads in [
        (pickle.dumps, pickle.loads),
        (cloudpickle.dumps, cloudpickle.loads),
    ]:
        assert_array_equal(loads(dumps(fitted)).predict(QUERIES), expected)
    shipped = multi.estimators_[0]
    assert_array_equal(
        cloudpickle.loads(cloudpickle.dumps(shipped)).predict(QUERIES), expected
    )


# -- skops --------------------------------------------------------------------


def _skops_configurations():
    """Every configuration above, and one fit per registered kernel."""
    yield from CONFIGURATIONS
    for kernel in _REGISTRY:
        bandwidth = 1.0 if kernel.is_compact else 0.5
        yield (
            kernel.name,
            KernelAttentionRegressor(kernel=kernel.name, bandwidth=bandwidth),
            2,
            None,
        )


def test_skops_round_trip_with_the_trusted_types():
    sio = pytest.importorskip("skops.io")
    trusted = skops_trusted_types()
    untrusted_seen = set()
    for name, estimator, n_features, dtype in _skops_configurations():
        if name in IDS:
            fitted, outputs = _fitted_with_outputs(name)
        else:
            fitted = _fitted(clone(estimator), n_features, dtype)
            outputs = _outputs(fitted, n_features)
        dumped = sio.dumps(fitted)
        untrusted = set(sio.get_untrusted_types(data=dumped))
        user_types = {f"{__name__}.module_kernel"} if name == "user_kernel" else set()
        # The helper's list covers every type skops does not trust itself.
        assert untrusted - user_types <= set(trusted), name
        untrusted_seen |= untrusted - user_types
        loaded = sio.loads(dumped, trusted=[*trusted, *user_types])
        _assert_same_outputs(loaded, outputs, n_features)
        # Without the list, skops refuses to load.
        with pytest.raises(sio.exceptions.UntrustedTypesFoundException):
            sio.loads(dumped)
    # ...and names nothing that no fitted estimator holds: the types of a
    # model fitted on dask arrays are those of tests/test_compliance.py, and
    # the paths of earlier releases those of tests/test_former_paths.py.
    dask_binned = {"numpy.dtype", "sklearn_kernelpool._binned._grid_pool.GridPool"}
    former = {
        name
        for name in trusted
        if name.startswith(
            (
                "sklearn_kernelpool._pooling.",
                "sklearn_kernelpool._binned_pool.",
                "sklearn_kernelpool._grid_pool.",
                "sklearn_kernelpool.kernels._",
                "sklearn_kernelpool._kernel_forms.",
            )
        )
    }
    assert former and not former & untrusted_seen
    assert untrusted_seen | dask_binned == set(trusted) - former


def test_skops_trusted_types_is_a_sorted_list_of_names():
    trusted = skops_trusted_types()
    assert isinstance(trusted, list)
    assert trusted == sorted(set(trusted))
    assert all(isinstance(name, str) for name in trusted)
    for kernel in KERNELS.values():
        assert f"sklearn_kernelpool.kernels.{kernel.function.__name__}" in trusted
    for name in sklearn_kernelpool.__all__:
        public = getattr(sklearn_kernelpool, name)
        if isinstance(public, type) and issubclass(public, BaseEstimator):
            assert f"{public.__module__}.{public.__qualname__}" in trusted


MAIN_KERNEL_SCRIPT = """
import numpy as np
from sklearn.ensemble import BaggingRegressor
from sklearn.model_selection import cross_validate
from sklearn.multioutput import MultiOutputRegressor
from sklearn_kernelpool import KernelAttentionRegressor


def kernel(x):
    return 1.0 / (1.0 + np.asarray(x) ** 4)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    Y = np.column_stack([X.sum(axis=1), X[:, 0]])
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.5)
    cross_validate(reg, X, Y[:, 0], cv=2, return_estimator=True, n_jobs=2)
    MultiOutputRegressor(reg, n_jobs=2).fit(X, Y).predict(X)
    BaggingRegressor(reg, n_estimators=2, n_jobs=2).fit(X, Y[:, 0]).predict(X)
    print("shipped")
"""


@pytest.mark.slow
def test_a_script_kernel_ships_to_loky_workers_and_back(tmp_path):
    # The kernel of a script lives in its __main__, which cloudpickle ships
    # by value: in the workers it is not found by reference.
    script = tmp_path / "script.py"
    script.write_text(MAIN_KERNEL_SCRIPT)
    # The script imports the package under test, wherever it is.
    root = str(Path(sklearn_kernelpool.__file__).parents[1])
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "shipped"
