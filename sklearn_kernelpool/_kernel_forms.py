"""The private forms of the registered kernels: ``log(alpha)``, ``alpha``
and ``log(alpha)`` of the squared scaled distance, and those written with
the array API namespace ``xp`` (:class:`.kernels.Kernel`).

They are kept importable from :mod:`.kernels` too, where the pickles of
earlier releases name them.
"""

import numpy as np


def _log_gaussian(x):
    return -0.5 * x * x


def _log_exponential(x):
    return -np.abs(x)


def _log_cauchy(x):
    return -np.log1p(x * x)


# In-place forms of the squared scaled distance ``s = x**2`` (``s >= 0``),
# used by the pooling engine on its reused buffers.
def _sq_log_gaussian(s):
    return np.multiply(s, -0.5, out=s)


def _sq_log_exponential(s):
    np.sqrt(s, out=s)
    return np.negative(s, out=s)


def _sq_log_cauchy(s):
    np.log1p(s, out=s)
    return np.negative(s, out=s)


def _sq_boxcar(s):
    return np.less(s, 1.0, out=s, casting="unsafe")


def _sq_constant(s):
    s.fill(1.0)
    return s


def _clipped_one_minus(s):
    np.subtract(1.0, s, out=s)
    return np.maximum(s, 0.0, out=s)


def _sq_epanechikov(s):
    np.sqrt(s, out=s)
    return _clipped_one_minus(s)


def _sq_epanechnikov(s):
    return _clipped_one_minus(s)


def _sq_biweight(s):
    return np.square(_clipped_one_minus(s), out=s)


def _sq_triweight(s):
    return np.power(_clipped_one_minus(s), 3, out=s)


def _sq_tricube(s):
    np.power(s, 1.5, out=s)
    return np.power(_clipped_one_minus(s), 3, out=s)


def _sq_cosine(s):
    outside = s >= 1.0
    np.sqrt(s, out=s)
    np.multiply(s, np.pi / 2, out=s)
    np.cos(s, out=s)
    s[outside] = 0.0
    return s


# Forms of the squared scaled distance ``s`` (``s >= 0``) in the operations
# of an array API namespace ``xp``, for the array API path of the engine:
# ``log(alpha)`` for the kernels with a log form, ``alpha`` for the others.
def _xp_clipped_one_minus(s, xp):
    return xp.clip(1.0 - s, min=0.0)


def _xp_log_gaussian(s, xp):
    return -0.5 * s


def _xp_log_exponential(s, xp):
    return -xp.sqrt(s)


def _xp_log_cauchy(s, xp):
    return -xp.log1p(s)


def _xp_boxcar(s, xp):
    return xp.astype(s < 1.0, s.dtype)


def _xp_constant(s, xp):
    return xp.ones_like(s)


def _xp_epanechikov(s, xp):
    return _xp_clipped_one_minus(xp.sqrt(s), xp)


def _xp_biweight(s, xp):
    return _xp_clipped_one_minus(s, xp) ** 2


def _xp_triweight(s, xp):
    return _xp_clipped_one_minus(s, xp) ** 3


def _xp_tricube(s, xp):
    return _xp_clipped_one_minus(s * xp.sqrt(s), xp) ** 3


def _xp_cosine(s, xp):
    inside = xp.cos(xp.sqrt(xp.clip(s, max=1.0)) * (np.pi / 2))
    return xp.where(s < 1.0, inside, xp.zeros_like(s))


_XP_SQUARED = {
    "gaussian": _xp_log_gaussian,
    "exponential": _xp_log_exponential,
    "cauchy": _xp_log_cauchy,
    "boxcar": _xp_boxcar,
    "constant": _xp_constant,
    "epanechikov": _xp_epanechikov,
    "epanechnikov": _xp_clipped_one_minus,
    "biweight": _xp_biweight,
    "triweight": _xp_triweight,
    "tricube": _xp_tricube,
    "cosine": _xp_cosine,
}
