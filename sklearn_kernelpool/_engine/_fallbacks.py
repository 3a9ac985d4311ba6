"""The empty-neighbourhood policy of the NumPy engine.

A query with no key of positive attention weight inside the kernel's
support gets the ``on_empty`` fallback: the weights of its nearest keys,
the sample weights of every key, or NaN, put in its rows by
:func:`._protocol.fill_empty`; :func:`report_empty` warns of (or refuses)
them. :class:`EmptyQueries`, held by a :class:`._pooling.KernelPool`, finds
the nearest keys and fills the rows.
"""

import numpy as np
from scipy.sparse import csr_array

from .._utils._warn import describe, warn
from .._utils._warnings import EmptyNeighborhoodWarning
from . import _weight_rows as _weights
from ._protocol import fill_empty, policy_weights


def report_empty(on_empty, n_empty, n_queries, kernel, bandwidth, n_neighbors=None):
    """Warn of, or for ``on_empty="raise"`` refuse, ``n_empty`` empty queries.

    The warning's text names the configuration only; the counts are its
    attributes (see :mod:`.._utils._warnings`).
    """
    if n_empty == 0:
        return
    if on_empty == "raise":
        raise ValueError(
            f"{n_empty} of {n_queries} queries have no training key with "
            "positive weight inside the kernel's support (on_empty='raise'). "
            "Use a larger bandwidth, a kernel with unbounded support, or "
            "another on_empty policy."
        )
    what = {
        "nearest": "the value of the nearest key",
        "mean": "the weighted mean of the training values",
        "nan": "NaN",
    }[on_empty]
    warn(
        EmptyNeighborhoodWarning(
            "Queries with no training key of positive weight inside the "
            f"support of {describe(kernel, bandwidth, n_neighbors)} get {what} "
            f"(on_empty={on_empty!r}); a larger bandwidth avoids this. The "
            "warning's n_empty and n_queries attributes count them in each call.",
            n_empty=n_empty,
            n_queries=n_queries,
        )
    )


class EmptyQueries:
    """The ``on_empty`` policy of a :class:`._pooling.KernelPool`.

    It is the ``engine`` of :func:`._protocol.fill_empty` and
    :func:`._protocol.policy_weights`: it holds what the fallbacks are made
    of, shared with the pool that builds it.

    Parameters
    ----------
    pool : KernelPool
        The fitted pool: its scorer, exact keys, sample weights, values,
        their weighted mean and spread (``moments``), ``on_empty`` and the
        configuration named in the warnings are read from it once.
    """

    # What an empty query's attention weights are under on_empty="nan".
    nan_weights = np.nan

    def __init__(self, pool):
        self.on_empty = pool.on_empty
        self.scorer = pool.scorer
        self.exact = pool.exact
        self.weights = pool.weights
        self.values = pool.values
        self.mean_weights = pool.mean_weights
        self.moments = pool.moments
        self.n_keys = pool.keys.shape[0]
        self.dtype = pool.dtype
        self.configuration = (pool.kernel, pool.bandwidth, pool.n_neighbors)

    @property
    def centered_values(self):
        """The values minus their weighted mean, in float64 (the spread of
        the ``"mean"`` fallback)."""
        return self.moments.centered_values

    def fallback_weights(self, chosen):
        """Sparse weights of the nearest keys of the ``(queries, workspace)``
        pair ``chosen``, ties shared by sample weight (for
        :func:`._protocol.fill_empty`)."""
        queries, workspace = chosen
        rows, cols = self.scorer.nearest_candidates(queries, workspace)
        # The ties are settled on the unscaled coordinates, on every path.
        Q = queries[2]
        rows, cols = self.exact.ties(rows, cols, Q)
        data = self.weights[cols]
        totals = np.bincount(rows, weights=data, minlength=len(Q))
        data = (data / totals[rows]).astype(self.dtype)
        return csr_array((data, (rows, cols)), shape=(len(Q), self.n_keys))

    def fill(self, out, empty, queries, workspace, pooled, std=None):
        """Overwrite the empty rows of ``out`` (and ``std``) with the
        ``on_empty`` fallback (:func:`._protocol.fill_empty`)."""
        if np.any(empty):
            chosen = tuple(q[empty] for q in queries[:3]), workspace
            fill_empty(self, out, empty, chosen, std, pooled)

    def report(self, n_empty, n_queries):
        """Warn of (or refuse) the empty queries of a call (:func:`report_empty`)."""
        report_empty(self.on_empty, n_empty, n_queries, *self.configuration)

    def sparse_rows(self, scores, total, empty, queries, workspace):
        """Normalise sparse scores and put the fallback rows in the empty ones."""
        scores = _weights.normalize_sparse_rows(scores, total, empty)
        if not np.any(empty):
            return scores
        chosen = tuple(q[empty] for q in queries[:3]), workspace
        fallback = policy_weights(self, chosen)
        if fallback is None or fallback.ndim == 1:  # NaN, or the mean's row
            fill = np.nan if fallback is None else fallback
            fallback = _weights.repeated_rows(fill, int(empty.sum()), scores.shape[1])
        return _weights.place_rows(scores, fallback, empty)
