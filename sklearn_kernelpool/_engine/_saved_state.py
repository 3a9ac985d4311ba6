"""The checks of an engine's saved arguments, before a loaded engine is
rebuilt from them (see ``KernelPool.__getstate__``)."""

import numpy as np

from ..kernels import KERNELS, Kernel
from ._algorithm import ALGORITHMS


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


def _check_levels(arguments, codes):
    """The saved ``categorical_levels`` (absent from the engines of earlier
    releases and of fits without ordered features): one int >= 0 per
    categorical feature, above every code of an ordered one."""
    if arguments.get("categorical_levels") is None:
        return
    levels = _check_array(arguments, "categorical_levels", (codes.shape[1],), "iu")
    ordered = levels > 0
    if np.any(levels < 0) or np.any(codes[:, ordered] >= levels[ordered]):
        _refuse("categorical_levels", f"{levels!r} do not hold the category codes")


def _check_robustness(arguments, weights):
    """Check the saved robustness weights, if any: in [0, 1], leaving a row
    of positive weight."""
    if arguments.get("robustness_weight") is None:
        return
    robust = _check_array(arguments, "robustness_weight", weights.shape)
    if not np.all((robust >= 0) & (robust <= 1)):
        _refuse("robustness_weight", "is not in [0, 1]")
    if not np.any(weights * robust > 0):
        _refuse("robustness_weight", "leaves no row of positive weight")


def _check_categorical(arguments, keys):
    """Check the saved lambdas, the category codes of the keys and the levels
    of ordered features; returns the number of continuous features."""
    n_features = keys.shape[1]
    if arguments.get("categorical_bandwidth") is None:
        return n_features
    lambdas = _check_array(arguments, "categorical_bandwidth", (None,))
    if not 0 < len(lambdas) <= n_features or not np.all(
        (lambdas >= 0) & (lambdas <= 1)
    ):
        _refuse("categorical_bandwidth", f"{lambdas!r} is not in [0, 1]")
    codes = keys[:, n_features - len(lambdas) :]
    if not np.all((codes >= 0) & (codes == np.round(codes))):
        _refuse("keys", "hold category codes that are not integers >= 0")
    _check_levels(arguments, codes)
    # Without continuous features the engine has one constant feature.
    return max(n_features - len(lambdas), 1)


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
    _check_robustness(arguments, weights)
    n_continuous = _check_categorical(arguments, keys)
    bandwidth = arguments.get("bandwidth")
    shape = np.shape(bandwidth)[:1] if np.ndim(bandwidth) == 1 else ()
    bandwidth = _check_array(arguments, "bandwidth", shape)
    if bandwidth.shape not in ((), (n_continuous,)) or np.any(bandwidth <= 0):
        _refuse("bandwidth", f"{bandwidth!r} is not positive, of shape () or (d,)")
    for name, options in [
        ("on_empty", on_empty_options),
        ("algorithm", ALGORITHMS),
        ("degree", (0, 1, 2)),
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
