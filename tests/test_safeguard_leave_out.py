"""Leave-out fits of degree 1 are those of the safeguarded refits.

The case-deletion fits of jackknife+ and CV+ (dense, every key or one key
per row, on the pooled moments or about each row's own means, and on the
sparse neighbours of a tree) against the estimator refitted without each
key and predicting, which applies the safeguard of the local-linear fit; on
data where the safeguard shrinks many of the fits without a key (keys alone
or in a close pair far from the others, queries beyond the data) and on data
where it shrinks none.
"""

import math
import warnings

import numpy as np
import pytest
from _reference import FORMULAS, kish, slope_factor
from numpy.testing import assert_allclose
from sklearn import clone
from sklearn.model_selection import KFold

from sklearn_kernelpool import KernelAttentionRegressor
from sklearn_kernelpool._inference._case_deletion import leverage_bound
from sklearn_kernelpool._inference._deleted_fits import _LeaveOut

KERNELS = ["gaussian", "epanechnikov", "tricube"]
# A width per kernel: the compact kernels reach the far keys from the
# queries beyond the data.
WIDTHS = {"gaussian": 0.5, "epanechnikov": 1.3, "tricube": 1.3}


def quietly(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return func(*args, **kwargs)


def adversarial(seed=0):
    """A cluster, two close keys far from it, a key alone; queries inside,
    near the pair, beyond the data and between."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.uniform(0, 1, (16, 2)), [[2.0, 2.0], [2.06, 2.03], [-1.1, 0.5]]]
    Y = np.c_[np.sin(3 * X[:, 0]) + X[:, 1], X[:, 0] * X[:, 1]]
    Y += rng.normal(0, 0.1, Y.shape)
    Y[16:18] += [[1.0, -2.0], [-1.0, 2.0]]  # a steep slope across the pair
    Q = np.r_[
        rng.uniform(0.2, 0.8, (3, 2)),
        [[2.6, 2.5], [2.03, 1.6], [1.5, 1.4], [-1.6, 0.3], [-0.4, 0.5], [1.4, -0.5]],
        [[3.0, 2.3], [9.0, 7.0]],  # far out: s = 0 for the gaussian
    ]
    return X, Y, Q


def regular(seed=0):
    """Keys spread evenly, queries well inside: no fit is shrunk."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (24, 2))
    Y = np.c_[np.sin(3 * X[:, 0]) + X[:, 1], X[:, 0] * X[:, 1]]
    Y += rng.normal(0, 0.1, Y.shape)
    Q = rng.uniform(0.35, 0.65, (6, 2))
    return X, Y, Q


def refit_fits(reg, X, Y, w, Q, only=None):
    """``mu[q, i]``: the estimator refitted without row ``i`` (same kernel,
    widths and sample weights) predicting at ``Q[q]``; rows of weight zero
    are not rows of the model (left out of ``i``). ``only``: the rows ``i``
    to refit without (NaN for the others)."""
    rows = np.arange(len(X)) if w is None else np.flatnonzero(w > 0)
    mu = np.full((len(Q), len(rows), Y.shape[1]), np.nan)
    for c, i in enumerate(rows):
        if only is not None and i not in only:
            continue
        keep = np.delete(np.arange(len(X)), i)
        model = clone(reg).set_params(bandwidth=reg.bandwidth_)
        model = quietly(model.fit, X[keep], Y[keep], None if w is None else w[keep])
        mu[:, c] = quietly(model.predict, Q).reshape(len(Q), -1)
    return mu


def shrinkage(X, w, Q, kernel, h):
    """The safeguard's factor of the local-linear fit at each query, by the
    documented rule (weights, local mean and covariance, its pseudo-inverse
    over the eigenvalues above 1e-9 of its trace, the leverage ``(1 +
    D**2) sum p**2``); NaN without weight."""
    alpha = FORMULAS[kernel]
    out = np.full(len(Q), np.nan)
    for j, q in enumerate(Q):
        a = np.array([w[i] * alpha(np.linalg.norm(q - x) / h) for i, x in enumerate(X)])
        if not a.sum() > 0:
            continue
        p = a / a.sum()
        m = p @ X
        C = (X - m).T @ ((X - m) * p[:, None])
        values, vectors = np.linalg.eigh(C)
        kept = values > 1e-9 * np.trace(C)
        projected = vectors.T @ (q - m)
        distance_sq = np.sum(projected[kept] ** 2 / values[kept])
        out[j] = slope_factor(distance_sq, kish(p, kernel == "constant"))
    return out


def deleted_shrinkage(X, w, Q, kernel, h):
    """:func:`shrinkage` without each row of positive weight: (n_q, n)."""
    w = np.ones(len(X)) if w is None else w
    rows = np.flatnonzero(w > 0)
    out = np.empty((len(Q), len(rows)))
    for c, i in enumerate(rows):
        without = w.copy()
        without[i] = 0.0
        out[:, c] = shrinkage(X, without, Q, kernel, h)
    return out


def fitted(kernel, X, Y, w, width=None):
    width = WIDTHS[kernel] if width is None else width
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=width, degree=1)
    return quietly(reg.fit, X, Y, w)


def dense_fits(reg, Q, cols=None, moments=True):
    """The case-deletion fits of ``_LeaveOut`` at ``Q``, uncentred."""
    state = _LeaveOut(reg)
    state.moments = state.moments and moments
    P, Q_centred, empty = state.weights(Q, state.pool.scorer.workspace(len(Q)))
    mu = quietly(state.leave_one_out, Q, P, Q_centred, empty, cols)
    return mu + state.center


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("moments", [True, False])
def test_dense_fits_without_each_key_are_the_refits(kernel, weighted, moments):
    # Every key of every query, from the keys' monomials (pooled moments)
    # or about each row's own means, where many fits are shrunk.
    X, Y, Q = adversarial()
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X)) if weighted else None
    reg = fitted(kernel, X, Y, w)
    s = deleted_shrinkage(X, w, Q, kernel, WIDTHS[kernel])
    # The data puts the safeguard to work: a quarter of the fits shrunk, some
    # to next to nothing.
    assert np.mean(s < 1.0) > 0.25
    assert np.nanmin(s) < 0.05
    mu = dense_fits(reg, Q, moments=moments)
    assert_allclose(mu, refit_fits(reg, X, Y, w, Q), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kernel", KERNELS)
def test_fits_without_each_key_unshrunk_on_regular_data(kernel):
    X, Y, Q = regular()
    w = np.random.default_rng(2).uniform(0.5, 2.0, len(X))
    reg = fitted(kernel, X, Y, w)
    assert np.all(deleted_shrinkage(X, w, Q, kernel, WIDTHS[kernel]) == 1.0)
    mu = dense_fits(reg, Q)
    assert_allclose(mu, refit_fits(reg, X, Y, w, Q), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("moments", [True, False])
def test_own_fit_without_each_training_row_is_the_refit(kernel, moments):
    # One column per row (the residuals of jackknife+): each training row
    # at its own key, without itself; narrow widths leave some keys at the
    # edge of the others'.
    X, Y, _ = adversarial()
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(X))
    reg = fitted(kernel, X, Y, w, width=0.5)
    own = dense_fits(reg, X, cols=np.arange(len(X)), moments=moments)[:, 0]
    want = refit_fits(reg, X, Y, w, X)[np.arange(len(X)), np.arange(len(X))]
    assert_allclose(own, want, rtol=1e-9, atol=1e-9)
    s = np.diag(deleted_shrinkage(X, w, X, kernel, 0.5))
    assert np.any(s < 1.0)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("moments", [True, False])
def test_rank_deficient_fits_without_each_key_are_the_refits(kernel, moments):
    # Collinear features: every local covariance of rank 1, the queries off
    # the line of the keys and beyond its ends (the pseudo-inverse).
    X, Y, Q = adversarial()
    t = X[:, 0]
    X = np.c_[t, 2.0 * t - 1.0]
    Q = np.c_[Q[:, 0], 2.0 * Q[:, 0] - 1.0 + np.linspace(-0.5, 0.5, len(Q))]
    Q = np.r_[Q, [[3.0, 5.0], [-2.5, -6.0]]]
    w = np.random.default_rng(7).uniform(0.5, 2.0, len(X))
    reg = fitted(kernel, X, Y, w)
    s = deleted_shrinkage(X, w, Q, kernel, WIDTHS[kernel])
    assert np.mean(s < 1.0) > 0.1
    mu = dense_fits(reg, Q, moments=moments)
    assert_allclose(mu, refit_fits(reg, X, Y, w, Q), rtol=1e-9, atol=1e-9)


def sparse_data(seed=0):
    """Many keys, each query weighing few of them on a tree; a close pair
    and a key alone far from the others; queries beyond the edges."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.uniform(0, 4, (160, 2)), [[6.0, 6.0], [6.05, 6.03], [-1.9, 2.0]]]
    Y = np.c_[np.sin(X[:, 0]) + X[:, 1], np.cos(X[:, 1])]
    Y += rng.normal(0, 0.1, Y.shape)
    Y[160:162] += [[1.0, -1.0], [-1.0, 1.0]]
    Q = np.r_[
        rng.uniform(0.5, 3.5, (4, 2)),
        [[4.3, 2.0], [2.0, -0.35], [4.25, 4.25], [-0.3, 3.0], [1.0, 4.35]],
        [[6.3, 6.2], [6.0, 5.7], [-2.2, 2.1]],
    ]
    return X, Y, Q


def sparse_neighbours(kernel, h, X, Y, w, Q):
    """A degree-1 k-d tree fit, its leave-out state and the neighbour lists of
    the queries, every query on the sparse path."""
    reg = KernelAttentionRegressor(
        kernel=kernel, bandwidth=h, degree=1, algorithm="kd_tree"
    )
    reg = quietly(reg.fit, X, Y, w)
    state = _LeaveOut(reg)
    P, Q_centred, empty = state.weights(Q, None, sparse=True)
    fast, P_fast, _, _ = state.split(P, empty)
    assert len(fast) == len(Q)  # every query by its neighbours
    W, cols = state.neighbours(P_fast)
    return reg, state, (P_fast, Q_centred, W, cols)


@pytest.mark.parametrize("kernel", ["epanechnikov", "tricube"])
def test_sparse_fits_without_each_neighbour_are_the_refits(kernel):
    X, Y, Q = sparse_data()
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(X))
    h = 0.6
    reg, state, (P_fast, Q_centred, W, cols) = sparse_neighbours(kernel, h, X, Y, w, Q)
    fit, mu = quietly(state.sparse_leave_one_out, Q, P_fast, Q_centred, W, cols)
    fit, mu = fit + state.center, mu + state.center
    assert_allclose(fit, quietly(reg.predict, Q), rtol=1e-9, atol=1e-9)
    want = refit_fits(reg, X, Y, w, Q)
    real = cols < len(X)
    rows, slots = np.nonzero(real)
    got = mu[rows, slots]
    assert_allclose(got, want[rows, cols[rows, slots]], rtol=1e-9, atol=1e-9)
    # Shrunk fits among them, whole queries and single deletions.
    s = deleted_shrinkage(X, w, Q, kernel, h)[rows, cols[rows, slots]]
    assert np.mean(s < 1.0) > 0.2
    assert np.any(s < 0.05)


def _kth(values, rank):
    if rank < 1 or rank > values.shape[1]:
        return np.full((values.shape[0],) + values.shape[2:], np.nan)
    return np.sort(values, axis=1)[:, rank - 1]


def reference_interval(reg, X, Y, w, Q, level, folds):
    """The interval of the paper from refits without each fold."""
    mu = np.empty((len(Q), len(X), Y.shape[1]))
    R = np.empty((len(X), Y.shape[1]))
    for k in np.unique(folds):
        out = np.flatnonzero(folds == k)
        keep = np.setdiff1d(np.arange(len(X)), out)
        model = clone(reg).set_params(bandwidth=reg.bandwidth_)
        model = quietly(model.fit, X[keep], Y[keep], w[keep])
        mu[:, out] = quietly(model.predict, Q)[:, None, :]
        R[out] = np.abs(Y[out] - quietly(model.predict, X[out]))
    n = len(X)
    alpha = round(1 - level, 12)
    low = math.floor(round(alpha * (n + 1), 9))
    high = math.ceil(round(level * (n + 1), 9))
    return _kth(mu - R[None], low), _kth(mu + R[None], high)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("method", ["jackknife+", "cv+"])
def test_interval_endpoints_are_those_of_the_refits(kernel, method):
    X, Y, Q = adversarial()
    w = np.random.default_rng(5).uniform(0.5, 2.0, len(X))
    reg = fitted(kernel, X, Y, w)
    if method == "jackknife+":
        folds, cv = np.arange(len(X)), None
    else:
        cv = KFold(4, shuffle=True, random_state=0)
        folds = np.empty(len(X), dtype=int)
        for k, (_, test) in enumerate(cv.split(X)):
            folds[test] = k
    lower, upper = quietly(reg.prediction_interval, Q, level=0.7, method=method, cv=cv)
    ref_lower, ref_upper = reference_interval(reg, X, Y, w, Q, 0.7, folds)
    assert lower.shape == upper.shape == (len(Q), 2)
    assert_allclose(lower, ref_lower, rtol=1e-9, atol=1e-9)
    assert_allclose(upper, ref_upper, rtol=1e-9, atol=1e-9)


def test_interval_endpoints_on_sparse_neighbourhoods():
    # jackknife+ on a tree, each query by its neighbours.
    X, Y, Q = sparse_data()
    w = np.random.default_rng(6).uniform(0.5, 2.0, len(X))
    reg = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.6, degree=1, algorithm="kd_tree"
    )
    reg = quietly(reg.fit, X, Y, w)
    lower, upper = quietly(reg.prediction_interval, Q, level=0.7)
    folds = np.arange(len(X))
    ref_lower, ref_upper = reference_interval(reg, X, Y, w, Q, 0.7, folds)
    assert_allclose(lower, ref_lower, rtol=1e-9, atol=1e-9)
    assert_allclose(upper, ref_upper, rtol=1e-9, atol=1e-9)


def dominant(seed=0):
    """A cluster and a key of sample weight 1e5 beside it, which holds all
    but about 1e-5 of the weight of the queries near it; queries from that
    key outwards, whose fits without it extrapolate from the cluster."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.uniform(0, 1, (20, 2)), [[1.15, 0.9]]]
    Y = np.c_[np.sin(3 * X[:, 0]) + X[:, 1], X[:, 0] * X[:, 1]]
    Y += rng.normal(0, 0.1, Y.shape)
    w = np.r_[rng.uniform(0.5, 2.0, 20), 1e5]
    Q = np.c_[np.linspace(1.15, 1.6, 10), np.linspace(0.9, 1.2, 10)]
    return X, Y, w, Q


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("moments", [True, False])
def test_fits_without_a_dominant_key_are_the_refits(kernel, moments):
    # Without the key, the sum of the squared weights of the others is not
    # the row's minus the key's (which cancel to rounding): the fits are
    # those of the refits, shrunk or not.
    X, Y, w, Q = dominant()
    h = 0.4 if kernel == "gaussian" else 0.8
    reg = fitted(kernel, X, Y, w, width=h)
    state = _LeaveOut(reg)
    P = state.weights(Q, state.pool.scorer.workspace(len(Q)))[0]
    assert np.all((1.0 - P[:, -1] > 1e-6) & (1.0 - P[:, -1] < 1e-4))
    s = deleted_shrinkage(X, w, Q, kernel, h)[:, -1]
    assert np.sum((s > 0.01) & (s < 0.99)) >= 2
    want = refit_fits(reg, X, Y, w, Q)
    mu = dense_fits(reg, Q, moments=moments)
    assert_allclose(mu, want, rtol=1e-9, atol=1e-9)
    # One key per row (the residuals of jackknife+): the dominant one.
    cols = np.full(len(Q), len(X) - 1)
    own = dense_fits(reg, Q, cols=cols, moments=moments)[:, 0]
    assert_allclose(own, want[:, -1], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kernel", ["epanechnikov", "tricube"])
def test_sparse_fits_without_a_dominant_neighbour_are_the_refits(kernel):
    X, Y, _ = sparse_data()
    X = np.r_[X, [[4.0, 2.0]]]
    Y = np.r_[Y, [[np.sin(4.0) + 2.0, np.cos(2.0)]]]
    w = np.r_[np.random.default_rng(4).uniform(0.5, 2.0, len(X) - 1), 1e5]
    Q = np.c_[np.linspace(4.0, 4.4, 8), np.full(8, 2.0)]
    h = 0.6
    reg, state, (P_fast, Q_centred, W, cols) = sparse_neighbours(kernel, h, X, Y, w, Q)
    s = deleted_shrinkage(X, w, Q, kernel, h)[:, -1]
    assert np.sum((s > 0.01) & (s < 0.99)) >= 2
    want = refit_fits(reg, X, Y, w, Q, only=set(cols[cols < len(X)]))
    _, mu = quietly(state.sparse_leave_one_out, Q, P_fast, Q_centred, W, cols)
    rows, slots = np.nonzero(cols < len(X))
    got = mu[rows, slots] + state.center
    assert_allclose(got, want[rows, cols[rows, slots]], rtol=1e-9, atol=1e-9)
    # The slot of the dominant key alone (the residuals of jackknife+).
    pick = np.argmax(cols == len(X) - 1, axis=1)
    _, mu = quietly(state.sparse_leave_one_out, Q, P_fast, Q_centred, W, cols, pick)
    assert_allclose(mu[:, 0] + state.center, want[:, -1], rtol=1e-9, atol=1e-9)


def _row_terms(p, K, q):
    """``D**2``, ``sum p**2`` and ``1 - h`` of each key of a local fit, from
    their definitions."""
    m = p @ K
    A = np.linalg.pinv((K - m).T @ ((K - m) * p[:, None]))
    v = K - m
    rest = 1.0 - p * (1.0 + np.einsum("nf,fg,ng->n", v, A, v))
    return (q - m) @ A @ (q - m), p @ p, rest


def test_the_leverage_bound_holds_after_every_deletion():
    # The leverage (1 + D**2) sum p**2 of the query in the fit without each
    # key, refitted by definition, never exceeds the bound of the row, so
    # that the rows within MAX_LEVERAGE need no fit without each key.
    rng = np.random.default_rng(0)
    bounds, worst = [], []
    for _ in range(200):
        n, d = rng.integers(4, 12), rng.integers(1, 3)
        K = rng.normal(size=(n, d))
        q = rng.normal(size=d) * rng.uniform(0, 1.5)
        h = rng.uniform(0.5, 3.0)
        a = np.exp(-np.sum((K - q) ** 2, axis=1) / (2 * h**2))
        p = a * rng.uniform(0.2, 2.0, n)
        p /= p.sum()
        distance_sq, kish, rest = _row_terms(p, K, q)
        bound = leverage_bound(
            np.array([distance_sq]), np.array([kish]), rest[None], p[None]
        )[0]
        deleted = []
        for k in range(n):
            pk = np.delete(p, k)
            dk, kk, _ = _row_terms(pk / pk.sum(), np.delete(K, k, axis=0), q)
            deleted.append((1.0 + dk) * kk)
        bounds.append(bound)
        worst.append(max(deleted))
    bounds, worst = np.array(bounds), np.array(worst)
    assert np.all(worst <= bounds * (1.0 + 1e-9))
    # Not vacuous: rows on both sides of the threshold, and the bound spares
    # most of the rows whose deletions all keep their slopes.
    assert np.sum(bounds <= 1.0) > 0.5 * np.sum(worst <= 1.0)
    assert np.sum(worst > 1.0) > 50
