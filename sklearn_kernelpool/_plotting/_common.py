"""What the displays share: matplotlib, axes, fitted estimators, levels."""

import numbers

from sklearn.utils.validation import check_is_fitted


def check_matplotlib(caller):
    """Raise an ``ImportError`` naming the install command without matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"{caller} requires matplotlib. Install it with `pip install "
            'matplotlib`, or with the extra `python -m pip install ".[plot]"` '
            "from a clone of sklearn-kernelpool."
        ) from exc


def _new_axes():
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    return ax


def _fitted(estimator, method, caller):
    """The estimator that has ``method``: itself, or its ``best_estimator_``."""
    check_is_fitted(estimator)
    if hasattr(estimator, method):
        return estimator
    best = getattr(estimator, "best_estimator_", None)
    if best is not None and hasattr(best, method):
        return best
    raise TypeError(
        f"{caller} needs an estimator with a {method} method (or a search "
        f"whose best_estimator_ has one); got {type(estimator).__name__}."
    )


def _check_level(name, level, allow_none=True):
    if level is None and allow_none:
        return
    if (
        not isinstance(level, numbers.Real)
        or isinstance(level, bool)
        or not 0 < level < 1
    ):
        accepted = "a float in (0, 1) or None" if allow_none else "a float in (0, 1)"
        raise ValueError(f"{name} must be {accepted}; got {level!r}.")
