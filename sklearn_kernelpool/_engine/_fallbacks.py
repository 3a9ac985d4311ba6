"""The empty-neighbourhood policy of the NumPy engine.

A query with no key of positive attention weight inside the kernel's
support gets the ``on_empty`` fallback: the weights of its nearest keys,
the sample weights of every key, or NaN, put in its rows by
:func:`._protocol.fill_empty`; :func:`report_empty` warns of (or refuses)
them. :class:`Fallbacks` is the part of :class:`._pooling.KernelPool` that
finds the nearest keys and fills the rows.
"""

import numpy as np
from scipy.sparse import csr_array

from .._exceptions import EmptyNeighborhoodWarning, describe, warn
from . import _weight_rows as _weights
from ._protocol import fill_empty, policy_weights


def report_empty(on_empty, n_empty, n_queries, kernel, bandwidth, n_neighbors=None):
    """Warn of, or for ``on_empty="raise"`` refuse, ``n_empty`` empty queries.

    The warning's text names the configuration only; the counts are its
    attributes (see :mod:`.._exceptions`).
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


class Fallbacks:
    """The fallbacks of empty queries (a part of :class:`._pooling.KernelPool`)."""

    # -- fallbacks -----------------------------------------------------------
    def _nearest_weights(self, queries, workspace):
        """Sparse weights of the nearest keys, ties shared by sample weight."""
        rows, cols = self.scorer.nearest_candidates(queries, workspace)
        # The ties are settled on the unscaled coordinates, on every path.
        Q = queries[2]
        rows, cols = self.exact.ties(rows, cols, Q)
        data = self.weights[cols]
        totals = np.bincount(rows, weights=data, minlength=len(Q))
        data = (data / totals[rows]).astype(self.dtype)
        return csr_array((data, (rows, cols)), shape=(len(Q), self.keys.shape[0]))

    def fallback_weights(self, chosen):
        """Sparse weights of the nearest keys of the ``(queries, workspace)``
        pair ``chosen`` (for :func:`._protocol.fill_empty`)."""
        return self._nearest_weights(*chosen)

    # What an empty query's attention weights are under on_empty="nan".
    nan_weights = np.nan

    def _fill_fallback(self, out, empty, queries, workspace, pooled, std=None):
        """Overwrite the empty rows of ``out`` (and ``std``) with the
        ``on_empty`` fallback (:func:`._protocol.fill_empty`)."""
        if np.any(empty):
            chosen = tuple(q[empty] for q in queries[:3]), workspace
            fill_empty(self, out, empty, chosen, std, pooled)

    def _report_empty(self, n_empty, n_queries):
        report_empty(
            self.on_empty,
            n_empty,
            n_queries,
            self.kernel,
            self.bandwidth,
            self._n_neighbors,
        )

    def _sparse_fallback(self, scores, total, empty, queries, workspace):
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
