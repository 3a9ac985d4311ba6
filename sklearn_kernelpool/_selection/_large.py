"""The large-table selection of the cross-validated estimators.

The exact search scores every candidate on every pair of rows, ``O(n^2)``.
Above :data:`LARGE_TABLE_ROWS` rows of positive weight (or above the rows
``subsample`` names), the estimators select in two stages instead:

1. **The subsample.** The exact search, with every parameter as given, on
   ``m`` rows drawn at random (``random_state``): it fixes the kernel, the
   degree, the categorical bandwidth and the linear columns, and gives for
   each kernel the best fixed width ``h_m`` and neighbour count ``k_m``.
2. **The full table.** Widths and counts rescaled to the ``n`` rows by
   the rates of a local fit of a second-order kernel in ``d`` continuous
   features [1]_, ``h_m (m / n)^(1 / (4 + d))`` and
   ``k_m (n / m)^(4 / (4 + d))``, on geometric grids around them
   (:data:`WIDTH_STEPS`, :data:`COUNT_STEPS`) skewed towards the narrow side
   (the selected width shrinks faster than the rate on smooth data), are
   scored on ``r`` held-out rows drawn with the subsample, each predicted
   from the ``n - r`` other rows: one split of the exact search at full
   ``n``, ``O(r n)``, on the neighbour lists for compact kernels.
3. **A family that predicts fast.** Where a compact kernel scores within
   one paired standard error of the best non-compact one on the held-out
   rows, the compact one is kept: its predictions pool only the keys in
   its support (trees), where the Gaussian pools every key.

The selected candidate is then refitted on all the rows. Both stages are
the exact search's code on fewer rows, so everything but the width is
decided on ``m`` rows; the loss against the exact search is measured in
``benchmarks/bench_large.py`` and stated in :ref:`large-tables`.

References
----------
.. [1] J. Fan and I. Gijbels, "Local Polynomial Modelling and Its
   Applications", Chapman & Hall (1996), section 3.2.
"""

import numpy as np
from sklearn.base import clone, is_classifier
from sklearn.model_selection import StratifiedShuffleSplit
from sklearn.utils import check_random_state
from sklearn.utils._indexing import _safe_indexing
from sklearn.utils.validation import _num_samples

from .._estimator._identification import NotIdentifiedError
from .._held_out._criteria import SMOOTHER_CRITERIA
from .._search._engines import neighbour_lists
from .._search._quadratic_stage import without_quadratic_candidates
from .._utils._categorical_input import categorical_mask
from .._utils._progress import new_stage_bar
from .._utils._row_blocks import map_in_turn, mapped_row_blocks
from ._alternative import keeping_the_alternative
from ._large_dask import gathered_rows, is_dask, map_on_dask
from ._large_linear import (
    adopt_partially_linear,
    is_partially_linear,
    partially_linear_model,
    residual_rows,
)
from ._large_results import (
    edge_extension,
    finalist_kernels,
    merged_results,
    row_losses,
    subsample_candidates,
)

#: Rows of positive weight above which ``subsample="auto"`` selects in two
#: stages, and the rows of its subsample.
LARGE_TABLE_ROWS = 10_000
SUBSAMPLE_ROWS = 4_000
#: ... and of its subsample on a table with categorical features, whose
#: search scores every width at each of their bandwidths.
CATEGORICAL_SUBSAMPLE_ROWS = 2_500
#: The most held-out rows that score the rescaled candidates.
HELD_OUT_ROWS = 1_000


def large_kernels(estimator):
    """The kernels of ``kernels="auto"`` on a large table: the small
    table's and the compact Epanechnikov kernel (a family that predicts
    from the keys in its support)."""
    kernels = default_kernels(estimator, large=True)
    return kernels if kernels is not None else estimator.kernels


def default_kernels(estimator, large=False):
    """The kernels ``kernels="auto"`` means (on a large table with
    ``large``), or None where ``kernels`` is not ``"auto"``."""
    if not (isinstance(estimator.kernels, str) and estimator.kernels == "auto"):
        return None
    kernels = ("gaussian", "exponential") if is_classifier(estimator) else ("gaussian",)
    return kernels + ("epanechnikov",) if large else kernels


def _unsupported(estimator):
    """Why the two stages cannot stand in for the exact search of
    ``estimator``, or ""."""
    cv = estimator.cv
    if not isinstance(estimator.per_feature, str) and estimator.per_feature:
        return f"per_feature={estimator.per_feature!r} (learned widths)"
    if getattr(estimator, "projection", None) is not None:
        return f"projection={estimator.projection!r}"
    if isinstance(estimator.scoring, str) and estimator.scoring in SMOOTHER_CRITERIA:
        return f"scoring={estimator.scoring!r} (an in-sample criterion)"
    if cv is not None and not isinstance(cv, int) and not hasattr(cv, "split"):
        return "cv given as (train, test) indices of the whole table"
    if estimator.algorithm == "binned":
        return 'algorithm="binned" (itself an approximation for large tables)'
    return ""


def subsample_rows(estimator, n_positive, categorical=False):
    """The rows of the subsample of ``estimator`` on a table of
    ``n_positive`` rows of positive weight (with ``categorical`` features),
    or None for the exact search."""
    subsample = estimator.subsample
    if subsample is None:
        return None
    why = _unsupported(estimator)
    if isinstance(subsample, str):  # "auto"
        if n_positive <= LARGE_TABLE_ROWS or why:
            return None
        return CATEGORICAL_SUBSAMPLE_ROWS if categorical else SUBSAMPLE_ROWS
    if why:
        raise ValueError(
            f"subsample={subsample} selects on a subsample, which "
            f"{type(estimator).__name__} cannot do with {why}: use "
            'subsample=None (the exact search) or "auto".'
        )
    return int(subsample) if n_positive > subsample else None


def _categorical(estimator, X):
    """Whether ``X`` has features that ``categorical_features`` declares
    categorical (the fit explains a mask it cannot read)."""
    features = getattr(estimator, "categorical_features", None)
    if features is None:
        return False
    try:
        mask = categorical_mask(features, X)
    except (ValueError, TypeError):
        return False
    return mask is not None and bool(np.any(mask))


def _draw(estimator, n, weights, y, m):
    """The rows of the subsample and the held-out rows, sorted: a random
    draw of the rows of positive weight that depends only on them and on
    ``random_state`` (stratified by class for a classifier, where the
    classes are common enough for the sizes)."""
    rng = check_random_state(estimator.random_state)
    positive = np.arange(n) if weights is None else np.flatnonzero(weights > 0)
    r = min(HELD_OUT_ROWS, positive.size - m)
    if is_classifier(estimator):
        labels = np.asarray(y)[positive]
        split = StratifiedShuffleSplit(1, test_size=r, train_size=m, random_state=rng)
        try:
            sub, held = next(split.split(positive.reshape(-1, 1), labels))
            return np.sort(positive[sub]), np.sort(positive[held])
        except ValueError:
            pass  # a class too rare for the sizes: the rows in random order
    order = rng.permutation(positive)
    return np.sort(order[:m]), np.sort(order[m : m + r])


def _say(estimator, message):
    if estimator.verbose >= 1:
        print(f"[{type(estimator).__name__}] {message}")


def fit_large(estimator, X, y, sample_weight, fit_exact, stages):
    """Fit ``estimator`` by the two stages where :func:`subsample_rows`
    asks for them, else by ``fit_exact(estimator, X, y, sample_weight)``.

    ``stages`` are ``(score, refit)``: ``score(estimator, X, y,
    sample_weight)`` scores the candidates of ``estimator`` and returns
    ``(search, rows)``, with ``rows`` starting ``(X, y, sample_weight)`` as
    validated; ``refit(estimator, search, rows)`` refits the selected one on
    ``rows``."""
    on_dask = is_dask(X)
    if on_dask:
        X, y, sample_weight = gathered_rows(
            estimator, X, y, sample_weight, subsample_rows
        )
    n = _num_samples(X)
    weights = None if sample_weight is None else np.asarray(sample_weight)
    m = None
    if weights is None or weights.shape == (n,):  # else the exact fit explains
        n_positive = n if weights is None else int(np.count_nonzero(weights > 0))
        m = subsample_rows(estimator, n_positive, _categorical(estimator, X))
    if m is None:
        estimator.subsample_ = estimator.n_held_out_ = None
        estimator.subsample_results_ = None
        return fit_exact(estimator, X, y, sample_weight)
    sub, held = _draw(estimator, n, weights, y, m)
    bar = new_stage_bar(4)
    rows, draw, route = (X, y, weights), (sub, held), (stages, bar, on_dask)
    try:
        with keeping_the_alternative() as alternative:
            first = _fit_subsample(estimator, X, y, weights, sub, n)
        bar.update(1)
        try:
            kept, searched, model = _full_table(estimator, first, rows, draw, route)
        except NotIdentifiedError as error:
            if "refit" not in alternative:
                raise
            _say(
                estimator,
                f"At full n: {error} The categorical features go in the kernel, "
                "as the subsample's search of them selected",
            )
            first = alternative["refit"]()
            kept, searched, model = _full_table(estimator, first, rows, draw, route)
    finally:
        bar.close()
    _take_selection(estimator, first, searched, kept, m, held.size)
    if model is not None:
        adopt_partially_linear(estimator, model, first)
    return estimator


def _full_table(estimator, first, rows, draw, route):
    """Stages 2 and 3 after the subsample's search ``first``, and the refit
    on ``rows`` ``(X, y, weights)``: ``(kept search, every search of stage 2,
    the partially linear model or None)``. ``draw`` are ``(sub, held)``,
    ``route`` the ``stages`` of :func:`fit_large`, its progress bar and
    whether the rows came from dask."""
    stages, bar, on_dask = route
    # (after a fallback, the stages of both routes)
    bar.total = bar.n + 1 + len(finalist_kernels(first))
    linear = is_partially_linear(first)
    data, changes = rows, {}
    if linear:
        data, changes = residual_rows(first, rows)
    # The held-out rows in blocks: as tasks on the cluster on dask, in turn
    # in memory, so that both compute every row alike.
    with mapped_row_blocks(map_on_dask if on_dask else map_in_turn):
        finalists, searched = _score_full_table(
            estimator, first, data, draw, (stages[0], changes), bar
        )
        final = _prefer_compact(estimator, finalists, draw[1], stages[1])
    kept, search, kept_rows = finalists[final]
    model = partially_linear_model(kept, first, rows) if linear else None
    if not linear:
        stages[1](kept, search, kept_rows)
    bar.update(1)
    return kept, searched, model


def _fit_subsample(estimator, X, y, weights, sub, n):
    """Stage 1: the exact search on the rows ``sub``."""
    _say(
        estimator,
        f"Large table: the exact search on a subsample of {sub.size} of {n} rows",
    )
    # per_feature="auto" learns no widths on a large table (its guard would
    # judge them on the subsample, or on the held-out rows, alone).
    first = clone(estimator).set_params(
        subsample=None, kernels=large_kernels(estimator), per_feature=False
    )
    rows_weights = None if weights is None else weights[sub]
    with neighbour_lists(), without_quadratic_candidates():
        return first.fit(_safe_indexing(X, sub), _safe_indexing(y, sub), rows_weights)


def _score_full_table(estimator, first, data, rows, scoring, bar):
    """Stage 2: for the selected kernel, and the best compact kernel where
    another was selected, the rescaled candidates scored on the held-out
    rows at full n: ``[(fitted search, its search, its rows), ...]``, the
    selected kernel first. ``data`` are ``(X, y, weights)``, ``rows``
    ``(sub, held)``, ``scoring`` the ``score`` of :func:`fit_large` and the
    parameters that differ from the subsample's search."""
    score, differ = scoring
    n = _num_samples(data[0])
    sub, held = rows
    train = np.setdiff1d(np.arange(n), held, assume_unique=True)
    own = set(estimator.get_params(deep=False))
    shared = {**_lambdas(first), **_linear(first), **_kernel_columns(first)}
    finalists, searched = [], []
    for kernel, changes in subsample_candidates(first, sub.size, n, train.size):
        _say(
            estimator,
            f"Scoring the rescaled candidates of kernel={kernel!r} on {held.size} "
            f"held-out rows against the other {train.size}",
        )
        changes.update({k: v for k, v in shared.items() if k in own})
        changes.update(differ)
        second = clone(estimator).set_params(
            subsample=None,
            kernels=(kernel,),
            cv=[(train, held)],
            per_feature=False,
            **changes,
        )
        with neighbour_lists():
            parts = [(second, *score(second, *data))]
            extension = edge_extension(second, changes, train.size)
            if extension is not None:
                _say(estimator, f"The best is on the edge: scoring {extension}")
                third = clone(second).set_params(**extension)
                parts.append((third, *score(third, *data)))
        finalists.append(max(parts, key=lambda part: part[0].best_score_))
        searched.extend(part[0] for part in parts)
        bar.update(1)
    return finalists, searched


def _lambdas(first):
    """The categorical bandwidth the subsample selected, as the only
    candidate."""
    lam = getattr(first, "categorical_bandwidth_", None)
    return {} if lam is None else {"categorical_bandwidths": (float(np.mean(lam)),)}


def _kernel_columns(first):
    """The categorical and ordered features of the subsample's kernel
    route, as its refitted model took them (``"auto"`` may have found them
    in the dtypes of ``X`` itself); nothing for a partially linear route,
    whose second stage names its kernel columns (:mod:`._large_linear`)."""
    best = first.best_estimator_
    if getattr(best, "coef_", None) is not None:
        return {}
    features = getattr(best, "categorical_features", None)
    if features is None:
        return {}
    return {
        "categorical_features": features,
        "ordered_features": getattr(best, "ordered_features", None),
    }


def _linear(first):
    """The linear columns the subsample kept (regressor), as given."""
    if not hasattr(first, "linear_features_"):
        return {}
    return {"linear_features": first.linear_features_}


def _prefer_compact(estimator, finalists, held, refit):
    """The index of the finalist kept: the selected kernel's, or the compact
    one where its held-out losses, refitted without the held-out rows,
    exceed the other's by at most one paired standard error."""
    if len(finalists) == 1:
        return 0
    losses = [row_losses(*finalist, held, refit) for finalist in finalists]
    difference = losses[1] - losses[0]
    se = np.std(difference, ddof=1) / np.sqrt(difference.size)
    gap = float(np.mean(difference))
    kept = int(gap <= se)
    names = [finalist[0].kernels[0] for finalist in finalists]
    _say(
        estimator,
        f"Held-out loss of kernel={names[1]!r} minus {names[0]!r}: {gap:.4g} "
        f"(standard error {se:.3g}); kept kernel={names[kept]!r}",
    )
    return kept


def _take_selection(estimator, first, searched, kept, m, r):
    """Give ``estimator`` the fitted state of the kept search, the merged
    results of every search of the second stage and the subsample's
    results."""
    params = set(estimator.get_params(deep=False))
    for name, value in vars(kept).items():
        if name not in params:
            estimator.__dict__[name] = value
    results, offsets = merged_results([_with_degree(search) for search in searched])
    estimator.cv_results_ = results
    at = next(i for i, search in enumerate(searched) if search is kept)
    estimator.best_index_ = offsets[at] + kept.best_index_
    estimator.subsample_ = m
    estimator.n_held_out_ = r
    estimator.subsample_results_ = first.cv_results_
    if hasattr(first, "linear_scores_"):
        estimator.linear_scores_ = first.linear_scores_


def _with_degree(search):
    """The ``cv_results_`` of a second-stage ``search``, with the degree of
    its candidates (one per search) as ``param_degree``."""
    results = dict(search.cv_results_)
    if hasattr(search, "degree_") and "param_degree" not in results:
        size = len(results["params"])
        results["param_degree"] = np.full(size, search.degree_, dtype=object)
    return results
