"""The small-table rules of the candidate search: the degree and the width
of the selected candidate by the one-standard-error rule on the paired
leave-one-out losses (:mod:`._degree_rule`)."""

import numpy as np

from . import _degree_rule


def _candidate_key(params):
    """A hashable key of a candidate's parameters."""
    return tuple(sorted(params.items()))


class SmallTableRules:
    """:meth:`_degree_rule` and :meth:`_width_rule` of
    :class:`._search.CandidateSearch`, from its ``point_errors`` (the
    leave-one-out losses of every candidate, by :func:`_candidate_key`)."""

    def _degree_rule(self, params, results, weights, n_features):
        """The best candidate under the one-standard-error rule of the
        degree on a small table (:func:`._degree_rule.keep_local_linear`):
        the best local-constant candidate unless the best local-linear one
        beats it by a standard error of the paired leave-one-out losses."""
        best = self.best_index_
        if params[best]["degree"] != 1:
            return best
        scores = np.where(
            np.isnan(results["mean_test_score"]), -np.inf, results["mean_test_score"]
        )
        local_constant = [i for i, p in enumerate(params) if p["degree"] == 0]
        best0 = max(local_constant, key=lambda i: scores[i])
        if not np.isfinite(scores[best0]):
            return best
        errors0 = self.point_errors[_candidate_key(params[best0])]
        errors1 = self.point_errors[_candidate_key(params[best])]
        if _degree_rule.keep_local_linear(errors0, errors1, n_features, weights):
            return best
        self.say(
            "Kept degree 0: on this small table degree 1 does not beat it by "
            "one standard error of the leave-one-out losses"
        )
        return best0

    def _width_rule(self, params, results, weights, n_features):
        """The widest candidate within one standard error of the selected
        local-linear one on a table of fewer than
        :data:`._degree_rule.WIDTH_RULE_ROWS_PER_PARAMETER` rows per
        parameter of the local line
        (:func:`._degree_rule.widest_within_one_se`), among those of its
        kernel and kind of width (fixed bandwidths, or neighbour counts)."""
        best = self.best_index_
        selected = params[best]
        rows = np.count_nonzero(weights > 0) / (n_features + 1)
        if (
            selected["degree"] != 1
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
