"""Properties that must hold for any data, checked with hypothesis.

Hypothesis draws the shape of a problem (1 to 200 keys, 1 to 6 features,
1-D or 2-D ``y``), the kernel, a bandwidth from 1e-3 to 1e3 times the scale
of the data, sample weights, the algorithm and a seed from which NumPy makes
the data. Each test states the tolerance of its property.

The runs are derandomized (``derandomize=True``, no example database): CI
checks the same examples on every run, so a failure is reproducible and never
flaky. The examples themselves are still chosen by hypothesis, and a change of
the strategies explores new ones.

The classifier's probabilities, local-linear pooling (``degree=1``) and the
standard deviations of ``return_std`` have their own properties at the end,
on the same drawn problems.
"""

import warnings

import numpy as np
from _reference import FORMULAS, safeguarded_fit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import ortho_group

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted({kernel.name for kernel in KERNELS.values()})
COMPACT = [name for name in CANONICAL if KERNELS[name].is_compact]
UNBOUNDED = [name for name in CANONICAL if not KERNELS[name].is_compact]
EPS = {np.float64: float(np.finfo(np.float64).eps), np.float32: 1e-5}

PROPERTY_SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def attention_weights(estimator, X):
    """The attention weights of ``estimator`` for the queries ``X``.

    The sparse matrix holds the same weights, computed in other chunks: to
    the rounding of a normalised weight (at most 1), 64 eps.
    """
    dense = quietly(estimator.attention_weights, X)
    sparse = quietly(lambda Q: estimator.attention_weights(Q, sparse=True), X)
    assert sparse.shape == dense.shape
    assert_allclose(sparse.toarray(), dense, rtol=0, atol=64 * EPS[np.float64])
    return dense


def quietly(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return func(*args, **kwargs)


class Problem:
    """A drawn problem: data, an unfitted estimator and its scales."""

    def __init__(self, seed, n, m, d, n_outputs, kernel, log2_h, weights, algorithm):
        rng = np.random.default_rng(seed)
        self.rng = rng
        # Keys on a grid of 2**-26 in [0, 1): sums with offsets up to 2**20
        # are exact in float64, and a power-of-two bandwidth divides exactly.
        self.X = np.floor(rng.uniform(size=(n, d)) * 2**26) / 2**26
        self.Q = np.floor(rng.uniform(-0.2, 1.2, size=(m, d)) * 2**26) / 2**26
        columns = [np.sin(5 * self.X[:, 0]) + self.X.sum(axis=1)]
        columns += [rng.normal(size=n) for _ in range(max(n_outputs, 1) - 1)]
        Y = np.column_stack(columns)
        self.y = Y[:, 0] if n_outputs == 0 else Y
        if weights == "none":
            self.w = None
        elif weights == "counts":
            self.w = rng.integers(0, 4, size=n).astype(float)
            self.w[rng.integers(n)] = 1.0
        else:
            self.w = rng.uniform(0.1, 3.0, size=n)
        self.kernel = kernel
        self.h = 2.0**log2_h
        self.algorithm = algorithm if KERNELS[kernel].is_compact else "brute"
        # The extent of the data in bandwidths.
        self.R = 1.4 * np.sqrt(d) / self.h

    def estimator(self, **params):
        params = {
            "kernel": self.kernel,
            "bandwidth": self.h,
            "algorithm": self.algorithm,
            **params,
        }
        return KernelAttentionRegressor(**params)

    def fit_predict(self, X=None, y=None, Q=None, w="same", **params):
        X = self.X if X is None else X
        y = self.y if y is None else y
        Q = self.Q if Q is None else Q
        w = self.w if isinstance(w, str) else w
        reg = self.estimator(**params).fit(X, y, sample_weight=w)
        return quietly(reg.predict, Q)

    @property
    def scale(self):
        """The largest magnitude of y: tolerances are relative to it."""
        return float(np.max(np.abs(self.y))) or 1.0

    def rounding(self, dtype=np.float64):
        """The rounding of predictions: eps times the squared extent."""
        return EPS[dtype] * 64 * (1.0 + self.R**2) * self.scale


@st.composite
def problems(draw, kernels=tuple(CANONICAL), min_n=1):
    return Problem(
        seed=draw(st.integers(0, 2**32 - 1)),
        n=draw(st.integers(min_n, 200)),
        m=draw(st.integers(1, 40)),
        d=draw(st.integers(1, 6)),
        n_outputs=draw(st.sampled_from([0, 1, 3])),
        kernel=draw(st.sampled_from(kernels)),
        log2_h=draw(st.integers(-10, 10)),  # 1e-3 to 1e3 of the unit scale
        weights=draw(st.sampled_from(["none", "counts", "uniform"])),
        algorithm=draw(st.sampled_from(["auto", "brute", "kd_tree", "ball_tree"])),
    )


@PROPERTY_SETTINGS
@given(problems(), st.sampled_from(["nearest", "mean"]))
def test_predictions_are_convex_combinations(problem, on_empty):
    pred = problem.fit_predict(on_empty=on_empty)
    Y = problem.y.reshape(len(problem.X), -1)
    positive = np.ones(len(Y), bool) if problem.w is None else problem.w > 0
    pred = pred.reshape(len(problem.Q), -1)
    slack = 16 * EPS[np.float64] * problem.scale
    assert np.all(pred >= Y[positive].min(axis=0) - slack)
    assert np.all(pred <= Y[positive].max(axis=0) + slack)


@PROPERTY_SETTINGS
@given(problems(), st.integers(0, 20), st.sampled_from([np.float64, np.float32]))
def test_translation_invariance(problem, log2_offset, dtype):
    # float64: keys on a 2**-26 grid plus offsets up to 2**20 (1e6 data
    # scales) are exact, so only the engine's rounding is measured. float32
    # holds 24 bits: the keys are put on a 2**-10 grid and the offsets kept
    # below 2**13 (8e3 data scales), where the shifted inputs are exact too;
    # a float32 input 1e6 from the origin is only known to 0.06.
    if dtype == np.float32:
        problem.X = np.round(problem.X * 2**10) / 2**10
        problem.Q = np.round(problem.Q * 2**10) / 2**10
        log2_offset = min(log2_offset, 13)
    direction = problem.rng.choice([-1.0, 1.0], size=problem.X.shape[1])
    offset = direction * 2.0**log2_offset
    base = problem.fit_predict(X=problem.X.astype(dtype), Q=problem.Q.astype(dtype))
    shifted = problem.fit_predict(
        X=(problem.X + offset).astype(dtype), Q=(problem.Q + offset).astype(dtype)
    )
    assert_allclose(shifted, base, rtol=0, atol=problem.rounding(dtype))


@PROPERTY_SETTINGS
@given(problems())
def test_rotation_invariance_of_isotropic_bandwidths(problem):
    d = problem.X.shape[1]
    R = ortho_group.rvs(d, random_state=problem.rng) if d > 1 else -np.eye(1)
    base = problem.fit_predict()
    rotated = problem.fit_predict(X=problem.X @ R, Q=problem.Q @ R)
    assert_allclose(rotated, base, rtol=0, atol=problem.rounding())


@PROPERTY_SETTINGS
@given(problems())
def test_permutation_of_the_training_rows(problem):
    perm = problem.rng.permutation(len(problem.X))
    w = None if problem.w is None else problem.w[perm]
    base = problem.fit_predict()
    permuted = problem.fit_predict(X=problem.X[perm], y=problem.y[perm], w=w)
    assert_allclose(permuted, base, rtol=0, atol=problem.rounding())


@PROPERTY_SETTINGS
@given(problems())
def test_integer_weight_k_equals_k_duplicated_rows(problem):
    counts = problem.rng.integers(0, 4, size=len(problem.X))
    counts[problem.rng.integers(len(counts))] = 2
    weighted = problem.fit_predict(w=counts)
    repeated = problem.fit_predict(
        X=problem.X.repeat(counts, axis=0), y=problem.y.repeat(counts, axis=0), w=None
    )
    assert_allclose(weighted, repeated, rtol=0, atol=problem.rounding())


@PROPERTY_SETTINGS
@given(problems(), st.integers(-30, 30), st.floats(1e-3, 1e3))
def test_scale_equivariance_in_x_and_bandwidth(problem, log2_c, c):
    base = problem.fit_predict()
    # A power of two scales exactly: the predictions are the same bits.
    exact = problem.fit_predict(
        X=problem.X * 2.0**log2_c,
        Q=problem.Q * 2.0**log2_c,
        bandwidth=problem.h * 2.0**log2_c,
    )
    assert_array_equal(exact, base)
    # Any other factor rounds the inputs by an ulp.
    scaled = problem.fit_predict(
        X=problem.X * c, Q=problem.Q * c, bandwidth=problem.h * c
    )
    assert_allclose(scaled, base, rtol=0, atol=problem.rounding())


@PROPERTY_SETTINGS
@given(problems(), st.floats(-1e3, 1e3), st.floats(-1e6, 1e6))
def test_affine_equivariance_in_y(problem, a, b):
    base = problem.fit_predict()
    moved = problem.fit_predict(y=a * problem.y + b)
    tol = 1e-12 * len(problem.X) * (abs(a) * problem.scale + abs(b)) + 1e-300
    assert_allclose(moved, a * base + b, rtol=0, atol=tol)


@PROPERTY_SETTINGS
@given(problems(kernels=("gaussian",), min_n=2))
def test_tiny_gaussian_bandwidth_is_one_nearest_neighbour(problem):
    X, Q = problem.X, problem.Q
    d2 = ((Q[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
    if problem.w is not None:
        d2[:, problem.w == 0] = np.inf
    order = np.sort(d2, axis=1)
    gap = order[:, 1] - order[:, 0] if d2.shape[1] > 1 else np.full(len(Q), 1.0)
    clear = gap > 1e-6  # queries with one nearest key, by a margin
    if not clear.any():
        return
    # The second nearest key is 40 logits below the nearest: exp(-40) = 4e-18.
    h = float(np.sqrt(gap[clear].min() / 80))
    pred = problem.fit_predict(Q=Q[clear], bandwidth=h)
    Y = problem.y.reshape(len(X), -1)
    expected = Y[np.argmin(d2[clear], axis=1)]
    assert_allclose(pred.reshape(expected.shape), expected, rtol=1e-13, atol=1e-13)


@PROPERTY_SETTINGS
@given(problems(kernels=tuple(UNBOUNDED)))
def test_huge_bandwidth_of_an_unbounded_kernel_is_the_weighted_mean(problem):
    # Scaled distances below 1e-13: every weight is 1 - O(1e-13).
    pred = problem.fit_predict(bandwidth=1e13)
    mean = np.average(problem.y, axis=0, weights=problem.w)
    expected = np.broadcast_to(mean, pred.shape)
    assert_allclose(pred, expected, rtol=0, atol=1e-11 * problem.scale)


@PROPERTY_SETTINGS
@given(problems(kernels=tuple(COMPACT)), st.sampled_from(["nearest", "mean", "nan"]))
def test_all_algorithms_agree(problem, on_empty):
    preds = [
        problem.fit_predict(algorithm=algorithm, on_empty=on_empty)
        for algorithm in ("brute", "kd_tree", "ball_tree")
    ]
    for pred in preds[1:]:
        assert_allclose(pred, preds[0], rtol=0, atol=problem.rounding())


@PROPERTY_SETTINGS
@given(problems(), st.sampled_from(["nearest", "mean"]))
def test_attention_weights_pool_to_the_predictions(problem, on_empty):
    reg = problem.estimator(on_empty=on_empty)
    reg.fit(problem.X, problem.y, sample_weight=problem.w)
    weights = attention_weights(reg, problem.Q)
    pred = quietly(reg.predict, problem.Q)
    assert weights.shape == (len(problem.Q), len(problem.X))
    assert np.all(weights >= 0)
    assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)
    if problem.w is not None:
        assert np.all(weights[:, problem.w == 0] == 0)
    # The same scores, summed in another order: rounding of n terms.
    tol = 64 * EPS[np.float64] * len(problem.X) * problem.scale
    assert_allclose(weights @ reg.values_, pred, rtol=0, atol=tol)


# -- the classifier ------------------------------------------------------------
def labels_of(problem):
    """Three classes, as a function of the keys so that they are learnable."""
    return np.digitize(problem.X.sum(axis=1) / problem.X.shape[1], [0.33, 0.66])


def fit_proba(problem, X=None, labels=None, Q=None, w="same", **params):
    X = problem.X if X is None else X
    labels = labels_of(problem) if labels is None else labels
    Q = problem.Q if Q is None else Q
    w = problem.w if isinstance(w, str) else w
    params = {
        "kernel": problem.kernel,
        "bandwidth": problem.h,
        "algorithm": problem.algorithm,
        **params,
    }
    clf = KernelAttentionClassifier(**params).fit(X, labels, sample_weight=w)
    return clf, quietly(clf.predict_proba, Q)


def proba_rounding(problem):
    """``rounding`` for values of scale 1: probabilities."""
    return EPS[np.float64] * 64 * (1.0 + problem.R**2)


@PROPERTY_SETTINGS
@given(problems())
def test_classifier_rows_are_probabilities_pooled_by_the_attention_weights(problem):
    clf, proba = fit_proba(problem)
    assert proba.shape == (len(problem.Q), len(clf.classes_))
    assert np.all((proba >= 0) & (proba <= 1))
    assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    weights = attention_weights(clf, problem.Q)
    # The same scores summed in another order, then normalised.
    tol = 64 * EPS[np.float64] * len(problem.X)
    assert_allclose(weights @ clf.values_, proba, rtol=0, atol=tol)


@PROPERTY_SETTINGS
@given(problems(), st.integers(0, 20))
def test_classifier_translation_rotation_and_permutation_invariance(
    problem, log2_offset
):
    _, base = fit_proba(problem)
    tol = proba_rounding(problem)
    # Exact shifts (see test_translation_invariance).
    offset = problem.rng.choice([-1.0, 1.0], size=problem.X.shape[1])
    offset *= 2.0**log2_offset
    _, shifted = fit_proba(
        problem, X=problem.X + offset, labels=labels_of(problem), Q=problem.Q + offset
    )
    assert_allclose(shifted, base, rtol=0, atol=tol)
    d = problem.X.shape[1]
    R = ortho_group.rvs(d, random_state=problem.rng) if d > 1 else -np.eye(1)
    _, rotated = fit_proba(
        problem, X=problem.X @ R, labels=labels_of(problem), Q=problem.Q @ R
    )
    assert_allclose(rotated, base, rtol=0, atol=tol)
    perm = problem.rng.permutation(len(problem.X))
    w = None if problem.w is None else problem.w[perm]
    _, permuted = fit_proba(
        problem, X=problem.X[perm], labels=labels_of(problem)[perm], w=w
    )
    assert_allclose(permuted, base, rtol=0, atol=tol)


@PROPERTY_SETTINGS
@given(problems())
def test_classifier_integer_weight_k_equals_k_duplicated_rows(problem):
    counts = problem.rng.integers(0, 4, size=len(problem.X))
    counts[problem.rng.integers(len(counts))] = 2
    labels = labels_of(problem)
    _, weighted = fit_proba(problem, w=counts)
    clf, repeated = fit_proba(
        problem,
        X=problem.X.repeat(counts, axis=0),
        labels=labels.repeat(counts),
        w=None,
    )
    # Classes of weight zero are absent from the repeated fit.
    present = np.isin(np.unique(labels), clf.classes_)
    assert_allclose(
        weighted[:, present], repeated, rtol=0, atol=proba_rounding(problem)
    )
    assert np.all(weighted[:, ~present] == 0)


@PROPERTY_SETTINGS
@given(problems(kernels=tuple(COMPACT)), st.sampled_from(["nearest", "mean"]))
def test_classifier_algorithms_agree(problem, on_empty):
    probas = [
        fit_proba(problem, algorithm=algorithm, on_empty=on_empty)[1]
        for algorithm in ("brute", "kd_tree", "ball_tree")
    ]
    for proba in probas[1:]:
        assert_allclose(proba, probas[0], rtol=0, atol=proba_rounding(problem))


# -- local-linear pooling (degree=1) ------------------------------------------
# The local-linear fit solves a small weighted least-squares problem per query,
# whose rounding grows with the condition number of its moment matrix. These
# problems keep it moderate: at least 30 keys, unbounded kernels (every key
# carries weight) and bandwidths from 1/4 to 16 times the unit scale of the
# keys. Rounding then stays below LOCAL_LINEAR_RTOL times the scale of y.
LOCAL_LINEAR_RTOL = 1e-8


@st.composite
def local_linear_problems(draw):
    return Problem(
        seed=draw(st.integers(0, 2**32 - 1)),
        n=draw(st.integers(30, 150)),
        m=draw(st.integers(1, 30)),
        d=draw(st.integers(1, 4)),
        n_outputs=draw(st.sampled_from([0, 2])),
        kernel=draw(st.sampled_from(UNBOUNDED)),
        log2_h=draw(st.integers(-2, 4)),
        weights=draw(st.sampled_from(["none", "counts", "uniform"])),
        algorithm="brute",
    )


def local_linear(problem, **kwargs):
    return quietly(problem.fit_predict, degree=1, **kwargs)


@PROPERTY_SETTINGS
@given(local_linear_problems(), st.integers(0, 20))
def test_local_linear_invariances(problem, log2_offset):
    base = local_linear(problem)
    tol = LOCAL_LINEAR_RTOL * problem.scale
    offset = problem.rng.choice([-1.0, 1.0], size=problem.X.shape[1])
    offset *= 2.0**log2_offset
    shifted = local_linear(problem, X=problem.X + offset, Q=problem.Q + offset)
    assert_allclose(shifted, base, rtol=0, atol=tol)
    d = problem.X.shape[1]
    R = ortho_group.rvs(d, random_state=problem.rng) if d > 1 else -np.eye(1)
    rotated = local_linear(problem, X=problem.X @ R, Q=problem.Q @ R)
    assert_allclose(rotated, base, rtol=0, atol=tol)
    perm = problem.rng.permutation(len(problem.X))
    w = None if problem.w is None else problem.w[perm]
    permuted = local_linear(problem, X=problem.X[perm], y=problem.y[perm], w=w)
    assert_allclose(permuted, base, rtol=0, atol=tol)


@PROPERTY_SETTINGS
@given(local_linear_problems())
def test_local_linear_integer_weight_k_equals_k_duplicated_rows(problem):
    # Wherever the safeguard keeps the slope of both fits: it counts the keys
    # behind a line by Kish's effective number of their weights, which does
    # not depend on their scale, so that a weight of k is not k rows there.
    counts = problem.rng.integers(1, 4, size=len(problem.X))
    X, y = problem.X.repeat(counts, axis=0), problem.y.repeat(counts, axis=0)
    weighted = local_linear(problem, w=counts)
    repeated = local_linear(problem, X=X, y=y, w=None)
    alpha = FORMULAS[problem.kernel]
    kept = safeguarded_fit(problem.X, problem.y, problem.Q, alpha, problem.h, counts)
    kept = kept["shrinkage"] == 1.0
    kept &= safeguarded_fit(X, y, problem.Q, alpha, problem.h)["shrinkage"] == 1.0
    atol = LOCAL_LINEAR_RTOL * problem.scale
    assert_allclose(weighted[kept], repeated[kept], rtol=0, atol=atol)


@PROPERTY_SETTINGS
@given(local_linear_problems(), st.floats(-10, 10), st.floats(-10, 10))
def test_local_linear_reproduces_linear_functions(problem, slope, intercept):
    d = problem.X.shape[1]
    beta = slope * problem.rng.uniform(-1, 1, size=d)
    y = problem.X @ beta + intercept
    pred = local_linear(problem, y=y)
    expected = problem.Q @ beta + intercept
    # Where the safeguard shrinks the slope by s (a query far from the local
    # centre m of its keys), the prediction is f(m) + s (f(q) - f(m)).
    fit = safeguarded_fit(
        problem.X, y, problem.Q, FORMULAS[problem.kernel], problem.h, problem.w
    )
    local, s = fit["local_mean"][:, 0], fit["shrinkage"]
    expected = local + s * (expected - local)
    scale = np.abs(beta).sum() + abs(intercept) + 1.0
    assert_allclose(pred, expected, rtol=0, atol=LOCAL_LINEAR_RTOL * scale)


@PROPERTY_SETTINGS
@given(local_linear_problems())
def test_local_linear_attention_weights_pool_to_the_predictions(problem):
    reg = problem.estimator(degree=1)
    reg.fit(problem.X, problem.y, sample_weight=problem.w)
    weights = attention_weights(reg, problem.Q)
    pred = quietly(reg.predict, problem.Q)
    assert_allclose(weights.sum(axis=1), 1.0, rtol=0, atol=1e-10)
    tol = LOCAL_LINEAR_RTOL * problem.scale
    assert_allclose(weights @ reg.values_, pred, rtol=0, atol=tol)


# -- return_std -----------------------------------------------------------------
def fit_std(problem, X=None, y=None, Q=None, degree=0):
    X = problem.X if X is None else X
    y = problem.y if y is None else y
    Q = problem.Q if Q is None else Q
    reg = problem.estimator(degree=degree).fit(X, y, sample_weight=problem.w)
    return quietly(reg.predict, Q, return_std=True)[1]


@PROPERTY_SETTINGS
@given(
    problems(),
    st.sampled_from([0, 1]),
    st.integers(0, 20),
    st.floats(-1e3, 1e3),
    st.floats(-1e6, 1e6),
)
def test_std_is_non_negative_translation_invariant_and_equivariant(
    problem, degree, log2_offset, a, b
):
    if degree == 1 and len(problem.X) < 30:
        degree = 0  # local-linear rounding needs enough keys (see above)
    rtol = LOCAL_LINEAR_RTOL if degree else 64 * EPS[np.float64] * (1 + problem.R**2)
    std = fit_std(problem, degree=degree)
    assert np.all(std >= 0)
    offset = problem.rng.choice([-1.0, 1.0], size=problem.X.shape[1])
    offset *= 2.0**log2_offset
    shifted = fit_std(
        problem, X=problem.X + offset, Q=problem.Q + offset, degree=degree
    )
    # A standard deviation is the root of a variance: its rounding is the
    # square root of the variance's rounding, relative to the scale of y.
    tol = np.sqrt(rtol) * problem.scale
    assert_allclose(shifted, std, rtol=0, atol=tol)
    moved = fit_std(problem, y=a * problem.y + b, degree=degree)
    scale = abs(a) * problem.scale + abs(b)
    assert_allclose(moved, abs(a) * std, rtol=0, atol=np.sqrt(rtol) * scale + 1e-300)
