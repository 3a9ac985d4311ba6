"""Every path against one slow reference, on data built to split them.

Brute force, the k-d tree, the ball tree, the array API path (with
array-api-strict) and the exact leave-one-out of
:class:`KernelAttentionRegressorCV` must give the answer of a plain loop
over the pairs of points, to 1e-10 relative, on data where rounding decides:

- keys exactly on the edge of a compact support (integer grids and
  bandwidths of 0.5 or 1, decimal grids whose coordinates are not exact);
- queries tied between keys, with bandwidths that are not powers of two
  (0.1, 0.3, 0.7), so that the scaled distances round apart when the
  unscaled ones are equal;
- per-feature bandwidths, sample weights (some zero), a large offset of the
  coordinates, each ``on_empty`` policy, the regressor and the classifier.

The reference follows the definitions: a key is inside the support when
``u^2 = sum_f ((q_f - k_f) / h_f)^2 < 1``, from the exact differences of
the coordinates, summed over the features in order; a query with no key
inside falls back to its nearest keys, tied on the same differences (left
unscaled for an isotropic bandwidth), which share the weight by their
sample weights.
"""

import functools
import math
import warnings

import numpy as np
import pytest
from _array_api import strict_namespace
from numpy.testing import assert_allclose
from sklearn import config_context
from sklearn.model_selection import GridSearchCV, KFold, LeaveOneOut

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)

RTOL = 1e-10
ATOL = 1e-13  # for weights that are zero on one side: a kernel's value at
# a key a few ulps inside its edge

# The kernels as functions of the squared scaled distance s, inside the
# support (s < 1 for the compact ones).
PROFILES = {
    "boxcar": lambda s: 1.0,
    "epanechnikov": lambda s: 1.0 - s,
    "cosine": lambda s: math.cos(math.pi * math.sqrt(s) / 2),
    "tricube": lambda s: (1.0 - math.sqrt(s) ** 3) ** 3,
    "gaussian": lambda s: math.exp(-s / 2),
}
COMPACT = ["boxcar", "epanechnikov", "cosine", "tricube"]


def _grid(*axes):
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(axes))


def _datasets():
    """name -> (keys, queries, bandwidths). Values come from ``_values``."""
    rng = np.random.default_rng(0)
    line = np.arange(12.0)[:, None]
    line_queries = np.arange(-1.0, 13.0, 0.5)[:, None]
    plane = _grid(np.arange(5.0), np.arange(5.0))
    plane_queries = rng.permutation(_grid(*[np.arange(-0.5, 5.0, 0.5)] * 2))[:40]
    decimals = (np.arange(30) * 0.1)[:, None]  # 0.30000000000000004, ...
    decimal_queries = np.vstack([decimals[::2] + 0.05, decimals[1::3]])
    cube = _grid(*[np.arange(3.0)] * 3)
    cube_queries = rng.permutation(_grid(*[np.arange(-0.5, 3.0, 0.5)] * 3))[:40]
    return {
        "line": (line, line_queries, [0.3, 0.5, 0.7, 1.0, 1.5]),
        "plane": (plane, plane_queries, [0.3, 0.7, 1.0, (0.3, 0.7), (1.0, 0.5)]),
        "decimals": (decimals, decimal_queries, [0.1, 0.2, 0.3, 0.7]),
        "cube": (cube, cube_queries, [0.7, 1.0, (0.3, 0.7, 1.0), (1.0, 0.5, 2.0)]),
        # A large offset: the scaled coordinates reach 3e6, the differences
        # stay exact.
        "offset": (line + 1e6, line_queries + 1e6, [0.3, 0.5, 1.0]),
    }


DATASETS = _datasets()


def _values(n, weighted):
    rng = np.random.default_rng(n)
    y = rng.normal(size=n) + 3.0
    w = None
    if weighted:
        w = rng.uniform(0.5, 2.0, size=n)
        w[::7] = 0.0
    return y, w


def reference_weights(X, Q, w, kernel, bandwidth, on_empty):
    """Normalised attention weights (n_queries, n_keys) by a loop over pairs."""
    w = np.ones(len(X)) if w is None else w
    d = X.shape[1]
    isotropic = np.ndim(bandwidth) == 0
    h = [float(bandwidth)] * d if isotropic else [float(b) for b in bandwidth]
    profile = PROFILES[kernel]
    compact = kernel in COMPACT
    weights = np.zeros((len(Q), len(X)))
    for j, q in enumerate(Q):
        scores = np.zeros(len(X))
        tie = np.full(len(X), np.inf)
        for i, k in enumerate(X):
            if w[i] == 0:
                continue
            diffs = [float(q[f]) - float(k[f]) for f in range(d)]
            s = 0.0
            for f in range(d):
                t = diffs[f] / h[f]
                s += t * t
            if not compact or s < 1.0:
                scores[i] = w[i] * profile(s)
            tie[i] = sum(t * t for t in diffs) if isotropic else s
        if scores.sum() > 0:
            weights[j] = scores / scores.sum()
        elif on_empty == "nearest":
            nearest = np.where(tie == tie.min(), w, 0.0)
            weights[j] = nearest / nearest.sum()
        elif on_empty == "mean":
            weights[j] = w / w.sum()
        else:
            weights[j] = np.where(w > 0, np.nan, 0.0)
    return weights


@functools.cache
def reference_case(name, kernel, bandwidth, weighted, on_empty):
    """:func:`reference_weights` of a dataset's queries, computed once."""
    X, Q, _ = DATASETS[name]
    _, w = _values(len(X), weighted)
    return reference_weights(X, Q, w, kernel, bandwidth, on_empty)


def _cases():
    cases = []
    for name, (_, _, bandwidths) in DATASETS.items():
        kernels = ["boxcar"] if name == "offset" else COMPACT + ["gaussian"]
        for kernel in kernels:
            for index, h in enumerate(bandwidths):
                # Every kernel, weighting and policy at the first width of
                # each data set by default; the other widths with -m slow.
                marks = [pytest.mark.slow] if index else []
                for weighted in (False, True):
                    for on_empty in ("nearest", "mean", "nan"):
                        if kernel == "gaussian" and on_empty != "nearest":
                            continue  # nothing falls back
                        case = (name, kernel, h, weighted, on_empty)
                        cases.append(
                            pytest.param(
                                *case, id="-".join(map(str, case)), marks=marks
                            )
                        )
    return cases


CASES = _cases()


def _fitted(cls, name, kernel, h, weighted, on_empty, algorithm, labels=False):
    X, _, _ = DATASETS[name]
    y, w = _values(len(X), weighted)
    if labels:
        y = np.arange(len(X)) % 3
    bandwidth = h if np.ndim(h) == 0 else np.asarray(h)
    est = cls(kernel=kernel, bandwidth=bandwidth, on_empty=on_empty)
    return est.set_params(algorithm=algorithm).fit(X, y, sample_weight=w)


def _quiet():
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
    return context


NUMPY_CASES = [
    pytest.param(*case.values, algorithm, id=f"{case.id}-{algorithm}", marks=case.marks)
    for case in CASES
    for algorithm in ("brute", "kd_tree", "ball_tree")
    if algorithm == "brute" or case.values[1] != "gaussian"  # trees: compact only
]


@pytest.mark.parametrize(
    ("name", "kernel", "h", "weighted", "on_empty", "algorithm"), NUMPY_CASES
)
def test_numpy_paths_match_the_reference(
    name, kernel, h, weighted, on_empty, algorithm
):
    X, Q, _ = DATASETS[name]
    y, _ = _values(len(X), weighted)
    expected = reference_case(name, kernel, h, weighted, on_empty)
    reg = _fitted(
        KernelAttentionRegressor, name, kernel, h, weighted, on_empty, algorithm
    )
    context = _quiet()
    try:
        assert_allclose(reg.attention_weights(Q), expected, rtol=RTOL, atol=ATOL)
        sparse = reg.attention_weights(Q, sparse=True).toarray()
        assert_allclose(sparse, expected, rtol=RTOL, atol=ATOL)
        assert_allclose(reg.predict(Q), expected @ y, rtol=RTOL, atol=ATOL)
        # The spread of the values under the same weights, by two passes.
        mean, std = reg.predict(Q, return_std=True)
        residuals = y[None, :] - (expected @ y)[:, None]
        spread = np.sqrt(np.sum(expected * residuals**2, axis=1))
        assert_allclose(mean, expected @ y, rtol=RTOL, atol=ATOL)
        assert_allclose(std, spread, rtol=1e-7, atol=1e-7)
        if on_empty == "nan":
            return
        clf = _fitted(
            KernelAttentionClassifier,
            *(name, kernel, h, weighted, on_empty, algorithm),
            labels=True,
        )
        onehot = np.eye(3)[np.arange(len(X)) % 3]
        proba = clf.predict_proba(Q)
        assert_allclose(proba, expected @ onehot, rtol=RTOL, atol=ATOL)
    finally:
        context.__exit__(None, None, None)


@pytest.mark.parametrize(("name", "kernel", "h", "weighted", "on_empty"), CASES)
def test_array_api_path_matches_the_reference(name, kernel, h, weighted, on_empty):
    xp = strict_namespace()
    X, Q, _ = DATASETS[name]
    y, w = _values(len(X), weighted)
    expected = reference_case(name, kernel, h, weighted, on_empty)
    bandwidth = h if np.ndim(h) == 0 else np.asarray(h)
    reg = KernelAttentionRegressor(
        kernel=kernel, bandwidth=bandwidth, on_empty=on_empty
    )
    context = _quiet()
    try:
        with config_context(array_api_dispatch=True):
            weights = None if w is None else xp.asarray(w)
            reg.fit(xp.asarray(X), xp.asarray(y), sample_weight=weights)
            pred = np.asarray(reg.predict(xp.asarray(Q))._array)
            attention = np.asarray(reg.attention_weights(xp.asarray(Q))._array)
    finally:
        context.__exit__(None, None, None)
    assert_allclose(attention, expected, rtol=RTOL, atol=ATOL)
    assert_allclose(pred, expected @ y, rtol=RTOL, atol=ATOL)


# -- the exact leave-one-out ------------------------------------------------
def reference_loo_scores(X, y, w, kernel, bandwidths, on_empty):
    """``-`` the weighted mean squared leave-one-out error of each bandwidth,
    by a loop that refits the reference without each point."""
    w = np.ones(len(X)) if w is None else w
    scores = []
    for h in bandwidths:
        predictions = np.empty(len(X))
        for i in range(len(X)):
            others = np.arange(len(X)) != i
            weights = reference_weights(
                X[others], X[i : i + 1], w[others], kernel, h, on_empty
            )
            predictions[i] = (weights @ y[others])[0]
        if np.isnan(predictions).any():
            scores.append(np.nan)
        else:
            scores.append(-np.sum(w * (predictions - y) ** 2) / np.sum(w))
    return np.array(scores)


LOO_CASES = [
    pytest.param(
        name, kernel, weighted, on_empty, id=f"{name}-{kernel}-{weighted}-{on_empty}"
    )
    for name in ("line", "plane", "decimals", "offset")
    for kernel in (["boxcar"] if name == "offset" else COMPACT)
    for weighted in (False, True)
    for on_empty in ("nearest", "mean", "nan")
]


def _loo_bandwidths(name):
    return [h for h in DATASETS[name][2] if np.ndim(h) == 0]


@pytest.mark.parametrize(("name", "kernel", "weighted", "on_empty"), LOO_CASES)
def test_exact_leave_one_out_matches_a_plain_loop(name, kernel, weighted, on_empty):
    X, _, _ = DATASETS[name]
    y, w = _values(len(X), weighted)
    bandwidths = _loo_bandwidths(name)
    cv = KernelAttentionRegressorCV(
        kernels=[kernel],
        bandwidths=bandwidths,
        on_empty=on_empty,
        degree=0,
        n_neighbors=None,
    )
    context = _quiet()
    try:
        try:
            cv.fit(X, y, sample_weight=w)
        except ValueError:
            # Every candidate left a point empty under on_empty="nan".
            scores = np.full(len(bandwidths), np.nan)
        else:
            scores = cv.cv_results_["mean_test_score"]
    finally:
        context.__exit__(None, None, None)
    expected = reference_loo_scores(X, y, w, kernel, bandwidths, on_empty)
    assert_allclose(scores, expected, rtol=RTOL)


@pytest.mark.parametrize("name", ["line", "plane", "decimals"])
@pytest.mark.parametrize("kernel", ["boxcar", "cosine"])
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_exact_leave_one_out_matches_grid_search(name, kernel, on_empty):
    X, _, _ = DATASETS[name]
    y, _ = _values(len(X), False)
    bandwidths = _loo_bandwidths(name)
    context = _quiet()
    try:
        cv = KernelAttentionRegressorCV(
            kernels=[kernel],
            bandwidths=bandwidths,
            on_empty=on_empty,
            degree=0,
            n_neighbors=None,
        ).fit(X, y)
        search = GridSearchCV(
            KernelAttentionRegressor(kernel=kernel, on_empty=on_empty),
            {"bandwidth": bandwidths},
            cv=LeaveOneOut(),
            scoring="neg_mean_squared_error",
        ).fit(X, y)
    finally:
        context.__exit__(None, None, None)
    assert_allclose(
        cv.cv_results_["mean_test_score"],
        search.cv_results_["mean_test_score"],
        rtol=RTOL,
    )
    assert cv.bandwidth_ == search.best_params_["bandwidth"]


def test_the_number_of_cases():
    # A guard on the breadth of the net: its cases are built by loops that
    # a refactoring could empty.
    assert len(NUMPY_CASES) >= 900
    assert len(CASES) >= 300
    assert len(LOO_CASES) >= 60


PATHS = ["brute", "kd_tree", "ball_tree", "array_api"]


def _predict_on(path, est, X, y, Q):
    """``predict`` (``predict_proba`` for a classifier) on one path."""
    method = "predict_proba" if hasattr(est, "predict_proba") else "predict"
    if path != "array_api":
        est.set_params(algorithm=path).fit(X, y)
        return getattr(est, method)(Q)
    xp = strict_namespace()
    with config_context(array_api_dispatch=True):
        est.fit(xp.asarray(X), xp.asarray(y))
        return np.asarray(getattr(est, method)(xp.asarray(Q))._array)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("h", [0.3, 0.1, 0.45, 0.25])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_query_halfway_between_two_keys_averages_them(path, h, dtype):
    # Boxcar, h=0.3, query 1.5 between keys 1.0 and 2.0: the two keys tie.
    X = np.array([[1.0], [2.0]], dtype=dtype)
    y = np.array([0.0, 1.0], dtype=dtype)
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=h)
    with pytest.warns(EmptyNeighborhoodWarning):
        assert_allclose(_predict_on(path, reg, X, y, [[1.5]]), [0.5])
    if path != "array_api":
        clf = KernelAttentionClassifier(kernel="boxcar", bandwidth=h)
        with pytest.warns(EmptyNeighborhoodWarning):
            assert_allclose(_predict_on(path, clf, X, [0, 1], [[1.5]]), [[0.5, 0.5]])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kernel", ["boxcar", "cosine", "epanechnikov"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_keys_at_the_support_edge_are_decided_exactly(path, kernel, dtype):
    # Keys 0.0, 0.1, ..., 2.9 (most not exact), query 0.7000000000000001,
    # h=0.3: the keys 0.4 and 1.0 lie at u^2 = 1 + 4e-16 and 1 - 4e-16.
    # Brute force pooled 6.5 and the trees 7.0; the exact answer is 7.5.
    X = (np.arange(30) * 0.1)[:, None].astype(dtype)
    y = np.arange(30.0).astype(dtype)
    Q = X[7:8]
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.3)
    pred = _predict_on(path, reg, X, y, Q)
    # float32 coordinates are decided on their exact float64 values.
    X64, Q64 = X.astype(np.float64), Q.astype(np.float64)
    expected = reference_weights(X64, Q64, None, kernel, 0.3, "nan") @ y
    assert_allclose(pred, expected, rtol=1e-6 if dtype == "float32" else RTOL)
    if kernel == "boxcar" and dtype == "float64":
        assert_allclose(pred, [7.5])


@pytest.mark.parametrize("name", ["line", "decimals", "plane"])
@pytest.mark.parametrize("kernel", ["boxcar", "cosine"])
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_kfold_matches_grid_search_at_the_edge(name, kernel, on_empty):
    # The K-fold path pools its splits apart from the leave-one-out pass.
    X, _, _ = DATASETS[name]
    y, _ = _values(len(X), False)
    bandwidths = _loo_bandwidths(name)
    cv = KFold(4, shuffle=True, random_state=0)
    context = _quiet()
    try:
        reg = KernelAttentionRegressorCV(
            kernels=[kernel],
            bandwidths=bandwidths,
            on_empty=on_empty,
            cv=cv,
            degree=0,
            n_neighbors=None,
        ).fit(X, y)
        search = GridSearchCV(
            KernelAttentionRegressor(kernel=kernel, on_empty=on_empty),
            {"bandwidth": bandwidths},
            cv=cv,
        ).fit(X, y)
    finally:
        context.__exit__(None, None, None)
    assert_allclose(
        reg.cv_results_["mean_test_score"],
        search.cv_results_["mean_test_score"],
        rtol=RTOL,
    )


LOCAL_LINEAR_CASES = [
    pytest.param(name, kernel, h, id=f"{name}-{kernel}-{h}")
    for name in ("line", "plane", "decimals", "cube")
    for kernel in COMPACT
    for h in DATASETS[name][2]
]


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize(("name", "kernel", "h"), LOCAL_LINEAR_CASES)
def test_local_polynomial_paths_agree_at_the_edge(name, kernel, h, degree):
    # degree=1 and 2 solve each query's local design from the same decided
    # weights: brute force and the trees agree where keys sit on the edge.
    X, Q, _ = DATASETS[name]
    y, _ = _values(len(X), False)
    bandwidth = h if np.ndim(h) == 0 else np.asarray(h)
    predictions = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        for algorithm in ("brute", "kd_tree", "ball_tree"):
            reg = KernelAttentionRegressor(
                kernel=kernel, bandwidth=bandwidth, degree=degree, on_empty="nan"
            )
            predictions.append(reg.set_params(algorithm=algorithm).fit(X, y).predict(Q))
    assert_allclose(predictions[1], predictions[0], rtol=1e-9, atol=1e-9)
    assert_allclose(predictions[2], predictions[0], rtol=1e-9, atol=1e-9)


QUADRATIC_LOO_CASES = [
    pytest.param(name, kernel, weighted, id=f"{name}-{kernel}-{weighted}")
    for name in ("line", "plane", "decimals")
    for kernel in ("epanechnikov", "tricube", "boxcar")
    for weighted in (False, True)
]


@pytest.mark.parametrize(("name", "kernel", "weighted"), QUADRATIC_LOO_CASES)
def test_exact_local_quadratic_leave_one_out_matches_a_plain_loop(
    name, kernel, weighted
):
    # The search's leave-one-out scores of degree=2 are those of the
    # estimator refitted without each point, by a plain loop.
    X, _, _ = DATASETS[name]
    y, w = _values(len(X), weighted)
    bandwidths = _loo_bandwidths(name)
    cv = KernelAttentionRegressorCV(
        kernels=[kernel], bandwidths=bandwidths, degree=2, n_neighbors=None
    )
    context = _quiet()
    warnings.simplefilter("ignore", LocalLinearFallbackWarning)
    try:
        scores = cv.fit(X, y, sample_weight=w).cv_results_["mean_test_score"]
        weights = np.ones(len(X)) if w is None else w
        for h, score in zip(bandwidths, scores, strict=True):
            predictions = np.empty(len(X))
            for i in range(len(X)):
                others = np.arange(len(X)) != i
                reg = KernelAttentionRegressor(kernel, h, degree=2)
                reg.fit(X[others], y[others], sample_weight=weights[others])
                predictions[i] = reg.predict(X[i : i + 1])[0]
            expected = -np.sum(weights * (predictions - y) ** 2) / np.sum(weights)
            assert_allclose(score, expected, rtol=1e-8)
    finally:
        context.__exit__(None, None, None)


@pytest.mark.parametrize("path", PATHS)
def test_float32_keys_just_inside_the_edge_keep_their_weight(path):
    # u = 1 / (1 + 1e-8) < 1 rounds to 1 in float32: the key is inside all
    # the same, and every path pools it with the boxcar's full weight.
    X = np.array([[0.0], [1.0]], dtype=np.float32)
    y = np.array([1.0, 5.0], dtype=np.float32)
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=1.0 + 1e-8)
    pred = _predict_on(path, reg, X, y, np.zeros((1, 1), dtype=np.float32))
    assert_allclose(pred, [3.0])


# -- the large-table selection ---------------------------------------------------
def _drawn_rows(n, m, seed, weights):
    """The subsample and the held-out rows of the large-table selection, by
    its documented rule: a permutation of the rows of positive weight by
    ``RandomState(seed)``, its first ``m`` rows the subsample, the next (up
    to 1,000) held out."""
    positive = np.flatnonzero(weights > 0)
    order = np.random.RandomState(seed).permutation(positive)
    return np.sort(order[:m]), np.sort(order[m : m + min(1000, positive.size - m)])


KERNEL_SUPPORT = {"gaussian": np.inf, "epanechnikov": 1.0, "tricube": 1.0}
LARGE_CASES = [
    pytest.param(kernel, degree, weighted, marks=() if fast else pytest.mark.slow)
    for kernel in ("gaussian", "epanechnikov", "tricube")
    for degree in (0, 1, 2)
    for weighted in (False, True)
    for fast in [(kernel, degree, weighted) == ("epanechnikov", 1, True)]
]


@pytest.mark.parametrize("kernel, degree, weighted", LARGE_CASES)
def test_the_large_selection_scores_its_candidates_as_a_plain_loop(
    kernel, degree, weighted
):
    # The second stage scores the rescaled widths at full n, one split: the
    # rows held out against every other (compact kernels on the neighbour
    # lists). Each candidate's score is the weighted mean squared error of
    # the plain loop's fit of the other rows at the held-out ones.
    from _reference import FORMULAS, safeguarded_fit
    from _reference_quadratic import guarded_fit

    rng = np.random.default_rng(5)
    n, m = 1300, 500
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.2 * rng.normal(size=n)
    w = np.ones(n)
    if weighted:
        w = rng.uniform(0.3, 3.0, n)
        w[rng.choice(n, 60, replace=False)] = 0.0
    search = KernelAttentionRegressorCV(
        kernels=(kernel,),
        degree=degree,
        n_neighbors=None,
        subsample=m,
        random_state=0,
        scoring="neg_mean_squared_error",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        search.fit(X, y, sample_weight=w if weighted else None)
    _, held = _drawn_rows(n, m, 0, w)
    train = np.setdiff1d(np.arange(n), held)
    assert search.n_held_out_ == held.size == 800 - 60 * weighted
    results = search.cv_results_
    keys, values, weights = X[train], y[train], w[train]
    distances = np.sqrt(((X[held, None, :] - keys[None, :, :]) ** 2).sum(axis=2))
    distances[:, weights == 0] = np.inf
    nearest = values[np.argmin(distances, axis=1)]
    for h, score in zip(
        results["param_bandwidth"], results["mean_test_score"], strict=True
    ):
        # A held-out row with no key inside the support takes its nearest
        # key's value (on_empty="nearest"; no ties on these coordinates).
        inside = np.any(distances / h < KERNEL_SUPPORT[kernel], axis=1)
        mean = nearest.copy()
        fit = safeguarded_fit(
            keys, values, X[held][inside], FORMULAS[kernel], h, weights
        )
        mean[inside] = (fit["mean"] if degree == 1 else fit["local_mean"])[:, 0]
        if degree == 2:
            quadratic = guarded_fit(
                keys, values, X[held][inside], FORMULAS[kernel], h, weights
            )
            mean[inside] = quadratic["mean"][:, 0]
        errors = (y[held] - mean) ** 2
        expected = -np.sum(w[held] * errors) / np.sum(w[held])
        assert_allclose(score, expected, rtol=RTOL)
    assert len(results["params"]) >= 9
    if kernel != "gaussian" and degree < 2:  # the narrowest widths leave
        assert results["empty_fraction"][0] > 0  # rows empty (not degree 2's)
