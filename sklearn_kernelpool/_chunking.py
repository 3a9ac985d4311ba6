"""Batches of rows within scikit-learn's ``working_memory``."""

from sklearn import get_config
from sklearn.utils import gen_batches


def working_memory_bytes():
    """scikit-learn's ``working_memory`` in bytes; ``inf`` stays ``inf``."""
    return get_config()["working_memory"] * 2**20


def row_batches(n_rows, row_bytes):
    """Slices of at most ``n_rows`` rows of ``row_bytes`` each that fit in
    scikit-learn's ``working_memory``, one row at least.

    Like :func:`sklearn.utils.get_chunk_n_rows` with
    :func:`sklearn.utils.gen_batches`, but silent when one row exceeds the
    budget (a row is O(n), within the bound) and finite for an infinite
    ``working_memory``.
    """
    if n_rows <= 0:
        return iter(())  # gen_batches validates n >= 1 outside a fit
    budget = working_memory_bytes()
    rows = max(1, int(min(n_rows, budget // max(row_bytes, 1))))
    return gen_batches(n_rows, rows)
