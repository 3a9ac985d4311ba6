"""Every public path stays within ``working_memory`` plus its output.

Each path of ``_memory.MEMORY_PATHS`` runs under ``working_memory=16`` (MiB)
at a size where an ``n x n`` (or queries x keys) float64 array would take
far more: 4000 samples (n x n: 122 MiB) and 2000 queries (2000 x 4000:
61 MiB). The trees' adversarial data (keys piled at one point, queries
sorted by density) take 20000 keys, at which a chunk sized by the
neighbour count ``fit`` expects meets several times as many; so do the
``fit`` paths, whose neighbourhood estimate probes up to 8192 keys. The
peak that ``tracemalloc`` traces must stay within ``_memory.memory_budget``:
``working_memory + output + 4 MiB + 4 x inputs``, plus, for the CV,
``4 x 8 bytes x n x n_candidates x n_columns`` (the pooled moments of every
held-out point and candidate: 2 columns for degree 0, 10 for degree 1 on
two features).

The binned path's ``predict`` may hold no copy of its queries: ten times
the queries grow its peak by the output's growth alone (1e5 against 1e6
queries; 1e6 against 1e7 with ``-m slow``), and its chunks keep to
``working_memory`` whatever the dtype, outputs and format of the queries.
"""

import numpy as np
import pytest
from _memory import MEMORY_PATHS, measure, memory_budget, output_bytes, traced_peak
from scipy import sparse as sp

from sklearn_kernelpool import KernelAttentionRegressor

WORKING_MEMORY = 16  # MiB
MIB = 2**20


def _sizes(name):
    # fit's neighbourhood estimate probes up to 8192 keys: n = 20000 shows
    # whether it keeps to working_memory.
    if name.startswith(("tree-", "fit-", "classifier-fit-", "cv-large")):
        return 20_000, 4_000
    return 4_000, 2_000


# The nearest-key fallback and the recomputation of underflowing rows run
# under leave-one-out by default, K-fold with the other policies; K-fold with
# them too with -m slow.
SLOW_PATHS = {
    "cv-kfold-empty-nearest",
    "cv-kfold-underflow",
    "cv-large",
    "cv-gcv-degree2",
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_PATHS else name
        for name in MEMORY_PATHS
    ],
)
def test_peak_memory_within_working_memory_and_output(name):
    n, m = _sizes(name)
    peak, output, budget = measure(name, n, m, WORKING_MEMORY)
    assert peak <= budget, (
        f"{name}: traced peak {peak / MIB:.1f} MiB over the budget of "
        f"{budget / MIB:.1f} MiB (working_memory {WORKING_MEMORY} MiB, output "
        f"{output / MIB:.1f} MiB, n = {n})"
    )


def test_the_budget_sees_a_square_array():
    # The harness itself: an n x n array at the size of the tests is over
    # the budget of every path but the dense attention weights.
    n = _sizes("")[0]
    path = MEMORY_PATHS["cv-loo-gaussian-degree1"](n, 0)
    square, peak = traced_peak(lambda: np.ones((n, n)))
    assert peak > memory_budget(path, WORKING_MEMORY, output_bytes(None))
    assert output_bytes((square, square[:2])) == square.nbytes


# -- the binned path: its output and one chunk, whatever the number of queries
BINNED_PATHS = [name for name in MEMORY_PATHS if "binned" in name]
# Two sizes of queries against the same keys: the peak may grow by the
# output's growth and this much more (the lists of undecided queries, none
# here, and the tracer's rounding).
GROWTH_SLACK = 2**20


def _binned_sizes(name):
    """``(n, (m_small, m_large))``: 1e6 against 1e7 queries under the slow
    marker, 1e5 against 1e6 for the fast check of one path."""
    if name == "predict-binned-1d":
        return pytest.param(name, 100_000, (100_000, 1_000_000), id=f"{name}-fast")
    return pytest.param(
        name,
        1_000_000,
        (1_000_000, 10_000_000),
        marks=pytest.mark.slow,
        id=f"{name}-1e7",
    )


@pytest.mark.parametrize(
    "name, n, sizes",
    [_binned_sizes(name) for name in BINNED_PATHS]
    + [
        pytest.param(
            "predict-binned-1d",
            1_000_000,
            (1_000_000, 10_000_000),
            marks=pytest.mark.slow,
            id="predict-binned-1d-1e7",
        )
    ],
)
def test_binned_prediction_holds_its_output_and_one_chunk(name, n, sizes):
    # Ten times the queries: the peak grows by the output only (a copy of
    # the queries, or an array of a row per query beside the output, grew
    # it by as much again).
    (small, small_output, _), (peak, output, budget) = (
        measure(name, n, m, WORKING_MEMORY) for m in sizes
    )
    assert peak <= budget, (
        f"{name}: {peak / MIB:.1f} MiB over {budget / MIB:.1f} MiB "
        f"(output {output / MIB:.1f} MiB, no copy of the queries allowed)"
    )
    growth, output_growth = peak - small, output - small_output
    assert growth <= output_growth + GROWTH_SLACK, (
        f"{name}: {sizes[1]:.0e} queries take {growth / MIB:.1f} MiB more than "
        f"{sizes[0]:.0e}; their output {output_growth / MIB:.1f} MiB more"
    )


@pytest.mark.parametrize(
    "d, degree, n_outputs, return_std, kind",
    [
        (1, 0, 1, False, "float64"),
        (1, 1, 4, True, "float64"),
        (2, 0, 1, False, "float32"),
        (2, 1, 1, True, "float64"),
        (2, 1, 4, True, "float32"),
        (2, 0, 1, True, "sparse"),
        (1, 1, 1, False, "sparse"),
    ],
)
def test_binned_chunks_keep_to_working_memory(d, degree, n_outputs, return_std, kind):
    # A chunk holds the work of its queries (their cells, interpolated sums
    # and estimates) and, for float32 or sparse queries, their float64 rows:
    # under working_memory = 1 MiB, a few thousand queries a chunk, where
    # chunks of 65536 queries took 6 to 56 MiB.
    rng = np.random.default_rng(0)
    dtype = np.float32 if kind == "float32" else np.float64
    X = rng.uniform(size=(20_000, d)).astype(dtype)
    y = rng.normal(size=(20_000, n_outputs))
    Q = rng.uniform(0.1, 0.9, size=(100_000, d)).astype(dtype)
    reg = KernelAttentionRegressor("epanechikov", 0.1, algorithm="binned")
    reg.set_params(degree=degree).fit(X, y)
    reg.predict(Q[:1], return_std=return_std)  # builds the engine of return_std
    if kind == "sparse":
        Q = sp.csr_array(Q)
    result, peak = traced_peak(
        lambda: reg.predict(Q, return_std=return_std), working_memory=1
    )
    output = output_bytes(result)
    assert output == (1 + return_std) * Q.shape[0] * n_outputs * X.itemsize
    assert peak <= output + MIB + 2**18, (
        f"{(peak - output) / MIB:.2f} MiB beside the output, over 1 MiB"
    )
