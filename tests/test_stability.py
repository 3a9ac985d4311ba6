"""Numerical stability on adversarial data, against a slow float64 reference.

Every path (brute, kd_tree and ball_tree for the compact kernels, the array
API path on array-api-strict) is compared with :func:`slow_fit`, a loop over
the queries that takes exact differences ``q - k`` of the coordinates as
given, applies the defining formula of the kernel (as a shifted softmax for
the kernels with a log form, which cannot underflow), and solves each
query's weighted least-squares problem (local-linear: the minimum-norm
slope of ``numpy.linalg.lstsq`` on the design centred on the local mean of
the keys, over the engine's numerical rank, shrunk by the safeguard's
factor); the spread is the two-pass
``sqrt(sum_i p_i (y_i - fit_i)**2)``.

The data are built to defeat moment-based and expansion-based arithmetic:
keys in groups 1e8 bandwidths apart, coordinates offset by 1e8 and 1e12,
queries 1e8 bandwidths from every key, values with a step of 1e8 on an
offset of 1e12, sample weights down to the subnormal range.

Tolerance: the engine scales the coordinates by the bandwidth and centres
them, which rounds each by a few ulps of its magnitude, ``eps * M`` with
``M = max |x| / h`` over keys and queries. A scaled distance is then exact
to a few ``eps * M``, and a prediction to

    atol = scale * (1e-10 + 16 * eps * M)

with ``scale`` the largest magnitude of the values about their mean (or the
fit); on ordinary data (``M`` small) this is 1e-10 relative. The spread of
values is exact to ``std * 1e-10 + 16 * eps * max |y - mean(y)|``: each
centred value rounds by an ulp of its own magnitude (for local-linear
residuals, which subtract a fitted intercept from ``y``, an ulp of ``y``).
"""

import warnings

import numpy as np
import pytest
from _array_api import strict_namespace
from _reference import kish, slope_factor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from sklearn import config_context
from sklearn.model_selection import KFold

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool.kernels import KERNELS

EPS = float(np.finfo(np.float64).eps)
CANONICAL = sorted({kernel.name for kernel in KERNELS.values()})
COMPACT = [name for name in CANONICAL if KERNELS[name].is_compact]

# log(alpha(u)) of the kernels with a log form, alpha(u) of the others: the
# defining formulas, elementwise.
LOG_FORMULAS = {
    "gaussian": lambda u: -0.5 * u * u,
    "exponential": lambda u: -u,
    "cauchy": lambda u: -np.log1p(u * u),
}
FORMULAS = {
    "boxcar": lambda u: (u < 1.0) * 1.0,
    "constant": lambda u: np.ones_like(u),
    "epanechikov": lambda u: np.maximum(1.0 - u, 0.0),
    "epanechnikov": lambda u: np.maximum(1.0 - u * u, 0.0),
    "biweight": lambda u: np.maximum(1.0 - u * u, 0.0) ** 2,
    "triweight": lambda u: np.maximum(1.0 - u * u, 0.0) ** 3,
    "tricube": lambda u: np.maximum(1.0 - u**3, 0.0) ** 3,
    "cosine": lambda u: np.where(u < 1.0, np.cos(np.pi * np.minimum(u, 1) / 2), 0.0),
}
assert set(LOG_FORMULAS) | set(FORMULAS) == set(CANONICAL)


def slow_fit(X, y, Q, kernel, h, sample_weight=None, degree=0):
    """Local fits at each query by a loop: (mean, std), shaped like ``y``."""
    X, Q = np.asarray(X, dtype=float), np.asarray(Q, dtype=float)
    Y = np.asarray(y, dtype=float).reshape(len(X), -1)
    # Values about their mean, so that residuals do not carry the rounding
    # of a fitted intercept of the offset's magnitude (1e12 has an ulp of
    # 1e-4, whose square would bias the spread).
    center = Y.mean(axis=0)
    Y = Y - center
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight)
    w = w / w.max()  # exact ratios of subnormal weights, which are exact
    mean = np.empty((len(Q), Y.shape[1]))
    std = np.empty_like(mean)
    for j, q in enumerate(Q):
        diff = (X - q) / h  # exact differences, then the bandwidth
        u = np.sqrt(np.sum(diff * diff, axis=1))
        if kernel in LOG_FORMULAS:
            with np.errstate(divide="ignore"):
                logits = LOG_FORMULAS[kernel](u) + np.log(w)
            a = np.exp(logits - logits.max())
        else:
            a = w * FORMULAS[kernel](u)
        p = a / a.sum()
        root = np.sqrt(p)[:, None]
        ybar = p @ Y
        fit = np.broadcast_to(ybar, Y.shape)
        if degree == 1:
            # The minimum-norm slope on the design centred on the local mean
            # of the keys, over the directions whose eigenvalue of the local
            # covariance C exceeds the rounding of its two-pass computation,
            # 10 d sqrt(n) eps sqrt(E_p|k - c|^2 trace(C)) (keys centred on
            # their mean c, in bandwidths), shrunk by the safeguard's factor
            # s of the Mahalanobis distance of the query from the local mean.
            local = p @ diff
            design = (diff - local) * root
            _, singular_values, vt = np.linalg.svd(design, full_matrices=False)
            spread = (X[w > 0] - X[w > 0].mean(axis=0)) / h
            scale = p[w > 0] @ np.sum(spread * spread, axis=1)
            scale = np.sqrt(scale * np.sum(singular_values**2))
            tol = 10.0 * X.shape[1] * np.sqrt(np.sum(w > 0)) * EPS * scale
            kept = singular_values**2 > tol
            rcond = np.sqrt(tol) / max(singular_values[0], 1e-300)
            beta = np.linalg.lstsq(design, (Y - ybar) * root, rcond=rcond)[0]
            constant = kernel == "constant"
            beta *= shrinkage(local, singular_values[kept], vt[kept], kish(p, constant))
            fit = ybar + (diff - local) @ beta
            ybar = ybar - local @ beta
        residuals = Y - fit
        mean[j] = ybar + center
        std[j] = np.sqrt(p @ (residuals * residuals))
    if np.ndim(y) == 1:
        return mean[:, 0], std[:, 0]
    return mean, std


def shrinkage(offset, singular_values, directions, inverse_count):
    """The safeguard's factor of the local slope, from its definition: the
    leverage of the query, from its squared Mahalanobis distance from the
    local mean of the keys (``offset``, the mean minus the query) under
    their local covariance and ``inverse_count``, the sum of its squared
    normalised weights."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        distance_sq = np.sum((directions @ offset / singular_values) ** 2)
    return slope_factor(distance_sq, inverse_count)


def quietly(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return func(*args, **kwargs)


def magnitude(X, Q, h):
    """``M``: the largest coordinate of keys and queries, in bandwidths."""
    return max(float(np.max(np.abs(X))), float(np.max(np.abs(Q)))) / h


def algorithms(kernel):
    if KERNELS[kernel].is_compact:
        return ["brute", "kd_tree", "ball_tree"]
    return ["brute"]


def cases(kernels=CANONICAL, degrees=(0, 1)):
    return [
        pytest.param(kernel, degree, algorithm, id=f"{kernel}-{degree}-{algorithm}")
        for kernel in kernels
        for degree in degrees
        for algorithm in algorithms(kernel)
    ]


def groups(d, offset, h, rng):
    """Keys in two groups 1e8 bandwidths apart, and queries inside each.

    The coordinates are ``offset + h * z``, with ``z`` in bandwidths: each
    group is uniform in a cube of 3 bandwidths, so that every query has keys
    in general position inside the support of every kernel.
    """
    z = rng.uniform(-1.5, 1.5, size=(80, d))
    z[40:] += 1e8
    zq = rng.uniform(-0.4, 0.4, size=(8, d))
    zq[4:] += 1e8
    y = np.sin(2 * z[:, 0]) + 0.5 * (z - np.round(z, -8)).sum(axis=1)
    y[40:] += 3.0
    return offset + h * z, y, offset + h * zq


def predict(kernel, degree, algorithm, X, y, Q, h, sample_weight=None, **params):
    reg = KernelAttentionRegressor(
        kernel=kernel, bandwidth=h, degree=degree, algorithm=algorithm, **params
    )
    reg.fit(X, y, sample_weight=sample_weight)
    return quietly(reg.predict, Q, return_std=True)


def assert_close_to(actual, expected, atol):
    actual, expected = np.asarray(actual), np.asarray(expected)
    error = float(np.max(np.abs(actual - expected)))
    assert error <= atol, f"error {error:.3g} > tolerance {atol:.3g}"


# Offsets of the data in its own units, with the bandwidth that keeps the
# groups 1e8 bandwidths apart within float64 (M up to 2e8).
OFFSETS = [
    pytest.param(0.0, 0.75, id="no-offset"),
    pytest.param(1e8, 0.75, id="offset-1e8"),
    pytest.param(1e12, 1e4, id="offset-1e12"),
]


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("offset, h", OFFSETS)
@pytest.mark.parametrize("kernel, degree, algorithm", cases())
def test_groups_far_apart(kernel, degree, algorithm, offset, h, d):
    # Keys in two groups 1e8 bandwidths apart: the BLAS expansion of the
    # distances about the centre of all keys, and moments about that centre,
    # lose everything; each group's queries must see only their group.
    if kernel == "constant" and degree == 1:
        pytest.skip("one global fit across both groups: the reference is ill-posed")
    rng = np.random.default_rng(d)
    X, y, Q = groups(d, offset, h, rng)
    check_against_reference(kernel, degree, algorithm, X, y, Q, h)


def check_against_reference(kernel, degree, algorithm, X, y, Q, h):
    mean, std = predict(kernel, degree, algorithm, X, y, Q, h)
    expected_mean, expected_std = slow_fit(X, y, Q, kernel, h, degree=degree)
    scale = float(np.max(np.abs(y - y.mean())))
    atol = scale * (1e-10 + 16 * EPS * magnitude(X, Q, h))
    assert_close_to(mean, expected_mean, atol)
    assert_close_to(std, expected_std, atol)


@pytest.mark.parametrize("offset", [1e8, 1e12])
@pytest.mark.parametrize("kernel", sorted(LOG_FORMULAS))
def test_far_queries_and_far_groups(kernel, offset):
    # Queries 1e8 bandwidths from every key (keys offset by 1e8 or 1e12 in
    # their own units), where every weight underflows, and a third group of
    # keys 1e8 bandwidths away from the other two, which the queries near
    # it must tell apart to the bandwidth.
    rng = np.random.default_rng(0)
    h = offset / 1e4
    z = rng.uniform(-3, 3, size=(90, 2))
    z[60:] += [1e8, 2e8]
    X = offset + h * z
    y = np.cos(z[:, 0] - np.round(z[:, 0], -8)) + (z[:, 1] > 1e7)
    zq = np.array([[1e8, 0.5], [-1e8, 1e8], [3.0, -1e8], [1e8 + 0.5, 2e8 - 1.0]])
    Q = offset + h * zq
    for degree in (0, 1):
        queries = Q if degree == 0 else Q[-1:]  # no extrapolation 1e8 away
        check_against_reference(kernel, degree, "brute", X, y, queries, h)


def step_data(y_offset, rng):
    """1-D keys in bandwidths, values with a step of 1e8 on ``y_offset``."""
    X = np.sort(rng.uniform(0, 20, size=200))[:, None]
    y = y_offset + 1e8 * (X[:, 0] > 10) + rng.normal(size=200) + 0.3 * X[:, 0]
    Q = np.array([[2.0], [5.5], [14.0], [18.5]])
    return X, y, Q


def std_tolerance(y, expected_std, degree=0):
    """The spread is exact to a few ulps of the centred values (degree 0);
    a local-linear residual ``y - b - beta . (k - q)`` rounds by an ulp of
    ``y`` itself, in the reference too (degree 1)."""
    magnitude = np.max(np.abs(y - y.mean() if degree == 0 else y))
    return 1e-10 * np.abs(expected_std) + 16 * EPS * magnitude


@pytest.mark.parametrize("y_offset", [0.0, 1e12])
@pytest.mark.parametrize("kernel, degree, algorithm", cases())
def test_return_std_far_from_the_global_mean(kernel, degree, algorithm, y_offset):
    # A step of 1e8 in y: the local means are 5e7 from the global one, and a
    # spread computed from raw moments about it cancels to nothing.
    if kernel == "constant":
        pytest.skip("the constant kernel pools across the step")
    X, y, Q = step_data(y_offset, np.random.default_rng(1))
    mean, std = predict(kernel, degree, algorithm, X, y, Q, 1.5)
    expected_mean, expected_std = slow_fit(X, y, Q, kernel, 1.5, degree=degree)
    assert_close_to(mean, expected_mean, 1e-10 + 16 * EPS * np.max(np.abs(y)))
    tolerance = std_tolerance(y, expected_std, degree)
    assert np.all(np.abs(std - expected_std) <= tolerance)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_return_std_of_fallback_rows(on_empty, degree, algorithm):
    # Queries outside the support get the spread of their fallback weights:
    # the tied nearest keys' values, or all of them; both about their mean.
    X = np.arange(10.0)[:, None]
    y = 1e12 + np.array([0, 1, 2, 3, 4, 1e8, 1e8 + 2, 1e8 + 5, 1e8 + 6, 1e8 + 9.0])
    Q = np.array([[7.5], [30.0]])
    mean, std = predict("boxcar", degree, algorithm, X, y, Q, 0.4, on_empty=on_empty)
    if on_empty == "nearest":
        expected = [np.std(y[7:9]), np.std(y[9:])]
    else:
        expected = [np.std(y)] * 2
    assert np.all(np.abs(std - expected) <= std_tolerance(y, np.asarray(expected)))


# -- sample weights of every magnitude ---------------------------------------
# Relative to the largest weight, each dtype carries weights down to
# finfo.tiny / finfo.eps at full precision: 2**-970 in float64, 2**-103 in
# float32. Below, subnormal weights carry a few bits only.
SMALL_WEIGHTS = {
    "subnormal": {np.float64: 1e-322, np.float32: 1e-40},
    "tiny-normal": {np.float64: 2.0**-960, np.float32: 2.0**-100},
}


def weight_case(dtype, weights):
    """Keys 0..9; those past 5 weigh far less than the others (``weights``
    "subnormal" or "tiny-normal"), or all weights are subnormal."""
    X = np.arange(10.0, dtype=dtype)[:, None]
    y = np.sin(np.arange(10.0)) + 2.0
    if weights == "all-subnormal":  # a power of two makes them normal, exactly
        w = 5e-324 * np.arange(1.0, 11.0)
    else:
        w = np.ones(10)
        w[5:] = SMALL_WEIGHTS[weights][dtype]
    return X, y, w, np.array([[7.2], [8.6], [2.5]], dtype=dtype)


@pytest.mark.parametrize("weights", ["subnormal", "tiny-normal", "all-subnormal"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel, degree, algorithm", cases(COMPACT))
def test_weights_of_every_magnitude(kernel, degree, algorithm, dtype, weights):
    # Queries that only the keys of small weight reach pool them alone: the
    # result is the reference's, or (subnormal weights next to normal ones,
    # which carry a few bits) a ValueError naming sample_weight, never a
    # skewed value.
    X, y, w, Q = weight_case(dtype, weights)
    try:
        mean, _ = predict(kernel, degree, algorithm, X, y, Q, 1.1, sample_weight=w)
    except ValueError as exc:
        assert weights == "subnormal"
        assert "sample_weight" in str(exc)
        return
    expected, _ = slow_fit(X, y, Q, kernel, 1.1, w, degree=degree)
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    assert_close_to(mean, expected, rtol * np.max(np.abs(y)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_subnormal_weights_are_refused_by_the_cv(dtype):
    X, y, w, _ = weight_case(dtype, "subnormal")
    cv = KernelAttentionRegressorCV(kernels=["epanechnikov"], bandwidths=[1.1, 2.0])
    with pytest.raises(ValueError, match="sample_weight"):
        quietly(cv.fit, X, y, sample_weight=w)


# -- the array API path --------------------------------------------------------
def predict_xp(kernel, X, y, Q, h, sample_weight=None):
    """Predictions and spreads of the array API path on array-api-strict."""
    xp = strict_namespace()
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=h)
    weights = None if sample_weight is None else xp.asarray(sample_weight)
    with config_context(array_api_dispatch=True):
        reg.fit(xp.asarray(X), xp.asarray(y), sample_weight=weights)
        mean, std = quietly(reg.predict, xp.asarray(Q), return_std=True)
    return np.asarray(mean._array), np.asarray(std._array)


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("offset, h", OFFSETS)
@pytest.mark.parametrize("kernel", CANONICAL)
def test_array_api_groups_far_apart(kernel, offset, h, d):
    X, y, Q = groups(d, offset, h, np.random.default_rng(d))
    mean, std = predict_xp(kernel, X, y, Q, h)
    expected_mean, expected_std = slow_fit(X, y, Q, kernel, h)
    atol = np.max(np.abs(y - y.mean())) * (1e-10 + 16 * EPS * magnitude(X, Q, h))
    assert_close_to(mean, expected_mean, atol)
    assert_close_to(std, expected_std, atol)


@pytest.mark.parametrize("y_offset", [0.0, 1e12])
@pytest.mark.parametrize("kernel", [k for k in CANONICAL if k != "constant"])
def test_array_api_return_std_far_from_the_global_mean(kernel, y_offset):
    X, y, Q = step_data(y_offset, np.random.default_rng(1))
    mean, std = predict_xp(kernel, X, y, Q, 1.5)
    expected_mean, expected_std = slow_fit(X, y, Q, kernel, 1.5)
    assert_close_to(mean, expected_mean, 1e-10 + 16 * EPS * np.max(np.abs(y)))
    assert np.all(np.abs(std - expected_std) <= std_tolerance(y, expected_std))


@pytest.mark.parametrize("kernel", ["epanechnikov", "boxcar", "tricube"])
def test_array_api_weights_of_every_magnitude(kernel):
    for weights in SMALL_WEIGHTS | {"all-subnormal": None}:
        X, y, w, Q = weight_case(np.float64, weights)
        try:
            mean, _ = predict_xp(kernel, X, y, Q, 1.1, sample_weight=w)
        except ValueError as exc:
            assert weights == "subnormal"
            assert "sample_weight" in str(exc)
            continue
        expected, _ = slow_fit(X, y, Q, kernel, 1.1, w)
        assert_close_to(mean, expected, 1e-10 * np.max(np.abs(y)))


# -- properties of return_std under large offsets -----------------------------
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    kernel=st.sampled_from(CANONICAL),
    degree=st.sampled_from([0, 1]),
    tree=st.booleans(),
    log_h=st.floats(-3, 4),
    x_offset=st.floats(-1e9, 1e9),  # in bandwidths
    y_offset=st.sampled_from([0.0, 1e6, -1e9, 1e12]),
    log_step=st.floats(0, 9),
)
def test_return_std_matches_two_pass_reference(
    seed, kernel, degree, tree, log_h, x_offset, y_offset, log_step
):
    # Keys on a line in two halves, values with a step between them on an
    # offset: mean and spread against the two-pass reference, to the
    # tolerances of the module's docstring plus the propagation of the
    # distance rounding (relative weight errors of 16 eps M) into the spread.
    rng = np.random.default_rng(seed)
    h = 10.0**log_h
    z = np.sort(rng.uniform(-4, 4, size=60))[:, None]
    X = h * (x_offset + z)
    y = y_offset + 10.0**log_step * (z[:, 0] > 0) + rng.normal(size=60) + z[:, 0]
    zq = rng.uniform(-3.5, 3.5, size=(6, 1))
    Q = h * (x_offset + zq)
    algorithm = "kd_tree" if tree and KERNELS[kernel].is_compact else "brute"
    mean, std = predict(kernel, degree, algorithm, X, y, Q, h, on_empty="nan")
    expected_mean, expected_std = slow_fit(X, y, Q, kernel, h, degree=degree)
    keep = np.isfinite(expected_mean)  # queries with keys in the support
    np.testing.assert_array_equal(np.isfinite(mean), keep)
    spread = np.max(np.abs(y - y.mean()))
    weight_error = 16 * EPS * magnitude(X, Q, h)
    atol = spread * (1e-10 + weight_error) + 16 * EPS * np.max(np.abs(y))
    assert_close_to(mean[keep], expected_mean[keep], atol)
    expected_std = expected_std[keep]
    tolerance = std_tolerance(y, expected_std, degree)
    tolerance += weight_error * spread**2 / np.maximum(expected_std, 1e-300)
    assert np.all(np.abs(std[keep] - expected_std) <= tolerance)


# -- the exact leave-one-out and K-fold scores ---------------------------------
@pytest.mark.parametrize("cv", [None, 4], ids=["loo", "kfold"])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("d", [1, 2])
def test_held_out_scores_of_groups_far_apart(d, degree, cv):
    # The held-out predictions pool the same blocks of distances and the same
    # moments as the fitted estimator: every candidate's score against the
    # slow reference's, on keys in two groups 1e8 bandwidths apart.
    X, y, _ = groups(d, 0.0, 1.0, np.random.default_rng(d))
    X, y = X[::2], y[::2]
    kernels = [k for k in CANONICAL if k != "constant"]
    folds = (
        None if cv is None else list(KFold(cv, shuffle=True, random_state=0).split(X))
    )
    search = KernelAttentionRegressorCV(
        kernels=kernels,
        bandwidths=[1.7, 2.5],
        degree=degree,
        cv=folds,
        scoring="neg_mean_squared_error",
        n_neighbors=None,
    )
    results = quietly(search.fit, X, y).cv_results_
    folds = [([j for j in range(len(X)) if j != i], [i]) for i in range(len(X))]
    if cv is not None:
        folds = list(KFold(cv, shuffle=True, random_state=0).split(X))
    atol = np.max(np.abs(y - y.mean())) * (1e-10 + 16 * EPS * magnitude(X, X, 1.7))
    # Rows whose neighbourhood is empty fall back by design (to on_empty),
    # unlike the reference: their candidates are left out. (Local designs of
    # rank 0, which get the local mean, follow the reference's rule: 1e8
    # bandwidths from the centre of the keys, the rank threshold relative to
    # the second moments about that centre leaves no slope to the groups.)
    fell_back = results["empty_fraction"] > 0
    assert np.mean(fell_back) < 0.5
    for kernel, h, score in zip(
        results["param_kernel"][~fell_back],
        results["param_bandwidth"][~fell_back],
        results["mean_test_score"][~fell_back],
        strict=True,
    ):
        mse = []
        for train, test in folds:
            mean, _ = slow_fit(X[train], y[train], X[test], kernel, h, degree=degree)
            mse.append(np.mean((y[test] - mean) ** 2))
        expected = -np.mean(mse)  # LOO: the mean over single-point folds
        tolerance = 2 * np.sqrt(-expected) * atol + atol**2
        assert abs(score - expected) <= tolerance, (kernel, h, score, expected)


def slow_weights(X, Q, kernel, h, degree):
    """Equivalent-kernel weights ``l`` (``mean = l @ y``) by a loop."""
    n = len(X)
    weights = np.empty((len(Q), n))
    for j in range(len(Q)):
        # The fit of the unit vectors of y: row i of the result is l_i.
        weights[j] = slow_fit(X, np.eye(n), Q[j : j + 1], kernel, h, degree=degree)[0]
    return weights


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kernel, degree, algorithm", cases())
def test_attention_weights_of_groups_far_apart(kernel, degree, algorithm, sparse):
    if kernel == "constant" and degree == 1:
        pytest.skip("one global fit across both groups: the reference is ill-posed")
    X, y, Q = groups(2, 0.0, 0.75, np.random.default_rng(2))
    reg = KernelAttentionRegressor(
        kernel=kernel, bandwidth=0.75, degree=degree, algorithm=algorithm
    ).fit(X, y)
    weights = quietly(reg.attention_weights, Q, sparse=sparse)
    weights = weights.toarray() if sparse else weights
    expected = slow_weights(X, Q, kernel, 0.75, degree)
    assert_close_to(weights, expected, 1e-10 + 16 * EPS * magnitude(X, Q, 0.75))


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "cauchy"])
@pytest.mark.parametrize("offset", [0.0, 1e8, 1e12])
def test_per_feature_leave_one_out_of_groups_far_apart(kernel, offset):
    """The per-feature widths' leave-one-out predictions, against a loop."""
    from sklearn_kernelpool._widths._learning import loo_loss

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(40, 2)), rng.normal(size=(40, 2)) + 1e8])
    X += offset
    Y = rng.normal(size=(80, 1))
    widths = np.array([0.7, 1.3])
    _, predictions = loo_loss(
        np.log(widths), X, Y, np.ones(80), KERNELS[kernel], gradient=False
    )
    Z = X / widths
    expected = np.empty_like(Y)
    for i in range(len(Z)):
        diff = Z - Z[i]
        logits = LOG_FORMULAS[kernel](np.sqrt(np.einsum("ij,ij->i", diff, diff)))
        logits[i] = -np.inf
        alpha = np.exp(logits - logits.max())
        expected[i] = alpha @ Y / alpha.sum()
    M = np.abs(Z).max()
    np.testing.assert_allclose(predictions, expected, rtol=0, atol=1e-10 + 16 * EPS * M)


@pytest.mark.parametrize("offset", [1e4, 1e8])
def test_the_global_line_and_a_partially_linear_fit_far_from_the_origin(offset):
    # Translation invariance where every key lies far from the origin: the
    # global line of a small table (the search's candidate) and a partially
    # linear fit predict as they do about the origin.
    rng = np.random.default_rng(11)
    X = rng.uniform(-1, 1, (24, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.3 * rng.normal(size=24)
    Q = rng.uniform(-1, 1, (10, 3))
    line = KernelAttentionRegressorCV().fit(X, y)
    far = KernelAttentionRegressorCV().fit(X + offset, y)
    assert line.kernel_ == far.kernel_ == "constant"
    assert_allclose(far.best_score_, line.best_score_, rtol=1e-6)
    assert_allclose(far.predict(Q + offset), line.predict(Q), rtol=1e-6, atol=1e-8)
    model = KernelAttentionRegressor(bandwidth=0.8, linear_features=[0])
    near = model.fit(X, y).predict(Q)
    assert_allclose(model.fit(X + offset, y).predict(Q + offset), near, atol=1e-6)


# -- the large-table selection ---------------------------------------------------
LARGE_CASES = [
    pytest.param(kernel, degree, offset, marks=() if fast else pytest.mark.slow)
    for kernel in ("gaussian", "epanechnikov")
    for degree in (0, 1)
    for offset in (0.0, 1e8)
    for fast in [(kernel, degree, offset) == ("epanechnikov", 1, 1e8)]
]


@pytest.mark.parametrize("kernel, degree, offset", LARGE_CASES)
def test_the_large_selection_scores_data_far_from_the_origin(kernel, degree, offset):
    # The second stage scores the rescaled widths on the rows held out
    # against all the others (compact kernels on the neighbour lists): each
    # candidate's score against the slow reference's, with coordinates and
    # values offset by 1e8.
    rng = np.random.default_rng(11)
    n, m = 1300, 500
    z = rng.uniform(-3, 3, size=(n, 1))
    y = offset + np.sin(2 * z[:, 0]) + 0.2 * rng.normal(size=n)
    X = offset + z
    search = KernelAttentionRegressorCV(
        kernels=(kernel,),
        degree=degree,
        n_neighbors=None,
        subsample=m,
        random_state=2,
        scoring="neg_mean_squared_error",
    )
    results = quietly(search.fit, X, y).cv_results_
    order = np.random.RandomState(2).permutation(n)
    held = np.sort(order[m : m + 800])
    train = np.setdiff1d(np.arange(n), held)
    scale = np.max(np.abs(y - y.mean()))
    compared = 0
    for h, score, empty in zip(
        results["param_bandwidth"],
        results["mean_test_score"],
        results["empty_fraction"],
        strict=True,
    ):
        if empty > 0:  # the on_empty fallback, not in the reference
            continue
        mean, _ = slow_fit(X[train], y[train], X[held], kernel, h, degree=degree)
        expected = -np.mean((y[held] - mean) ** 2)
        atol = scale * (1e-10 + 16 * EPS * magnitude(X, X, h))
        tolerance = 2 * np.sqrt(-expected) * atol + atol**2
        assert abs(score - expected) <= tolerance, (h, score, expected)
        compared += 1
    assert compared >= 5


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("offset, h", OFFSETS)
@pytest.mark.parametrize(
    "kernel, algorithm",
    [("gaussian", "brute"), ("epanechnikov", "brute"), ("tricube", "kd_tree")],
)
def test_local_quadratics_of_groups_far_apart(kernel, algorithm, offset, h, d):
    # degree=2 on two groups 1e8 bandwidths apart: each query's fit is that
    # of its own group, computed by the reference in small coordinates (the
    # fit does not depend on a translation of the data).
    from _reference import FORMULAS as SCALAR_FORMULAS
    from _reference_quadratic import guarded_fit

    rng = np.random.default_rng(d)
    X, y, Q = groups(d, offset, h, rng)
    mean, std = predict(kernel, 2, algorithm, X, y, Q, h)
    expected_mean, expected_std = np.empty(len(Q)), np.empty(len(Q))
    for group in (slice(0, 40), slice(40, 80)):
        base = X[group][0]
        mine = np.all(np.abs(Q - base) < 1e6 * h, axis=1)
        alpha = SCALAR_FORMULAS[kernel]
        fit = guarded_fit(X[group] - base, y[group], Q[mine] - base, alpha, h)
        expected_mean[mine], expected_std[mine] = fit["mean"][:, 0], fit["std"][:, 0]
    scale = float(np.max(np.abs(y - y.mean())))
    atol = scale * (1e-10 + 16 * EPS * magnitude(X, Q, h))
    assert_close_to(mean, expected_mean, atol)
    assert_close_to(std, expected_std, atol)
