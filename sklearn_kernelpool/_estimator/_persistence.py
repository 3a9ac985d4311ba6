"""Persistence of the estimators: pickling checks, copies, and the checks of
a loaded estimator (its engine's are in :mod:`.._engine._saved_state`)."""

import copy
import inspect
import pickle
from numbers import Integral

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._engine._saved_state import _refuse

#: The parameters added since the first release, with the value that keeps
#: the meaning of an estimator saved before them, stated here rather than
#: read from a default that may change: its categorical features stay
#: unordered (the default orders pandas' ordered categoricals), its kernel
#: part takes every feature, its fit is not reweighted, its search has no
#: map. Every other parameter absent from a file takes its default, which is
#: what the estimator did before the parameter existed.
ADDED_PARAMETERS = {
    "ordered_features": None,
    "linear_features": None,
    "robust_iterations": 0,
    "projection": None,
    "subsample": None,
    "random_state": None,
}


def restore_added_parameters(estimator):
    """Give an estimator loaded from a file of an earlier release every
    ``__init__`` parameter it lacks (so that ``get_params``, ``clone``, the
    tags and a refit work, and mean what they meant): the value of
    :data:`ADDED_PARAMETERS`, else the parameter's default. Fitted with
    categorical features, it also gets the ``is_ordered_`` it lacks (None:
    none)."""
    state = vars(estimator)
    defaults = inspect.signature(type(estimator).__init__).parameters
    for name in estimator._get_param_names():
        if name not in state:
            state[name] = ADDED_PARAMETERS.get(name, defaults[name].default)
    if "is_categorical_" in state and "is_ordered_" not in state:
        state["is_ordered_"] = None


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
    _check_robustness_weights(state, arguments)
    _check_sample_weight(state, arguments)
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


def check_loaded_search(search):
    """Refuse a loaded search whose selection disagrees with itself.

    ``best_params_`` must be the row ``best_index_`` of ``cv_results_`` and
    its kernel that of ``best_estimator_`` (which has checked itself when it
    was loaded): a file altered in one of them would predict with one model
    and report another. The sizes of a large-table selection,
    ``subsample_`` and ``n_held_out_``, must be positive integers.
    """
    state = vars(search)
    best = state.get("best_estimator_")
    params = state.get("best_params_")
    if best is None or params is None:
        return  # unfitted, or refitted by a refit=False search
    rows = state.get("cv_results_", {}).get("params")
    index = state.get("best_index_")
    if rows is not None:
        if not isinstance(index, Integral) or not 0 <= index < len(rows):
            _refuse("best_index_", f"is {index!r}, not a row of cv_results_")
        if not _same_params(rows[index], params):
            _refuse("best_params_", f"differ from row {index} of cv_results_")
    if "kernel" in params and not _same_params(
        {"kernel": params["kernel"]}, {"kernel": getattr(best, "kernel", None)}
    ):
        _refuse("best_estimator_", f"has another kernel than {params['kernel']!r}")
    for name in ("subsample_", "n_held_out_"):
        value = state.get(name)
        if value is not None and not (isinstance(value, Integral) and value > 0):
            _refuse(name, f"is {value!r}, not a positive integer")


def _same_params(a, b):
    """Whether two dicts of parameters hold the same names and values."""
    if not isinstance(a, dict) or set(a) != set(b):
        return False
    for name, value in a.items():
        try:
            if not np.array_equal(np.asarray(value), np.asarray(b[name])):
                return False
        except (TypeError, ValueError):
            return False
    return True


def _check_robustness_weights(state, arguments):
    """Refuse ``robustness_weights_`` that are not the engine's: the
    standard errors read them, the predictions the engine's."""
    attribute = state.get("robustness_weights_")
    saved = arguments.get("robustness_weight")
    if (attribute is None) != (saved is None) or (
        saved is not None
        and not (isinstance(attribute, np.ndarray) and np.array_equal(attribute, saved))
    ):
        _refuse("robustness_weights_", "differ from the weights of its engine")


def _check_sample_weight(state, arguments):
    """Refuse a ``sample_weight_`` that is not the engine's: the standard
    errors and the significance test read it, the predictions the engine's
    (which holds ones for a fit without sample weights)."""
    attribute = state.get("sample_weight_")
    saved = arguments.get("sample_weight")
    if attribute is None:
        same = saved is None or bool(np.all(np.asarray(saved) == 1))
    else:
        same = (
            isinstance(attribute, np.ndarray)
            and saved is not None
            and np.array_equal(attribute, saved)
        )
    if not same:
        _refuse("sample_weight_", "differs from the weights of its engine")


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
