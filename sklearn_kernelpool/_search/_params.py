"""The parameters of the candidate search: their checks, the candidates
they give and the path that scores them."""

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._binned._pool import prefers_binned
from .._engine._algorithm import ALGORITHMS, key_span
from .._held_out._criteria import SMOOTHER_CRITERIA
from .._utils._input import N_JOBS_CONSTRAINT
from .._utils._validation import relative_weights
from ..kernels import KERNELS
from ._grid import AUTO_NEIGHBORS, bandwidth_grid

# The parameters of the cross-validated estimators that the search takes.
SEARCH_PARAMETERS = (
    "kernels",
    "bandwidths",
    "cv",
    "scoring",
    "per_feature",
    "max_iter",
    "degree",
    "on_empty",
    "algorithm",
    "n_jobs",
    "verbose",
    "n_neighbors",
)

# The constraints of the parameters that both cross-validated estimators
# take alike.
SEARCH_CONSTRAINTS = {
    "kernels": [StrOptions(set(KERNELS) | {"auto"}), "array-like"],
    "bandwidths": [Interval(Integral, 1, None, closed="left"), "array-like", None],
    "cv": ["cv_object"],
    "per_feature": ["boolean", StrOptions({"auto"})],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "algorithm": [StrOptions(set(ALGORITHMS))],
    "n_jobs": N_JOBS_CONSTRAINT,
    "verbose": ["verbose"],
    "n_neighbors": [
        Interval(Integral, 1, None, closed="left"),
        StrOptions({"auto"}),
        "array-like",
        None,
    ],
    "subsample": [
        Interval(Integral, 500, None, closed="left"),
        StrOptions({"auto"}),
        None,
    ],
    "random_state": ["random_state"],
}


def split_categorical(X, is_categorical, categorical_bandwidths):
    """The continuous features, the category codes, the lambdas to score
    ([None] without categorical features) and the placeholder: ``(0,)``
    where a constant column stands in for no continuous feature."""
    if is_categorical is None:
        return X, None, [None], ()
    lambdas = np.asarray(categorical_bandwidths, dtype=object)
    try:
        lambdas = lambdas.astype(np.float64)
    except (TypeError, ValueError):
        lambdas = None
    if (
        lambdas is None
        or lambdas.ndim != 1
        or lambdas.size == 0
        or not np.all((lambdas >= 0) & (lambdas <= 1))
    ):
        raise ValueError(
            "categorical_bandwidths must be a non-empty 1-D array-like of "
            f"floats in [0, 1]; got {categorical_bandwidths!r}."
        )
    n_categorical = int(np.count_nonzero(is_categorical))
    codes = X[:, X.shape[1] - n_categorical :].astype(np.intp)
    X = X[:, : X.shape[1] - n_categorical]
    if X.shape[1] == 0:
        # No continuous feature: one constant one, whose kernel factor is
        # the same for every pair; the bandwidth is then unused.
        X = np.zeros((X.shape[0], 1), dtype=X.dtype)
        return X, codes, [float(lam) for lam in lambdas], (0,)
    return X, codes, [float(lam) for lam in lambdas], ()


def relative_sample_weight(sample_weight):
    """Validated sample weights divided by a power of two near their
    largest, or None.

    Pools and scores are ratios of weighted sums: these weights give the
    same bits, and sums of them cannot overflow. Weights that would round
    to zero next to the largest are refused, as
    :class:`KernelAttentionRegressor` does.
    """
    if sample_weight is None:
        return None
    positive = sample_weight > 0
    relative = np.zeros_like(sample_weight)
    relative[positive] = relative_weights(sample_weight[positive], np.float64)
    return relative


class SearchParameters:
    """The parameters of :class:`._candidates.CandidateSearch`, checked.

    Parameters
    ----------
    policy : RegressionScoring or ProbabilityScoring
        Scores the held-out predictions (:mod:`._scores`,
        :mod:`._proba`).

    name : str
        The estimator's name, in the verbose output.

    **parameters
        The estimator's parameters of :data:`SEARCH_PARAMETERS`, with the
        meaning they have in :class:`KernelAttentionRegressorCV`.
    """

    def __init__(self, policy, name, **parameters):
        self.policy = policy
        self.name = name
        for key in SEARCH_PARAMETERS:
            setattr(self, key, parameters[key])

    def kernel_names(self):
        names = [self.kernels] if isinstance(self.kernels, str) else self.kernels
        names = list(np.asarray(names, dtype=object).ravel())
        unknown = [n for n in names if not isinstance(n, str) or n not in KERNELS]
        if not names or unknown:
            raise ValueError(
                "kernels must be a kernel name or a non-empty sequence of kernel "
                f"names among {sorted(KERNELS)}; got {self.kernels!r}."
            )
        if self.per_feature_mode() is True:
            flat = [n for n in names if KERNELS[n].log_function is None]
            if flat:
                raise ValueError(
                    "per_feature=True needs kernels with a log form (gaussian, "
                    "exponential, laplacian, cauchy), whose leave-one-out error "
                    f"is differentiable in the widths; got {flat}."
                )
        return names

    def neighbor_counts(self, categorical=False):
        """The adaptive candidates' neighbour counts, a list (maybe empty).

        ``"auto"`` gives :data:`AUTO_NEIGHBORS`, or none where adaptive
        candidates do not apply (``categorical`` features, or
        ``per_feature=True``); :meth:`fit` then keeps those that every
        held-out fit can hold.
        """
        if isinstance(self.n_neighbors, str):
            if categorical or self.per_feature_mode() is True:
                counts = []
            else:
                counts = list(AUTO_NEIGHBORS)
        elif self.n_neighbors is None:
            counts = []
        elif isinstance(self.n_neighbors, Integral):
            counts = [self.n_neighbors]
        else:
            counts = list(np.asarray(self.n_neighbors, dtype=object).ravel())
            if not counts or not all(
                isinstance(k, Integral) and not isinstance(k, bool) and k >= 1
                for k in counts
            ):
                raise ValueError(
                    "n_neighbors must be None, an int >= 1 or a non-empty "
                    f"sequence of ints >= 1; got {self.n_neighbors!r}."
                )
        if self.bandwidths is None and not counts:
            raise ValueError(
                "bandwidths=None scores adaptive-width candidates only: it "
                "needs n_neighbors (an int or a list of ints); got "
                "n_neighbors=None."
            )
        if counts and self.per_feature_mode() is True:
            raise ValueError(
                "per_feature=True learns fixed per-feature widths and cannot be "
                f"combined with n_neighbors={self.n_neighbors!r}; use "
                "per_feature=False to score adaptive widths."
            )
        return [int(k) for k in counts]

    def smoother_scoring(self):
        """Whether ``scoring`` is a criterion of the in-sample smoother."""
        return isinstance(self.scoring, str) and self.scoring in SMOOTHER_CRITERIA

    def check_smoother_scoring(self):
        """Refuse what ``scoring="gcv"`` and ``"aicc"`` do not apply to."""
        if not self.smoother_scoring():
            return
        if self.cv is not None:
            raise ValueError(
                f"scoring={self.scoring!r} is a criterion of the fit on the whole "
                "training set, computed from the trace of its smoother matrix: "
                f"it takes no cross-validation splits; got cv={self.cv!r}. Use "
                "cv=None."
            )

    def check_options(self, codes, counts):
        """Refuse the combinations of options that a search cannot score:
        ``counts`` (adaptive candidates) or a criterion with categorical
        ``codes``, and ``per_feature=True`` with ``cv``."""
        if counts and codes is not None:
            raise ValueError(
                "n_neighbors (adaptive-width candidates) cannot be combined with "
                "categorical_features in KernelAttentionRegressorCV; got "
                f"n_neighbors={self.n_neighbors!r}. Score fixed widths with "
                "categorical features (n_neighbors=None), or fit "
                "KernelAttentionRegressor(n_neighbors=..., "
                "categorical_features=...) directly."
            )
        self.check_smoother_scoring()
        self.check_quadratic()
        learned = self.per_feature_mode() is True
        if self.smoother_scoring() and learned and codes is not None:
            raise ValueError(
                f"per_feature={self.per_feature!r} with categorical features learns "
                "the widths and lambdas on the leave-one-out error; "
                f"scoring={self.scoring!r} cannot score them. Use scoring=None, "
                "or per_feature=False."
            )
        if learned and self.cv is not None:
            raise ValueError(
                "per_feature=True learns the widths on the leave-one-out error "
                "and scores them there: it needs cv=None; got "
                f"cv={self.cv!r}. per_feature='auto' judges them on the splits "
                "of cv."
            )

    def check_quadratic(self):
        """Refuse what the search does not score with ``degree=2``."""
        if self.degree != 2:
            return
        problems = []
        if self.per_feature_mode() is True:
            problems.append("per_feature=True")
        if self.algorithm == "binned":
            problems.append("algorithm='binned'")
        if problems:
            raise ValueError(
                "degree=2 (local quadratic fits) is scored by exact "
                "leave-one-out, K-fold or in-sample fits of fixed or adaptive "
                "widths; it cannot take " + "; ".join(problems) + ". Use "
                "degree=0 or 1 with these options, or per_feature=False or "
                "'auto' and algorithm='auto', 'brute', 'kd_tree' or "
                "'ball_tree' with degree=2."
            )

    def per_feature_mode(self):
        """``per_feature`` as ``"auto"``, True or False."""
        if isinstance(self.per_feature, str):
            return self.per_feature
        return bool(self.per_feature)

    def bandwidth_grid(self, X):
        if self.bandwidths is None:
            return np.zeros(0)
        if isinstance(self.bandwidths, Integral) and not isinstance(
            self.bandwidths, bool
        ):
            return bandwidth_grid(X, int(self.bandwidths))
        h = np.asarray(self.bandwidths)
        if (
            h.ndim != 1
            or h.size == 0
            or not np.issubdtype(h.dtype, np.number)
            or np.iscomplexobj(h)
        ):
            raise ValueError(
                "bandwidths must be an int >= 1 or a non-empty 1-D array-like of "
                f"floats > 0; got {self.bandwidths!r}."
            )
        h = h.astype(np.float64)
        if not np.all(np.isfinite(h) & (h > 0)):
            raise ValueError(
                f"Every bandwidth must be a finite float > 0; got {h.tolist()}."
            )
        return h

    def binned_scoring(self, X, names, grid, codes, counts):
        """Whether the candidates are scored on the binned path.

        ``algorithm="binned"`` asks for it and refuses, naming them, the
        options it cannot score; ``"auto"`` picks it where the refit would
        (:func:`.._binned._pool.prefers_binned`, at the smallest candidate width
        of every kernel) and nothing else forbids it. ``X`` holds the keys
        of positive weight.
        """
        explicit_counts = self.n_neighbors is not None and not isinstance(
            self.n_neighbors, str
        )
        if self.algorithm == "binned":
            problems = []
            if codes is not None:
                problems.append("categorical features")
            if X.shape[1] > 2:
                problems.append(f"{X.shape[1]} features")
            if explicit_counts or self.bandwidths is None:
                problems.append(
                    f"n_neighbors={self.n_neighbors!r} adaptive widths (use "
                    "n_neighbors=None or 'auto', which scores none on this path)"
                )
            if self.per_feature_mode() is True:
                problems.append(
                    f"per_feature={self.per_feature!r} (per-feature widths are "
                    "learned on the exact leave-one-out error)"
                )
            if self.smoother_scoring():
                problems.append(
                    f"scoring={self.scoring!r} (the trace of the smoother "
                    "matrix is not computed on the binned path)"
                )
            if problems:
                raise ValueError(
                    "algorithm='binned' scores fixed isotropic widths of one or "
                    "two continuous features; "
                    "it cannot take " + "; ".join(problems) + ". Use "
                    "algorithm='auto' or 'brute'."
                )
            return True
        if (
            self.algorithm != "auto"
            or self.degree == 2
            or codes is not None
            or not len(grid)
            or explicit_counts
            or self.per_feature_mode() is True
            or self.smoother_scoring()
        ):
            return False
        span = key_span(X)
        return all(
            prefers_binned(X.shape[0], X.shape[1], grid.min(), span, KERNELS[name])
            for name in names
        )
