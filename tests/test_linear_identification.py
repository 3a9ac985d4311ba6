"""The identification of the linear part of a partially linear fit: a column
that the kernel smoother reproduces is refused, naming it, one it nearly
reproduces is warned of; the fractions against a plain loop of refits."""

import warnings

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    WeakIdentificationWarning,
)


def reproduced(n=120, seed=0):
    """``[x0, x1, x0 + x1]`` and ``y = sin(x0) + x1 + noise``: the third
    column is a linear function of the first two."""
    rng = np.random.default_rng(seed)
    x0, x1 = rng.uniform(-2, 2, n), rng.uniform(-2, 2, n)
    y = np.sin(x0) + x1 + 0.3 * rng.normal(size=n)
    return np.column_stack([x0, x1, x0 + x1]), y


def nearly_reproduced(n=120, seed=1):
    """``[x, z_weak, z]``: ``z_weak`` is ``x`` plus a little noise (the
    smoother explains nearly all of it), ``z`` an independent binary column."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    z_weak = x + 0.02 * rng.normal(size=n)
    z = (rng.uniform(size=n) < 0.5).astype(float)
    y = np.sin(2 * x) + 0.5 * z_weak - z + 0.2 * rng.normal(size=n)
    return np.column_stack([x, z_weak, z]), y


def fractions_by_refits(X, Z, params, weights):
    """Each linear column's fraction by its definition: the leave-one-out
    fits of ``Z`` by refits of the kernel part without each row, the
    weighted residual of each column's residuals after the others' by
    ``numpy.linalg.lstsq``, over the weighted sum of squares of the column
    about its mean; rows of weight zero left out."""
    n = len(Z)
    fits = np.empty_like(Z)
    for i in range(n):
        keep = (np.arange(n) != i) & (weights > 0)
        part = KernelAttentionRegressor(**params).fit(X[keep], Z[keep], weights[keep])
        fits[i] = part.predict(X[i : i + 1])[0]
    rows = weights > 0
    root = np.sqrt(weights[rows])[:, None]
    E, Zr = (Z[rows] - fits[rows]) * root, Z[rows]
    mean = np.average(Zr, axis=0, weights=weights[rows])
    total = np.sum(weights[rows][:, None] * (Zr - mean) ** 2, axis=0)
    fractions = []
    for j in range(Z.shape[1]):
        others = np.delete(E, j, axis=1)
        coef = np.linalg.lstsq(others, E[:, j], rcond=None)[0]
        residual = E[:, j] - others @ coef
        fractions.append(residual @ residual / total[j])
    return np.array(fractions)


def test_a_column_the_smoother_reproduces_is_refused_naming_it():
    # Column 2 = x0 + x1 with x0 and x1 in the kernel at degree 1: the
    # local-linear smoother reproduces it (coef_ was about -3e12 before).
    X, y = reproduced()
    reg = KernelAttentionRegressor(bandwidth=0.5, degree=1, linear_features=[2])
    with pytest.raises(ValueError, match="reproduces the linear column\\(s\\) 'x2'"):
        reg.fit(X, y)
    frame = pd.DataFrame(X, columns=["age", "tenure", "experience"])
    reg.set_params(linear_features=["experience"])
    with pytest.raises(ValueError, match="'experience'.* below 1e-08"):
        reg.fit(frame, y)
    # With another, identified, linear column, only the reproduced one is named.
    rng = np.random.default_rng(2)
    both = np.column_stack([X, rng.normal(size=len(y))])
    reg.set_params(linear_features=[2, 3])
    with pytest.raises(ValueError, match="column\\(s\\) 'x2':"):
        reg.fit(both, y)


@pytest.mark.parametrize("degree", [1, "auto"])
def test_the_search_refuses_a_column_that_a_candidate_reproduces(degree):
    # The narrowest widths shrink a few held-out slopes, so that their
    # smoother reproduces column 2 only nearly: the search selected one of
    # them (coef_ about 40, or -4.5e12 at a wider one) before; a column
    # that some candidate reproduces is a function of the kernel's features.
    X, y = reproduced()
    search = KernelAttentionRegressorCV(degree=degree, linear_features=[2])
    with pytest.raises(ValueError, match="'x2' at a candidate of the search"):
        search.fit(X, y)


def test_fractions_of_a_weakly_identified_column_are_those_of_refits():
    X, y = nearly_reproduced()
    weights = np.random.default_rng(3).uniform(0.5, 2.0, len(y))
    weights[[4, 17]] = 0.0
    params = {"bandwidth": 0.6, "degree": 1}
    reg = KernelAttentionRegressor(**params, linear_features=[1, 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg.fit(X, y, sample_weight=weights)
    expected = fractions_by_refits(X[:, :1], X[:, 1:], params, weights)
    assert expected[0] < 1e-2 < expected[1]  # z_weak warned of, z not
    [warning] = [w.message for w in caught]
    assert isinstance(warning, WeakIdentificationWarning)
    assert "'x1'" in str(warning) and "'x2'" not in str(warning)
    assert_array_equal(warning.columns, ["x1"])
    assert warning.threshold == 1e-2
    assert_allclose(warning.fractions, expected[:1], rtol=1e-8)


def test_the_search_reports_each_candidates_smallest_fraction():
    X, y = nearly_reproduced(n=60, seed=4)
    grid = [0.3, 0.8, 2.0]
    search = KernelAttentionRegressorCV(
        bandwidths=grid, degree=0, n_neighbors=None, linear_features=[1, 2]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakIdentificationWarning)
        search.fit(X, y)
    weights = np.ones(len(y))
    for c, h in enumerate(grid):
        expected = fractions_by_refits(
            X[:, :1], X[:, 1:], {"bandwidth": h, "degree": 0}, weights
        )
        assert_allclose(
            search.cv_results_["identified_fraction"][c], expected.min(), rtol=1e-8
        )


def test_a_function_of_the_kernel_features_at_degree_0_is_warned_of():
    # Z = x0 with x0 in the kernel at degree 0: the local mean never
    # reproduces it (its residual is the smoother's bias), so it is not
    # refused; at a width the search selects, it is weakly identified.
    X, y = reproduced(n=200)
    X[:, 2] = X[:, 0]
    search = KernelAttentionRegressorCV(degree=0, linear_features=[2])
    with pytest.warns(WeakIdentificationWarning, match="'x2' are weakly") as caught:
        search.fit(X, y)
    [warning] = [w.message for w in caught if w.category is WeakIdentificationWarning]
    assert 0 < warning.fractions[0] < 1e-2
    # An independent column correlated with x0 is identified: no warning.
    X[:, 2] = X[:, 0] + np.random.default_rng(5).normal(size=len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakIdentificationWarning)
        search.fit(X, y)
    assert search.cv_results_["identified_fraction"].min() > 0.1
