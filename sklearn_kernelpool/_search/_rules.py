"""The small-table rules of the candidate search: the degree and the width
of the selected candidate by the one-standard-error rule on the paired
leave-one-out losses (:mod:`._degree_rule`).

On a small table the search also scores the global weighted least-squares
line (:data:`GLOBAL_KERNEL` at degree 1: weights that do not depend on the
distance, an infinite width). The simple candidates are the local-constant
ones and that line; a local-linear candidate is kept only where it beats
the better of them by one standard error.
"""

import numpy as np

from . import _degree_rule

#: The kernel of the global line: its weights are the same for every key.
GLOBAL_KERNEL = "constant"


def is_global_line(params):
    """Whether a candidate is the global weighted least-squares line."""
    return params["kernel"] == GLOBAL_KERNEL and params.get("degree") == 1


def _candidate_key(params):
    """A hashable key of a candidate's parameters."""
    return tuple(sorted(params.items()))


class SmallTableRules:
    """The degree and width rules of the candidate search on a small table,
    from the leave-one-out losses of every candidate.

    Parameters
    ----------
    say : callable
        ``say(message)`` tells the verbose output what a rule kept.

    Attributes
    ----------
    point_errors : dict
        The per-point leave-one-out losses of every candidate scored, by
        :func:`_candidate_key`, added by :meth:`record`.
    """

    def __init__(self, say):
        self.say = say
        self.point_errors = {}
        # The better simple candidate, between the degree and the width rules.
        self._best_simple = None

    def record(self, params, errors):
        """Keep the per-point losses ``errors`` (one row per candidate) of
        the candidates ``params``."""
        for p, e in zip(params, errors, strict=True):
            self.point_errors[_candidate_key(p)] = e

    def select(self, params, results, best, weights, n_features):
        """The candidate selected from the best one, ``best``, by the degree
        rule then the width rule."""
        best = self.degree_rule(params, results, best, weights, n_features)
        return self.width_rule(params, results, best, weights, n_features)

    def degree_rule(self, params, results, best, weights, n_features):
        """The best candidate under the one-standard-error rules of the
        degree on a small table (:func:`._degree_rule.keep_local_linear`).

        The best local-constant candidate of a fixed width (of any width
        without fixed ones) is the baseline; the global line
        replaces it where it beats it by one standard error of the paired
        leave-one-out losses, and the best local-linear candidate replaces
        that where it beats it by one standard error in turn.
        """
        scores = np.where(
            np.isnan(results["mean_test_score"]), -np.inf, results["mean_test_score"]
        )
        local_constant = [i for i, p in enumerate(params) if p["degree"] == 0]
        # Of a fixed width, where there is one (not with bandwidths=None).
        fixed = [i for i in local_constant if "n_neighbors" not in params[i]]
        baseline = max(fixed or local_constant, key=lambda i: scores[i])
        if not np.isfinite(scores[baseline]):
            return best
        line = [i for i, p in enumerate(params) if is_global_line(p)]
        if line and self._beats(params, line[0], baseline, weights, n_features):
            baseline = line[0]
        self._best_simple = baseline
        if (
            best != baseline
            and not is_global_line(params[best])
            and self._beats(params, best, baseline, weights, n_features)
        ):
            return best
        if baseline != best:
            kept = "the global line" if is_global_line(params[baseline]) else "degree 0"
            self.say(
                f"Kept {kept}: on this small table the candidates with more "
                "slope do not beat it by one standard error of the leave-one-out "
                "losses"
            )
        return baseline

    def _beats(self, params, candidate, baseline, weights, n_features):
        """Whether ``candidate`` beats ``baseline`` by one standard error of
        the paired leave-one-out losses."""
        return _degree_rule.keep_local_linear(
            self.point_errors[_candidate_key(params[baseline])],
            self.point_errors[_candidate_key(params[candidate])],
            n_features,
            weights,
        )

    def width_rule(self, params, results, best, weights, n_features):
        """The widest candidate within one standard error of the selected
        local-linear one on a table of fewer than
        :data:`._degree_rule.WIDTH_RULE_ROWS_PER_PARAMETER` rows per
        parameter of the local line
        (:func:`._degree_rule.widest_within_one_se`), among those of its
        kernel and kind of width (fixed bandwidths, or neighbour counts).
        A wider candidate must still beat the better simple candidate by one
        standard error, as the degree rule asked of the best one: the walk
        stops before the first that does not."""
        selected = params[best]
        rows = np.count_nonzero(weights > 0) / (n_features + 1)
        best_simple, self._best_simple = self._best_simple, None
        if (
            selected["degree"] != 1
            or is_global_line(selected)
            or rows >= _degree_rule.WIDTH_RULE_ROWS_PER_PARAMETER
        ):
            return best
        adaptive = "n_neighbors" in selected
        size = "n_neighbors" if adaptive else "bandwidth"
        wider = sorted(
            (
                i
                for i, p in enumerate(params)
                if p["kernel"] == selected["kernel"]
                and p["degree"] == 1
                and ("n_neighbors" in p) == adaptive
                and p[size] > selected[size]
            ),
            key=lambda i: params[i][size],
        )
        errors = [self.point_errors[_candidate_key(params[i])] for i in wider]
        if best_simple is not None:
            simple_errors = self.point_errors[_candidate_key(params[best_simple])]
            beats = [
                _degree_rule.keep_local_linear(
                    simple_errors, e, n_features, weights, min_rows_per_parameter=np.inf
                )
                for e in errors
            ]
            n_beat = beats.index(False) if False in beats else len(beats)
            wider, errors = wider[:n_beat], errors[:n_beat]
        index = _degree_rule.widest_within_one_se(
            self.point_errors[_candidate_key(selected)], errors, weights
        )
        if index < 0:
            return best
        self.say(
            "Kept a wider local-linear candidate within one standard error of "
            "the leave-one-out losses of the best one (small table)"
        )
        return wider[index]
