"""Held-out rows computed in blocks (:mod:`sklearn_kernelpool._utils._row_blocks`,
the second stage of a large fit, in memory and as the tasks of a dask fit)
give every row bit for bit what one call gives on the dense, categorical and
adaptive engines, and within rounding on the neighbour lists (whose refits
of a batch of rows hold the union of their keys); the binned engine is
computed in one call."""

import contextlib

import numpy as np
import pytest

from sklearn_kernelpool import KernelAttentionClassifierCV, KernelAttentionRegressorCV
from sklearn_kernelpool._search._engines import neighbour_lists
from sklearn_kernelpool._search._quadratic_stage import without_quadratic_candidates
from sklearn_kernelpool._utils._row_blocks import BLOCK_ROWS, mapped_row_blocks

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning"),
]

N, TEST = 2400, 700


def _data(seed=0, categorical=False):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (N, 3))
    X[5] = [40.0, -40.0, 40.0]  # far from every key: exact distances in its tile
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2] + 0.1 * rng.standard_normal(N)
    if categorical:
        X = np.column_stack([X, rng.integers(0, 3, N)])
    weights = np.where(np.arange(N) % 9 == 0, 0.0, rng.uniform(0.5, 2.0, N))
    return X, y, weights


def _split():
    order = np.random.default_rng(1).permutation(N)
    return np.sort(order[TEST:]), np.sort(order[:TEST])


class _CheckingMapper:
    """Runs the blocks in turn, and asserts that together they equal one
    call of the function on all their rows: bit for bit, or to ``rtol``."""

    def __init__(self, rtol=0.0, atol=0.0):
        self.calls = 0
        self.rtol, self.atol = rtol, atol

    def __call__(self, function, shared, blocks):
        self.calls += 1
        parts = [function(shared, rows) for rows in blocks]
        whole = function(shared, np.concatenate(blocks))
        for i, array in enumerate(whole):
            joined = np.concatenate([part[i] for part in parts], axis=1)
            if self.rtol:
                np.testing.assert_allclose(
                    joined, array, rtol=self.rtol, atol=self.atol
                )
            else:
                np.testing.assert_array_equal(joined, array)
        return parts


CASES = {
    "gaussian-0": {"kernels": ("gaussian",), "degree": 0, "n_neighbors": None},
    "gaussian-1": {"kernels": ("gaussian",), "degree": 1, "n_neighbors": None},
    # The held-out local quadratics pool the moments of a batch of rows about
    # its centre: blocks of other rows equal one call to rounding.
    "gaussian-2": {"kernels": ("gaussian",), "degree": 2, "n_neighbors": None},
    "epanechnikov-lists": {"kernels": ("epanechnikov",), "n_neighbors": None},
    "adaptive": {"kernels": ("epanechnikov", "gaussian"), "n_neighbors": [10, 30]},
    "adaptive-lists": {"kernels": ("epanechnikov",), "n_neighbors": [10, 30]},
    "categorical": {"kernels": ("gaussian",), "categorical_features": [3]},
}


@pytest.mark.parametrize("case", list(CASES))
def test_blocks_of_held_out_rows_equal_one_call_bit_for_bit(case):
    params = dict(CASES[case])
    X, y, weights = _data(categorical="categorical_features" in params)
    rtol = 1e-9 if params.get("degree") == 2 else 1e-13 if "lists" in case else 0.0
    mapper = _CheckingMapper(rtol=rtol, atol=1e-12 if rtol == 1e-9 else 0.0)

    @contextlib.contextmanager
    def lists():
        # (the local quadratics of degree="auto" are the case "gaussian-2")
        with contextlib.ExitStack() as stack:
            stack.enter_context(without_quadratic_candidates())
            if "lists" in case:
                stack.enter_context(neighbour_lists())
            yield

    search = KernelAttentionRegressorCV(cv=[_split()], **params)
    with lists(), mapped_row_blocks(mapper):
        blocked = search.fit(X, y, sample_weight=weights)
    assert mapper.calls >= 1 and TEST > BLOCK_ROWS
    with lists():
        single = KernelAttentionRegressorCV(cv=[_split()], **params).fit(
            X, y, sample_weight=weights
        )
    np.testing.assert_allclose(
        blocked.cv_results_["mean_test_score"],
        single.cv_results_["mean_test_score"],
        rtol=rtol,
        atol=0,
    )


def test_the_classifier_blocks_equal_one_call():
    X, y, weights = _data(2)
    labels = (y > 0.3).astype(int)
    mapper = _CheckingMapper()
    with mapped_row_blocks(mapper):
        KernelAttentionClassifierCV(cv=[_split()], kernels=("gaussian",)).fit(
            X, labels, sample_weight=weights
        )
    assert mapper.calls >= 1


def test_the_binned_sums_are_computed_in_one_call():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (N, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(N)
    mapper = _CheckingMapper()
    with mapped_row_blocks(mapper):
        blocked = KernelAttentionRegressorCV(cv=[_split()], algorithm="binned").fit(
            X, y
        )
    assert mapper.calls == 0
    single = KernelAttentionRegressorCV(cv=[_split()], algorithm="binned").fit(X, y)
    np.testing.assert_array_equal(
        blocked.cv_results_["mean_test_score"], single.cv_results_["mean_test_score"]
    )
