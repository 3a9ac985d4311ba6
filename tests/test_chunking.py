import numpy as np
import pytest
from sklearn import config_context

from sklearn_kernelpool._utils._working_memory import row_batches


@pytest.mark.parametrize("n_rows", [0, 1, 7, 100])
@pytest.mark.parametrize("working_memory", [1e-6, 0.001, 1, float("inf")])
def test_row_batches_cover_the_rows_in_order_within_the_budget(n_rows, working_memory):
    row_bytes = 100
    with config_context(working_memory=working_memory):
        batches = list(row_batches(n_rows, row_bytes))
    covered = np.concatenate([np.arange(n_rows)[b] for b in batches] + [[]])
    np.testing.assert_array_equal(covered, np.arange(n_rows))
    budget_rows = max(1, working_memory * 2**20 / row_bytes)
    assert all(0 < b.stop - b.start <= budget_rows for b in batches)
    # Every batch but the last is full.
    assert len({b.stop - b.start for b in batches[:-1]}) <= 1
