"""Per-feature widths of degree 1 learn on the safeguarded local-linear fits
that ``predict`` makes: the leave-one-out loss, the GCV/AICc of the in-sample
fits and the categorical widths' loss, and their gradients."""

import itertools
import warnings

import numpy as np
import pytest
from _reference import kish
from numpy.testing import assert_allclose
from scipy.optimize import minimize

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._widths._categorical import (
    learn,
    loo_objective,
    loo_predictions,
)
from sklearn_kernelpool._widths._criteria import criterion_loss
from sklearn_kernelpool._widths._learning import loo_loss
from sklearn_kernelpool.kernels import KERNELS

LOG_FORM = ["gaussian", "cauchy", "exponential"]
EPS = np.finfo(np.float64).eps


# -- the documented rule, one query at a time ----------------------------------
def safeguarded_fit(K, Y, a, q, n_keys, center, constant=False):
    """The safeguarded local-linear fit at ``q`` from keys ``K`` of scores
    ``a``, by the rule of :mod:`sklearn_kernelpool._engine._safeguard`.

    Returns the prediction, ``u = sqrt((1 + D**2) sum_j p_j**2)``, the root
    of the query's leverage (0 for the ``constant`` kernel), and the
    equivalent-kernel weights ``l_j = p_j (1 + s lever . (k_j - m))``.
    """
    d = K.shape[1]
    p = a / a.sum()
    m = p @ K
    ybar = p @ Y
    centred = K - m
    C = (centred * p[:, None]).T @ centred
    c = (centred * p[:, None]).T @ (Y - ybar)
    # The rank threshold: rounding of the moments about the keys' mean.
    scale = np.trace(C) + (m - center) @ (m - center)
    eigenvalues, vectors = np.linalg.eigh(C)
    kept = eigenvalues > 10 * d * np.sqrt(n_keys) * EPS * scale
    C_plus = (vectors[:, kept] / eigenvalues[kept]) @ vectors[:, kept].T
    delta = q - m
    u = np.sqrt((1.0 + delta @ C_plus @ delta) * kish(p, constant))
    s = 1.0 if u <= 1.0 else np.exp(-((u - 1.0) ** 2) / 2)
    prediction = ybar + s * (C_plus @ c).T @ delta
    return prediction, u, p * (1.0 + s * centred @ (C_plus @ delta))


def slow_fits(X, Y, w, kernel, widths, own=False, codes=None, lambdas=None):
    """Held-out (or, with ``own``, in-sample) safeguarded fits of every
    point, each from its own loop over the keys.

    Returns the fits, ``u`` of each row and the trace of the smoother matrix
    over the points of positive weight (with ``own``).
    """
    alpha = KERNELS[kernel]
    Z = X / widths
    n = len(X)
    fits, u, trace = np.empty_like(Y), np.empty(n), 0.0
    for i in range(n):
        keys = np.arange(n) if own else np.flatnonzero(np.arange(n) != i)
        a = w[keys] * alpha(np.linalg.norm(Z[keys] - Z[i], axis=1))
        if codes is not None:
            a *= np.prod(np.where(codes[keys] != codes[i], lambdas, 1.0), axis=1)
        positive = keys[w[keys] > 0]
        center = Z[positive].mean(axis=0)
        fits[i], u[i], kernel_weights = safeguarded_fit(
            Z[keys], Y[keys], a, Z[i], len(positive), center, kernel == "constant"
        )
        if own and w[i] > 0:
            trace += kernel_weights[i]
    return fits, u, trace


def shrinkage(u):
    return np.where(u > 1, np.exp(-((u - 1) ** 2) / 2), 1.0)


def assert_shrunk_rows(root_leverage, theta, n_strict=1, step=1e-6):
    """Some rows strictly shrunk (0 < s < 1) at ``theta``, and none crossing
    the kink ``u = 1``, where ``s`` has no second derivative, within the
    steps of :func:`numeric_gradient`. ``root_leverage(theta)`` gives the
    ``u`` of the rows (rows whose weight one key carries sit at ``u = 1``,
    from below: their leverage is that of one key)."""
    u = root_leverage(theta)
    s = shrinkage(u)
    assert np.count_nonzero((s > 0.01) & (s < 0.99)) >= n_strict
    for f, sign in itertools.product(range(len(theta)), (-1.0, 1.0)):
        moved = theta.copy()
        moved[f] += sign * step
        assert np.array_equal(root_leverage(moved) > 1.0, u > 1.0)


def numeric_gradient(function, theta, step=1e-6):
    grad = []
    for f in range(len(theta)):
        up, down = theta.copy(), theta.copy()
        up[f] += step
        down[f] -= step
        grad.append((function(up) - function(down)) / (2 * step))
    return np.array(grad)


def heavy_tailed(n=40, seed=0):
    """Heavy-tailed points, one point far from every other and two close
    points far from the rest, two outputs, sample weights with one zero:
    many held-out fits are shrunk (with the Cauchy kernel, whose tails give
    the others many keys, that of the far point)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(2, size=(n, 2))
    X[-3:] = [[12.0, -12.0], [6.0, 6.0], [6.1, 5.9]]
    Y = np.c_[np.sin(X[:, 0]) + X[:, 1], np.cos(X[:, 1])]
    Y += 0.1 * rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, n)
    w[3] = 0.0
    return X, Y, w


def well_conditioned(n=40, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    Y = np.c_[X[:, 0] ** 2 + X[:, 1], np.sin(2 * X[:, 1])]
    Y += 0.1 * rng.normal(size=(n, 2))
    w = rng.uniform(0.5, 2.0, n)
    w[0] = 0.0
    return X, Y, w


def refit_loo(X, Y, w, kernel, widths):
    """Leave-one-out predictions of the fitted estimator, refitted."""
    predictions = np.empty_like(Y)
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        reg = KernelAttentionRegressor(kernel=kernel, bandwidth=widths, degree=1)
        reg.fit(X[keep], Y[keep], sample_weight=w[keep])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            predictions[i] = reg.predict(X[i : i + 1])[0]
    return predictions


# -- the leave-one-out loss ------------------------------------------------------
@pytest.mark.parametrize("kernel", LOG_FORM)
@pytest.mark.parametrize("case", ["heavy_tailed", "well_conditioned"])
def test_loo_loss_is_of_the_safeguarded_fits(case, kernel):
    X, Y, w = heavy_tailed() if case == "heavy_tailed" else well_conditioned()
    widths = np.array([1.0, 1.5]) if case == "heavy_tailed" else np.array([0.4, 0.6])
    loss, _, predictions = loo_loss(np.log(widths), X, Y, w, KERNELS[kernel], degree=1)
    expected, u, _ = slow_fits(X, Y, w, kernel, widths)
    if case == "heavy_tailed":
        assert np.count_nonzero(u > 1) >= (1 if kernel == "cauchy" else 3)
    else:
        assert np.all(u <= 1)  # the plain local-linear fits
    assert_allclose(predictions, expected, rtol=1e-9, atol=1e-10)
    assert_allclose(loss, np.average(np.mean((expected - Y) ** 2, axis=1), weights=w))
    # What predict does, refitted without each point.
    refitted = refit_loo(X, Y, w, kernel, widths)
    assert_allclose(predictions, refitted, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kernel", LOG_FORM)
@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_loo_gradient_through_the_safeguard(kernel, scale):
    X, Y, w = heavy_tailed()
    theta = np.log(scale * np.array([1.0, 1.5]))
    assert_shrunk_rows(lambda t: slow_fits(X, Y, w, kernel, np.exp(t))[1], theta)
    grad = loo_loss(theta, X, Y, w, KERNELS[kernel], degree=1)[1]
    numeric = numeric_gradient(
        lambda t: loo_loss(t, X, Y, w, KERNELS[kernel], False, degree=1)[0], theta
    )
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def test_loo_loss_in_chunks_of_one_row():
    from sklearn import config_context

    X, Y, w = heavy_tailed()
    theta = np.log([1.0, 1.5])
    whole = loo_loss(theta, X, Y, w, KERNELS["gaussian"], degree=1)
    with config_context(working_memory=1e-6):
        chunked = loo_loss(theta, X, Y, w, KERNELS["gaussian"], degree=1)
    assert_allclose(chunked[0], whole[0], rtol=1e-12)
    assert_allclose(chunked[1], whole[1], rtol=1e-10)


# -- GCV and AICc of the in-sample fits -----------------------------------------
def small_weight_outliers():
    """The heavy-tailed points, the outliers weighing little: their own key
    carries little of their in-sample fit, which is then shrunk."""
    X, Y, w = heavy_tailed()
    far = np.flatnonzero(np.abs(X[:-2]).max(axis=1) > 1.5)
    w[far[w[far] > 0]] = 0.02
    return X, Y, w


@pytest.mark.parametrize("criterion", ["gcv", "aicc"])
@pytest.mark.parametrize("kernel", LOG_FORM)
def test_criterion_of_the_safeguarded_fits(kernel, criterion):
    X, Y, w = small_weight_outliers()
    widths = np.array([2.0, 3.0])
    theta = np.log(widths)
    fits, u, trace = slow_fits(X, Y, w, kernel, widths, own=True)
    assert_shrunk_rows(
        lambda t: slow_fits(X, Y, w, kernel, np.exp(t), own=True)[1][w > 0],
        theta,
        n_strict=3,
    )
    positive = w > 0
    n = np.count_nonzero(positive)
    sigma2 = np.mean(np.average((Y - fits)[positive] ** 2, axis=0, weights=w[positive]))
    expected = {
        "gcv": sigma2 / (1 - trace / n) ** 2,
        "aicc": np.log(sigma2) + (1 + trace / n) / (1 - (trace + 2) / n),
    }[criterion]
    loss, grad, in_sample = criterion_loss(
        theta, X, Y, w, KERNELS[kernel], degree=1, criterion=criterion
    )
    assert_allclose(in_sample[positive], fits[positive], rtol=1e-9, atol=1e-10)
    assert_allclose(loss, expected, rtol=1e-9)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=widths, degree=1)
    summary = reg.fit(X, Y, sample_weight=w).smoother_diagnostics()
    assert_allclose(loss, summary[criterion], rtol=1e-8)

    def value(t):
        return criterion_loss(
            t, X, Y, w, KERNELS[kernel], False, degree=1, criterion=criterion
        )[0]

    assert_allclose(grad, numeric_gradient(value, theta), rtol=1e-5, atol=1e-9)


# -- categorical widths of degree 1 ----------------------------------------------
@pytest.mark.parametrize("kernel", LOG_FORM)
def test_categorical_loss_and_gradient_of_the_safeguarded_fits(kernel):
    X, Y, w = heavy_tailed()
    codes = np.random.default_rng(5).integers(0, 3, (len(X), 2))
    Y[:, 0] += codes[:, 0]
    widths, lambdas = np.array([1.0, 1.5]), np.array([0.2, 0.6])
    theta = np.log(np.r_[widths, lambdas])
    expected = slow_fits(X, Y, w, kernel, widths, codes=codes, lambdas=lambdas)[0]
    assert_shrunk_rows(
        lambda t: slow_fits(
            X, Y, w, kernel, np.exp(t[:2]), codes=codes, lambdas=np.exp(t[2:])
        )[1],
        theta,
        n_strict=2,
    )
    predictions = loo_predictions(
        X, codes, Y, w, KERNELS[kernel], widths, lambdas, degree=1
    )
    assert_allclose(predictions, expected, rtol=1e-9, atol=1e-10)
    value, grad = loo_objective(theta, X, codes, Y, w, KERNELS[kernel], degree=1)
    assert_allclose(value, np.average(np.sum((expected - Y) ** 2, axis=1), weights=w))
    numeric = numeric_gradient(
        lambda t: loo_objective(t, X, codes, Y, w, KERNELS[kernel], degree=1)[0],
        theta,
    )
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def test_categorical_predictions_are_those_of_predict():
    X, Y, w = heavy_tailed(n=30)
    codes = np.random.default_rng(5).integers(0, 3, (len(X), 1))
    widths, lambdas = np.array([1.0, 1.5]), np.array([0.3])
    predictions = loo_predictions(
        X, codes, Y, w, KERNELS["gaussian"], widths, lambdas, degree=1
    )
    u = slow_fits(X, Y, w, "gaussian", widths, codes=codes, lambdas=lambdas)[1]
    assert np.count_nonzero(u > 1) >= 3
    data = np.c_[X, codes]
    refitted = np.empty_like(Y)
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        reg = KernelAttentionRegressor(
            bandwidth=widths,
            degree=1,
            categorical_features=[2],
            categorical_bandwidth=lambdas,
        ).fit(data[keep], Y[keep], sample_weight=w[keep])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            refitted[i] = reg.predict(data[i : i + 1])[0]
    assert_allclose(predictions, refitted, rtol=1e-9, atol=1e-10)


def test_categorical_learning_runs_from_the_lowest_start():
    # Ordered grade and noise columns, degree 1: L-BFGS-B from the grid's
    # choice (bandwidth 1, shared lambda 0.1) ends in a local minimum of
    # narrow widths (error 0.080, the noise's lambda 0.12); from twice the
    # bandwidth, the start of lower error, it finds the wide one (0.0754,
    # the noise's lambda 0.47), as the best of every start run to the end.
    rng = np.random.default_rng(2)
    x = rng.uniform(-2, 2, 80)
    codes = np.column_stack([rng.integers(0, 5, 80), rng.integers(0, 4, 80)])
    Y = (np.sin(x) + 0.8 * codes[:, 0] + rng.normal(scale=0.2, size=80))[:, None]
    X, w, kernel = x[:, None], np.ones(80), KERNELS["gaussian"]
    options = {"degree": 1, "levels": np.array([5, 4]), "sorted_levels": None}
    widths, lambdas, _, mse = learn(X, codes, Y, w, kernel, 1.0, [0.1, 0.1], **options)
    args = (X, codes, Y, w, kernel, *options.values())
    ends = [
        minimize(
            loo_objective,
            np.log([h, 0.1, 0.1]),
            args=args,
            jac=True,
            method="L-BFGS-B",
            bounds=[(np.log(x.std() / 1e3), np.log(x.std() * 1e3))]
            + [(np.log(1e-3), 0.0)] * 2,
        ).fun
        for h in (1.0, 2.0)
    ]
    assert ends[0] > 1.05 * ends[1]
    assert mse <= ends[1] * (1 + 1e-6)
    assert lambdas[0] < 0.1 < 0.3 < lambdas[1]


# -- end to end ------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["gaussian", "cauchy"])
def test_learned_score_is_the_refitted_loo_score(kernel):
    rng = np.random.default_rng(1)
    n = 60
    X = rng.standard_t(2, size=(n, 2))
    X[-2:] = [[6.0, 6.0], [6.1, 5.9]]
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        cv = KernelAttentionRegressorCV(
            kernel, bandwidths=6, per_feature=True, degree=1
        ).fit(X, y)
    assert cv.per_feature_
    widths = cv.best_estimator_.bandwidth
    u = slow_fits(X, y[:, None], np.ones(n), kernel, widths)[1]
    assert np.count_nonzero(u > 1) >= 3
    predictions = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        reg = KernelAttentionRegressor(**cv.best_estimator_.get_params())
        reg.fit(X[keep], y[keep])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            predictions[i] = reg.predict(X[i : i + 1])[0]
    assert_allclose(cv.best_score_, -np.mean((predictions - y) ** 2), rtol=1e-8)
