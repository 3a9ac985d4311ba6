"""The binned path (algorithm="binned"): agreement with the exact engine on
smooth functions, the error falling with the grid, binning's additivity and
invariances, refusals and persistence."""

import pickle
import warnings

import numpy as np
import pytest
from _reference import FORMULAS, safeguarded_fit
from scipy import sparse
from sklearn import config_context

from sklearn_kernelpool import (
    CoarseGridWarning,
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._binned._binning import linear_bin, make_grid
from sklearn_kernelpool._binned._engine import (
    MIN_SQUARES,
    MIN_WEIGHT,
    fit_engine,
    truncation_radius,
)
from sklearn_kernelpool.kernels import KERNELS

# The documented bound: 1e-3 of the scale of y on smooth data for widths of
# at least 1/25 of the range, smooth kernels, degree 0 and 1.
TOLERANCE = 1e-3
SMOOTH_KERNELS = sorted({k.name for k in KERNELS.values()} - {"boxcar"})


def smooth_data(n, d, seed=0, n_outputs=None):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(3 * X.sum(axis=1)) + X[:, 0] ** 2
    if n_outputs is not None:
        y = np.column_stack([y * (j + 1) + j for j in range(n_outputs)])
    Q = rng.uniform(0, 1, (300, d))
    return X, y, Q


def compare(X, y, Q, **params):
    binned = KernelAttentionRegressor(algorithm="binned", **params).fit(X, y)
    exact = KernelAttentionRegressor(algorithm="brute", **params).fit(X, y)
    assert binned.algorithm_ == "binned"
    mb, sb = binned.predict(Q, return_std=True)
    me, se = exact.predict(Q, return_std=True)
    scale = np.std(y, axis=0)
    return (
        np.max(np.abs(mb - me) / scale),
        # The spread: its square (a difference of binned moments), relative
        # to the variance of y; its square root amplifies errors near zero.
        np.max(np.abs(sb**2 - se**2) / scale**2),
    )


@pytest.mark.parametrize(
    "kernel",
    [k if k in ("gaussian", "epanechnikov") else pytest.param(k, marks=pytest.mark.slow)
     for k in SMOOTH_KERNELS],
)  # fmt: skip
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("d", [1, 2])
def test_matches_exact_within_tolerance(kernel, degree, d):
    X, y, Q = smooth_data(3000 if d == 1 else 20000, d)
    error, std_error = compare(X, y, Q, kernel=kernel, bandwidth=1 / 25, degree=degree)
    assert error < TOLERANCE
    assert std_error < TOLERANCE


@pytest.mark.parametrize("degree", [0, 1])
def test_boundary_and_per_feature_widths(degree):
    X, y, _ = smooth_data(20000, 2, seed=1)
    # Queries on the edges and corners of the data.
    edge = np.array([[0, 0], [1, 1], [0, 1], [1, 0], [0, 0.5], [0.5, 1.0]])
    error, _ = compare(X, y, edge, bandwidth=[0.05, 0.1], degree=degree)
    assert error < TOLERANCE


def test_weights_and_multi_output():
    X, y, Q = smooth_data(2000, 1, n_outputs=3)
    w = np.random.default_rng(3).uniform(0.1, 3, len(X))
    binned = KernelAttentionRegressor(algorithm="binned", bandwidth=0.05, degree=1)
    exact = KernelAttentionRegressor(algorithm="brute", bandwidth=0.05, degree=1)
    mb = binned.fit(X, y, sample_weight=w).predict(Q)
    me = exact.fit(X, y, sample_weight=w).predict(Q)
    assert mb.shape == (len(Q), 3)
    assert np.max(np.abs(mb - me) / y.std(axis=0)) < TOLERANCE


# Coarse grids on purpose: the error of each is measured.
@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.CoarseGridWarning")
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("d", [1, 2])
def test_error_falls_with_the_grid(degree, d):
    """The binning error falls about as the square of the node spacing."""
    X, y, Q = smooth_data(2000, d, seed=2)
    exact = KernelAttentionRegressor(bandwidth=0.1, degree=degree).fit(X, y).predict(Q)
    errors = []
    sizes = [100, 200, 400] if d == 1 else [150, 300, 600]
    for n_bins in sizes:
        binned = KernelAttentionRegressor(
            algorithm="binned", bandwidth=0.1, degree=degree, n_bins=n_bins
        )
        errors.append(np.max(np.abs(binned.fit(X, y).predict(Q) - exact)))
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    # Doubling the nodes divides the error by about 4 (at least 2.5).
    assert np.all(ratios > 2.5), errors


def test_constant_kernel_is_the_weighted_mean():
    X, y, Q = smooth_data(500, 1)
    w = np.random.default_rng(0).uniform(0.5, 2, len(X))
    pred = KernelAttentionRegressor(kernel="constant", algorithm="binned")
    pred = pred.fit(X, y, sample_weight=w).predict(Q)
    np.testing.assert_allclose(pred, np.average(y, weights=w), rtol=1e-12)


def test_linear_bin_reference_and_additivity():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (101, 2))
    columns = rng.normal(size=(101, 3))
    grid = make_grid([-0.1, -0.2], [1.1, 1.2], [7, 9])
    binned = linear_bin(grid, X, columns)
    # A plain loop: each row spread over its four cell corners.
    expected = np.zeros((7, 9, 3))
    for x, c in zip(X, columns, strict=True):
        t = (x - grid.lower) / grid.step
        i, j = np.floor(t).astype(int)
        fx, fy = t - [i, j]
        expected[i, j] += (1 - fx) * (1 - fy) * c
        expected[i + 1, j] += fx * (1 - fy) * c
        expected[i, j + 1] += (1 - fx) * fy * c
        expected[i + 1, j + 1] += fx * fy * c
    np.testing.assert_allclose(binned, expected, atol=1e-13)
    halves = linear_bin(grid, X[:50], columns[:50]) + linear_bin(
        grid, X[50:], columns[50:]
    )
    np.testing.assert_allclose(halves, binned, rtol=1e-13, atol=1e-13)
    # The totals and the first moments are kept.
    np.testing.assert_allclose(binned.sum(axis=(0, 1)), columns.sum(axis=0))


def test_permutation_and_duplicated_rows():
    X, y, Q = smooth_data(400, 2)
    est = KernelAttentionRegressor(algorithm="binned", bandwidth=0.1, degree=1)
    base = est.fit(X, y).predict(Q)
    order = np.random.default_rng(1).permutation(len(X))
    np.testing.assert_allclose(est.fit(X[order], y[order]).predict(Q), base, rtol=1e-12)
    w = np.ones(len(X))
    w[:10] = 2
    doubled = est.fit(X, y, sample_weight=w).predict(Q)
    repeated = est.fit(np.vstack([X, X[:10]]), np.r_[y, y[:10]]).predict(Q)
    np.testing.assert_allclose(doubled, repeated, rtol=1e-10)


@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
def test_on_empty_policies_match_exact(on_empty):
    X = np.r_[np.linspace(0, 1, 200), np.linspace(3, 4, 200)][:, None]
    y = np.sin(X[:, 0])
    Q = np.array([[0.5], [2.0], [3.5], [10.0]])
    params = dict(kernel="epanechnikov", bandwidth=0.2, on_empty=on_empty)
    with pytest.warns(Warning):
        binned = KernelAttentionRegressor(algorithm="binned", **params).fit(X, y)
        pb = binned.predict(Q)
    with pytest.warns(Warning):
        pe = KernelAttentionRegressor(algorithm="brute", **params).fit(X, y).predict(Q)
    np.testing.assert_allclose(pb[[1, 3]], pe[[1, 3]])
    np.testing.assert_allclose(pb, pe, atol=1e-3)


def test_on_empty_raise():
    X = np.linspace(0, 1, 100)[:, None]
    est = KernelAttentionRegressor(
        kernel="biweight", bandwidth=0.1, on_empty="raise", algorithm="binned"
    ).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="on_empty='raise'"):
        est.predict([[5.0]])


def test_classifier_probabilities():
    X, y, Q = smooth_data(2000, 2)
    labels = np.digitize(y, [0.5, 1.0])
    binned = KernelAttentionClassifier(algorithm="binned", bandwidth=0.08)
    exact = KernelAttentionClassifier(algorithm="brute", bandwidth=0.08)
    pb = binned.fit(X, labels).predict_proba(Q)
    pe = exact.fit(X, labels).predict_proba(Q)
    np.testing.assert_allclose(pb.sum(axis=1), 1.0)
    assert np.max(np.abs(pb - pe)) < TOLERANCE
    assert binned.algorithm_ == "binned"


def test_per_key_methods_use_the_exact_engine():
    X, y, Q = smooth_data(300, 1)
    binned = KernelAttentionRegressor(algorithm="binned", bandwidth=0.1).fit(X, y)
    exact = KernelAttentionRegressor(algorithm="brute", bandwidth=0.1).fit(X, y)
    np.testing.assert_allclose(
        binned.attention_weights(Q[:5]), exact.attention_weights(Q[:5])
    )
    np.testing.assert_allclose(
        binned.predict(Q[:5], return_se=True)[1],
        exact.predict(Q[:5], return_se=True)[1],
        rtol=1e-10,
    )


@pytest.mark.parametrize(
    "params, X, match",
    [
        (dict(kernel=lambda x: np.exp(-x)), np.ones((10, 1)), "user-defined kernel"),
        (dict(n_neighbors=3), np.ones((10, 1)), "n_neighbors"),
        ({}, np.ones((10, 3)), "3 features"),
        (dict(categorical_features=[1]), np.ones((10, 2)), "categorical"),
    ],
)
def test_refusals(params, X, match):
    X = X + np.arange(len(X))[:, None]
    est = KernelAttentionRegressor(algorithm="binned", **params)
    with pytest.raises(ValueError, match=match):
        est.fit(X, np.arange(len(X), dtype=float))


def test_refuses_sparse_and_bad_n_bins():
    X = sparse.csr_array(np.eye(10)[:, :2])
    with pytest.raises(ValueError, match="sparse X"):
        KernelAttentionRegressor(algorithm="binned").fit(X, np.arange(10.0))
    X = np.random.default_rng(0).uniform(size=(20, 2))
    with pytest.raises(ValueError, match="n_bins"):
        KernelAttentionRegressor(algorithm="binned", n_bins=[10, 10, 10]).fit(
            X, X[:, 0]
        )
    with pytest.raises(ValueError, match="n_bins"):
        KernelAttentionRegressor(algorithm="binned", n_bins=[10, 1]).fit(X, X[:, 0])


@pytest.mark.parametrize("degree", [0, 1])
def test_sparse_queries_predict_as_dense(degree):
    # Sparse queries are made dense a chunk at a time; those outside the
    # grid go to the exact engine as sparse rows.
    X, y, Q = smooth_data(2000, 2)
    Q = np.vstack([Q, [[5.0, 5.0], [-3.0, 0.5]]])
    params = dict(algorithm="binned", bandwidth=0.1, degree=degree)
    est = KernelAttentionRegressor(**params).fit(X, y)
    labels = np.digitize(y, [0.5, 1.0])
    clf = KernelAttentionClassifier(algorithm="binned", bandwidth=0.1)
    clf.fit(X, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        expected = est.predict(Q, return_std=True)
        proba = clf.predict_proba(Q)
        for to_sparse in (sparse.csr_array, sparse.csc_matrix):
            got = est.predict(to_sparse(Q), return_std=True)
            np.testing.assert_array_equal(got, expected)
            np.testing.assert_array_equal(clf.predict_proba(to_sparse(Q)), proba)
    assert np.all(np.isfinite(expected))


@pytest.mark.parametrize("degree", [0, 1])
def test_predictions_do_not_depend_on_the_chunks(degree):
    # Chunks of a few queries (working_memory of 10 KiB) and one chunk of
    # all of them give the same bits, the exact engine's queries included.
    X, y, _ = smooth_data(3000, 2, n_outputs=2)
    Q = np.random.default_rng(1).uniform(-0.3, 1.3, (3000, 2))
    est = KernelAttentionRegressor(algorithm="binned", bandwidth=0.08, degree=degree)
    est.fit(X.astype(np.float32), y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        with config_context(working_memory=0.01):
            small = est.predict(Q, return_std=True)
        with config_context(working_memory=float("inf")):
            whole = est.predict(Q, return_std=True)
    assert small[0].dtype == np.float32
    np.testing.assert_array_equal(small, whole)


def test_pickle_round_trip():
    X, y, Q = smooth_data(500, 2)
    est = KernelAttentionRegressor(algorithm="binned", bandwidth=0.1, n_bins=50)
    with pytest.warns(CoarseGridWarning, match="n_bins=50"):
        est.fit(X, y)
    # Loading rebuilds the grid without warning of it again.
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(Q), est.predict(Q))
    assert loaded.algorithm_ == "binned"


def test_auto_keeps_small_data_and_narrow_widths_exact():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (5000, 1))
    assert KernelAttentionRegressor(bandwidth=0.05).fit(X, X[:, 0]).algorithm_ == (
        "brute"
    )
    X = rng.uniform(0, 1, (100_000, 1))
    y = X[:, 0]
    assert KernelAttentionRegressor(bandwidth=0.05).fit(X, y).algorithm_ == "binned"
    # Too narrow for the largest default grid: the exact tree path.
    narrow = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=1e-5)
    assert narrow.fit(X, y).algorithm_ == "kd_tree"
    X3 = rng.uniform(0, 1, (100_000, 3))
    assert KernelAttentionRegressor(bandwidth=0.05).fit(X3, y).algorithm_ != "binned"


def test_engine_from_grid_sums_matches_fit():
    X, y, Q = smooth_data(1000, 1)
    kernel = KERNELS["gaussian"]
    engine = fit_engine(X, y[:, None], np.ones(len(X)), kernel, 0.1, 1)
    assert truncation_radius(kernel) == pytest.approx(np.sqrt(2 * np.log(1e12)))
    mean, _, doubtful = engine.predict(Q)
    assert not doubtful.any()
    exact = KernelAttentionRegressor(bandwidth=0.1, degree=1).fit(X, y).predict(Q)
    assert np.max(np.abs(mean[:, 0] - exact)) < TOLERANCE


@pytest.mark.parametrize("degree", [0, 1])
def test_real_data_matches_exact(degree):
    """Engel's food expenditure against income (statsmodels), and two
    diabetes features (scikit-learn): binned and exact agree within the
    documented tolerance at a width of 1/10 of the range."""
    from sklearn.datasets import load_diabetes

    engel = pytest.importorskip("statsmodels.datasets.engel").load_pandas().data
    X1 = engel[["income"]].to_numpy()
    y1 = engel["foodexp"].to_numpy()
    diabetes = load_diabetes()
    X2, y2 = diabetes.data[:, [2, 3]], diabetes.target
    for X, y in [(X1, y1), (X2, y2)]:
        h = np.ptp(X, axis=0) / 10
        error, _ = compare(X, y, X, bandwidth=h, degree=degree)
        assert error < TOLERANCE


def test_queries_whose_binned_squares_are_rounding_are_exact():
    """The safeguard of degree=1 reads Kish's n_eff from the binned sums of
    the squared weights. Beyond the keys they fall below the FFT's rounding
    before the weights do (4.75 to 5.5 widths from the last key of the
    gaussian here, where the squares are 6e-13 to 2e-16 of their total and
    the weights still 1e-7 to 2e-9 of theirs): those queries are left to the
    exact engine, and follow the rule (the reference)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (2000, 1))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=2000)
    w = rng.uniform(0.5, 2.0, 2000)
    h = 0.05
    reg = KernelAttentionRegressor(bandwidth=h, degree=1, algorithm="binned")
    reg.fit(X, y, sample_weight=w)
    engine = reg._pool.binned
    Q = X.max() + h * np.array([[4.0], [4.5], [4.75], [5.0], [5.25], [5.5]])
    sums, inside, squares = engine.kernel_sums(Q, return_squares=True)
    thin = squares <= MIN_SQUARES * engine.total_squares
    assert inside.all() and np.all(sums[:, -1] > MIN_WEIGHT * engine.total)
    assert thin.tolist() == [False, False, True, True, True, True]
    _, _, doubtful = engine.predict(Q)
    assert doubtful.tolist() == thin.tolist()
    expected = safeguarded_fit(
        X, y, Q, FORMULAS["gaussian"], h, w, log_alpha=lambda u: -(u**2) / 2
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        mean = reg.predict(Q)
    np.testing.assert_allclose(mean[thin], expected["mean"][thin, 0], rtol=1e-9)
    # The binned ones, from sums of squares above the rounding, to the
    # binning error.
    np.testing.assert_allclose(mean[~thin], expected["mean"][~thin, 0], atol=1e-3)
