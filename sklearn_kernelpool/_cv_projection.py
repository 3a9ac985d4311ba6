"""The learned map of the cross-validated estimators (``projection``): learned
after the candidate search, guarded out of fold, and the refit on the mapped
keys.

With ``projection="auto"`` a map of rank ``min(2, n_features)``
(:class:`KernelAttentionProjection`: an index model of two directions, which
overfits a small table less than a map of every feature) is learned, and
kept only where the
procedure that learns it beats the search without it out of fold: in each
split (those of ``cv``, or five shuffled folds under leave-one-out), on the
training part only, the search as configured (``projection=None``) and the
map learned from the training part (then pooled at unit width) predict the
test part; the map is kept where its out-of-fold loss (squared error, or
log-loss of the class probabilities) is below that of the search by more
than one standard error of the paired differences, the one-standard-error
rule of the per-feature widths' guard (:mod:`._widths._guard`). An int
forces a map of that rank, without the guard.

A kept map replaces the selected candidate: ``best_estimator_`` pools the
mapped keys ``X @ projection_.components_.T`` at unit width with the map's
kernel, at degree 0, and every method of the search maps its queries first.
"""

import warnings
from numbers import Integral

import numpy as np
from scipy.sparse import issparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from ._projection import KernelAttentionProjection
from ._search._widths import split_score
from ._utils._categorical_input import fitted_categorical_mask
from ._utils._warnings import (
    BandwidthEdgeWarning,
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
)
from ._widths._guard import GUARD_MARGIN, default_splits, paired_gain, point_losses
from ._widths._projection_loss import differentiable_kernels, projection_loss
from .kernels import KERNELS

#: The rank of the map of ``projection="auto"`` (at most the features).
AUTO_RANK = 2

#: The constraint of the ``projection`` parameter.
PROJECTION_CONSTRAINT = [
    Interval(Integral, 1, None, closed="left"),
    StrOptions({"auto"}),
    None,
]


# The warnings of the searches fitted on the training parts of the guard.
QUIET = (
    BandwidthEdgeWarning,
    ConvergenceWarning,
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
)


def map_kernel(estimator):
    """The kernel of the map: the selected one where it has a slope, else the
    gaussian."""
    name = estimator.kernel_
    if isinstance(name, str) and name in differentiable_kernels():
        return KERNELS[name].name
    return "gaussian"


def check_projection(estimator, X):
    """Refuse what a map cannot take: categorical features, linear features,
    sparse keys, and more components than features."""
    problem = None
    if issparse(X):
        problem = "sparse X (make it dense first)"
    elif getattr(estimator, "linear_features", None) is not None:
        problem = "linear_features"
    elif np.any(fitted_categorical_mask(estimator)):
        problem = "categorical features"
    if problem is not None:
        raise ValueError(
            f"projection={estimator.projection!r} maps continuous features only; "
            f"it does not take {problem}. Use projection=None."
        )
    d = X.shape[1]
    if isinstance(estimator.projection, Integral) and estimator.projection > d:
        raise ValueError(
            f"projection={estimator.projection} exceeds the {d} features of X; "
            "use at most n_features components."
        )


class ProjectionFit:
    """The map of a fitted cross-validated estimator.

    Parameters
    ----------
    estimator : KernelAttentionRegressorCV or KernelAttentionClassifierCV
        After its candidate search and refit.
    search : CandidateSearch
        Its search: the data scored, the policy, the splits.
    refit : callable
        ``refit(estimator, kernel, Z, y, sample_weight)``: the estimator's
        ``best_estimator_`` pooling the mapped keys ``Z`` at unit width.
    """

    def __init__(self, estimator, search, refit):
        self.estimator = estimator
        self.search = search
        self.refit = refit
        self.data = search.data
        self.classifier = search.policy.objective == "log_loss"
        self.kernel = map_kernel(estimator)

    def fit(self, X, y, sample_weight, target):
        """Learn, guard and keep (or not) the map; set ``projection_`` and
        ``projection_scores_``.

        ``X``, ``y`` and ``sample_weight`` are those of the refit (validated),
        ``target`` what the map is learned on: ``y`` as floats for a
        regressor, the class indices for a classifier.
        """
        estimator = self.estimator
        estimator.projection_ = None
        estimator.projection_scores_ = None
        if estimator.projection is None:
            return estimator
        check_projection(estimator, X)
        X64 = np.asarray(X, dtype=np.float64)
        n_components = estimator.projection
        if n_components == "auto":
            n_components = min(AUTO_RANK, X.shape[1])
        oof = None
        if estimator.projection == "auto" or self.data.splits is not None:
            oof, scores = self._out_of_fold(
                X, X64, (y, target), sample_weight, n_components
            )
            estimator.projection_scores_ = scores
            if estimator.projection == "auto" and not scores["kept"]:
                self.search.say("Kept the search without a map")
                return estimator
        self.search.say("Learning the map on all the data")
        projection = self._projection(n_components).fit(X64, target, sample_weight)
        Z = projection.transform(X64)
        estimator.projection_ = projection
        estimator.best_estimator_ = self.refit(
            self.estimator, self.kernel, Z, y, sample_weight
        )
        self._selected(projection, X64, oof)
        return estimator

    def _projection(self, n_components):
        """The unfitted map of the search's settings."""
        return KernelAttentionProjection(
            n_components,
            kernel=self.kernel,
            max_iter=self.estimator.max_iter,
            random_state=0,
        )

    def _out_of_fold(self, X, X64, targets, sample_weight, n_components):
        """The out-of-fold predictions of the map's procedure, and the guard's
        comparison with the search's (``projection_scores_``)."""
        y, target = targets
        splits = self.data.splits or default_splits(X64.shape[0])
        Y = self.data.Y
        weights = self.data.weights
        oof = np.full(Y.shape, np.nan)
        losses, held_weights = [[], []], []
        without = clone(self.estimator).set_params(projection=None, verbose=0)
        for train, test in splits:
            w = None if sample_weight is None else sample_weight[train]
            fits = []
            for procedure in (without, None):
                if procedure is None:
                    mapped = self._projection(n_components).fit(
                        X64[train], target[train], w
                    )
                    Z = mapped.transform(X64[train])
                    model = self.refit(self.estimator, self.kernel, Z, y[train], w)
                    queries = mapped.transform(X64[test])
                else:
                    with warnings.catch_warnings():
                        # The search's own warnings were given by its fit.
                        for category in QUIET:
                            warnings.simplefilter("ignore", category)
                        model = clone(procedure).fit(
                            X[train], y[train], sample_weight=w
                        )
                    queries = X[test]
                fits.append(self._predict(model, queries, Y.shape[1]))
            oof[test] = fits[1]
            for k, fit in enumerate(fits):
                losses[k].append(point_losses(self.data_objective, Y[test], fit))
            held_weights.append(weights[test])
        return oof, self._compare(losses, np.concatenate(held_weights))

    @property
    def data_objective(self):
        """The loss of the comparison."""
        return "log_loss" if self.classifier else "squared_error"

    def _predict(self, model, queries, n_outputs):
        """A model's predictions (class probabilities, in the columns of every
        class) as (n, n_outputs)."""
        if self.classifier:
            proba = np.zeros((len(queries), n_outputs))
            columns = np.searchsorted(self.estimator.classes_, model.classes_)
            proba[:, columns] = model.predict_proba(queries)
            return proba
        return np.asarray(model.predict(queries), dtype=np.float64).reshape(
            len(queries), n_outputs
        )

    def _compare(self, losses, weights):
        """The one-standard-error rule on the paired out-of-fold losses."""
        search_loss, map_loss = (np.concatenate(part) for part in losses)
        gain, se = paired_gain(search_loss - map_loss, weights)
        total = weights.sum()
        scores = {
            "without": float(weights @ search_loss / total),
            "projection": float(weights @ map_loss / total),
            "standard_error": float(se),
            "kept": bool(gain > GUARD_MARGIN * se),
        }
        self.search.say(
            f"Out-of-fold loss: without a map {scores['without']:.6g}, with the "
            f"map {scores['projection']:.6g} (standard error of the difference "
            f"{se:.3g})"
        )
        return scores

    def _selected(self, projection, X64, oof):
        """Set what the search selected to the map's pooling."""
        estimator = self.estimator
        estimator.kernel_ = self.kernel
        estimator.bandwidth_ = 1.0
        estimator.n_neighbors_ = None
        estimator.per_feature_ = False
        estimator.n_iter_ = projection.n_iter_
        if hasattr(estimator, "degree_"):
            estimator.degree_ = 0
        estimator.best_score_ = self._score(projection, X64, oof)

    def _score(self, projection, X64, oof):
        """The map's score in the search's scoring: on the splits of ``cv``
        from the out-of-fold predictions, else from its exact leave-one-out
        fits (the map learned on all the data, as learned widths are)."""
        data, policy = self.data, self.search.policy
        if data.splits is not None:
            return split_score(policy, data, oof)
        _, _, fits = projection_loss(
            projection.components_,
            X64,
            data.Y,
            data.weights,
            KERNELS[self.kernel],
            objective=self.data_objective,
            gradient=False,
        )
        if data.scorer is None:
            # The negated weighted loss, as the search scores without a scorer.
            losses = point_losses(self.data_objective, data.Y, fits)
            return -float(data.weights @ losses / data.weights.sum())
        return float(
            policy.learned_loo_score(
                fits, data.X, data.y, data.weights, data.scorer, data.weighted
            )
        )
