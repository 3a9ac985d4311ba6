"""Models saved by earlier releases load, and predict as they did.

Two kinds of files:

- the pickles that two earlier releases wrote (``tests/data/former``, made by
  ``make_former_pickles.py`` there): the release before the partially linear
  model and the release before the subpackages. Each holds the fitted
  models, their data and what that release predicted; today's package must
  predict the same, and so must a refit of the loaded parameters: bit for
  bit on the releases of NumPy, SciPy and scikit-learn that wrote the file,
  to rounding on others;
- for every ``__init__`` parameter of every public estimator (read from the
  package, not from a list kept here), a file written without that
  parameter, as a release before it would have written it.
"""

import inspect
import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.exceptions import InconsistentVersionWarning

import sklearn_kernelpool
from sklearn_kernelpool._estimator._persistence import ADDED_PARAMETERS

FORMER = Path(__file__).parent / "data" / "former"
RELEASES = ["before_partially_linear", "before_subpackages"]


def _load(path):
    # The files were written by another release of scikit-learn than the
    # oldest this package supports; its warning says so, and is not ours.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InconsistentVersionWarning)
        return pickle.loads(path.read_bytes())


def _frame(columns):
    """The frame of a record (see ``make_former_pickles._columns``)."""
    if not isinstance(columns, dict):
        return columns
    return pd.DataFrame(
        {
            name: pd.Categorical(values, categories=["x", "y", "z"])
            if values.dtype == object
            else values
            for name, values in columns.items()
        }
    )


def _records():
    for release in RELEASES:
        saved = _load(FORMER / f"{release}.pkl")
        for name, record in saved["models"].items():
            yield pytest.param(saved["versions"], record, id=f"{release}-{name}")


def _same_numerics(versions):
    """Whether this environment runs the releases of NumPy, SciPy and
    scikit-learn that wrote the file (others round differently)."""
    return all(
        module.__version__ == versions[module.__name__]
        for module in (np, scipy, sklearn)
    )


@pytest.mark.parametrize(("versions", "record"), _records())
def test_a_model_of_an_earlier_release_predicts_bit_for_bit(versions, record):
    model, queries = record["model"], _frame(record["queries"])
    methods = ["predict"] + (["predict_proba"] if "predict_proba" in record else [])
    for method in methods:
        _assert_same(getattr(model, method)(queries), record[method], versions)
    # Its parameters are today's, and describe it: a refit from them on the
    # same data predicts the same. (A search selects anew: its selected
    # model, refitted, predicts the same; the selection itself follows
    # today's scores, those of the leverage safeguard of degree 1.)
    assert set(model.get_params()) == set(type(model)().get_params())
    fitted = getattr(model, "best_estimator_", model)
    refit = clone(fitted).fit(_frame(record["X"]), record["y"])
    for method in methods:
        _assert_same(getattr(refit, method)(queries), record[method], versions)


def _assert_same(output, expected, versions):
    if _same_numerics(versions) or output.dtype.kind != "f":
        assert_array_equal(output, expected)
    else:
        assert_allclose(output, expected, rtol=1e-12, atol=1e-14)


def _public_estimators():
    for name in sklearn_kernelpool.__all__:
        value = getattr(sklearn_kernelpool, name)
        if inspect.isclass(value) and issubclass(value, BaseEstimator):
            yield value


def _restored(cls, name):
    """The value a file without parameter ``name`` loads with."""
    default = inspect.signature(cls).parameters[name].default
    return ADDED_PARAMETERS.get(name, default)


def _every_parameter():
    for cls in _public_estimators():
        for name in cls._get_param_names():
            yield pytest.param(cls, name, id=f"{cls.__name__}-{name}")


def _data(cls):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = X[:, 0] ** 2 + 0.1 * rng.normal(size=60)
    if is_classifier(cls()):
        y = y > np.median(y)
    return X, y, 0.7 * rng.normal(size=(10, 2))


def _output(model, queries):
    method = model.predict if hasattr(model, "predict") else model.transform
    return method(queries)


@pytest.mark.parametrize(("cls", "name"), _every_parameter())
def test_a_file_without_a_parameter_loads_with_the_value_it_was_fitted_with(
    cls, name, monkeypatch
):
    X, y, queries = _data(cls)
    restored = _restored(cls, name)
    model = cls(**{name: restored}).fit(X, y)
    expected = _output(model, queries)
    saved = cls.__getstate__

    def without(self):
        return {key: value for key, value in saved(self).items() if key != name}

    with monkeypatch.context() as patch:
        patch.setattr(cls, "__getstate__", without)
        data = pickle.dumps(model)
    loaded = pickle.loads(data)
    params = loaded.get_params()
    assert params[name] is restored or params[name] == restored
    assert_array_equal(_output(loaded, queries), expected)
    loaded.__sklearn_tags__()
    # The restored parameters describe the loaded model.
    assert_array_equal(_output(clone(loaded).fit(X, y), queries), expected)


def test_the_added_parameters_are_parameters():
    names = {name for cls in _public_estimators() for name in cls._get_param_names()}
    assert set(ADDED_PARAMETERS) <= names
