"""The types a fitted estimator of the package may hold, for skops."""

from ._binned._grid_pool import GridPool
from ._binned._pool import BinnedKernelPool
from ._classification import KernelAttentionClassifier
from ._classification_cv import KernelAttentionClassifierCV
from ._cv import KernelAttentionRegressorCV
from ._engine._pooling import KernelPool
from ._estimator._linear_columns import LinearDesign
from ._projection import KernelAttentionProjection
from ._quantile import KernelAttentionQuantileRegressor
from ._regression import KernelAttentionRegressor
from .kernels import _REGISTRY, Kernel

#: The public estimators (``tests/test_persistence.py`` checks that every
#: estimator of ``__all__`` is here).
ESTIMATORS = (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionProjection,
    KernelAttentionQuantileRegressor,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)

# The paths of the engines before the package took subpackages, which the
# files of earlier releases name (the modules there are silent shims), and
# the modules that held the kernels' private forms.
_FORMER_PATHS = {
    KernelPool: "sklearn_kernelpool._pooling",
    BinnedKernelPool: "sklearn_kernelpool._binned_pool",
    GridPool: "sklearn_kernelpool._grid_pool",
}
_FORMER_FORMS = ("sklearn_kernelpool.kernels", "sklearn_kernelpool._kernel_forms")

# Types of other packages that a fitted estimator of the package holds: the
# dtype of the predictions of a model fitted on dask arrays
# (:class:`._binned._grid_pool.GridPool`).
_OTHER_TYPES = ("numpy.dtype",)


def _package_classes():
    """The classes a fitted estimator of the package may hold: the public
    estimators, their engines, :class:`.kernels.Kernel` and the encoding of
    the linear columns of a partially linear fit.

    Each engine saves only what rebuilds it (see ``KernelPool.__getstate__``):
    no tree, and no type of another package but :data:`_OTHER_TYPES`.
    """
    return [*ESTIMATORS, KernelPool, BinnedKernelPool, GridPool, Kernel, LinearDesign]


def _kernel_functions():
    """The qualified names of the functions of every registered kernel."""
    for kernel in _REGISTRY:
        for function in (
            kernel.function,
            kernel.log_function,
            kernel.squared_function,
            kernel.squared_log_function,
            kernel.xp_squared_function,
        ):
            if function is not None:
                yield f"{function.__module__}.{function.__qualname__}"
                # The private forms lived in other modules before.
                for module in _FORMER_FORMS:
                    yield f"{module}.{function.__qualname__}"


def skops_trusted_types():
    """The types to trust when loading an estimator of the package with skops.

    :func:`skops.io.load` refuses any type it does not know to be safe unless
    it is listed in ``trusted``. This list names every type a fitted
    estimator of the package may hold, whatever its kernel, path or degree:
    the estimators (the cross-validated ones included), the engines (that of
    a model fitted on dask arrays with ``algorithm="binned"`` included, with
    the NumPy dtype of its predictions), the registered kernels and their
    functions, each under its path and the path of earlier releases.
    The engine saves only its training data and parameters, which loading
    checks (shapes, dtypes, finiteness, the kernel) before it rebuilds the
    engine, trees included, as ``fit`` built it. A user-defined kernel is
    not in the list: trust it by name after checking it with
    :func:`skops.io.get_untrusted_types`.

    Returns
    -------
    trusted : list of str
        Qualified type names, sorted, for ``skops.io.load(..., trusted=...)``.

    See Also
    --------
    skops.io.get_untrusted_types : The types a file holds that skops does not
        trust by default.

    Notes
    -----
    Only trust a file from a source you trust: this list says which types
    the package may hold, not that a file holding them is harmless.

    Examples
    --------
    >>> from sklearn_kernelpool import skops_trusted_types
    >>> "sklearn_kernelpool._regression.KernelAttentionRegressor" in (
    ...     skops_trusted_types()
    ... )
    True

    With skops installed, an estimator is saved and loaded so::

        import skops.io
        skops.io.dump(estimator, "estimator.skops")
        estimator = skops.io.load(
            "estimator.skops", trusted=skops_trusted_types()
        )
    """
    classes = _package_classes()
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in classes}
    names |= {f"{_FORMER_PATHS[cls]}.{cls.__qualname__}" for cls in _FORMER_PATHS}
    return sorted({*names, *_OTHER_TYPES, *_kernel_functions()})
