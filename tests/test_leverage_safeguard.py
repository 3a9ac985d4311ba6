"""The safeguard of local-linear fits reads the leverage of the query.

The slope is kept wherever the local line predicts with at most the
variance of one observation, ``(1 + D**2) / n_eff <= 1``
(:mod:`sklearn_kernelpool._engine._safeguard`). These tests hold the rule to
the cases it is for, against independent references: ordinary least
squares on real tables at an infinite width (in-sample and left out), a
line far beyond 200 keys, dense weighted least squares for adaptive widths
inside the keys' hull, and the isolated keys it must still guard against.
The rule itself on every path is tested against the slow reference in
``tests/test_safeguard.py``.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.linear_model import LinearRegression

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)

sm_datasets = pytest.importorskip("statsmodels.datasets")

INFINITE = 1e6


def _table(name):
    """A statsmodels table, its columns standardised."""
    if name == "statecrime":
        data = sm_datasets.statecrime.load_pandas().data
        y = data["murder"].to_numpy(float)
        X = data[["poverty", "hs_grad", "urban", "single"]].to_numpy(float)
    elif name == "engel":
        data = sm_datasets.engel.load_pandas().data
        X, y = data[["income"]].to_numpy(float), data["foodexp"].to_numpy(float)
    else:
        data = getattr(sm_datasets, name).load_pandas()
        X, y = data.exog.to_numpy(float), data.endog.to_numpy(float)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def _quietly(method, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return method(*args, **kwargs)


def _leverages(X):
    """The diagonal of the hat matrix of least squares with an intercept."""
    design = np.column_stack([np.ones(len(X)), X])
    return np.einsum("ij,ji->i", design, np.linalg.pinv(design))


def _ols_left_out(X, y):
    """The predictions of least squares at each row left out."""
    fitted = LinearRegression().fit(X, y).predict(X)
    return y - (y - fitted) / (1.0 - _leverages(X))


TABLES = ["statecrime", "longley", "stackloss", "engel"]


@pytest.mark.parametrize("name", TABLES)
@pytest.mark.parametrize("kernel", ["gaussian", "constant"])
def test_an_infinite_width_is_least_squares_at_every_training_row(name, kernel):
    X, y = _table(name)
    reg = KernelAttentionRegressor(kernel, INFINITE, degree=1).fit(X, y)
    expected = LinearRegression().fit(X, y).predict(X)
    assert_allclose(reg.predict(X), expected, rtol=1e-6, atol=1e-6 * np.std(y))


def _left_out(X, y, kernel, rows):
    """The predictions at each of ``rows`` of refits without it."""
    out = np.empty(len(rows))
    for k, i in enumerate(rows):
        keep = np.arange(len(y)) != i
        reg = KernelAttentionRegressor(kernel, INFINITE, degree=1)
        out[k] = _quietly(reg.fit(X[keep], y[keep]).predict, X[i : i + 1])[0]
    return out


@pytest.mark.parametrize("name", TABLES)
def test_an_infinite_width_is_least_squares_at_the_rows_left_out(name):
    # Wherever the line's prediction at the row left out has at most the
    # variance of one observation, h / (1 - h) <= 1; the global line (the
    # constant kernel) everywhere.
    X, y = _table(name)
    h = _leverages(X)
    rows = np.arange(len(y))
    keeps = h / (1.0 - h) <= 1.0
    if name in ("engel", "stackloss"):
        assert keeps.all()
    scale = 1e-6 * np.std(y)
    expected = _ols_left_out(X, y)
    fits = _left_out(X, y, "gaussian", rows)
    assert_allclose(fits[keeps], expected[keeps], rtol=1e-6, atol=scale)
    assert_allclose(_left_out(X, y, "constant", rows), expected, rtol=1e-6, atol=scale)


@pytest.mark.parametrize("name", TABLES)
def test_the_search_scores_the_global_line_by_least_squares(name):
    # The leave-one-out score of the global line (the constant kernel at
    # degree 1), and of an infinite width where every row qualifies, are
    # those of ordinary least squares.
    X, y = _table(name)
    ols = np.mean((y - _ols_left_out(X, y)) ** 2)
    for kernel in ["constant", "gaussian"]:
        search = KernelAttentionRegressorCV(
            kernels=[kernel], bandwidths=[INFINITE], degree=1, n_neighbors=None
        ).fit(X, y)
        h = _leverages(X)
        if kernel == "constant" or np.all(h / (1.0 - h) <= 1.0):
            assert_allclose(-search.best_score_, ols, rtol=1e-6)


def test_a_line_far_beyond_its_keys_is_kept():
    # 200 keys on y = 2x in [0, 1]; half the range beyond them.
    X = np.linspace(0.0, 1.0, 200)[:, None]
    reg = KernelAttentionRegressor(bandwidth=0.5, degree=1).fit(X, 2.0 * X[:, 0])
    assert_allclose(reg.predict([[1.5], [-0.5]]), [3.0, -1.0], rtol=1e-6)


def _plain_local_linear(weights, X, y, Q):
    """Weighted least squares of ``y`` on ``[1, x - q]`` under each row of
    ``weights``, at each query: the unguarded local-linear fit."""
    out = np.empty(len(Q))
    for j, q in enumerate(Q):
        root = np.sqrt(weights[j])
        design = np.column_stack([np.ones(len(X)), X - q]) * root[:, None]
        out[j] = np.linalg.lstsq(design, y * root, rcond=None)[0][0]
    return out


def _inside_hull(X, Q):
    from scipy.spatial import Delaunay

    return Delaunay(X).find_simplex(Q) >= 0


@pytest.mark.parametrize(
    "d, k, seed", [(1, 12, 0), (1, 12, 3), (2, 12, 0), (2, 16, 4), (3, 20, 1)]
)
def test_adaptive_fits_of_enough_neighbours_are_plain_inside_the_hull(d, k, seed):
    # 60 uniform keys, queries at the keys and inside their hull. (Ours and
    # the case: 12 neighbours in two dimensions. At k = 4 (d + 1) a
    # few queries in 1e3 lie in a gap whose neighbours sit on one side, and
    # are extrapolations: see the next test.)
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(60, d))
    y = np.sin(2 * X.sum(axis=1)) + 0.1 * rng.normal(size=60)
    Q = np.r_[X, rng.uniform(-1.1, 1.1, size=(300, d))]
    if d == 1:
        Q = Q[(Q[:, 0] > X.min()) & (Q[:, 0] < X.max())]
    else:
        Q = Q[_inside_hull(X, Q)]
    params = dict(kernel="epanechnikov", n_neighbors=k)
    local = KernelAttentionRegressor(**params, degree=1).fit(X, y)
    weights = KernelAttentionRegressor(**params).fit(X, y).attention_weights(Q)
    assert_allclose(local.predict(Q), _plain_local_linear(weights, X, y, Q), atol=1e-9)


def test_a_gap_inside_the_hull_is_an_extrapolation():
    # Eight keys bunched at 0, one at 1: a query at 0.5, inside the hull,
    # pools the bunch, whose line is a slope from keys 0.01 apart, and gets
    # a slope shrunk by its leverage, as any query of high leverage does.
    X = np.r_[np.linspace(0.0, 0.01, 8), 1.0][:, None]
    y = np.r_[np.linspace(0.0, 0.01, 8) * 100.0, 0.0]
    params = dict(kernel="epanechnikov", n_neighbors=8)
    weights = KernelAttentionRegressor(**params).fit(X, y).attention_weights([[0.5]])
    plain = _plain_local_linear(weights, X, y, [[0.5]])
    reg = KernelAttentionRegressor(**params, degree=1).fit(X, y)
    fitted = _quietly(reg.predict, [[0.5]])
    assert abs(plain[0] - 50.0) < 5.0  # the line's extrapolation
    assert abs(fitted[0] - np.mean(y[:8])) < abs(plain[0] - np.mean(y[:8])) / 10


def test_two_close_keys_give_no_slope_of_300():
    # Fifty keys on [-1, 1] and two keys 0.001 apart at 3, of values 5.0
    # and 5.3: their line has a slope of 300 and reaches 305 at 4.001.
    X = np.r_[np.linspace(-1, 1, 50), 3.0, 3.001][:, None]
    y = np.r_[np.sin(3 * X[:50, 0]), 5.0, 5.3]
    reg = KernelAttentionRegressor(bandwidth=0.3, degree=1).fit(X, y)
    far = _quietly(reg.predict, [[3.5], [4.001], [3.001 + 50 * X.std()]])
    assert np.all((far > 4.9) & (far < 5.4))
