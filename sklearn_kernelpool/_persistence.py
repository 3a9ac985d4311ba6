"""Persistence: what a fitted estimator needs to be saved and loaded again."""

import copy
import pickle

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from ._algorithm import ALGORITHMS
from .kernels import _REGISTRY, KERNELS, Kernel

# Types of other packages that a fitted estimator of the package holds: the
# dtype of the predictions of a model fitted on dask arrays
# (:class:`._grid_pool.GridPool`).
_OTHER_TYPES = ("numpy.dtype",)


def _package_classes():
    """The classes a fitted estimator of the package may hold: the public
    estimators, their engines, :class:`.kernels.Kernel` and the encoding of
    the linear columns of a partially linear fit.

    Each engine saves only what rebuilds it (see ``KernelPool.__getstate__``):
    no tree, and no type of another package but :data:`_OTHER_TYPES`.
    """
    # Imported here: the estimators and engines import this module.
    from sklearn.base import BaseEstimator

    import sklearn_kernelpool

    from ._binned_pool import BinnedKernelPool
    from ._grid_pool import GridPool
    from ._linear_columns import LinearDesign
    from ._pooling import KernelPool

    public = (getattr(sklearn_kernelpool, name) for name in sklearn_kernelpool.__all__)
    estimators = [
        obj
        for obj in public
        if isinstance(obj, type) and issubclass(obj, BaseEstimator)
    ]
    return [*estimators, KernelPool, BinnedKernelPool, GridPool, Kernel, LinearDesign]


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
    the estimators (the cross-validated ones included), the engines (that of
    a model fitted on dask arrays with ``algorithm="binned"`` included, with
    the NumPy dtype of its predictions), the registered kernels and their
    functions.
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
    classes = (f"{cls.__module__}.{cls.__qualname__}" for cls in _package_classes())
    return sorted({*classes, *_OTHER_TYPES, *_kernel_functions()})


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


def _refuse(what, problem):
    raise ValueError(
        f"Cannot load this fitted estimator: {what} {problem}. The file is "
        "damaged or was altered; fit the estimator again, and load files only "
        "from sources you trust."
    )


def _check_array(arguments, name, shape, kinds="f"):
    """The saved array ``arguments[name]``: finite, of that shape and kind.

    ``None`` in ``shape`` accepts any length.
    """
    array = arguments.get(name)
    if not isinstance(array, np.ndarray):
        _refuse(name, f"is a {type(array).__name__}, not an ndarray")
    if array.dtype.kind not in kinds or array.dtype.itemsize > 8:
        _refuse(name, f"has dtype {array.dtype}")
    if len(array.shape) != len(shape) or any(
        n is not None and n != m for n, m in zip(shape, array.shape, strict=True)
    ):
        expected = tuple("any" if n is None else n for n in shape)
        _refuse(name, f"has shape {array.shape}, not {expected}")
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        _refuse(name, "holds non-finite numbers")
    return array


def check_pool_arguments(arguments, on_empty_options):
    """Validate the saved arguments that rebuild a :class:`KernelPool`.

    A loaded engine is rebuilt from them as ``fit`` built it, its trees
    included, so nothing derived from them is ever read from a file: these
    arguments are all there is to check.

    Raises
    ------
    ValueError
        If any argument is not what ``fit`` could have passed.
    """
    if not isinstance(arguments, dict):
        _refuse("the engine", "lacks the saved arguments that rebuild it")
    keys = _check_array(arguments, "keys", (None, None))
    n_samples, n_features = keys.shape
    if keys.dtype not in (np.float32, np.float64):
        _refuse("keys", f"have dtype {keys.dtype}, not float32 or float64")
    if keys.size == 0:
        _refuse("keys", f"have shape {keys.shape}")
    _check_array(arguments, "values", (n_samples, None), kinds="biuf")
    weights = _check_array(arguments, "sample_weight", (n_samples,))
    if np.any(weights < 0) or not np.any(weights > 0):
        _refuse("sample_weight", "is negative or all zero")
    n_continuous = n_features
    if arguments.get("categorical_bandwidth") is not None:
        lambdas = _check_array(arguments, "categorical_bandwidth", (None,))
        if not 0 < len(lambdas) <= n_features or not np.all(
            (lambdas >= 0) & (lambdas <= 1)
        ):
            _refuse("categorical_bandwidth", f"{lambdas!r} is not in [0, 1]")
        codes = keys[:, n_features - len(lambdas) :]
        if not np.all((codes >= 0) & (codes == np.round(codes))):
            _refuse("keys", "hold category codes that are not integers >= 0")
        # Without continuous features the engine has one constant feature.
        n_continuous = max(n_features - len(lambdas), 1)
    bandwidth = arguments.get("bandwidth")
    shape = np.shape(bandwidth)[:1] if np.ndim(bandwidth) == 1 else ()
    bandwidth = _check_array(arguments, "bandwidth", shape)
    if bandwidth.shape not in ((), (n_continuous,)) or np.any(bandwidth <= 0):
        _refuse("bandwidth", f"{bandwidth!r} is not positive, of shape () or (d,)")
    for name, options in [
        ("on_empty", on_empty_options),
        ("algorithm", ALGORITHMS),
        ("degree", (0, 1)),
        ("user_kernel", (False, True)),
    ]:
        value = arguments.get(name)
        if type(value) not in (str, int, bool) or value not in options:
            _refuse(name, f"{value!r} is not one of {options}")
    n_neighbors = arguments.get("n_neighbors")
    if n_neighbors is not None and (
        type(n_neighbors) is not int
        or not 1 <= n_neighbors <= int(np.count_nonzero(weights))
    ):
        _refuse("n_neighbors", f"{n_neighbors!r} is not None or an int in [1, n]")
    kernel = arguments.get("kernel")
    if not isinstance(kernel, Kernel):
        _refuse("kernel", f"is a {type(kernel).__name__}, not a Kernel")
    if arguments["user_kernel"]:
        expected = Kernel(kernel.name, kernel.function, np.inf)
        if not callable(kernel.function) or kernel != expected:
            _refuse("kernel", f"{kernel!r} is not the wrap of a user function")
    elif KERNELS.get(kernel.name) != kernel:
        _refuse("kernel", f"{kernel.name!r} is not the registered kernel of its name")
    return arguments


def check_loaded_estimator(estimator):
    """Refuse a loaded estimator whose engine does not match its attributes.

    Its engine has checked itself (:func:`check_pool_arguments`); this checks
    that the estimator's own fitted attributes describe the same data.
    """
    state = vars(estimator)
    if state.get("_linear_design") is not None:
        _check_linear_state(state)
        return
    pool = state.get("_pool")
    arguments = getattr(pool, "_arguments", None)
    if arguments is None:
        return  # unfitted, or fitted on the array API path
    n_samples, n_features = arguments["keys"].shape
    if state.get("n_features_in_") != n_features:
        _refuse(
            "its keys",
            f"have {n_features} features, and n_features_in_ is "
            f"{state.get('n_features_in_')!r}",
        )
    classes = state.get("classes_")
    if classes is not None and np.shape(classes) != (pool.n_outputs,):
        _refuse("classes_", f"has shape {np.shape(classes)}, not ({pool.n_outputs},)")


def _check_linear_state(state):
    """Refuse a loaded partially linear fit whose parts do not match: the
    linear columns, the kernel part's features and the coefficients."""
    design = state["_linear_design"]
    mask = getattr(design, "mask", None)
    if not isinstance(mask, np.ndarray) or mask.dtype != bool:
        _refuse("the linear columns", "are not a boolean mask")
    if mask.shape != (state.get("n_features_in_"),) or mask.all():
        _refuse("the linear columns", f"mask of shape {mask.shape} does not fit")
    kernel = state.get("kernel_regressor_")
    if getattr(kernel, "n_features_in_", None) != int(np.count_nonzero(~mask)):
        _refuse("kernel_regressor_", "does not take the other features")
    n_columns = len(getattr(design, "feature_names", ()))
    for name in ("coef_", "coef_se_"):
        if np.shape(state.get(name))[-1:] != (n_columns,):
            _refuse(name, f"does not have {n_columns} linear columns")
