"""What the large-table selection (:mod:`._large`) reads from its subsample
search and gives back: the rescaled candidates of each kernel, the
held-out losses of a finalist row by row, and the merged results of the
second stage."""

import warnings

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils._indexing import _safe_indexing
from sklearn.utils.validation import _num_samples

from .._search._grid import _rank
from ..kernels import KERNELS

#: The widths and counts of the second stage, relative to the rescaled ones:
#: geometric grids skewed towards the narrow side.
WIDTH_STEPS = 1.2 ** np.arange(-6, 3)
COUNT_STEPS = 1.5 ** np.arange(-3, 3)


def _continuous_features(first):
    """The features the kernel of the subsample search measures distances
    in (its categorical ones excluded), at least 1."""
    mask = getattr(first, "is_categorical_", None)
    n_categorical = 0 if mask is None else int(np.count_nonzero(mask))
    return max(first.n_features_in_ - n_categorical, 1)


def _kept_route(first):
    """The subsample's ``cv_results_``, of the kept route alone where
    ``linear_features="auto"`` scored both (its ``param_linear_features``):
    the other route's candidates are not the kept model's."""
    results = first.cv_results_
    labels = results.get("param_linear_features")
    if labels is None:
        return results
    rows = np.flatnonzero(
        np.asarray(labels, dtype=object) == getattr(first, "linear_features_", None)
    )
    kept = {key: value[rows] for key, value in results.items() if key != "params"}
    kept["params"] = [results["params"][i] for i in rows]
    kept["rank_test_score"] = _rank(np.asarray(kept["mean_test_score"], dtype=float))
    return kept


def _best_rows(results, kernel, degree):
    """The best fixed-width row and the best adaptive row of ``kernel`` (at
    ``degree`` where the results have degrees) in ``results``, or None."""
    scores = np.asarray(results["mean_test_score"], dtype=float)
    rows = np.asarray(results["param_kernel"]) == kernel
    if degree is not None and "param_degree" in results:
        rows &= np.asarray(results["param_degree"], dtype=object) == degree
    counts = results.get("param_n_neighbors")
    adaptive = (
        np.zeros(scores.size, bool) if counts is None else ~np.ma.getmaskarray(counts)
    )
    best = []
    for family in (rows & ~adaptive, rows & adaptive):
        candidates = np.flatnonzero(family & ~np.isnan(scores))
        best.append(
            candidates[np.argmax(scores[candidates])] if candidates.size else None
        )
    return best


def _kernel_degree(first, results, kernel):
    """The degree of ``kernel``'s best candidate: the selected one for the
    selected kernel, else its best row's."""
    if not hasattr(first, "degree_"):
        return None
    if kernel == first.kernel_ or "param_degree" not in results:
        return first.degree_
    scores = np.asarray(results["mean_test_score"], dtype=float)
    rows = np.flatnonzero(
        (np.asarray(results["param_kernel"]) == kernel) & ~np.isnan(scores)
    )
    return int(results["param_degree"][rows[np.argmax(scores[rows])]])


def finalist_kernels(first):
    """The kernel the subsample selected and, where it is not compact, the
    best-scored compact kernel the subsample searched. A partially linear
    model takes the compact one alone where there is one: the leave-one-out
    fits behind its coefficients take the neighbour lists, where another
    kernel's take every pair of rows."""
    results = _kept_route(first)
    kernels = [first.kernel_]
    if first.kernel_ == "constant" or KERNELS[first.kernel_].is_compact:
        return kernels
    scores = np.asarray(results["mean_test_score"], dtype=float)
    names = np.asarray(results["param_kernel"])
    compact = np.array([KERNELS[name].is_compact for name in names])
    candidates = np.flatnonzero(compact & ~np.isnan(scores))
    if not candidates.size:
        return kernels
    best = str(names[candidates[np.argmax(scores[candidates])]])
    if getattr(first, "linear_features_", None) is not None:
        return [best]
    return kernels + [best]


def subsample_candidates(first, m, n, n_train):
    """``[(kernel, parameters), ...]``: for each finalist kernel of the
    subsample search ``first`` (fitted on ``m`` rows), the parameters of its
    second-stage search on ``n`` rows whose splits train on ``n_train``:
    its degree, the rescaled widths of its best fixed-width candidate and
    the rescaled counts of its best adaptive one (both families for a
    compact kernel, whose held-out sums take the neighbour lists; only the
    selected family for another, whose adaptive sums take every row)."""
    if first.kernel_ == "constant":  # the global line of a small table
        return [("constant", {"bandwidths": [first.bandwidth_], "n_neighbors": None})]
    d = _continuous_features(first)
    width_rate = (m / n) ** (1.0 / (4 + d))
    count_rate = (n / m) ** (4.0 / (4 + d))
    results = _kept_route(first)
    finalists = []
    for kernel in finalist_kernels(first):
        degree = _kernel_degree(first, results, kernel)
        fixed, adaptive = _best_rows(results, kernel, degree)
        if not KERNELS[kernel].is_compact and kernel == first.kernel_:
            fixed, adaptive = (None, adaptive) if first.n_neighbors_ else (fixed, None)
        widths = counts = None
        if fixed is not None:
            h_m = float(results["param_bandwidth"][fixed])
            widths = h_m * width_rate * WIDTH_STEPS
        if adaptive is not None:
            k_m = float(results["param_n_neighbors"][adaptive])
            counts = np.unique(np.round(k_m * count_rate * COUNT_STEPS).astype(int))
            counts = np.unique(np.clip(counts, 1, n_train - 1))
        parameters = {"bandwidths": widths, "n_neighbors": counts}
        if degree is not None:
            parameters["degree"] = degree
        finalists.append((kernel, parameters))
    return finalists


def edge_extension(search, parameters, n_train):
    """The parameters of a second search past the edge of the grid of
    ``parameters`` where the fitted ``search`` selected its widest or
    narrowest candidate: three more steps of the grid's ratio beyond it (of
    its family alone), or None where the selection is interior."""
    best = search.best_params_
    if "n_neighbors" in best:
        counts, k = np.asarray(parameters["n_neighbors"]), best["n_neighbors"]
        if k not in (counts.min(), counts.max()) or counts.size < 2:
            return None
        step = COUNT_STEPS[1] / COUNT_STEPS[0] if k == counts.max() else 1 / 1.5
        new = np.unique(np.round(k * step ** np.arange(1, 4)).astype(int))
        new = new[(new >= 1) & (new <= n_train - 1) & ~np.isin(new, counts)]
        return {"bandwidths": None, "n_neighbors": new} if new.size else None
    widths = parameters.get("bandwidths")
    if widths is None or len(widths) < 2 or np.ndim(best["bandwidth"]):
        return None
    h, ratio = best["bandwidth"], WIDTH_STEPS[1] / WIDTH_STEPS[0]
    if h == np.max(widths):
        return {"bandwidths": h * ratio ** np.arange(1, 4), "n_neighbors": None}
    if h == np.min(widths):
        return {"bandwidths": h * ratio ** -np.arange(1, 4), "n_neighbors": None}
    return None


def row_losses(estimator, search, rows, held, refit):
    """The held-out loss of each row of ``held`` under the candidate
    ``search`` selected for ``estimator``, refitted by ``refit`` on the
    validated ``rows`` ``(X, y, sample_weight, ...)`` but ``held``: the
    squared error summed over the outputs, or the log-loss of a classifier;
    times the row's weight relative to the mean held-out weight."""
    X, y, weights = rows[:3]
    train = np.setdiff1d(np.arange(_num_samples(X)), held, assume_unique=True)
    train_rows = tuple(_rows_of(part, train) for part in rows[:3]) + tuple(rows[3:])
    queries, truth = _safe_indexing(X, held), np.asarray(_safe_indexing(y, held))
    with warnings.catch_warnings():
        # (a comparison: the kept candidate's refit and predictions warn)
        warnings.simplefilter("ignore")
        refit(estimator, search, train_rows)
        model = estimator.best_estimator_
        if is_classifier(estimator):
            predicted = model.predict_proba(queries)
        else:
            predicted = model.predict(queries)
    if is_classifier(estimator):
        true = np.searchsorted(model.classes_, truth)
        true_proba = predicted[np.arange(held.size), true]
        loss = -np.log(np.clip(true_proba, np.finfo(float).tiny, None))
    else:
        error = predicted.reshape(held.size, -1) - truth.reshape(held.size, -1)
        loss = np.sum(error**2, axis=1)
    if weights is None:
        return loss
    weights = np.asarray(weights)
    return loss * weights[held] / np.mean(weights[held])


def _rows_of(part, rows):
    """``part`` (X, y or the weights, or None) at ``rows``."""
    return None if part is None else _safe_indexing(part, rows)


def merged_results(results):
    """The ``cv_results_`` of several second-stage searches as one, the
    entries of each in turn (a key one lacks masked there), ranked
    anew: ``(merged, offsets)`` with the first index of each."""
    sizes = [len(result["params"]) for result in results]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    keys = [key for result in results for key in result]
    merged = {}
    for key in dict.fromkeys(keys):
        if key == "params":
            merged[key] = [p for result in results for p in result["params"]]
        elif key != "rank_test_score":
            merged[key] = _stacked(results, key, sizes)
    merged["rank_test_score"] = _rank(
        np.asarray(merged["mean_test_score"], dtype=float)
    )
    return merged, offsets


def _stacked(results, key, sizes):
    """The entries ``key`` of ``results`` one after the other, masked where
    a result lacks it."""
    if all(
        key in result and not np.ma.isMaskedArray(result[key]) for result in results
    ):
        return np.concatenate([np.asarray(result[key]) for result in results])
    parts = []
    for result, size in zip(results, sizes, strict=True):
        if key in result:
            parts.append(np.ma.asarray(result[key]).astype(object))
        else:
            parts.append(np.ma.masked_all(size, dtype=object))
    return np.ma.concatenate(parts)
