"""Models pickled before the package took subpackages load and predict the
same.

The pickles of earlier releases name the engines by their former modules
(``_pooling.KernelPool``, ``_binned_pool.BinnedKernelPool``,
``_grid_pool.GridPool``) and the private forms of the kernels by
``kernels``. Those bytes are written here as those releases wrote them: the
classes and functions are pickled under their former paths (the state they
save did not change), and loaded by the current package.
"""

import pickle

import numpy as np
import pandas as pd
import pytest

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    skops_trusted_types,
)
from sklearn_kernelpool._binned._grid_pool import GridPool
from sklearn_kernelpool._binned._pool import BinnedKernelPool
from sklearn_kernelpool._engine._pooling import KernelPool
from sklearn_kernelpool.kernels import _REGISTRY

#: The former modules of the kernels' private forms.
FORMER_FORMS = ["sklearn_kernelpool.kernels", "sklearn_kernelpool._kernel_forms"]
FORMER = {
    KernelPool: "sklearn_kernelpool._pooling",
    BinnedKernelPool: "sklearn_kernelpool._binned_pool",
    GridPool: "sklearn_kernelpool._grid_pool",
}


def _kernel_forms():
    for kernel in _REGISTRY:
        for function in (
            kernel.log_function,
            kernel.squared_function,
            kernel.squared_log_function,
            kernel.xp_squared_function,
        ):
            if (
                function is not None
                and function.__module__ != "sklearn_kernelpool.kernels"
            ):
                yield function


def _former_pickle(model, monkeypatch, forms):
    """The bytes an earlier release wrote for ``model``, with the kernels'
    private forms in the module ``forms``."""
    with monkeypatch.context() as patch:
        for cls, module in FORMER.items():
            patch.setattr(cls, "__module__", module)
        for function in _kernel_forms():
            patch.setattr(function, "__module__", forms)
        return pickle.dumps(model)


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] ** 2 + 0.1 * rng.normal(size=200)
    return X, y, rng.normal(size=(30, 2))


def _categorical():
    X, y, Q = _data()
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {"a": X[:, 0], "c": pd.Categorical(rng.choice(list("xyz"), 200))}
    )
    queries = pd.DataFrame(
        {
            "a": Q[:, 0],
            "c": pd.Categorical(rng.choice(list("xyz"), 30), categories=list("xyz")),
        }
    )
    model = KernelAttentionRegressor(bandwidth=0.5, categorical_features="from_dtype")
    return model.fit(frame, y), queries


def _fitted(name):
    X, y, Q = _data()
    models = {
        "brute": lambda: KernelAttentionRegressor(bandwidth=0.5),
        "degree 1": lambda: KernelAttentionRegressor(bandwidth=0.5, degree=1),
        "binned": lambda: KernelAttentionRegressor(bandwidth=0.5, algorithm="binned"),
        "adaptive": lambda: KernelAttentionRegressor(n_neighbors=20),
        "classifier": lambda: KernelAttentionClassifier(bandwidth=0.5),
        "search": lambda: KernelAttentionRegressorCV(),
    }
    if name == "categorical":
        return _categorical()
    target = y > 1 if name == "classifier" else y
    return models[name]().fit(X, target), Q


@pytest.mark.parametrize("forms", FORMER_FORMS)
@pytest.mark.parametrize(
    "name",
    ["brute", "degree 1", "binned", "adaptive", "categorical", "classifier", "search"],
)
def test_a_former_pickle_loads_and_predicts_the_same(name, forms, monkeypatch):
    model, queries = _fitted(name)
    data = _former_pickle(model, monkeypatch, forms)
    engine = FORMER[BinnedKernelPool if name == "binned" else KernelPool]
    assert engine.encode() in data  # the former path, as written before
    assert forms.encode() + b"\x94\x8c\r_log_gaussian" in data
    assert b"_engine._pooling" not in data and b"_binned._pool" not in data
    loaded = pickle.loads(data)
    np.testing.assert_array_equal(loaded.predict(queries), model.predict(queries))
    if name == "classifier":
        np.testing.assert_array_equal(
            loaded.predict_proba(queries), model.predict_proba(queries)
        )
    # And a pickle of today names today's paths.
    assert b"sklearn_kernelpool._engine._pooling" in pickle.dumps(model) or (
        b"sklearn_kernelpool._binned._pool" in pickle.dumps(model)
    )


def test_skops_trusts_the_former_and_the_current_paths():
    trusted = set(skops_trusted_types())
    for cls, module in FORMER.items():
        assert f"{module}.{cls.__qualname__}" in trusted
        assert f"{cls.__module__}.{cls.__qualname__}" in trusted
    for function in _kernel_forms():
        for module in FORMER_FORMS + [function.__module__]:
            assert f"{module}.{function.__qualname__}" in trusted
