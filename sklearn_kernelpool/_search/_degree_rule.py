"""The choice of the degree on small tables.

Under ``degree="auto"`` with leave-one-out, a candidate and a simpler one
are compared point by point: the per-point held-out squared errors give
paired differences ``e1_i - e0_i`` (the order of the comparisons, from the
best local-constant candidate through the global line to the best one, is
in :mod:`._rules`).
On a table with many rows per parameter of the local line (``n / (d + 1)``
at least :data:`MIN_ROWS_PER_PARAMETER`) the better mean wins, as the scores
rank them. On a smaller table the local-linear candidate is kept only if its
mean loss is below the local-constant one by at least one standard error of
the mean paired difference: the one-standard-error rule of Breiman,
Friedman, Olshen and Stone (1984, *Classification and Regression Trees*,
section 3.4.3; Hastie, Tibshirani and Friedman, *The Elements of
Statistical Learning*, 2nd ed., section 7.10), here toward the simpler
degree and on paired differences. On a small table a few extreme rows
decide the mean (one held-out point predicted from an extrapolated line),
and a slope chosen by them loses out of sample.

When the local-linear candidate is kept on a smaller table still (fewer
than :data:`WIDTH_RULE_ROWS_PER_PARAMETER` rows per parameter), the same
rule then chooses its width (:func:`widest_within_one_se`): among the candidates
of the same kernel and kind of width (fixed bandwidth or neighbour count),
the widest one whose leave-one-out loss is within one standard error of the
best one's is kept, the one-standard-error rule in its usual direction, the
smoother model (Hastie, Tibshirani and Friedman, section 7.10). A
local-linear fit at a narrow width estimates its slope from a few
neighbours; on a small table its leave-one-out optimum is flat and noisy
toward the narrow side. On a table of 18.6 rows per parameter (the
training parts of statsmodels' star98) the walk lowered the out-of-fold
:math:`R^2` by 0.003, hence the lower bound of tables it applies to.
"""

import numpy as np

MIN_ROWS_PER_PARAMETER = 20
# The width of a kept local-linear candidate follows the one-standard-error
# rule on tables of fewer rows per parameter of the local line than this.
WIDTH_RULE_ROWS_PER_PARAMETER = 10


def keep_local_linear(
    errors0,
    errors1,
    n_features,
    sample_weight=None,
    *,
    n_se=1.0,
    min_rows_per_parameter=MIN_ROWS_PER_PARAMETER,
):
    """Whether the best local-linear candidate replaces the local-constant one.

    Parameters
    ----------
    errors0, errors1 : array-like of shape (n_samples,)
        Per-point leave-one-out losses (squared errors, averaged over the
        outputs) of the best degree-0 and the best degree-1 candidate.
    n_features : int
        The number of features with a slope, ``d``.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights of the points; points of weight zero are left
        out. The standard error uses Kish's effective sample size
        ``(sum w)^2 / sum w^2``, so it does not depend on the scale of the
        weights.
    n_se : float, default=1.0
        How many standard errors of the mean paired difference the
        local-linear candidate must win by on a small table.
    min_rows_per_parameter : float, default=20
        Tables with at least this many points (of positive weight) per
        parameter of the local line, ``n / (d + 1)``, compare the means
        alone.

    Returns
    -------
    keep : bool
        True to keep the degree-1 candidate.

    Examples
    --------
    >>> from sklearn_kernelpool._search._degree_rule import keep_local_linear
    >>> errors0 = [1.0, 1.0, 1.0, 1.0, 9.0]
    >>> errors1 = [1.1, 1.1, 1.1, 1.1, 0.0]  # better on one point only
    >>> keep_local_linear(errors0, errors1, n_features=2)
    False
    >>> keep_local_linear(errors0, errors1, n_features=2, min_rows_per_parameter=1)
    True
    """
    mean, standard_error, n = _paired_difference(
        errors0, errors1, sample_weight, "keep_local_linear"
    )
    if n / (n_features + 1) >= min_rows_per_parameter or n < 3:
        return bool(mean < 0)
    return bool(mean + n_se * standard_error < 0)


def _paired_difference(errors0, errors1, sample_weight, name):
    """The weighted mean of ``errors1 - errors0`` over the points of
    positive weight, its standard error (Kish's effective sample size;
    NaN for fewer than two points) and the number of those points."""
    errors0 = np.asarray(errors0, dtype=np.float64)
    errors1 = np.asarray(errors1, dtype=np.float64)
    if errors0.shape != errors1.shape or errors0.ndim != 1:
        raise ValueError(
            "The per-point errors must be 1-D arrays of the same length; got "
            f"shapes {errors0.shape} and {errors1.shape}."
        )
    weights = (
        np.ones_like(errors0)
        if sample_weight is None
        else np.asarray(sample_weight, dtype=np.float64)
    )
    positive = weights > 0
    diff, weights = (errors1 - errors0)[positive], weights[positive]
    n = diff.size
    if n == 0:
        raise ValueError(f"{name} needs a point of positive weight.")
    mean = float(np.average(diff, weights=weights))
    if n < 2:
        return mean, np.nan, n
    variance = np.average((diff - mean) ** 2, weights=weights) * n / (n - 1)
    n_effective = weights.sum() ** 2 / np.square(weights).sum()
    return mean, float(np.sqrt(variance / n_effective)), n


def widest_within_one_se(best_errors, wider_errors, sample_weight=None, *, n_se=1.0):
    """The widest candidate within one standard error of the best one.

    The one-standard-error rule (Breiman et al., 1984; Hastie, Tibshirani
    and Friedman, 2009, section 7.10) on the width of a local-linear fit:
    walking from the best candidate toward wider ones, each is accepted
    while the mean of its paired differences ``e_i - e_best`` of per-point
    leave-one-out losses is at most ``n_se`` standard errors of that mean;
    the walk stops at the first one that is not.

    Parameters
    ----------
    best_errors : array-like of shape (n_samples,)
        Per-point leave-one-out losses of the best candidate.
    wider_errors : sequence of array-like of shape (n_samples,)
        Those of the wider candidates, from the narrowest to the widest.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights of the points, as for
        :func:`keep_local_linear`.
    n_se : float, default=1.0
        How many standard errors a wider candidate may lose by.

    Returns
    -------
    index : int
        The index in ``wider_errors`` of the candidate kept, or -1 to keep
        the best one.

    Examples
    --------
    >>> from sklearn_kernelpool._search._degree_rule import widest_within_one_se
    >>> best = [1.0, 2.0, 1.0, 2.0]
    >>> wider = [[1.1, 1.9, 1.0, 2.1], [2.0, 3.0, 2.0, 3.0]]  # close, then worse
    >>> widest_within_one_se(best, wider)
    0
    """
    index = -1
    for k, errors in enumerate(wider_errors):
        mean, standard_error, n = _paired_difference(
            best_errors, errors, sample_weight, "widest_within_one_se"
        )
        if n < 3 or not mean <= n_se * standard_error:
            break
        index = k
    return index
