"""Per-feature widths learned after the isotropic selection of the bandwidth
search, kept only where they do better (:mod:`.._widths._learning`,
:mod:`.._widths._guard`, :mod:`.._widths._categorical`)."""

from dataclasses import dataclass

import numpy as np

from .._widths import _categorical as _categorical_widths
from .._widths._guard import GUARD_MAX_SIZE, guard_affordable, guard_widths
from .._widths._learning import learn_widths, width_loss
from ..kernels import KERNELS


@dataclass(frozen=True)
class LearnedWidths:
    """What learning per-feature widths gave a search.

    ``kept`` says whether the learned widths replace the isotropic choice;
    then ``bandwidth`` (and, with categorical features,
    ``categorical_bandwidth``) are the learned ones and ``best_score`` their
    score. ``n_iter`` counts the iterations of the learning, and
    ``per_feature_scores`` holds the guard's out-of-fold losses where it
    compared them (None otherwise). ``point_errors`` holds the per-point
    leave-one-out losses of the kept widths (squared errors averaged over
    the outputs), where they were learned by leave-one-out.
    """

    n_iter: int
    kept: bool = False
    bandwidth: object = None
    categorical_bandwidth: object = None
    best_score: float = None
    per_feature_scores: dict = None
    point_errors: object = None


# The degrees whose leave-one-out loss the widths are learned on.
LEARNED_DEGREES = (0, 1)


def auto_skips(search, data):
    """Why ``per_feature="auto"`` learns no widths after ``search``, or "".

    It learns them, with two features or more, on the exact search of a table
    small enough for the guard
    (:func:`.._widths._guard.guard_affordable`), for a selected kernel with a
    log form and a selected degree of :data:`LEARNED_DEGREES`, and not in a
    partially linear search (whose candidates the widths' loss does not
    score).
    """
    n_positive = int(np.count_nonzero(data.weights > 0))
    n_features = data.X64.shape[1]
    if n_features < 2:
        return "one feature (its width is the isotropic one)"
    if search.binned:
        return "the candidates were scored on the binned path"
    if not search.policy.learns_widths:
        return "the search has a linear part"
    if KERNELS[search.kernel_].log_function is None:
        return f"the {search.kernel_} kernel has no log form"
    if search.degree_ not in LEARNED_DEGREES:
        return f"no width loss of degree {search.degree_}"
    if not guard_affordable(n_positive, n_features):
        return (
            f"{n_positive} rows of positive weight x ({n_features} features + 1)"
            f" > {GUARD_MAX_SIZE}"
        )
    return ""


def learn_feature_widths(search, data, grid):
    """Learn per-feature widths; keep them as ``per_feature`` says.

    They are learned on the leave-one-out loss of ``search.policy``
    (squared error, or log-loss for class probabilities), or on the
    criterion of ``scoring="gcv"`` or ``"aicc"``, and kept only where they
    lower that of the isotropic choice and, with
    ``per_feature="auto"``, where the guard (:func:`.._widths._guard.guard_widths`)
    finds the procedure that learns them better out of fold by more than
    one standard error (the one-standard-error rule). ``grid`` holds the
    fixed bandwidths scored. Reads the selection of ``search`` and returns
    a :class:`LearnedWidths`.
    """
    kernel = KERNELS[search.kernel_]
    criterion = search.smoother_scoring()
    objective = search.scoring if criterion else search.policy.objective
    options = {"degree": search.degree_, "objective": objective}
    widths, n_iter, loss, predictions = learn_widths(
        data.X64,
        data.Y,
        data.weights,
        kernel,
        search.bandwidth_,
        max_iter=search.max_iter,
        **options,
    )
    n_iter = max(n_iter, 1)
    if not loss < _isotropic_loss(search, data, kernel, options):
        return LearnedWidths(n_iter)
    guard = scores = None
    if search.per_feature_mode() == "auto":
        guard = _guard(search, data, kernel, grid, options)
        scores = {
            "isotropic": guard.isotropic_loss,
            "per_feature": guard.per_feature_loss,
        }
        if not guard.keep:
            return LearnedWidths(n_iter, per_feature_scores=scores)
    if data.splits is not None:
        # Those of the guard, whose widths were learned on each training part.
        score = split_score(search.policy, data, guard.per_feature_predictions)
    elif data.scorer is None or criterion:
        score = -float(loss)
    else:
        score = search.policy.learned_loo_score(
            predictions, data.X, data.y, data.weights, data.scorer, data.weighted
        )
    errors = None
    if data.splits is None and not criterion:
        errors = np.mean((np.asarray(predictions) - data.Y) ** 2, axis=1)
    return LearnedWidths(
        n_iter,
        True,
        widths,
        best_score=score,
        per_feature_scores=scores,
        point_errors=errors,
    )


def _isotropic_loss(search, data, kernel, options):
    """The loss that the widths minimise, of the selected isotropic bandwidth."""
    isotropic = np.full(data.X64.shape[1], np.log(search.bandwidth_))
    return width_loss(
        isotropic, data.X64, data.Y, data.weights, kernel, gradient=False, **options
    )[0]


def _guard(search, data, kernel, grid, options):
    """The guard's out-of-fold comparison of the learned and isotropic widths."""
    search.say(
        "Comparing the learned widths with the isotropic bandwidth out "
        "of fold, each selected or learned on the training parts; the "
        "widths are kept where they win by more than one standard error"
    )
    guard = guard_widths(
        data.X64,
        data.Y,
        data.weights,
        kernel,
        grid,
        splits=data.splits,
        max_iter=search.max_iter,
        n_jobs=search.n_jobs,
        **options,
    )
    if search.policy.loss_name is not None:
        search.say(
            f"Out-of-fold {search.policy.loss_name}: isotropic "
            f"{guard.isotropic_loss:.6g}, per-feature {guard.per_feature_loss:.6g} "
            f"(standard error of the difference {guard.standard_error:.3g})"
        )
    return guard


def split_score(policy, data, predictions):
    """The mean score on the splits of ``data`` of out-of-fold
    ``predictions`` (each split's test rows predicted by what was learned on
    its training part)."""
    sample_weight = data.sample_weight
    return float(
        np.mean(
            [
                policy.learned_split_score(
                    split,
                    predictions,
                    data.X,
                    data.y,
                    None if sample_weight is None else sample_weight[split[1]],
                    data.scorer,
                    data.weighted,
                )
                for split in data.splits
            ]
        )
    )


def learn_categorical_widths(search, data, codes):
    """Per-feature widths and lambdas (:mod:`.._widths._categorical`), learned
    on the leave-one-out error of the selected degree and kept where they
    lower that of the selected candidate. Returns a :class:`LearnedWidths`."""
    X64, Y, weights = data.X64, data.Y, data.weights
    kernel = KERNELS[search.kernel_]
    lambdas = np.full(codes.shape[1], search.categorical_bandwidth_)
    options = {
        "degree": search.degree_,
        "levels": search.levels,
        "sorted_levels": search.sorted_levels,
    }
    widths, learned, n_iter, loo_mse = _categorical_widths.learn(
        X64,
        codes,
        Y,
        weights,
        kernel,
        search.bandwidth_,
        lambdas,
        max_iter=search.max_iter,
        **options,
    )
    n_iter = max(n_iter, 1)
    if not loo_mse < search.cv_results_["loo_mse"][search.best_index_]:
        return LearnedWidths(n_iter)
    if data.scorer is None:
        score = -float(loo_mse)
    else:
        predictions = _categorical_widths.loo_predictions(
            X64, codes, Y, weights, kernel, widths, learned, **options
        )
        score = search.policy.learned_loo_score(
            predictions, data.X, data.y, weights, data.scorer, data.weighted
        )
    return LearnedWidths(
        n_iter,
        True,
        widths[0] if search.placeholder else widths,
        categorical_bandwidth=learned,
        best_score=score,
    )
