"""The private forms of the registered kernels: ``log(alpha)``, ``alpha``
and ``log(alpha)`` of the squared scaled distance, and those written with
the array API namespace ``xp`` (:class:`..kernels.Kernel`).

They are kept importable from :mod:`..kernels` and ``.._kernel_forms``,
where the pickles of earlier releases name them.
"""

import numpy as np


def _as_float_array(x):
    """Return ``x`` as a floating ndarray, keeping float32 and float64."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    return x


def _vectorised(func):
    """Let ``func`` accept a scalar or an array-like; a scalar gives a float."""

    def wrapper(x):
        is_scalar = np.ndim(x) == 0
        # exp(-x**2 / 2) and 1 / (1 + x**2) reach their limit 0 through an
        # overflowing x**2 for huge x; that limit is the right answer.
        with np.errstate(over="ignore"):
            out = func(_as_float_array(x))
        return float(out) if is_scalar else out

    wrapper.__name__ = func.__name__
    wrapper.__qualname__ = func.__qualname__
    wrapper.__doc__ = func.__doc__
    wrapper.__module__ = func.__module__
    return wrapper


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


# -- d log(alpha) / ds, of the squared scaled distance s = u**2 -----------------
# Valid inside the support (s < 1 for the compact kernels). The cusps at
# u = 0 (exponential, epanechikov) get the symmetric subgradient 0; the
# boxcar's jump at its edge is a Dirac term left out (0 almost everywhere).


def _slope_gaussian(s):
    return np.full_like(np.asarray(s, dtype=np.float64), -0.5)


def _slope_flat(s):
    return np.zeros_like(np.asarray(s, dtype=np.float64))


#: The log slope of the kernels that are flat inside their support.
FLAT = _slope_flat


def _slope_cauchy(s):
    return -1.0 / (1.0 + s)


def _slope_exponential(s):
    # alpha = exp(-u): -1 / (2 u).
    u = np.sqrt(s)
    return np.where(u > 0, -0.5 / np.where(u > 0, u, 1.0), 0.0)


def _slope_epanechikov(s):
    # alpha = 1 - u: -1 / (2 u (1 - u)).
    u = np.sqrt(s)
    safe = np.where(u > 0, u, 1.0) * (1.0 - u)
    return np.where(u > 0, -0.5 / safe, 0.0)


def _slope_power(k):
    # alpha = (1 - s)**k: -k / (1 - s).
    def slope(s):
        return -k / (1.0 - np.asarray(s, dtype=np.float64))

    slope.__qualname__ = f"_slope_power_{k}"
    return slope


def _slope_tricube(s):
    # alpha = (1 - u**3)**3: -9 u**2 / (1 - u**3) du/ds = -4.5 u / (1 - u**3).
    u = np.sqrt(s)
    return -4.5 * u / (1.0 - u * u * u)


def _slope_cosine(s):
    # alpha = cos(t), t = pi u / 2: -(pi / 2)**2 tan(t) / (2 t).
    t = (np.pi / 2) * np.sqrt(s)
    ratio = np.where(t > 0, np.tan(t) / np.where(t > 0, t, 1.0), 1.0)
    return -((np.pi / 2) ** 2) * ratio / 2.0


#: ``(d log(alpha) / ds, cusp)`` of every registered kernel: the derivative
#: as a function of ``s``, and whether ``alpha`` has a cusp at ``u = 0``
#: (its slope in ``s`` unbounded there).
LOG_SLOPES = {
    "gaussian": (_slope_gaussian, False),
    "boxcar": (_slope_flat, False),
    "constant": (_slope_flat, False),
    "epanechikov": (_slope_epanechikov, True),
    "epanechnikov": (_slope_power(1), False),
    "biweight": (_slope_power(2), False),
    "triweight": (_slope_power(3), False),
    "tricube": (_slope_tricube, False),
    "cosine": (_slope_cosine, False),
    "exponential": (_slope_exponential, True),
    "cauchy": (_slope_cauchy, False),
}
