"""The in-sample criteria of a linear smoother: GCV and the corrected AIC.

A fitted estimator is a linear smoother on its training keys, ``L y``; the
trace of ``L`` is its effective number of parameters. With the residual mean
square it gives the generalised cross-validation criterion of Craven and
Wahba (1979) and the corrected AIC of Hurvich, Simonoff and Tsai (1998).
The searches score candidates by them (:func:`in_sample_criteria`, from a
leave-one-out pass); the fitted estimator reports them
(:func:`.._inference._diagnostics.smoother_diagnostics`).
"""

import numpy as np

SMOOTHER_CRITERIA = ("gcv", "aicc")


def criteria(sigma2, effective_df, n):
    """GCV and AICc from the residual mean square and the trace of ``L``.

    ``gcv = sigma2 / (1 - tr / n)**2`` (``n RSS / (n - tr)**2`` without
    weights) and ``aicc = log(sigma2) + (1 + tr / n) / (1 - (tr + 2) / n)``;
    each is ``+inf`` where the fit leaves too few residual degrees of freedom
    for it: GCV where ``tr > n - 1``, less than one (its ratio of two
    vanishing quantities is then rounding error), AICc where its denominator
    is not positive (``tr + 2 >= n``); NaN where an input is NaN.

    Parameters
    ----------
    sigma2, effective_df : float or ndarray
        The residual mean squares and the traces, broadcast together.
    n : int
        The number of observations (training rows of positive weight).

    Returns
    -------
    gcv, aicc : ndarray
        The criteria, of the broadcast shape.
    """
    sigma2 = np.asarray(sigma2, dtype=np.float64)
    ratio = np.asarray(effective_df, dtype=np.float64) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        gcv_den = (1.0 - ratio) ** 2
        gcv = np.where(ratio <= 1.0 - 1.0 / n, sigma2 / gcv_den, np.inf)
        aicc_den = 1.0 - (ratio + 2.0 / n)
        aicc = np.where(aicc_den > 0, np.log(sigma2) + (1.0 + ratio) / aicc_den, np.inf)
    nan = np.isnan(sigma2) | np.isnan(ratio)
    gcv = np.where(nan, np.nan, gcv)
    aicc = np.where(nan, np.nan, aicc)
    return gcv, aicc


def in_sample_criteria(values, weights, fitted, self_weight):
    """``(effective_df, sigma2, gcv, aicc)`` of candidates from their fits.

    Parameters
    ----------
    values : ndarray of shape (n, n_outputs)
        The training values.
    weights : ndarray of shape (n,)
        The sample weights; rows of weight zero are no observation.
    fitted : ndarray of shape (..., n, n_outputs)
        The in-sample fits of each candidate.
    self_weight : ndarray of shape (..., n)
        The diagonals ``L_ii`` of their smoother matrices.

    Returns
    -------
    effective_df, sigma2, gcv, aicc : ndarray of shape (...)
        The trace over the rows of positive weight, the sample-weighted
        residual mean square (averaged over the outputs) and the criteria of
        :func:`criteria`.
    """
    keep = np.flatnonzero(weights > 0)
    w = weights[keep] / weights[keep].sum()
    residuals = values[keep] - fitted[..., keep, :]
    sigma2 = np.mean(np.einsum("i,...ip->...p", w, residuals**2), axis=-1)
    effective_df = self_weight[..., keep].sum(axis=-1)
    gcv, aicc = criteria(sigma2, effective_df, len(keep))
    return effective_df, sigma2, gcv, aicc
