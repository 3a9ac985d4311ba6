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
rule of the per-feature widths' guard (:mod:`.._widths._guard`). An int
forces a map of that rank, without the guard.

A kept map replaces the selected candidate: ``best_estimator_`` pools the
mapped keys ``X @ projection_.components_.T`` at unit width with the map's
kernel, at degree 0, and every method of the search maps its queries first.
The map is then an entry of ``cv_results_`` (:mod:`.._search._mapped`), the
last, at which ``best_index_``, ``best_params_`` and ``best_score_`` point.

The guard's fits on the training parts are internal: their warnings, which
name widths selected on a part, are silenced (:func:`quiet_internal_fits`).
"""

import warnings
from contextlib import contextmanager
from numbers import Integral

import numpy as np
from scipy.sparse import issparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions

from .._search._mapped import append_entry, map_results
from .._utils._categorical_input import fitted_categorical_mask
from .._utils._warnings import (
    BandwidthEdgeWarning,
    CoarseGridWarning,
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
    LocalLinearMemoryWarning,
)
from .._widths._guard import GUARD_MARGIN, default_splits, paired_gain, point_losses
from .._widths._projection_loss import differentiable_kernels
from ..kernels import KERNELS

#: The rank of the map of ``projection="auto"`` (at most the features).
AUTO_RANK = 2

#: The constraint of the ``projection`` parameter.
PROJECTION_CONSTRAINT = [
    Interval(Integral, 1, None, closed="left"),
    StrOptions({"auto"}),
    None,
]


# The warnings of the fits on the training parts of the guard, and of their
# predictions of the test parts: those of the package and the iteration cap.
QUIET = (
    BandwidthEdgeWarning,
    CoarseGridWarning,
    ConvergenceWarning,
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
    LocalLinearMemoryWarning,
)


@contextmanager
def quiet_internal_fits():
    """Silence the warnings of :data:`QUIET` within: the fits internal to the
    guard, as the package silences its other internal fits (with
    :func:`warnings.catch_warnings`). Those of the search and of the map on
    all the data, the models the user gets, are given by their own fits."""
    with warnings.catch_warnings():
        for category in QUIET:
            warnings.simplefilter("ignore", category)
        yield


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
        maps = None
        if estimator.projection == "auto" or self.data.splits is not None:
            maps, scores = self._out_of_fold(
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
        if self.data.splits is None:
            maps = [projection.components_]
        self._selected(projection, n_components, maps)
        return estimator

    def _projection(self, n_components):
        """The unfitted map of the search's settings."""
        return self.estimator._get_projection().set_params(
            n_components=n_components,
            kernel=self.kernel,
            max_iter=self.estimator.max_iter,
            random_state=0,
        )

    def _out_of_fold(self, X, X64, targets, sample_weight, n_components):
        """The maps learned on the training part of each split, and the
        guard's comparison of their out-of-fold losses with those of the
        search without a map (``projection_scores_``). The warnings of these
        internal fits and of their predictions are silenced."""
        y, target = targets
        splits = self.data.splits or default_splits(X64.shape[0])
        Y = self.data.Y
        losses, maps = [[], []], []
        without = clone(self.estimator).set_params(projection=None, verbose=0)
        with quiet_internal_fits():
            for train, test in splits:
                w = None if sample_weight is None else sample_weight[train]
                model = clone(without).fit(X[train], y[train], sample_weight=w)
                fits = [self._predict(model, X[test], Y.shape[1])]
                mapped = self._projection(n_components).fit(
                    X64[train], target[train], w
                )
                Z = mapped.transform(X64[train])
                model = self.refit(self.estimator, self.kernel, Z, y[train], w)
                fits.append(
                    self._predict(model, mapped.transform(X64[test]), Y.shape[1])
                )
                maps.append(mapped.components_)
                for k, fit in enumerate(fits):
                    losses[k].append(point_losses(self.data_objective, Y[test], fit))
        held_weights = np.concatenate([self.data.weights[test] for _, test in splits])
        return maps, self._compare(losses, held_weights)

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

    def _selected(self, projection, n_components, maps):
        """Set what the search selected to the map's pooling, and append the
        map's entry to ``cv_results_``: ``best_index_``, ``best_params_``
        and ``best_score_`` are then those of the entry."""
        estimator = self.estimator
        # In the order of the other candidates' keys (ParameterGrid's).
        params = {"bandwidth": 1.0}
        if getattr(estimator, "degree", 0) != 0:
            params["degree"] = 0
        params.update(kernel=self.kernel, projection=n_components)
        results = map_results(self.search, self.kernel, maps)
        estimator.cv_results_ = append_entry(estimator.cv_results_, params, results)
        estimator.best_index_ = len(estimator.cv_results_["params"]) - 1
        estimator.best_params_ = dict(params)
        estimator.best_score_ = float(results["mean_test_score"][0])
        estimator.kernel_ = self.kernel
        estimator.bandwidth_ = 1.0
        estimator.n_neighbors_ = None
        estimator.per_feature_ = False
        estimator.n_iter_ = projection.n_iter_
        if hasattr(estimator, "degree_"):
            estimator.degree_ = 0
            estimator.shrunk_fraction_ = 0.0
            # Known from the search's in-sample pass, else on first access.
            df = results.get("effective_df")
            estimator._effective_df = None if df is None else float(df[0])
