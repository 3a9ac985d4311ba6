"""Dask arrays in the large-table selection (:mod:`._large`).

The cross-validated estimators take a dask array ``X`` (``y`` and
``sample_weight`` dask or NumPy arrays, chunked like its rows) where the
large-table selection applies: the exact search holds every pair of rows,
and refuses them. The rows are checked without computing a value
(:func:`.._utils._dask_input.validate_dask_fit`); the weights decide whether
the selection applies; then one pass over the graph gathers the rows, which
the selection and the refitted model hold as they do in memory (the model
pools every key: ``8 n d`` bytes of keys, 40 MB at 1e6 rows of 5 features).
The draw depends only on the rows of positive weight and ``random_state``,
so the fit equals the fit of the same rows in memory, bit for bit.
The second stage, which scores the candidates on the held-out rows at full
``n``, runs on the cluster: the held-out predictions of every candidate are
computed in blocks of held-out rows (:mod:`.._utils._row_blocks`), one task
each, with the held-out engine of each search (which holds the rows)
scattered to every worker once. A fit in memory computes the same blocks
in turn, so the scores equal those in memory bit for bit. The subsample's
search (a few thousand rows), the comparison of a compact finalist with the
selected one (the predictions of 1,000 rows) and the refit (the model
stores the rows) run on the client. ``predict``
maps ``best_estimator_`` over the chunks of dask queries on the cluster.
"""

import numpy as np
from sklearn.base import is_classifier


def is_dask(X):
    """Whether ``X`` is a dask collection."""
    return hasattr(X, "__dask_graph__")


def gathered_rows(estimator, X, y, sample_weight, subsample_rows):
    """``(X, y, sample_weight)`` of a fit of ``estimator`` on the dask array
    ``X``, computed in one pass, once ``subsample_rows(estimator,
    n_positive)`` says the large-table selection applies; a ``ValueError``
    where it does not."""
    import dask

    from .._utils._dask_input import validate_dask_fit

    target = "labels" if is_classifier(estimator) else "values"
    X, y, sample_weight = validate_dask_fit(estimator, X, y, sample_weight, target)
    n = X.shape[0]
    weights = None
    if sample_weight is not None:
        (weights,) = dask.compute(sample_weight)
        weights = np.asarray(weights)
    n_positive = n if weights is None else int(np.count_nonzero(weights > 0))
    if subsample_rows(estimator, n_positive) is None:
        name = type(estimator).__name__
        raise ValueError(
            f"{name}.fit takes dask arrays only for the large-table selection "
            "(subsample='auto' above 10,000 rows of positive weight, or an int "
            f"subsample below them; got subsample={estimator.subsample!r} and "
            f"{n_positive} rows): the exact search holds every pair of rows in "
            "memory. Compute X and y into NumPy arrays first, for example with "
            "X.compute()."
        )
    X, y = dask.compute(X, y)
    return np.asarray(X), np.asarray(y), weights


def map_on_dask(function, shared, blocks):
    """``[function(shared, rows) for rows in blocks]`` as dask tasks (the
    mapper of :func:`.._utils._row_blocks.mapped_row_blocks`): on the
    workers of the running distributed client, with ``shared`` scattered to
    each of them once, else on dask's default scheduler."""
    client = _client()
    if client is None:
        import dask

        task = dask.delayed(function, pure=False)
        return list(dask.compute(*[task(shared, rows) for rows in blocks]))
    [scattered] = client.scatter([shared], broadcast=True, hash=False)
    futures = client.map(function, [scattered] * len(blocks), blocks, pure=False)
    try:
        return client.gather(futures)
    finally:
        client.cancel([*futures, scattered])


def _client():
    """The running distributed client, or None."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None
