"""KernelAttentionRegressor against the slow reference and the properties."""

import pickle
import warnings

import numpy as np
import pytest
from _reference import FORMULAS, nadaraya_watson
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import ortho_group
from sklearn import clone, config_context
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import get_tags

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionRegressor
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted(FORMULAS)
COMPACT = [name for name in CANONICAL if KERNELS[name].is_compact]
UNBOUNDED = [name for name in CANONICAL if not KERNELS[name].is_compact]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(30, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=30)
    Y = np.column_stack([y, np.cos(3 * X[:, 2]), -2 * y])
    Q = rng.uniform(0.1, 0.9, size=(20, 3))
    w = rng.uniform(0.5, 3.0, size=30)
    return X, y, Y, Q, w


@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("multi_output", [False, True])
@pytest.mark.parametrize("bandwidth", [0.8, (0.6, 0.9, 1.2)])
def test_predict_matches_slow_reference(
    data, kernel, weighted, multi_output, bandwidth
):
    X, y, Y, Q, w = data
    target = Y if multi_output else y
    sample_weight = w if weighted else None
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=bandwidth)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyNeighborhoodWarning)
        pred = reg.fit(X, target, sample_weight=sample_weight).predict(Q)
    expected = nadaraya_watson(X, target, Q, FORMULAS[kernel], bandwidth, sample_weight)
    assert pred.shape == expected.shape
    assert_allclose(pred, expected, rtol=1e-12, atol=1e-14)


def test_callable_kernel_matches_reference(data):
    X, y, _, Q, w = data

    def inverse_square(x):
        return 1.0 / (0.1 + x**2)

    reg = KernelAttentionRegressor(kernel=inverse_square, bandwidth=0.5)
    pred = reg.fit(X, y, sample_weight=w).predict(Q)
    expected = nadaraya_watson(X, y, Q, lambda u: 1 / (0.1 + u**2), 0.5, w)
    assert_allclose(pred, expected, rtol=1e-12)


@pytest.mark.parametrize("alias, name", [("tophat", "boxcar"), ("quartic", "biweight")])
def test_aliases_predict_like_their_kernel(data, alias, name):
    X, y, _, Q, _ = data
    a = KernelAttentionRegressor(kernel=alias, bandwidth=0.7).fit(X, y).predict(Q)
    b = KernelAttentionRegressor(kernel=name, bandwidth=0.7).fit(X, y).predict(Q)
    assert_array_equal(a, b)


def test_output_shape_follows_y(data):
    X, y, Y, Q, _ = data
    reg = KernelAttentionRegressor()
    assert reg.fit(X, y).predict(Q).shape == (20,)
    assert reg.fit(X, y[:, None]).predict(Q).shape == (20, 1)
    assert reg.fit(X, Y).predict(Q).shape == (20, 3)
    assert reg.values_.shape == (30, 3)
    assert_array_equal(reg.keys_, X)


@pytest.mark.parametrize("kernel", CANONICAL)
def test_float32_stays_float32(data, kernel):
    X, y, Y, Q, w = data
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=np.float64(0.8))
    pred32 = reg.fit(X.astype(np.float32), Y, sample_weight=w).predict(Q)
    assert pred32.dtype == np.float32
    pred64 = clone(reg).fit(X, Y, sample_weight=w).predict(Q)
    assert pred64.dtype == np.float64
    assert_allclose(pred32, pred64, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("kernel", CANONICAL)
def test_predictions_are_convex_combinations(data, kernel):
    X, _, Y, Q, w = data
    pred = KernelAttentionRegressor(kernel=kernel, bandwidth=0.5).fit(X, Y, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        pred = pred.predict(Q)
    assert np.all(pred >= Y.min(axis=0) - 1e-12)
    assert np.all(pred <= Y.max(axis=0) + 1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechikov", "boxcar"])
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_integer_weight_equals_duplicated_rows(data, kernel, on_empty):
    X, _, Y, _, _ = data
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 4, size=len(X))
    Q = rng.uniform(-0.5, 1.5, size=(40, 3))  # some fall outside every support
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.3, on_empty=on_empty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        weighted = clone(reg).fit(X, Y, sample_weight=counts).predict(Q)
        repeated = clone(reg).fit(X.repeat(counts, 0), Y.repeat(counts, 0)).predict(Q)
    assert_allclose(weighted, repeated, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_zero_weight_rows_never_influence_anything(on_empty):
    X = np.array([[0.0], [1.0], [2.0], [10.0]])
    y = np.array([1.0, 2.0, 3.0, 100.0])
    w = np.array([1.0, 1.0, 1.0, 0.0])
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5, on_empty=on_empty)
    Q = np.array([[9.0], [10.0], [0.1]])  # the zero-weight key is nearest to two
    with pytest.warns(EmptyNeighborhoodWarning) as rec:
        pred = reg.fit(X, y, sample_weight=w).predict(Q)
    warning = rec.pop(EmptyNeighborhoodWarning).message
    assert (warning.n_empty, warning.n_queries) == (2, 3)
    fallback = 3.0 if on_empty == "nearest" else 2.0
    assert_array_equal(pred, [fallback, fallback, 1.0])
    reg_removed = clone(reg).fit(X[:3], y[:3])
    with pytest.warns(EmptyNeighborhoodWarning):
        assert_array_equal(reg_removed.predict(Q), pred)


def test_translation_invariance_under_a_large_offset(data):
    X, _, Y, Q, _ = data
    offset = np.array([1e6, -3e6, 2e6])
    for kernel, h in [("gaussian", 0.1), ("epanechnikov", 0.5), ("cauchy", 0.2)]:
        reg = KernelAttentionRegressor(kernel=kernel, bandwidth=h)
        base = reg.fit(X, Y).predict(Q)
        shifted = clone(reg).fit(X + offset, Y).predict(Q + offset)
        # Rounding of the shifted inputs alone is about 1e6 * 1e-16 = 1e-10.
        assert_allclose(shifted, base, rtol=0, atol=1e-7)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "biweight"])
def test_rotation_and_permutation_invariance(data, kernel):
    X, _, Y, Q, w = data
    R = ortho_group.rvs(3, random_state=0)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=0.6)
    base = reg.fit(X, Y, sample_weight=w).predict(Q)
    rotated = clone(reg).fit(X @ R, Y, sample_weight=w).predict(Q @ R)
    assert_allclose(rotated, base, rtol=1e-11, atol=1e-13)
    perm = np.random.default_rng(3).permutation(len(X))
    permuted = clone(reg).fit(X[perm], Y[perm], sample_weight=w[perm]).predict(Q)
    assert_allclose(permuted, base, rtol=1e-12, atol=1e-14)


def test_scale_equivariance(data):
    X, y, _, Q, _ = data
    base = KernelAttentionRegressor(bandwidth=0.3).fit(X, y).predict(Q)
    scaled = KernelAttentionRegressor(bandwidth=0.3 * 7.5).fit(7.5 * X, 3 * y - 2)
    assert_allclose(scaled.predict(7.5 * Q), 3 * base - 2, rtol=1e-12)


def test_per_feature_bandwidth_is_isotropic_on_rescaled_features(data):
    X, y, _, Q, _ = data
    h = np.array([0.2, 1.0, 5.0])
    per_feature = KernelAttentionRegressor(kernel="tricube", bandwidth=h).fit(X, y)
    assert isinstance(per_feature.bandwidth_, np.ndarray)
    assert_array_equal(per_feature.bandwidth_, h)
    iso = KernelAttentionRegressor(kernel="tricube", bandwidth=1.0).fit(X / h, y)
    assert isinstance(iso.bandwidth_, float)
    assert_allclose(per_feature.predict(Q), iso.predict(Q / h), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_far_queries_get_the_nearest_value_not_nan(kernel):
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
    y = np.array([1.0, 2.0, 3.0])
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=1e-3).fit(X, y)
    Q = np.array([[-50.0, 0.0], [60.0, 1.0], [0.0, 40.0], [0.5, -100.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0, no empty neighbourhood
        pred = reg.predict(Q)
    assert_allclose(pred[:3], [1.0, 2.0, 3.0], rtol=1e-12)
    # The last query is equidistant from the first two keys: ties average, up
    # to the rounding of logits of size (1e5)**2, about 1e-16 * 1e10 = 1e-6.
    assert_allclose(pred[3], 1.5, rtol=1e-6)


def test_far_queries_with_the_heavy_tailed_cauchy_kernel():
    # 1 / (1 + x**2) decays like a power: far away the weights even out
    # instead of picking the nearest key, and nothing underflows.
    X = np.array([[0.0], [1.0], [3.0]])
    y = np.array([1.0, 2.0, 3.0])
    reg = KernelAttentionRegressor(kernel="cauchy", bandwidth=1e-3).fit(X, y)
    Q = np.array([[-1e4], [500.0]])
    expected = nadaraya_watson(X, y, Q, FORMULAS["cauchy"], 1e-3)
    assert_allclose(reg.predict(Q), expected, rtol=1e-12)


@pytest.mark.parametrize("kernel", COMPACT)
def test_key_exactly_at_the_support_radius_gets_weight_zero(kernel):
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([0.0, 10.0, 20.0])
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=1.0).fit(X, y)
    # Keys 0 and 2 lie exactly at distance 1 = the support radius.
    assert_array_equal(reg.predict([[1.0]]), [10.0])


def test_constant_kernel_is_the_weighted_mean(data):
    X, _, Y, Q, w = data
    reg = KernelAttentionRegressor(kernel="constant", bandwidth=1e-6).fit(X, Y, w)
    assert_allclose(reg.predict(Q), np.tile(np.average(Y, 0, w), (20, 1)), rtol=1e-13)
    assert get_tags(reg).regressor_tags.poor_score
    assert not get_tags(KernelAttentionRegressor()).regressor_tags.poor_score


@pytest.mark.parametrize("kernel", UNBOUNDED)
def test_huge_bandwidth_gives_the_weighted_mean(data, kernel):
    X, _, Y, Q, w = data
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=1e12).fit(X, Y, w)
    assert_allclose(reg.predict(Q), np.tile(np.average(Y, 0, w), (20, 1)), rtol=1e-9)


def test_tiny_gaussian_bandwidth_is_one_nearest_neighbour(data):
    X, _, Y, Q, _ = data
    nearest = np.argmin(((Q[:, None, :] - X[None]) ** 2).sum(-1), axis=1)
    reg = KernelAttentionRegressor(bandwidth=1e-4).fit(X, Y)
    assert_allclose(reg.predict(Q), Y[nearest], rtol=1e-12)


class TestOnEmpty:
    X = np.array([[0.0], [1.0], [3.0], [3.0]])
    y = np.array([[0.0, 1.0], [10.0, 2.0], [20.0, 3.0], [40.0, 5.0]])
    w = np.array([1.0, 1.0, 1.0, 3.0])
    Q = np.array([[0.1], [2.0], [50.0], [-7.0]])

    def fit(self, on_empty):
        reg = KernelAttentionRegressor(
            kernel="epanechnikov", bandwidth=0.5, on_empty=on_empty
        )
        return reg.fit(self.X, self.y, sample_weight=self.w)

    def test_nearest_averages_ties_with_their_weights(self):
        with pytest.warns(EmptyNeighborhoodWarning) as rec:
            pred = self.fit("nearest").predict(self.Q)
        warning = rec.pop(EmptyNeighborhoodWarning).message
        assert (warning.n_empty, warning.n_queries) == (3, 4)
        assert "nearest" in str(warning)
        tied = (20.0 * 1 + 40.0 * 3) / 4, (3.0 * 1 + 5.0 * 3) / 4
        # Query 2.0 is equidistant from 1.0 and the two keys at 3.0.
        at_two = np.average(self.y[1:], axis=0, weights=self.w[1:])
        assert_allclose(pred, [[0.0, 1.0], at_two, tied, [0.0, 1.0]], rtol=1e-14)

    def test_mean(self):
        with pytest.warns(EmptyNeighborhoodWarning) as rec:
            pred = self.fit("mean").predict(self.Q)
        warning = rec.pop(EmptyNeighborhoodWarning).message
        assert (warning.n_empty, warning.n_queries) == (3, 4)
        mean = np.average(self.y, axis=0, weights=self.w)
        assert_allclose(pred, [[0.0, 1.0], mean, mean, mean], rtol=1e-14)

    def test_nan(self):
        with pytest.warns(EmptyNeighborhoodWarning, match="NaN"):
            pred = self.fit("nan").predict(self.Q)
        assert_array_equal(pred[0], [0.0, 1.0])
        assert np.all(np.isnan(pred[1:]))

    def test_raise(self):
        reg = self.fit("raise")
        with pytest.raises(ValueError, match="3 of 4 queries .* larger bandwidth"):
            reg.predict(self.Q)
        assert_array_equal(reg.predict(self.Q[:1]), [[0.0, 1.0]])

    def test_unbounded_kernels_never_fall_back(self):
        reg = KernelAttentionRegressor(
            kernel="cauchy", bandwidth=1e-3, on_empty="raise"
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            reg.fit(self.X, self.y).predict(self.Q)

    def test_callable_kernel_returning_zeros_falls_back(self):
        reg = KernelAttentionRegressor(kernel=lambda x: np.exp(-(x**8)))
        reg.fit(self.X, self.y)
        with pytest.warns(EmptyNeighborhoodWarning) as rec:
            assert_allclose(reg.predict([[100.0]]), [[30.0, 4.0]])
        warning = rec.pop(EmptyNeighborhoodWarning).message
        assert (warning.n_empty, warning.n_queries) == (1, 1)


class TestRulesOfThumb:
    def test_formulas(self, data):
        X, y, _, _, _ = data
        n, d = X.shape
        sigma = X.std(axis=0)
        scott = KernelAttentionRegressor(bandwidth="scott").fit(X, y).bandwidth_
        assert_allclose(scott, sigma * n ** (-1 / (d + 4)), rtol=1e-14)
        silverman = KernelAttentionRegressor(bandwidth="silverman").fit(X, y)
        expected = sigma * (4 / ((d + 2) * n)) ** (1 / (d + 4))
        assert_allclose(silverman.bandwidth_, expected, rtol=1e-14)

    def test_one_dimension_silverman_is_the_classical_1_06(self):
        X = np.random.default_rng(0).normal(size=(500, 1))
        h = KernelAttentionRegressor(bandwidth="silverman").fit(X, X[:, 0]).bandwidth_
        assert_allclose(h, 1.0592 * X.std() * 500 ** (-1 / 5), rtol=1e-4)

    @pytest.mark.parametrize("rule", ["scott", "silverman"])
    def test_weights_are_frequency_weights(self, data, rule):
        X, y, _, _, _ = data
        counts = np.random.default_rng(0).integers(0, 4, size=len(X))
        weighted = KernelAttentionRegressor(bandwidth=rule).fit(X, y, counts)
        repeated = KernelAttentionRegressor(bandwidth=rule).fit(
            X.repeat(counts, 0), y.repeat(counts)
        )
        assert_allclose(weighted.bandwidth_, repeated.bandwidth_, rtol=1e-12)

    def test_constant_feature_gets_unit_spread(self):
        X = np.column_stack([np.linspace(0, 1, 10), np.full(10, 4.0)])
        h = KernelAttentionRegressor(bandwidth="scott").fit(X, X[:, 0]).bandwidth_
        assert h[1] == 10 ** (-1 / 6)
        assert np.all(h > 0)


def test_n_jobs_and_chunking_do_not_change_predictions(data):
    X, _, Y, _, w = data
    Q = np.random.default_rng(5).uniform(size=(500, 3))
    reg = KernelAttentionRegressor(kernel="epanechikov", bandwidth=0.6)
    base = reg.fit(X, Y, sample_weight=w).predict(Q)
    with config_context(working_memory=0.01):  # chunks of about 100 queries
        chunked = reg.predict(Q)
        threaded = clone(reg).set_params(n_jobs=2).fit(X, Y, w).predict(Q)
    assert_array_equal(threaded, chunked)
    assert_allclose(chunked, base, rtol=1e-13, atol=1e-15)


def test_grid_search_picks_a_sensible_bandwidth():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 2 * np.pi, size=(300, 1))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=300)
    grid = {
        "kernel": ["gaussian", "epanechikov"],
        "bandwidth": [1e-3, 0.01, 0.1, 0.3, 1.0, 10.0],
    }
    search = GridSearchCV(
        KernelAttentionRegressor(),
        grid,
        cv=KFold(5, shuffle=True, random_state=0),
        scoring="neg_mean_squared_error",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        search.fit(X, y)
    assert search.best_params_["bandwidth"] in (0.1, 0.3)
    X_test = np.linspace(0.5, 2 * np.pi - 0.5, 50)[:, None]
    error = mean_squared_error(np.sin(X_test[:, 0]), search.predict(X_test))
    assert error < 0.01


class TestPipeline:
    @pytest.fixture
    def weighted_problem(self, data):
        X, y, _, Q, _ = data
        w = np.where(np.arange(len(X)) % 3 == 0, 10.0, 0.1)
        return 5 * X + 2, y, 5 * Q + 2, w

    def reference(self, X, y, Q, w):
        scaler = StandardScaler().fit(X)
        reg = KernelAttentionRegressor(bandwidth=0.5)
        reg.fit(scaler.transform(X), y, sample_weight=w)
        return reg.predict(scaler.transform(Q))

    def test_step_parameter(self, weighted_problem):
        X, y, Q, w = weighted_problem
        pipe = make_pipeline(StandardScaler(), KernelAttentionRegressor(bandwidth=0.5))
        pipe.fit(X, y, kernelattentionregressor__sample_weight=w)
        expected = self.reference(X, y, Q, w)
        assert_allclose(pipe.predict(Q), expected, rtol=1e-12)
        unweighted = self.reference(X, y, Q, None)
        assert not np.allclose(expected, unweighted)

    def test_metadata_routing(self, weighted_problem):
        X, y, Q, w = weighted_problem
        with config_context(enable_metadata_routing=True):
            pipe = make_pipeline(
                StandardScaler().set_fit_request(sample_weight=False),
                KernelAttentionRegressor(bandwidth=0.5).set_fit_request(
                    sample_weight=True
                ),
            )
            pipe.fit(X, y, sample_weight=w)
            assert_allclose(pipe.predict(Q), self.reference(X, y, Q, w), rtol=1e-12)


def test_clone_and_pickle_round_trip(data):
    X, _, Y, Q, w = data
    reg = KernelAttentionRegressor(kernel="biweight", bandwidth=[0.5, 0.7, 0.9])
    reg.fit(X, Y, sample_weight=w)
    restored = pickle.loads(pickle.dumps(reg))
    assert_array_equal(restored.predict(Q), reg.predict(Q))
    assert_array_equal(restored.sample_weight_, w)
    cloned = clone(reg)
    assert cloned.get_params() == reg.get_params()
    assert not hasattr(cloned, "keys_")
    assert_array_equal(cloned.fit(X, Y, sample_weight=w).predict(Q), reg.predict(Q))


def test_fitted_attributes(data):
    X, y, _, _, w = data
    reg = KernelAttentionRegressor().fit(X, y)
    assert reg.sample_weight_ is None
    assert reg.n_features_in_ == 3
    assert reg.algorithm_ == "brute"
    assert reg.bandwidth_ == 1.0
    assert_array_equal(reg.fit(X, y, sample_weight=w).sample_weight_, w)


def test_pandas_feature_names(data):
    pd = pytest.importorskip("pandas")
    X, y, _, Q, _ = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    reg = KernelAttentionRegressor().fit(frame, pd.Series(y))
    assert_array_equal(reg.feature_names_in_, ["a", "b", "c"])
    expected = KernelAttentionRegressor().fit(X, y).predict(Q)
    assert_allclose(reg.predict(pd.DataFrame(Q, columns=["a", "b", "c"])), expected)
