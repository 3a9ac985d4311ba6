"""The brute-force path: every query against every key, by BLAS."""

import numpy as np

# exp() of float64 arguments below about -708 leaves the fast path of libm to
# produce subnormals or zero. Logits more than this far below their row's
# maximum weigh less than 1e-304 of the largest weight, far below rounding,
# and are clamped so that exp stays fast. float32 has no such slow path.
_LOGIT_FLOOR = {np.dtype(np.float64): -700.0}


def check_kernel_output(name, x, alpha):
    """Check what a user kernel returned for the scaled distances ``x``."""
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
    return alpha


class BruteScorer:
    """Kernel scores of chunks of queries against every key.

    Each chunk costs one GEMM of the augmented queries ``[q, 1, |q|^2]``
    against a (n_features + 2, n_keys) key matrix, then in-place passes over
    the (n_queries, n_keys) buffer.

    Parameters
    ----------
    keys : ndarray of shape (n_keys, n_features)
        Scaled, centred keys of positive weight.
    weights : ndarray of shape (n_keys,)
        Their positive sample weights.
    kernel : Kernel
        The kernel.
    user_kernel : bool
        Whether the kernel is a user callable, whose output is checked.
    """

    def __init__(self, keys, weights, kernel, user_kernel):
        self.kernel = kernel
        self.user_kernel = user_kernel
        self.dtype = keys.dtype
        self.n_features = keys.shape[1]
        key_sq = np.einsum("ij,ij->i", keys, keys)
        self.key_radius = float(np.sqrt(key_sq.max()))
        ones = np.ones_like(key_sq)
        # [q, 1, |q|^2] . [-2 k, |k|^2, 1] = ||q - k||^2
        self.distance_matrix = self._stack(-2.0 * keys.T, key_sq, ones)
        self.log_weights = self.logit_matrix = None
        if kernel.log_function is not None:
            log_w = np.log(weights.astype(np.float64))
            self.log_weight_spread = float(log_w.max() - log_w.min())
            log_w -= log_w.max()
            self.log_weights = log_w.astype(self.dtype)
        if kernel.log_quadratic is not None:
            # [q, 1, |q|^2] . [-2c k, c |k|^2 + log w, c] = c ||q - k||^2 + log w:
            # the gaussian logits, at most 0, straight out of the GEMM.
            c = kernel.log_quadratic
            self.logit_matrix = self._stack(
                -2.0 * c * keys.T, c * key_sq + log_w, c * ones
            )
        self.logit_floor = _LOGIT_FLOOR.get(self.dtype)
        # A row of unshifted logits whose weights sum below this has
        # underflowed: it is recomputed with its maximum subtracted.
        self.tiny = float(np.finfo(self.dtype).tiny) ** 0.8

    def _stack(self, *rows):
        return np.ascontiguousarray(np.vstack(rows), dtype=self.dtype)

    @property
    def weights_folded(self):
        """Whether the scores include the sample weights (the log forms)."""
        return self.log_weights is not None

    @property
    def may_underflow(self):
        """Whether rows of ``scores(..., stable=False)`` can underflow."""
        return self.logit_matrix is not None

    def augment(self, Q, out):
        """Write ``[Q, 1, |Q|^2]`` into ``out`` (n_queries, n_features + 2)."""
        d = self.n_features
        out[:, :d] = Q
        out[:, d] = 1.0
        np.einsum("ij,ij->i", Q, Q, out=out[:, d + 1])
        return out

    def squared_distances(self, Q1, out):
        """Squared distances of the augmented queries to every key."""
        np.matmul(Q1, self.distance_matrix, out=out)
        return np.maximum(out, 0.0, out=out)

    def _needs_floor(self, Q1):
        """Whether logits of this chunk can fall below the fast range of exp."""
        if self.logit_floor is None:
            return False
        farthest = np.sqrt(Q1[:, -1].max()) + self.key_radius
        spread = -self.kernel.log_function(farthest) + self.log_weight_spread
        return spread > -self.logit_floor

    def scores(self, Q1, out, stable=False):
        """Fill ``out`` (n_queries, n_keys) with the kernel scores.

        ``Q1`` holds the augmented queries. For kernels with a log form the
        scores are ``w alpha(u)`` up to a factor per query: the gaussian's
        come straight from its logits unless ``stable``, the others (and the
        gaussian when ``stable``) as a softmax with the row maximum
        subtracted, which cannot underflow. Other kernels give ``alpha(u)``
        without the weights.
        """
        kernel = self.kernel
        if self.log_weights is None:
            self.squared_distances(Q1, out)
            if self.user_kernel:
                np.sqrt(out, out=out)
                out[...] = check_kernel_output(kernel.name, out, kernel.function(out))
            elif kernel.squared_function is not None:
                kernel.squared_function(out)
            else:
                np.sqrt(out, out=out)
                out[...] = kernel.function(out)
            return out
        if self.logit_matrix is not None:
            np.matmul(Q1, self.logit_matrix, out=out)
        else:
            self.squared_distances(Q1, out)
            kernel.squared_log_function(out)
            out += self.log_weights
            stable = True
        if stable:
            out -= out.max(axis=1, keepdims=True)
        if self._needs_floor(Q1):
            np.maximum(out, self.logit_floor, out=out)
        return np.exp(out, out=out)
