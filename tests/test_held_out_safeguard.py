"""The safeguard of the held-out local-linear fits of the searches.

Each held-out fit of ``degree=1`` (leave-one-out, K-fold, a split, and the
in-sample fits of GCV and AICc; fixed, adaptive and categorical widths)
shrinks its slope by its query's leverage in its own fit, ``(1 + D**2) /
n_eff``, with Kish's ``n_eff`` of the weights of the keys that fit may hold:
against a plain NumPy loop over those keys and the reference row of
``_reference.py``, against least squares for the global line (the constant
kernel) and an infinite width, and against the refitted estimator for a key
whose held-out weights underflow.
"""

import math

import numpy as np
import pytest
from _reference import FORMULAS, safeguarded_fit, safeguarded_row
from numpy.testing import assert_allclose
from sklearn.linear_model import LinearRegression

from sklearn_kernelpool import KernelAttentionRegressor, LocalLinearFallbackWarning
from sklearn_kernelpool._held_out._adaptive import AdaptiveHeldOut
from sklearn_kernelpool._held_out._categorical import CategoricalHeldOut
from sklearn_kernelpool._held_out._pool import HeldOut
from sklearn_kernelpool.kernels import KERNELS

LAMBDA = 0.3
LOG_FORMULAS = {"gaussian": lambda u: -(u**2) / 2}


def _data(seed=0):
    """Keys on the unit square, a close pair of steep slope far from them
    and a key alone, 29 gaussian widths of 0.1 from the others (the squares
    of its held-out weights underflow without a shift); two outputs,
    sample weights (one zero), a categorical code."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.uniform(0, 1, (36, 2)), [[2.0, 2.0], [2.004, 2.003], [4.5, 0.5]]]
    Y = np.c_[np.sin(3 * X[:, 0]) + X[:, 1], X[:, 0] * X[:, 1]]
    Y += rng.normal(0, 0.1, Y.shape)
    Y[36:38] += [[1.0, -2.0], [-1.0, 2.0]]
    w = rng.uniform(0.5, 2.0, len(X))
    w[5] = 0.0
    return X, Y, w, rng.integers(0, 3, (len(X), 1))


# (engine, kernel, width): a fixed bandwidth, or a neighbour count.
CASES = [
    ("fixed", "gaussian", 0.1),
    ("fixed", "epanechnikov", 0.35),
    ("adaptive", "gaussian", 6),
    ("adaptive", "epanechnikov", 6),
    ("categorical", "gaussian", 0.3),
]


def _engine(kind, kernel, width, X, Y, w, codes):
    kernels = [KERNELS[kernel]]
    if kind == "categorical":
        return CategoricalHeldOut(X, codes, [LAMBDA], Y, w, kernels, [width], degree=1)
    if kind == "adaptive":
        return AdaptiveHeldOut(HeldOut(X, Y, w, kernels, [], degree=1), [width])
    return HeldOut(X, Y, w, kernels, [width], degree=1)


def _reference_row(kind, kernel, width, data, i, allowed):
    """The weights ``a`` of held-out row ``i`` over its ``allowed`` keys by a
    loop (up to a factor, through their logarithms), and its safeguarded
    fit."""
    X, Y, w, codes = data
    u = np.sqrt(np.sum((X - X[i]) ** 2, axis=1))
    keys = allowed & (w > 0)
    if kind == "adaptive":
        u /= np.sort(u[keys])[width - 1]
    else:
        u /= width
    log_alpha = LOG_FORMULAS.get(kernel)
    with np.errstate(divide="ignore"):
        if log_alpha is None:
            logits = np.log([FORMULAS[kernel](v) for v in u])
        else:
            logits = np.array([log_alpha(v) for v in u])
        logits += np.log(w)
        if kind == "categorical":
            logits += np.where(codes[:, 0] != codes[i, 0], math.log(LAMBDA), 0.0)
    logits[~keys] = -np.inf
    if not np.isfinite(logits.max()):
        return None  # no key in the support: an empty neighbourhood
    a = np.exp(logits - logits.max())
    p = a / a.sum()
    Z = X[keys]
    return safeguarded_row(p[keys], Z, Y[keys], X[i], Z.mean(axis=0))


def _layouts(n):
    """``(name, rows, allowed keys of each row, sums)`` of leave-one-out,
    K-fold and a split whose training part is not the rest of the points."""
    groups = np.random.default_rng(3).permutation(np.arange(n) % 4)
    test, train = np.arange(0, n, 3), np.r_[np.arange(1, n, 3), 2, 38]
    in_train = np.isin(np.arange(n), train)
    return [
        ("leave-one-out", np.arange(n), lambda i: np.arange(n) != i, None, None),
        ("k-fold", np.arange(n), lambda i: groups != groups[i], groups, None),
        ("split", test, lambda i: in_train, None, train),
    ]


@pytest.mark.parametrize("kind, kernel, width", CASES)
def test_held_out_fits_follow_the_rule_on_the_keys_of_each_fit(kind, kernel, width):
    data = _data()
    X, Y, w, codes = data
    held = _engine(kind, kernel, width, X, Y, w, codes)
    shrunk_somewhere = False
    for name, rows, allowed, groups, train in _layouts(len(X)):
        if train is None:
            sums = held.sums_excluding_groups(groups)
        else:
            sums = held.sums_split(rows, train)
        predictions, empty, _, _, shrunk = held.predictions(sums, rows, groups, train)
        ratio = sums.kish((0, 0), KERNELS[kernel])
        for r, i in enumerate(rows):
            ref = _reference_row(kind, kernel, width, data, i, allowed(i))
            if ref is None:
                assert empty[0, 0, r], (name, i)
                continue
            where = f"{name}, row {i}"
            assert_allclose(ratio[r], ref["kish"], rtol=1e-9, err_msg=where)
            assert shrunk[0, 0, r] == (ref["shrinkage"] < 1.0), where
            assert_allclose(
                predictions[0, 0, r], ref["mean"], rtol=1e-7, atol=1e-9, err_msg=where
            )
        shrunk_somewhere |= bool(shrunk.any())
    assert shrunk_somewhere


def test_a_key_far_from_every_other_is_its_refit():
    # The key alone at 29 widths from the others: its leave-one-out weights
    # are about exp(-426) and their squares underflow (the row is recomputed
    # with a shift); its moments about the centre of the keys cancel, and it
    # is fitted again about its local means from its weights. Its fit is
    # carried by the nearest keys, of n_eff near 1: its slope is shrunk away,
    # as the refit without it shrinks it.
    X, Y, w, _ = _data()
    h, i = 0.1, len(X) - 1
    held = HeldOut(X, Y, w, [KERNELS["gaussian"]], [h], degree=1)
    predictions, _, _, _, shrunk = held.predictions(
        held.sums_excluding_groups(None), np.arange(len(X))
    )
    keep = np.arange(len(X)) != i
    reg = KernelAttentionRegressor("gaussian", h, degree=1)
    reg.fit(X[keep], Y[keep], sample_weight=w[keep])
    with pytest.warns(LocalLinearFallbackWarning):
        refit = reg.predict(X[[i]])[0]
    expected = safeguarded_fit(
        X[keep],
        Y[keep],
        X[[i]],
        FORMULAS["gaussian"],
        h,
        w[keep],
        LOG_FORMULAS["gaussian"],
    )
    assert expected["shrinkage"][0] == 0.0 and shrunk[0, 0, i]
    assert_allclose(predictions[0, 0, i], expected["mean"][0], rtol=1e-10)
    assert_allclose(predictions[0, 0, i], refit, rtol=1e-10)


def _leverage_data(seed=0):
    """A plane with a key of high leverage: h / (1 - h) of about 4."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.uniform(-1, 1, (20, 2)), [[4.0, 3.0]]]
    y = X @ [1.5, -2.0] + 0.5 + rng.normal(0, 0.3, len(X))
    return X, y[:, None], rng.uniform(0.5, 2.0, len(X))


def _wls_refits(X, y, w, splits):
    """Weighted least-squares lines refitted on each training part."""
    predictions = np.empty((len(X), y.shape[1]))
    for train, test in splits:
        line = LinearRegression().fit(X[train], y[train], sample_weight=w[train])
        predictions[test] = line.predict(X[test])
    return predictions


def test_the_global_line_is_least_squares_at_every_held_out_point():
    # The constant kernel weighs every key alike: its held-out fits are the
    # least-squares lines of their training parts, never shrunk, even at a
    # key whose line is extrapolated four times the noise of one
    # observation away.
    X, y, w = _leverage_data()
    n = len(X)
    held = HeldOut(X, y, w, [KERNELS["constant"]], [1.0], degree=1)
    sums = held.sums_excluding_groups(None)
    assert np.all(sums.kish((0, 0), KERNELS["constant"]) == 0.0)
    predictions, _, _, _, shrunk = held.predictions(sums, np.arange(n))
    loo = [(np.delete(np.arange(n), i), [i]) for i in range(n)]
    assert_allclose(predictions[0, 0], _wls_refits(X, y, w, loo), rtol=1e-10)
    assert not shrunk.any()
    groups = np.arange(n) % 3
    folds = [
        (np.flatnonzero(groups != g), np.flatnonzero(groups == g)) for g in range(3)
    ]
    sums = held.sums_excluding_groups(groups)
    predictions = held.predictions(sums, np.arange(n), groups)[0]
    assert_allclose(predictions[0, 0], _wls_refits(X, y, w, folds), rtol=1e-10)
    # In sample: the least-squares fit, whose hat matrix has trace d + 1.
    fitted, self_weight = held.in_sample(held.sums_excluding_groups(None))
    line = LinearRegression().fit(X, y, sample_weight=w)
    assert_allclose(fitted[0, 0], line.predict(X), rtol=1e-10)
    assert_allclose(self_weight.sum(), 3.0, rtol=1e-10)


def test_an_infinite_width_is_least_squares_where_the_leverage_is_at_most_one():
    # Left out, a key's leverage in the line of the others is h / (1 - h),
    # h its leverage in the line of all: up to one, the fit is least
    # squares; above, its slope is shrunk.
    X, y, w = _leverage_data()
    n = len(X)
    w = np.ones(n)
    held = HeldOut(X, y, w, [KERNELS["gaussian"]], [1e6], degree=1)
    predictions, _, _, _, shrunk = held.predictions(
        held.sums_excluding_groups(None), np.arange(n)
    )
    design = np.c_[np.ones(n), X]
    h = np.einsum("ij,ji->i", design, np.linalg.pinv(design))
    outside = h / (1 - h) > 1
    assert outside.sum() == 1
    loo = [(np.delete(np.arange(n), i), [i]) for i in range(n)]
    lines = _wls_refits(X, y, w, loo)
    assert_allclose(predictions[0, 0, ~outside], lines[~outside], rtol=1e-6)
    assert np.array_equal(shrunk[0, 0], outside)
    assert np.all(np.abs(predictions[0, 0, outside] - lines[outside]) > 1e-3)


@pytest.mark.parametrize("kernel, width", [("gaussian", 0.2), ("epanechnikov", 0.4)])
def test_in_sample_fits_and_self_weights_follow_the_rule(kernel, width):
    # The fit of all the data at each key and the diagonal of its smoother
    # matrix, completed from the leave-one-out sums, against the
    # safeguarded fits of every key (the lighter key of the pair, of
    # leverage above one, is shrunk in sample too).
    X, Y, w, _ = _data()
    X, Y, w = X[:-1], Y[:-1], w[:-1]
    held = HeldOut(X, Y, w, [KERNELS[kernel]], [width], degree=1)
    fitted, self_weight = held.in_sample(held.sums_excluding_groups(None))
    expected = safeguarded_fit(
        X, Y, X, FORMULAS[kernel], width, w, LOG_FORMULAS.get(kernel)
    )
    assert np.any(expected["shrinkage"][w > 0] < 1.0)
    assert_allclose(fitted[0, 0], expected["mean"], rtol=1e-8, atol=1e-10)
    diagonal = np.where(w > 0, np.diag(expected["weights"]), 0.0)
    assert_allclose(self_weight[0, 0], diagonal, rtol=1e-8, atol=1e-12)
