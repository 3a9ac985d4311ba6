"""The input tags follow the parameters, and every input path validates as
scikit-learn does."""

import numpy as np
import pytest
import scipy.sparse as sp
from _array_api import strict_namespace
from sklearn import config_context
from sklearn.base import clone
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import check_estimator_sparse_tag

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
