"""The search takes the neighbour lists of compact kernels on large tables
(and within ``neighbour_lists()``), and they give the answers of the dense
pass: the same scores to rounding and the same selection."""

import threading

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import KernelAttentionClassifierCV, KernelAttentionRegressorCV
from sklearn_kernelpool._held_out._neighbours import NeighbourHeldOut
from sklearn_kernelpool._held_out._neighbours_adaptive import (
    NeighbourAdaptiveHeldOut,
)
from sklearn_kernelpool._search import _engines
from sklearn_kernelpool._search._engines import (
    SPARSE_MIN_ROWS,
    neighbour_lists,
    split_grid,
    takes_neighbour_lists,
)
from sklearn_kernelpool.kernels import KERNELS

COMPACT = sorted({k.name for k in KERNELS.values() if k.is_compact})


def _data(n, d=3, seed=0, zeros=0):
    """Points uniform in a cube, a smooth function and noise, and sample
    weights of which ``zeros`` are zero (None without)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, (n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + rng.normal(0.0, 0.1, n)
    if not zeros:
        return X, y, None
    w = rng.uniform(0.5, 2.0, n)
    w[rng.choice(n, zeros, replace=False)] = 0.0
    return X, y, w


class _Spy:
    """Count the passes of the neighbour engines."""

    def __init__(self, monkeypatch):
        self.calls = {NeighbourHeldOut: 0, NeighbourAdaptiveHeldOut: 0}
        for cls in self.calls:
            for name in ("sums_excluding_groups", "sums_split"):
                monkeypatch.setattr(cls, name, self._counted(cls, getattr(cls, name)))

    def _counted(self, cls, method):
        def counted(*args, **kwargs):
            self.calls[cls] += 1
            return method(*args, **kwargs)

        return counted


def _assert_same_search(monkeypatch, make, X, y, w=None, engines=None):
    """The search within ``neighbour_lists()`` gives the numeric
    ``cv_results_`` of the search outside it to 1e-10 and the same
    selection; within it, it takes the neighbour ``engines`` (both by
    default), outside it neither."""
    engines = engines or (NeighbourHeldOut, NeighbourAdaptiveHeldOut)
    spy = _Spy(monkeypatch)
    dense = make().fit(X, y, sample_weight=w)
    assert sum(spy.calls.values()) == 0
    with neighbour_lists():
        sparse = make().fit(X, y, sample_weight=w)
    assert all(spy.calls[engine] > 0 for engine in engines), spy.calls
    assert dense.best_params_ == sparse.best_params_
    assert dense.cv_results_.keys() == sparse.cv_results_.keys()
    for key, expected in dense.cv_results_.items():
        got = sparse.cv_results_[key]
        if key == "params":
            assert got == expected
        elif np.asarray(expected).dtype == object:
            assert_array_equal(got, expected)
        else:
            assert_allclose(got, expected, rtol=1e-10, atol=1e-13, err_msg=key)


def _regressor(kernel, **params):
    return lambda: KernelAttentionRegressorCV(
        kernels=(kernel,), bandwidths=8, linear_features=None, **params
    )


@pytest.mark.parametrize("kernel", COMPACT)
def test_every_compact_kernel_scores_as_the_dense_pass(monkeypatch, kernel):
    X, y, w = _data(250, zeros=25)
    make = lambda: KernelAttentionRegressorCV(  # noqa: E731
        kernels=(kernel,),
        bandwidths=[0.05, 0.1, 0.2, 0.5, 1.0, 2.0],
        n_neighbors=[5, 20],
        linear_features=None,
    )
    _assert_same_search(monkeypatch, make, X, y, w)


@pytest.mark.parametrize("cv", [None, 5])
@pytest.mark.parametrize("degree", [0, 1])
def test_fixed_and_adaptive_widths_score_as_the_dense_pass(monkeypatch, degree, cv):
    X, y, w = _data(400, zeros=40, seed=1)
    make = _regressor("epanechnikov", degree=degree, cv=cv, n_neighbors=[5, 10, 30])
    _assert_same_search(monkeypatch, make, X, y, w)


@pytest.mark.parametrize("scoring", ["gcv", "aicc"])
def test_in_sample_criteria_equal_the_dense_pass(monkeypatch, scoring):
    X, y, _ = _data(300, seed=2)
    make = _regressor("tricube", degree=1, scoring=scoring, n_neighbors=[10, 40])
    _assert_same_search(monkeypatch, make, X, y)


@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
def test_empty_neighbourhoods_fall_back_as_in_the_dense_pass(monkeypatch, on_empty):
    X, y, _ = _data(300, d=2, seed=3)
    X[:5] += 10.0  # far from every other point: empty at every width
    make = lambda: KernelAttentionRegressorCV(  # noqa: E731
        kernels=("boxcar",),
        bandwidths=[0.05, 0.1, 0.2, 0.4, 30.0],
        degree=0,
        n_neighbors=None,
        on_empty=on_empty,
        linear_features=None,
    )
    _assert_same_search(monkeypatch, make, X, y, engines=[NeighbourHeldOut])


def test_the_default_kernels_score_as_the_dense_pass(monkeypatch):
    # Gaussian candidates stay dense, the adaptive epanechnikov ones move.
    X, y, _ = _data(300, seed=4)
    make = lambda: KernelAttentionRegressorCV(  # noqa: E731
        kernels=("gaussian", "epanechnikov", "boxcar"), bandwidths=6
    )
    _assert_same_search(monkeypatch, make, X, y, engines=[NeighbourAdaptiveHeldOut])


@pytest.mark.parametrize("cv", [None, 3])
def test_the_classifier_scores_as_the_dense_pass(monkeypatch, cv):
    X, _, _ = _data(300, seed=5)
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, "a", "b")
    make = lambda: KernelAttentionClassifierCV(  # noqa: E731
        kernels=("epanechnikov",), bandwidths=8, n_neighbors=[10, 30], cv=cv
    )
    _assert_same_search(monkeypatch, make, X, y)


@pytest.mark.slow
@pytest.mark.parametrize("cv", [None, 5])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("n_neighbors", [None, "auto"])
@pytest.mark.parametrize("kernel", COMPACT)
def test_full_matrix_scores_as_the_dense_pass(
    monkeypatch, kernel, n_neighbors, degree, cv
):
    X, y, w = _data(600, d=2, seed=6, zeros=60)
    make = _regressor(kernel, degree=degree, cv=cv, n_neighbors=n_neighbors)
    engines = [NeighbourHeldOut] + [NeighbourAdaptiveHeldOut] * bool(n_neighbors)
    _assert_same_search(monkeypatch, make, X, y, w, engines)


def test_the_engines_are_taken_within_the_block_only(monkeypatch):
    spy = _Spy(monkeypatch)
    X, y, _ = _data(300, seed=7)
    make = _regressor("epanechnikov", n_neighbors=[5, 10])
    make().fit(X, y)
    assert spy.calls == {NeighbourHeldOut: 0, NeighbourAdaptiveHeldOut: 0}
    with neighbour_lists():
        make().fit(X, y)
    assert spy.calls[NeighbourHeldOut] > 0
    assert spy.calls[NeighbourAdaptiveHeldOut] > 0


def test_the_threshold_counts_rows_of_positive_weight(monkeypatch):
    spy = _Spy(monkeypatch)
    X, y, w = _data(300, seed=8, zeros=50)
    make = _regressor("epanechnikov", n_neighbors=[5])
    with neighbour_lists(min_rows=251):
        make().fit(X, y, sample_weight=w)
    assert sum(spy.calls.values()) == 0
    with neighbour_lists(min_rows=250):
        make().fit(X, y, sample_weight=w)
    assert spy.calls[NeighbourAdaptiveHeldOut] > 0


def test_the_threshold_and_its_block():
    assert takes_neighbour_lists(SPARSE_MIN_ROWS)
    assert not takes_neighbour_lists(SPARSE_MIN_ROWS - 1)
    seen = []
    with neighbour_lists(4000):
        assert takes_neighbour_lists(4000) and not takes_neighbour_lists(3999)
        # Another thread's searches keep the default threshold.
        thread = threading.Thread(
            target=lambda: seen.append(takes_neighbour_lists(4000))
        )
        thread.start()
        thread.join()
        with neighbour_lists():
            assert takes_neighbour_lists(2)
        assert not takes_neighbour_lists(3999)
    assert seen == [False]
    assert not takes_neighbour_lists(4000)


def test_split_grid_takes_the_narrow_widths_of_compact_kernels():
    rng = np.random.default_rng(9)
    keys = rng.uniform(-1.0, 1.0, (5000, 2))
    grid = np.geomspace(0.01, 4.0, 12)[::-1]
    epanechnikov, gaussian = KERNELS["epanechnikov"], KERNELS["gaussian"]
    take = split_grid(keys, [epanechnikov], grid)
    # The narrowest widths, and not those whose supports hold most keys.
    assert take[-1] and not take[0]
    assert_array_equal(take, grid <= grid[take].max())
    assert not split_grid(keys, [epanechnikov, gaussian], grid).any()
    # Every width narrow: no dense pass at all.
    assert split_grid(keys, [epanechnikov], grid / 1000).all()


def test_key_fractions_count_the_keys_within_reach():
    rng = np.random.default_rng(10)
    keys = rng.uniform(-1.0, 1.0, (400, 2))
    reaches = np.array([0.1, 0.5, 3.0])
    d2 = ((keys[:, None] - keys[None]) ** 2).sum(axis=-1)
    probes = np.linspace(0, 399, 256).astype(np.intp)
    expected = [(d2[probes] < r * r).mean() for r in reaches]
    assert_allclose(_engines.key_fractions(keys, reaches), expected)
