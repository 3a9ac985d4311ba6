"""Adaptive (nearest-neighbour) widths: ``n_neighbors``."""

import math
import pickle
import warnings

import numpy as np
import pytest
from _array_api import strict_namespace
from _memory import traced_peak
from _reference import FORMULAS, safeguarded_row
from sklearn import config_context

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool.kernels import KERNELS

COMPACT = sorted(name for name in FORMULAS if KERNELS[name].is_compact)
ALGORITHMS = {name: ["brute", "kd_tree", "ball_tree"] for name in COMPACT}


def squared_exponential(u):
    """A user kernel: a callable of the array of scaled distances."""
    return np.exp(-u * u)


FORMULAS_AND_USER = {**FORMULAS, "user": lambda u: math.exp(-u * u)}


def adaptive_fit(X, y, Q, alpha, bandwidth, k, sample_weight=None, degree=0):
    """Adaptive-width local fits by a loop over the queries.

    Each query's width is ``h * d_k`` with ``d_k`` the distance to its k-th
    nearest key of positive weight, in coordinates divided by ``h / g``
    (``g`` the geometric mean of ``h``); keys at distance zero alone weigh
    when ``d_k`` is zero. Returns (mean, std, weights) as
    ``_reference.local_fit``, the local-linear fits (degree 1) by
    ``_reference.safeguarded_row``; a query with no positive weight gets
    its nearest keys (ties shared by weight).
    """
    X, Q = np.asarray(X, dtype=float), np.asarray(Q, dtype=float)
    Y = np.asarray(y, dtype=float).reshape(len(X), -1)
    h = np.broadcast_to(np.asarray(bandwidth, dtype=float), (X.shape[1],))
    g = math.exp(np.mean(np.log(h)))
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, float)
    mean = np.empty((len(Q), Y.shape[1]))
    std = np.empty_like(mean)
    weights = np.zeros((len(Q), len(X)))
    for j, q in enumerate(Q):
        z2 = np.array(
            [sum(((q[f] - x[f]) / h[f]) ** 2 for f in range(len(q))) for x in X]
        )
        positive = w > 0
        radius = g * math.sqrt(np.sort(z2[positive])[k - 1])
        a = np.zeros(len(X))
        for i in np.flatnonzero(positive):
            if radius == 0:
                a[i] = w[i] * (z2[i] == 0)
            else:
                a[i] = w[i] * alpha(math.sqrt(z2[i]) / radius)
        if a.sum() == 0:  # on_empty="nearest"
            nearest = z2[positive].min()
            a = w * positive * (z2 == nearest)
        p = a / a.sum()
        if degree == 1:
            # The documented local-linear rule, with its slope safeguard.
            Z = X[positive] / h
            row = safeguarded_row(p[positive], Z, Y[positive], q / h, Z.mean(axis=0))
            mean[j], std[j] = row["mean"], row["std"]
            weights[j, positive] = row["weights"]
            continue
        design = np.ones((len(X), 1))
        root = np.sqrt(p)[:, None]
        hat = np.linalg.pinv(root * design, rcond=1e-10) * root.T
        coef = hat @ Y
        residuals = Y - design @ coef
        mean[j], std[j], weights[j] = coef[0], np.sqrt(p @ residuals**2), hat[0]
    if np.ndim(y) == 1:
        mean, std = mean[:, 0], std[:, 0]
    return mean, std, weights


def _data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    # Uneven density: the case adaptive widths are for.
    X = rng.standard_normal((n, d)) * np.where(rng.random((n, 1)) < 0.5, 0.3, 2.0)
    y = np.sin(X[:, 0]) + X[:, -1] ** 2 + 0.1 * rng.standard_normal(n)
    Q = rng.standard_normal((15, d)) * 1.5
    return X, y, Q


def _fit(estimator, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return estimator.fit(*args, **kwargs)


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return function(*args, **kwargs)


@pytest.mark.parametrize("name", sorted(FORMULAS_AND_USER))
@pytest.mark.parametrize("bandwidth", [1.0, 1.7, [0.5, 2.0]])
@pytest.mark.parametrize("degree", [0, 1])
def test_matches_loop(name, bandwidth, degree):
    """Predictions, spreads and weights equal the loop, on every path."""
    X, y, Q = _data()
    rng = np.random.default_rng(1)
    sample_weight = rng.uniform(0.5, 3.0, len(X))
    sample_weight[:5] = 0.0
    k = 12
    kernel = squared_exponential if name == "user" else name
    mean, std, weights = adaptive_fit(
        X, y, Q, FORMULAS_AND_USER[name], bandwidth, k, sample_weight, degree
    )
    for algorithm in ALGORITHMS.get(name, ["brute"]):
        reg = KernelAttentionRegressor(
            kernel, bandwidth, degree=degree, n_neighbors=k, algorithm=algorithm
        )
        _fit(reg, X, y, sample_weight=sample_weight)
        got_mean, got_std = _quiet(reg.predict, Q, return_std=True)
        np.testing.assert_allclose(got_mean, mean, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got_std, std, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(_quiet(reg.predict, Q), mean, rtol=1e-9, atol=1e-9)
        got = _quiet(reg.attention_weights, Q)
        np.testing.assert_allclose(got, weights, rtol=1e-8, atol=1e-10)
        sparse = _quiet(reg.attention_weights, Q, sparse=True).toarray()
        np.testing.assert_allclose(sparse, weights, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", COMPACT)
def test_one_feature_sorted_keys(name):
    """The one-dimensional k-d tree (sorted keys) honours adaptive widths."""
    rng = np.random.default_rng(3)
    X = np.sort(rng.exponential(size=(80, 1)), axis=0)
    y = np.log1p(X[:, 0]) + 0.05 * rng.standard_normal(80)
    Q = np.linspace(-0.5, 4, 40)[:, None]
    for degree in (0, 1):
        mean, _, _ = adaptive_fit(X, y, Q, FORMULAS[name], 1.3, 6, degree=degree)
        for algorithm in ("brute", "kd_tree"):
            reg = KernelAttentionRegressor(
                name, 1.3, degree=degree, n_neighbors=6, algorithm=algorithm
            )
            got = _quiet(_fit(reg, X, y).predict, Q)
            np.testing.assert_allclose(got, mean, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["gaussian", "epanechnikov", "boxcar"])
def test_width_follows_density(name):
    """Where keys are dense the weights are concentrated, where sparse spread."""
    X = np.concatenate([np.linspace(0, 1, 50), np.linspace(2, 12, 50)])[:, None]
    reg = KernelAttentionRegressor(name, 1.0, n_neighbors=5).fit(X, X[:, 0])
    w = reg.attention_weights([[0.5], [7.0]])
    # The spread of the weights scales with the spacing of the keys (ten
    # times larger on the right); a fixed width would give the same spread.
    spread = np.sqrt(w @ X[:, 0] ** 2 - (w @ X[:, 0]) ** 2)
    assert 7 < spread[1] / spread[0] < 14


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize(
    "kernel,algorithm",
    [
        ("gaussian", "brute"),
        ("epanechnikov", "brute"),
        ("epanechnikov", "kd_tree"),
        ("biweight", "ball_tree"),
        (squared_exponential, "brute"),
    ],
)
def test_zero_neighbour_distance(kernel, algorithm, degree):
    """A query whose k-th neighbour is at distance zero gets the keys at
    distance zero, pooled with their sample weights."""
    rng = np.random.default_rng(4)
    X = np.vstack([np.zeros((3, 2)), rng.standard_normal((30, 2))])
    y = np.concatenate([[1.0, 2.0, 10.0], rng.standard_normal(30)])
    sample_weight = np.concatenate([[1.0, 3.0, 0.0], np.ones(30)])
    reg = KernelAttentionRegressor(
        kernel, 1.0, n_neighbors=2, algorithm=algorithm, degree=degree
    )
    reg.fit(X, y, sample_weight=sample_weight)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        mean, std = reg.predict([[0.0, 0.0]], return_std=True)
        weights = reg.attention_weights([[0.0, 0.0]])
    np.testing.assert_allclose(mean, [1.75])
    np.testing.assert_allclose(std, [np.sqrt(0.25 * 0.75**2 + 0.75 * 0.25**2)])
    np.testing.assert_allclose(weights[0, :3], [0.25, 0.75, 0.0])
    np.testing.assert_allclose(weights[0, 3:], 0.0, atol=1e-12)
    # The other queries are untouched: their k-th neighbour is not at zero.
    # (Compact kernels hold a single key strictly inside the support of the
    # second neighbour: no local-linear fit there.)
    if degree == 0 or not isinstance(kernel, str) or kernel == "gaussian":
        Q = rng.standard_normal((5, 2))
        alpha = FORMULAS_AND_USER[kernel if isinstance(kernel, str) else "user"]
        want, _, _ = adaptive_fit(X, y, Q, alpha, 1.0, 2, sample_weight, degree)
        got = _quiet(reg.predict, Q)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_weight_counts_as_one_neighbour():
    """Under n_neighbors a positive weight is one neighbour, not copies."""
    X = np.array([[0.0], [1.0], [2.0], [4.0]])
    y = np.array([0.0, 1.0, 2.0, 3.0])
    weighted = KernelAttentionRegressor("boxcar", 1.01, n_neighbors=2)
    weighted.fit(X, y, sample_weight=[3.0, 1.0, 1.0, 1.0])
    # The second neighbour of 0.2 is the key at 1 (not a copy of the key at
    # 0): the support reaches 0.8 * 1.01 and holds both keys.
    np.testing.assert_allclose(
        weighted.attention_weights([[0.2]])[0], [0.75, 0.25, 0, 0]
    )
    copies = KernelAttentionRegressor("boxcar", 1.01, n_neighbors=2)
    copies.fit(np.repeat(X, [3, 1, 1, 1], axis=0), np.repeat(y, [3, 1, 1, 1]))
    # With copies the second neighbour is a copy, at distance 0.2.
    assert copies.predict([[0.2]])[0] == 0.0
    # Weight zero counts as no neighbour.
    zero = KernelAttentionRegressor("boxcar", 1.01, n_neighbors=2)
    zero.fit(X, y, sample_weight=[1.0, 0.0, 1.0, 1.0])
    np.testing.assert_allclose(zero.attention_weights([[0.2]])[0], [0.5, 0, 0.5, 0])


def test_too_many_neighbours():
    X = np.arange(5.0)[:, None]
    msg = r"n_neighbors=5 exceeds the training rows of positive sample weight \(4 "
    with pytest.raises(ValueError, match=msg):
        KernelAttentionRegressor(n_neighbors=5).fit(X, X[:, 0], [1, 1, 0, 1, 1])
    with pytest.raises(ValueError, match="n_neighbors=6 exceeds"):
        KernelAttentionClassifier(n_neighbors=6).fit(X, [0, 1, 0, 1, 0])
    KernelAttentionRegressor(n_neighbors=5).fit(X, X[:, 0])  # every row counts
    for bad in (0, -1, 2.5, "3"):
        with pytest.raises(ValueError, match="n_neighbors"):
            KernelAttentionRegressor(n_neighbors=bad).fit(X, X[:, 0])


def test_classifier_matches_loop():
    X, y, Q = _data(d=2)
    labels = np.digitize(y, [0.0, 1.5])
    onehot = np.eye(3)[labels]
    proba, _, _ = adaptive_fit(X, onehot, Q, FORMULAS["tricube"], 1.2, 9)
    for algorithm in ("brute", "kd_tree"):
        clf = KernelAttentionClassifier(
            "tricube", 1.2, n_neighbors=9, algorithm=algorithm
        ).fit(X, labels)
        np.testing.assert_allclose(_quiet(clf.predict_proba, Q), proba, atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree", [0, 1])
def test_chunks_and_threads_do_not_change_the_bits(kernel, degree):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 3))
    y = X[:, 0] + rng.standard_normal(3000)
    Q = rng.standard_normal((700, 3))
    reg = KernelAttentionRegressor(kernel, 1.5, n_neighbors=30, degree=degree)
    reg.fit(X, y)
    reference = reg.predict(Q)
    with config_context(working_memory=1):
        small = reg.set_params(n_jobs=2).predict(Q)
    np.testing.assert_array_equal(small, reference)
    tree = KernelAttentionRegressor(kernel, 1.5, n_neighbors=30, degree=degree)
    if kernel == "epanechnikov":
        tree.set_params(algorithm="kd_tree").fit(X, y)
        with config_context(working_memory=1):
            np.testing.assert_allclose(tree.predict(Q), reference, rtol=1e-10)


def test_float32():
    X, y, Q = _data()
    want = KernelAttentionRegressor(n_neighbors=10).fit(X, y).predict(Q)
    got = KernelAttentionRegressor(n_neighbors=10).fit(X.astype(np.float32), y)
    np.testing.assert_allclose(got.predict(Q.astype(np.float32)), want, rtol=1e-5)


def test_pickle_round_trip():
    X, y, Q = _data()
    reg = KernelAttentionRegressor("biweight", 1.4, n_neighbors=10, degree=1)
    reg.fit(X, y)
    loaded = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(loaded.predict(Q), reg.predict(Q))
    state = reg._pool.__getstate__()
    for bad in (0, len(X) + 1, 2.0, "3"):
        state["arguments"]["n_neighbors"] = bad
        with pytest.raises(ValueError, match="n_neighbors"):
            reg._pool.__setstate__(state)


def test_auto_algorithm_knows_widths_vary():
    """auto picks a tree for adaptive compact widths only when the support
    holds few keys, whatever the fixed bandwidth would hold."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((5000, 2))
    y = X[:, 0]
    reg = KernelAttentionRegressor("epanechnikov", 1.0, n_neighbors=20).fit(X, y)
    assert reg.algorithm_ == "kd_tree"
    wide = KernelAttentionRegressor("epanechnikov", 30.0, n_neighbors=20).fit(X, y)
    assert wide.algorithm_ == "brute"


def test_array_api_refused():
    xp = strict_namespace()
    X = xp.asarray(np.arange(10.0).reshape(5, 2))
    y = xp.asarray(np.arange(5.0))
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="n_neighbors=2 .*NumPy arrays only"):
            KernelAttentionRegressor(n_neighbors=2).fit(X, y)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
def test_on_empty_policies(algorithm):
    """A multiplier below 1 can leave a compact support empty: every policy
    applies as for fixed widths, and the warning names the adaptive width."""
    X, y, Q = _data()
    options = dict(kernel="boxcar", bandwidth=0.5, n_neighbors=1, algorithm=algorithm)
    # The nearest key lies at scaled distance 2 > 1: every query is empty.
    reg = KernelAttentionRegressor(on_empty="nearest", **options).fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning, match="times the distance to the 1st"):
        nearest = reg.predict(Q)
    want = y[np.argmin(((Q[:, None] - X[None]) ** 2).sum(axis=2), axis=1)]
    np.testing.assert_array_equal(nearest, want)
    reg = KernelAttentionRegressor(on_empty="mean", **options).fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning):
        np.testing.assert_allclose(reg.predict(Q), y.mean())
    reg = KernelAttentionRegressor(on_empty="nan", **options).fit(X, y)
    with pytest.warns(EmptyNeighborhoodWarning):
        assert np.all(np.isnan(reg.predict(Q)))
    reg = KernelAttentionRegressor(on_empty="raise", **options).fit(X, y)
    with pytest.raises(ValueError, match="15 of 15 queries"):
        reg.predict(Q)


@pytest.mark.parametrize(
    "kernel,algorithm,degree",
    [
        ("gaussian", "brute", 0),
        ("gaussian", "brute", 1),
        ("epanechnikov", "kd_tree", 0),
        ("epanechnikov", "kd_tree", 1),
    ],
)
def test_memory_stays_within_that_of_fixed_widths(kernel, algorithm, degree):
    """The neighbour search and the per-query scales add little to a chunk:
    predictions stay within the peak of fixed widths under working_memory."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((10000, 3))
    y = X[:, 0]
    Q = rng.standard_normal((2000, 3))
    peaks = []
    for options in (dict(bandwidth=0.5), dict(bandwidth=1.0, n_neighbors=50)):
        reg = KernelAttentionRegressor(
            kernel, degree=degree, algorithm=algorithm, **options
        ).fit(X, y)
        peaks.append(_quiet(traced_peak, lambda reg=reg: reg.predict(Q), 2)[1])
    assert peaks[1] <= peaks[0] + 2**20, [p / 2**20 for p in peaks]


def test_boxcar_just_past_the_kth_neighbour_is_k_nearest_neighbours():
    """The analogue of KNeighborsRegressor that the guide gives."""
    from sklearn.neighbors import KNeighborsRegressor

    rng = np.random.default_rng(8)
    X, y, Q = rng.normal(size=(200, 3)), rng.normal(size=200), rng.normal(size=(50, 3))
    want = KNeighborsRegressor(7).fit(X, y).predict(Q)
    for algorithm in ("brute", "kd_tree", "ball_tree"):
        reg = KernelAttentionRegressor(
            "boxcar", 1 + 1e-9, n_neighbors=7, algorithm=algorithm
        ).fit(X, y)
        np.testing.assert_allclose(reg.predict(Q), want, rtol=1e-12)
