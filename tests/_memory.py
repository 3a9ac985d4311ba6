"""The traced peak memory of a call, for the memory-bound tests."""

import tracemalloc

from sklearn import config_context


def traced_peak(call, working_memory=None):
    """``(result, peak bytes traced)`` of ``call()``, under a memory budget."""
    options = {} if working_memory is None else {"working_memory": working_memory}
    with config_context(**options):
        tracemalloc.start()
        try:
            result = call()
            return result, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def peak_predict_memory(reg, Q, working_memory):
    """Peak bytes traced while ``reg`` predicts ``Q`` under a memory budget."""
    return traced_peak(lambda: reg.predict(Q), working_memory)[1]
