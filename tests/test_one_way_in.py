"""Every kind of input is validated alike: NumPy arrays, DataFrames (with
categorical columns too), SciPy sparse matrices, array API arrays and dask
arrays all go through the same checks of ``fit`` and ``predict``
(:mod:`sklearn_kernelpool._utils._input`, and the checks of the dask and
array API paths written in the same words)."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sklearn
from _array_api import strict_namespace

from sklearn_kernelpool import KernelAttentionRegressor


def _kinds():
    kinds = {
        "numpy": (lambda A: A, {}),
        "dataframe": (lambda A: pd.DataFrame(A, columns=["a", "b"]), {}),
        "categorical": (
            lambda A: pd.DataFrame(
                {
                    "a": A[:, 0],
                    "b": A[:, 1],
                    "c": pd.Categorical(np.resize(["x", "y"], len(A))),
                }
            ),
            {"categorical_features": "from_dtype"},
        ),
        "sparse": (sp.csr_matrix, {}),
    }
    try:
        import dask.array as dask_array
    except ImportError:  # the dask extra: tested by .ci/run
        return kinds
    kinds["dask"] = (
        lambda A: dask_array.from_array(A, chunks=(10, -1)),
        {"algorithm": "binned"},
    )
    return kinds


KINDS = _kinds()


def _data(dtype=np.float64):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2)).astype(dtype)
    return X, (X[:, 0] + X[:, 1]).astype(dtype)


def _fit(kind, X, y):
    make, options = KINDS[kind]
    return KernelAttentionRegressor(bandwidth=0.8, **options).fit(make(X), y)


def _computed(prediction):
    return np.asarray(getattr(prediction, "compute", lambda: prediction)())


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_keys_are_refused_alike(kind, bad):
    X, y = _data()
    X[3, 0] = bad
    with pytest.raises(ValueError, match=r"Input X contains (NaN|infinity)"):
        _fit(kind, X, y)


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"dataframe", "categorical"}))
def test_queries_of_the_wrong_width_are_refused_alike(kind):
    X, y = _data()
    model = _fit(kind, X, y)
    make, _ = KINDS[kind]
    with pytest.raises(ValueError, match="X has 3 features, but .* expecting 2"):
        _computed(model.predict(make(np.column_stack([X, X[:, 0]]))))


@pytest.mark.parametrize("kind", ["dataframe", "categorical"])
def test_frames_of_other_columns_are_refused_alike(kind):
    X, y = _data()
    model = _fit(kind, X, y)
    queries = KINDS[kind][0](X).rename(columns={"b": "z"})
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(queries)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_dtype_of_the_keys_is_kept_alike(kind, dtype):
    X, y = _data(dtype)
    model = _fit(kind, X, y)
    make, _ = KINDS[kind]
    assert _computed(model.predict(make(X[:5]))).dtype == dtype
    assert model.n_features_in_ == X.shape[1] + (kind == "categorical")


def test_array_api_input_is_refused_in_the_same_words():
    xp = strict_namespace()  # where scikit-learn can dispatch to it
    X, y = _data()
    bad = X.copy()
    bad[3, 0] = np.nan
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=r"Input X contains NaN"):
            KernelAttentionRegressor(bandwidth=0.8).fit(xp.asarray(bad), xp.asarray(y))
        model = KernelAttentionRegressor(bandwidth=0.8).fit(
            xp.asarray(X), xp.asarray(y)
        )
        with pytest.raises(ValueError, match="X has 3 features, but .* expecting"):
            model.predict(xp.asarray(np.column_stack([X, X[:, 0]])))
