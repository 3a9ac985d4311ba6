"""KernelAttentionClassifier against the slow reference and the properties."""

import pickle
import warnings

import numpy as np
import pytest
from _reference import FORMULAS, nadaraya_watson
from numpy.testing import assert_allclose, assert_array_equal
from scipy.sparse import csr_array
from scipy.spatial.distance import cdist
from scipy.stats import ortho_group
from sklearn import clone, config_context
from sklearn.datasets import make_moons
from sklearn.exceptions import DataConversionWarning
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.neighbors import KNeighborsClassifier, RadiusNeighborsClassifier
from sklearn.utils import get_tags
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionClassifier
from sklearn_kernelpool.kernels import KERNELS

CANONICAL = sorted(FORMULAS)
COMPACT = [name for name in CANONICAL if KERNELS[name].is_compact]
UNBOUNDED = [name for name in CANONICAL if not KERNELS[name].is_compact]
PATHS = ["brute", "kd_tree", "ball_tree"]


def onehot(y, classes):
    return (np.asarray(y)[:, None] == np.asarray(classes)[None, :]).astype(float)


def reference_proba(X, y, Q, kernel, bandwidth, sample_weight=None):
    """Class frequencies by the double loop of the regression reference."""
    values = onehot(y, np.unique(y))
    return nadaraya_watson(X, values, Q, kernel, bandwidth, sample_weight)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 3))
    score = X[:, 0] + X[:, 1] ** 2 + 0.3 * rng.normal(size=40)
    y = np.array(["a", "b", "c"])[
        np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    ]
    Q = rng.uniform(0.1, 0.9, size=(25, 3))
    w = rng.uniform(0.5, 3.0, size=40)
    return X, y, Q, w


def fit_quietly(clf, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        return clf.fit(*args, **kwargs)


def quietly(method, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        return method(*args, **kwargs)


@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("bandwidth", [0.8, (0.6, 0.9, 1.2)])
def test_predict_proba_matches_slow_reference(data, kernel, weighted, bandwidth):
    X, y, Q, w = data
    sample_weight = w if weighted else None
    clf = KernelAttentionClassifier(kernel=kernel, bandwidth=bandwidth)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyNeighborhoodWarning)
        proba = clf.fit(X, y, sample_weight=sample_weight).predict_proba(Q)
        pred = clf.predict(Q)
    expected = reference_proba(X, y, Q, FORMULAS[kernel], bandwidth, sample_weight)
    assert proba.shape == (25, 3)
    assert_allclose(proba, expected, rtol=1e-12, atol=1e-14)
    assert_array_equal(clf.classes_, ["a", "b", "c"])
    assert_array_equal(pred, clf.classes_[np.argmax(proba, axis=1)])
    # Where the reference's two largest probabilities are apart, it agrees.
    top_two = np.sort(expected, axis=1)[:, -2:]
    clear = top_two[:, 1] - top_two[:, 0] > 1e-9
    assert_array_equal(pred[clear], clf.classes_[np.argmax(expected[clear], axis=1)])


def test_callable_kernel_matches_reference(data):
    X, y, Q, w = data

    def inverse_square(x):
        return 1.0 / (0.1 + x**2)

    clf = KernelAttentionClassifier(kernel=inverse_square, bandwidth=0.5)
    proba = clf.fit(X, y, sample_weight=w).predict_proba(Q)
    expected = reference_proba(X, y, Q, lambda u: 1 / (0.1 + u**2), 0.5, w)
    assert_allclose(proba, expected, rtol=1e-12)


@pytest.mark.parametrize("kernel", CANONICAL)
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_are_probability_vectors(data, kernel, on_empty, dtype):
    X, y, _, w = data
    Q = np.random.default_rng(1).uniform(-1, 2, size=(60, 3))  # some far away
    clf = KernelAttentionClassifier(kernel=kernel, bandwidth=0.3, on_empty=on_empty)
    proba = quietly(clf.fit(X.astype(dtype), y, sample_weight=w).predict_proba, Q)
    assert proba.dtype == dtype
    assert np.all(proba >= 0)
    assert np.all(proba <= 1)
    assert_allclose(proba.sum(axis=1), 1.0, rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize("kernel", CANONICAL)
def test_float32_stays_close_to_float64(data, kernel):
    X, y, Q, w = data
    clf = KernelAttentionClassifier(kernel=kernel, bandwidth=0.8)
    proba32 = clf.fit(X.astype(np.float32), y, sample_weight=w).predict_proba(Q)
    proba64 = clone(clf).fit(X, y, sample_weight=w).predict_proba(Q)
    assert proba32.dtype == np.float32
    assert clf.values_.dtype == np.float32
    assert_allclose(proba32, proba64, rtol=2e-4, atol=2e-5)


def test_predict_log_proba_is_the_log_of_predict_proba(data):
    X, y, Q, _ = data
    clf = KernelAttentionClassifier(kernel="biweight", bandwidth=0.3).fit(X, y)
    proba = quietly(clf.predict_proba, Q)
    assert np.any(proba == 0)  # a narrow support leaves classes out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("error", RuntimeWarning)  # no divide-by-zero warning
        log_proba = clf.predict_log_proba(Q)
    assert_array_equal(log_proba[proba == 0], -np.inf)
    assert_allclose(log_proba[proba > 0], np.log(proba[proba > 0]), rtol=1e-15)


class TestLabels:
    codes = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 0])
    X = np.linspace(0, 3, 10)[:, None]
    Q = np.array([[0.2], [1.3], [2.9]])

    @pytest.mark.parametrize(
        "labels",
        [
            np.array(["cat", "dog", "emu"]),
            np.array(["cat", "dog", "emu"], dtype=object),
            np.array([-5, 3, 40]),
            np.array([0.0, 1.0, 2.0]),
        ],
        ids=["str", "object", "int", "float"],
    )
    def test_any_sortable_labels_give_the_same_probabilities(self, labels):
        base = KernelAttentionClassifier(bandwidth=0.4).fit(self.X, self.codes)
        clf = KernelAttentionClassifier(bandwidth=0.4).fit(self.X, labels[self.codes])
        assert_array_equal(clf.classes_, labels)
        assert clf.classes_.dtype == labels.dtype
        assert_array_equal(clf.predict_proba(self.Q), base.predict_proba(self.Q))
        pred = clf.predict(self.Q)
        assert pred.dtype == labels.dtype
        assert_array_equal(pred, labels[base.predict(self.Q)])

    def test_boolean_labels(self):
        y = self.codes == 1
        clf = KernelAttentionClassifier(bandwidth=0.3).fit(self.X, y)
        assert_array_equal(clf.classes_, [False, True])
        expected = reference_proba(self.X, y, self.Q, FORMULAS["gaussian"], 0.3)
        assert_allclose(clf.predict_proba(self.Q), expected, rtol=1e-12)
        assert clf.predict(self.Q).dtype == bool

    def test_classes_are_sorted_whatever_their_order_in_y(self):
        y = np.array(["zebra", "ant", "moth"])[self.codes]
        clf = KernelAttentionClassifier().fit(self.X, y)
        assert_array_equal(clf.classes_, ["ant", "moth", "zebra"])
        assert_array_equal(clf.values_, onehot(y, clf.classes_))

    def test_one_class(self):
        clf = KernelAttentionClassifier(kernel="boxcar", bandwidth=0.1)
        proba = quietly(clf.fit(self.X, ["only"] * 10).predict_proba, self.Q)
        assert_array_equal(proba, np.ones((3, 1)))
        assert_array_equal(quietly(clf.predict, self.Q), ["only"] * 3)

    def test_many_classes(self):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(200, 2))
        y = rng.integers(0, 12, size=200)
        Q = rng.normal(size=(30, 2))
        proba = KernelAttentionClassifier(bandwidth=0.5).fit(X, y).predict_proba(Q)
        expected = reference_proba(X, y, Q, FORMULAS["gaussian"], 0.5)
        assert proba.shape == (30, 12)
        assert_allclose(proba, expected, rtol=1e-12)

    def test_column_vector_y_warns_and_is_raveled(self):
        with pytest.warns(DataConversionWarning, match="column-vector y"):
            clf = KernelAttentionClassifier().fit(self.X, self.codes[:, None])
        assert_array_equal(clf.classes_, [0, 1, 2])

    @pytest.mark.parametrize(
        "y, message",
        [
            (np.linspace(0, 1, 10), "Unknown label type: continuous"),
            (np.ones((10, 2), dtype=int), r"y should be a 1d array, got .* \(10, 2\)"),
            (np.ones((10, 2)) / 3, r"y should be a 1d array, got .* \(10, 2\)"),
            (np.array([1, "a"] * 5, dtype=object), "Unknown label type: unknown"),
            (np.r_[np.nan, np.zeros(9)], "Input y contains NaN"),
        ],
        ids=["continuous", "multi-output", "continuous multi-output", "mixed", "nan"],
    )
    def test_targets_that_are_not_classes_are_rejected(self, y, message):
        with pytest.raises(ValueError, match=message):
            KernelAttentionClassifier().fit(self.X, y)


class TestTies:
    X = np.array([[0.0], [1.0], [2.0], [3.0]])

    @pytest.mark.parametrize("y", [["b", "b", "a", "a"], ["a", "b", "a", "b"]])
    def test_equal_frequencies_go_to_the_first_class(self, y):
        clf = KernelAttentionClassifier(kernel="constant").fit(self.X, y)
        Q = [[0.0], [1.7], [-9.0]]
        assert_array_equal(clf.predict_proba(Q), np.full((3, 2), 0.5))
        assert_array_equal(clf.predict(Q), ["a", "a", "a"])

    @pytest.mark.parametrize("y", [[7, 7, 3, 3], [3, 3, 7, 7]])
    def test_a_query_midway_between_two_classes(self, y):
        # Keys 1 and 2 lie inside the boxcar's support, keys 0 and 3 outside.
        clf = KernelAttentionClassifier(kernel="boxcar", bandwidth=1.0).fit(self.X, y)
        assert_array_equal(clf.predict_proba([[1.5]]), [[0.5, 0.5]])
        assert_array_equal(clf.predict([[1.5]]), [3])


class TestOnEmpty:
    X = np.array([[0.0], [1.0], [3.0], [3.0], [5.0]])
    y = np.array(["b", "a", "a", "c", "c"])
    w = np.array([1.0, 1.0, 1.0, 3.0, 1.0])
    Q = np.array([[0.1], [2.0], [50.0], [-7.0], [4.0]])

    def fit(self, on_empty):
        clf = KernelAttentionClassifier(
            kernel="epanechnikov", bandwidth=0.5, on_empty=on_empty
        )
        return clf.fit(self.X, self.y, sample_weight=self.w)

    def test_nearest_gives_the_nearest_class_and_weighs_ties(self):
        with pytest.warns(EmptyNeighborhoodWarning) as rec:
            proba = self.fit("nearest").predict_proba(self.Q)
        warning = rec.pop(EmptyNeighborhoodWarning).message
        assert (warning.n_empty, warning.n_queries) == (4, 5)
        assert "nearest" in str(warning)
        expected = [
            [0.0, 1.0, 0.0],  # inside the support of key 0.0 only
            [2 / 5, 0.0, 3 / 5],  # 1.0 and both 3.0 tie: weights a 1 + 1, c 3
            [0.0, 0.0, 1.0],  # nearest key 5.0
            [0.0, 1.0, 0.0],  # nearest key 0.0
            [1 / 5, 0.0, 4 / 5],  # both 3.0 and 5.0 tie: weights a 1, c 3 + 1
        ]
        assert_allclose(proba, expected, rtol=1e-14)
        with pytest.warns(EmptyNeighborhoodWarning):
            assert_array_equal(self.fit("nearest").predict(self.Q), list("bccbc"))

    def test_nearest_ties_of_equal_weight_go_to_the_first_class(self):
        clf = KernelAttentionClassifier(kernel="boxcar", bandwidth=0.5)
        for y in (["b", "a"], ["a", "b"]):
            clf.fit([[0.0], [2.0]], y)
            with pytest.warns(EmptyNeighborhoodWarning):
                assert_array_equal(clf.predict_proba([[1.0]]), [[0.5, 0.5]])
            with pytest.warns(EmptyNeighborhoodWarning):
                assert_array_equal(clf.predict([[1.0]]), ["a"])

    def test_mean_gives_the_weighted_class_priors(self):
        with pytest.warns(EmptyNeighborhoodWarning) as rec:
            proba = self.fit("mean").predict_proba(self.Q)
        warning = rec.pop(EmptyNeighborhoodWarning).message
        assert (warning.n_empty, warning.n_queries) == (4, 5)
        priors = [2 / 7, 1 / 7, 4 / 7]
        assert_allclose(proba, [[0.0, 1.0, 0.0]] + [priors] * 4, rtol=1e-14)

    def test_raise(self):
        clf = self.fit("raise")
        with pytest.raises(ValueError, match="4 of 5 queries .* larger bandwidth"):
            clf.predict(self.Q)
        assert_array_equal(clf.predict_proba(self.Q[:1]), [[0.0, 1.0, 0.0]])

    def test_nan_is_not_a_policy_of_the_classifier(self):
        clf = KernelAttentionClassifier(on_empty="nan")
        with pytest.raises(InvalidParameterError, match="'on_empty'") as excinfo:
            clf.fit(self.X, self.y)
        for policy in ("nearest", "mean", "raise"):
            assert f"'{policy}'" in str(excinfo.value)

    def test_unbounded_kernels_never_fall_back(self):
        clf = KernelAttentionClassifier(kernel="gaussian", bandwidth=1e-3)
        clf.set_params(on_empty="raise").fit(self.X, self.y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            proba = clf.predict_proba(self.Q)
        # Far from every key the softmax picks the nearest one; the others
        # weigh at most 1e-300 of it (the engine's clamp of tiny logits).
        nearest = [[0, 1, 0], [0, 0, 1], [0, 1, 0]]
        assert_allclose(proba[[0, 2, 3]], nearest, rtol=1e-15, atol=1e-300)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechikov", "boxcar"])
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_integer_weight_equals_duplicated_rows(data, kernel, on_empty):
    X, y, _, _ = data
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 4, size=len(X))
    assert set(y[counts > 0]) == set(y)  # every class keeps a row
    Q = rng.uniform(-0.5, 1.5, size=(40, 3))  # some fall outside every support
    clf = KernelAttentionClassifier(kernel=kernel, bandwidth=0.3, on_empty=on_empty)
    weighted = fit_quietly(clone(clf), X, y, sample_weight=counts)
    repeated = fit_quietly(clone(clf), X.repeat(counts, 0), y.repeat(counts))
    proba = quietly(weighted.predict_proba, Q)
    assert_allclose(proba, quietly(repeated.predict_proba, Q), rtol=1e-12, atol=1e-14)
    assert_array_equal(quietly(weighted.predict, Q), quietly(repeated.predict, Q))


@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_zero_weight_rows_never_influence_anything(on_empty):
    X = np.array([[0.0], [1.0], [2.0], [10.0]])
    y = np.array(["a", "b", "b", "z"])
    w = np.array([1.0, 1.0, 1.0, 0.0])
    clf = KernelAttentionClassifier(kernel="boxcar", bandwidth=0.5, on_empty=on_empty)
    Q = np.array([[9.0], [10.0], [0.1]])  # the zero-weight key is nearest to two
    with pytest.warns(EmptyNeighborhoodWarning) as rec:
        proba = clf.fit(X, y, sample_weight=w).predict_proba(Q)
    warning = rec.pop(EmptyNeighborhoodWarning).message
    assert (warning.n_empty, warning.n_queries) == (2, 3)
    # The class of the zero-weight row stays in classes_, with probability 0.
    assert_array_equal(clf.classes_, ["a", "b", "z"])
    fallback = [0.0, 1.0, 0.0] if on_empty == "nearest" else [1 / 3, 2 / 3, 0.0]
    assert_allclose(proba, [fallback, fallback, [1.0, 0.0, 0.0]], rtol=1e-15)
    removed = clone(clf).fit(X[:3], y[:3])
    with pytest.warns(EmptyNeighborhoodWarning):
        assert_allclose(removed.predict_proba(Q), proba[:, :2], rtol=1e-15)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential", "biweight"])
def test_rotation_and_permutation_invariance(data, kernel):
    X, y, Q, w = data
    R = ortho_group.rvs(3, random_state=0)
    clf = KernelAttentionClassifier(kernel=kernel, bandwidth=0.6)
    base = clf.fit(X, y, sample_weight=w).predict_proba(Q)
    rotated = clone(clf).fit(X @ R, y, sample_weight=w).predict_proba(Q @ R)
    assert_allclose(rotated, base, rtol=1e-11, atol=1e-13)
    perm = np.random.default_rng(3).permutation(len(X))
    permuted = clone(clf).fit(X[perm], y[perm], sample_weight=w[perm])
    assert_allclose(permuted.predict_proba(Q), base, rtol=1e-12, atol=1e-14)


def test_constant_kernel_gives_the_weighted_priors(data):
    X, y, Q, w = data
    clf = KernelAttentionClassifier(kernel="constant", bandwidth=1e-6).fit(X, y, w)
    priors = np.average(onehot(y, clf.classes_), axis=0, weights=w)
    assert_allclose(clf.predict_proba(Q), np.tile(priors, (25, 1)), rtol=1e-13)
    assert get_tags(clf).classifier_tags.poor_score
    assert not get_tags(KernelAttentionClassifier()).classifier_tags.poor_score


@pytest.mark.parametrize("kernel", UNBOUNDED)
def test_huge_bandwidth_gives_the_weighted_priors(data, kernel):
    X, y, Q, w = data
    clf = KernelAttentionClassifier(kernel=kernel, bandwidth=1e12).fit(X, y, w)
    priors = np.average(onehot(y, clf.classes_), axis=0, weights=w)
    assert_allclose(clf.predict_proba(Q), np.tile(priors, (25, 1)), rtol=1e-9)


def test_tiny_gaussian_bandwidth_is_the_nearest_neighbour_classifier(data):
    X, y, _, _ = data
    Q = np.random.default_rng(2).uniform(-0.5, 1.5, size=(200, 3))
    clf = KernelAttentionClassifier(bandwidth=1e-4).fit(X, y)
    knn = KNeighborsClassifier(n_neighbors=1).fit(X, y)
    assert_allclose(clf.predict_proba(Q), knn.predict_proba(Q), atol=1e-12)
    assert_array_equal(clf.predict(Q), knn.predict(Q))


@pytest.mark.parametrize("algorithm", PATHS)
@pytest.mark.parametrize("n_features", [1, 2])
def test_boxcar_equals_radius_neighbors_classifier(algorithm, n_features):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, n_features))
    score = X.sum(axis=1) + 0.7 * rng.normal(size=300)
    y = np.array(["x", "y", "z"])[np.digitize(score, [-0.5, 0.5])]
    Q = rng.normal(size=(400, n_features))
    h = 0.3
    distances = cdist(Q, X)
    # The boxcar excludes a key at the radius and scikit-learn includes it:
    # the data have none there, and no empty neighbourhood either.
    assert np.abs(distances - h).min() > 1e-9
    Q = Q[(distances < h).any(axis=1)]
    assert len(Q) > 300
    ours = KernelAttentionClassifier(kernel="boxcar", bandwidth=h, algorithm=algorithm)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmptyNeighborhoodWarning)
        ours.fit(X, y)
        proba = ours.predict_proba(Q)
        pred = ours.predict(Q)
    theirs = RadiusNeighborsClassifier(radius=h, weights="uniform").fit(X, y)
    assert_array_equal(ours.classes_, theirs.classes_)
    assert_allclose(proba, theirs.predict_proba(Q), rtol=1e-14, atol=1e-15)
    assert_array_equal(pred, theirs.predict(Q))
    # Exact ties occur among such counts, and both break them alike.
    assert np.any(np.sort(proba, axis=1)[:, -1] == np.sort(proba, axis=1)[:, -2])


@pytest.mark.parametrize("kernel", COMPACT)
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
@pytest.mark.parametrize("n_features", [1, 3])
def test_every_path_gives_the_same_probabilities(data, kernel, on_empty, n_features):
    X, y, _, w = data
    X = X[:, :n_features]
    Q = np.random.default_rng(4).uniform(-0.3, 1.3, size=(80, n_features))
    results = {}
    for algorithm in [*PATHS, "auto"]:
        clf = KernelAttentionClassifier(
            kernel=kernel, bandwidth=0.25, on_empty=on_empty, algorithm=algorithm
        )
        clf.fit(X, y, sample_weight=w)
        results[algorithm] = quietly(clf.predict_proba, Q)
    for proba in results.values():
        assert_allclose(proba, results["brute"], rtol=1e-12, atol=1e-14)
    # Both the pooled and the fallback rows are compared.
    empty = (cdist(Q, X) >= 0.25).all(axis=1)
    assert 0 < empty.sum() < len(Q)


@pytest.mark.parametrize(
    "kernel, algorithm",
    [("gaussian", "brute"), ("cauchy", "brute")]
    + [("epanechnikov", path) for path in PATHS],
)
@pytest.mark.parametrize("on_empty", ["nearest", "mean"])
def test_attention_weights_pool_to_predict_proba(data, kernel, algorithm, on_empty):
    X, y, _, w = data
    w = w.copy()
    w[::7] = 0.0
    Q = np.random.default_rng(5).uniform(-0.5, 1.5, size=(50, 3))
    clf = KernelAttentionClassifier(
        kernel=kernel, bandwidth=0.3, on_empty=on_empty, algorithm=algorithm
    ).fit(X, y, sample_weight=w)
    weights = quietly(clf.attention_weights, Q)
    assert isinstance(weights, np.ndarray)
    assert weights.shape == (50, 40)
    assert np.all(weights >= 0)
    assert np.all(weights[:, w == 0] == 0)
    assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)
    proba = quietly(clf.predict_proba, Q)
    assert_allclose(weights @ clf.values_, proba, rtol=1e-12, atol=1e-14)
    # The weights are the kernel's, normalised, where a query has keys.
    alpha = np.vectorize(FORMULAS[kernel])(cdist(Q, X) / 0.3) * w
    inside = alpha.sum(axis=1) > 0
    expected = alpha[inside] / alpha[inside].sum(axis=1, keepdims=True)
    assert_allclose(weights[inside], expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "kernel, algorithm",
    [("gaussian", "brute")] + [("epanechnikov", path) for path in PATHS],
)
def test_sparse_attention_weights_equal_the_dense_ones(data, kernel, algorithm):
    X, y, _, w = data
    Q = np.random.default_rng(6).uniform(-0.5, 1.5, size=(50, 3))
    clf = KernelAttentionClassifier(kernel=kernel, bandwidth=0.3, algorithm=algorithm)
    clf.fit(X, y, sample_weight=w)
    dense = quietly(clf.attention_weights, Q)
    sparse = quietly(clf.attention_weights, Q, sparse=True)
    assert isinstance(sparse, csr_array)
    assert sparse.shape == (50, 40)
    assert sparse.nnz == np.count_nonzero(dense)
    assert_allclose(sparse.toarray(), dense, rtol=1e-12, atol=1e-14)
    proba = quietly(clf.predict_proba, Q)
    assert_allclose(sparse @ clf.values_, proba, rtol=1e-12, atol=1e-14)


def test_n_jobs_and_chunking_do_not_change_probabilities(data):
    X, y, _, w = data
    Q = np.random.default_rng(5).uniform(size=(500, 3))
    clf = KernelAttentionClassifier(kernel="epanechikov", bandwidth=0.6)
    base = clf.fit(X, y, sample_weight=w).predict_proba(Q)
    with config_context(working_memory=0.01):  # chunks of about 100 queries
        chunked = clf.predict_proba(Q)
        threaded = clone(clf).set_params(n_jobs=2).fit(X, y, w).predict_proba(Q)
    assert_array_equal(threaded, chunked)
    assert_allclose(chunked, base, rtol=1e-13, atol=1e-15)


def test_grid_search_on_two_moons():
    X, y = make_moons(400, noise=0.25, random_state=0)
    X_test, y_test = make_moons(400, noise=0.25, random_state=1)
    search = GridSearchCV(
        KernelAttentionClassifier(),
        {"bandwidth": [0.01, 0.03, 0.1, 0.3, 1.0, 3.0]},
        cv=KFold(5, shuffle=True, random_state=0),
        scoring="neg_log_loss",
    ).fit(X, y)
    assert search.best_params_["bandwidth"] in (0.1, 0.3)
    assert search.score(X_test, y_test) > -0.3
    assert search.best_estimator_.score(X_test, y_test) > 0.9


def test_fitted_attributes(data):
    X, y, _, w = data
    clf = KernelAttentionClassifier().fit(X, y)
    assert_array_equal(clf.keys_, X)
    assert_array_equal(clf.values_, onehot(y, ["a", "b", "c"]))
    assert clf.sample_weight_ is None
    assert clf.n_features_in_ == 3
    assert clf.algorithm_ == "brute"
    assert clf.bandwidth_ == 1.0
    assert_array_equal(clf.fit(X, y, sample_weight=w).sample_weight_, w)
    scott = KernelAttentionClassifier(bandwidth="scott").fit(X, y).bandwidth_
    assert_allclose(scott, X.std(axis=0) * 40 ** (-1 / 7), rtol=1e-14)


def test_clone_and_pickle_round_trip(data):
    X, y, Q, w = data
    clf = KernelAttentionClassifier(kernel="biweight", bandwidth=[0.5, 0.7, 0.9])
    clf.fit(X, y, sample_weight=w)
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict_proba(Q), clf.predict_proba(Q))
    assert_array_equal(restored.classes_, clf.classes_)
    cloned = clone(clf)
    assert cloned.get_params() == clf.get_params()
    assert not hasattr(cloned, "classes_")


def test_pandas_input(data):
    pd = pytest.importorskip("pandas")
    X, y, Q, _ = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    clf = KernelAttentionClassifier().fit(frame, pd.Series(y, dtype="category"))
    assert_array_equal(clf.feature_names_in_, ["a", "b", "c"])
    assert_array_equal(clf.classes_, ["a", "b", "c"])
    expected = KernelAttentionClassifier().fit(X, y).predict_proba(Q)
    got = clf.predict_proba(pd.DataFrame(Q, columns=["a", "b", "c"]))
    assert_allclose(got, expected, rtol=1e-15)


def test_attention_weights_of_a_model_without_rows_are_refused():
    da = pytest.importorskip("dask.array")
    X, y = make_moons(400, noise=0.2, random_state=0)
    X = X[:, :1]
    clf = KernelAttentionClassifier(algorithm="binned", bandwidth=0.2)
    clf.fit(da.from_array(X, chunks=(100, 1)), da.from_array(y, chunks=100))
    assert clf.keys_ is None
    with pytest.raises(ValueError, match="attention_weights needs the training rows"):
        clf.attention_weights(X[:3])


def test_attention_weights_refuse_queries_of_another_namespace():
    from _array_api import strict_namespace

    xp = strict_namespace()
    X, y = make_moons(60, noise=0.2, random_state=0)
    clf = KernelAttentionClassifier(bandwidth=0.5).fit(X, y)
    with config_context(array_api_dispatch=True):
        with pytest.raises(
            ValueError,
            match=r"KernelAttentionClassifier\.attention_weights\(\) must use the same",
        ):
            clf.attention_weights(xp.asarray(X[:3]))
