"""``linear_features="auto"``, the default of :class:`KernelAttentionRegressorCV`:
the categorical features linear (a partially linear model) or in the kernel,
whichever search scores better.

Both searches score their candidates by the same held-out rule (exact
leave-one-out, the search's ``scoring``), the linear one with each
candidate's own ``coef(h)`` held (:mod:`._partially_linear`); the better
``best_score_`` is kept and only its candidate is refitted. ``"auto"``
steps aside, fitting the search with the categorical features in the kernel
alone, where there is no comparison to make or the linear search cannot be
scored by that rule (:func:`steps_aside`), and where the linear part is not
identified (:class:`.._estimator._identification.NotIdentifiedError`).
Without categorical features it is the search of ``linear_features=None``.
"""

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import _num_samples

from .._estimator._identification import NotIdentifiedError
from .._estimator._linear_columns import categorical_columns
from .._held_out._criteria import SMOOTHER_CRITERIA
from .._search._grid import _rank
from ._alternative import ALTERNATIVE
from ._fit import refit_search, score_search

#: The rows of positive weight that ``"auto"`` asks per linear coefficient,
#: and the most coefficients it scores: beyond, it steps aside.
ROWS_PER_COEFFICIENT = 10
MAX_COEFFICIENTS = 100


def is_auto(linear_features):
    """Whether ``linear_features`` is ``"auto"``."""
    return isinstance(linear_features, str) and linear_features == "auto"


def _search_like(estimator, **changes):
    """A search of ``estimator``'s parameters but ``changes``, which shares
    their values (a generator of splits, used once, among them)."""
    return type(estimator)(**{**estimator.get_params(deep=False), **changes})


def _categorical(estimator, X):
    """The mask of the categorical features of ``X`` as ``"auto"`` reads
    them (``categorical_features``, or where it is None the category, object
    and string columns of a DataFrame), or None."""
    if hasattr(X, "__dask_graph__"):
        return None  # (no partially linear path for dask arrays)
    try:
        return categorical_columns(estimator.categorical_features, X)
    except ValueError:
        return None  # the fit of the search explains


def steps_aside(estimator, categorical):
    """Why ``"auto"`` fits the categorical features in the kernel without
    scoring them linear, or "" where it compares both."""
    if categorical is None:
        return "no categorical feature"
    if categorical.all():
        return "every feature categorical (nothing left to the kernel)"
    if estimator.cv is not None:
        return f"cv={estimator.cv!r} (the linear search scores by leave-one-out)"
    if not isinstance(estimator.per_feature, str) and estimator.per_feature:
        return f"per_feature={estimator.per_feature!r} (no learned widths there)"
    scoring = estimator.scoring
    if isinstance(scoring, str) and scoring in SMOOTHER_CRITERIA:
        return f"scoring={scoring!r} (no smoother criterion there)"
    if estimator.projection is not None:
        return f"projection={estimator.projection!r} (no map there)"
    if estimator.degree == 2:
        return "degree=2 (no partially linear fit of local quadratics)"
    return ""


def too_many_coefficients(kernel, y, sample_weight):
    """Why the categories that the search ``kernel`` learned make too many
    linear coefficients for ``"auto"`` to score, or ""."""
    p = sum(len(categories) - 1 for categories in kernel.categories_)
    n = _num_samples(y)
    if sample_weight is not None:
        n = int(np.count_nonzero(np.asarray(sample_weight, dtype=np.float64) > 0))
    if p > min(MAX_COEFFICIENTS, n // ROWS_PER_COEFFICIENT):
        return (
            f"{p} linear coefficients for {n} rows of positive weight (at most "
            f"one per {ROWS_PER_COEFFICIENT} rows, and {MAX_COEFFICIENTS})"
        )
    return ""


def _merged_results(first, second, labels):
    """The ``cv_results_`` of two searches one after the other, with
    ``param_linear_features``; a parameter of one search only is masked in
    the other's candidates, as ``GridSearchCV`` masks them."""
    n = [len(first["params"]), len(second["params"])]
    merged = {}
    for key in dict.fromkeys([*first, *second]):
        if key == "params":
            merged[key] = [
                {**p, "linear_features": label}
                for results, label in zip((first, second), labels, strict=True)
                for p in results["params"]
            ]
            continue
        parts, masks = [], []
        for results, size in zip((first, second), n, strict=True):
            if key in results:
                part = results[key]
                parts.append(np.ma.getdata(part))
                masks.append(np.ma.getmaskarray(part))
            else:
                parts.append(np.zeros(size, dtype=object))
                masks.append(np.ones(size, dtype=bool))
        mask = np.concatenate(masks)
        dtype = object if any(p.dtype == object for p in parts) else None
        data = np.concatenate([p.astype(dtype) if dtype else p for p in parts])
        merged[key] = np.ma.MaskedArray(data, mask=mask) if mask.any() else data
    merged["param_linear_features"] = np.array(
        [label for label, size in zip(labels, n, strict=True) for _ in range(size)],
        dtype=object,
    )
    merged["rank_test_score"] = _rank(np.asarray(merged["mean_test_score"]))
    return merged


def _say(estimator, message):
    if estimator.verbose:
        print(f"[{type(estimator).__name__}] {message}")


def fit_auto(estimator, X, y, sample_weight):
    """``KernelAttentionRegressorCV.fit`` with ``linear_features="auto"``."""
    categorical = _categorical(estimator, X)
    kernel = _search_like(estimator, linear_features=None)
    if categorical is not None and estimator.categorical_features is None:
        kernel.set_params(categorical_features=categorical)
    why = steps_aside(estimator, categorical)
    if why:
        if categorical is not None:
            _say(estimator, f"Categorical features in the kernel: {why}")
        return _adopt(estimator, kernel.fit(X, y, sample_weight=sample_weight))
    kernel_search = score_search(kernel, X, y, sample_weight)
    linear = _search_like(kernel, linear_features=categorical)
    why = too_many_coefficients(kernel, y, sample_weight)
    if not why:
        try:
            linear_search = score_search(linear, X, y, sample_weight)
        except NotIdentifiedError as error:
            why = str(error)
    if why:
        _say(estimator, f"Categorical features in the kernel: {why}")
        refit_search(kernel, *kernel_search)
        return _adopt(estimator, kernel)
    scores = {"kernel": kernel.best_score_, "linear": linear.best_score_}
    keep = linear if scores["linear"] > scores["kernel"] else kernel
    _say(
        estimator,
        f"Categorical features {'linear' if keep is linear else 'in the kernel'}: "
        f"score {keep.best_score_:.6g} (linear {scores['linear']:.6g}, kernel "
        f"{scores['kernel']:.6g})",
    )
    refit_search(keep, *(linear_search if keep is linear else kernel_search))
    holder = ALTERNATIVE.get()
    if holder is not None and keep is linear:
        # (the large-table selection may fall back on it, see ._alternative)
        def alternative():
            refit_search(kernel, *kernel_search)
            return _adopt(clone(estimator), kernel, kernel, linear)

        holder["refit"] = alternative
    return _adopt(estimator, keep, kernel, linear)


def _adopt(estimator, fitted, kernel=None, linear=None):
    """Take the fitted state of the search ``fitted`` as ``estimator``'s:
    one of the two searches ``kernel`` and ``linear`` where both were
    scored, their results merged."""
    params = estimator.get_params(deep=False)
    state = {name: value for name, value in vars(fitted).items() if name not in params}
    for name in list(vars(estimator)):
        if name.endswith("_") and not name.startswith("__") and name not in state:
            del estimator.__dict__[name]  # of an earlier fit (feature names)
    estimator.__dict__.update(state)
    estimator.linear_features_ = None
    estimator.linear_scores_ = None
    if linear is None:
        return estimator
    label = "categorical" if fitted is linear else None
    estimator.linear_features_ = label
    estimator.cv_results_ = _merged_results(
        kernel.cv_results_, linear.cv_results_, (None, "categorical")
    )
    if fitted is linear:
        estimator.best_index_ = len(kernel.cv_results_["params"]) + linear.best_index_
    estimator.best_params_ = {**fitted.best_params_, "linear_features": label}
    estimator.linear_scores_ = {
        "kernel": float(kernel.best_score_),
        "linear": float(linear.best_score_),
    }
    return estimator
