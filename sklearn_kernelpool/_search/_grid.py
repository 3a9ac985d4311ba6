"""The candidate grid of the bandwidth search: the automatic bandwidths,
their order, their checks and their extension past the edge of the best."""

import numpy as np
from joblib import effective_n_jobs
from scipy.stats import rankdata
from sklearn.model_selection import ParameterGrid
from sklearn.neighbors import NearestNeighbors

from .._engine._weight_rows import physical_memory
from .._utils._validation import coordinate_limit, power_of_two_below, scale_coordinates
from .._utils._warn import warn
from .._utils._warnings import BandwidthEdgeWarning

# fifth of a table of a few hundred rows, doubling.
AUTO_NEIGHBORS = (5, 10, 20, 40, 80)


def bandwidth_grid(X, size):
    """The automatic grid: ``size`` bandwidths log-spaced over the data's scale.

    From the median distance of a distinct point to its nearest other
    distinct point, to twice the largest distance of a point from the mean
    (which lies between the data's diameter and twice it). With every point
    equal, every bandwidth is 1. The distances are those of ``X`` divided
    by a power of two near its largest coordinate, multiplied back: the
    grid scales with ``X``, however small or large its scale.
    """
    largest = float(np.max(np.abs(X), initial=0.0))
    scale = float(power_of_two_below(largest))
    Z = X / scale  # exact, and of coordinates below 2 in magnitude
    radius = 2.0 * float(np.sqrt(np.max(np.sum((Z - Z.mean(axis=0)) ** 2, axis=1))))
    distinct = np.unique(Z, axis=0)
    if not radius > 0 or len(distinct) < 2:
        return np.ones(size)
    distances, _ = NearestNeighbors(n_neighbors=1).fit(distinct).kneighbors()
    low = min(float(np.median(distances)), radius)
    if not low > 0:
        raise ValueError(
            "The automatic bandwidths start at the median distance of a distinct "
            "point of X to its nearest other one, which is zero in float64 next "
            f"to X's largest coordinate ({largest:.3g}): most points differ "
            "by less than 1e-154 of it. Pass bandwidths as an array, or "
            "rescale X."
        )
    if size == 1:
        return np.array([np.sqrt(low * radius)]) * scale
    return np.geomspace(low, radius, size) * scale


# The automatic grid is extended past its edge at most this many times, by
# this many bandwidths each time.
_MAX_EXTENSIONS = 4
_EXTENSION = 5
# ... and never further than this factor beyond the ends of the grid.
_REACH = 10.0


def _in_grid_order(params, results, kernels=None):
    """The candidates and results in ``GridSearchCV``'s order.

    As :class:`~sklearn.model_selection.ParameterGrid` orders the union of
    the candidates' values, the kernels in the order of ``kernels`` (by
    default, that in which they first appear).
    """
    space = {name: sorted({p[name] for p in params}) for name in params[0]}
    if kernels is None:
        kernels = list(dict.fromkeys(p["kernel"] for p in params))
    space["kernel"] = list(kernels)
    return _reorder(params, results, list(ParameterGrid(space)))


def _reorder(params, results, target):
    """The candidates ``params`` and their ``results`` in the order of
    ``target``, the same candidates in another order."""

    def key(p):
        return tuple(sorted(p.items()))

    position = {}
    for i, p in enumerate(params):
        position.setdefault(key(p), []).append(i)
    order = np.array([position[key(p)].pop() for p in target])
    ordered = {
        name: values[order] for name, values in results.items() if name != "params"
    }
    ordered["params"] = [params[i] for i in order]
    return ordered["params"], ordered


def _merge(params, results, new_params, new_results):
    """The candidates and results of two scorings in ``GridSearchCV``'s order.

    The candidates of both, on the union of their bandwidths, ordered as
    :class:`~sklearn.model_selection.ParameterGrid` orders them.
    """
    combined = {
        name: np.concatenate([values, new_results[name]])
        for name, values in results.items()
        if name != "params"
    }
    combined["params"] = params + new_params
    return _in_grid_order(params + new_params, combined)


def _local_linear_fits(X, Y, n_candidates, n_jobs):
    """Whether ``degree="auto"`` scores local-linear candidates on ``X``.

    A local-linear fit of ``d`` features needs more than ``d + 1`` points to
    determine its slope anywhere, and its held-out sums hold
    ``(d + 1)(d + 2) / 2 + (d + 2) p`` moments and a sum of squared weights
    per point and candidate (see
    :meth:`.._held_out._pool.HeldOut.sums_bytes`): they must take at most a quarter of
    the physical memory.
    """
    n, d = X.shape
    if n <= d + 2:
        return False
    columns = (d + 1) * (d + 2) // 2 + (d + 2) * Y.shape[1] + 1
    n_threads = max(1, effective_n_jobs(n_jobs))
    size = 8 * n * columns * max(n_candidates, 1) * (n_threads + 2)
    limit = physical_memory()
    return limit is None or size <= limit / 4


def _check_grid(X, grid, automatic):
    """Refuse bandwidths with which the scores cannot be computed.

    A bandwidth's square must be a normal float64, and ``X`` divided by the
    smallest one must have finite squared distances in the dtype of ``X``, as
    :class:`KernelAttentionRegressor` requires of its bandwidth.
    ``automatic`` says whether the grid was derived from the scale of ``X``.
    """
    limit = coordinate_limit(np.float64, 1)
    if not (grid.min() >= 1 / limit and grid.max() <= limit):
        what, fix = (
            "bandwidths",
            "Rescale X (for example with a StandardScaler) and the bandwidths.",
        )
        if automatic:
            what = "automatic bandwidths, which follow the scale of X,"
            fix = "Rescale X (for example with a StandardScaler)."
        raise ValueError(
            f"The bandwidths must lie between {1 / limit:.3g} and {limit:.3g}, "
            "where their squares are normal float64 numbers; got "
            f"{what} from {grid.min():.3g} to {grid.max():.3g}. {fix}"
        )
    scale_coordinates(X, grid.min(), X.dtype, "X")


def _rank(scores):
    """Ranks as GridSearchCV gives them: NaN scores rank last."""
    if np.all(np.isnan(scores)):
        return np.ones(len(scores), dtype=np.int32)
    filled = np.where(np.isnan(scores), np.nanmin(scores) - 1, scores)
    return rankdata(-filled, method="min").astype(np.int32)


def _width(candidate, equals="="):
    """The width of a candidate of ``params``, in words."""
    if "n_neighbors" in candidate:
        return f"n_neighbors={candidate['n_neighbors']}"
    return f"bandwidth{equals}{candidate['bandwidth']:.6g}"


def _edge_to_extend(results, grid):
    """The bandwidth whose side of the grid to extend: that of the best
    candidate; where it is interior, the edge where the best candidate of
    some kernel lies (the smallest first), so that every kernel is compared
    at its own optimum; else the overall best."""
    scores = results["mean_test_score"]
    bandwidths = results["param_bandwidth"]
    best = float(bandwidths[int(np.nanargmax(scores))])
    if best in (grid[0], grid[-1]):
        return best
    edges = set()
    kernels = results["param_kernel"]
    for name in dict.fromkeys(kernels):
        mine = np.where(kernels == name, scores, np.nan)
        if not np.all(np.isnan(mine)):
            edges.add(float(bandwidths[int(np.nanargmax(mine))]))
    for edge in (grid[0], grid[-1]):
        if edge in edges:
            return float(edge)
    return best


def extend_grid(search, data, names, degrees, params, results):
    """Extend the automatic grid past its edge while the best lies there.

    Up to ``_MAX_EXTENSIONS`` times, ``_EXTENSION`` more bandwidths of the
    grid's ratio beyond the edge of the best candidate are scored (only
    them), within ``_REACH`` times beyond the grid's ends: below a tenth
    of the median nearest-neighbour distance a held-out point pools
    essentially its nearest other point alone, and above ten times the
    grid's top (twice the largest distance from the mean) every kernel
    weight is within 1% of the others, so that the fit is the global one
    (the mean, or the linear regression for ``degree=1``). It stops when
    the best candidate is interior, at those limits, when every new
    candidate falls back to ``on_empty`` everywhere, or when the new
    candidates score as the edge did. With several kernels, an edge where the
    best candidate of one kernel lies is extended too (all kernels are scored
    at the new bandwidths). Returns every scored candidate in
    ``GridSearchCV``'s order over the whole grid, and whether the
    extensions ran out with the best candidate still on an edge.
    """
    X = data.X
    first = np.unique(results["param_bandwidth"])
    if len(first) < 2:
        return params, results, False
    low, high = first[0] / _REACH, first[-1] * _REACH
    for _ in range(_MAX_EXTENSIONS):
        grid = np.unique(results["param_bandwidth"])
        scores = results["mean_test_score"]
        if np.all(np.isnan(scores)):
            return params, results, False
        best = _edge_to_extend(results, grid)
        if best == grid[0]:
            ratio = grid[1] / grid[0]
            new = grid[0] / ratio ** np.arange(_EXTENSION, 0, -1)
            new = new[new >= low * (1 - 1e-9)]
        elif best == grid[-1]:
            ratio = grid[-1] / grid[-2]
            new = grid[-1] * ratio ** np.arange(1, _EXTENSION + 1)
            new = new[new <= high * (1 + 1e-9)]
        else:
            return params, results, False
        if not len(new):
            return params, results, False
        try:
            _check_grid(X, new, automatic=True)
        except ValueError:
            return params, results, False
        search.say(
            f"The best bandwidth {best:.6g} is on the edge of the grid: "
            f"scoring {len(new)} more from {new.min():.6g} to {new.max():.6g}"
        )
        new_params, new_results = search.score_grid(data, names, degrees, new)
        edge = float(np.nanmax(scores[results["param_bandwidth"] == best]))
        params, results = _merge(params, results, new_params, new_results)
        new_scores = new_results["mean_test_score"]
        if np.all(new_results["empty_fraction"] == 1.0) or np.allclose(
            new_scores, edge, rtol=1e-12, atol=0.0
        ):
            return params, results, False
    scores = results["mean_test_score"]
    grid = results["param_bandwidth"]
    best = grid[int(np.nanargmax(scores))]
    at_limit = best <= low * (1 + 1e-9) or best >= high * (1 - 1e-9)
    on_edge = best in (grid.min(), grid.max())
    return params, results, bool(on_edge and not at_limit)


def warn_edge(bandwidth, grid, automatic):
    """Warn when the selected bandwidth is an edge of the scored grid
    (the sorted fixed bandwidths scored)."""
    if len(grid) < 2 or grid[0] < bandwidth < grid[-1]:
        return
    which = "smallest" if bandwidth == grid[0] else "largest"
    where = "below" if which == "smallest" else "above"
    if automatic:
        fix = "Pass bandwidths as an array that extends further."
        origin = "automatic bandwidths, after their extension"
    else:
        fix = f"Add bandwidths {where} it."
        origin = "given bandwidths"
    warn(
        BandwidthEdgeWarning(
            f"The selected bandwidth is the {which} of the {origin} "
            f"({grid[0]:.6g} to {grid[-1]:.6g}): the best bandwidth may lie "
            f"{where} the grid. {fix}"
        )
    )
