"""The exact search of :class:`KernelAttentionClassifierCV`: the held-out
class probabilities of every candidate are the held-out pooled one-hot
labels (:mod:`.._search._proba`), scored in the passes of
:class:`.._search._candidates.CandidateSearch`; the selected candidate is
then refitted on all the data."""

import numpy as np
from sklearn.model_selection import check_cv
from sklearn.utils.multiclass import check_classification_targets

from .._estimator._input_kinds import validate_fit_input
from .._search._candidates import SELECTED, CandidateSearch
from .._search._params import relative_sample_weight
from .._search._proba import ProbabilityScoring
from .._utils._sparse import dense_keys
from .._utils._validation import check_squares
from ._large import default_kernels
from ._learned_map import ProjectionFit

#: The parameters the scoring pass takes as they are.
SHARED = (
    "bandwidths",
    "per_feature",
    "on_empty",
    "n_jobs",
    "verbose",
    "max_iter",
    "n_neighbors",
)


def fit_classifier_search(estimator, X, y, sample_weight):
    """Score every candidate of ``estimator``, select the best and refit it
    on all the data (the exact search of the classifier)."""
    return refit_classifier_search(
        estimator, *score_classifier_search(estimator, X, y, sample_weight)
    )


def score_classifier_search(estimator, X, y, sample_weight):
    """Score the candidates of ``estimator`` on ``X, y`` and set what its
    search selected: ``(search, refit)``, the arguments of
    :func:`refit_classifier_search` after ``estimator``."""
    data = validate_fit_input(estimator, X, y, sample_weight, target="labels")
    X, y, given_weight = data.X, data.y, data.sample_weight
    with np.errstate(invalid="ignore"):
        check_classification_targets(y)
    estimator.classes_, true = np.unique(y, return_inverse=True)
    if estimator.per_feature is True and estimator.cv is not None:
        raise ValueError(
            "per_feature=True learns the widths on the leave-one-out "
            f"log-loss and scores them there: it needs cv=None; got "
            f"cv={estimator.cv!r}. per_feature='auto' judges them on the splits "
            "of cv."
        )
    policy = ProbabilityScoring(estimator, y, true, estimator.classes_)
    policy.check_scorer(sample_weight is not None)
    splits = None
    if estimator.cv is not None:
        cv = check_cv(estimator.cv, y, classifier=True)
        splits = [(np.asarray(tr), np.asarray(te)) for tr, te in cv.split(X, y)]
    onehot = np.zeros((X.shape[0], len(estimator.classes_)))
    onehot[np.arange(X.shape[0]), true] = 1.0
    # The scores need the distances of every pair: sparse keys are made
    # dense for them; the refit takes them as given.
    keys = dense_keys(X)
    check_squares(keys, "X", "squared distances")
    # The search of the pooled one-hot labels: degree 0, on the binned
    # path when asked for.
    search = CandidateSearch(
        policy,
        type(estimator).__name__,
        cv=splits,
        scoring=estimator.scoring,
        algorithm="binned" if estimator.algorithm == "binned" else "brute",
        degree=0,
        kernels=default_kernels(estimator) or estimator.kernels,
        **{name: getattr(estimator, name) for name in SHARED},
    )
    search.fit(keys, onehot, relative_sample_weight(given_weight))
    _take_selected(estimator, search)
    return search, (X, y, given_weight)


def refit_classifier_search(estimator, search, refit):
    """Refit the candidate ``search`` selected on the rows ``refit``, ``(X,
    y, sample_weight)``, and learn the map of ``projection``."""
    X, y, sample_weight = refit
    true = np.searchsorted(estimator.classes_, y)
    search.say(f"Refitting the selected candidate on all {X.shape[0]} samples")
    estimator.best_estimator_ = (
        estimator._get_estimator()
        .set_params(
            kernel=estimator.kernel_,
            bandwidth=estimator.bandwidth_,
            on_empty=estimator.on_empty,
            algorithm=estimator.algorithm,
            n_jobs=estimator.n_jobs,
            n_neighbors=estimator.n_neighbors_,
        )
        .fit(X, y, sample_weight=sample_weight)
    )
    mapped = ProjectionFit(estimator, search, _refit_on_mapped_keys)
    return mapped.fit(X, y, sample_weight, true)


def _take_selected(estimator, search):
    """Set what ``search`` selected on ``estimator``."""
    selected = search.selected()
    # All but the degree (0) and the categorical bandwidth (none).
    for name in SELECTED:
        if name in ("degree_", "categorical_bandwidth_"):
            continue
        if name in selected:
            setattr(estimator, name, selected[name])
        else:  # one the search did not set, left by an earlier fit
            estimator.__dict__.pop(name, None)


def _refit_on_mapped_keys(estimator, kernel, Z, y, sample_weight):
    """The ``best_estimator_`` of a kept map: pooling of the class indicators
    of the mapped keys ``Z`` at unit width (:mod:`._selection._learned_map`)."""
    algorithm = "auto" if estimator.algorithm == "binned" else estimator.algorithm
    return (
        estimator._get_estimator()
        .set_params(
            kernel=kernel,
            bandwidth=1.0,
            on_empty=estimator.on_empty,
            algorithm=algorithm,
            n_jobs=estimator.n_jobs,
        )
        .fit(Z, y, sample_weight=sample_weight)
    )
