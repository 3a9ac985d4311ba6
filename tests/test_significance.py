"""significance_test: the statistics against their defining formulas, the
one-pass draws against separate refits, and the size and power of the test
by seeded simulations."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    SignificanceResult,
    significance_test,
)

pd = pytest.importorskip("pandas")


def _mixed(n=60, seed=0):
    """Two continuous features and a categorical one of three levels."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.uniform(0, 1, n),
            "c": pd.Categorical(rng.choice(["u", "v", "w"], n)),
            "b": rng.uniform(0, 1, n),
        }
    )
    level = X["c"].cat.codes.to_numpy()
    y = np.sin(3 * X["a"].to_numpy()) + 0.5 * level + rng.normal(scale=0.3, size=n)
    weights = rng.uniform(0.5, 2.0, n)
    weights[:3] = 0.0
    return X, y, weights


def _regressor(degree, **params):
    return KernelAttentionRegressor(
        bandwidth=[0.2, 0.3],
        degree=degree,
        categorical_features="from_dtype",
        categorical_bandwidth=0.3,
        **params,
    )


def _statistic_by_loop(reg, X, y_values, weights):
    """lambda_j of every feature of the fit of ``y_values``: the sum over
    the categories of the squared changes for the categorical one; for the
    continuous ones, central differences of predict (degree 0) or the slope
    of the weighted least squares fit around each row (degree 1)."""
    fit = KernelAttentionRegressor(**reg.get_params()).fit(X, y_values, weights)
    base = fit.predict(X)
    out = []
    for j, column in enumerate(X.columns):
        if j == 1:  # categorical
            total = np.zeros(len(X))
            for category in ["u", "v", "w"]:
                swapped = X.copy()
                swapped["c"] = pd.Categorical([category] * len(X), ["u", "v", "w"])
                total += (fit.predict(swapped) - base) ** 2
        elif reg.degree == 0:
            step = 1e-5
            up, down = X.copy(), X.copy()
            up[column] += step
            down[column] -= step
            total = ((fit.predict(up) - fit.predict(down)) / (2 * step)) ** 2
        else:
            total = _local_slopes(reg, X, y_values, weights)[:, j // 2] ** 2
        out.append(np.sum(weights * total) / np.sum(weights))
    return np.array(out)


def _local_slopes(reg, X, y_values, weights):
    """The slopes of ``y ~ b + beta . (x - x_i)`` by weighted least squares
    with the weights ``w_k exp(-|(x_k - x_i) / h|**2 / 2) lambda**[c_k !=
    c_i]`` of the gaussian and the categorical kernel, for each row ``i``."""
    Z = X[["a", "b"]].to_numpy()
    codes = X["c"].cat.codes.to_numpy()
    slopes = np.empty((len(X), 2))
    for i in range(len(X)):
        scaled = (Z - Z[i]) / np.array([0.2, 0.3])
        kernel = np.exp(-0.5 * np.sum(scaled**2, axis=1))
        a = weights * kernel * np.where(codes == codes[i], 1.0, 0.3)
        design = np.column_stack([np.ones(len(X)), Z - Z[i]]) * np.sqrt(a)[:, None]
        solution = np.linalg.lstsq(design, y_values * np.sqrt(a), rcond=None)[0]
        slopes[i] = solution[1:]
    return slopes


@pytest.mark.parametrize("degree", [0, 1])
def test_statistics_are_their_formulas(degree):
    X, y, w = _mixed()
    reg = _regressor(degree).fit(X, y, sample_weight=w)
    result = significance_test(reg, X, y, n_resamples=3, random_state=0)
    assert_allclose(result.statistics, _statistic_by_loop(reg, X, y, w), rtol=1e-5)
    assert_array_equal(result.features, ["a", "c", "b"])
    assert_array_equal(result.categorical, [False, True, False])


def _draws_by_refits(reg, X, y, w, n_resamples, seed):
    """The bootstrap statistics by B separate refits of the null and the
    full model, the multipliers drawn as significance_test documents."""
    n = len(X)
    signs = np.random.RandomState(seed).randint(0, 2, (n_resamples, n)) * 2 - 1
    draws = np.empty((3, n_resamples))
    for j, column in enumerate(X.columns):
        params = reg.get_params()
        if j == 1:
            params["categorical_features"] = None
        else:
            params["bandwidth"] = [0.3, 0.2][j // 2]
        X_null = X.drop(columns=column)
        null = KernelAttentionRegressor(**params).fit(X_null, y, w)
        # The smoother matrix L of the null fit, its residuals rescaled by
        # 1 / sqrt(1 - 2 L_ii + sum_k L_ik**2).
        L = null.attention_weights(X_null)
        g = L @ y
        d = 1 - 2 * np.diag(L) + np.sum(L**2, axis=1)
        u = np.where(w > 0, np.abs(y - g) / np.sqrt(d), 0.0)
        for b in range(n_resamples):
            y_star = g + u * signs[b]
            draws[j, b] = _statistic_by_loop(reg, X, y_star, w)[j]
    return draws


@pytest.mark.parametrize("degree", [0, 1])
def test_one_pass_draws_are_separate_refits(degree):
    X, y, w = _mixed(n=40, seed=1)
    reg = _regressor(degree).fit(X, y, sample_weight=w)
    result = significance_test(reg, X, y, n_resamples=3, random_state=3)
    expected = _draws_by_refits(reg, X, y, w, 3, seed=3)
    assert_allclose(result.null_statistics, expected, rtol=1e-5, atol=1e-12)
    exceed = (expected >= result.statistics[:, None]).sum(axis=1)
    assert_allclose(result.pvalues, (1 + exceed) / 4)


def test_draws_do_not_depend_on_the_groups_or_the_features_tested():
    X, y, w = _mixed(n=50, seed=2)
    reg = _regressor(1).fit(X, y, sample_weight=w)
    result = significance_test(reg, X, y, n_resamples=30, random_state=0)
    with config_context(working_memory=0.01):  # groups of a few draws
        grouped = significance_test(reg, X, y, n_resamples=30, random_state=0)
    assert_allclose(grouped.null_statistics, result.null_statistics, rtol=1e-10)
    one = significance_test(reg, X, y, features="b", n_resamples=30, random_state=0)
    assert_allclose(one.null_statistics[0], result.null_statistics[2], rtol=1e-10)
    assert_array_equal(one.features, ["b"])
    two = significance_test(reg, X, y, features=[2, 0], n_resamples=30, random_state=0)
    assert_allclose(two.pvalues, result.pvalues[[2, 0]])


def test_several_outputs_are_tested_each():
    rng = np.random.default_rng(4)
    X = rng.uniform(size=(70, 2))
    Y = np.column_stack([np.sin(3 * X[:, 0]), X[:, 1]]) + rng.normal(size=(70, 2))
    reg = KernelAttentionRegressor(bandwidth=0.25).fit(X, Y)
    result = significance_test(reg, X, Y, n_resamples=20, random_state=1)
    assert result.statistics.shape == result.pvalues.shape == (2, 2)
    assert result.null_statistics.shape == (2, 2, 20)
    for k in range(2):
        single = significance_test(
            reg.fit(X, Y[:, k]), X, Y[:, k], n_resamples=20, random_state=1
        )
        assert_allclose(result.statistics[:, k], single.statistics, rtol=1e-10)
        assert_allclose(result.pvalues[:, k], single.pvalues)
    assert "output" in str(result) and list(result.to_frame().columns) == [
        "feature",
        "kind",
        "output",
        "statistic",
        "pvalue",
    ]


def test_one_feature_is_tested_against_the_mean():
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(50, 1))
    y = rng.normal(size=50)
    w = rng.uniform(0.5, 1.5, 50)
    reg = KernelAttentionRegressor(bandwidth=0.2).fit(X, y, sample_weight=w)
    result = significance_test(reg, X, y, n_resamples=3, random_state=0)
    mean = np.average(y, weights=w)
    # The residuals rescaled by the smoother of the weighted mean, L = 1 p^T.
    p = w / w.sum()
    u = np.abs(y - mean) / np.sqrt(1 - 2 * p + p @ p)
    signs = np.random.RandomState(0).randint(0, 2, (3, 50)) * 2 - 1
    for b in range(3):
        fit = KernelAttentionRegressor(bandwidth=0.2)
        fit.fit(X, mean + u * signs[b], sample_weight=w)
        gradient = fit.predict_gradient(X)[:, 0]
        expected = np.average(gradient**2, weights=w)
        assert_allclose(result.null_statistics[0, b], expected, rtol=1e-10)


def test_a_search_is_tested_with_its_best_estimator():
    rng = np.random.default_rng(6)
    X = rng.uniform(size=(60, 2))
    y = np.sin(4 * X[:, 0]) + rng.normal(scale=0.2, size=60)
    search = KernelAttentionRegressorCV(bandwidths=5).fit(X, y)
    ours = significance_test(search, X, y, n_resamples=9, random_state=0)
    best = significance_test(
        search.best_estimator_, X, y, n_resamples=9, random_state=0
    )
    assert_allclose(ours.statistics, best.statistics)
    assert_allclose(ours.pvalues, best.pvalues)


def test_the_result_prints_a_table():
    result = SignificanceResult(
        np.array([1.0, 0.0]), np.zeros((2, 4)), np.array(["x", "z"]), [False, True]
    )
    assert_allclose(result.pvalues, [0.2, 1.0])
    assert str(result).splitlines() == [
        "feature  kind         statistic  p-value",
        "x        continuous   1          0.2",
        "z        categorical  0          1",
        "(wild bootstrap, 4 resamples)",
    ]
    assert repr(result).startswith("SignificanceResult(\nfeature")


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: KernelAttentionRegressor(linear_features=[1]), "partially linear"),
        (lambda: KernelAttentionRegressor("boxcar", 0.5), "flat inside its support"),
        (lambda: KernelAttentionRegressor(lambda u: np.exp(-u)), "callable kernel"),
    ],
)
def test_untestable_fits_are_refused(make, match):
    rng = np.random.default_rng(7)
    X, y = rng.uniform(size=(40, 2)), rng.normal(size=40)
    reg = make().fit(X, y)
    with pytest.raises(ValueError, match=match):
        significance_test(reg, X, y, n_resamples=3)


def test_a_flat_kernel_of_degree_one_or_its_categories_are_tested():
    X, y, _ = _mixed(n=40)
    reg = _regressor(0, kernel="boxcar").fit(X, y)
    result = significance_test(reg, X, y, features=["c"], n_resamples=3)
    assert result.statistics[0] > 0
    reg.set_params(degree=1, bandwidth=[0.5, 0.5]).fit(X, y)
    assert significance_test(reg, X, y, n_resamples=3).statistics.shape == (3,)


def test_wrong_inputs_are_refused():
    rng = np.random.default_rng(8)
    X, y = rng.uniform(size=(40, 2)), rng.normal(size=40)
    reg = KernelAttentionRegressor(bandwidth=0.3).fit(X, y, sample_weight=np.ones(40))
    with pytest.raises(ValueError, match=r"features must hold indices in \[0, 2\)"):
        significance_test(reg, X, y, features=[2])
    with pytest.raises(ValueError, match="not a feature name"):
        significance_test(reg, X, y, features="a")
    with pytest.raises(ValueError, match="distinct"):
        significance_test(reg, X, y, features=[0, -2])
    with pytest.raises(ValueError, match=r"shape \(n_samples, 2\)"):
        significance_test(reg, X[:, :1], y)
    with pytest.raises(ValueError, match="40 sample weights"):
        significance_test(reg, X[:30], y[:30])
    with pytest.raises(ValueError, match="n_resamples"):
        significance_test(reg, X, y, n_resamples=0)
    with pytest.raises(ValueError, match="estimator"):
        classifier = KernelAttentionClassifier().fit(X, y > 0)
        significance_test(classifier, X, y)


def _rejections(n_repetitions, degree, effect, seed, categorical=False):
    """The rejection rates at 5% of the two features of ``y = sin(2 pi x0) +
    effect * x1 + noise``, ``x1`` continuous or of three levels."""
    rng = np.random.default_rng(seed)
    rejected = np.zeros(2)
    for r in range(n_repetitions):
        X = rng.uniform(size=(100, 2))
        if categorical:
            X[:, 1] = rng.integers(0, 3, 100)
        y = np.sin(2 * np.pi * X[:, 0]) + effect * X[:, 1]
        y += rng.normal(scale=0.5, size=100)
        reg = KernelAttentionRegressor(
            bandwidth=[0.1] if categorical else [0.1, 0.25],
            degree=degree,
            categorical_features=[1] if categorical else None,
            categorical_bandwidth=0.3,
        ).fit(X, y)
        result = significance_test(reg, X, y, n_resamples=99, random_state=r)
        rejected += result.pvalues <= 0.05
    return rejected / n_repetitions


def _bound(n_repetitions, level=0.05):
    return 3 * np.sqrt(level * (1 - level) / n_repetitions)


@pytest.mark.parametrize("degree", [0, 1])
def test_size_and_power_short(degree):
    rates = _rejections(40, degree, effect=0.0, seed=10 + degree)
    assert rates[0] == 1.0  # sin(2 pi x0) against noise 0.5: always found
    assert rates[1] <= 0.05 + _bound(40)
    power = _rejections(20, degree, effect=1.0, seed=20 + degree)
    assert power[1] >= 0.6


@pytest.mark.slow
@pytest.mark.parametrize("degree, categorical", [(0, False), (1, False), (0, True)])
def test_size_and_power(degree, categorical):
    """Size within the Monte-Carlo bounds of 200 repetitions; power."""
    rates = _rejections(
        200, degree, effect=0.0, seed=30 + degree, categorical=categorical
    )
    assert abs(rates[1] - 0.05) <= _bound(200)
    effect = 0.3 if categorical else 1.0
    power = _rejections(100, degree, effect, seed=40 + degree, categorical=categorical)
    assert power[1] >= 0.8
    assert power[0] >= 0.99


# -- the null fit keeps the declared columns ---------------------------------
# Two continuous features (a, b) and two categorical ones (g, u) of object
# dtype and three levels each, one of them ordered; widths per feature.
_COLUMNS = ["a", "g", "b", "u"]
_LEVELS = {"g": ["p", "q", "r"], "u": ["s", "t", "v"]}
_WIDTHS = {"a": 0.25, "b": 0.4, "g": 0.3, "u": 0.6}
_FORMS = {
    "index": lambda names: [_COLUMNS.index(name) for name in names],
    "mask": lambda names: [column in names for column in _COLUMNS],
    "name": list,
}


def _ordered_frame(n=40, seed=11):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({c: rng.uniform(0, 1, n) for c in _COLUMNS})
    for column, levels in _LEVELS.items():
        X[column] = rng.choice(levels, n).astype(object)
    level = (X["g"] == "q") + 2.0 * (X["g"] == "r") + 0.5 * (X["u"] == "v")
    y = np.sin(3 * X["a"]) + 0.5 * level + 0.3 * X["b"] + rng.normal(0, 0.3, n)
    return X, y.to_numpy()


def _declared(columns, ordered, widths=_WIDTHS, **params):
    """The regressor of the features ``columns``, every selection by name."""
    categorical = [c for c in columns if c in _LEVELS]
    return KernelAttentionRegressor(
        bandwidth=[widths[c] for c in columns if c not in _LEVELS],
        categorical_features=categorical or None,
        categorical_bandwidth=[widths[c] for c in categorical] or 0.1,
        ordered_features=[c for c in ordered if c in columns] or None,
        **params,
    )


def _statistic(fit, X, column):
    """lambda_j of a degree=0 ``fit`` by its definition: the mean squared
    change of the predictions over the categories, or their derivative by
    central differences."""
    base = fit.predict(X)
    if column in _LEVELS:
        changes = [fit.predict(X.assign(**{column: c})) - base for c in _LEVELS[column]]
        return np.mean(np.sum(np.square(changes), axis=0))
    step = 1e-5
    up, down = X.copy(), X.copy()
    up[column] += step
    down[column] -= step
    return np.mean(((fit.predict(up) - fit.predict(down)) / (2 * step)) ** 2)


def _draws_of_declared_nulls(X, y, ordered, widths=_WIDTHS, seed=5):
    """The three bootstrap statistics of every feature, as significance_test
    documents them (see _draws_by_refits), each null fit declared by name
    on the data without the feature."""
    signs = np.random.RandomState(seed).randint(0, 2, (3, len(y))) * 2 - 1
    draws = np.empty((len(_COLUMNS), 3))
    for j, column in enumerate(_COLUMNS):
        rest = [c for c in _COLUMNS if c != column]
        null = _declared(rest, ordered, widths).fit(X[rest], y)
        L = null.attention_weights(X[rest])
        g = L @ y
        u = np.abs(y - g) / np.sqrt(1 - 2 * np.diag(L) + np.sum(L**2, axis=1))
        for b in range(3):
            full = _declared(_COLUMNS, ordered, widths).fit(X, g + u * signs[b])
            draws[j, b] = _statistic(full, X, column)
    return draws


@pytest.fixture(scope="module")
def declared_draws():
    X, y = _ordered_frame()
    return {ordered: _draws_of_declared_nulls(X, y, ordered) for ordered in "gu"}


@pytest.mark.parametrize("ordered", ["g", "u"])
@pytest.mark.parametrize("categorical_form", list(_FORMS))
@pytest.mark.parametrize("ordered_form", list(_FORMS))
def test_the_null_fit_keeps_the_declared_columns(
    declared_draws, ordered, categorical_form, ordered_form
):
    # Every feature tested, before, after and equal to the selected ones,
    # the ordered one included: each null fit is the model declared by name
    # on the other columns.
    X, y = _ordered_frame()
    reg = _declared(_COLUMNS, ordered).set_params(
        categorical_features=_FORMS[categorical_form](["g", "u"]),
        ordered_features=_FORMS[ordered_form]([ordered]),
    )
    result = significance_test(reg.fit(X, y), X, y, n_resamples=3, random_state=5)
    assert_allclose(result.null_statistics, declared_draws[ordered], rtol=1e-5)


@pytest.mark.parametrize("ordered", ["g", "u"])
@pytest.mark.parametrize("form", ["index", "mask"])
def test_the_null_fit_keeps_the_declared_columns_of_an_array(
    declared_draws, ordered, form
):
    X, y = _ordered_frame()
    reg = _declared(_COLUMNS, ordered).set_params(
        categorical_features=_FORMS[form](["g", "u"]),
        ordered_features=_FORMS[form]([ordered]),
    )
    array = X.to_numpy(dtype=object)
    result = significance_test(
        reg.fit(array, y), array, y, n_resamples=3, random_state=5
    )
    assert_allclose(result.null_statistics, declared_draws[ordered], rtol=1e-5)


def test_a_search_maps_its_columns_with_its_learned_widths():
    # The search hands its own selections (by index) to best_estimator_,
    # whose learned widths and lambdas the null fits drop.
    X, y = _ordered_frame()
    search = KernelAttentionRegressorCV(
        bandwidths=4,
        degree=0,
        per_feature=True,
        categorical_features=[1, 3],
        ordered_features=[1],
    ).fit(X, y)
    best = search.best_estimator_
    assert best.bandwidth_.shape == best.categorical_bandwidth_.shape == (2,)
    (a, b), (g, u) = best.bandwidth_, best.categorical_bandwidth_
    learned = {"a": a, "b": b, "g": g, "u": u}
    result = significance_test(search, X, y, n_resamples=3, random_state=5)
    expected = _draws_of_declared_nulls(X, y, "g", learned)
    assert_allclose(result.null_statistics, expected, rtol=1e-5)


@pytest.mark.parametrize("linear", [["b"], ["g", "b"]])
@pytest.mark.parametrize("form", list(_FORMS))
@pytest.mark.parametrize("dropped", _COLUMNS)
def test_the_null_parameters_map_the_linear_columns(linear, form, dropped):
    # significance_test refuses a partially linear fit; the parameters of
    # its null fits map linear_features as they map the other selections.
    from sklearn_kernelpool._inference._significance_null import null_params

    X, y = _ordered_frame()
    reg = KernelAttentionRegressor(
        bandwidth=0.3,
        categorical_features=["g", "u"],
        linear_features=_FORMS[form](linear),
    )
    is_categorical = np.isin(_COLUMNS, list(_LEVELS))
    params = null_params(reg.get_params(), X, is_categorical, _COLUMNS.index(dropped))
    rest = [c for c in _COLUMNS if c != dropped]
    ours = KernelAttentionRegressor(**params).fit(X[rest], y)
    declared = KernelAttentionRegressor(
        bandwidth=0.3,
        categorical_features=[c for c in ("g", "u") if c != dropped],
        linear_features=[c for c in linear if c != dropped] or None,
    ).fit(X[rest], y)
    # The same linear columns (none where the dropped one was the only one).
    names = [getattr(fit, "linear_feature_names_", []) for fit in (ours, declared)]
    assert_array_equal(*names)
    assert_allclose(ours.predict(X[rest]), declared.predict(X[rest]), rtol=1e-12)
