"""The pooling engine: distances -> attention weights -> pooled values.

Every estimator of the package fits a :class:`KernelPool` and asks it for
pooled values or for the attention weights. The engine works in chunks of
queries bounded by scikit-learn's ``working_memory``.
"""

import warnings

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn import get_config
from sklearn.utils import gen_batches

from ._exceptions import EmptyNeighborhoodWarning
from .kernels import KERNELS, Kernel

ON_EMPTY = ("nearest", "mean", "nan", "raise")


def resolve_kernel(kernel):
    """Return the registered :class:`Kernel` of a name, or wrap a callable."""
    if callable(kernel) and not isinstance(kernel, str):
        name = getattr(kernel, "__name__", repr(kernel))
        return Kernel(name, kernel, np.inf)
    return KERNELS[kernel]


class KernelPool:
    """Fitted state of attention pooling and the arithmetic on it.

    Parameters
    ----------
    keys : ndarray of shape (n_samples, n_features)
        Training keys, float32 or float64; the dtype of every computation.
    values : ndarray of shape (n_samples, n_outputs)
        Training values.
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights, at least one positive. Rows of weight zero are
        dropped here, so they cannot influence anything.
    kernel : Kernel
        The kernel, as returned by :func:`resolve_kernel`.
    bandwidth : float or ndarray of shape (n_features,)
        The bandwidth ``h``; the scaled distance is ``||(q - k) / h||``.
    on_empty : {"nearest", "mean", "nan", "raise"}
        What a query with no key of positive attention weight gets.
    user_kernel : bool
        Whether the kernel is a user callable, whose output is checked.
    """

    def __init__(
        self, keys, values, sample_weight, kernel, bandwidth, on_empty, user_kernel
    ):
        self.dtype = keys.dtype
        self.kernel = kernel
        self.on_empty = on_empty
        self.user_kernel = user_kernel
        self.support = np.flatnonzero(sample_weight > 0)
        self.n_samples_fit = keys.shape[0]
        self.bandwidth = np.asarray(bandwidth, dtype=self.dtype)
        scaled = keys[self.support] / self.bandwidth
        # Distances are computed on data centred on the keys, which keeps the
        # BLAS expansion ||q||^2 + ||k||^2 - 2 q.k free of the cancellation a
        # large common offset would cause.
        self.center = scaled.mean(axis=0)
        self.keys = scaled - self.center
        self.key_sq_norms = np.einsum("ij,ij->i", self.keys, self.keys)
        self.weights = sample_weight[self.support].astype(self.dtype)
        self.values = values[self.support].astype(self.dtype)
        self.weighted_mean = np.average(self.values, axis=0, weights=self.weights)

    # -- the kernel scores -------------------------------------------------
    def _scaled_queries(self, X):
        return X.astype(self.dtype, copy=False) / self.bandwidth - self.center

    def _squared_distances(self, Q):
        d2 = np.einsum("ij,ij->i", Q, Q)[:, None] + self.key_sq_norms[None, :]
        d2 -= 2.0 * (Q @ self.keys.T)
        np.maximum(d2, 0.0, out=d2)
        return d2

    def _check_user_output(self, x, alpha):
        name = self.kernel.name
        alpha = np.asarray(alpha)
        if alpha.shape != x.shape:
            raise ValueError(
                f"The kernel {name!r} returned an array of shape {alpha.shape} "
                f"for scaled distances of shape {x.shape}; it must keep the shape."
            )
        if not np.issubdtype(alpha.dtype, np.number) or np.iscomplexobj(alpha):
            raise ValueError(
                f"The kernel {name!r} returned values of dtype {alpha.dtype}; "
                "it must return real weights."
            )
        if not np.all(np.isfinite(alpha)):
            raise ValueError(
                f"The kernel {name!r} returned NaN or infinite weights; it must "
                "return finite weights >= 0."
            )
        if np.any(alpha < 0):
            raise ValueError(
                f"The kernel {name!r} returned negative weights; it must return "
                "finite weights >= 0."
            )
        return alpha.astype(self.dtype, copy=False)

    def _scores(self, Q):
        """Unnormalised weights ``w_i alpha(u_i)``, shape (n_queries, n_keys).

        Kernels with a log form are scaled per row so that the largest score
        is ``w_i``: a softmax, which never underflows to an all-zero row.
        """
        x = np.sqrt(self._squared_distances(Q))
        if self.kernel.log_function is not None:
            logits = self.kernel.log_function(x)
            logits -= logits.max(axis=1, keepdims=True)
            scores = np.exp(logits, out=logits)
        else:
            scores = self.kernel.function(x)
            if self.user_kernel:
                scores = self._check_user_output(x, scores)
        scores *= self.weights
        return scores

    # -- the fallbacks -----------------------------------------------------
    def _fallback_rows(self, Q_empty, d2_empty):
        """Normalised weights of the queries whose neighbourhood is empty."""
        n_empty, n_keys = d2_empty.shape
        if self.on_empty == "mean":
            row = self.weights / self.weights.sum()
            return np.broadcast_to(row, (n_empty, n_keys)).copy()
        if self.on_empty == "nan":
            return np.full((n_empty, n_keys), np.nan, dtype=self.dtype)
        # "nearest": the keys tied at the smallest distance, weighted. The
        # BLAS distances find the candidates; exact differences settle ties.
        eps = np.finfo(self.dtype).eps
        q_sq = np.einsum("ij,ij->i", Q_empty, Q_empty)
        slack = 64 * eps * (q_sq[:, None] + self.key_sq_norms[None, :])
        candidate = d2_empty <= d2_empty.min(axis=1, keepdims=True) + slack
        rows, cols = np.nonzero(candidate)
        diff = Q_empty[rows] - self.keys[cols]
        exact = np.full((n_empty, n_keys), np.inf, dtype=self.dtype)
        exact[rows, cols] = np.einsum("ij,ij->i", diff, diff)
        tied = exact == exact.min(axis=1, keepdims=True)
        out = np.where(tied, self.weights, 0.0).astype(self.dtype, copy=False)
        out /= out.sum(axis=1, keepdims=True)
        return out

    def _chunk_weights(self, X_chunk):
        """Normalised attention weights of a chunk and the empty-row mask."""
        Q = self._scaled_queries(X_chunk)
        scores = self._scores(Q)
        total = scores.sum(axis=1)
        empty = total == 0
        with np.errstate(invalid="ignore", divide="ignore"):
            scores /= total[:, None]
        if np.any(empty):
            Q_empty = Q[empty]
            scores[empty] = self._fallback_rows(
                Q_empty, self._squared_distances(Q_empty)
            )
        return scores, empty

    # -- the public operations ---------------------------------------------
    def _run_chunks(self, X, n_outputs_per_row, work, n_jobs):
        """Apply ``work(chunk) -> (rows, empty)`` over memory-bounded chunks."""
        n_queries = X.shape[0]
        itemsize = np.dtype(self.dtype).itemsize
        # A chunk holds about three (n_rows, n_keys) temporaries.
        row_bytes = 3 * itemsize * max(self.keys.shape[0], 1)
        budget = get_config()["working_memory"] * 2**20
        chunk = int(min(max(budget // row_bytes, 1), max(n_queries, 1)))
        batches = list(gen_batches(n_queries, chunk))
        out = np.empty((n_queries, n_outputs_per_row), dtype=self.dtype)
        empty = np.zeros(n_queries, dtype=bool)

        def run(batch):
            out[batch], empty[batch] = work(X[batch])

        if effective_n_jobs(n_jobs) == 1 or len(batches) == 1:
            for batch in batches:
                run(batch)
        else:
            Parallel(n_jobs=n_jobs, prefer="threads")(
                delayed(run)(batch) for batch in batches
            )
        self._report_empty(int(empty.sum()), n_queries)
        return out

    def _report_empty(self, n_empty, n_queries):
        if n_empty == 0:
            return
        if self.on_empty == "raise":
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
        }[self.on_empty]
        warnings.warn(
            f"{n_empty} of {n_queries} queries have no training key with "
            f"positive weight inside the kernel's support; they get {what} "
            f"(on_empty={self.on_empty!r}). A larger bandwidth avoids this.",
            EmptyNeighborhoodWarning,
            stacklevel=5,
        )

    def pool(self, X, n_jobs=None):
        """Pooled values, shape (n_queries, n_outputs)."""

        def work(X_chunk):
            weights, empty = self._chunk_weights(X_chunk)
            return weights @ self.values, empty

        return self._run_chunks(X, self.values.shape[1], work, n_jobs)

    def attention_weights(self, X, n_jobs=None):
        """Normalised weights over all training rows, shape (n_queries, n_fit)."""
        dense = self._run_chunks(X, self.keys.shape[0], self._chunk_weights, n_jobs)
        if dense.shape[1] == self.n_samples_fit:
            return dense
        out = np.zeros((X.shape[0], self.n_samples_fit), dtype=self.dtype)
        out[:, self.support] = dense
        return out
