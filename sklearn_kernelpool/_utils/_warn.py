"""How the warnings of the package (:mod:`._warnings`) are issued: at the
user's call, once per text under the ``"default"`` filter, with the kernel
and width they concern described alike."""

import os
import sys
import threading
import warnings


def _ordinal(k):
    """``"1st"``, ``"2nd"``, ``"3rd"``, ``"4th"``, ``"11th"``, ``"21st"``..."""
    suffix = "th" if k % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}
    if isinstance(suffix, dict):
        suffix = suffix.get(k % 10, "th")
    return f"{k}{suffix}"


def describe(kernel, bandwidth, n_neighbors=None):
    """``"the 'boxcar' kernel at bandwidth=0.5"``, for the texts of warnings.

    ``bandwidth`` is a float or a 1-D array of any array API namespace; the
    first six per-feature widths are shown. With ``n_neighbors`` the
    bandwidth is said to multiply the neighbour distance.
    """
    shape = getattr(bandwidth, "shape", ())
    if len(shape) == 0:
        width = f"{float(bandwidth):.6g}"
    else:
        shown = [f"{float(bandwidth[i]):.6g}" for i in range(min(shape[0], 6))]
        width = "[" + ", ".join(shown) + (", ...]" if shape[0] > 6 else "]")
    if n_neighbors is not None:
        width += f" times the distance to the {_ordinal(n_neighbors)} nearest key"
    return f"the {kernel.name!r} kernel at bandwidth={width}"


# The package's folder: the frames of its modules are not the user's.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The warnings shown under the "default", "module" and "once" actions, for
# the filters in force: see ``warn``.
_shown = {"filters": None, "keys": set()}
_shown_lock = threading.Lock()


def _wrappers():
    """The decorators of scikit-learn that stand between a user's call and
    the package, as ``(file, function name)``: ``fit``'s ``_fit_context``,
    ``validate_params`` and ``set_output``'s wrapper of ``transform``."""
    from sklearn import base
    from sklearn.utils import _param_validation, _set_output

    return {
        (os.path.abspath(module.__file__), name)
        for module, name in (
            (base, "wrapper"),
            (_param_validation, "wrapper"),
            (_set_output, "wrapped"),
        )
    }


def _is_inner(frame, wrappers):
    """Whether ``frame`` is of the package or of a decorator around it."""
    filename = os.path.abspath(frame.f_code.co_filename)
    return (
        filename.startswith(_PACKAGE + os.sep)
        or (filename, frame.f_code.co_name) in wrappers
    )


def _caller():
    """The first frame outside the package and the decorators of
    scikit-learn around its methods (:func:`_wrappers`), and its
    ``stacklevel`` seen from :func:`warn`."""
    frame, level = sys._getframe(1), 1
    wrappers = _wrappers()
    while frame.f_back is not None and _is_inner(frame, wrappers):
        frame, level = frame.f_back, level + 1
    return frame, level


def _action(text, category, module, lineno):
    """What the warnings filters do with this warning, as :mod:`warnings` decides."""
    for action, message, cat, mod, ln in warnings.filters:
        if (
            (message is None or _matches(message, text))
            and issubclass(category, cat)
            and (mod is None or _matches(mod, module))
            and (ln == 0 or ln == lineno)
        ):
            return action
    return warnings.defaultaction


def _matches(pattern, text):
    return pattern == text if isinstance(pattern, str) else bool(pattern.match(text))


def warn(warning):
    """Issue ``warning`` at the user's call, once per text under "default".

    The warning points at the first frame outside the package: the line
    that called ``predict``. Under the ``"default"``, ``"module"`` and
    ``"once"`` actions, Python shows a text once per line (module, process)
    until the filters change; but it forgets what it showed whenever a
    ``catch_warnings`` block starts, and scikit-learn's searches run every
    fold in one. So the texts shown are remembered here too, for as long as
    the filters stay the same, and a search shows each once.
    """
    frame, stacklevel = _caller()
    module = frame.f_globals.get("__name__", "<string>")
    lineno = frame.f_lineno
    text, category = str(warning), type(warning)
    action = _action(text, category, module, lineno)
    if action in ("default", "module", "once"):
        where = {"default": (module, lineno), "module": (module,), "once": ()}
        key = (text, category, *where[action])
        filters = list(warnings.filters)
        with _shown_lock:
            if _shown["filters"] != filters:
                _shown["filters"], _shown["keys"] = filters, set()
            if key in _shown["keys"]:
                return
            _shown["keys"].add(key)
    warnings.warn(warning, stacklevel=stacklevel)
