"""The candidate search shared by the cross-validated estimators.

:class:`CandidateSearch` scores every candidate (kernel, bandwidth, degree,
neighbour count, categorical bandwidth) by exact leave-one-out, K-fold, or an
in-sample criterion of the smoother, from one pass over the pairs of points,
and selects the best one; a scoring policy
(:class:`._scores.RegressionScoring`,
:class:`._proba.ProbabilityScoring`) scores the held-out predictions.
"""

from numbers import Integral

import numpy as np
from sklearn.model_selection import ParameterGrid

from .._held_out._pool import HeldOut
from ..kernels import KERNELS
from ._data import search_data
from ._degree_rule import MIN_ROWS_PER_PARAMETER
from ._engines import adaptive_engines, grid_engines
from ._grid import (
    AUTO_NEIGHBORS,
    _check_grid,
    _in_grid_order,
    _local_linear_fits,
    _rank,
    _reorder,
    extend_grid,
    warn_edge,
)
from ._params import SearchParameters
from ._passes import HeldOutPasses
from ._quadratic_stage import POINT_ERRORS, consider_quadratic
from ._rules import GLOBAL_KERNEL, SmallTableRules, is_global_line
from ._verbose import say_scores, say_search
from ._widths import auto_skips, learn_categorical_widths, learn_feature_widths

# What a search selects, set on the estimator after it.
SELECTED = (
    "cv_results_",
    "best_index_",
    "best_params_",
    "best_score_",
    "kernel_",
    "bandwidth_",
    "categorical_bandwidth_",
    "n_neighbors_",
    "degree_",
    "per_feature_",
    "per_feature_scores_",
    "n_iter_",
)


class CandidateSearch(SearchParameters):
    """Score every candidate and select the best one.

    Takes the parameters of :class:`._params.SearchParameters`, which it
    extends with the search. Its held-out passes are a
    :class:`._passes.HeldOutPasses`; on a small table its rules a
    :class:`._rules.SmallTableRules`. After :meth:`fit`, the attributes of
    :data:`SELECTED` that the search set hold the selection, ``binned``
    whether it scored on the binned path, and ``data`` the
    :class:`._data.SearchData` it scored on.
    """

    def selected(self):
        """The attributes of :data:`SELECTED` that the search set."""
        return {key: getattr(self, key) for key in SELECTED if hasattr(self, key)}

    # -- scores --------------------------------------------------------------

    def smoother_criteria(self, params, results):
        """Score the candidates by their in-sample criterion.

        ``effective_df``, ``gcv`` and ``aicc`` of each candidate fitted on all
        the training data are in ``results``, computed with its
        leave-one-out predictions (:meth:`_in_sample`); the negated
        criterion replaces ``mean_test_score``. Only with ``scoring="gcv"``
        or ``"aicc"``.
        """
        if self.smoother_scoring():
            results["mean_test_score"] = -results[self.scoring]
        return results

    # -- search ----------------------------------------------------------
    def fit(
        self,
        X,
        y,
        sample_weight,
        codes=None,
        lambdas=(None,),
        placeholder=(),
        levels=None,
        sorted_levels=None,
    ):
        """Score the candidates on ``X`` (the continuous features, dense) and
        ``y``, and select the best one.

        ``sample_weight`` is None or relative (divided by a power of two
        near the largest); ``codes`` are the category codes of the
        categorical features (None without them), ``lambdas`` the
        categorical bandwidths to score (``[None]`` without them),
        ``placeholder`` ``(0,)`` when ``X`` is a constant column standing
        in for no continuous feature, and ``levels`` the number of levels of
        each ordered categorical feature, 0 for an unordered one (None: none
        is ordered; :mod:`.._engine._categorical`); ``sorted_levels`` marks
        the ordered features whose levels are the sorted values seen in
        ``fit``, which the held-out fits number among the values of their
        training rows, as refits do (:mod:`.._held_out._levels`).
        """
        self.placeholder = placeholder
        self._categorical = codes, list(lambdas)
        self.levels = levels
        self.sorted_levels = sorted_levels
        names = self.kernel_names()
        counts = self.neighbor_counts(categorical=codes is not None)
        self.check_options(codes, counts)
        data = search_data(self, X, y, sample_weight)
        # Kept for what follows the search (a learned map).
        self.data = data
        grid = self.bandwidth_grid(data.keys)
        automatic = isinstance(self.bandwidths, Integral)
        if len(grid):
            _check_grid(X, grid, automatic=automatic)
        counts = self._available_counts(data, counts)
        self.binned = self.binned_scoring(data.keys, names, grid, codes, counts)
        if self.binned:
            counts = []
        degrees = self._degrees(data, names, grid, counts)
        say_search(self, X, names, grid, data.splits, len(degrees), counts)
        # The rules of small tables need the per-point leave-one-out losses
        # of the candidates: kept for them only.
        self.rules = None
        if self._small_table(data, degrees):
            self.rules = SmallTableRules(self.say)
        self.passes = HeldOutPasses(
            self.policy,
            self.on_empty,
            in_sample=self.smoother_scoring(),
            # (and the local quadratics of "auto", compared point by point)
            point_errors=self.rules is not None or self.degree == "auto",
        )
        params, results, fixed_grid, capped = self._score_candidates(
            data, names, degrees, grid, counts
        )
        self._select(params, results, data, degrees)
        say_scores(self, params, names)
        if self.n_neighbors_ is None and (capped or not automatic):
            warn_edge(self.bandwidth_, fixed_grid, automatic)
        self._learn_widths(data, codes, fixed_grid)
        if self.degree == "auto":
            consider_quadratic(self, data)

    def _available_counts(self, data, counts):
        """The neighbour counts of ``n_neighbors="auto"`` that every
        held-out fit can hold: at most the training points of positive
        weight of the smallest fit."""
        if not isinstance(self.n_neighbors, str):
            return counts
        if data.splits is None:
            available = np.count_nonzero(data.positive) - 1
        else:
            positive = data.positive
            available = min(np.count_nonzero(positive[tr]) for tr, _ in data.splits)
        counts = [k for k in counts if k <= available]
        if self.bandwidths is None and not counts:
            raise ValueError(
                "bandwidths=None scores adaptive-width candidates only, and "
                "n_neighbors='auto' leaves none: the smallest held-out fit "
                f"holds {available} point(s) of positive weight, fewer than "
                f"{AUTO_NEIGHBORS[0]}. Pass bandwidths."
            )
        return counts

    def _degrees(self, data, names, grid, counts):
        """The degrees to score: ``degree``, or both under ``"auto"`` where
        local-linear fits can be scored."""
        if self.placeholder:
            return [0]  # categorical features only: no slope
        if self.degree != "auto":
            return [self.degree]
        n_lambdas = len(self._categorical[1])
        n_candidates = len(names) * (len(grid) * n_lambdas + len(counts))
        if _local_linear_fits(data.keys, data.Y, n_candidates, self.n_jobs):
            return [0, 1]
        self.say(
            "Scoring degree 0 alone: local-linear fits of "
            f"{data.X.shape[1]} features need more points or memory"
        )
        return [0]

    def _small_table(self, data, degrees):
        """Whether the rules of small tables (:mod:`._rules`) apply:
        both degrees by exact leave-one-out and its squared error, on fewer
        than ``MIN_ROWS_PER_PARAMETER`` rows per parameter of the local
        line."""
        rows = np.count_nonzero(data.positive) / (data.X.shape[1] + 1)
        return (
            rows < MIN_ROWS_PER_PARAMETER
            and degrees == [0, 1]
            and data.splits is None
            and self.scoring is None
            and self._categorical[0] is None
            and not self.binned
            and self.policy.uses_degree_rule
        )

    def _score_candidates(self, data, names, degrees, grid, counts):
        """Score the fixed widths of ``grid`` (extended past its edges when
        automatic), the global line of a small table, and the neighbour
        ``counts``. Returns the candidates, their ranked results, the fixed
        bandwidths scored and whether the extensions ran out on an edge."""
        params, results, capped = [], None, False
        if len(grid):
            params, results = self.score_grid(data, names, degrees, grid)
            if isinstance(self.bandwidths, Integral):
                params, results, capped = extend_grid(
                    self, data, names, degrees, params, results
                )
        fixed_grid = np.unique(results["param_bandwidth"]) if len(grid) else grid
        if self.rules is not None:
            params, results = self._append(
                params, results, *self._score_global_line(data)
            )
        if counts:
            n_fixed = len(params)
            params, results = self._append(
                params, results, *self._score_adaptive(data, names, degrees, counts)
            )
            results["param_n_neighbors"] = np.ma.MaskedArray(
                [p.get("n_neighbors", 0) for p in params],
                mask=np.arange(len(params)) < n_fixed,
                dtype=object,
            )
        results["rank_test_score"] = _rank(results["mean_test_score"])
        if np.all(np.isnan(results["mean_test_score"])):
            raise ValueError(
                "No candidate could be scored: every one left some held-out point "
                f"with an empty neighbourhood under on_empty={self.on_empty!r}, "
                "or its scores were not finite. Use larger bandwidths or "
                "on_empty='nearest'."
            )
        return params, results, fixed_grid, capped

    def _select(self, params, results, data, degrees):
        """Select the best candidate (by the rules of small tables where
        they apply) and set what the search selected."""
        self.cv_results_ = results
        self.best_index_ = int(np.argmin(results["rank_test_score"]))
        if self.rules is not None:
            self.best_index_ = self.rules.select(
                params, results, self.best_index_, data.weights, data.X.shape[1]
            )
            self.rules = None
        self.scored_degree = degrees[0]
        self.point_errors = results.pop(POINT_ERRORS, None)
        self.set_selected(params, results)

    def set_selected(self, params, results):
        """Set what the search selected from ``best_index_`` (a candidate
        without a degree has that of every candidate, ``scored_degree``)."""
        self.cv_results_ = results
        self.best_params_ = dict(params[self.best_index_])
        self.kernel_ = self.best_params_["kernel"]
        self.bandwidth_ = float(self.best_params_["bandwidth"])
        if "categorical_bandwidth" in self.best_params_:
            self.categorical_bandwidth_ = self.best_params_["categorical_bandwidth"]
        self.n_neighbors_ = self.best_params_.get("n_neighbors")
        self.degree_ = int(self.best_params_.get("degree", self.scored_degree))
        self.best_score_ = float(results["mean_test_score"][self.best_index_])

    def _learn_widths(self, data, codes, fixed_grid):
        """Learn per-feature widths (and lambdas) as ``per_feature`` says,
        from the selected isotropic candidate, and keep them where they do
        better (:mod:`._widths`)."""
        self.per_feature_ = False
        self.per_feature_scores_ = None
        # Nothing iterates unless widths are learned: one iteration, as
        # scikit-learn counts an estimator with max_iter.
        self.n_iter_ = 1
        mode = self.per_feature_mode()
        if not mode:
            return
        if self.degree_ == 2:
            # The widths are learned on fits of degree 0 or 1.
            self.say("Kept the isotropic bandwidth of the local quadratic fit")
            return
        if is_global_line(self.best_params_):
            # The line's weights do not depend on the distance: no width.
            self.say("Kept the global line: it has no widths to learn")
            return
        skip = auto_skips(self, data) if mode == "auto" else ""
        if skip:
            self.say(f"Kept the isotropic bandwidth, learning no widths: {skip}")
            return
        if mode is True and codes is not None:
            self.say("Learning per-feature widths and lambdas by leave-one-out")
            learned = learn_categorical_widths(self, data, codes)
        elif codes is None and self.n_neighbors_ is None:
            on = self.scoring if self.smoother_scoring() else "leave-one-out"
            self.say(f"Learning per-feature widths by {on}")
            learned = learn_feature_widths(self, data, fixed_grid)
        else:
            return
        self.n_iter_ = learned.n_iter
        if learned.per_feature_scores is not None:
            self.per_feature_scores_ = learned.per_feature_scores
        if not learned.kept:
            if codes is None:
                self.say("Kept the isotropic bandwidth")
            return
        self.bandwidth_ = learned.bandwidth
        if learned.categorical_bandwidth is not None:
            self.categorical_bandwidth_ = learned.categorical_bandwidth
        self.best_score_ = learned.best_score
        self.learned_errors = learned.point_errors
        self.per_feature_ = True
        if codes is None:
            self.say(f"Per-feature widths: {np.round(self.bandwidth_, 6).tolist()}")

    def score_grid(self, data, names, degrees, grid):
        """Score every (bandwidth, degree, kernel) candidate of ``grid``, with
        every categorical bandwidth of ``self._categorical``.

        Returns the candidates in ``GridSearchCV``'s order and their
        results (without ranks).
        """
        lambdas = self._categorical[1]
        params, every = [], []
        for lam in lambdas:
            for part_names, part_grid, held_out in grid_engines(
                self, data, names, grid, pooled_degree(degrees), lam
            ):
                space = {"kernel": part_names, "bandwidth": list(part_grid)}
                if len(degrees) > 1:
                    space["degree"] = degrees
                part = list(ParameterGrid(space))
                every.append(self._run(held_out, data, part, degrees))
                if lam is not None:
                    part = [{**p, "categorical_bandwidth": lam} for p in part]
                params += part
        results = {key: np.concatenate([r[key] for r in every]) for key in every[0]}
        results["param_kernel"] = np.array([p["kernel"] for p in params], dtype=object)
        results["param_bandwidth"] = np.array([p["bandwidth"] for p in params])
        if len(degrees) > 1:
            results["param_degree"] = np.array(
                [p["degree"] for p in params], dtype=object
            )
        if lambdas != [None]:
            results["param_categorical_bandwidth"] = np.array(
                [p["categorical_bandwidth"] for p in params]
            )
        results["params"] = params
        params, results = _in_grid_order(params, results, list(dict.fromkeys(names)))
        return params, self.smoother_criteria(params, results)

    def _score_global_line(self, data):
        """Score the global weighted least-squares line, the small-table
        candidate of ``degree="auto"`` (:mod:`._rules`).

        The line is the local-linear fit under the ``"constant"`` kernel,
        whose weights do not depend on the distance (an infinite width); its
        bandwidth only scales the coordinates, and is set to the spread of
        the ``keys`` (the rows of positive weight). Returns its one
        candidate and results (without ranks), with the keys of the fixed
        grid's results.
        """
        spread = float(np.sqrt(np.mean(np.var(data.keys, axis=0))))
        width = spread if np.isfinite(spread) and spread > 0 else 1.0
        params = [{"bandwidth": width, "degree": 1, "kernel": GLOBAL_KERNEL}]
        held_out = HeldOut(
            data.X64,
            data.Y,
            data.weights,
            [KERNELS[GLOBAL_KERNEL]],
            np.array([width]),
            self.n_jobs,
            degree=1,
        )
        results = self._run(held_out, data, params, [1])
        results["param_kernel"] = np.array([GLOBAL_KERNEL], dtype=object)
        results["param_bandwidth"] = np.array([width])
        results["param_degree"] = np.array([1], dtype=object)
        results["params"] = params
        return params, self.smoother_criteria(params, results)

    @staticmethod
    def _append(params, results, new_params, new_results):
        """The candidates and results of a search with more appended."""
        if results is None:
            return new_params, new_results
        params = params + new_params
        return params, {
            key: (
                params
                if key == "params"
                else np.concatenate([values, new_results[key]])
            )
            for key, values in results.items()
        }

    def _score_adaptive(self, data, names, degrees, counts):
        """Score every (degree, kernel, n_neighbors) adaptive candidate.

        Returns the candidates in ``ParameterGrid``'s order, at the
        bandwidth multiplier 1.0, and their results (without ranks).
        """
        space = {"kernel": names, "n_neighbors": counts}
        if len(degrees) > 1:
            space["degree"] = degrees
        params = [{"bandwidth": 1.0, **p} for p in ParameterGrid(space)]
        parts, every = [], []
        for part_names, held_out, adaptive in adaptive_engines(
            self, data, names, counts, pooled_degree(degrees)
        ):
            part = [{"bandwidth": 1.0, **p} for p in ParameterGrid(space)]
            part = [p for p in part if p["kernel"] in part_names]
            every.append(self._run(held_out, data, part, degrees, adaptive))
            parts += part
        results = {key: np.concatenate([r[key] for r in every]) for key in every[0]}
        if len(every) > 1:
            results = _reorder(parts, results, params)[1]
        results["param_kernel"] = np.array([p["kernel"] for p in params], dtype=object)
        results["param_bandwidth"] = np.array([p["bandwidth"] for p in params])
        if len(degrees) > 1:
            results["param_degree"] = np.array(
                [p["degree"] for p in params], dtype=object
            )
        results["params"] = params
        return params, self.smoother_criteria(params, results)

    def _run(self, held_out, data, params, degrees, adaptive=None):
        """The leave-one-out or K-fold results of the candidates ``params``
        of ``held_out`` (or of ``adaptive``, :meth:`_score_adaptive`)."""
        if data.splits is not None:
            return self.passes.kfold(held_out, data, degrees, adaptive)
        results = self.passes.loo(held_out, data, degrees, adaptive)
        if self.rules is not None:
            self.rules.record(params, self.passes.last_errors)
        if self.passes.point_errors:
            results[POINT_ERRORS] = self.passes.last_errors
        return results

    def say(self, message, level=1):
        """Print ``message`` where ``verbose`` is at least ``level``."""
        if self.verbose >= level:
            print(f"[{self.name}] {message}")


def pooled_degree(degrees):
    """The degree of the moments a held-out pass pools for ``degrees``: at
    most 1, those of degree 2 being fitted from the weights of each point
    (:mod:`.._held_out._quadratic`)."""
    return min(max(degrees), 1)
