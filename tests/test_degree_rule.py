"""The one-standard-error rule of the degree on small tables."""

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV
from sklearn_kernelpool._degree_rule import keep_local_linear


def _keep_reference(e0, e1, d, n_se=1.0, rows=20):
    diff = np.asarray(e1) - np.asarray(e0)
    n = len(diff)
    if n / (d + 1) >= rows:
        return diff.mean() < 0
    return diff.mean() + n_se * diff.std(ddof=1) / np.sqrt(n) < 0


def test_keep_local_linear_is_the_one_se_rule():
    rng = np.random.default_rng(2)
    for _ in range(50):
        n = int(rng.integers(5, 80))
        d = int(rng.integers(0, 8))
        e0 = rng.exponential(size=n)
        e1 = e0 + rng.normal(scale=0.5, size=n) - rng.uniform(0, 0.4)
        assert keep_local_linear(e0, e1, d) == _keep_reference(e0, e1, d)


def test_keep_local_linear_one_point_does_not_decide_a_small_table():
    e0 = np.ones(30)
    e1 = np.full(30, 1.05)
    e0[0], e1[0] = 10.0, 0.0  # degree 1 wins on average through one point
    assert (e1 - e0).mean() < 0
    assert not keep_local_linear(e0, e1, n_features=3)
    assert keep_local_linear(e0, e1, n_features=0)  # 30 rows per parameter
    assert keep_local_linear(e0, e1 - 0.5, n_features=3)  # a consistent gain


def test_keep_local_linear_weights():
    rng = np.random.default_rng(3)
    e0 = rng.exponential(size=40)
    e1 = e0 + rng.normal(scale=0.3, size=40) - 0.1
    w = rng.uniform(0.5, 2.0, size=40)
    # Unit weights are no weights; the scale of the weights does not matter;
    # a point of weight zero is left out.
    assert keep_local_linear(e0, e1, 3, np.ones(40)) == keep_local_linear(e0, e1, 3)
    for scale in (1e-6, 1.0, 1e6):
        assert keep_local_linear(e0, e1, 3, scale * w) == keep_local_linear(
            e0, e1, 3, w
        )
    w0 = w.copy()
    w0[:7] = 0.0
    assert keep_local_linear(e0, e1, 3, w0) == keep_local_linear(
        e0[7:], e1[7:], 3, w[7:]
    )


def test_keep_local_linear_refuses_mismatched_errors():
    with pytest.raises(ValueError, match="same length"):
        keep_local_linear([1.0, 2.0], [1.0], n_features=1)


def _statecrime():
    statecrime = pytest.importorskip("statsmodels.datasets.statecrime")
    df = statecrime.load_pandas().data
    X = df[["hs_grad", "poverty", "single", "white", "urban"]].to_numpy(float)
    return StandardScaler().fit_transform(X), df["murder"].to_numpy(float)


def _loo_errors(params, X, y):
    """Squared leave-one-out errors of a candidate, refitting without each
    point."""
    errors = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        fit = KernelAttentionRegressor(**params).fit(X[keep], y[keep])
        errors[i] = (fit.predict(X[i : i + 1])[0] - y[i]) ** 2
    return errors


def _best(cv, degree):
    results = cv.cv_results_
    scores = np.where(
        np.isnan(results["mean_test_score"]), -np.inf, results["mean_test_score"]
    )
    scores[[p["degree"] != degree for p in results["params"]]] = -np.inf
    return int(np.argmax(scores))


def test_small_table_keeps_degree_zero_without_a_clear_gain():
    # statsmodels' statecrime, 51 rows and 5 features: 8.5 rows per
    # parameter of the local line. Leave-one-out ranks a local-linear
    # candidate first, on the strength of a few points.
    X, y = _statecrime()
    cv = KernelAttentionRegressorCV().fit(X, y)
    best0, best1 = _best(cv, 0), _best(cv, 1)
    top = int(np.argmin(cv.cv_results_["rank_test_score"]))
    assert top == best1  # the scores alone would pick degree 1
    e1 = _loo_errors(cv.cv_results_["params"][best1], X, y)
    e0 = _loo_errors(cv.cv_results_["params"][best0], X, y)
    np.testing.assert_allclose(
        [e0.mean(), e1.mean()],
        [-cv.cv_results_["mean_test_score"][i] for i in (best0, best1)],
        rtol=1e-8,
    )
    assert e1.mean() < e0.mean()
    assert not keep_local_linear(e0, e1, X.shape[1])
    # So the search keeps the best local-constant candidate.
    assert cv.best_index_ == best0 and cv.degree_ == 0
    assert cv.best_params_ == cv.cv_results_["params"][best0]
    assert cv.best_score_ == cv.cv_results_["mean_test_score"][best0]
    assert cv.best_estimator_.degree == 0


def test_the_rule_is_off_on_large_tables_and_with_other_criteria():
    X, y = _statecrime()
    rows = np.tile(X, (5, 1)) + np.random.default_rng(0).normal(0, 0.05, (255, 5))
    values = np.tile(y, 5)
    # 42.5 rows per parameter: the best score wins.
    cv = KernelAttentionRegressorCV(n_neighbors=None).fit(rows, values)
    assert cv.best_index_ == int(np.argmin(cv.cv_results_["rank_test_score"]))
    # K-fold, a given scorer or a fixed degree: the best score wins.
    for params in ({"cv": 5}, {"scoring": "neg_mean_absolute_error"}, {"degree": 1}):
        cv = KernelAttentionRegressorCV(**params).fit(X, y)
        assert cv.best_index_ == int(np.argmin(cv.cv_results_["rank_test_score"]))


def test_a_clear_local_linear_gain_is_kept_on_a_small_table():
    # A noiseless plane on 30 points: degree 1 is exact at every point.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (30, 3))
    y = X @ [1.0, -2.0, 0.5]
    cv = KernelAttentionRegressorCV().fit(X, y)
    assert cv.degree_ == 1
    assert cv.best_index_ == int(np.argmin(cv.cv_results_["rank_test_score"]))
