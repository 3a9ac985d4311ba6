"""The one-standard-error rule of the degree on small tables."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import (
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._search import _degree_rule
from sklearn_kernelpool._search._degree_rule import (
    keep_local_linear,
    widest_within_one_se,
)
from sklearn_kernelpool._search._quadratic_stage import without_quadratic_candidates


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
        with warnings.catch_warnings():
            # (held-out points beyond the others get shrunk slopes)
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
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
    # A noiseless plane on 30 points: degree 1 is exact at every point where
    # the slope is not shrunk, and at every one for the wide widths.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (30, 3))
    y = X @ [1.0, -2.0, 0.5]
    cv = KernelAttentionRegressorCV().fit(X, y)
    assert cv.degree_ == 1
    results = cv.cv_results_
    top = int(np.argmin(results["rank_test_score"]))
    # The candidates from the best one on are exact to rounding: the width
    # rule of small tables may keep a wider one of them, of the same kernel.
    assert -results["mean_test_score"][cv.best_index_] < 1e-20
    assert results["shrunk_fraction"][cv.best_index_] == 0.0
    assert cv.kernel_ == results["params"][top]["kernel"]
    assert cv.bandwidth_ >= results["params"][top]["bandwidth"]


# -- the width of a local-linear fit on small tables --------------------------


def _widest_reference(best, wider, n_se=1.0):
    """The one-standard-error walk toward wider candidates, unweighted."""
    index = -1
    for k, errors in enumerate(wider):
        diff = np.asarray(errors) - np.asarray(best)
        if not diff.mean() <= n_se * diff.std(ddof=1) / np.sqrt(len(diff)):
            break
        index = k
    return index


def test_widest_within_one_se_is_the_one_se_walk():
    rng = np.random.default_rng(4)
    found = set()
    for _ in range(200):
        n = int(rng.integers(3, 60))
        best = rng.exponential(size=n)
        # Wider candidates lose more and more on average.
        wider = [best + rng.normal(scale=0.3, size=n) + 0.05 * k for k in range(6)]
        expected = _widest_reference(best, wider)
        found.add(expected)
        assert widest_within_one_se(best, wider) == expected
        assert widest_within_one_se(best, wider, n_se=0.0) == _widest_reference(
            best, wider, n_se=0.0
        )
    assert {-1, 0} < found and max(found) >= 2  # every kind of outcome
    assert widest_within_one_se([1.0, 2.0, 3.0], []) == -1


def test_widest_within_one_se_stops_at_the_first_clear_loss():
    best = np.ones(20)
    close = best + np.tile([0.1, -0.1], 10)  # mean 0: within one SE
    worse = best + 1.0  # a clear loss
    assert widest_within_one_se(best, [close, close]) == 1
    assert widest_within_one_se(best, [close, worse, close]) == 0
    assert widest_within_one_se(best, [worse, close]) == -1
    # Identical losses: the wider one, the smoother fit.
    assert widest_within_one_se(best, [best]) == 0


def test_widest_within_one_se_weights():
    rng = np.random.default_rng(5)
    best = rng.exponential(size=40)
    wider = [best + rng.normal(scale=0.3, size=40) + 0.03 * k for k in range(5)]
    w = rng.uniform(0.5, 2.0, size=40)
    assert widest_within_one_se(best, wider, np.ones(40)) == widest_within_one_se(
        best, wider
    )
    for scale in (1e-6, 1.0, 1e6):
        assert widest_within_one_se(best, wider, scale * w) == widest_within_one_se(
            best, wider, w
        )
    w0 = w.copy()
    w0[:9] = 0.0
    assert widest_within_one_se(best, wider, w0) == widest_within_one_se(
        best[9:], [e[9:] for e in wider], w[9:]
    )


def _scotland_training_part(fold):
    """A training part of statsmodels' scotland (32 rows, 7 features):
    26 rows, 3.25 per parameter of the local line, standardised on it."""
    scotland = pytest.importorskip("statsmodels.datasets.scotland")
    df = scotland.load_pandas().data
    X = df.drop(columns="YES").to_numpy(float)
    y = df["YES"].to_numpy(float)
    train = list(KFold(5, shuffle=True, random_state=1).split(X))[fold][0]
    return StandardScaler().fit_transform(X[train]), y[train]


def _curved_table(seed):
    """25 rows, 2 features (8.3 rows per parameter), a curved surface."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(25, 2))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=25)


def _selection_reference(cv, X, y):
    """The selection of :func:`_selection_reference_01` (its index and what
    decided it), and the final one: replaced by the best local quadratic
    candidate where it scores better and wins by one standard error of the
    paired per-point losses (tables of every size)."""
    expected, reason, scores_2, loo = _selection_reference_01(cv, X, y)
    if not np.isfinite(scores_2).any():
        return expected, reason, expected
    q = int(np.argmax(scores_2))
    score = cv.cv_results_["mean_test_score"][expected]
    n_parameters = (X.shape[1] + 1) * (X.shape[1] + 2) // 2
    if scores_2[q] > score and _keep_reference(
        loo(expected), loo(q), n_parameters - 1, rows=np.inf
    ):
        return expected, reason, q
    return expected, reason, expected


def _selection_reference_01(cv, X, y):
    """The small-table selection from refitted leave-one-out errors.

    The baseline is the best local-constant candidate of a fixed width; the
    global line replaces it where it beats it by one standard error of the
    paired losses; the best candidate replaces that where it beats it by one
    standard error; a kept local-linear one is widened while a wider one of
    its kernel and kind of width is within one standard error of it and
    still beats the baseline. Returns the index and what decided it.
    """
    results = cv.cv_results_
    params = results["params"]
    scores = np.where(
        np.isnan(results["mean_test_score"]), -np.inf, results["mean_test_score"]
    )
    # The rule of degrees 0 and 1 first, on their candidates; then the local
    # quadratics, which replace the selection where they win by one SE.
    quadratic = np.array([p["degree"] == 2 for p in params])
    every = scores
    scores_2 = np.where(quadratic, scores, -np.inf)
    scores = np.where(quadratic, -np.inf, scores)
    errors = {}

    def loo(i):
        if i not in errors:
            errors[i] = _loo_errors(params[i], X, y)
            np.testing.assert_allclose(errors[i].mean(), -every[i], rtol=1e-8)
        return errors[i]

    d = X.shape[1]

    def beats(i, j):
        return _keep_reference(loo(j), loo(i), d)

    fixed0 = [i for i, p in enumerate(params) if p["degree"] == 0]
    fixed0 = [i for i in fixed0 if "n_neighbors" not in params[i]]
    baseline = max(fixed0, key=lambda i: scores[i])
    line = [i for i, p in enumerate(params) if p["kernel"] == "constant"]
    assert len(line) == 1 and params[line[0]]["degree"] == 1
    if beats(line[0], baseline):
        baseline = line[0]
    top = int(np.argmax(scores))
    if top == baseline or top == line[0] or not beats(top, baseline):
        return baseline, "line" if baseline == line[0] else "degree 0", scores_2, loo
    if params[top]["degree"] == 0:
        return top, "adaptive degree 0", scores_2, loo
    width = "n_neighbors" if "n_neighbors" in params[top] else "bandwidth"
    wider = sorted(
        (
            i
            for i, p in enumerate(params)
            if p["degree"] == 1
            and p["kernel"] == params[top]["kernel"]
            and (width in p) == (width in params[top])
            and p[width] > params[top][width]
        ),
        key=lambda i: params[i][width],
    )
    expected = top
    for i in wider:
        diff = loo(i) - loo(top)
        if diff.mean() > diff.std(ddof=1) / np.sqrt(len(y)) or not beats(i, baseline):
            break
        expected = i
    return expected, "widened" if expected != top else "local linear", scores_2, loo


@pytest.mark.parametrize(
    "table, decided, quadratic",
    [
        (lambda: _scotland_training_part(0), "line", False),
        (lambda: _scotland_training_part(1), "widened", False),
        (lambda: _curved_table(1), "widened", True),
        (lambda: _curved_table(7), "local linear", True),
        (_statecrime, "degree 0", False),
    ],
)
def test_small_table_selection_is_the_documented_rule(table, decided, quadratic):
    X, y = table()
    cv = KernelAttentionRegressorCV().fit(X, y)
    before, reason, expected = _selection_reference(cv, X, y)
    assert reason == decided  # each branch of the rule acts on one table
    assert (expected != before) == quadratic
    params = cv.cv_results_["params"]
    with without_quadratic_candidates():
        lower = KernelAttentionRegressorCV().fit(X, y)
    assert lower.cv_results_["params"] == params[: len(lower.cv_results_["params"])]
    assert lower.best_index_ == before
    assert cv.best_index_ == expected
    assert cv.best_params_ == params[expected]
    assert cv.best_score_ == cv.cv_results_["mean_test_score"][expected]
    assert cv.kernel_ == params[expected]["kernel"]
    assert cv.degree_ == cv.best_estimator_.degree == params[expected]["degree"]


def test_the_width_rule_is_off_from_ten_rows_per_parameter(monkeypatch):
    # A training part of statsmodels' star98: 242 rows, 12 features, 18.6
    # rows per parameter of the local line. The degree rule applies there
    # (fewer than 20), the width rule (fewer than 10) does not: the best
    # local-linear candidate stays.
    star98 = pytest.importorskip("statsmodels.datasets.star98")
    df = star98.load_pandas().data
    columns = ["LOWINC", "PERASIAN", "PERBLACK", "PERHISP", "PERMINTE"]
    columns += ["AVYRSEXP", "AVSALK", "PERSPENK", "PTRATIO", "PCTAF"]
    columns += ["PCTCHRT", "PCTYRRND"]
    X = df[columns].to_numpy(float)
    y = (df["NABOVE"] / (df["NABOVE"] + df["NBELOW"])).to_numpy()
    train = next(KFold(5, shuffle=True, random_state=0).split(X))[0]
    X, y = StandardScaler().fit_transform(X[train]), y[train]
    cv = KernelAttentionRegressorCV().fit(X, y)
    top = int(np.argmin(cv.cv_results_["rank_test_score"]))
    assert cv.degree_ == 1 and cv.best_index_ == top
    # The curved table of 8.3 rows per parameter is widened (above); with
    # a threshold below that, the best candidate stays.
    # (the rule of degree 1, without the local quadratics that replace it)
    X, y = _curved_table(1)
    with without_quadratic_candidates():
        widened = KernelAttentionRegressorCV().fit(X, y)
    top = int(np.argmin(widened.cv_results_["rank_test_score"]))
    assert widened.best_index_ != top
    monkeypatch.setattr(_degree_rule, "WIDTH_RULE_ROWS_PER_PARAMETER", 8)
    with without_quadratic_candidates():
        kept = KernelAttentionRegressorCV().fit(X, y)
    assert kept.best_index_ == top and kept.bandwidth_ < widened.bandwidth_
