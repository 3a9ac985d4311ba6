"""Persistence: what a fitted estimator needs to be saved and loaded again."""

import copy
import pickle

from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .kernels import _REGISTRY

# The classes a fitted estimator of the package holds, by qualified name.
_PACKAGE_TYPES = (
    "sklearn_kernelpool._brute.BruteScorer",
    "sklearn_kernelpool._classification.KernelAttentionClassifier",
    "sklearn_kernelpool._cv.KernelAttentionRegressorCV",
    "sklearn_kernelpool._pooling.KernelPool",
    "sklearn_kernelpool._regression.KernelAttentionRegressor",
    "sklearn_kernelpool._tree.SortedKeys",
    "sklearn_kernelpool._tree.TreeScorer",
    "sklearn_kernelpool.kernels.Kernel",
)
# The trees of the tree paths and the metric they hold, and the dtype of the
# engine's work.
_DEPENDENCY_TYPES = (
    "numpy.dtype",
    "sklearn.metrics._dist_metrics.EuclideanDistance64",
    "sklearn.neighbors._ball_tree.BallTree",
    "sklearn.neighbors._kd_tree.KDTree",
)


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


def skops_trusted_types():
    """The types to trust when loading an estimator of the package with skops.

    :func:`skops.io.load` refuses any type it does not know to be safe unless
    it is listed in ``trusted``. This list names every type a fitted
    estimator of the package may hold, whatever its kernel, path or degree:
    the estimators, the engine, the registered kernels and their functions,
    and the scikit-learn trees of the tree paths. A user-defined kernel is
    not in it: trust it by name after checking it with
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
    return sorted({*_PACKAGE_TYPES, *_DEPENDENCY_TYPES, *_kernel_functions()})


def check_picklable_kernel(estimator):
    """Refuse to pickle a fitted estimator whose kernel pickle cannot save.

    A lambda or a function defined inside another cannot be saved by
    reference, and would otherwise fail deep in the pickler with an error
    that does not say which object is at fault. Any other kernel is left to
    the pickler: pickle saves a function of a module by reference, and
    cloudpickle (which loky and joblib use to ship estimators to their
    workers and back) saves by value what it cannot find by reference, such
    as a function of ``__main__`` in a worker. Unfitted estimators are left
    to the pickler too: cloudpickle can carry a lambda.
    """
    kernel = estimator.kernel
    if not callable(kernel) or not _is_fitted(estimator):
        return
    qualname = getattr(kernel, "__qualname__", "")
    if "<lambda>" in qualname or "<locals>" in qualname:
        what = "a lambda" if "<lambda>" in qualname else "defined inside a function"
        raise pickle.PicklingError(
            f"Cannot pickle this fitted {type(estimator).__name__}: its kernel "
            f"{kernel!r} is {what}, which pickle cannot save by reference. "
            "Define the kernel as a function at the top level of a module, or "
            "use a kernel of sklearn_kernelpool.kernels, then fit again."
        )


def deepcopy_estimator(estimator, memo):
    """``copy.deepcopy`` of an estimator, without the check of pickling.

    A deep copy keeps functions as they are, so a lambda kernel is no
    obstacle to it.
    """
    copied = type(estimator).__new__(type(estimator))
    memo[id(estimator)] = copied
    copied.__dict__.update(copy.deepcopy(estimator.__dict__, memo))
    return copied


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True
