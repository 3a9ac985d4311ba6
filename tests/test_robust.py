"""Robustness iterations (``robust_iterations``): Cleveland's bisquare
reweighting, against statsmodels' ``lowess``, a plain refit loop and the
formula of the weights."""

import math
import pickle

import numpy as np
import pytest
from _reference import FORMULAS, local_fit
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import KernelAttentionRegressor, LocalLinearFallbackWarning
from sklearn_kernelpool._estimator._robust import robustness_weights, weighted_median

lowess_module = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")
_smoothers = pytest.importorskip("statsmodels.nonparametric._smoothers_lowess")


def _datasets():
    """(name, x sorted and distinct, y) with gross outliers."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 80))
    y = np.sin(x) + 0.3 * rng.normal(size=80)
    y[[5, 40, 41, 70]] += [6.0, -5.0, 4.0, 8.0]
    yield "sine", x, y
    x = np.sort(rng.exponential(size=60))
    y = 2 * x + rng.standard_t(2, size=60)
    yield "t2-exponential", x, y
    x = np.sort(rng.uniform(-2, 2, 101))
    y = x**2 + 0.1 * rng.normal(size=101)
    y[45:48] += 3.0  # a cluster of outliers
    yield "cluster", x, y


DATASETS = list(_datasets())


def _lowess_regressor(n, frac, iterations):
    """The configuration of statsmodels' lowess: its count of neighbours."""
    k = min(max(int(frac * n + 1e-10), 2), n)
    return KernelAttentionRegressor(
        kernel="tricube", n_neighbors=k, degree=1, robust_iterations=iterations
    )


@pytest.mark.parametrize("frac", [0.3, 2 / 3])
@pytest.mark.parametrize("iterations", [0, 1, 2, 3])
@pytest.mark.parametrize("name, x, y", DATASETS, ids=[d[0] for d in DATASETS])
def test_equals_statsmodels_lowess(name, x, y, frac, iterations):
    expected = lowess_module.lowess(
        y, x, frac=frac, it=iterations, delta=0.0, return_sorted=False
    )
    reg = _lowess_regressor(len(x), frac, iterations).fit(x[:, None], y)
    # Measured: at most 3e-14 on these data, every iteration.
    assert_allclose(reg.predict(x[:, None]), expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("iterations", [1, 3])
@pytest.mark.parametrize("name, x, y", DATASETS, ids=[d[0] for d in DATASETS])
def test_robustness_weights_are_statsmodels(name, x, y, iterations):
    """statsmodels returns the weights computed from its last fit: those of
    ``it - 1`` iterations are the weights of our fit of ``it``."""
    _, weights = _smoothers.lowess(
        y, x, x, np.ones_like(x), frac=0.5, it=iterations - 1, delta=0.0
    )
    reg = _lowess_regressor(len(x), 0.5, iterations).fit(x[:, None], y)
    assert_allclose(reg.robustness_weights_, weights, rtol=0, atol=1e-10)
    assert np.any(reg.robustness_weights_ == 0)


def test_robustness_weights_formula_against_statsmodels():
    rng = np.random.default_rng(1)
    y, fit = rng.normal(size=(2, 51))
    fit[:3] += 20.0
    residuals = (y - fit)[:, None]
    expected = _smoothers.calculate_residual_weights(y, fit)
    assert_allclose(robustness_weights(residuals, np.ones(51)), expected, atol=1e-15)
    # The scale is 0 (most rows fitted exactly): 1 where the residual is 0,
    # 0 elsewhere, the limit as the scale falls to 0.
    fit = y.copy()
    fit[::3] += 1.0
    expected = _smoothers.calculate_residual_weights(y, fit)
    got = robustness_weights((y - fit)[:, None], np.ones(51))
    assert_array_equal(got, expected)
    assert_array_equal(got, (y == fit).astype(float))


def _plain_weights(residuals, sample_weight):
    """Bisquare weights by a loop: the median of the rows repeated as many
    times as their integer weight, a row's largest scaled residual."""
    residuals = np.asarray(residuals).reshape(len(sample_weight), -1)
    counts = np.asarray(sample_weight).astype(int)
    scales = [
        np.median(np.repeat(np.abs(residuals[:, j]), counts))
        for j in range(residuals.shape[1])
    ]
    delta = np.zeros(len(counts))
    for i in range(len(counts)):
        if counts[i] == 0:
            continue
        u = max(abs(residuals[i, j]) / (6 * s) for j, s in enumerate(scales))
        delta[i] = (1 - u**2) ** 2 if u < 1 else 0.0
    return delta


def test_robustness_weights_formula_with_integer_weights_and_outputs():
    rng = np.random.default_rng(2)
    residuals = rng.standard_t(2, size=(40, 3)) * [1.0, 10.0, 0.1]
    weights = rng.integers(0, 4, 40).astype(float)
    assert_allclose(
        robustness_weights(residuals, weights), _plain_weights(residuals, weights)
    )
    for n in (7, 8):  # odd and even: the mean of the two middle values
        values = rng.normal(size=n)
        assert weighted_median(values, np.ones(n)) == np.median(values)


def _plain_robust_fit(X, y, Q, kernel, bandwidth, degree, sample_weight, iterations):
    """The refit loop by hand on the loop reference of the fit."""
    alpha = FORMULAS[kernel]
    w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight)
    delta = np.ones(len(X))
    for _ in range(iterations):
        kept = w > 0  # every row of positive weight gets its residual
        fitted = np.zeros_like(np.asarray(y, dtype=float))
        fitted[kept] = local_fit(
            X, y, X[kept], alpha, bandwidth, w * delta, degree=degree
        )[0]
        delta = _plain_weights(np.asarray(y) - fitted, w)
    return local_fit(X, y, Q, alpha, bandwidth, w * delta, degree=degree)[0], delta


# With degree 1 the first iteration leaves the rows beside the outlier at the
# boundary (x = 0.004) keys on one side: the fit warns of their shrunk slopes
# (tests/test_robust_lowess.py), which the loop shrinks alike.
@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning")
@pytest.mark.parametrize(
    "kernel, bandwidth, degree",
    [("gaussian", 0.3, 0), ("epanechnikov", 0.6, 0), ("biweight", 0.8, 1)],
)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("outputs", [1, 2])
def test_matches_a_plain_refit_loop(kernel, bandwidth, degree, weighted, outputs):
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 3, (40, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=40)
    y[[4, 20, 33]] += [3.0, -4.0, 5.0]
    if outputs == 2:
        y = np.column_stack([y, np.cos(X[:, 0]) + 0.1 * rng.normal(size=40)])
        y[10, 1] += 6.0  # an outlier in the second output only
    w = rng.integers(1, 4, 40).astype(float) if weighted else None
    Q = np.linspace(0, 3, 13)[:, None]
    expected, delta = _plain_robust_fit(X, y, Q, kernel, bandwidth, degree, w, 2)
    reg = KernelAttentionRegressor(
        kernel, bandwidth, degree=degree, robust_iterations=2
    ).fit(X, y, sample_weight=w)
    assert_allclose(reg.robustness_weights_, delta, rtol=1e-9, atol=1e-12)
    assert_allclose(reg.predict(Q), expected, rtol=1e-9, atol=1e-12)
    if outputs == 2:
        assert reg.robustness_weights_[10] == 0


def test_an_outlier_no_longer_pulls_the_fit():
    rng = np.random.default_rng(7)
    X = np.linspace(0, 1, 41)[:, None]
    line = 2 * X[:, 0] + 1
    y = line + 0.05 * rng.normal(size=41)
    y[20] += 10.0
    params = dict(kernel="epanechnikov", bandwidth=0.15, degree=1)
    plain = KernelAttentionRegressor(**params).fit(X, y)
    # The plain fit leans towards the outlier, so the first iteration gives
    # its neighbours weight 0 too, and rows of that run are fitted from keys
    # on one side of them: their slopes are shrunk, and warned of
    # (tests/test_robust_lowess.py).
    with pytest.warns(LocalLinearFallbackWarning, match="robust_iterations=2"):
        robust = KernelAttentionRegressor(**params, robust_iterations=2).fit(X, y)
    assert abs(plain.predict([[0.5]])[0] - 2.0) > 1.0
    # Within the noise of the line, outlier's place included.
    assert np.max(np.abs(robust.predict(X) - line)) < 0.1
    assert robust.robustness_weights_[20] == 0
    assert np.median(np.delete(robust.robustness_weights_, 20)) > 0.9


@pytest.mark.parametrize("degree", [0, 1])
def test_weight_two_is_a_duplicated_row(degree):
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 3, (60, 2))
    y = X[:, 0] - X[:, 1] ** 2 + rng.standard_t(2, size=60)
    w = rng.integers(0, 4, 60)
    Q = rng.uniform(0, 3, (20, 2))
    # Degree 1 at a width where the safeguard keeps every slope: its
    # effective number of keys, Kish's (sum w k)**2 / sum (w k)**2 of the
    # weights w times the kernel k, is not that of the rows repeated,
    # (sum w k)**2 / sum w k**2, so that where it shrinks a slope the two
    # fits differ.
    width = 1.2 if degree == 0 else 2.5
    params = dict(
        kernel="biweight", bandwidth=width, degree=degree, robust_iterations=3
    )
    weighted = KernelAttentionRegressor(**params).fit(X, y, sample_weight=w)
    repeated = KernelAttentionRegressor(**params).fit(
        np.repeat(X, w, axis=0), np.repeat(y, w)
    )
    assert_allclose(weighted.predict(Q), repeated.predict(Q), rtol=1e-10, atol=1e-12)
    assert_allclose(
        np.repeat(weighted.robustness_weights_, w), repeated.robustness_weights_
    )
    assert np.all(weighted.robustness_weights_[w == 0] == 0)


def _outlier_data(n=150):
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 3, (n, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=n)
    y[::15] += 4.0
    return X, y, rng.uniform(0.5, 2.0, n)


@pytest.mark.parametrize(
    "params",
    [
        dict(kernel="epanechnikov", bandwidth=0.4),
        dict(bandwidth=0.2, degree=1),
        dict(kernel="tricube", bandwidth=0.5, degree=1, algorithm="kd_tree"),
        dict(kernel="biweight", bandwidth=0.4, algorithm="binned"),
    ],
    ids=["brute", "degree1", "kd_tree", "binned"],
)
def test_every_method_uses_the_final_weights(params):
    """The robust fit is a fit with the sample weights ``w * delta``."""
    X, y, w = _outlier_data()
    Q = np.linspace(0, 3, 17)[:, None]
    robust = KernelAttentionRegressor(**params, robust_iterations=3)
    robust.fit(X, y, sample_weight=w)
    delta = robust.robustness_weights_
    assert np.any(delta == 0)
    direct = KernelAttentionRegressor(**params).fit(X, y, sample_weight=w * delta)
    assert robust.algorithm_ == direct.algorithm_
    for got, expected in zip(
        robust.predict(Q, return_std=True, return_se=True),
        direct.predict(Q, return_std=True, return_se=True),
        strict=True,
    ):
        assert_array_equal(got, expected)
    assert_array_equal(robust.attention_weights(Q), direct.attention_weights(Q))
    assert_array_equal(robust.confidence_interval(Q), direct.confidence_interval(Q))
    # Prediction intervals are refused: the weights saw every row's value.
    with pytest.raises(ValueError, match="prediction_interval does not take a robust"):
        robust.prediction_interval(Q)
    for got, expected in zip(
        robust.predict_gradient(Q, return_se=True),
        direct.predict_gradient(Q, return_se=True),
        strict=True,
    ):
        assert_allclose(got, expected, atol=1e-12)
    if params.get("algorithm") != "binned":
        got, expected = robust.smoother_diagnostics(), direct.smoother_diagnostics()
        for name in ("effective_df", "gcv", "aicc"):
            assert got[name] == expected[name]


def test_the_paths_agree():
    X, y, w = _outlier_data()
    Q = np.linspace(0, 3, 17)[:, None]
    fits = [
        KernelAttentionRegressor(
            "epanechnikov", 0.3, degree=1, algorithm=algorithm, robust_iterations=2
        ).fit(X, y, sample_weight=w)
        for algorithm in ("brute", "kd_tree", "ball_tree", "binned")
    ]
    for fit in fits[1:3]:
        assert_allclose(
            fit.robustness_weights_, fits[0].robustness_weights_, atol=1e-12
        )
        assert_allclose(fit.predict(Q), fits[0].predict(Q), atol=1e-12)
    # The binned in-sample fit is within its binning error of the exact one.
    assert_allclose(fits[3].robustness_weights_, fits[0].robustness_weights_, atol=1e-2)
    assert_allclose(fits[3].predict(Q), fits[0].predict(Q), atol=1e-2)


def test_several_outputs_share_one_weight_per_row():
    """The weights do not depend on the scale of an output: ``[y, 3y + 1]``
    is fitted as ``y``."""
    X, y, w = _outlier_data()
    Q = np.linspace(0, 3, 17)[:, None]
    params = dict(kernel="epanechnikov", bandwidth=0.4, robust_iterations=2)
    one = KernelAttentionRegressor(**params).fit(X, y, sample_weight=w)
    two = KernelAttentionRegressor(**params).fit(
        X, np.column_stack([y, 3 * y + 1]), sample_weight=w
    )
    assert_allclose(two.robustness_weights_, one.robustness_weights_, atol=1e-12)
    expected = np.column_stack([one.predict(Q), 3 * one.predict(Q) + 1])
    assert_allclose(two.predict(Q), expected, atol=1e-12)


def test_rows_of_weight_zero_take_no_part():
    X, y, w = _outlier_data()
    w[::4] = 0.0
    y_changed = np.where(w == 0, 1e3, y)  # their values must not matter
    Q = np.linspace(0, 3, 17)[:, None]
    params = dict(bandwidth=0.2, degree=1, robust_iterations=2)
    reg = KernelAttentionRegressor(**params).fit(X, y_changed, sample_weight=w)
    kept = KernelAttentionRegressor(**params).fit(X[w > 0], y[w > 0], w[w > 0])
    assert np.all(reg.robustness_weights_[w == 0] == 0)
    assert_allclose(reg.robustness_weights_[w > 0], kept.robustness_weights_)
    assert_allclose(reg.predict(Q), kept.predict(Q), atol=1e-12)


def test_neighbourhoods_stay_those_of_the_sample_weights():
    """Under ``n_neighbors`` a row of robustness weight 0 still counts as a
    neighbour: the width of a query is that of the plain fit."""
    X, y, _ = _outlier_data()
    Q = np.linspace(0, 3, 17)[:, None]
    params = dict(kernel="tricube", n_neighbors=20)
    robust = KernelAttentionRegressor(**params, robust_iterations=2).fit(X, y)
    delta = robust.robustness_weights_
    assert np.any(delta == 0)
    # The nonzero weights of a query lie within the plain fit's support.
    plain = KernelAttentionRegressor(**params).fit(X, y)
    support = plain.attention_weights(Q) > 0
    got = robust.attention_weights(Q)
    assert np.all((got > 0) <= support)
    expected = plain.attention_weights(Q) * delta
    assert_allclose(got, expected / expected.sum(axis=1, keepdims=True), atol=1e-12)


def test_sparse_and_dense_keys_agree():
    X, y, w = _outlier_data()
    Q = np.linspace(0, 3, 17)[:, None]
    reg = KernelAttentionRegressor(bandwidth=0.3, robust_iterations=2)
    dense = reg.fit(X, y, sample_weight=w).predict(Q)
    assert_array_equal(
        reg.fit(sparse.csr_matrix(X), y, sample_weight=w).predict(Q), dense
    )


def test_categorical_features_iterate():
    X, y, w = _outlier_data()
    codes = (np.arange(len(X)) % 3).astype(float)
    X = np.column_stack([X, codes])
    Q = np.column_stack([np.linspace(0, 3, 9), np.arange(9) % 3])
    params = dict(bandwidth=0.3, degree=1, categorical_features=[1])
    robust = KernelAttentionRegressor(**params, robust_iterations=2).fit(X, y, w)
    delta = robust.robustness_weights_
    assert np.any(delta == 0)
    direct = KernelAttentionRegressor(**params).fit(X, y, w * delta)
    assert_array_equal(robust.predict(Q), direct.predict(Q))


def test_zero_iterations_is_the_plain_fit():
    X, y, w = _outlier_data()
    Q = np.linspace(0, 3, 17)[:, None]
    reg = KernelAttentionRegressor(bandwidth=0.3, robust_iterations=0).fit(X, y)
    assert reg.robustness_weights_ is None
    assert "robust_iterations" in reg.get_params()
    assert_array_equal(
        reg.predict(Q), KernelAttentionRegressor(bandwidth=0.3).fit(X, y).predict(Q)
    )
    # Refitting without iterations forgets the weights.
    reg.set_params(robust_iterations=2).fit(X, y)
    assert reg.robustness_weights_ is not None
    assert reg.set_params(robust_iterations=0).fit(X, y).robustness_weights_ is None


@pytest.mark.parametrize("value", [-1, 1.5, "2", None])
def test_invalid_iterations_are_refused(value):
    X, y, _ = _outlier_data()
    with pytest.raises(InvalidParameterError, match="robust_iterations"):
        KernelAttentionRegressor(robust_iterations=value).fit(X, y)


def test_linear_features_refuse_iterations():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(50, 2))
    with pytest.raises(ValueError, match="robust_iterations=1 is not supported with"):
        KernelAttentionRegressor(linear_features=[1], robust_iterations=1).fit(
            X, X[:, 0]
        )


def test_dask_arrays_refuse_iterations():
    da = pytest.importorskip("dask.array")
    X, y, _ = _outlier_data()
    with pytest.raises(ValueError, match="not supported on dask arrays"):
        KernelAttentionRegressor(robust_iterations=1).fit(
            da.from_array(X, chunks=50), da.from_array(y, chunks=50)
        )


def test_other_array_namespaces_refuse_iterations():
    from _array_api import strict_namespace
    from sklearn import config_context

    xp = strict_namespace()
    X, y, _ = _outlier_data()
    reg = KernelAttentionRegressor(robust_iterations=1)
    assert not reg.__sklearn_tags__().array_api_support
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="another array API namespace"):
            reg.fit(xp.asarray(X), xp.asarray(y))


def test_a_row_left_without_neighbours_under_raise():
    """Two outliers alone together fit each other badly, both fall to
    weight 0, and their boxcar neighbourhoods hold no other key: no fit for
    them at the next iteration."""
    X = np.r_[np.linspace(0, 1, 20), 5.0, 5.1][:, None]
    y = np.r_[np.linspace(0, 0.1, 20), 50.0, -50.0]
    params = dict(kernel="boxcar", bandwidth=0.3, robust_iterations=2)
    with pytest.raises(ValueError, match="robust_iterations: a training row lost"):
        KernelAttentionRegressor(**params, on_empty="raise").fit(X, y)
    reg = KernelAttentionRegressor(**params, on_empty="nan").fit(X, y)
    assert_array_equal(reg.robustness_weights_[-2:], 0)
    assert np.all(reg.robustness_weights_[:-2] > 0)


def test_pickle_round_trip_and_tampered_weights():
    X, y, w = _outlier_data()
    Q = np.linspace(0, 3, 17)[:, None]
    reg = KernelAttentionRegressor(bandwidth=0.3, degree=1, robust_iterations=2)
    reg.fit(X, y, sample_weight=w)
    expected = reg.predict(Q, return_se=True)
    loaded = pickle.loads(pickle.dumps(reg))
    for got, want in zip(loaded.predict(Q, return_se=True), expected, strict=True):
        assert_array_equal(got, want)
    assert_array_equal(loaded.robustness_weights_, reg.robustness_weights_)
    tampered = pickle.loads(pickle.dumps(reg))
    tampered.robustness_weights_ = np.ones(len(X))
    with pytest.raises(ValueError, match="robustness_weights_"):
        pickle.loads(pickle.dumps(tampered))
    tampered.robustness_weights_ = None
    with pytest.raises(ValueError, match="robustness_weights_"):
        pickle.loads(pickle.dumps(tampered))


@pytest.mark.parametrize(
    "weights, problem",
    [(2.0, "not in"), (-1.0, "not in"), (0.0, "no row"), (math.nan, "non-finite")],
)
def test_altered_engine_robustness_weights_are_refused(weights, problem):
    X, y, _ = _outlier_data()
    reg = KernelAttentionRegressor(bandwidth=0.3, robust_iterations=1).fit(X, y)
    altered = np.full(len(X), weights)
    reg._pool._arguments["robustness_weight"] = altered
    reg.robustness_weights_ = altered.copy()
    with pytest.raises(ValueError, match=f"Cannot load.*{problem}"):
        pickle.loads(pickle.dumps(reg))


def test_a_fit_exact_but_for_rounding_has_no_outliers():
    # A constant y, or a constant second output: the residuals are rounding
    # errors, whose median would otherwise make outliers of half the rows.
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(30, 1))
    flat = KernelAttentionRegressor(bandwidth=0.2, robust_iterations=2)
    assert_array_equal(flat.fit(X, np.full(30, 0.1)).robustness_weights_, 1.0)
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=30)
    one = KernelAttentionRegressor(bandwidth=0.2, robust_iterations=2).fit(X, y)
    two = KernelAttentionRegressor(bandwidth=0.2, robust_iterations=2).fit(
        X, np.column_stack([y, np.full(30, 0.3)])
    )
    assert_allclose(two.robustness_weights_, one.robustness_weights_)


def test_the_significance_test_refuses_a_robust_fit():
    from sklearn_kernelpool import significance_test

    X, y, _ = _outlier_data()
    robust = KernelAttentionRegressor(bandwidth=0.3, robust_iterations=1).fit(X, y)
    with pytest.raises(ValueError, match="does not test a robust fit"):
        significance_test(robust, X, y, n_resamples=9)


@pytest.mark.parametrize("scale", [1.0, 0.1, 0.3, 3.0])
def test_weighted_median_of_equal_weights_is_the_median_at_any_scale(scale):
    # Ten weights of 0.1 reach half the total only within rounding: the
    # median is still the mean of the two middle values, as numpy's.
    values = np.arange(10.0)
    assert weighted_median(values, np.full(10, scale)) == np.median(values)
    assert weighted_median(values[:9], np.full(9, scale)) == np.median(values[:9])


def test_a_robust_fit_does_not_depend_on_the_scale_of_equal_weights():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 40))
    y = np.sin(x) + 0.3 * rng.normal(size=40)
    y[[5, 20]] += [4.0, -5.0]
    reg = KernelAttentionRegressor(
        kernel="tricube", n_neighbors=20, degree=1, robust_iterations=2
    )
    plain = reg.fit(x[:, None], y).predict(x[:, None])
    for scale in (0.1, 0.3, 3.0):
        weighted = reg.fit(x[:, None], y, np.full(40, scale)).predict(x[:, None])
        assert_allclose(weighted, plain, rtol=0, atol=1e-12)
