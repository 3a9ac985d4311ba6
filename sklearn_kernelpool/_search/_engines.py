"""The held-out engine of each candidate set of the search.

:class:`._candidates.CandidateSearch` scores its candidates on the dense
engines of :mod:`.._held_out` (every pair of points, ``O(n^2)``), or, on
large tables, on the neighbour lists of a tree for the kernels of compact
support, whose held-out fits pool only the keys within their support:

- fixed widths: :class:`.._held_out._neighbours.NeighbourHeldOut` takes the
  bandwidths of the compact kernels whose supports hold few keys, as
  :func:`split_grid` chooses them by a cost model; the others stay on
  :class:`.._held_out._pool.HeldOut`;
- adaptive widths (``n_neighbors``): every candidate of a compact kernel goes
  to :class:`.._held_out._neighbours_adaptive.NeighbourAdaptiveHeldOut`
  (its support holds about ``n_neighbors`` keys, whatever the width);
- everything else stays on today's engines: the kernels of unbounded
  support (Gaussian, exponential, Cauchy, constant), the categorical
  features (:class:`.._held_out._categorical.CategoricalHeldOut`), the
  binned path (:class:`.._held_out._binned.BinnedHeldOut`), the global line
  of a small table, the per-feature widths and their guard (:mod:`._widths`),
  and the keys of a learned map (:mod:`._mapped`).

The neighbour engines give the answers of the dense ones to rounding of
the sums (their modules and tests): the same exclusions (leave-one-out,
K-fold groups, splits that do not partition the points), keys of weight
zero never pooled (their rows still held out and scored), the same support
edge, the same ``on_empty`` fallbacks (``"nearest"`` from a tree,
``"mean"`` over the allowed keys, ``"nan"`` and ``"raise"`` on the same
empty rows), the same in-sample fits (``scoring="gcv"`` or ``"aicc"``) and
refits of the rows whose moments cancel. Nothing falls back to the dense
pass for want of a feature. They run on one thread (``n_jobs`` is not read).

The neighbour lists are taken only where the rows of positive weight are
at least :data:`SPARSE_MIN_ROWS`, so that smaller searches stay bit for bit
those of the dense pass; :func:`neighbour_lists` lowers that threshold
within a block (a context variable: one thread's block does not change
another's searches).
"""

from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from .._held_out._adaptive import AdaptiveHeldOut
from .._held_out._binned import BinnedHeldOut
from .._held_out._categorical import CategoricalHeldOut
from .._held_out._neighbours import NeighbourHeldOut
from .._held_out._neighbours_adaptive import NeighbourAdaptiveHeldOut
from .._held_out._pool import HeldOut
from .._utils._working_memory import row_batches
from ..kernels import KERNELS
from ._passes import _partition_groups

# The fewest rows of positive weight on which a search takes the neighbour
# lists (outside :func:`neighbour_lists`).
SPARSE_MIN_ROWS = 10_000

_MIN_ROWS = ContextVar("neighbour_lists_min_rows", default=SPARSE_MIN_ROWS)

# The cost model of :func:`split_grid`, in units of the work of one
# candidate of the dense pass on the pairs (its kernel and pooling). The
# dense pass's squared distances, shared by its candidates, cost about four
# of them; a pair of the neighbour lists within the widest support (its
# query, exact distance and pooling) costs about this many pairs of the
# dense pass, by the largest dimension listed that is at most n_features.
# Both are read off the held-out sums of one candidate of the Epanechnikov
# kernel on 10,000 points uniform in a cube, on 2 cores: the lists were
# the cheaper below 3% (2 features), 1.8% (5) and 0.5% (8) of the keys
# within the support.
_DENSE_PASS = 4.0
_PAIR_COST = {1: 170.0, 2: 170.0, 4: 280.0, 8: 1000.0}

# How many keys the estimate of the keys within a support looks at, as
# queries and as keys (those of .._engine._algorithm.expected_neighbors).
_N_PROBES = 256
_N_SAMPLE = 8192


@contextmanager
def neighbour_lists(min_rows=0):
    """Take the neighbour lists on searches of at least ``min_rows`` rows.

    Within the block, the searches of this thread (or task) whose rows of
    positive weight are at least ``min_rows`` take the neighbour engines
    where they apply; outside it, from :data:`SPARSE_MIN_ROWS` rows. The
    threshold is a :class:`contextvars.ContextVar`: a thread started within
    the block starts from the default, so a search run in a worker thread
    enters the block in that thread.

    Parameters
    ----------
    min_rows : int, default=0
        The fewest rows of positive weight.

    Examples
    --------
    >>> with neighbour_lists(4000):
    ...     takes_neighbour_lists(5000)
    True
    >>> takes_neighbour_lists(5000)
    False
    """
    token = _MIN_ROWS.set(int(min_rows))
    try:
        yield
    finally:
        _MIN_ROWS.reset(token)


def takes_neighbour_lists(n_positive):
    """Whether a search on ``n_positive`` rows of positive weight takes the
    neighbour lists (:data:`SPARSE_MIN_ROWS`, :func:`neighbour_lists`)."""
    return n_positive >= _MIN_ROWS.get()


def _pair_cost(n_features):
    return _PAIR_COST[max(d for d in _PAIR_COST if d <= max(n_features, 1))]


def key_fractions(keys, reaches):
    """The fraction of the keys within each of ``reaches`` of a key.

    Estimated as :func:`.._engine._algorithm.expected_neighbors` does: the
    keys of up to 256 evenly spaced keys among up to 8192 evenly spaced
    keys.
    """
    n = keys.shape[0]
    centre = keys.mean(axis=0)
    probes = keys[np.linspace(0, n - 1, min(n, _N_PROBES)).astype(np.intp)] - centre
    sample = keys[np.linspace(0, n - 1, min(n, _N_SAMPLE)).astype(np.intp)] - centre
    r2 = np.asarray(reaches, dtype=np.float64) ** 2
    sample_sq = np.einsum("ij,ij->i", sample, sample)
    inside = np.zeros(len(r2))
    # The probes in batches within working_memory (a row holds the
    # distances to the sample and their sorted copy).
    for batch in row_batches(len(probes), 16 * len(sample)):
        p = probes[batch]
        d2 = p @ sample.T
        d2 *= -2.0
        d2 += sample_sq
        d2 += np.einsum("ij,ij->i", p, p)[:, None]
        inside += np.searchsorted(np.sort(d2, axis=None), r2, side="left")
    return inside / (len(probes) * len(sample))


def split_grid(keys, kernels, grid):
    """Which bandwidths of ``grid`` the neighbour lists take, a mask.

    None of them where a kernel has unbounded support: the dense pass over
    the pairs runs for it anyway, and gives the compact kernels' candidates
    at a small part of its cost. Otherwise the smallest ``s`` bandwidths,
    ``s`` of the least cost: the lists cost :data:`_PAIR_COST` per pair
    within the widest support they take (the fraction of the keys
    :func:`key_fractions` estimates), the dense pass :data:`_DENSE_PASS`
    plus one per candidate it keeps, per pair of points.
    """
    grid = np.asarray(grid, dtype=np.float64)
    take = np.zeros(len(grid), dtype=bool)
    if not len(grid) or not all(k.is_compact for k in kernels):
        return take
    order = np.argsort(grid, kind="stable")
    support = max(k.support for k in kernels)
    fractions = key_fractions(keys, support * grid[order])
    fractions = np.maximum(fractions, 1.0 / keys.shape[0])
    n_dense = len(kernels) * (len(grid) - np.arange(len(grid) + 1))
    cost = np.where(n_dense > 0, _DENSE_PASS + n_dense, 0.0)
    cost[1:] += _pair_cost(keys.shape[1]) * fractions
    take[order[: int(np.argmin(cost))]] = True
    return take


def grid_engines(search, data, names, grid, degree, lam=None):
    """The engines of the fixed-width candidates ``names`` times ``grid``.

    Returns a list of ``(names, grid, held_out)``: the kernels and the
    bandwidths that each engine scores, which together are every candidate
    (once). ``lam`` is the categorical bandwidth (None without categorical
    features); ``search`` gives ``binned``, ``n_jobs``, the categorical
    codes and levels.
    """
    X, Y, weights = data.X64, data.Y, data.weights
    kernels = [KERNELS[n] for n in names]
    if search.binned:
        engine = BinnedHeldOut(X, Y, weights, kernels, grid, degree=degree)
        return [(names, grid, engine)]
    if lam is not None:
        codes = search._categorical[0]
        engine = CategoricalHeldOut(
            X,
            codes,
            np.full(codes.shape[1], lam),
            Y,
            weights,
            kernels,
            grid,
            search.n_jobs,
            degree=degree,
            levels=search.levels,
            sorted_levels=search.sorted_levels,
        )
        return [(names, grid, engine)]
    take = np.zeros(len(grid), dtype=bool)
    if takes_neighbour_lists(np.count_nonzero(data.positive)):
        grid = np.asarray(grid, dtype=np.float64)
        take = split_grid(data.keys, kernels, grid)
    parts = []
    if take.any():
        engine = NeighbourHeldOut(X, Y, weights, kernels, grid[take], degree=degree)
        parts.append((names, grid[take], engine))
    if not take.all():
        rest = grid[~take] if take.any() else grid
        engine = HeldOut(
            X,
            Y,
            weights,
            kernels,
            rest,
            search.n_jobs,
            degree=degree,
            held_rows=held_rows(data),
        )
        parts.append((names, rest, engine))
    return parts


def held_rows(data):
    """The rows whose held-out sums a pass of the search holds at once:
    every row, or under splits that do not partition the rows (whose sums
    are computed split by split, :meth:`.._held_out._sums.HeldOutPairs.sums_split`)
    the largest test set."""
    n = len(data.X64)
    if data.splits is None or _partition_groups(data.splits, n) is not None:
        return n
    return max(len(test) for _, test in data.splits)


def adaptive_engines(search, data, names, counts, degree):
    """The engines of the adaptive candidates ``names`` times ``counts``.

    Returns a list of ``(names, held_out, adaptive)``: the kernels each
    scores, the engine its fallbacks take and the adaptive engine. The
    compact kernels go to the neighbour lists where the search takes them
    (:func:`takes_neighbour_lists`), the others stay on the dense rows.
    """
    X, Y, weights = data.X64, data.Y, data.weights
    lists = takes_neighbour_lists(np.count_nonzero(data.positive))
    compact = [n for n in names if lists and KERNELS[n].is_compact]
    parts = []
    for part in (compact, [n for n in names if n not in compact]):
        if not part:
            continue
        kernels = [KERNELS[n] for n in part]
        held_out = HeldOut(
            X, Y, weights, kernels, np.empty(0), search.n_jobs, degree=degree
        )
        if part is compact:
            adaptive = NeighbourAdaptiveHeldOut(held_out, counts)
            parts.append((part, adaptive, adaptive))
        else:
            parts.append((part, held_out, AdaptiveHeldOut(held_out, counts)))
    return parts
