"""Attention kernels: functions of the scaled distance.

Every kernel is a function ``alpha(x)`` of the *scaled distance*
``x = ||q - k|| / h`` between a query ``q`` and a key ``k`` for a bandwidth
``h``. The functions take a Python scalar or an array-like and return a float
or an ndarray of the same shape. Normalising constants cancel in attention
pooling and are left out, so every kernel equals 1 at ``x = 0``.

Each kernel is registered once, in :data:`KERNELS`, as a :class:`Kernel`
holding its function, its support radius (``numpy.inf`` for unbounded
kernels) and, where it has one, its log form, which the pooling engine uses
for a numerically stable softmax.

Two names sound alike on purpose: ``"epanechikov"`` is the kernel
``max(1 - |x|, 0)`` of the Dive into Deep Learning chapter "Attention Pooling
by Similarity" (which is the triangular kernel), while ``"epanechnikov"`` is
the parabolic kernel ``max(1 - x**2, 0)`` of statistics, of scikit-learn's
:class:`~sklearn.neighbors.KernelDensity` and of statsmodels.

Examples
--------
>>> from sklearn_kernelpool import kernels
>>> kernels.gaussian(0.0)
1.0
>>> kernels.boxcar([0.5, 1.0, 2.0])
array([1., 0., 0.])
>>> kernels.KERNELS["tophat"].name
'boxcar'
>>> kernels.KERNELS["epanechikov"].support
1.0
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ._utils import _kernel_forms as _forms
from ._utils._kernel_forms import _vectorised


def __getattr__(name):
    # The private forms of the kernels were defined here: the pickles of
    # earlier releases name them in this module.
    if name.startswith(("_log_", "_sq_", "_xp_")):
        return getattr(_forms, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "KERNELS",
    "Kernel",
    "biweight",
    "boxcar",
    "cauchy",
    "constant",
    "cosine",
    "epanechikov",
    "epanechnikov",
    "exponential",
    "gaussian",
    "laplacian",
    "quartic",
    "tophat",
    "triangular",
    "tricube",
    "triweight",
    "uniform",
]


@_vectorised
def gaussian(x):
    """Gaussian kernel ``exp(-x**2 / 2)``; unbounded support.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import gaussian
    >>> round(gaussian(1.0), 6)
    0.606531
    """
    return np.exp(-0.5 * x * x)


@_vectorised
def boxcar(x):
    """Boxcar kernel ``1 if |x| < 1 else 0``; support radius 1 (strict).

    Also registered as ``"tophat"`` and ``"uniform"``.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import boxcar
    >>> boxcar([0.0, 0.999, 1.0])
    array([1., 1., 0.])
    """
    return (np.abs(x) < 1.0).astype(x.dtype)


@_vectorised
def constant(x):
    """Constant kernel ``1 + 0 * x``; every key gets the same weight.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import constant
    >>> constant([0.0, 1e6])
    array([1., 1.])
    """
    return np.ones_like(x)


@_vectorised
def epanechikov(x):
    """Triangular kernel ``max(1 - |x|, 0)``; support radius 1.

    This is the "Epanechikov" kernel as Dive into Deep Learning defines it.
    Also registered as ``"triangular"``. The classical parabolic kernel of
    statistics is :func:`epanechnikov`.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import epanechikov
    >>> epanechikov([0.0, 0.25, 1.0, 3.0])
    array([1.  , 0.75, 0.  , 0.  ])
    """
    return np.maximum(1.0 - np.abs(x), 0.0).astype(x.dtype, copy=False)


@_vectorised
def epanechnikov(x):
    """Parabolic (Epanechnikov) kernel ``max(1 - x**2, 0)``; support radius 1.

    The kernel of scikit-learn's ``KernelDensity(kernel="epanechnikov")`` and
    of statsmodels, up to its normalising constant. For the triangular kernel
    that Dive into Deep Learning calls "Epanechikov" see :func:`epanechikov`.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import epanechnikov
    >>> epanechnikov([0.0, 0.5, 1.0])
    array([1.  , 0.75, 0.  ])
    """
    return np.maximum(1.0 - x * x, 0.0).astype(x.dtype, copy=False)


@_vectorised
def biweight(x):
    """Biweight kernel ``max(1 - x**2, 0)**2``; support radius 1.

    Also registered as ``"quartic"``.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import biweight
    >>> biweight([0.0, 0.5, 1.0])
    array([1.    , 0.5625, 0.    ])
    """
    return (np.maximum(1.0 - x * x, 0.0) ** 2).astype(x.dtype, copy=False)


@_vectorised
def triweight(x):
    """Triweight kernel ``max(1 - x**2, 0)**3``; support radius 1.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import triweight
    >>> triweight([0.0, 0.5, 1.0])
    array([1.      , 0.421875, 0.      ])
    """
    return (np.maximum(1.0 - x * x, 0.0) ** 3).astype(x.dtype, copy=False)


@_vectorised
def tricube(x):
    """Tricube kernel ``max(1 - |x|**3, 0)**3``; support radius 1.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import tricube
    >>> tricube([0.0, 0.5, 1.0])
    array([1.        , 0.66992188, 0.        ])
    """
    a = np.abs(x)
    return (np.maximum(1.0 - a * a * a, 0.0) ** 3).astype(x.dtype, copy=False)


@_vectorised
def cosine(x):
    """Cosine kernel ``cos(pi * x / 2) if |x| < 1 else 0``; support radius 1.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import cosine
    >>> cosine([0.0, 1.0])
    array([1., 0.])
    """
    inside = np.abs(x) < 1.0
    return np.where(inside, np.cos((np.pi / 2) * x), 0.0).astype(x.dtype, copy=False)


@_vectorised
def exponential(x):
    """Exponential kernel ``exp(-|x|)``; unbounded support.

    Also registered as ``"laplacian"``.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import exponential
    >>> round(exponential(1.0), 6)
    0.367879
    """
    return np.exp(-np.abs(x))


@_vectorised
def cauchy(x):
    """Cauchy kernel ``1 / (1 + x**2)``; unbounded support.

    Parameters
    ----------
    x : float or array-like
        Scaled distance.

    Returns
    -------
    alpha : float or ndarray
        The attention weight, of the shape of ``x``.

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import cauchy
    >>> cauchy([0.0, 1.0, 3.0])
    array([1. , 0.5, 0.1])
    """
    return 1.0 / (1.0 + x * x)


# Aliases: the same function objects under their other names.
tophat = uniform = boxcar
triangular = epanechikov
quartic = biweight
laplacian = exponential


@dataclass(frozen=True)
class Kernel:
    """A registered attention kernel.

    Parameters
    ----------
    name : str
        The canonical name.
    function : callable
        ``alpha(x)``, a vectorised function of the scaled distance ``x``.
    support : float
        The support radius in units of the bandwidth: ``alpha(x) == 0`` for
        ``|x| >= support``. ``numpy.inf`` for kernels with unbounded support.
    log_function : callable or None
        ``log(alpha(x))`` for kernels that are positive everywhere, used to
        pool with a numerically stable softmax; None otherwise.
    aliases : tuple of str
        Other names the kernel is registered under.
    squared_function : callable or None
        ``alpha`` as a function of the squared scaled distance ``x**2``,
        allowed to overwrite its float array argument; lets the engine skip
        a square root. None to use ``function``.
    squared_log_function : callable or None
        ``log(alpha)`` as a function of ``x**2``, allowed to overwrite its
        argument. None to use ``log_function``.
    log_quadratic : float or None
        ``c`` when ``log(alpha(x)) == c * x**2`` (the gaussian's -1/2): the
        engine then computes the logits inside the distance product itself.
    xp_squared_function : callable or None
        ``f(s, xp)``: ``alpha`` (``log(alpha)`` for kernels with a log form)
        of the squared scaled distance ``s``, written with the operations of
        the array API namespace ``xp`` only; the array API path of the
        engine uses it for non-NumPy arrays (PyTorch, CuPy...).

    Examples
    --------
    >>> from sklearn_kernelpool.kernels import KERNELS
    >>> k = KERNELS["gaussian"]
    >>> k.is_compact
    False
    >>> KERNELS["biweight"].is_compact
    True
    """

    name: str
    function: Callable
    support: float
    log_function: Callable | None = None
    aliases: tuple = field(default=())
    squared_function: Callable | None = field(default=None, repr=False)
    squared_log_function: Callable | None = field(default=None, repr=False)
    log_quadratic: float | None = None
    xp_squared_function: Callable | None = field(default=None, repr=False)

    @property
    def log_slope(self):
        """``d log(alpha) / ds`` as a function of the squared scaled distance
        ``s = x**2``, or None for a kernel that is not registered (a user
        callable).

        For example ``-1/2`` for the gaussian, ``-1 / (1 + s)`` for the
        cauchy and ``-k / (1 - s)`` for ``(1 - s)**k``; valid inside the
        support. Where ``alpha`` has a cusp at 0 (:attr:`cusp`), the slope
        there is the symmetric subgradient 0. The gradients of the
        predictions and the learned widths ask the kernel for it.
        """
        form = self._registered_form()
        return None if form is None else form[0]

    @property
    def cusp(self):
        """Whether ``alpha`` has a cusp at 0: its slope in ``s`` is unbounded
        there (the exponential, ``1 - |x|``)."""
        form = self._registered_form()
        return False if form is None else form[1]

    def _registered_form(self):
        registered = KERNELS.get(self.name)
        if registered is None or registered != self:
            return None
        return _forms.LOG_SLOPES[self.name]

    @property
    def is_compact(self):
        """Whether the kernel vanishes beyond a finite support radius."""
        return bool(np.isfinite(self.support))

    @property
    def is_constant(self):
        """Whether ``alpha`` is the same at every distance (the constant
        kernel): its local fits are the global weighted fits, and its
        degree-1 fit the weighted least-squares line."""
        form = self._registered_form()
        return not self.is_compact and form is not None and form[0] is _forms.FLAT

    def __call__(self, x):
        return self.function(x)


_REGISTRY = (
    Kernel(
        "gaussian",
        gaussian,
        np.inf,
        _forms._log_gaussian,
        squared_log_function=_forms._sq_log_gaussian,
        log_quadratic=-0.5,
    ),
    Kernel("boxcar", boxcar, 1.0, None, ("tophat", "uniform"), _forms._sq_boxcar),
    Kernel("constant", constant, np.inf, None, (), _forms._sq_constant),
    Kernel(
        "epanechikov", epanechikov, 1.0, None, ("triangular",), _forms._sq_epanechikov
    ),
    Kernel("epanechnikov", epanechnikov, 1.0, None, (), _forms._sq_epanechnikov),
    Kernel("biweight", biweight, 1.0, None, ("quartic",), _forms._sq_biweight),
    Kernel("triweight", triweight, 1.0, None, (), _forms._sq_triweight),
    Kernel("tricube", tricube, 1.0, None, (), _forms._sq_tricube),
    Kernel("cosine", cosine, 1.0, None, (), _forms._sq_cosine),
    Kernel(
        "exponential",
        exponential,
        np.inf,
        _forms._log_exponential,
        ("laplacian",),
        squared_log_function=_forms._sq_log_exponential,
    ),
    Kernel(
        "cauchy",
        cauchy,
        np.inf,
        _forms._log_cauchy,
        squared_log_function=_forms._sq_log_cauchy,
    ),
)

_REGISTRY = tuple(
    replace(kernel, xp_squared_function=_forms._XP_SQUARED[kernel.name])
    for kernel in _REGISTRY
)

#: Every kernel by name, aliases included, mapped to its :class:`Kernel`.
KERNELS = {
    name: kernel for kernel in _REGISTRY for name in (kernel.name, *kernel.aliases)
}
