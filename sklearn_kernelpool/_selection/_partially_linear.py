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
candidate at once. A column that the smoother of a candidate reproduces is
refused (:mod:`.._estimator._identification`). ``linear_features="auto"``
scores the categorical features linear against the categorical features in
the kernel on this same criterion and keeps the better
(:mod:`._linear_auto`).
"""

import numpy as np

from .._estimator._identification import (
    identified_fractions,
    refuse_unidentified,
)
from .._estimator._input_kinds import validate_fit_input
from .._estimator._partially_linear import (
    double_residual,
    kernel_ordered,
    split_linear_columns,
)
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
    own ``coef(h)`` and scores them as :class:`RegressionScoring` does,
    with each candidate's smallest fraction of
    :mod:`.._estimator._identification` as ``identified_fraction``. A column
    that the smoother of a candidate reproduces is a function of the kernel's
    features that the kernel part can take, whatever the width: the search
    refuses it as the refit would (other candidates identify it only through
    the bias of their smoother). The residuals that show it are those of the
    rows whose slope the safeguard keeps where they are most of the rows;
    where the safeguard shrinks most slopes, the kept rows are the dense part
    of the table, about which a column can be constant without being a
    function of the features, and all the rows are read.
    ``names`` are those of the columns of ``Z``.
    """

    # The one-standard-error rule of small tables reads the per-point errors
    # of the pooled columns, which are not those of y here.
    uses_degree_rule = False
    # Nor does the widths' loss, nor their guard: per_feature="auto" learns
    # none here.
    learns_widths = False

    def __init__(self, estimator, y, Z, names):
        super().__init__(estimator)
        self.y = y
        self.Y = np.asarray(y, dtype=np.float64).reshape(len(Z), -1)
        self.Z = Z
        self.names = names

    def held_out_predictions(self, fits, weights, kept=None):
        """The held-out predictions of ``y`` from the leave-one-out fits of
        ``[Y, Z]`` of one candidate, its ``coef(h)`` held, and the smallest
        fraction of its linear columns (over the rows ``kept``, whose slope
        the safeguard kept, where they are most of the rows)."""
        k = self.Y.shape[1]
        usable = (weights > 0) & np.all(np.isfinite(fits), axis=1)
        if not usable.any():
            return np.full((len(fits), k), np.nan), np.nan
        fractions = identified_fractions(self.Z, fits[:, k:], weights, kept)
        refuse_unidentified(fractions, self.names, " at a candidate of the search")
        coef, _, _ = double_residual(self.Y, self.Z, fits, weights)
        return fits[:, :k] + (self.Z - fits[:, k:]) @ coef, float(fractions.min())

    def loo_scores(
        self, held_out, predictions, empty, X, y, weights, scorer, weighted, shrunk=None
    ):
        kept = [None] * len(predictions) if shrunk is None else list(~shrunk)
        parts = [
            self.held_out_predictions(p, weights, rows)
            for p, rows in zip(predictions, kept, strict=True)
        ]
        predicted = np.stack([part[0] for part in parts])
        results = super().loo_scores(
            _Values(self.Y), predicted, empty, X, self.y, weights, scorer, weighted
        )
        results["identified_fraction"] = np.array([part[1] for part in parts])
        return results


def _refuse_options(estimator, search):
    """Refuse what the partially linear search cannot score."""
    problems = []
    if estimator.cv is not None:
        problems.append(
            f"cv={estimator.cv!r} (coef_ is estimated at every candidate from "
            "the leave-one-out residuals: use cv=None)"
        )
    if search.per_feature_mode() is True:
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
    policy = PartiallyLinearScoring(estimator, y, Z, split.design.feature_names)
    search = make_search(policy, "brute")
    # (no partially linear fit of local quadratics)
    search.quadratic_candidates = False
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
