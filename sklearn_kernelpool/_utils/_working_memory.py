"""Batches of rows within scikit-learn's ``working_memory``."""

from sklearn import get_config


def working_memory_bytes():
    """scikit-learn's ``working_memory`` in bytes; ``inf`` stays ``inf``."""
    return get_config()["working_memory"] * 2**20


def row_batches(n_rows, row_bytes):
    """Slices of at most ``n_rows`` rows of ``row_bytes`` each that fit in
    scikit-learn's ``working_memory``, one row at least.

    Like :func:`sklearn.utils.get_chunk_n_rows` with
    :func:`sklearn.utils.gen_batches`, but silent when one row exceeds the
    budget (a row is O(n), within the bound) and finite for an infinite
    ``working_memory``. The slices are made here: this runs once per chunk
    of queries, where the parameter validation of ``gen_batches`` (about
    0.2 ms a call) was a tenth of the time of a prediction interval.
    """
    budget = working_memory_bytes()
    rows = n_rows if budget == float("inf") else budget // max(row_bytes, 1)
    rows = max(1, int(min(n_rows, rows)))
    return (slice(start, min(start + rows, n_rows)) for start in range(0, n_rows, rows))
