"""Write the pickles of an earlier release that ``tests/test_former_releases.py``
loads.

Run with an earlier release's package first on the path, from a checkout of
that release::

    git worktree add --detach /tmp/former <commit>
    PYTHONPATH=/tmp/former python tests/data/former/make_former_pickles.py <name>

Each file holds the fitted models of that release, their data, what that
release predicted for them and the releases of NumPy, SciPy and
scikit-learn it ran on: the current package must load them and predict the
same, bit for bit on those releases.
"""

import inspect
import pickle
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = X[:, 0] ** 2 + np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=80)
    return X, y, 0.7 * rng.normal(size=(15, 2))


def _frames():
    X, y, Q = _data()
    rng = np.random.default_rng(1)
    levels = list("xyz")
    frame = pd.DataFrame(
        {"a": X[:, 0], "c": pd.Categorical(rng.choice(levels, 80), categories=levels)}
    )
    queries = pd.DataFrame(
        {"a": Q[:, 0], "c": pd.Categorical(rng.choice(levels, 15), categories=levels)}
    )
    return frame, y, queries


def _models(package):
    regressor = package.KernelAttentionRegressor
    models = {
        "brute": (regressor(bandwidth=0.5), "numeric"),
        "degree 1 tree": (
            regressor(
                bandwidth=1.5, kernel="epanechikov", degree=1, algorithm="kd_tree"
            ),
            "numeric",
        ),
        "adaptive": (regressor(n_neighbors=20), "numeric"),
        "binned": (regressor(bandwidth=0.5, algorithm="binned"), "numeric"),
        "categorical": (
            regressor(bandwidth=0.5, categorical_features="from_dtype"),
            "frame",
        ),
        "classifier": (package.KernelAttentionClassifier(bandwidth=0.5), "labels"),
        "search": (package.KernelAttentionRegressorCV(), "numeric"),
        "categorical search": (
            package.KernelAttentionRegressorCV(categorical_features="from_dtype"),
            "frame",
        ),
        "classifier search": (package.KernelAttentionClassifierCV(), "labels"),
    }
    if "linear_features" in inspect.signature(regressor).parameters:
        models["partially linear"] = (
            regressor(bandwidth=0.5, linear_features=[1]),
            "numeric",
        )
    return models


def _columns(frame):
    """A frame as a dict of NumPy arrays, which loads whatever the release of
    pandas (categorical columns as object arrays of their levels)."""
    return {name: np.asarray(column, dtype=None) for name, column in frame.items()}


def _fit(model, data):
    X, y, Q = _data()
    if data == "frame":
        X, y, Q = _frames()
    elif data == "labels":
        y = np.where(y > 1, "high", "low")
    model.fit(X, y)
    record = {"model": model, "predict": model.predict(Q), "y": y}
    if hasattr(model, "predict_proba"):
        record["predict_proba"] = model.predict_proba(Q)
    if data == "frame":
        X, Q = _columns(X), _columns(Q)
    return {**record, "X": X, "queries": Q}


def main(name):
    import scipy
    import sklearn

    import sklearn_kernelpool as package

    records = {key: _fit(*value) for key, value in _models(package).items()}
    versions = {module.__name__: module.__version__ for module in (np, scipy, sklearn)}
    path = Path(__file__).with_name(f"{name}.pkl")
    path.write_bytes(
        pickle.dumps({"versions": versions, "models": records}, protocol=4)
    )
    print(path, versions, sorted(records), package.__file__)


if __name__ == "__main__":
    main(sys.argv[1])
