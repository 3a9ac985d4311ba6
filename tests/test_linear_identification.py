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
from sklearn_kernelpool._estimator._identification import identified_fractions


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


def lots_and_loose(seed=0):
    """Four continuous features: five lots of 12 near-duplicate rows, each
    of grade ``a`` or ``b``, and 80 loose rows of grade ``a``, ``b`` or ``c``
    at random; ``Z`` the dummies of ``b`` and ``c``. At width 0.2 the
    safeguard keeps the slopes of most rows of the lots alone, about which
    the grade is constant."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-3, 3, (5, 4))
    lots = np.repeat(centres, 12, axis=0) + 0.01 * rng.normal(size=(60, 4))
    loose = rng.uniform(-3, 3, (80, 4))
    grade = np.r_[np.repeat(np.arange(5) % 2, 12), rng.integers(0, 3, 80)]
    Z = np.column_stack([grade == 1, grade == 2]).astype(float)
    X = np.vstack([lots, loose])
    y = np.sin(X[:, 0]) + X[:, 1] + Z @ [0.5, -0.5] + 0.1 * rng.normal(size=140)
    return X, Z, y


def _residual_fractions(E, total):
    """Each column of the weighted residuals ``E``: its residual after the
    other columns by ``numpy.linalg.lstsq``, its squared norm over
    ``total``."""
    fractions = []
    for j in range(E.shape[1]):
        others = np.delete(E, j, axis=1)
        coef = np.linalg.lstsq(others, E[:, j], rcond=None)[0]
        residual = E[:, j] - others @ coef
        fractions.append(residual @ residual / total[j])
    return np.array(fractions)


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
    return _residual_fractions(E, total)


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


def _fractions_by_lstsq(Z, fits, weights, rss_rows):
    """``fraction_j`` by its definition, ``RSS`` over ``rss_rows`` and
    ``TSS`` over all the rows, each per unit of their weight."""
    E = Z - fits
    mean = np.average(Z, axis=0, weights=weights)
    total = np.average((Z - mean) ** 2, axis=0, weights=weights)
    root = np.sqrt(weights[rss_rows] / weights[rss_rows].sum())[:, None]
    E = E[rss_rows] * root
    return _residual_fractions(E, total)


def test_the_residuals_are_read_on_the_kept_rows_where_they_are_most_of_them():
    rng = np.random.default_rng(7)
    Z = rng.normal(size=(60, 2))
    fits = Z + rng.normal(scale=[0.1, 1.0], size=(60, 2))
    fits[:25] = Z[:25]  # reproduced about the first 25 rows
    weights = rng.uniform(0.5, 2.0, 60)
    rows = np.arange(60)
    # The kept rows hold most of the weight: RSS over them alone.
    kept = rows >= 10
    assert weights[kept].sum() > weights.sum() / 2
    assert_allclose(
        identified_fractions(Z, fits, weights, kept),
        _fractions_by_lstsq(Z, fits, weights, kept),
        rtol=1e-10,
    )
    # Less than half the weight (the rows about which the fits reproduce
    # the columns): RSS over all the rows, not the 0 of the kept ones.
    kept = rows < 25
    assert weights[kept].sum() < weights.sum() / 2
    fractions = identified_fractions(Z, fits, weights, kept)
    assert_allclose(fractions, _fractions_by_lstsq(Z, fits, weights, rows >= 0))
    assert np.all(fractions > 1e-3)
    assert np.all(_fractions_by_lstsq(Z, fits, weights, kept) < 1e-20)


@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning")
def test_a_column_constant_about_the_kept_rows_of_a_narrow_width_is_scored():
    # At width 0.2 the smoother reproduces the dummies about the rows of the
    # lots, whose slopes it keeps, not about the loose rows, which hold most
    # of the table: the search refused the columns "at a candidate" before.
    X, Z, y = lots_and_loose()
    params = {"bandwidth": 0.2, "degree": 1}
    fits = np.array(
        [
            KernelAttentionRegressor(**params)
            .fit(np.delete(X, i, axis=0), np.delete(Z, i, axis=0))
            .predict(X[i : i + 1])[0]
            for i in range(len(y))
        ]
    )
    reproduced = np.all(np.abs(Z - fits) < 1e-10, axis=1)
    assert 30 <= np.count_nonzero(reproduced[:60]) and np.mean(reproduced) < 0.5
    data = np.column_stack([X, Z])
    search = KernelAttentionRegressorCV(
        bandwidths=[0.2, 1.0, 2.0], degree=1, n_neighbors=None, linear_features=[4, 5]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakIdentificationWarning)
        search.fit(data, y)
    expected = fractions_by_refits(X, Z, params, np.ones(len(y)))
    assert_allclose(
        search.cv_results_["identified_fraction"][0], expected.min(), rtol=1e-8
    )
    assert expected.min() > 0.1
    # linear_features="auto" scores the grade linear against it in the kernel.
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    frame["grade"] = pd.Categorical(np.array(["a", "b", "c"])[(Z @ [1, 2]).astype(int)])
    auto = KernelAttentionRegressorCV(
        bandwidths=[0.2, 1.0, 2.0], degree=1, n_neighbors=None, categorical_features=[4]
    ).fit(frame, y)
    assert auto.linear_scores_ is not None
    assert_allclose(auto.linear_scores_["linear"], search.best_score_, rtol=1e-10)
