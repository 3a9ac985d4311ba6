"""The input tags follow the parameters, and every input path validates as
scikit-learn does."""

import numpy as np
import pytest
import scipy.sparse as sp
from _array_api import strict_namespace
from numpy.testing import assert_allclose
from sklearn import config_context
from sklearn.base import clone, is_regressor
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import (
    _NotAnArray,
    check_classifier_data_not_an_array,
    check_estimator_sparse_tag,
    check_regressor_data_not_an_array,
)

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)

ESTIMATORS = (
    KernelAttentionRegressor,
    KernelAttentionClassifier,
    KernelAttentionRegressorCV,
    KernelAttentionClassifierCV,
)

# Options and whether they leave sparse X to the brute-force path (for data
# of three features).
SPARSE_OPTIONS = {
    "plain": ({}, True),
    "brute": ({"algorithm": "brute"}, True),
    "binned": ({"algorithm": "binned"}, False),
    "kd_tree": ({"algorithm": "kd_tree"}, False),
    "ball_tree": ({"algorithm": "ball_tree"}, False),
    "categorical_index": ({"categorical_features": [0]}, False),
    "categorical_mask": ({"categorical_features": [True, False, False]}, False),
    "categorical_name": ({"categorical_features": ["x0"]}, False),
    # These declare no categorical feature of an array.
    "categorical_from_dtype": ({"categorical_features": "from_dtype"}, True),
    "categorical_none_of_mask": ({"categorical_features": [False] * 3}, True),
    "categorical_empty": ({"categorical_features": []}, True),
}


def _sparse_cases():
    for estimator in ESTIMATORS:
        params = estimator().get_params()
        for name, (options, takes_sparse) in SPARSE_OPTIONS.items():
            if set(options) <= set(params):
                yield pytest.param(
                    estimator(**options),
                    takes_sparse,
                    id=f"{estimator.__name__}-{name}",
                )


def _sparse_data():
    rng = np.random.RandomState(0)
    X = rng.uniform(size=(40, 3))
    X[X < 0.6] = 0
    return sp.csr_array(X), rng.randint(0, 3, size=40).astype(float)


@pytest.mark.parametrize("estimator, takes_sparse", _sparse_cases())
def test_sparse_tag_follows_the_parameters(estimator, takes_sparse):
    X, y = _sparse_data()
    tag = get_tags(estimator).input_tags.sparse
    assert tag is takes_sparse
    try:
        clone(estimator).fit(X, y)
        fitted = True
    except ValueError as exc:
        assert "sparse" in str(exc)
        fitted = False
    assert fitted is tag
    check_estimator_sparse_tag(type(estimator).__name__, estimator)


@pytest.mark.parametrize(
    "options",
    [{}, {"categorical_features": [0]}, {"categorical_features": "from_dtype"}],
    ids=["plain", "categorical_index", "categorical_from_dtype"],
)
def test_array_api_tag_follows_the_parameters(options):
    xp = strict_namespace()
    rng = np.random.RandomState(0)
    X, y = rng.uniform(size=(20, 3)), rng.uniform(size=20)
    estimator = KernelAttentionRegressor(**options)
    tag = get_tags(estimator).array_api_support
    with config_context(array_api_dispatch=True):
        try:
            estimator.fit(xp.asarray(X), xp.asarray(y))
            fitted = True
        except ValueError as exc:
            assert "array API" in str(exc)
            fitted = False
    assert fitted is tag


# The estimators with categorical features, and data of three numeric
# features: the categorical configuration reads the first one as categories.
CATEGORICAL_ESTIMATORS = (
    KernelAttentionRegressor,
    KernelAttentionClassifier,
    KernelAttentionRegressorCV,
)


def _data():
    rng = np.random.RandomState(0)
    X = rng.uniform(size=(30, 3))
    return X, (X[:, 1] > 0.5).astype(float)


def _with_nan(X):
    X = X.copy()
    X[3, 1] = np.nan  # a continuous feature
    return X


def _with_inf(X):
    X = X.copy()
    X[3, 2] = np.inf  # a continuous feature
    return X


def _frame(X, names):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(X, columns=names)


# Each bad input as (fit X, fit y, predict X): predict X None for an error
# of fit.
BAD_INPUTS = {
    "fit_y_none": lambda X, y: (X, None, None),
    "fit_1d_X": lambda X, y: (X[:, 0], y, None),
    "fit_3d_X": lambda X, y: (X[:, :, None], y, None),
    "fit_no_feature": lambda X, y: (X[:, :0], y, None),
    "fit_no_sample": lambda X, y: (X[:0], y[:0], None),
    "fit_y_length": lambda X, y: (X, y[:-1], None),
    "fit_nan": lambda X, y: (_with_nan(X), y, None),
    "fit_inf": lambda X, y: (_with_inf(X), y, None),
    "fit_complex": lambda X, y: (X + 1j, y, None),
    "predict_1d_row": lambda X, y: (X, y, X[0]),
    "predict_feature_count": lambda X, y: (X, y, X[:, :2]),
    "predict_no_sample": lambda X, y: (X, y, X[:0]),
    "predict_nan": lambda X, y: (X, y, _with_nan(X)),
    "predict_inf": lambda X, y: (X, y, _with_inf(X)),
    "predict_feature_names": lambda X, y: (
        _frame(X, ["a", "b", "c"]),
        y,
        _frame(X, ["a", "c", "b"]),
    ),
}


def _error(estimator, make_input):
    X, y = _data()
    X_fit, y_fit, X_predict = make_input(X, y)
    with pytest.raises(Exception) as info:
        estimator.fit(X_fit, y_fit)
        if X_predict is None:
            pytest.fail("fit took the bad input")
        estimator.predict(X_predict)
    return info.type, str(info.value)


@pytest.mark.parametrize("bad_input", BAD_INPUTS)
@pytest.mark.parametrize(
    "estimator", CATEGORICAL_ESTIMATORS, ids=lambda cls: cls.__name__
)
def test_categorical_path_validates_as_the_dense_path(estimator, bad_input):
    make_input = BAD_INPUTS[bad_input]
    expected_type, expected = _error(estimator(), make_input)
    error_type, message = _error(estimator(categorical_features=[0]), make_input)
    assert error_type is expected_type
    assert message == expected


@pytest.mark.slow
@pytest.mark.parametrize(
    "estimator", CATEGORICAL_ESTIMATORS, ids=lambda cls: cls.__name__
)
def test_categorical_path_takes_data_not_an_array(estimator):
    X, y = _data()
    reference = estimator(categorical_features=[0]).fit(X, y)
    fitted = estimator(categorical_features=[0]).fit(_NotAnArray(X), _NotAnArray(y))
    assert_allclose(fitted.predict(_NotAnArray(X)), reference.predict(X))
    if is_regressor(reference):
        check_regressor_data_not_an_array(estimator.__name__, reference)
    else:
        check_classifier_data_not_an_array(estimator.__name__, reference)


@pytest.mark.parametrize(
    "estimator", CATEGORICAL_ESTIMATORS, ids=lambda cls: cls.__name__
)
def test_categorical_path_refuses_infinite_categories(estimator):
    X, y = _data()
    X[3, 0] = np.inf
    with pytest.raises(ValueError, match="Categorical feature 0 holds an infinite"):
        estimator(categorical_features=[0]).fit(X, y)
    fitted = estimator(categorical_features=[0]).fit(X[4:], y[4:])
    with pytest.raises(ValueError, match="Categorical feature 0 holds an infinite"):
        fitted.predict(X[:4])
