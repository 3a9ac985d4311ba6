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

    Each chunk costs one GEMM of the queries, augmented with a column of
    ones, against a (n_features + 1, n_keys) key matrix, then in-place
    passes over the (n_queries, n_keys) buffer.

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
        self.n_keys = keys.shape[0]
        key_sq = np.einsum("ij,ij->i", keys, keys)
        # [q, 1] . [-2 k, |k|^2] = ||q - k||^2 - |q|^2
        self.distance_matrix = self._stack(-2.0 * keys.T, key_sq)
        self.log_weights = None
        self.logit_matrix = None
        if kernel.log_function is not None:
            self.log_weights = np.log(weights).astype(self.dtype)
        if kernel.log_quadratic is not None:
            # c ||q - k||^2 + log w = c |q|^2 + [q, 1] . [-2c k, c |k|^2 + log w]:
            # the logits up to a per-query constant, which the softmax drops.
            c = kernel.log_quadratic
            self.logit_matrix = self._stack(
                -2.0 * c * keys.T, c * key_sq + np.log(weights)
            )
        self.logit_floor = _LOGIT_FLOOR.get(self.dtype)

    def _stack(self, rows, last):
        return np.ascontiguousarray(np.vstack([rows, last]), dtype=self.dtype)

    @property
    def weights_folded(self):
        """Whether the scores include the sample weights (the log forms)."""
        return self.log_weights is not None

    def augment(self, Q, out):
        """Write ``[Q, 1]`` into ``out`` of shape (n_queries, n_features + 1)."""
        out[:, : self.n_features] = Q
        out[:, self.n_features] = 1.0
        return out

    def squared_distances(self, Q, Q1, out):
        """Squared distances of the queries to every key, into ``out``."""
        np.matmul(Q1, self.distance_matrix, out=out)
        out += np.einsum("ij,ij->i", Q, Q)[:, None]
        return np.maximum(out, 0.0, out=out)

    def scores(self, Q, Q1, out):
        """Fill ``out`` (n_queries, n_keys) with the kernel scores of ``Q``.

        ``Q1`` is ``[Q, 1]``. For kernels with a log form the scores are the
        softmax numerators ``exp(log w + log alpha - row maximum)``, sample
        weights included; otherwise they are ``alpha(u)`` without them.
        """
        kernel = self.kernel
        if self.logit_matrix is not None:
            np.matmul(Q1, self.logit_matrix, out=out)
        else:
            self.squared_distances(Q, Q1, out)
            if self.log_weights is not None:
                kernel.squared_log_function(out)
                out += self.log_weights
            elif self.user_kernel:
                np.sqrt(out, out=out)
                out[...] = check_kernel_output(kernel.name, out, kernel.function(out))
                return out
            elif kernel.squared_function is not None:
                return kernel.squared_function(out)
            else:
                np.sqrt(out, out=out)
                out[...] = kernel.function(out)
                return out
        out -= out.max(axis=1, keepdims=True)
        if self.logit_floor is not None:
            np.maximum(out, self.logit_floor, out=out)
        return np.exp(out, out=out)
