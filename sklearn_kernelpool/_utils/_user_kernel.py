"""User kernels (callables) checked: in fit on a small probe, and on every
chunk of scaled distances they weigh (:mod:`.._engine._brute`)."""

import numpy as np


class KernelShapeError(ValueError):
    """A user kernel that did not return one weight per scaled distance.

    Raised by :func:`check_kernel_output` on a chunk of queries, whose shape
    means nothing to the user; :meth:`for_call` gives the error in the terms
    of the call (its numbers of queries and keys).
    """

    def __init__(self, name, x, alpha):
        self.name = name
        if alpha.ndim != 2:
            self.returned = f"a {alpha.ndim}-D array"
        elif alpha.shape[1] != x.shape[1]:
            self.returned = f"{alpha.shape[1]} weight(s) per query"
        else:
            self.returned = "another number of rows than of queries"
        super().__init__(
            self.message(f"for {x.shape[0]} queries and {x.shape[1]} keys")
        )

    def message(self, where):
        """The error, ``where`` saying on which queries and keys."""
        return (
            f"The kernel {self.name!r} must return an array of the shape of its "
            "input, the scaled distances of queries (rows) to keys (columns): "
            f"{where}, one weight per query and key; it returned "
            f"{self.returned}. Apply elementwise operations only (no "
            "reduction, reshape or indexing)."
        )

    def for_call(self, n_queries, n_keys):
        """This error for a call on ``n_queries`` queries and ``n_keys`` keys."""
        return ValueError(self.message(f"for {n_queries} queries and {n_keys} keys"))


def check_kernel_output(name, x, alpha):
    """Check what a user kernel returned for the scaled distances ``x``.

    Raises
    ------
    KernelShapeError
        If it is not of the shape of ``x``.
    ValueError
        If its weights are not real, finite and >= 0.
    """
    alpha = np.asarray(alpha)
    if alpha.shape != x.shape:
        raise KernelShapeError(name, x, alpha)
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


# The scaled distances a user kernel is tried on in fit: a (2, 3) array, so
# that a kernel that reduces, transposes or flattens its input shows it.
_PROBE = np.array([[0.0, 0.5, 1.0], [1.5, 2.0, 3.0]])


def check_kernel_callable(kernel, dtype):
    """Try a user kernel on a small array of scaled distances in ``dtype``.

    Refuses a kernel written for scalars (``math.exp``, ``if u < 1``) and one
    that does not keep the shape of its input, before any prediction.
    """
    name = getattr(kernel, "__name__", repr(kernel))
    try:
        alpha = kernel(_PROBE.astype(dtype))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"kernel={name!r} failed on an ndarray of scaled distances "
            f"({type(exc).__name__}: {exc}). A kernel callable receives a 2-D "
            "ndarray of scaled distances and must return the weights "
            "elementwise, as an array of the same shape: write it with NumPy "
            "functions (np.exp(-u) rather than math.exp(-u), np.where(u < 1, "
            "...) rather than if u < 1), or wrap a scalar function with "
            "np.vectorize."
        ) from exc
    if np.shape(alpha) != _PROBE.shape:
        n_queries, n_keys = _PROBE.shape
        error = KernelShapeError(name, _PROBE, np.asarray(alpha))
        where = f"fit tried it on {n_queries} queries and {n_keys} keys"
        raise ValueError(error.message(where))
