"""The safeguard of local-linear fits on every path, against the documented rule.

Each query's slope is shrunk to ``s beta`` by its leverage in its local fit,
``(1 + D**2) / n_eff`` (:mod:`sklearn_kernelpool._engine._safeguard`).
:func:`_reference.safeguarded_fit` computes the rule query by query with
dense NumPy solves; ``predict`` on every engine, the attention weights, the
spread, the gradient, the standard errors, the held-out fits of the
cross-validation and the counts of the warning must follow it.
"""

import warnings

import numpy as np
import pytest
from _dask import local_client
from _reference import FORMULAS, safeguarded_fit
from numpy.testing import assert_allclose
from sklearn import config_context
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._engine import _moments as _moment_pooling

LOG_FORMULAS = {"gaussian": lambda u: -(u**2) / 2}
KERNELS = ["gaussian", "epanechnikov", "tricube"]
WIDTH = 0.3


def _isolated_pair():
    """The data of the safeguard: 50 keys on [-1, 1] and two close keys far
    from them, at 3.0 and 3.001 with values 5.0 and 5.3, whose line has a
    slope of 300 (the plain fit predicted 305 at 4.001); a second output of
    slope 100 there; sample weights."""
    rng = np.random.default_rng(0)
    X = np.r_[np.linspace(-1, 1, 50), 3.0, 3.001][:, None]
    Y = np.column_stack(
        [
            np.r_[np.sin(3 * X[:50, 0]), 5.0, 5.3],
            np.r_[np.cos(2 * X[:50, 0]), -1.0, -0.9],
        ]
    )
    return X, Y, rng.uniform(0.5, 2.0, len(X))


# Queries inside the data, beyond its boundary at 1, between and just beyond
# the two close keys, and (unbounded kernels) far beyond: 3.5, 4.001 and 50
# standard deviations of the keys away. Compact kernels reach the pair only
# within one width of it.
_X, _, _ = _isolated_pair()
QUERIES = {
    "gaussian": [0.25, 1.2, 1.4, 1.6, 2.0, 3.0005, 3.0022, 3.003, 3.004, 3.5]
    + [4.001]
    + [3.001 + 50 * _X.std()],
    "compact": [0.25, 1.1, 1.2, 3.0005, 3.0022, 3.003, 3.004, 3.2, 3.25],
}


def _queries(kernel):
    return np.array(QUERIES["gaussian" if kernel == "gaussian" else "compact"])[:, None]


def _reference(X, Y, Q, kernel, width, w=None):
    return safeguarded_fit(
        X, Y, Q, FORMULAS[kernel], width, w, log_alpha=LOG_FORMULAS.get(kernel)
    )


def _quietly(method, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return method(*args, **kwargs)


def _paths(kernel):
    return ["brute"] + ([] if kernel == "gaussian" else ["kd_tree", "ball_tree"])


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_reference_data_shrink_some_slopes(kernel):
    # The data of the tests below hold queries of every kind: s = 1,
    # 0 < s < 1, and s = 0 to rounding.
    X, Y, w = _isolated_pair()
    s = _reference(X, Y, _queries(kernel), kernel, WIDTH, w)["shrinkage"]
    assert np.any(s == 1.0)
    assert np.any((s > 0.5) & (s < 1.0)) and np.any((s > 1e-6) & (s < 0.5))
    assert np.any(s < 1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
def test_predict_follows_the_rule_on_brute_force_and_trees(kernel):
    X, Y, w = _isolated_pair()
    Q = _queries(kernel)
    expected = _reference(X, Y, Q, kernel, WIDTH, w)
    # The old plain fit extrapolated the slope of 300 beyond the pair.
    assert np.all(np.abs(expected["mean"]) < 6.0)
    for path in _paths(kernel):
        reg = KernelAttentionRegressor(kernel, WIDTH, degree=1, algorithm=path)
        reg.fit(X, Y, sample_weight=w)
        mean, std = _quietly(reg.predict, Q, return_std=True)
        assert_allclose(mean, expected["mean"], rtol=1e-10, atol=1e-11)
        # The spread is the root of a difference of moments, 0 at the
        # queries between the two keys: compared as variances.
        assert_allclose(std**2, expected["std"] ** 2, rtol=1e-9, atol=1e-13)


def _two_features():
    """80 keys in the unit square, queries inside and beyond it."""
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (80, 2))
    Y = np.column_stack([np.sin(3 * X[:, 0]) + X[:, 1] ** 2, X[:, 0] - X[:, 1]])
    Q = np.array([[0.5, 0.5], [0.9, 0.2], [1.2, 1.2], [1.35, 0.5], [-0.3, -0.2]])
    return X, Y, rng.uniform(0.5, 2.0, 80), Q


@pytest.mark.parametrize("kernel", KERNELS)
def test_two_features_follow_the_rule(kernel):
    X, Y, w, Q = _two_features()
    width = 0.3 if kernel == "gaussian" else 0.6
    expected = _reference(X, Y, Q, kernel, width, w)
    assert np.any(expected["shrinkage"] < 1.0) and expected["shrinkage"][0] == 1.0
    for path in _paths(kernel):
        reg = KernelAttentionRegressor(kernel, width, degree=1, algorithm=path)
        reg.fit(X, Y, sample_weight=w)
        mean, std = _quietly(reg.predict, Q, return_std=True)
        assert_allclose(mean, expected["mean"], rtol=1e-10, atol=1e-11)
        assert_allclose(std**2, expected["std"] ** 2, rtol=1e-9, atol=1e-13)
        weights = _quietly(reg.attention_weights, Q)
        assert_allclose(weights, expected["weights"], rtol=1e-9, atol=1e-12)
        gradient = _quietly(reg.predict_gradient, Q)
        assert_allclose(gradient, expected["gradient"], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kernel", KERNELS)
def test_weights_spread_and_gradient_use_the_shrunk_slope(kernel):
    X, Y, w = _isolated_pair()
    Q = _queries(kernel)
    expected = _reference(X, Y, Q, kernel, WIDTH, w)
    reg = KernelAttentionRegressor(kernel, WIDTH, degree=1).fit(X, Y, sample_weight=w)
    mean = _quietly(reg.predict, Q)
    for sparse in (False, True):
        weights = _quietly(reg.attention_weights, Q, sparse=sparse)
        weights = weights.toarray() if sparse else weights
        # The equivalent kernel of the shrunk fit: its rows give predict.
        assert_allclose(weights, expected["weights"], rtol=1e-9, atol=1e-12)
        assert_allclose(weights @ Y, mean, rtol=1e-10, atol=1e-11)
    # The slope of predict_gradient is the shrunk one, s beta / h: zero far
    # beyond the pair, not the line's 300.
    gradient = _quietly(reg.predict_gradient, Q)
    assert_allclose(gradient, expected["gradient"], rtol=1e-9, atol=1e-9)
    assert np.all(np.abs(gradient[expected["shrinkage"] < 1e-12]) < 1e-9)


def _standard_errors(X, Y, Q, kernel, w):
    """``sqrt(sum_i l_i(q)**2 sigma_i**2)`` of the documented smoother: the
    residual variances ``e_i**2 / d_i``, ``d_i = 1 - 2 L_ii + sum_j L_ij**2``,
    from the smoother matrix ``L`` of the shrunk equivalent kernels on the
    keys; rows with ``d_i <= 1e-8`` (a key its own fit interpolates) get the
    pooled ``sum_k e_k**2 / sum_k d_k`` of the others."""
    L = _reference(X, Y, X, kernel, WIDTH, w)["weights"]
    residuals = Y - L @ Y
    correction = 1.0 - 2.0 * np.diag(L) + np.sum(L**2, axis=1)
    informative = correction > 1e-8
    variance = np.empty_like(Y)
    variance[informative] = residuals[informative] ** 2 / correction[informative, None]
    pooled = np.sum(residuals[informative] ** 2, axis=0) / correction[informative].sum()
    variance[~informative] = pooled
    l_q = _reference(X, Y, Q, kernel, WIDTH, w)["weights"]
    return np.sqrt(l_q**2 @ variance)


@pytest.mark.parametrize("kernel", KERNELS)
def test_standard_errors_use_the_shrunk_equivalent_kernel(kernel):
    X, Y, w = _isolated_pair()
    Q = _queries(kernel)
    reg = KernelAttentionRegressor(kernel, WIDTH, degree=1).fit(X, Y, sample_weight=w)
    _, se = _quietly(reg.predict, Q, return_se=True)
    assert_allclose(se, _standard_errors(X, Y, Q, kernel, w), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("kernel", KERNELS)
def test_per_query_equations_follow_the_rule(kernel, monkeypatch):
    # Without the moment matrix (many features: each query's equations are
    # summed from its weighted keys), the same rule and the same counts.
    X, Y, w = _isolated_pair()
    Q = _queries(kernel)
    expected = _reference(X, Y, Q, kernel, WIDTH, w)
    s = expected["shrinkage"]
    reg = KernelAttentionRegressor(kernel, WIDTH, degree=1).fit(X, Y, sample_weight=w)
    monkeypatch.setattr(_moment_pooling, "MOMENT_MATRIX_FLOOR", 0)
    # 8 KiB: less than four times the moment matrix, more than one query's
    # equations.
    with config_context(working_memory=8 / 1024):
        assert not reg._pool.moments.uses_moment_matrix()
        mean, std = _quietly(reg.predict, Q, return_std=True)
        weights = _quietly(reg.attention_weights, Q)
        for method in (reg.predict, reg.attention_weights):
            (warning,) = _caught(method, Q)
            assert warning.n_shrunk == np.count_nonzero(s < 1.0)
            assert warning.mean_shrinkage == pytest.approx(np.mean(1.0 - s))
    assert_allclose(mean, expected["mean"], rtol=1e-10, atol=1e-11)
    assert_allclose(std**2, expected["std"] ** 2, rtol=1e-9, atol=1e-13)
    assert_allclose(weights, expected["weights"], rtol=1e-9, atol=1e-12)


def _grid_reference(pool, X, Y, w, kernel, width, nodes):
    """The rule applied to the binned keys: the grid nodes, each weighing
    the linear-binning shares ``w_i prod_j (1 - |t_ij - node_j|)`` of the
    keys of its cells, with their weighted mean value; at the ``nodes``.
    Kish's ``n_eff`` counts the squared weights binned the same way,
    ``w_i**2 prod_j (1 - |t_ij - node_j|)`` at each node (the documented
    approximation of ``sum_i a_i**2``). The spread adds the weighted spread
    of the values binned at each node."""
    grid = pool.binned.grid
    t = (X - grid.lower) / grid.step
    base = np.floor(t).astype(int)
    weight, value, square, weight_sq = {}, {}, {}, {}
    for i in range(len(X)):
        for corner in np.ndindex(*(2,) * X.shape[1]):
            node = tuple(base[i] + corner)
            share = np.prod(1.0 - np.abs(t[i] - node))
            weight[node] = weight.get(node, 0.0) + share * w[i]
            value[node] = value.get(node, 0.0) + share * w[i] * Y[i]
            square[node] = square.get(node, 0.0) + share * w[i] * Y[i] ** 2
            weight_sq[node] = weight_sq.get(node, 0.0) + share * w[i] ** 2
    held = [node for node in weight if weight[node] > 0]
    keys = grid.lower + grid.step * np.array(held, dtype=float)
    node_w = np.array([weight[node] for node in held])
    node_y = np.array([value[node] / weight[node] for node in held])
    node_w_sq = np.array([weight_sq[node] for node in held])
    Q = grid.lower + grid.step * np.asarray(nodes, dtype=float)
    expected = safeguarded_fit(
        keys,
        node_y,
        Q,
        FORMULAS[kernel],
        width,
        node_w,
        log_alpha=LOG_FORMULAS.get(kernel),
        square_weight=node_w_sq,
    )
    # The binned squares hold the spread of the values within each node too.
    within = np.array([square[node] / weight[node] for node in held]) - node_y**2
    expected["std"] = np.sqrt(expected["std"] ** 2 + expected["attention"] @ within)
    return Q, expected


def _binned_data(d):
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (200, d))
    Y = np.column_stack([np.sin(3 * X.sum(axis=1)), X[:, 0] ** 2])
    return X, Y, rng.uniform(0.5, 2.0, 200)


@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.CoarseGridWarning")
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("d", [1, 2])
def test_binned_follows_the_rule_on_the_binned_keys(kernel, d):
    # The binned engine convolves the linearly binned keys with the kernel:
    # at a grid node, its sums are those of the nodes as keys, and its
    # prediction the rule applied to them (up to the rounding of the FFT and
    # the truncation of unbounded kernels at 1e-12 of their peak). Nodes
    # beyond the keys, where slopes are shrunk, and inside them.
    X, Y, w = _binned_data(d)
    width = 0.1 if d == 1 else 0.25
    n_bins = 400 if d == 1 else 120
    reg = KernelAttentionRegressor(
        kernel, width, degree=1, algorithm="binned", n_bins=n_bins
    ).fit(X, Y, sample_weight=w)
    pool = reg._pool
    grid = pool.binned.grid
    # The nodes from the middle of the keys to beyond them: 2.5 widths for
    # the gaussian, 0.95 for the compact kernels (their support).
    beyond = 2.5 if kernel == "gaussian" else 0.95
    first = np.ceil((0.5 - grid.lower) / grid.step).astype(int)
    last = np.floor((1.0 + beyond * width - grid.lower) / grid.step).astype(int)
    every = 1 if d == 1 else 3
    axes = [np.arange(a, b + 1, every) for a, b in zip(first, last, strict=True)]
    nodes = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)
    # The nodes that the binned sums decide (the others, nearly singular
    # or of almost no weight, go to the exact engine).
    Q = grid.lower + grid.step * nodes
    _, _, doubtful, s = pool.binned.predict(Q, return_shrinkage=True)
    nodes, s = nodes[~doubtful], s[~doubtful]
    Q, expected = _grid_reference(pool, X, Y, w, kernel, width, nodes)
    # Enough of them shrunk; strongly so in 1-D (the binned sums leave the
    # strongly shrunk designs of compact kernels in 2-D, nearly singular, to
    # the exact engine).
    assert np.count_nonzero(s < 1.0) >= 5
    assert np.count_nonzero(s < 0.5) >= (1 if d == 1 or kernel == "gaussian" else 0)
    assert_allclose(s, expected["shrinkage"], rtol=1e-8, atol=1e-10)
    mean, std = _quietly(reg.predict, Q, return_std=True)
    scale = np.abs(Y).max()
    assert_allclose(mean, expected["mean"], rtol=1e-8, atol=1e-9 * scale)
    assert_allclose(std**2, expected["std"] ** 2, rtol=1e-7, atol=1e-9 * scale**2)


@pytest.fixture(scope="module")
def client():
    with local_client() as client:
        yield client


def test_dask_queries_and_dask_fits_follow_the_rule(client):
    da = pytest.importorskip("dask.array")
    # Dask queries of an estimator fitted in memory: chunk by chunk predict.
    X, Y, w = _isolated_pair()
    Q = _queries("gaussian")
    expected = _reference(X, Y, Q, "gaussian", WIDTH, w)
    reg = KernelAttentionRegressor(bandwidth=WIDTH, degree=1)
    reg.fit(X, Y, sample_weight=w)
    lazy = reg.predict(da.from_array(Q, chunks=(4, 1)))
    assert isinstance(lazy, da.Array)
    got = _quietly(lazy.compute)
    assert_allclose(got, expected["mean"], rtol=1e-10, atol=1e-11)
    # A binned fit on dask arrays holds the grid sums only: its predictions
    # follow the rule on the binned keys, as the in-memory binned fit does.
    X, Y, w = _binned_data(1)
    params = dict(bandwidth=0.1, degree=1, algorithm="binned", n_bins=400)
    memory = KernelAttentionRegressor(**params).fit(X, Y, sample_weight=w)
    dask_fit = KernelAttentionRegressor(**params).fit(
        da.from_array(X, chunks=(50, 1)),
        da.from_array(Y, chunks=(50, 2)),
        sample_weight=da.from_array(w, chunks=50),
    )
    grid = memory._pool.binned.grid
    nodes = np.arange(
        np.ceil((0.5 - grid.lower[0]) / grid.step[0]),
        np.floor((1.25 - grid.lower[0]) / grid.step[0]),
        3,
    )[:, None]
    Q, expected = _grid_reference(memory._pool, X, Y, w, "gaussian", 0.1, nodes)
    decided = ~memory._pool.binned.predict(Q)[2]
    assert np.count_nonzero(decided & (expected["shrinkage"] < 1.0)) >= 5
    got = _quietly(dask_fit.predict, Q)
    assert_allclose(got[decided], expected["mean"][decided], rtol=1e-8, atol=1e-9)


def test_statsmodels_agrees_where_no_slope_is_shrunk():
    # Well-conditioned local designs keep the plain local-linear fit: s = 1
    # at every query, and the predictions are statsmodels' (the setup of
    # test_local_linear's comparison, with queries inside the data).
    kernel_regression = pytest.importorskip(
        "statsmodels.nonparametric.kernel_regression"
    )
    for n_features in (1, 2, 3):
        rng = np.random.default_rng(n_features)
        X = rng.uniform(0, 1, size=(80, n_features))
        y = np.sin(3 * X.sum(axis=1)) + 0.1 * rng.normal(size=80)
        Q = rng.uniform(0.1, 0.9, size=(25, n_features))
        h = 0.25
        s = _reference(X, y, Q, "gaussian", h)["shrinkage"]
        assert np.all(s == 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # statsmodels' own
            reference = kernel_regression.KernelReg(
                y, X, var_type="c" * n_features, reg_type="ll", bw=[h] * n_features
            )
            expected, _ = reference.fit(Q)
        reg = KernelAttentionRegressor(kernel="gaussian", bandwidth=h, degree=1)
        assert_allclose(reg.fit(X, y).predict(Q), expected, rtol=0, atol=1e-8)


def _path():
    """2,000 queries from inside the data to 100 widths beyond the pair:
    evenly up to 2.99, at geometrically shrinking distances from the first
    key of the pair, evenly between its keys, and at geometrically growing
    distances beyond them; so that the path resolves the local spread of
    the two keys (5e-4), over which the slope goes from plain to shrunk."""
    inside = np.linspace(0.0, 2.99, 1200, endpoint=False)
    before = 3.0 - np.geomspace(0.01, 1e-7, 200)
    between = np.linspace(3.0, 3.001, 50, endpoint=False)
    beyond = 3.001 + np.geomspace(1e-7, 100 * WIDTH, 550)
    return np.r_[inside, before, between, beyond][:, None]


def test_predictions_are_continuous_and_bounded_along_a_path():
    X, Y, w = _isolated_pair()
    Q = _path()
    reg = KernelAttentionRegressor(bandwidth=WIDTH, degree=1).fit(X, Y, sample_weight=w)
    mean = _quietly(reg.predict, Q)
    assert len(Q) == 2000
    steps = np.abs(np.diff(mean, axis=0))
    assert np.all(steps < 2e-2 * np.ptp(Y, axis=0))
    # Continuous: the largest steps of the path shrink with the spacing (a
    # jump would stay whole in one of the finer steps).
    for i in np.argsort(steps.max(axis=1))[-5:]:
        finer = np.linspace(Q[i, 0], Q[i + 1, 0], 11)[:, None]
        finer_steps = np.abs(np.diff(_quietly(reg.predict, finer), axis=0))
        assert np.all(finer_steps.max(axis=0) <= 0.2 * steps[i] + 1e-12)
    expected = _reference(X, Y, Q, "gaussian", WIDTH, w)
    assert_allclose(mean, expected["mean"], rtol=1e-9, atol=1e-10)
    # The correction of the local mean is at most max_u u s(u) = 1.34 times
    # sqrt(n_eff), in local standard deviations of the values (|beta . (q -
    # m)| <= D sd, and D <= u sqrt(n_eff)).
    radius = 1.0 / np.sqrt(expected["kish"])
    correction = np.abs(mean - expected["local_mean"])
    assert np.all(correction <= 1.35 * radius[:, None] * expected["local_std"] + 1e-12)
    # Far away the prediction is the local mean of the pair.
    assert expected["shrinkage"][-1] == 0.0
    assert_allclose(mean[-1], expected["local_mean"][-1], rtol=1e-12)
    assert np.all(np.abs(mean[-100:, 0] - 5.15) < 0.15)


def _loo_refits(X, Y, w, splits, width):
    predictions = np.empty_like(Y)
    for train, test in splits:
        reg = KernelAttentionRegressor(bandwidth=width, degree=1)
        reg.fit(X[train], Y[train], sample_weight=w[train])
        predictions[test] = _quietly(reg.predict, X[test])
    return predictions


WIDTHS = [0.2, 0.3, 0.5]


def test_leave_one_out_equals_refitting_without_each_key():
    X, Y, w = _isolated_pair()
    n = len(X)
    splits = [(np.delete(np.arange(n), i), np.array([i])) for i in range(n)]
    cv = KernelAttentionRegressorCV("gaussian", WIDTHS, degree=1, n_neighbors=None)
    cv.fit(X, Y, sample_weight=w)
    results = cv.cv_results_
    for c, width in enumerate(WIDTHS):
        predictions = _loo_refits(X, Y, w, splits, width)
        mse = np.average(np.mean((predictions - Y) ** 2, axis=1), weights=w)
        assert_allclose(results["loo_mse"][c], mse, rtol=1e-8)
        assert_allclose(results["mean_test_score"][c], -mse, rtol=1e-8)
        # The shrunk held-out slopes, from the rule on each held-out fit.
        s = np.array(
            [
                _reference(X[tr], Y[tr], X[te], "gaussian", width, w[tr])["shrinkage"][
                    0
                ]
                for tr, te in splits
            ]
        )
        assert results["shrunk_fraction"][c] == pytest.approx(np.mean(s < 1.0))
    # Leaving out a key of the pair leaves the other one and keys of tiny
    # weight: a line of one effective key (n_eff of 1.0 at 0.2 and 0.3), whose
    # slope is shrunk; at 0.5 the fit without 3.001 still has n_eff = 1.002
    # (s = 1 - 1.5e-8), that without 3.0 a leverage below one.
    assert results["shrunk_fraction"].tolist() == [2 / 52, 2 / 52, 1 / 52]
    assert cv.shrunk_fraction_ == results["shrunk_fraction"][cv.best_index_]


def test_k_fold_equals_refitting_without_each_fold():
    X, Y, w = _isolated_pair()
    splits = list(KFold(5).split(X))
    cv = KernelAttentionRegressorCV(
        "gaussian", WIDTHS, degree=1, n_neighbors=None, cv=KFold(5)
    )
    cv.fit(X, Y, sample_weight=w)
    results = cv.cv_results_
    for c, width in enumerate(WIDTHS):
        predictions = _loo_refits(X, Y, w, splits, width)
        scores = [
            r2_score(Y[test], predictions[test], sample_weight=w[test])
            for _, test in splits
        ]
        for s, score in enumerate(scores):
            assert_allclose(results[f"split{s}_test_score"][c], score, rtol=1e-8)
        assert_allclose(results["mean_test_score"][c], np.mean(scores), rtol=1e-8)
        shrunk = np.concatenate(
            [
                _reference(X[tr], Y[tr], X[te], "gaussian", width, w[tr])["shrinkage"]
                < 1.0
                for tr, te in splits
            ]
        )
        assert results["shrunk_fraction"][c] == pytest.approx(shrunk.mean())
    assert np.any(results["shrunk_fraction"] > 0)


def test_binned_search_reports_the_shrunk_fraction():
    # The binned held-out fits leave the nearly singular designs of the pair
    # to the exact engine, which shrinks the slopes of the rule: leaving out
    # a key of the pair leaves a line of about one effective key (at 0.5,
    # that without 3.001 only just: s = 1 - 1.5e-8).
    X, Y, w = _isolated_pair()
    n = len(X)
    expected = [
        np.mean(
            [
                _reference(
                    np.delete(X, i, 0),
                    np.delete(Y, i, 0),
                    X[i : i + 1],
                    "gaussian",
                    width,
                    np.delete(w, i),
                )["shrinkage"][0]
                < 1.0
                for i in range(n)
            ]
        )
        for width in WIDTHS
    ]
    assert expected == [2 / 52, 2 / 52, 1 / 52]
    fractions = []
    for algorithm in ("brute", "binned"):
        cv = KernelAttentionRegressorCV(
            "gaussian", WIDTHS, degree=1, n_neighbors=None, algorithm=algorithm
        )
        fractions.append(cv.fit(X, Y, sample_weight=w).cv_results_["shrunk_fraction"])
    assert fractions[1].tolist() == fractions[0].tolist() == expected


def test_shrunk_fraction_is_zero_for_degree_zero():
    X, Y, w = _isolated_pair()
    cv = KernelAttentionRegressorCV("gaussian", WIDTHS, degree="auto", n_neighbors=None)
    cv.fit(X, Y, sample_weight=w)
    degree = cv.cv_results_["param_degree"].astype(int)
    fraction = cv.cv_results_["shrunk_fraction"]
    assert np.all(fraction[degree == 0] == 0) and np.any(fraction[degree == 1] > 0)
    assert cv.shrunk_fraction_ == fraction[cv.best_index_]
    plain = KernelAttentionRegressorCV("gaussian", WIDTHS, degree=0, n_neighbors=None)
    plain.fit(X, Y, sample_weight=w)
    assert "shrunk_fraction" not in plain.cv_results_
    assert plain.shrunk_fraction_ == 0.0


def test_in_sample_shrunk_fraction_of_the_diagnostics():
    X, Y, w = _isolated_pair()
    for width in WIDTHS:
        reg = KernelAttentionRegressor(bandwidth=width, degree=1)
        reg.fit(X, Y, sample_weight=w)
        s = _reference(X, Y, X, "gaussian", width, w)["shrinkage"]
        diagnostics = _quietly(reg.smoother_diagnostics)
        assert diagnostics.shrunk_fraction == pytest.approx(np.mean(s < 1.0))
    constant = KernelAttentionRegressor(bandwidth=0.3).fit(X, Y, sample_weight=w)
    assert constant.smoother_diagnostics().shrunk_fraction == 0.0


def _caught(method, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        method(*args, **kwargs)
    return [c.message for c in caught if c.category is LocalLinearFallbackWarning]


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_warning_counts_the_shrunk_slopes(kernel):
    X, Y, w = _isolated_pair()
    Q = _queries(kernel)
    s = _reference(X, Y, Q, kernel, WIDTH, w)["shrinkage"]
    for path in _paths(kernel) + ["binned"]:
        reg = KernelAttentionRegressor(kernel, WIDTH, degree=1, algorithm=path)
        reg.fit(X, Y, sample_weight=w)
        calls = [(reg.predict, {}), (reg.predict, {"return_std": True})]
        if path != "binned":
            calls.append((reg.attention_weights, {}))
        for method, options in calls:
            (warning,) = _caught(method, Q, **options)
            assert warning.n_shrunk == np.count_nonzero(s < 1.0)
            # The binned predictions solve binned sums, whose error is
            # about (step / width)**2 = 6e-4 of the default grid.
            binned = path == "binned" and method == reg.predict
            tolerance = dict(abs=1e-3) if binned else dict(rel=1e-9)
            assert warning.mean_shrinkage == pytest.approx(
                np.mean(1.0 - s), **tolerance
            )
            assert (warning.n_singular, warning.n_queries) == (0, len(Q))
            assert "shrunk by more than half" in str(warning)
            assert "determines no slope" not in str(warning)
    # A mild shrinkage (0.5 < s < 1) is counted but not warned of.
    mild = Q[(s > 0.5) & (s < 1.0)]
    assert len(mild)
    reg = KernelAttentionRegressor(kernel, WIDTH, degree=1).fit(X, Y, sample_weight=w)
    assert _caught(reg.predict, mild) == []


def test_the_warning_of_a_fallback_counts_the_shrunk_slopes_too():
    # The epanechnikov kernel at 0.3: the query at 1.28 holds the key at 1
    # alone (rank 0: the local mean), 3.2 the two close keys, far from
    # their centre (s about 0), 1.11 the keys near 1 (0.5 < s < 1).
    X, Y, w = _isolated_pair()
    Q = np.array([[0.25], [1.11], [1.28], [3.2]])
    expected = _reference(X, Y, Q, "epanechnikov", WIDTH, w)
    assert expected["rank"].tolist() == [1, 1, 0, 1]
    s = expected["shrinkage"]
    assert s[0] == s[2] == 1.0 and 0.5 < s[1] < 1.0 and s[3] < 1e-12
    reg = KernelAttentionRegressor("epanechnikov", WIDTH, degree=1)
    reg.fit(X, Y, sample_weight=w)
    (warning,) = _caught(reg.predict, Q)
    assert (warning.n_singular, warning.n_shrunk, warning.n_queries) == (1, 2, 4)
    assert warning.mean_shrinkage == pytest.approx(np.mean(1.0 - s))
    assert "determines no slope" in str(warning)
    assert "shrunk by more than half" in str(warning)
    # The fallback alone warns, of the fallback only.
    (warning,) = _caught(reg.predict, Q[1:3])
    assert (warning.n_singular, warning.n_shrunk) == (1, 1)
    assert "shrunk by more than half" not in str(warning)
