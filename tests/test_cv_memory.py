"""KernelAttentionRegressorCV.fit within working_memory on every route.

At n = 4000 an n x n float64 array is 122 MiB: a route that builds one (the
empty-neighbourhood fallbacks, the recomputation of underflowed rows) shows
far above the budget of 16 MiB.
"""

import warnings

import numpy as np
import pytest
from _memory import traced_peak
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.model_selection import ShuffleSplit

from sklearn_kernelpool import KernelAttentionRegressorCV
from sklearn_kernelpool._held_out._pool import HeldOut

N = 4000
WORKING_MEMORY = 16  # MiB
# Every route: the fallbacks of empty neighbourhoods (compact kernel at a
# width far below the spacing), the recomputation of rows whose gaussian
# weights underflow (1e-5), under leave-one-out, K-fold whose test sets
# partition the data, splits that do not, and degree 1.
SPLITS = ShuffleSplit(2, test_size=0.5, random_state=0)
ROUTES = {
    "loo-nearest": dict(kernels="epanechnikov", bandwidths=[1e-4, 0.05]),
    "loo-mean": dict(kernels="epanechnikov", bandwidths=[1e-4, 0.05], on_empty="mean"),
    "loo-underflow": dict(bandwidths=[1e-5, 0.1]),
    "loo-degree1": dict(
        kernels=["gaussian", "epanechnikov"], bandwidths=[1e-5, 0.1], degree=1
    ),
    "kfold-nearest": dict(kernels="epanechnikov", bandwidths=[1e-4, 0.05], cv=5),
    "kfold-mean": dict(
        kernels="epanechnikov", bandwidths=[1e-4, 0.05], cv=5, on_empty="mean"
    ),
    "kfold-underflow": dict(bandwidths=[1e-5, 0.1], cv=5),
    "kfold-degree1": dict(
        kernels=["gaussian", "epanechnikov"], bandwidths=[1e-5, 0.1], degree=1, cv=5
    ),
    "splits-nearest": dict(kernels="epanechnikov", bandwidths=[1e-4, 0.05], cv=SPLITS),
    "splits-mean": dict(
        kernels="epanechnikov", bandwidths=[1e-4, 0.05], cv=SPLITS, on_empty="mean"
    ),
    "splits-underflow": dict(bandwidths=[1e-5, 0.1], cv=SPLITS),
}


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, size=(n, 2))
    return X, np.sin(4 * X[:, 0]) + X[:, 1]


def _fit(params, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the refit's empty neighbourhoods
        return KernelAttentionRegressorCV(**params).fit(X, y)


# One route of each kind by default; every route with -m slow.
DEFAULT_ROUTES = ("loo-nearest", "kfold-degree1", "splits-mean")


@pytest.mark.parametrize(
    "route",
    [
        route
        if route in DEFAULT_ROUTES
        else pytest.param(route, marks=pytest.mark.slow)
        for route in ROUTES
    ],
)
def test_every_route_of_fit_stays_within_working_memory(route, monkeypatch):
    params = ROUTES[route]
    X, y = _data(N)
    recomputed = []
    shifted_sums = HeldOut._shifted_sums

    def spy(kernel, h, Q, *args):
        recomputed.append(len(Q))
        return shifted_sums(kernel, h, Q, *args)

    monkeypatch.setattr(HeldOut, "_shifted_sums", staticmethod(spy))
    reg, peak = traced_peak(lambda: _fit(params, X, y), WORKING_MEMORY)
    # The route is taken: every point falls back, or is recomputed.
    if "underflow" in route or "degree1" in route:
        assert sum(recomputed) >= N // 2
    if "underflow" not in route:
        assert reg.cv_results_["empty_fraction"].max() == 1
    n_candidates = len(reg.cv_results_["params"])
    # The budget, the pooled sums and predictions of the candidates (a few
    # hundred bytes per point and candidate), and 4 MiB of fixed costs.
    limit = WORKING_MEMORY * 2**20 + 256 * N * n_candidates + 4 * 2**20
    assert peak < limit, f"{route}: {peak / 2**20:.1f} MiB"


def test_per_feature_widths_stay_within_working_memory():
    X, y = _data(1000)
    params = dict(bandwidths=[0.1], per_feature=True)
    _, peak = traced_peak(lambda: _fit(params, X, y), 1)
    # Row blocks of the leave-one-out loss within the budget of 1 MiB (one
    # block of 4 MiB before), where a 1000 x 1000 float64 array is 7.6 MiB.
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("route", ROUTES)
def test_batches_do_not_change_the_scores(route):
    """Rows batched one at a time give the results of one batch."""
    X, y = _data(300, seed=1)
    params = ROUTES[route]
    whole = _fit(params, X, y)
    with config_context(working_memory=0.001):  # batches of one row
        batched = _fit(params, X, y)
    for key, value in whole.cv_results_.items():
        if key == "params" or value.dtype == object:
            assert_array_equal(batched.cv_results_[key], value, err_msg=key)
        else:  # to rounding: the products' shapes differ (and the batches of
            # the local quadratics' pooled moments, about their own centres)
            assert_allclose(
                batched.cv_results_[key], value, rtol=1e-12, atol=1e-15, err_msg=key
            )
    assert batched.best_params_ == whole.best_params_


def test_working_memory_may_be_infinite():
    X, y = _data(200)
    with config_context(working_memory=float("inf")):
        reg = _fit(ROUTES["loo-nearest"], X, y)
    assert reg.cv_results_["empty_fraction"][0] > 0
