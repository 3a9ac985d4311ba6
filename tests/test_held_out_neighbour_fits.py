"""The refits, fallbacks and memory rule of the neighbour engines take the
neighbour lists, and give the answers of the dense engines."""

import numpy as np
import pytest
from _memory import traced_peak
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context

from sklearn_kernelpool._held_out import _base, _sums
from sklearn_kernelpool._held_out._adaptive import AdaptiveHeldOut
from sklearn_kernelpool._held_out._fits import HeldOutFits, allowed_keys
from sklearn_kernelpool._held_out._neighbours import NeighbourHeldOut
from sklearn_kernelpool._held_out._neighbours_adaptive import (
    NeighbourAdaptiveHeldOut,
)
from sklearn_kernelpool._held_out._pool import HeldOut
from sklearn_kernelpool.kernels import KERNELS

KERNELS_USED = [KERNELS["epanechnikov"], KERNELS["boxcar"]]


def _lattice(seed=0):
    """Keys on a fine lattice far from the origin (a row's neighbours are
    symmetric about it: its moments about the global centres cancel at
    degree 1) and one key far from every other (empty at narrow widths)."""
    g = np.arange(20.0)
    X = np.array(np.meshgrid(g, g)).reshape(2, -1).T * 1e-4 + [1e3, -2e3]
    X[-1] = [1e3 + 1.0, -2e3]
    rng = np.random.default_rng(seed)
    Y = np.c_[np.sin(X[:, 0] * 1e4 / 3), X[:, 1]] + rng.normal(0, 0.1, (len(X), 2))
    w = rng.uniform(0.5, 2.0, len(X))
    w[rng.choice(len(X), 20, replace=False)] = 0.0
    return X, Y, w


def _folds(n):
    return np.random.default_rng(1).permutation(np.arange(n) % 4)


def _count(monkeypatch, engine, name):
    """Count the rows that ``engine.name`` is asked for."""
    calls = []
    method = getattr(engine, name)

    def counted(candidate, points, *args):
        calls.append(len(points))
        return method(candidate, points, *args)

    monkeypatch.setattr(engine, name, counted)
    return calls


def _refuse_dense(monkeypatch):
    """The dense refits and fallback scan every key: refuse them."""

    def refuse(*args, **kwargs):
        raise AssertionError("a dense row over every key")

    for cls, name in [
        (HeldOutFits, "_refit_scores"),
        (HeldOutFits, "_full_weights"),
        (AdaptiveHeldOut, "_refit_scores"),
        (AdaptiveHeldOut, "_full_weights"),
    ]:
        monkeypatch.setattr(cls, name, refuse)
    monkeypatch.setattr(_base, "squared_distances", refuse)


def _assert_fits_equal(got, expected):
    """Predictions (and self weights) to 1e-10, flags equal."""
    for values, reference in zip(got, expected, strict=True):
        if values.dtype == bool:
            assert_array_equal(values, reference)
        else:
            assert_allclose(values, reference, rtol=1e-10, atol=1e-10)


def _held_out_fits(engine, cv, n):
    """Predictions of leave-one-out (and the in-sample fits), K-fold or a
    split of the lattice."""
    if cv == "split":
        test, train = np.arange(0, n, 3), np.setdiff1d(np.arange(n), np.arange(0, n, 3))
        return [engine.predictions(engine.sums_split(test, train), test, train=train)]
    groups = None if cv == "loo" else _folds(n)
    if isinstance(engine, AdaptiveHeldOut):
        sums = engine.sums_excluding_groups(groups, in_sample=cv == "loo")
    else:
        sums = engine.sums_excluding_groups(groups)
    fits = [engine.predictions(sums, np.arange(n), groups)]
    return fits + ([engine.in_sample(sums)] if cv == "loo" else [])


@pytest.mark.parametrize("cv", ["loo", "kfold", "split"])
def test_refits_of_cancelling_rows_take_the_neighbour_lists(monkeypatch, cv):
    X, Y, w = _lattice()
    widths = np.array([1.5e-4, 2.5e-4])
    expected = _held_out_fits(HeldOut(X, Y, w, KERNELS_USED, widths, degree=1), cv, 400)
    sparse = NeighbourHeldOut(X, Y, w, KERNELS_USED, widths, degree=1)
    refits = _count(monkeypatch, sparse, "_refit_weights")
    in_sample = _count(monkeypatch, sparse, "_full_weights_of_keys")
    _refuse_dense(monkeypatch)
    got = _held_out_fits(sparse, cv, 400)
    assert sum(refits) > 10  # the path is taken
    assert cv != "loo" or sum(in_sample) > 10
    for fits, reference in zip(got, expected, strict=True):
        _assert_fits_equal(fits, reference)


@pytest.mark.parametrize("cv", ["loo", "kfold", "split"])
def test_adaptive_refits_of_cancelling_rows_take_the_neighbour_lists(monkeypatch, cv):
    X, Y, w = _lattice(seed=2)
    held = HeldOut(X, Y, w, KERNELS_USED, np.empty(0), degree=1)
    expected = _held_out_fits(AdaptiveHeldOut(held, [4, 9]), cv, 400)
    sparse = NeighbourAdaptiveHeldOut(held, [4, 9])
    refits = _count(monkeypatch, sparse, "_refit_weights")
    in_sample = _count(monkeypatch, sparse, "_full_weights_of_keys")
    _refuse_dense(monkeypatch)
    got = _held_out_fits(sparse, cv, 400)
    assert sum(refits) > 10
    assert cv != "loo" or sum(in_sample) > 10
    for fits, reference in zip(got, expected, strict=True):
        _assert_fits_equal(fits, reference)


@pytest.mark.parametrize("adaptive", [False, True])
def test_nearest_fallback_is_the_dense_one_from_a_tree(monkeypatch, adaptive):
    # The far key is empty at narrow widths; the lattice holds many keys
    # tied at the nearest distance (averaged), some of weight zero, some
    # not allowed (their own, another fold's).
    X, Y, w = _lattice(seed=3)
    n = len(X)
    dense = HeldOut(X, Y, w, KERNELS_USED, [1.5e-4], degree=1)
    sparse = NeighbourHeldOut(X, Y, w, KERNELS_USED, [1.5e-4], degree=1)
    if adaptive:
        dense, sparse = (
            AdaptiveHeldOut(dense, [3]),
            NeighbourAdaptiveHeldOut(sparse, [3]),
        )
    empty = dense.predictions(dense.sums_excluding_groups(None), np.arange(n))[1]
    assert empty[:, :, n - 1].all() != adaptive  # the far key is empty
    queries = np.r_[n - 1, np.arange(0, n, 7)]
    masks = [allowed_keys(queries, n), allowed_keys(queries, n, _folds(n))]
    expected = [dense.nearest_values(queries, allowed) for allowed in masks]
    _refuse_dense(monkeypatch)
    for allowed, reference in zip(masks, expected, strict=True):
        assert_allclose(
            sparse.nearest_values(queries, allowed), reference, rtol=1e-12, atol=1e-12
        )


def test_memory_rule_is_that_of_the_neighbour_pass(monkeypatch):
    # Sums of 2,000 points, 3 widths, degree 1: 0.58 MB; the dense pass
    # holds three copies (1.58 MB). A limit of 1.5 MB refuses the dense
    # pass and takes the neighbour pass, which stays within it.
    rng = np.random.default_rng(4)
    X, Y = rng.uniform(0, 1, (2000, 2)), rng.normal(size=(2000, 1))
    w, kernels, widths = np.ones(2000), [KERNELS["epanechnikov"]], [0.01, 0.02, 0.03]
    limit = 1.5e6
    monkeypatch.setattr(_sums, "physical_memory", lambda: limit)
    with pytest.raises(MemoryError, match="held-out sums of 2000 points"):
        HeldOut(X, Y, w, kernels, widths, degree=1)
    with config_context(working_memory=0.25):
        sparse = NeighbourHeldOut(X, Y, w, kernels, widths, degree=1)
        assert sparse.sums_bytes(2000, None) <= limit
    sums, peak = traced_peak(lambda: sparse.sums_excluding_groups(None), 0.25)
    assert peak <= limit
    monkeypatch.setattr(_sums, "physical_memory", lambda: 2**30)
    expected = HeldOut(X, Y, w, kernels, widths, degree=1).sums_excluding_groups(None)
    assert_allclose(sums.moments, expected.moments, rtol=1e-10, atol=1e-10)
    # Beyond the limit, the neighbour engines refuse too.
    monkeypatch.setattr(_sums, "physical_memory", lambda: 2**18)
    with pytest.raises(MemoryError):
        NeighbourHeldOut(X, Y, w, kernels, widths, degree=1)
    # The adaptive engine counts its candidates and in-sample sums.
    monkeypatch.setattr(_sums, "physical_memory", lambda: limit)
    with config_context(working_memory=0.25):
        held = NeighbourHeldOut(X, Y, w, kernels, [], degree=1)
        NeighbourAdaptiveHeldOut(held, [5, 10])
        with pytest.raises(MemoryError):
            NeighbourAdaptiveHeldOut(held, [5, 10, 20, 40, 80])
