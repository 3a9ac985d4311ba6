"""``algorithm="binned"``: the engine of the estimators on the binned path.

:class:`BinnedKernelPool` is an engine of the kernel-sums protocol of
:mod:`.._engine._protocol`: its :class:`._engine.BinnedEngine` gives the kernel sums of
the queries (the convolved grids interpolated to them), and the estimates
(predictions, ``return_std``, ``degree`` 0 and 1, the classifier's
probabilities) come from the shared normalisation, spread and local-linear
solve (:func:`._estimates.estimates`). The queries that the binned sums leave
undecided (outside the grid, with a binned weight sum at most
``MIN_WEIGHT`` of the total, or a nearly singular local-linear design) are
pooled by the exact engine, which applies the shared ``on_empty``
fallbacks.

What needs the attention weight of each key, not sums, is answered by the
exact engine (built on first use from the same rows with
``algorithm="auto"``), through the members listed in ``EXACT_MEMBERS``:
:meth:`BinnedKernelPool.attention_weights` (attention weights, smoother
rows, standard errors, diagnostics) and the per-key state of the gradients
(:mod:`.._inference._gradient`).
"""

import functools
import warnings

import numpy as np

from .._engine._moments import report_fits
from .._engine._pooling import ON_EMPTY, SAVED_ARGUMENTS, KernelPool, saved_arguments
from .._engine._saved_state import check_pool_arguments
from .._utils._warn import describe
from .._utils._warnings import CoarseGridWarning
from . import _engine as _binned
from ._grid import MIN_NODES_PER_WIDTH, grid_nodes, nodes_per_width, warn_coarse_fit
from ._queries import predict_queries

ACCEPTED = (
    "algorithm='binned' works on one or two continuous features with a "
    "built-in kernel and a fixed bandwidth"
)


def check_binned_options(n_features, user_kernel, categorical, n_neighbors):
    """Refuse, naming the option, what the binned path cannot do."""
    problems = []
    if user_kernel:
        problems.append("a user-defined kernel callable (use a built-in kernel name)")
    if categorical:
        problems.append("categorical features (use algorithm='auto' or 'brute')")
    if n_neighbors is not None:
        problems.append(
            f"n_neighbors={n_neighbors!r} adaptive widths (use n_neighbors=None)"
        )
    if n_features > 2:
        problems.append(
            f"{n_features} features (use algorithm='auto', 'brute', 'kd_tree' "
            "or 'ball_tree')"
        )
    if problems:
        raise ValueError(f"{ACCEPTED}; it cannot take " + "; ".join(problems) + ".")


# The rule of "auto" for the binned path (:mod:`._engine`), read off
# ``benchmarks/bench_binned.py --crossover`` (uniform keys, as many queries
# as keys, width 1/25 of the range, 2 shared cores; fit + predict, the exact
# path timed on 5000 queries and scaled): binned over the fastest exact path
# was 28x (1-D gaussian, brute), 81x (1-D epanechnikov, k-d tree) and 1.6x
# (2-D epanechnikov, k-d tree) at n = 1e4, and 15x to 6000x at n = 1e5. The
# binned time barely depends on n or on the width, while the exact paths
# grow with the keys times the neighbours, so narrower widths move the
# crossover up. It is picked for one or two continuous features, a built-in
# kernel but the constant one, a fixed width, at least _BINNED_MIN_KEYS keys
# (well above the crossover, which also keeps every choice on smaller data
# as it was), and only where the grid it would use (the default grid, or
# the given n_bins) resolves the width with at least MIN_NODES_PER_WIDTH
# nodes: the default grid is capped, and narrower widths, which it would
# bin coarsely, get the exact paths.
_BINNED_MIN_KEYS = 100_000


def prefers_binned(n_keys, n_features, bandwidth, span, kernel, n_bins=None):
    """Whether ``algorithm="auto"`` picks the binned path.

    ``bandwidth`` and ``span`` (the extent of the keys) per feature;
    ``n_bins`` the estimator's parameter, the grid the binned path would
    use (None for the default grid). The callers have excluded user
    kernels, categorical features, adaptive widths and sparse keys.
    """
    if n_features > 2 or n_keys < _BINNED_MIN_KEYS or kernel.name == "constant":
        return False
    n_bins = check_n_bins(n_bins, n_features)
    radius = _binned.truncation_radius(kernel)
    margin = 8.0 if not np.isfinite(radius) else radius
    width = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), (n_features,))
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.asarray(span, dtype=np.float64) + 2 * margin * width
    if not np.all(np.isfinite(total)):
        return False  # keys or widths beyond the float range: exact paths
    bins = grid_nodes(total, width, span, n_bins)
    return nodes_per_width(total, bins, width) >= MIN_NODES_PER_WIDTH


def check_n_bins(n_bins, n_features):
    """``n_bins`` as None or an int array of shape (n_features,), >= 2."""
    if n_bins is None:
        return None
    bins = np.asarray(n_bins)
    if bins.ndim > 1 or (bins.ndim == 1 and len(bins) != n_features):
        raise ValueError(
            f"n_bins must be None, an int or one int per feature ({n_features}); "
            f"got {n_bins!r}."
        )
    if not np.issubdtype(bins.dtype, np.integer) or np.any(bins < 2):
        raise ValueError(f"n_bins must hold integers >= 2; got {n_bins!r}.")
    return np.broadcast_to(bins, (n_features,)).astype(np.int64)


def _of_exact(name):
    """The member ``name`` of the exact engine, as a read-only property."""

    def get(self):
        return getattr(self.exact_pool, name)

    return property(get, doc=f"The exact engine's ``{name}`` (see EXACT_MEMBERS).")


# Members of the exact engine that the gradients (:mod:`.._inference._gradient`) read:
# its support, centred scaled keys, their centre, the bandwidth and the
# exact coordinates, and its chunked scores of queries.
EXACT_MEMBERS = (
    "support",
    "keys",
    "center",
    "bandwidth",
    "exact",
    "_queries",
    "_normalized_scores",
    "_run_chunks",
)


class BinnedKernelPool:
    """The fitted binned path; the exact engine on demand.

    The parameters are those of :class:`.._engine._pooling.KernelPool` (positional
    as there, the options by keyword), with ``algorithm="binned"``, plus
    ``n_bins`` (None, an int or one per feature; see
    :func:`._grid.default_bins`).
    """

    algorithm = "binned"

    def __init__(self, *arguments, n_bins=None, **options):
        named = {k: options.pop(k) for k in SAVED_ARGUMENTS if k in options}
        self._arguments = saved_arguments(*arguments, **named)
        if set(options) - {
            "algorithm",
            "degree",
            "categorical_bandwidth",
            "categorical_levels",
            "n_neighbors",
            "robustness_weight",
        }:
            raise TypeError(f"Unexpected engine options {sorted(options)}.")
        keys = self._arguments["keys"]
        n_features = keys.shape[1]
        check_binned_options(
            n_features,
            self._arguments["user_kernel"],
            options.get("categorical_bandwidth") is not None,
            options.get("n_neighbors"),
        )
        degree = options.get("degree", 0)
        if options.get("robustness_weight") is not None:
            self._arguments["robustness_weight"] = options["robustness_weight"]
        self._arguments.update(
            algorithm="binned",
            degree=degree,
            categorical_bandwidth=None,
            n_neighbors=None,
            n_bins=check_n_bins(n_bins, n_features),
        )
        self.on_empty = self._arguments["on_empty"]
        values = self._arguments["values"]
        self.dtype = keys.dtype
        self.degree = degree
        self.n_outputs = values.shape[1]
        self.n_samples_fit = keys.shape[0]
        self.binned = self._fit_engine(squares=False)
        self.n_bins = np.asarray(self.binned.grid.shape)
        warn_coarse_fit(
            self.binned.grid,
            self._arguments["kernel"],
            self._arguments["bandwidth"],
            given=n_bins is not None,
        )

    def _fit_engine(self, squares):
        a = self._arguments
        weights = a["sample_weight"]
        if a.get("robustness_weight") is not None:
            weights = weights * a["robustness_weight"]
        support = weights > 0
        if np.all(support):
            support = slice(None)  # no copy
        return _binned.fit_engine(
            a["keys"][support],
            a["values"][support].astype(np.float64, copy=False),
            weights[support],
            a["kernel"],
            a["bandwidth"],
            a["degree"],
            a["n_bins"],
            squares=squares,
        )

    @functools.cached_property
    def binned_std(self):
        """The engine with the squared values too, for ``return_std``,
        binned on first use."""
        return self._fit_engine(squares=True)

    def __getstate__(self):
        return {"arguments": self._arguments}

    def __setstate__(self, state):
        arguments = state.get("arguments") if isinstance(state, dict) else None
        if not isinstance(arguments, dict) or arguments.get("algorithm") != "binned":
            raise ValueError("The saved binned engine lacks its arguments.")
        arguments = dict(arguments)
        n_bins = arguments.pop("n_bins", None)
        checked = check_pool_arguments({**arguments, "algorithm": "auto"}, ON_EMPTY)
        checked = {**checked, "algorithm": "binned", "n_bins": n_bins}
        # The fit warned of a coarse grid already; loading it is no news.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CoarseGridWarning)
            self.__init__(**checked)

    @functools.cached_property
    def exact_pool(self):
        """The exact engine of the same rows (``algorithm="auto"``)."""
        arguments = {k: v for k, v in self._arguments.items() if k not in ("n_bins",)}
        return KernelPool(**{**arguments, "algorithm": "auto"})

    def attention_weights(self, X, n_jobs=None, sparse=False, counts=None):
        """The exact engine's attention weights of the queries ``X``, as
        :func:`.._engine._attention.attention_weights`: the weight
        of each key, which the binned sums do not hold."""
        return self.exact_pool.attention_weights(
            X, n_jobs=n_jobs, sparse=sparse, counts=counts
        )

    @property
    def kernel(self):
        """The :class:`Kernel`, held by the binned engine."""
        return self.binned.kernel

    def pool(self, X, n_jobs=None, return_std=False, counts=None):
        """Pooled values (n_queries, n_outputs), with ``return_std`` a pair
        ``(mean, std)``, as :meth:`.._engine._pooling.KernelPool.pool`.

        Undecided queries (see :mod:`._pool`) are pooled by the exact
        engine, which applies the ``on_empty`` policy to the empty ones. The
        local-linear fits of both are reported together
        (:func:`.._engine._moments.report_fits`), or their
        :func:`.._engine._moments.fit_counts` appended to ``counts`` when it
        is a list, for the caller to report. The queries are read a chunk at
        a time (:func:`._queries.predict_queries`): the call holds its
        output, one chunk within ``working_memory``, and what the exact
        engine needs for the undecided queries.
        """
        engine = self.binned_std if return_std else self.binned
        pooled = predict_queries(engine, X, self.dtype, return_std)
        mean, std, doubtful = pooled.mean, pooled.std, pooled.doubtful
        report = counts is None
        if self.degree == 1:
            counts = [] if report else counts
            counts.extend(pooled.counts)
        if len(doubtful):
            exact = self.exact_pool.pool(
                X[doubtful], n_jobs=n_jobs, return_std=return_std, counts=counts
            )
            if return_std:
                mean[doubtful], std[doubtful] = exact
            else:
                mean[doubtful] = exact
        if self.degree == 1 and report:
            configuration = describe(self.kernel, self._arguments["bandwidth"])
            report_fits(counts, X.shape[0], configuration)
        if return_std:
            return mean, std
        return mean


for _name in EXACT_MEMBERS:
    setattr(BinnedKernelPool, _name, _of_exact(_name))
del _name
