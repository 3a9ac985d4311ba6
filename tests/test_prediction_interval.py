"""Jackknife+ and CV+ prediction intervals against refits without each row."""

import functools
import math
import warnings

import numpy as np
import pytest
from _reference import slope_factor
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn import clone, config_context
from sklearn.model_selection import KFold

from sklearn_kernelpool import KernelAttentionRegressor


def _ranks(level, n):
    # The paper's ranks, from the decimal the level prints as.
    alpha = round(1 - level, 12)
    return math.floor(round(alpha * (n + 1), 9)), math.ceil(round(level * (n + 1), 9))


def _kth(values, rank, sign):
    # The rank-th smallest per row (axis 1) by a full sort.
    if rank < 1 or rank > values.shape[1]:
        return np.full((values.shape[0],) + values.shape[2:], sign * np.inf)
    return np.sort(values, axis=1)[:, rank - 1]


def _refit(reg, X, y, w, keep):
    """The estimator refitted on the rows ``keep``, its widths fixed."""
    model = clone(reg).set_params(bandwidth=reg.bandwidth_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X[keep], y[keep], None if w is None else w[keep])


def _predict(model, Q):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.predict(Q).reshape(len(Q), -1)


def reference_interval(reg, X, y, Q, level, w=None, folds=None):
    """Refit without each row (or fold) and take the paper's order statistics.

    Rows of sample weight zero are not part of the model: left out of
    everything. ``folds``: a fold label per row of positive weight (CV+).
    """
    X = np.asarray(X)
    Y = np.asarray(y, dtype=float).reshape(len(X), -1)
    rows = np.arange(len(X)) if w is None else np.flatnonzero(w > 0)
    n = len(rows)
    if folds is None:
        folds = np.arange(n)
    mu = np.empty((len(Q), n, Y.shape[1]))
    R = np.empty((n, Y.shape[1]))
    for k in np.unique(folds):
        out = rows[folds == k]
        keep = np.setdiff1d(np.arange(len(X)), out)
        model = _refit(reg, X, y, w, keep)
        mu[:, folds == k] = _predict(model, Q)[:, None, :]
        R[folds == k] = np.abs(Y[out] - _predict(model, X[out]))
    low, high = _ranks(level, n)
    # An undefined fit (on_empty="nan") can only widen the interval.
    below, above = mu - R[None], mu + R[None]
    lower = _kth(np.where(np.isnan(below), -np.inf, below), low, -1)
    upper = _kth(np.where(np.isnan(above), np.inf, above), high, 1)
    undefined = np.isnan(_predict(reg, Q)).any(axis=1)
    lower[undefined] = upper[undefined] = np.nan
    if np.ndim(y) == 1:
        return lower[:, 0], upper[:, 0]
    return lower, upper


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(25, 2))
    y = np.sin(4 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=25)
    Q = rng.uniform(-0.1, 1.1, size=(15, 2))
    return X, y, Q


@pytest.mark.parametrize("kernel", ["gaussian", "epanechikov", "boxcar"])
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_jackknife_plus_equals_refits(data, kernel, degree, weighted):
    X, y, Q = data
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(X)) if weighted else None
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.6, degree=degree)
    reg.fit(X, y, sample_weight=w)
    lower, upper = reg.prediction_interval(Q, level=0.8)
    ref_lower, ref_upper = reference_interval(reg, X, y, Q, 0.8, w)
    assert lower.shape == upper.shape == (len(Q),)
    assert_allclose(lower, ref_lower, rtol=1e-9, atol=1e-9)
    assert_allclose(upper, ref_upper, rtol=1e-9, atol=1e-9)
    assert np.all(lower <= upper)


@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
def test_sparse_neighbourhoods_follow_on_empty(on_empty, degree, algorithm):
    # A narrow compact kernel: many queries with one or no key in reach, and
    # keys alone in their own neighbourhood, so that the fits without a row
    # fall back to on_empty.
    rng = np.random.default_rng(2)
    X = np.sort(rng.uniform(0, 10, size=(20, 1)), axis=0)
    y = X[:, 0] ** 0.5 + 0.1 * rng.normal(size=20)
    Q = np.linspace(-1, 11, 40)[:, None]
    reg = KernelAttentionRegressor(
        kernel="epanechikov",
        bandwidth=0.7,
        degree=degree,
        on_empty=on_empty,
        algorithm=algorithm,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X, y)
        lower, upper = reg.prediction_interval(Q, level=0.7)
    ref_lower, ref_upper = reference_interval(reg, X, y, Q, 0.7)
    assert_allclose(lower, ref_lower, rtol=1e-9, atol=1e-9)
    assert_allclose(upper, ref_upper, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("degree", [0, 1, 2])
def test_every_algorithm_equals_refits(data, algorithm, degree):
    X, y, Q = data
    reg = KernelAttentionRegressor(
        kernel="biweight", bandwidth=0.4, degree=degree, algorithm=algorithm
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bounds = reg.fit(X, y).prediction_interval(Q, level=0.8)
    ref = reference_interval(reg, X, y, Q, 0.8)
    assert_allclose(bounds, ref, rtol=1e-9, atol=1e-9)


def test_float32_keys(data):
    X, y, Q = data
    reg = KernelAttentionRegressor(bandwidth=0.6, degree=1)
    bounds = reg.fit(X.astype(np.float32), y).prediction_interval(Q)
    assert_allclose(bounds, reg.fit(X, y).prediction_interval(Q), rtol=1e-4, atol=1e-4)


def test_on_empty_raise_names_the_policy():
    X = np.array([[0.0], [1.0], [5.0]])
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=1.5, on_empty="raise")
    reg.fit(X, [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="on_empty='raise'"):
        reg.prediction_interval([[0.5]], level=0.5)


def test_gaussian_far_queries_and_dominant_keys():
    # A narrow gaussian: a query's weight sits on one key, and the fit
    # without it is carried by weights below the underflow of the first.
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, size=(15, 1))
    y = np.cos(X[:, 0]) + 0.1 * rng.normal(size=15)
    Q = np.concatenate([X[:5, :] + 1e-3, [[-30.0], [40.0]]])
    for degree in (0, 1):
        reg = KernelAttentionRegressor(bandwidth=0.05, degree=degree).fit(X, y)
        lower, upper = reg.prediction_interval(Q, level=0.75)
        ref_lower, ref_upper = reference_interval(reg, X, y, Q, 0.75)
        assert_allclose(lower, ref_lower, rtol=1e-7, atol=1e-9)
        assert_allclose(upper, ref_upper, rtol=1e-7, atol=1e-9)


def test_sample_weight_zero_rows_are_not_part_of_the_model(data):
    X, y, Q = data
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(X))
    w[[2, 7, 11]] = 0.0
    y_moved = y.copy()
    y_moved[[2, 7, 11]] = 1e6
    for degree in (0, 1):
        reg = KernelAttentionRegressor(bandwidth=0.5, degree=degree)
        bounds = reg.fit(X, y, sample_weight=w).prediction_interval(Q, level=0.8)
        ref = reference_interval(reg, X, y, Q, 0.8, w)
        assert_allclose(bounds, ref, rtol=1e-9, atol=1e-9)
        dropped = reg.fit(X[w > 0], y[w > 0], sample_weight=w[w > 0])
        assert_allclose(dropped.prediction_interval(Q, level=0.8), bounds, rtol=1e-12)
        moved = reg.fit(X, y_moved, sample_weight=w).prediction_interval(Q, level=0.8)
        assert_allclose(moved, bounds, rtol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
def test_multi_output_and_sparse_X(data, degree):
    X, y, Q = data
    Y = np.column_stack([y, np.cos(3 * X[:, 1])])
    reg = KernelAttentionRegressor(bandwidth=0.5, degree=degree).fit(X, Y)
    lower, upper = reg.prediction_interval(Q, level=0.85)
    assert lower.shape == upper.shape == (len(Q), 2)
    ref = reference_interval(reg, X, Y, Q, 0.85)
    assert_allclose((lower, upper), ref, rtol=1e-9, atol=1e-9)
    for j in range(2):
        single = clone(reg).fit(X, Y[:, j]).prediction_interval(Q, level=0.85)
        assert_allclose(single, (lower[:, j], upper[:, j]), rtol=1e-12)
    sparse_fit = clone(reg).fit(sparse.csr_array(X), Y)
    bounds = sparse_fit.prediction_interval(sparse.csr_array(Q), level=0.85)
    assert_allclose(bounds, (lower, upper), rtol=1e-9, atol=1e-12)


def test_categorical_features():
    rng = np.random.default_rng(5)
    X = np.column_stack([rng.uniform(0, 1, 30), rng.integers(0, 3, 30)])
    y = X[:, 0] + X[:, 1] + 0.1 * rng.normal(size=30)
    Q = np.column_stack([rng.uniform(0, 1, 10), rng.integers(0, 4, 10)])
    for degree in (0, 1):
        reg = KernelAttentionRegressor(
            bandwidth=0.3, degree=degree, categorical_features=[1]
        ).fit(X, y)
        bounds = reg.prediction_interval(Q, level=0.8)
        ref = reference_interval(reg, X, y, Q, 0.8)
        assert_allclose(bounds, ref, rtol=1e-9, atol=1e-9)


def test_rank_deficient_local_designs():
    # Two collinear features: every local design has rank 1 (min-norm).
    rng = np.random.default_rng(6)
    t = rng.uniform(0, 1, 20)
    X = np.column_stack([t, 2 * t])
    y = 3 * t + 0.1 * rng.normal(size=20)
    s = rng.uniform(0, 1, 8)
    Q = np.column_stack([s, 2 * s + rng.normal(0, 0.05, 8)])
    reg = KernelAttentionRegressor(bandwidth=0.4, degree=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X, y)
        bounds = reg.prediction_interval(Q, level=0.8)
    ref = reference_interval(reg, X, y, Q, 0.8)
    assert_allclose(bounds, ref, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechikov"])
def test_cv_plus_with_n_folds_is_jackknife_plus(data, degree, kernel):
    X, y, Q = data
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.6, degree=degree)
    reg.fit(X, y)
    jack = reg.prediction_interval(Q, level=0.8)
    cv = reg.prediction_interval(Q, level=0.8, method="cv+", cv=len(X))
    assert_allclose(cv, jack, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "boxcar"])
def test_cv_plus_equals_refits_per_fold(data, degree, kernel):
    X, y, Q = data
    w = np.random.default_rng(7).uniform(0.5, 2.0, len(X))
    w[3] = 0.0
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.5, degree=degree)
    reg.fit(X, y, sample_weight=w)
    n = int(np.count_nonzero(w))
    for cv in (3, KFold(4, shuffle=True, random_state=0)):
        splitter = KFold(cv) if isinstance(cv, int) else cv
        folds = np.empty(n, dtype=int)
        for k, (_, test) in enumerate(splitter.split(np.zeros((n, 1)))):
            folds[test] = k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bounds = reg.prediction_interval(Q, level=0.8, method="cv+", cv=cv)
        ref = reference_interval(reg, X, y, Q, 0.8, w, folds=folds)
        assert_allclose(bounds, ref, rtol=1e-9, atol=1e-9)


def test_default_cv_is_five_contiguous_folds(data):
    X, y, Q = data
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
    assert_array_equal(
        reg.prediction_interval(Q, method="cv+"),
        reg.prediction_interval(Q, method="cv+", cv=KFold(5)),
    )


@pytest.mark.parametrize(
    ("n", "level", "low", "high"),
    [
        (19, 0.9, 2, 18),
        (9, 0.9, 1, 9),
        (8, 0.9, 0, 9),
        (3, 0.5, 2, 2),
        (1000, 0.95, 50, 951),
    ],
)
def test_paper_ranks_and_infinite_bounds(n, level, low, high):
    from sklearn_kernelpool._inference._conformal import order_ranks

    assert order_ranks(level, n) == (low, high)
    assert _ranks(level, n) == (low, high)
    rng = np.random.default_rng(8)
    if n > 100:
        return
    X = rng.uniform(0, 1, (n, 1))
    y = X[:, 0] + rng.normal(0, 0.1, n)
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
    lower, upper = reg.prediction_interval([[0.5], [0.2]], level=level)
    assert np.all(np.isneginf(lower)) == (low < 1)
    assert np.all(np.isposinf(upper)) == (high > n)
    assert_allclose(
        (lower, upper), reference_interval(reg, X, y, [[0.5], [0.2]], level)
    )


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("method", ["jackknife+", "cv+"])
def test_working_memory_does_not_change_the_bounds(degree, method):
    rng = np.random.default_rng(9)
    X = rng.uniform(0, 1, (300, 2))
    y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.1, 300)
    Q = rng.uniform(0, 1, (200, 2))
    reg = KernelAttentionRegressor(bandwidth=0.3, degree=degree).fit(X, y)
    big = reg.prediction_interval(Q, method=method)
    with config_context(working_memory=0.05):
        small = reg.prediction_interval(Q, method=method)
    # Equal up to the rounding of products over batches of other sizes.
    assert_allclose(small, big, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"level": 0.0}, "level must be a float in \\(0, 1\\); got 0.0"),
        ({"level": 1.0}, "level must be"),
        ({"level": "0.9"}, "level must be"),
        ({"level": True}, "level must be"),
        (
            {"method": "jackknife"},
            "method must be one of \\['jackknife\\+', 'cv\\+', 'cqr'\\]",
        ),
        ({"cv": 3}, "cv is only used with method='cv\\+'"),
        ({"method": "cv+", "cv": 1}, "cv must be an int in \\[2, n\\]"),
        ({"method": "cv+", "cv": 26}, "cv must be an int in \\[2, n\\]"),
        ({"method": "cv+", "cv": 2.5}, "cv must be an int >= 2 or a cross-validation"),
        ({"method": "cv+", "cv": "5"}, "cv must be an int >= 2 or a cross-validation"),
    ],
)
def test_bad_arguments(data, kwargs, match):
    X, y, Q = data
    reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
    with pytest.raises(ValueError, match=match):
        reg.prediction_interval(Q, **kwargs)


def test_refusals():
    X = np.arange(10.0)[:, None]
    y = np.arange(10.0)
    reg = KernelAttentionRegressor(n_neighbors=3).fit(X, y)
    with pytest.raises(ValueError, match="n_neighbors=3"):
        reg.prediction_interval(X)
    w = np.zeros(10)
    w[4] = 1.0
    reg = KernelAttentionRegressor().fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match="at least 2 training rows"):
        reg.prediction_interval(X)
    with pytest.raises(Exception, match="not fitted"):
        KernelAttentionRegressor().prediction_interval(X)


def _coverage(truth, degree, bandwidth, n=150, n_reps=60, n_fresh=40, seed=0):
    rng = np.random.default_rng(seed)
    hits = []
    for _ in range(n_reps):
        X = rng.uniform(0, 1, (n, 1))
        y = truth(X[:, 0]) + rng.normal(0, 0.3, n)
        Xf = rng.uniform(0, 1, (n_fresh, 1))
        yf = truth(Xf[:, 0]) + rng.normal(0, 0.3, n_fresh)
        reg = KernelAttentionRegressor(bandwidth=bandwidth, degree=degree).fit(X, y)
        lower, upper = reg.prediction_interval(Xf, level=0.9)
        hits.append(np.mean((lower <= yf) & (yf <= upper)))
    return float(np.mean(hits))


@pytest.mark.parametrize(
    ("truth", "degree", "bandwidth"),
    [
        (lambda x: 1 + 2 * x, 1, 0.3),
        (lambda x: np.sin(2 * np.pi * x), 1, 0.08),
        (lambda x: np.sin(2 * np.pi * x), 2, 0.15),
    ],
)
def test_jackknife_plus_covers_fresh_observations(truth, degree, bandwidth):
    # 60 repetitions x 40 fresh points: the mean coverage has a Monte-Carlo
    # standard error of about 0.01 (the fresh points of one repetition share
    # its interval, so somewhat more than sqrt(0.09 / 2400) = 0.006); the
    # band 0.87-0.93 is about three of them either side of 0.9.
    coverage = _coverage(truth, degree, bandwidth)
    assert 0.87 <= coverage <= 0.93


@pytest.mark.slow
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("method", ["jackknife+", "cv+"])
def test_memory_stays_within_working_memory(degree, method):
    # 2,000 keys and queries: the leave-out fits of every pair would take
    # 31 MiB; the chunks take working_memory, one block of brute-force scores
    # (1 MiB) at least, and the arrays of one value per key.
    from _memory import traced_peak

    rng = np.random.default_rng(10)
    X = rng.uniform(0, 1, (2_000, 2))
    y = np.sin(3 * X[:, 0]) + rng.normal(0, 0.1, 2_000)
    Q = rng.uniform(0, 1, (2_000, 2))
    reg = KernelAttentionRegressor(bandwidth=0.1, degree=degree).fit(X, y)
    call = functools.partial(reg.prediction_interval, Q, method=method)
    bounds, peak = traced_peak(call, working_memory=2)
    assert peak < 2 * 2**20 + 2**20 + 2**20
    assert_allclose(bounds, call(), rtol=1e-12, atol=1e-12)


def test_selection_from_the_band_of_residuals_equals_a_sort():
    from sklearn_kernelpool._inference._conformal import _select

    rng = np.random.default_rng(11)
    n = 500
    R = np.round(np.abs(rng.normal(size=n)), 2)  # many ties
    order = np.argsort(R, kind="stable")
    mu = rng.normal(size=(40, n)) * rng.choice([0.0, 1e-3, 1.0, 100.0], (40, 1))
    mu += rng.choice([0.0, 1e6], (40, 1))
    mu[3, 7] = np.nan
    mu[4, 9] = np.inf
    for rank in (0, 1, 2, 250, 499, 500, 501):
        values = np.where(np.isnan(mu + R), np.inf, mu + R)
        expected = _kth(values, rank, -1 if rank < 1 else 1)
        assert_array_equal(_select(mu, R[order], order, rank), expected)
        # The lower bound's values R_i - mu, without a negated copy.
        values = np.where(np.isnan(R - mu), np.inf, R - mu)
        expected = _kth(values, rank, -1 if rank < 1 else 1)
        assert_array_equal(_select(mu, R[order], order, rank, -1.0), expected)
        ends = np.nanmin(mu, axis=1), np.nanmax(mu, axis=1)
        ends[0][3] = ends[1][3] = np.nan  # the extremes of a row with a NaN
        assert_array_equal(_select(mu, R[order], order, rank, -1.0, ends), expected)


# Every algorithm at both degrees by default, the compact kernels and the
# levels taking turns across them; every combination with -m slow.
SPARSE_ROWS_DEFAULT = {
    ("epanechikov", "brute", 0, 0.5),
    ("biweight", "brute", 1, 0.95),
    ("boxcar", "kd_tree", 0, 0.95),
    ("epanechikov", "kd_tree", 1, 0.5),
    ("biweight", "ball_tree", 0, 0.5),
    ("boxcar", "ball_tree", 1, 0.95),
}


def _sparse_rows_cases():
    cases = []
    for level in (0.5, 0.95):
        for degree in (0, 1):
            for algorithm in ("brute", "kd_tree", "ball_tree"):
                for kernel in ("epanechikov", "biweight", "boxcar"):
                    case = (kernel, algorithm, degree, level)
                    marks = [] if case in SPARSE_ROWS_DEFAULT else [pytest.mark.slow]
                    cases.append(
                        pytest.param(
                            *case,
                            id=f"{level}-{degree}-{algorithm}-{kernel}",
                            marks=marks,
                        )
                    )
    return cases


@pytest.mark.parametrize("kernel, algorithm, degree, level", _sparse_rows_cases())
def test_sparse_rows_equal_refits(kernel, algorithm, degree, level, monkeypatch):
    # Narrow compact kernels: each query sees a few of the 64 keys, many one
    # or none (the nearest key then). Integer targets tie the residuals;
    # level 0.95 puts the ranks next to the ends (3 and 62).
    from sklearn_kernelpool._inference import _conformal

    calls = []
    select = _conformal._select_sparse
    monkeypatch.setattr(
        _conformal,
        "_select_sparse",
        lambda *args: calls.append(1) or select(*args),
    )
    rng = np.random.default_rng(12)
    X = rng.uniform(0, 4, size=(64, 2))
    y = rng.integers(0, 3, size=64).astype(float)
    Q = rng.uniform(-0.5, 4.5, size=(30, 2))
    reg = KernelAttentionRegressor(
        kernel=kernel, bandwidth=0.5, degree=degree, algorithm=algorithm
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lower, upper = reg.fit(X, y).prediction_interval(Q, level=level)
    ref_lower, ref_upper = reference_interval(reg, X, y, Q, level)
    assert_allclose(lower, ref_lower, rtol=1e-9, atol=1e-9)
    assert_allclose(upper, ref_upper, rtol=1e-9, atol=1e-9)
    # A tree takes the rows by their neighbours.
    assert bool(calls) == (algorithm != "brute")


@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
@pytest.mark.parametrize("degree", [0, 1])
def test_sparse_rows_with_weights_and_outputs(on_empty, degree):
    # Sample weights, two outputs and every on_empty policy on sparse rows.
    rng = np.random.default_rng(13)
    X = rng.uniform(0, 10, size=(50, 1))
    Y = np.column_stack([np.sqrt(X[:, 0]), np.round(X[:, 0])])
    Y += 0.1 * rng.normal(size=Y.shape)
    w = rng.uniform(0.5, 2.0, 50)
    w[[3, 7]] = 0.0
    Q = np.linspace(-1, 11, 45)[:, None]
    reg = KernelAttentionRegressor(
        kernel="epanechikov",
        bandwidth=0.6,
        degree=degree,
        on_empty=on_empty,
        algorithm="kd_tree",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X, Y, sample_weight=w)
        bounds = reg.prediction_interval(Q, level=0.8)
    ref = reference_interval(reg, X, Y, Q, 0.8, w)
    assert_allclose(bounds, ref, rtol=1e-9, atol=1e-9)


def test_selection_from_the_neighbours_equals_a_sort():
    from sklearn_kernelpool._inference._conformal import _select_sparse

    rng = np.random.default_rng(14)
    n, r, m = 200, 60, 9
    R = np.sort(np.round(np.abs(rng.normal(size=n)), 1))  # many ties
    R[-2:] = np.inf
    fit = rng.normal(size=r) * rng.choice([0.0, 1.0, 100.0], r)
    position = np.full((r, m), -1)
    values = rng.normal(size=(r, m)) + rng.choice([0.0, 1e3], (r, 1))
    for row in range(r):
        size = rng.integers(0, m + 1)
        # Neighbours anywhere, at the ends too.
        position[row, :size] = rng.choice(n, size, replace=False)
    values[5, 0] = np.nan
    values[6, 0] = np.inf
    values[7, 0] = -np.inf
    position[5:8, 0] = [0, n - 1, 100]
    for rank in (0, 1, 2, 3, 100, n - 2, n - 1, n, n + 1):
        expected = np.empty(r)
        for row in range(r):
            full = fit[row] + R
            mine = position[row] >= 0
            full[position[row, mine]] = values[row, mine]
            full[np.isnan(full)] = np.inf
            expected[row] = _kth(full[None], rank, -1 if rank < 1 else 1)[0]
        assert_array_equal(_select_sparse(fit, values, position, R, rank), expected)


@pytest.mark.parametrize("degree", [0, 1])
def test_sparse_rows_do_not_depend_on_working_memory(degree):
    # Batches of other sizes pad the neighbour lists to other widths.
    rng = np.random.default_rng(15)
    X = rng.normal(size=(400, 2))
    y = np.round(np.sin(X[:, 0]), 1) + 0.1 * rng.normal(size=400)
    Q = rng.normal(size=(300, 2))
    reg = KernelAttentionRegressor(
        kernel="epanechikov", bandwidth=0.3, degree=degree, algorithm="kd_tree"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X, y)
        big = reg.prediction_interval(Q, level=0.9)
        with config_context(working_memory=0.01):
            small = reg.prediction_interval(Q, level=0.9)
    assert_allclose(small, big, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel, h", [("gaussian", 0.05), ("gaussian", 0.01)])
@pytest.mark.parametrize("level", [0.5, 0.9, 0.999])
def test_bounded_degree_zero_rows_equal_the_dense_fits(kernel, h, level, monkeypatch):
    # Degree 0 on the brute-force path takes most rows from the weighted
    # scores as they are: the residuals from the own score and two sums, the
    # bounds from a window of the residuals. They equal the bounds from the
    # normalised (rows x keys) leave-one-out fits of every key; the narrow
    # width puts some queries on one key (weight above 1/2: dense fits).
    from sklearn_kernelpool._inference import _conformal, _jackknife_constant

    rng = np.random.default_rng(12)
    X = rng.uniform(0, 1, (400, 2))
    Y = np.c_[np.sin(3 * X[:, 0]), np.round(3 * X[:, 1])] + rng.normal(0, 0.1, (400, 2))
    Q = rng.uniform(-0.2, 1.2, (300, 2))
    w = rng.uniform(0.5, 2.0, 400)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=h).fit(X, Y, w)
    simple = _jackknife_constant.simple_rows
    taken = []

    def spy(total, top):
        result = simple(total, top)
        taken.append(result)
        return result

    monkeypatch.setattr(_conformal, "simple_rows", spy)
    monkeypatch.setattr(_jackknife_constant, "simple_rows", spy)
    fast = reg.prediction_interval(Q, level=level)
    taken = np.concatenate(taken)
    if h == 0.05:
        assert taken.mean() > 0.5
    else:
        assert 0 < taken.mean() < 0.5

    def none(total, top):
        return np.zeros(len(total), dtype=bool)

    monkeypatch.setattr(_conformal, "simple_rows", none)
    monkeypatch.setattr(_jackknife_constant, "simple_rows", none)
    dense = reg.prediction_interval(Q, level=level)
    assert_allclose(fast[0], dense[0], rtol=1e-12, atol=1e-12)
    assert_allclose(fast[1], dense[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("degree", [0, 1])
def test_binned_estimator_takes_the_exact_engines_intervals(degree):
    # The binned sums hold no key's own weight: the leave-out fits, hence
    # the intervals, are those of the exact engine of the same rows.
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, (300, 1))
    y = np.sin(4 * X[:, 0]) + rng.normal(0, 0.2, 300)
    Q = rng.uniform(-0.1, 1.1, (40, 1))
    params = dict(kernel="gaussian", bandwidth=0.08, degree=degree)
    binned = KernelAttentionRegressor(algorithm="binned", **params).fit(X, y)
    exact = KernelAttentionRegressor(algorithm="brute", **params).fit(X, y)
    for method, cv in (("jackknife+", None), ("cv+", 5)):
        got = binned.prediction_interval(Q, level=0.8, method=method, cv=cv)
        want = exact.prediction_interval(Q, level=0.8, method=method, cv=cv)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        assert np.all(np.isfinite(got))


def test_local_linear_fits_without_each_key_equal_weighted_least_squares():
    # The dense case-deletion fits of degree 1 (every key, from the keys'
    # monomials) against the local weighted least squares refitted without
    # each key, its slope shrunk by the safeguard of the documented rule,
    # two outputs, sample weights, queries inside and outside.
    from sklearn_kernelpool._inference._deleted_fits import _LeaveOut

    rng = np.random.default_rng(21)
    X = rng.uniform(0, 1, (40, 2))
    Y = np.c_[np.sin(3 * X[:, 0]), X[:, 1] ** 2] + rng.normal(0, 0.1, (40, 2))
    w = rng.uniform(0.5, 2.0, 40)
    Q = np.r_[rng.uniform(0, 1, (4, 2)), [[1.3, -0.2]]]
    reg = KernelAttentionRegressor(bandwidth=0.4, degree=1, algorithm="brute")
    state = _LeaveOut(reg.fit(X, Y, w))
    P, Q_centred, empty = state.weights(Q, state.pool.scorer.workspace(len(Q)))
    mu = state.leave_one_out(Q, P, Q_centred, empty) + state.center
    assert mu.shape == (len(Q), len(X), 2)
    shrunk_fits = 0
    for r, q in enumerate(Q):
        for i in range(len(X)):
            weights = P[r].copy()
            weights[i] = 0.0
            design = np.c_[np.ones(len(X)), X - q] * np.sqrt(weights)[:, None]
            coef = np.linalg.lstsq(design, Y * np.sqrt(weights)[:, None], rcond=None)
            # The line passes through the local means (m, ybar); its slope
            # is shrunk by s of the leverage of q (from its distance to m).
            p = weights / weights.sum()
            m, ybar = p @ X, p @ Y
            C = (X - m).T @ ((X - m) * p[:, None])
            distance_sq = (q - m) @ np.linalg.solve(C, q - m)
            s = slope_factor(distance_sq, p @ p)
            shrunk_fits += s < 1.0
            want = ybar + s * (coef[0][0] - ybar)
            assert_allclose(mu[r, i], want, rtol=1e-9, atol=1e-9)
    assert shrunk_fits > 0
