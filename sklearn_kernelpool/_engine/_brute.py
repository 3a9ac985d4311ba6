"""The brute-force path: every query against every key, by BLAS."""

import numpy as np

from .._utils._user_kernel import check_kernel_output
from . import _adaptive
from ._exact import pairwise_squared, squared_slack

# float32 products lose about eps * (|q|^2 + |k|^2) of a squared distance to
# cancellation; past this share of a unit logit (about 34 eps, which keeps
# float32 predictions within 1e-5 of float64 ones) a chunk's product runs in
# float64, then rounds to float32 for the kernel, the exp and the pooling.
_FLOAT32_MAX_CANCELLATION = 4e-6
# The gaussian's logits come straight out of the product. A key at scaled
# distance u from the query has |k| <= |q| + u, so its logit rounds by at most
# about eps * c * (2 |q| + u)^2: an error relative to the logit itself in u,
# as exact differences make (and a weight of exp(-c u^2) in front of it), and
# an excess that grows with the query's distance |q| from the centre of the
# keys. The weight of a row lies within a couple of bandwidths of its nearest
# keys, so rows widen where eps * c * (2 |q| + 2)^2 passes this bound; on
# standardised data the rows within a few bandwidths of the centre (most of
# them at h = 1) stay in float32 and keep float32 predictions within about
# 1e-6 of float64 ones. The bound on the largest key, which the other kernels
# keep, would widen nearly every row there.
_FLOAT32_MAX_LOGIT_ROUNDING = 1e-5

# exp() of float64 arguments below about -708 leaves the fast path of libm to
# produce subnormals or zero. Logits more than this far below their row's
# maximum weigh less than 1e-304 of the largest weight, far below rounding,
# and are clamped so that exp stays fast. float32 has no such slow path.
_LOGIT_FLOOR = {np.dtype(np.float64): -700.0}
# Rows of gaussian logits that may round up by more than this get clamped
# to their true upper bound, 0.
_MAX_LOGIT_ROUNDING = 1.0

# The BLAS expansion |q|^2 + |k|^2 - 2 q.k of a squared distance rounds by
# up to a few eps * (|q|^2 + |k|^2), which is at most 3 eps |q|^2 + 2 eps u^2
# for a key at scaled distance u: an error relative to u^2, as exact
# differences make, plus one that grows with the query's distance from the
# centre of the keys. Rows where the latter may exceed this many squared
# bandwidths (queries more than about 400 bandwidths from the centre in
# float64, or from the keys of another group far away) get their distances
# from exact differences instead; ordinary data never reach it.
_MAX_DISTANCE_ROUNDING = 2.0**-33
# Rows of exact differences are computed this many bytes at a time.
_EXACT_BYTES = 2**20

# Every product runs on blocks of the same number of rows, a function of the
# fitted keys only, at the same positions: BLAS picks its kernels (and so the
# order of its sums) by the shape of a product and treats the last rows of a
# block apart, so a query's result depends only on its index modulo the block
# size, never on the chunk it is in, the number of queries or n_jobs.
_BLOCK_BYTES = 2**20
_MAX_BLOCK_ROWS = 512


def _rescale_rows(alpha):
    """Weights of a user kernel divided, row by row, by a power of two near
    the row's maximum: exact, and no sum of a row can overflow."""
    alpha = np.asarray(alpha, dtype=np.float64)
    _, exponent = np.frexp(alpha.max(axis=1, initial=0.0))
    return np.ldexp(alpha, -exponent[:, None])


class BruteScorer:
    """Kernel scores of chunks of queries against every key.

    Each chunk costs one GEMM of the augmented queries ``[q, 1, |q|^2]``
    against a (n_features + 2, n_keys) key matrix, then in-place passes over
    the (n_queries, n_keys) buffer. The GEMMs run on blocks of
    ``block_rows`` rows, a number fixed in ``__init__``; the buffers of a
    chunk are padded to whole blocks.

    Float32 work stays in float32 (the buffer, the kernel, the exp and the
    pooling); only the rows whose float32 product would lose more than 4e-6
    of a logit to cancellation (queries far from the centre of the keys in
    units of the bandwidth, or keys far from it) get their product in
    float64.

    Parameters
    ----------
    keys : ndarray of shape (n_keys, n_features)
        Scaled, centred keys of positive weight, in float64.
    weights : ndarray of shape (n_keys,)
        Their positive sample weights.
    kernel : Kernel
        The kernel.
    user_kernel : bool
        Whether the kernel is a user callable, whose output is checked.
    dtype : {float32, float64}
        The dtype of the scores.
    exact : ExactKeys
        The unscaled keys, on which the support edge and the nearest keys
        are decided (:mod:`._exact`).
    """

    def __init__(self, keys, weights, kernel, user_kernel, dtype, exact):
        self.kernel = kernel
        self.exact = exact
        self.user_kernel = user_kernel
        self.dtype = np.dtype(dtype)
        self.n_features = keys.shape[1]
        row_bytes = self.dtype.itemsize * keys.shape[0]
        self.block_rows = int(max(1, min(_MAX_BLOCK_ROWS, _BLOCK_BYTES // row_bytes)))
        self.keys = keys
        self.key_sq = key_sq = np.einsum("ij,ij->i", keys, keys)
        self.key_sq_max = float(key_sq.max())
        self.key_radius = np.sqrt(self.key_sq_max)
        ones = np.ones_like(key_sq)
        # [q, 1, |q|^2] . [-2 k, |k|^2, 1] = ||q - k||^2
        self.distance_matrix = self._stack(-2.0 * keys.T, key_sq, ones)
        self.log_weights = self.logit_matrix = None
        if kernel.log_function is not None:
            log_w = np.log(weights.astype(np.float64))
            self.log_weight_spread = float(log_w.max() - log_w.min())
            log_w -= log_w.max()
            self.log_weights = log_w.astype(self.dtype)
        # float32 logits are in base 2: exp2 of float32 runs about 1.6 times
        # as fast as exp (float64's about as fast), and the factor log2(e)
        # rides in the key matrix for free.
        self.base2 = self.narrow and kernel.log_quadratic is not None
        self.logit_scale = 1.0 / np.log(2.0) if self.base2 else 1.0
        if kernel.log_quadratic is not None:
            # [q, 1, |q|^2] . [-2c k, c |k|^2 + log w, c] = c ||q - k||^2 + log w:
            # the gaussian logits, at most 0, straight out of the GEMM.
            c = kernel.log_quadratic * self.logit_scale
            log_w = log_w * self.logit_scale
            self.logit_matrix = self._stack(
                -2.0 * c * keys.T, c * key_sq + log_w, c * ones
            )
            self.log_w = log_w
        self.logit_floor = _LOGIT_FLOOR.get(self.dtype)
        # A row of unshifted logits whose weights sum below this has
        # underflowed: it is recomputed with its maximum subtracted.
        self.tiny = float(np.finfo(self.dtype).tiny) ** 0.8

    def _stack(self, *rows):
        """A key matrix in float64 and, for float32 work, in float32 too."""
        wide = np.ascontiguousarray(np.vstack(rows), dtype=np.float64)
        return wide, wide.astype(self.dtype)

    @property
    def narrow(self):
        """Whether the scores are float32, with products that may widen."""
        return self.dtype != np.float64

    def padded(self, n):
        """``n`` rounded up to a whole number of blocks."""
        return -(-n // self.block_rows) * self.block_rows

    def whole_blocks(self, rows, n):
        """Every row of the blocks that hold ``rows``, among ``n`` rows."""
        b = self.block_rows
        starts = np.unique(rows // b) * b
        every = (starts[:, None] + np.arange(b)).ravel()
        return every[every < n]

    def _blocks(self, n):
        return (slice(i, i + self.block_rows) for i in range(0, n, self.block_rows))

    def _widen(self, Q1, logits):
        """The rows whose float32 product would round too much.

        Decided for each row alone, from its squared norm: against the
        largest key for squared distances, against the keys near the query
        for the gaussian's ``logits`` (see ``_FLOAT32_MAX_LOGIT_ROUNDING``).
        """
        eps = float(np.finfo(self.dtype).eps)
        if logits:
            reach = 2.0 * np.sqrt(Q1[:, -1]) + 2.0
            bound = eps * -self.kernel.log_quadratic * reach**2
            return bound > _FLOAT32_MAX_LOGIT_ROUNDING
        return eps * (Q1[:, -1] + self.key_sq_max) > _FLOAT32_MAX_CANCELLATION

    def _product(self, Q1, matrices, out, wide, logits=False):
        """``Q1 @ matrix`` into ``out``, in float64 where float32 cancels.

        ``Q1`` has a whole number of blocks of rows. Whether a row's float32
        product widens is decided for that row alone.
        """
        matrix64, matrix = matrices
        if not self.narrow:
            for block in self._blocks(len(Q1)):
                np.matmul(Q1[block], matrix64, out=out[block])
            return out
        widen = self._widen(Q1, logits)
        Q1_narrow = None if widen.all() else Q1.astype(self.dtype)
        for block in self._blocks(len(Q1)):
            rows, o = widen[block], out[block]
            if not rows.all():
                np.matmul(Q1_narrow[block], matrix, out=o)
            if rows.any():
                w = np.matmul(Q1[block], matrix64, out=wide[block])
                if rows.all():
                    np.copyto(o, w, casting="same_kind")
                else:
                    o[rows] = w[rows]
        return out

    def far_rows(self, Q1):
        """The rows whose BLAS distances may round by more than the limit.

        The limit is ``_MAX_DISTANCE_ROUNDING`` squared bandwidths, in
        float64: float32 work widens the products of such rows anyway.
        """
        eps = float(np.finfo(np.float64).eps)
        return np.flatnonzero(3.0 * eps * Q1[:, -1] > _MAX_DISTANCE_ROUNDING)

    def exact_squared_distances(self, Q):
        """``||q - k||^2`` of the rows ``Q`` from exact differences (float64)."""
        return pairwise_squared(Q, self.keys, None)

    def _fix_far_rows(self, Q1, out, scale=1.0, shift=None):
        """Overwrite the far rows of a product with exact distances.

        The product was ``scale * ||q - k||^2 (+ shift)``. The rows go a few
        at a time, so that the temporaries stay small.
        """
        rows = self.far_rows(Q1)
        step = max(1, _EXACT_BYTES // (8 * max(len(self.keys), 1)))
        for start in range(0, len(rows), step):
            some = rows[start : start + step]
            exact = self.exact_squared_distances(Q1[some, : self.n_features])
            if scale != 1.0:
                exact *= scale
            if shift is not None:
                exact += shift
            out[some] = exact
        return out

    def pool(self, scores, pool_matrix):
        """``scores @ pool_matrix`` in blocks; ``scores`` has whole blocks."""
        dtype = np.result_type(scores, pool_matrix)
        out = np.empty((len(scores), pool_matrix.shape[1]), dtype=dtype)
        for block in self._blocks(len(scores)):
            np.matmul(scores[block], pool_matrix, out=out[block])
        return out

    @property
    def weights_folded(self):
        """Whether the scores include the sample weights (the log forms)."""
        return self.log_weights is not None

    @property
    def may_underflow(self):
        """Whether rows of ``scores(..., stable=False)`` can underflow."""
        return self.logit_matrix is not None

    def augment(self, Q, out):
        """Write ``[Q, 1, |Q|^2]`` into float64 ``out``, padded with zeros.

        ``out`` has ``padded(len(Q))`` rows and n_features + 2 columns.
        """
        d, n = self.n_features, len(Q)
        out[:n, :d] = Q
        out[:n, d] = 1.0
        np.einsum("ij,ij->i", Q, Q, out=out[:n, d + 1])
        out[n:] = 0.0
        return out

    def squared_distances(self, Q1, out, wide=None):
        """Squared distances of the augmented queries to every key.

        ``wide`` is a float64 buffer of the shape of ``out`` for float32 work.
        """
        self._product(Q1, self.distance_matrix, out, wide)
        self._fix_far_rows(Q1, out)
        return np.maximum(out, 0.0, out=out)

    def candidates(self, Q1, scaled, out, wide=None):
        """(rows, cols) pairs that hold the nearest keys of the augmented
        queries ``Q1``, whose scaled (uncentred) coordinates are ``scaled``.

        Every key within the rounding of the BLAS distances
        (:func:`._exact.squared_slack`, bounded per query with the largest
        key, so that no temporary has the size of the chunk) of the smallest
        one is a candidate.
        """
        n = len(scaled)
        d2 = self.squared_distances(Q1, out, wide)[:n]
        nearest = d2.min(axis=1, keepdims=True)
        slack = squared_slack(
            self.dtype,
            Q1[:n, -1][:, None] + self.key_sq_max,
            self.exact.query_coordinates(scaled)[:, None],
            np.sqrt(nearest),
            self.n_features,
        )
        return np.nonzero(d2 <= nearest + slack)

    def _rounding(self, Q1):
        """Bound on the rounding of each row's logits by the product, in the
        units of the logits (base 2 for float32)."""
        eps = float(np.finfo(self.dtype).eps)
        c = -self.kernel.log_quadratic * self.logit_scale
        return eps * c * (Q1[:, -1] + self.key_sq_max)

    def _needs_floor(self, Q1):
        """Whether logits of this chunk can fall below the fast range of exp."""
        if self.logit_floor is None:
            return False
        farthest = float(np.sqrt(Q1[:, -1].max())) + self.key_radius
        spread = -self.kernel.log_function(farthest) + self.log_weight_spread
        return spread > -self.logit_floor

    def kernel_in_place(self, out):
        """The kernel of the squared scaled distances ``out``, in place
        (a user kernel's rows rescaled to a largest score of one)."""
        kernel = self.kernel
        if self.user_kernel:
            np.sqrt(out, out=out)
            alpha = check_kernel_output(kernel.name, out, kernel.function(out))
            out[...] = _rescale_rows(alpha)
        elif kernel.squared_function is not None:
            kernel.squared_function(out)
        else:
            np.sqrt(out, out=out)
            out[...] = kernel.function(out)
        return out

    def scores(
        self, Q1, out, wide=None, stable=False, exact=None, categorical=None, r2=None
    ):
        """Fill ``out`` (n_queries, n_keys) with the kernel scores.

        ``Q1`` holds the augmented queries. For kernels with a log form the
        scores are ``w alpha(u)`` up to a factor per query: the gaussian's
        come straight from its logits unless ``stable``, the others (and the
        gaussian when ``stable``) as a softmax with the row maximum
        subtracted, which cannot underflow. Other kernels give ``alpha(u)``
        without the weights.

        ``exact``, the unscaled and scaled queries of the chunk, has the
        pairs near the edge of a compact support decided exactly.

        ``categorical``, the factor of the chunk's categorical features
        (:mod:`._categorical`), multiplies the scores: added to the logits
        of the log forms before their maximum is taken, so that a row's
        softmax is over the keys it weighs.

        ``r2``, each query's squared scale under adaptive widths
        (:mod:`._adaptive`), divides its squared distances (log forms then
        as a softmax); a query of scale zero gets its coincident keys.
        """
        kernel = self.kernel
        direct = self.logit_matrix is not None and r2 is None
        if self.log_weights is None or not direct:
            self.squared_distances(Q1, out, wide)
            if r2 is not None:
                r2 = _adaptive.divide_rows(out, r2)
            if exact is not None and kernel.is_compact:
                raw, scaled = exact
                n = len(raw)
                squares = Q1[:n, -1] + self.key_sq_max
                if r2 is None:
                    self.exact.redecide(out[:n], raw, scaled, kernel.support, squares)
                else:
                    _adaptive.redecide(out[:n], squares, exact, self.exact, kernel, r2)
            if self.log_weights is None:
                self.kernel_in_place(out)
                if categorical is not None:
                    categorical.multiply(out)
                return _adaptive.coincident(self, out, exact, categorical, r2)
            kernel.squared_log_function(out)
            out += self.log_weights
            stable = True
        else:
            self._product(Q1, self.logit_matrix, out, wide, logits=True)
            c = self.kernel.log_quadratic * self.logit_scale
            self._fix_far_rows(Q1, out, c, self.log_w)
            # Logits are <= 0, but the product rounds by about
            # eps * (|q|^2 + |k|^2) / 2: where that could reach the range of
            # exp (rows hundreds of millions of bandwidths from the keys),
            # the row is clamped so that exp cannot overflow.
            far = self._rounding(Q1) > _MAX_LOGIT_ROUNDING
            if far.any():
                out[far] = np.minimum(out[far], 0.0)
        base2 = direct and self.base2
        finite = True
        if categorical is not None:
            categorical.add_log(out, scale=self.logit_scale if base2 else 1.0)
            if categorical.excludes:
                finite = out > -np.inf  # pairs of a differing lambda-0 feature
        if stable:
            top = out.max(axis=1, keepdims=True)
            if finite is not True:
                top[~np.isfinite(top)] = 0.0  # rows that weigh no key
            out -= top
        if r2 is not None or self._needs_floor(Q1):
            if self.logit_floor is not None:
                np.maximum(out, self.logit_floor, out=out, where=finite)
        if base2:
            return np.exp2(out, out=out)
        np.exp(out, out=out)
        return _adaptive.coincident(self, out, exact, categorical, r2)
