"""The partially linear model in :class:`KernelAttentionRegressorCV`.

With linear columns ``Z``, every candidate of the search is scored by exact
leave-one-out with its own Robinson estimate ``coef(h)`` held: the search
pools ``[y, Z]`` as the values (one pass over the pairs of points for all
the columns), :func:`.._estimator._partially_linear.double_residual` estimates
``coef(h)`` from the leave-one-out residuals of each candidate, and the
held-out prediction of row ``i`` is::

    z_i . coef(h) + intercept + m_{-i}(x_i) = L_{-i} y + (z_i - L_{-i} Z) coef(h)

with ``m_{-i}`` the kernel part fitted without row ``i`` on the partial
residuals ``y - Z coef(h) - intercept`` (the smoother is linear in its
values and reproduces constants, the ``on_empty`` fallbacks included): the
leave-one-out of the existing machinery on shifted values, for every
candidate at once. ``linear_features="auto"`` scores the categorical
features linear against the categorical features in the kernel on this same
criterion and keeps the better (:func:`fit_auto`).
"""

import numpy as np
from sklearn.base import clone

from .._estimator._input_kinds import validate_fit_input
from .._estimator._linear_columns import categorical_columns
from .._estimator._partially_linear import (
    double_residual,
    kernel_ordered,
    split_linear_columns,
)
from .._search._grid import _rank
from .._search._params import relative_sample_weight, split_categorical
from .._search._scores import RegressionScoring
from .._utils._categorical_input import category_levels
from .._utils._input import validate_fit_data
from .._utils._validation import check_squares


class _Values:
    """Stands in for the held-out state whose values the scores read."""

    def __init__(self, Y):
        self.Y = Y


class PartiallyLinearScoring(RegressionScoring):
    """The leave-one-out scores of the partially linear candidates.

    The search pools ``[Y, Z]``; :meth:`loo_scores` turns each candidate's
    leave-one-out fits of them into held-out predictions of ``y`` with its
    own ``coef(h)`` and scores them as :class:`RegressionScoring` does.
    """

    # The one-standard-error rule of small tables reads the per-point errors
    # of the pooled columns, which are not those of y here.
    uses_degree_rule = False

    def __init__(self, estimator, y, Z):
        super().__init__(estimator)
        self.y = y
        self.Y = np.asarray(y, dtype=np.float64).reshape(len(Z), -1)
        self.Z = Z

    def held_out_predictions(self, fits, weights):
        """The held-out predictions of ``y`` from the leave-one-out fits of
        ``[Y, Z]`` of one candidate, its ``coef(h)`` held."""
        k = self.Y.shape[1]
        usable = (weights > 0) & np.all(np.isfinite(fits), axis=1)
        if not usable.any():
            return np.full((len(fits), k), np.nan)
        coef, _, _ = double_residual(self.Y, self.Z, fits, weights)
        return fits[:, :k] + (self.Z - fits[:, k:]) @ coef

    def loo_scores(self, held_out, predictions, empty, X, y, weights, scorer, weighted):
        predicted = np.stack(
            [self.held_out_predictions(p, weights) for p in predictions]
        )
        return super().loo_scores(
            _Values(self.Y), predicted, empty, X, self.y, weights, scorer, weighted
        )


def _refuse_options(estimator, search):
    """Refuse what the partially linear search cannot score."""
    problems = []
    if estimator.cv is not None:
        problems.append(
            f"cv={estimator.cv!r} (coef_ is estimated at every candidate from "
            "the leave-one-out residuals: use cv=None)"
        )
    if search.per_feature_mode() is not False:
        problems.append(f"per_feature={estimator.per_feature!r}")
    if search.smoother_scoring():
        problems.append(f"scoring={estimator.scoring!r}")
    if problems:
        raise ValueError(
            f"linear_features={estimator.linear_features!r} is scored by exact "
            "leave-one-out of isotropic or adaptive widths; it cannot take "
            + "; ".join(problems)
            + ". Set linear_features=None to use them."
        )


def linear_candidate_search(estimator, X, y, sample_weight, make_search):
    """:func:`._fit.candidate_search` with ``linear_features``:
    ``(search, scored, refit)``, the search pooling ``[y, Z]`` over the
    kernel columns; ``make_search(policy, algorithm)`` builds it."""
    data = validate_fit_input(estimator, X, y, sample_weight, kinds=("linear",))
    split = split_linear_columns(estimator, data)
    Z, given_weight = split.Z, split.sample_weight
    # The kernel columns, validated and encoded as the kernel part takes them.
    categorical, mask = split.columns.categorical, split.columns.linear
    kernel_categorical = None if categorical is None else categorical[~mask]
    if kernel_categorical is not None and not kernel_categorical.any():
        kernel_categorical = None
    kernel = estimator._get_estimator().set_params(
        categorical_features=kernel_categorical,
        ordered_features=kernel_ordered(split.columns),
        algorithm=estimator.algorithm,
    )
    keys, y = validate_fit_data(
        kernel, split.kernel_columns, split.y, multi_output=True, y_numeric=True
    )
    keys, codes, lambdas, placeholder = split_categorical(
        keys, kernel.is_categorical_, estimator.categorical_bandwidths
    )
    values = np.hstack([np.asarray(y, np.float64).reshape(len(Z), -1), Z])
    check_squares(keys, "X", "squared distances")
    check_squares(values, "y", "squared errors")
    # Scored exactly (never on the binned path, whose leave-one-out is an
    # approximation): the refit's coef_ is that of the selected candidate.
    search = make_search(PartiallyLinearScoring(estimator, y, Z), "brute")
    _refuse_options(estimator, search)
    # The positions of ordered levels are those of all the rows, as in the
    # fit's leave-one-out fits, so that coef(h) is the refit's coef_.
    scored = (
        keys,
        values,
        relative_sample_weight(given_weight),
        codes,
        lambdas,
        placeholder,
        category_levels(kernel),
    )
    refit = (X, y, given_weight, codes is not None)
    return search, scored, refit


# -- linear_features="auto" ----------------------------------------------------
def _scorable(estimator):
    """Why the linear alternative of ``"auto"`` cannot be scored, or ""."""
    from .._held_out._criteria import SMOOTHER_CRITERIA

    if estimator.cv is not None:
        return f"cv={estimator.cv!r}"
    if estimator.per_feature is not False:
        return f"per_feature={estimator.per_feature!r}"
    if isinstance(estimator.scoring, str) and estimator.scoring in SMOOTHER_CRITERIA:
        return f"scoring={estimator.scoring!r}"
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


def fit_auto(estimator, X, y, sample_weight):
    """``linear_features="auto"``: the categorical features linear or in the
    kernel, whichever scores better."""
    categorical = None
    if not hasattr(X, "__dask_graph__"):
        try:
            categorical = categorical_columns(estimator.categorical_features, X)
        except ValueError:
            categorical = None  # the fit below explains
    why = _scorable(estimator)
    kernel = clone(estimator).set_params(linear_features=None)
    if categorical is not None and estimator.categorical_features is None:
        kernel.set_params(categorical_features=categorical)
    if categorical is None or categorical.all() or why:
        _adopt(estimator, kernel.fit(X, y, sample_weight=sample_weight), None)
        estimator.linear_scores_ = None
        return estimator
    linear = clone(kernel).set_params(linear_features=categorical)
    kernel.fit(X, y, sample_weight=sample_weight)
    linear.fit(X, y, sample_weight=sample_weight)
    keep = linear if linear.best_score_ > kernel.best_score_ else kernel
    label = "categorical" if keep is linear else None
    if estimator.verbose:
        print(
            f"[{type(estimator).__name__}] Categorical features "
            f"{'linear' if keep is linear else 'in the kernel'}: score "
            f"{keep.best_score_:.6g} (linear {linear.best_score_:.6g}, kernel "
            f"{kernel.best_score_:.6g})"
        )
    _adopt(estimator, keep, label)
    estimator.cv_results_ = _merged_results(
        kernel.cv_results_, linear.cv_results_, (None, "categorical")
    )
    if keep is linear:
        estimator.best_index_ = len(kernel.cv_results_["params"]) + linear.best_index_
    estimator.best_params_ = dict(
        estimator.cv_results_["params"][estimator.best_index_]
    )
    estimator.linear_scores_ = {
        "kernel": float(kernel.best_score_),
        "linear": float(linear.best_score_),
    }
    return estimator


def _adopt(estimator, fitted, label):
    """Take the fitted state of the search ``fitted`` as ``estimator``'s."""
    params = estimator.get_params()
    for name, value in vars(fitted).items():
        if name not in params:
            estimator.__dict__[name] = value
    estimator.linear_features_ = label
    estimator.best_params_ = {**fitted.best_params_, "linear_features": label}
