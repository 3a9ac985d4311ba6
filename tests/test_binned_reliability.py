"""The binned path where its grid cannot serve: grids too large for the
memory, grids too coarse for the width (an outlier stretching the default
grid, or a given n_bins that "auto" must check), and the binning error
promised by the default grid."""

import re
import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn import config_context

from sklearn_kernelpool import (
    CoarseGridWarning,
    KernelAttentionClassifierCV,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool._binned import _engine as _binned
from sklearn_kernelpool._binned import _grid
from sklearn_kernelpool._engine import _weight_rows as _weights
from sklearn_kernelpool.kernels import KERNELS

# A machine of 8 GiB, whatever this one holds: a limit of 2 GiB.
PHYSICAL = 8 * 2**30


@pytest.mark.parametrize("n_features, n_bins", [(1, 10**9), (2, 10**5)])
def test_huge_n_bins_is_refused_before_allocation(monkeypatch, n_features, n_bins):
    monkeypatch.setattr(_weights, "physical_memory", lambda: PHYSICAL)
    X = np.random.default_rng(0).uniform(0, 1, (200, n_features))
    est = KernelAttentionRegressor(algorithm="binned", bandwidth=0.1, n_bins=n_bins)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"n_bins=") as info:
            est.fit(X, X[:, 0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Refused before the grid is allocated.
    assert peak < 2**25
    message = str(info.value)
    needed = float(re.search(r"need ([\d.e+]+) GiB", message).group(1))
    assert needed > PHYSICAL / 4 / 2**30
    accepted = int(re.search(r"accepts 2 to (\d+) nodes", message).group(1))
    assert 64 < accepted < n_bins


def test_huge_n_bins_is_refused_on_dask_arrays(monkeypatch):
    da = pytest.importorskip("dask.array")
    monkeypatch.setattr(_weights, "physical_memory", lambda: PHYSICAL)
    X = np.random.default_rng(0).uniform(0, 1, (200, 1))
    est = KernelAttentionRegressor(algorithm="binned", bandwidth=0.1, n_bins=10**9)
    with pytest.raises(ValueError, match=r"n_bins=1000000000 asks .* GiB"):
        est.fit(da.from_array(X, chunks=50), da.from_array(X[:, 0], chunks=50))


@pytest.mark.parametrize(
    "n_features, n_bins, kernel, degree",
    [(1, 2**19, "gaussian", 0), (1, 2**19, "epanechnikov", 1), (2, 400, "cauchy", 1)],
)
def test_grid_bytes_bound_the_measured_peak(n_features, n_bins, kernel, degree):
    from sklearn_kernelpool._binned._grid import grid_bytes

    X = np.random.default_rng(0).uniform(0, 1, (500, n_features))
    est = KernelAttentionRegressor(
        algorithm="binned", bandwidth=0.2, kernel=kernel, degree=degree, n_bins=n_bins
    )
    tracemalloc.start()
    try:
        est.fit(X, X[:, 0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    grid = est._pool.binned.grid
    reach = _binned.truncation_radius(est._pool.kernel) * 0.2
    half = np.minimum(np.ceil(reach / grid.step), np.asarray(grid.shape) - 1)
    sizes = _binned.engine_sizes(n_features, 1, degree, squares=False)
    estimate = grid_bytes(grid.shape, half.astype(int), *sizes)
    # The estimate holds every array of the fit, and not much more.
    assert peak <= estimate <= 1.5 * peak


def test_default_and_small_grids_pass_under_a_small_memory(monkeypatch):
    monkeypatch.setattr(_weights, "physical_memory", lambda: 2**30)
    X = np.random.default_rng(0).uniform(0, 1, (500, 2))
    with config_context(working_memory=1):
        # The largest 1-D default grid (capped) and a small given 2-D one.
        for params in [
            {"n_bins": None, "kernel": "cauchy", "bandwidth": 1e-4, "degree": 1},
            {"n_bins": [160, 200], "bandwidth": [0.3, 0.6], "degree": 1},
        ]:
            keys = X[:, :1] if params["n_bins"] is None else X
            est = KernelAttentionRegressor(algorithm="binned", **params)
            est.fit(keys, X[:, 0]).predict(keys[:5], return_std=True)


def wide_keys(n=100_000, seed=0):
    """``n`` keys over [0, 10] (enough for "auto" to weigh the binned path)
    and a smooth function of them."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, (n, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=n)
    return X, y, rng.uniform(0, 10, (200, 1))


@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
def test_auto_checks_the_grid_of_the_given_n_bins(kernel):
    X, y, Q = wide_keys()
    # Half the node spacing of n_bins=1000: the grid cannot resolve it.
    h = 10 / 999 / 2
    auto = KernelAttentionRegressor(kernel=kernel, bandwidth=h, n_bins=1000).fit(X, y)
    assert auto.algorithm_ != "binned"
    brute = KernelAttentionRegressor(kernel=kernel, bandwidth=h, algorithm="brute")
    np.testing.assert_allclose(
        auto.predict(Q), brute.fit(X, y).predict(Q), rtol=1e-9, atol=1e-12
    )


def test_auto_bins_with_a_given_n_bins_finer_than_the_default():
    X, y, _ = wide_keys()
    h = 1e-3  # 13 nodes of the default grid, capped at 131072; 26 of 2**18
    default = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=h).fit(X, y)
    assert default.algorithm_ != "binned"
    finer = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=h, n_bins=2**18)
    assert finer.fit(X, y).algorithm_ == "binned"


def test_auto_on_dask_arrays_checks_the_given_n_bins():
    da = pytest.importorskip("dask.array")
    X, y, _ = wide_keys()
    est = KernelAttentionRegressor(bandwidth=10 / 999 / 2, n_bins=1000)
    with pytest.raises(ValueError, match="grid of n_bins resolves with fewer than 16"):
        est.fit(da.from_array(X, chunks=25_000), da.from_array(y, chunks=25_000))


def outlier_keys(n=5000, seed=0):
    """``n`` keys uniform in [0, 1] and one at 1e6, which stretches the
    default grid past its cap."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.uniform(0, 1, n), 1e6][:, None]
    y = np.sin(6 * X[:, 0])
    return X, y, np.linspace(0, 1, 7)[:, None]


def test_outlier_stretching_the_default_grid_warns_naming_n_bins():
    X, y, Q = outlier_keys()
    binned = KernelAttentionRegressor(bandwidth=0.05, algorithm="binned")
    with pytest.warns(CoarseGridWarning, match=r"n_bins=None.*larger n_bins") as info:
        binned.fit(X, y)
    (record,) = [w for w in info if w.category is CoarseGridWarning]
    assert record.message.n_bins == (_grid.MAX_BINS[1],)
    assert record.message.nodes_per_width < 0.01
    # What it warns of: the binned predictions are far from the exact ones.
    exact = KernelAttentionRegressor(bandwidth=0.05, algorithm="brute").fit(X, y)
    assert np.max(np.abs(binned.predict(Q) - exact.predict(Q))) > 0.5


def test_outlier_stretching_the_default_grid_warns_on_dask_arrays():
    da = pytest.importorskip("dask.array")
    X, y, _ = outlier_keys()
    est = KernelAttentionRegressor(bandwidth=0.05, algorithm="binned")
    with pytest.warns(CoarseGridWarning, match="n_bins"):
        est.fit(da.from_array(X, chunks=1000), da.from_array(y, chunks=1000))


def test_a_given_n_bins_too_coarse_for_the_width_warns_naming_it():
    # Half a node per width: off by 0.026 against the exact path, silently.
    X, y, Q = wide_keys(n=20_000)
    est = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.005, algorithm="binned", n_bins=1000
    )
    with pytest.warns(CoarseGridWarning, match=r"n_bins=1000 spaces") as info:
        est.fit(X, y)
    (record,) = info
    assert record.message.n_bins == (1000,)
    assert record.message.nodes_per_width < 1
    assert "Pass a larger n_bins" in str(record.message)


def test_a_given_n_bins_fine_enough_is_not_warned_of():
    X, y, _ = wide_keys(n=20_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = KernelAttentionRegressor(bandwidth=0.05, algorithm="binned", n_bins=2000)
        est.fit(X, y)


@pytest.mark.parametrize(
    "search", [KernelAttentionRegressorCV, KernelAttentionClassifierCV]
)
def test_outlier_stretching_the_binned_search_grid_warns_naming_n_bins(search):
    X, y, _ = outlier_keys()
    if search is KernelAttentionClassifierCV:
        y = (y > 0).astype(int)
    widths = np.geomspace(0.01, 0.2, 6)
    degree = {"degree": 0} if search is KernelAttentionRegressorCV else {}
    cv = search(bandwidths=widths, algorithm="binned", n_neighbors=None, **degree)
    # The search warns of its candidates, the refit of its width.
    with pytest.warns(CoarseGridWarning) as info:
        cv.fit(X, y)
    (record,) = [w for w in info if "scores the bandwidths" in str(w.message)]
    message = str(record.message)
    assert "n_bins is capped at 131072" in message
    assert "[0.01, 0.0182056, 0.0331445, 0.0603418, 0.109856, 0.2]" in message
    assert record.message.n_bins == (_grid.MAX_BINS[1],)


# The kernels of the documented binning error of the default grid: every
# registered one but the discontinuous boxcar (whose error falls as the
# spacing over the width).
PROMISED_KERNELS = sorted({k.name for k in KERNELS.values()} - {"boxcar"})


@pytest.fixture(scope="module")
def many_smooth_keys():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (200_000, 1))
    y = np.sin(3 * X[:, 0]) + X[:, 0] ** 2
    # Inside, and on and near the edges, where local-linear fits lean most
    # on the binned sums.
    Q = np.r_[rng.uniform(0, 1, 24), np.linspace(0, 0.05, 4), np.linspace(0.95, 1, 4)]
    return X, y, Q[:, None]


@pytest.mark.parametrize("kernel", PROMISED_KERNELS)
def test_default_grid_keeps_the_promised_binning_error(many_smooth_keys, kernel):
    X, y, Q = many_smooth_keys
    for degree in (0, 1):
        for h in (1 / 25, 1 / 4, 1.0):
            params = {"kernel": kernel, "bandwidth": h, "degree": degree}
            binned = KernelAttentionRegressor(algorithm="binned", **params).fit(X, y)
            exact = KernelAttentionRegressor(algorithm="brute", **params).fit(X, y)
            mb, sb = binned.predict(Q, return_std=True)
            me, se = exact.predict(Q, return_std=True)
            assert np.max(np.abs(mb - me)) < 1e-3 * y.std(), (degree, h)
            assert np.max(np.abs(sb**2 - se**2)) < 1e-3 * y.var(), (degree, h)
