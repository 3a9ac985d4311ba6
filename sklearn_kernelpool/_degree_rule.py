"""The choice of the degree on small tables.

Under ``degree="auto"`` with leave-one-out, the best local-linear candidate
and the best local-constant candidate are compared point by point: the
per-point held-out squared errors give paired differences ``e1_i - e0_i``.
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
"""

import numpy as np

MIN_ROWS_PER_PARAMETER = 20


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
    >>> from sklearn_kernelpool._degree_rule import keep_local_linear
    >>> errors0 = [1.0, 1.0, 1.0, 1.0, 9.0]
    >>> errors1 = [1.1, 1.1, 1.1, 1.1, 0.0]  # better on one point only
    >>> keep_local_linear(errors0, errors1, n_features=2)
    False
    >>> keep_local_linear(errors0, errors1, n_features=2, min_rows_per_parameter=1)
    True
    """
    errors0 = np.asarray(errors0, dtype=np.float64)
    errors1 = np.asarray(errors1, dtype=np.float64)
    if errors0.shape != errors1.shape or errors0.ndim != 1:
        raise ValueError(
            "errors0 and errors1 must be 1-D arrays of the same length; got "
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
        raise ValueError("keep_local_linear needs a point of positive weight.")
    mean = np.average(diff, weights=weights)
    if n / (n_features + 1) >= min_rows_per_parameter or n < 3:
        return bool(mean < 0)
    variance = np.average((diff - mean) ** 2, weights=weights) * n / (n - 1)
    n_effective = weights.sum() ** 2 / np.square(weights).sum()
    return bool(mean + n_se * np.sqrt(variance / n_effective) < 0)
