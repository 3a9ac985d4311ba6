"""The binned path where its grid cannot serve: grids too large for the
memory, grids too coarse for the width, and the binning error promised by
the default grid."""

import re
import tracemalloc

import numpy as np
import pytest
from sklearn import config_context

from sklearn_kernelpool import KernelAttentionRegressor, _binned, _weights

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
    from sklearn_kernelpool._binned_grid import grid_bytes

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
        for params in [
            {"n_bins": None, "kernel": "cauchy", "bandwidth": 0.05, "degree": 1},
            {"n_bins": [64, 80], "bandwidth": [0.3, 0.6], "degree": 1},
        ]:
            est = KernelAttentionRegressor(algorithm="binned", **params).fit(X, X[:, 0])
            est.predict(X[:5], return_std=True)
