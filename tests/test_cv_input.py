"""KernelAttentionRegressorCV on unusual inputs: generators of splits,
one-point folds, classification scorers, data at extreme scales."""


import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.model_selection import KFold

from sklearn_kernelpool import KernelAttentionRegressorCV


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 2))
    return X, np.sin(4 * X[:, 0]) + X[:, 1]


@pytest.mark.parametrize("verbose", [0, 1])
def test_a_generator_of_splits_is_used_once(data, verbose, capsys):
    X, y = data
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    expected = KernelAttentionRegressorCV(bandwidths=[0.1, 0.3], cv=splits).fit(X, y)
    reg = KernelAttentionRegressorCV(
        bandwidths=[0.1, 0.3], cv=(split for split in splits), verbose=verbose
    ).fit(X, y)
    for s in range(4):
        key = f"split{s}_test_score"
        assert_array_equal(reg.cv_results_[key], expected.cv_results_[key])
    assert reg.bandwidth_ == expected.bandwidth_
    if verbose:
        assert "Fitting 4 folds for each of 2 candidates" in capsys.readouterr().out
