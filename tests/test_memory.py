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
"""

import numpy as np
import pytest
from _memory import MEMORY_PATHS, measure, memory_budget, output_bytes, traced_peak

WORKING_MEMORY = 16  # MiB
MIB = 2**20


def _sizes(name):
    # fit's neighbourhood estimate probes up to 8192 keys: n = 20000 shows
    # whether it keeps to working_memory.
    if name.startswith(("tree-", "fit-", "classifier-fit-")):
        return 20_000, 4_000
    return 4_000, 2_000


# The nearest-key fallback and the recomputation of underflowing rows run
# under leave-one-out by default, K-fold with the other policies; K-fold with
# them too with -m slow.
SLOW_PATHS = {"cv-kfold-empty-nearest", "cv-kfold-underflow"}


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
