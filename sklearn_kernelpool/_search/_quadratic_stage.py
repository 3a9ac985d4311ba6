"""Local quadratic candidates of ``degree="auto"``.

After the candidates of degrees 0 and 1 are scored and the best selected,
``degree="auto"`` scores local quadratic fits (``degree=2``) where the data
can support them: at most :data:`MAX_FEATURES` continuous features, at
least two points per parameter ``P = (d + 1)(d + 2) / 2``, on the exact
search (not within the subsample of a large table, nor for the kernel part
of a partially linear model, nor on sparse ``X``). The candidates: the
kernel of the best
fixed-width candidate of degree 0 or 1, at its width and
:data:`WIDTH_STEPS` - 1 wider ones by factors of :data:`WIDTH_RATIO` (a
local quadratic has no curvature bias, so that its best width is wider),
extended while the best is the widest, with its categorical bandwidth
(where per-feature widths were learned and kept, the learned widths times
the same factors);
scored by the same held-out fits (exact leave-one-out or the K-fold
splits) or in-sample criterion (``scoring="gcv"`` or ``"aicc"``, whose
penalty already weighs the parameters). The best of them is selected where
it scores better than the selected candidate, and by exact leave-one-out
(``scoring=None``) only where its mean loss is
lower by one standard error of the mean paired difference of the per-point
losses (:func:`._degree_rule.keep_local_linear`, the rule that chooses
degree 1 on small tables, here on tables of every size): the one-standard-
error rule toward the simpler fit (Breiman et al., 1984), so that a
quadratic whose terms the data do not need (a trend, a flat curve) is not
kept for a gain within the noise of the held-out losses. Its candidates
follow the others in ``cv_results_``.
"""

import contextlib
import contextvars
import dataclasses

import numpy as np

from ._degree_rule import keep_local_linear
from ._grid import _rank
from ._rules import is_global_line

#: The most continuous features on which ``degree="auto"`` scores 2.
MAX_FEATURES = 5
#: The widths of the local quadratic candidates: that of the best
#: fixed-width candidate times ``WIDTH_RATIO**j``, ``j < WIDTH_STEPS``.
WIDTH_STEPS = 3
WIDTH_RATIO = 1.5
#: How many times the widths extend past the widest, two at a time.
MAX_EXTENSIONS = 2

#: The key of the per-point losses of the candidates of a leave-one-out
#: pass in the results of a search (taken out of ``cv_results_``).
POINT_ERRORS = "_point_errors"

_SCORED = contextvars.ContextVar("quadratic_candidates", default=True)


@contextlib.contextmanager
def without_quadratic_candidates():
    """A block whose searches of ``degree="auto"`` score degrees 0 and 1
    only (the subsample of a large table)."""
    token = _SCORED.set(False)
    try:
        yield
    finally:
        _SCORED.reset(token)


def n_parameters(n_features):
    """The parameters of a local quadratic in ``n_features`` features."""
    return (n_features + 1) * (n_features + 2) // 2


def _why_not(search, data):
    """Why ``degree="auto"`` scores no local quadratic, or ""."""
    d = data.X.shape[1]
    if not _SCORED.get() or not getattr(search, "quadratic_candidates", True):
        return "a subsample, a partially linear model or sparse X"
    if search.placeholder or search.binned:
        return "no exact held-out fits of local quadratics here"
    if search.per_feature_mode() is True:
        return "per_feature=True"
    if d > MAX_FEATURES:
        return f"{d} features (at most {MAX_FEATURES})"
    if np.count_nonzero(data.positive) < 2 * n_parameters(d):
        return f"fewer than {2 * n_parameters(d)} points"
    return ""


def _anchor(params, results):
    """The index of the best fixed-width candidate (not the global line)."""
    scores = np.asarray(results["mean_test_score"], dtype=np.float64).copy()
    for i, p in enumerate(params):
        if "n_neighbors" in p and p["n_neighbors"] is not None:
            scores[i] = np.nan
        elif is_global_line(p):
            scores[i] = np.nan
    if np.all(np.isnan(scores)):
        return None
    return int(np.nanargmax(scores))


def _score(search, data, anchor, widths):
    """Score degree 2 at ``widths`` for the kernel (and categorical
    bandwidth) of ``anchor`` (by leave-one-out with the per-point losses of
    each candidate, under :data:`POINT_ERRORS`)."""
    lam = anchor.get("categorical_bandwidth")
    kept = search._categorical
    if lam is not None:
        search._categorical = (kept[0], [lam])
    try:
        params, results = search.score_grid(data, [anchor["kernel"]], [2], widths)
    finally:
        search._categorical = kept
    params = [{**p, "degree": 2} for p in params]
    results["params"] = params
    return params, results


def _widths(search, data, anchor):
    """The candidates of degree 2 and their results, extended past the
    widest while it is the best."""
    h = float(anchor["bandwidth"])
    widths = h * WIDTH_RATIO ** np.arange(WIDTH_STEPS)
    params, results = _score(search, data, anchor, widths)
    for _ in range(MAX_EXTENSIONS):
        scores = results["mean_test_score"]
        if np.all(np.isnan(scores)):
            break
        best = float(results["param_bandwidth"][int(np.nanargmax(scores))])
        top = float(np.max(results["param_bandwidth"]))
        if best < top:
            break
        new = top * WIDTH_RATIO ** np.arange(1, 3)
        more_params, more = _score(search, data, anchor, new)
        params, results = params + more_params, _joined(results, more)
    return params, results


def _joined(results, more):
    """Results of two scorings side by side: a column one lacks is NaN (or
    masked) there."""
    n_old, n_new = len(results["params"]), len(more["params"])
    joined = {}
    for name in dict.fromkeys([*results, *more]):
        if name == "params":
            joined[name] = list(results[name]) + list(more[name])
            continue
        parts = [
            _column(results, name, n_old, more.get(name)),
            _column(more, name, n_new, results.get(name)),
        ]
        if any(isinstance(part, np.ma.MaskedArray) for part in parts):
            joined[name] = np.ma.concatenate(parts)
        else:
            joined[name] = np.concatenate(parts)
    return joined


def _column(results, name, n, other):
    """``results[name]``, or a column of ``n`` missing entries like
    ``other``."""
    if name in results:
        return results[name]
    if isinstance(other, np.ma.MaskedArray) or np.asarray(other).dtype == object:
        return np.ma.MaskedArray(np.zeros(n, dtype=object), mask=True)
    return np.full(n, np.nan)


def _keeps(search, data, baseline, candidate):
    """Whether the degree-2 candidate of per-point losses ``candidate``, of
    the better score, replaces the selection of per-point losses
    ``baseline``: by leave-one-out (``scoring=None``), where it wins by one
    standard error of the paired per-point losses; otherwise on the score."""
    if data.splits is not None or data.scorer is not None:
        return True  # (the per-point losses are squared errors)
    if search.smoother_scoring():
        return True  # (the criterion already weighs the parameters)
    if not search.policy.uses_degree_rule:
        return True
    keep = keep_local_linear(
        baseline,
        candidate,
        n_parameters(data.X.shape[1]) - 1,
        data.weights,
        min_rows_per_parameter=np.inf,
    )
    if not keep:
        search.say("Kept the lower degree: degree 2 wins by less than one SE")
    return keep


def _at_learned_widths(search, data):
    """The local quadratics at the kept per-feature widths times
    ``WIDTH_RATIO**j``: scored on the keys scaled by the widths (not in
    ``cv_results_``, whose widths are isotropic; their scores in
    ``per_feature_scores_["quadratic"]``, by multiplier), and selected as in
    :func:`consider_quadratic` against the learned widths' own score and
    per-point losses."""
    if search._categorical[0] is not None:
        search.say(
            "Scoring no local quadratic: per-feature widths with categorical features"
        )
        return
    widths = np.asarray(search.bandwidth_, dtype=np.float64)
    scaled = dataclasses.replace(data, X=data.X / widths, X64=data.X64 / widths)
    search.say("Scoring local quadratics at the learned widths (degree=2)")
    params, results = _widths(
        search, scaled, {"kernel": search.kernel_, "bandwidth": 1.0}
    )
    errors = results.pop(POINT_ERRORS, None)
    scores = results["mean_test_score"]
    multipliers = [float(p["bandwidth"]) for p in params]
    search.per_feature_scores_ = {
        **(search.per_feature_scores_ or {}),
        "quadratic": dict(zip(multipliers, map(float, scores), strict=True)),
    }
    if np.all(np.isnan(scores)):
        return
    best = int(np.nanargmax(scores))
    if not scores[best] > search.best_score_:
        return
    candidate = None if errors is None else errors[best]
    if not _keeps(search, data, search.learned_errors, candidate):
        return
    search.bandwidth_ = widths * multipliers[best]
    search.degree_ = 2
    search.best_score_ = float(scores[best])


def consider_quadratic(search, data):
    """Score the local quadratic candidates of ``degree="auto"`` and select
    the best where it wins (see the module docstring). Updates the search's
    ``cv_results_`` and, where degree 2 is selected, what it selected."""
    why = _why_not(search, data)
    if why:
        search.say(f"Scoring no local quadratic: {why}")
        return
    if search.per_feature_:
        return _at_learned_widths(search, data)
    params, results = search.cv_results_["params"], search.cv_results_
    anchor = _anchor(params, results)
    if anchor is None:
        search.say("Scoring no local quadratic: no fixed-width candidate")
        return
    search.say("Scoring local quadratic candidates (degree=2)")
    new_params, new = _widths(search, data, params[anchor])
    errors = new.pop(POINT_ERRORS, None)
    results = _joined(results, new)
    results["param_degree"] = np.array(
        [p.get("degree", search.scored_degree) for p in results["params"]],
        dtype=object,
    )
    results["rank_test_score"] = _rank(results["mean_test_score"])
    search.cv_results_ = results
    scores = new["mean_test_score"]
    if np.all(np.isnan(scores)):
        return
    best_new = int(np.nanargmax(scores))
    if not scores[best_new] > search.best_score_:
        return
    candidate = None if errors is None else errors[best_new]
    baseline = search.point_errors
    baseline = None if baseline is None else baseline[search.best_index_]
    if not _keeps(search, data, baseline, candidate):
        return
    search.best_index_ = len(params) + best_new
    search.set_selected(results["params"], results)
