"""The array API path: brute-force pooling in the namespace of the input.

With ``sklearn.config_context(array_api_dispatch=True)``, arrays that are not
NumPy's (PyTorch tensors, CuPy arrays...) are pooled here, with the
operations of their own namespace on their own device (validated and
fitted by :mod:`.._estimator._array_api`): chunks of queries from
``gen_batches`` bounded
by ``working_memory``, one ``matmul`` per chunk for the squared distances
and one for the kernel sums, which the layer of :mod:`._protocol` shared with
the NumPy engine normalises and completes with the ``on_empty`` fallbacks
and the spread. NumPy input never comes here: it keeps the engine of
:mod:`._pooling`, with its trees, its local-linear fit and its BLAS blocks.
"""

import math

import numpy as np
from sklearn import config_context
from sklearn.utils import gen_batches
from sklearn.utils._array_api import device, get_namespace

from .._utils._validation import coordinate_limit
from .._utils._working_memory import working_memory_bytes
from ._brute import _MAX_DISTANCE_ROUNDING
from ._exact import edge_values, pairwise_squared, squared_slack, tie_bandwidth
from ._fallbacks import report_empty
from ._protocol import fill_empty, normalise, normalise_rows, spread


class ArrayAPIPool:
    """Fitted state of brute-force pooling in an array API namespace.

    Coordinates are scaled by the bandwidth and centred on the mean of the
    keys in the most precise float dtype of the device; the products and the
    kernel run in the dtype of the training keys (float32 stays float32).

    Parameters
    ----------
    keys : array of shape (n_samples, n_features)
        Training keys, float32 or float64.
    values : array of shape (n_samples, n_outputs)
        Training values.
    sample_weight : array of shape (n_samples,)
        Non-negative weights, at least one positive; rows of weight zero get
        attention weight zero.
    kernel : Kernel
        A registered kernel.
    bandwidth : float or array of shape (n_features,)
        The bandwidth ``h``.
    on_empty : {"nearest", "mean", "nan", "raise"}
        What a query with no key of positive attention weight gets.
    xp : namespace
        The array API namespace of the arrays.
    """

    def __init__(self, keys, values, sample_weight, kernel, bandwidth, on_empty, xp):
        self.xp = xp
        self.dtype = keys.dtype
        self.device = device(keys)
        self.precise = sample_weight.dtype
        self.kernel = kernel
        self.on_empty = on_empty
        self.bandwidth = bandwidth
        self.n_samples_fit = keys.shape[0]
        self.log_form = kernel.log_function is not None

        self._set_keys(keys, bandwidth)
        relative = self._set_weights(sample_weight)
        self._set_values(values, relative)

    def _set_keys(self, keys, bandwidth):
        """The scaled, centred keys and the matrix of their squared distances."""
        xp, dtype = self.xp, self.dtype
        scaled = _checked_coordinates(
            xp.astype(keys, self.precise) / bandwidth, dtype, xp
        )
        self.center = xp.mean(scaled, axis=0)
        centred = scaled - self.center
        # The support edge and the nearest keys are decided on the unscaled
        # coordinates, exactly as the NumPy engine does (:mod:`._exact`).
        self.raw_keys = xp.astype(keys, self.precise)
        self.key_coordinates = float(xp.max(xp.abs(scaled)))
        key_sq = xp.sum(centred * centred, axis=1)
        ones = xp.ones_like(key_sq)
        # [q, 1, |q|^2] @ [-2 k, |k|^2, 1] = ||q - k||^2
        self.distance_matrix = xp.astype(
            xp.concat([-2.0 * centred.T, key_sq[None, :], ones[None, :]], axis=0),
            dtype,
        )
        self.key_sq = xp.astype(key_sq, dtype)
        self.key_sq_max = float(xp.max(key_sq))
        # For the distances of queries far from the centre (see _scores).
        self.keys = centred

    def _set_weights(self, sample_weight):
        """The weights relative to the largest, checked for their precision;
        returns them in the precise dtype."""
        xp, dtype = self.xp, self.dtype
        # Attention weights are ratios: the largest weight becomes 1. As on
        # the NumPy path (relative_weights), every positive one must be a
        # normal number with full precision in its products with kernels.
        relative = sample_weight / xp.max(sample_weight)
        self.weights = weights = xp.astype(relative, dtype)
        self.positive = sample_weight > 0
        info = xp.finfo(dtype)
        if not bool(
            xp.all((weights >= info.smallest_normal / info.eps) | ~self.positive)
        ):
            raise ValueError(
                "sample_weight spans too wide a range for "
                f"{dtype}: the smallest positive weights lose their precision "
                "next to the largest. Set the weights of negligible rows to "
                "zero (or drop those rows), or use float64 X."
            )
        if self.log_form:
            safe = xp.where(self.positive, weights, xp.ones_like(weights))
            self.log_weights = xp.where(
                self.positive, xp.log(safe), xp.full_like(weights, -math.inf)
            )
        return relative

    def _set_values(self, values, relative):
        """The values, their weighted mean and spread, and what the pooling and
        the fallbacks multiply by the weights."""
        xp, dtype = self.xp, self.dtype
        values = xp.astype(values, self.precise)
        _check_values(values, dtype, xp)
        total = xp.sum(relative)
        mean = (relative @ values) / total
        centred_values = values - mean
        variance = (relative @ (centred_values * centred_values)) / total
        self.weighted_mean = xp.astype(mean, dtype)
        self.global_std = xp.astype(xp.sqrt(variance), dtype)
        self.values = xp.astype(values, dtype)
        self.n_outputs = values.shape[1]
        column = xp.ones((values.shape[0], 1), dtype=dtype, device=self.device)
        # [values, 1]: one product gives every weighted sum and the total.
        self.pool_matrix = xp.concat([self.values, column], axis=1)
        # The values centred on their weighted mean (for the spread), and
        # what the fallbacks of :func:`._protocol.fill_empty` pool.
        self.centered_values = xp.astype(centred_values, dtype)
        self.mean_weights = self.weights / xp.sum(self.weights)
        self.nan_weights = xp.where(
            self.positive,
            xp.full_like(self.weights, math.nan),
            xp.zeros_like(self.weights),
        )

    # -- pickling: a namespace is a module, found again from the arrays ------
    def __getstate__(self):
        state = self.__dict__.copy()
        del state["xp"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        with config_context(array_api_dispatch=True):
            self.xp, _ = get_namespace(self.pool_matrix)
        if "centered_values" not in state:  # saved before the shared layer
            xp = self.xp
            self.centered_values = state["spread_matrix"][:, : self.n_outputs]
            self.mean_weights = self.weights / xp.sum(self.weights)
            self.nan_weights = xp.where(
                self.positive,
                xp.full_like(self.weights, math.nan),
                xp.zeros_like(self.weights),
            )

    # -- the chunks ----------------------------------------------------------
    def _chunk_rows(self, n_queries, n_buffers):
        """Queries per chunk: ``n_buffers`` (chunk, n_keys) arrays fit in
        ``working_memory``."""
        itemsize = 4 if self.dtype == self.xp.float32 else 8
        row_bytes = n_buffers * itemsize * self.n_samples_fit
        rows = working_memory_bytes() // row_bytes  # inf for an infinite budget
        return int(max(1, min(max(n_queries, 1), rows)))

    def _chunks(self, X, n_buffers):
        n_queries = X.shape[0]
        for batch in gen_batches(n_queries, self._chunk_rows(n_queries, n_buffers)):
            yield X[batch.start : batch.stop, ...]

    def _scores(self, X):
        """Squared distances, unscaled queries and attention scores ``w alpha``
        of a chunk.

        The scores of each query are defined up to a positive factor: the
        log forms are a softmax with the row maximum subtracted, so that no
        query is all zeros.
        """
        xp = self.xp
        raw = xp.astype(X, self.precise)
        scaled = _checked_coordinates(raw / self.bandwidth, self.dtype, xp)
        Q = scaled - self.center
        q_sq = xp.sum(Q * Q, axis=1)
        ones = xp.ones_like(q_sq)
        Q1 = xp.astype(xp.concat([Q, ones[:, None], q_sq[:, None]], axis=1), self.dtype)
        d2 = xp.clip(xp.matmul(Q1, self.distance_matrix), min=0.0)
        # The expansion rounds by a few eps |q|^2: rows of queries far from
        # the centre of the keys get exact differences, as on the NumPy path.
        far = 3.0 * float(np.finfo(np.float64).eps) * q_sq > _MAX_DISTANCE_ROUNDING
        if bool(xp.any(far)):
            exact = pairwise_squared(Q, self.keys, None, xp)
            d2 = xp.where(far[:, None], xp.astype(exact, self.dtype), d2)
        if self.kernel.is_compact:
            d2 = self._redecide_edge(d2, raw, scaled, q_sq)
        if self.log_form:
            logits = self.kernel.xp_squared_function(d2, xp) + self.log_weights
            logits = logits - xp.max(logits, axis=1, keepdims=True)
            scores = xp.exp(logits)
        else:
            scores = self.kernel.xp_squared_function(d2, xp) * self.weights
        return d2, raw, scores

    def _redecide_edge(self, d2, raw, scaled, q_sq):
        """``d2`` with the pairs near the support edge decided exactly."""
        xp = self.xp
        support = self.kernel.support
        coordinates = xp.max(xp.abs(scaled), axis=1) + self.key_coordinates
        slack = squared_slack(
            "float32" if self.dtype == xp.float32 else "float64",
            q_sq[:, None] + self.key_sq_max,
            coordinates[:, None],
            support,
            scaled.shape[1],
        )
        near = xp.abs(d2 - support * support) <= xp.astype(slack, self.dtype)
        if not bool(xp.any(near)):
            return d2
        exact = pairwise_squared(raw, self.raw_keys, self.bandwidth, xp)
        return xp.where(near, edge_values(exact, support, self.dtype, xp), d2)

    def fallback_weights(self, raw):
        """Normalised weights of each query's nearest keys of positive weight.

        Keys at the exact smallest distance (:mod:`._exact`) are ties, and
        share the weight in proportion to their sample weights.
        """
        xp = self.xp
        bandwidth = tie_bandwidth(self.bandwidth)
        d2 = pairwise_squared(raw, self.raw_keys, bandwidth, xp)
        d2 = xp.where(self.positive, d2, xp.full_like(d2, math.inf))
        nearest = xp.min(d2, axis=1, keepdims=True)
        tied = xp.where(d2 == nearest, self.weights, xp.zeros_like(self.weights))
        return tied / xp.sum(tied, axis=1, keepdims=True)

    def _count_empty(self, empty):
        return int(self.xp.sum(self.xp.astype(empty, self.xp.int64)))

    # -- the operations: the shared layer of :mod:`._protocol` on the sums -----
    def pool(self, X, return_std=False):
        """Pooled values of shape (n_queries, n_outputs), and with
        ``return_std`` their attention-weighted standard deviation."""
        xp = self.xp
        means, stds, n_empty = [], [], 0
        for chunk in self._chunks(X, n_buffers=6):
            _, raw, scores = self._scores(chunk)
            sums = xp.matmul(scores, self.pool_matrix)
            mean, empty = normalise(sums, xp)
            std = None
            if return_std:
                weights, _ = normalise_rows(scores, sums[:, -1], xp)
                std = spread(weights, self.centered_values, xp)
            n = self._count_empty(empty)
            if n:
                n_empty += n
                mean, std = fill_empty(self, mean, empty, raw, std, xp=xp)
            means.append(mean)
            stds.append(std)
        report_empty(self.on_empty, n_empty, X.shape[0], self.kernel, self.bandwidth)
        mean = xp.concat(means, axis=0)
        if return_std:
            return mean, xp.concat(stds, axis=0)
        return mean

    def attention_weights(self, X):
        """Dense normalised weights over the training rows, shape
        (n_queries, n_samples_fit)."""
        xp = self.xp
        rows, n_empty = [], 0
        for chunk in self._chunks(X, n_buffers=6):
            _, raw, scores = self._scores(chunk)
            total = xp.sum(scores, axis=1)
            weights, empty = normalise_rows(scores, total, xp)
            n = self._count_empty(empty)
            if n:
                n_empty += n
                weights, _ = fill_empty(self, weights, empty, raw, pooled=False, xp=xp)
            rows.append(weights)
        report_empty(self.on_empty, n_empty, X.shape[0], self.kernel, self.bandwidth)
        return xp.concat(rows, axis=0)


def _beyond(array, limit, xp):
    """The largest magnitude of ``array`` if it exceeds ``limit``, else None.

    Decided by a comparison in the namespace (which carries no gradient), so
    that only an error message turns an array into a float.
    """
    if bool(xp.all(xp.abs(array) <= limit)):
        return None
    return float(xp.max(xp.abs(array)))


def _checked_coordinates(scaled, dtype, xp):
    """Refuse scaled coordinates whose squared distances overflow ``dtype``.

    The same limit and message as the NumPy path's ``scale_coordinates``;
    NaN coordinates were refused by the validation before.
    """
    name = "float32" if "float32" in str(dtype) else "float64"
    limit = coordinate_limit(np.dtype(name), scaled.shape[1])
    largest = _beyond(scaled, limit, xp)
    if largest is not None:
        raise ValueError(
            f"X divided by the bandwidth has coordinates up to {largest:.3g}; "
            f"past {limit:.3g} ({name}, {scaled.shape[1]} features) squared "
            "distances overflow. Rescale X (for example with a StandardScaler) "
            "or use a larger bandwidth."
        )
    return scaled


def _check_values(values, dtype, xp):
    """Refuse values whose squares (the spread) overflow ``dtype``.

    The NumPy path rescales the values by powers of two instead; this path
    asks for rescaled values.
    """
    name = "float32" if "float32" in str(dtype) else "float64"
    limit = float(np.sqrt(np.finfo(name).max)) / 4
    largest = _beyond(values, limit, xp)
    if largest is not None:
        raise ValueError(
            f"y has values up to {largest:.3g}; on the array API path values "
            f"beyond {limit:.3g} ({name}) overflow the pooled sums of their "
            "squares. Rescale y, or fit on NumPy arrays."
        )


def is_array_api_pool(pool):
    """Whether a fitted engine is the array API one."""
    return isinstance(pool, ArrayAPIPool)
