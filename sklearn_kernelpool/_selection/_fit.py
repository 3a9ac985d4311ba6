"""The fit of :class:`KernelAttentionRegressorCV` before and after its
candidate search: the data validated for the search, and the refit of the
selected candidate on all of it."""

import numpy as np

from .._estimator._input_kinds import validate_fit_input
from .._search._candidates import CandidateSearch
from .._search._params import (
    SEARCH_PARAMETERS,
    relative_sample_weight,
    split_categorical,
)
from .._search._scores import RegressionScoring
from .._utils._categorical_input import category_levels, sorted_levels
from .._utils._sparse import dense_keys
from .._utils._validation import check_squares
from ._delegation import _quiet_diagnostics
from ._large import default_kernels
from ._learned_map import ProjectionFit
from ._partially_linear import linear_candidate_search


def candidate_search(estimator, X, y, sample_weight):
    """The candidate search of ``estimator`` on ``X, y``: ``(search, scored,
    refit)``, with ``scored`` the arguments of ``search.fit`` and ``refit``
    those of :func:`refit_selected` after ``estimator`` and ``search``.

    With ``linear_features``, the search of the partially linear model
    (:func:`._partially_linear.linear_candidate_search`)."""

    def make_search(policy, algorithm):
        parameters = {key: getattr(estimator, key) for key in SEARCH_PARAMETERS}
        parameters["algorithm"] = algorithm
        parameters["kernels"] = default_kernels(estimator) or estimator.kernels
        return CandidateSearch(policy, type(estimator).__name__, **parameters)

    estimator.linear_features_ = estimator.linear_features
    if estimator.linear_features is not None:
        return linear_candidate_search(estimator, X, y, sample_weight, make_search)
    data = validate_fit_input(estimator, X, y, sample_weight)
    y, given_weight = data.y, data.sample_weight
    # The scores need the distances of every pair: sparse keys are made
    # dense for them; the refit takes them as given.
    keys, codes, lambdas, placeholder = split_categorical(
        dense_keys(data.X), estimator.is_categorical_, estimator.categorical_bandwidths
    )
    # The scores square the distances of the data as it is, and the errors.
    check_squares(keys, "X", "squared distances")
    check_squares(y.reshape(keys.shape[0], -1), "y", "squared errors")
    search = make_search(RegressionScoring(estimator), estimator.algorithm)
    # (the refit of sparse X fits no local quadratic)
    search.quadratic_candidates = data.kind != "sparse"
    weights = relative_sample_weight(given_weight)
    levels = category_levels(estimator)
    scored = (keys, y, weights, codes, lambdas, placeholder, levels)
    # The held-out fits number the sorted levels among their own rows, as
    # refits do.
    scored += (sorted_levels(estimator, X),)
    # The refit reads the categories from X as given.
    categorical = data.kind == "categorical"
    refit = (X if categorical else data.X, y, given_weight, categorical)
    return search, scored, refit


def refit_selected(estimator, search, X, y, sample_weight, categorical):
    """Refit the candidate ``search`` selected on all the data, as
    ``estimator.best_estimator_``."""
    extra = {}
    if categorical:
        extra = {
            "categorical_features": estimator.categorical_features,
            "categorical_bandwidth": estimator.categorical_bandwidth_,
            "ordered_features": estimator.ordered_features,
        }
    if estimator.linear_features is not None:
        extra["categorical_features"] = estimator.categorical_features
        extra["ordered_features"] = estimator.ordered_features
        extra["linear_features"] = estimator.linear_features
    search.say(f"Refitting the selected candidate on all {y.shape[0]} samples")
    estimator.best_estimator_ = (
        estimator._get_estimator()
        .set_params(
            kernel=estimator.kernel_,
            bandwidth=estimator.bandwidth_,
            degree=estimator.degree_,
            on_empty=estimator.on_empty,
            algorithm="binned" if search.binned else estimator.algorithm,
            n_jobs=estimator.n_jobs,
            n_neighbors=estimator.n_neighbors_,
            **extra,
        )
        .fit(X, y, sample_weight=sample_weight)
    )  # the given weights: it rescales them
    # The share of shrunk held-out slopes of the selected candidate.
    shrunk = estimator.cv_results_.get("shrunk_fraction")
    estimator.shrunk_fraction_ = (
        0.0 if shrunk is None else float(shrunk[estimator.best_index_])
    )
    if estimator.linear_features is not None:
        # The categorical features of both parts, as the refit read them.
        estimator.is_categorical_ = estimator.best_estimator_.is_categorical_
        estimator.categories_ = estimator.best_estimator_.categories_
        estimator.is_ordered_ = estimator.best_estimator_.is_ordered_
    # effective_df_, computed on first access unless known already.
    estimator._effective_df = None
    if search.smoother_scoring() and estimator.per_feature_:
        # Learned widths: their criterion and trace from the refitted
        # estimator's own pass (the chunked pass that learned them rounds
        # more where the local designs are ill-conditioned).
        summary = _quiet_diagnostics(estimator.best_estimator_)
        estimator.best_score_ = -float(summary[search.scoring])
        estimator._effective_df = float(summary.effective_df)
    elif search.smoother_scoring():
        estimator._effective_df = float(
            estimator.cv_results_["effective_df"][estimator.best_index_]
        )
    return estimator


def refit_on_mapped_keys(estimator, kernel, Z, y, sample_weight):
    """The ``best_estimator_`` of a kept map: pooling of the mapped keys
    ``Z`` at unit width and degree 0 (:mod:`._learned_map`)."""
    algorithm = "auto" if estimator.algorithm == "binned" else estimator.algorithm
    return (
        estimator._get_estimator()
        .set_params(
            kernel=kernel,
            bandwidth=1.0,
            degree=0,
            on_empty=estimator.on_empty,
            algorithm=algorithm,
            n_jobs=estimator.n_jobs,
        )
        .fit(Z, y, sample_weight=sample_weight)
    )


def fit_projection(estimator, search, X, y, sample_weight):
    """Learn, guard and keep (or not) the map of ``projection`` after the
    search and its refit on ``X``, ``y`` and ``sample_weight``
    (:mod:`._learned_map`); nothing without one."""
    if estimator.projection is None:
        estimator.projection_ = estimator.projection_scores_ = None
        return estimator
    mapped = ProjectionFit(estimator, search, refit_on_mapped_keys)
    return mapped.fit(X, y, sample_weight, y.astype(np.float64))


def score_search(estimator, X, y, sample_weight):
    """Score the candidates of ``estimator`` on ``X, y`` and set what its
    search selected: ``(search, refit)``, the arguments of
    :func:`refit_search`."""
    search, scored, refit = candidate_search(estimator, X, y, sample_weight)
    try:
        search.fit(*scored)
    finally:
        # (cv_results_ also when no candidate could be scored)
        estimator.__dict__.update(search.selected())
    return search, refit


def refit_search(estimator, search, refit):
    """Refit the candidate that ``search`` selected and learn the map of
    ``projection``; ``refit`` as :func:`score_search` returns it."""
    refit_selected(estimator, search, *refit)
    return fit_projection(estimator, search, *refit[:3])


def fit_search(estimator, X, y, sample_weight):
    """``KernelAttentionRegressorCV.fit`` without ``linear_features="auto"``
    (:func:`._linear_auto.fit_auto`): score every candidate, select the
    best, refit it on all the data and learn the map of ``projection``."""
    estimator.projection_ = estimator.projection_scores_ = None
    estimator.linear_scores_ = None
    return refit_search(estimator, *score_search(estimator, X, y, sample_weight))
