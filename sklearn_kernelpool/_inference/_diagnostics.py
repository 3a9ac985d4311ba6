"""Model summaries of a fitted smoother: effective degrees of freedom, GCV, AICc.

A fitted estimator is a linear smoother on its training keys: its in-sample
fit is ``L y``, with ``L`` the smoother matrix whose row ``i`` holds the
normalised attention weights of training key ``i`` as a query (the
equivalent-kernel weights for ``degree=1``). Its trace, the sum of each
row's own weight in its own fit, is the effective number of parameters
(degrees of freedom) of the fit; with the residual mean square it gives the
generalised cross-validation criterion of Craven and Wahba (1979) and the
corrected AIC of Hurvich, Simonoff and Tsai (1998).

:func:`smoother_diagnostics` computes them for one fitted estimator from its
dense smoother rows; the cross-validation estimator gets them for every
candidate from its leave-one-out pass
(:meth:`.._held_out._pool.HeldOut.in_sample`) and
:func:`.._held_out._criteria.in_sample_criteria`.
"""

import numpy as np
from sklearn.utils import Bunch

from .._engine._array_api import is_array_api_pool
from .._held_out._criteria import criteria
from ._residuals import fit_weights, smoother_rows, training_keys


def smoother_diagnostics(estimator):
    """The summaries of a fitted :class:`KernelAttentionRegressor`.

    Computed on its stored training keys and values from the dense smoother
    rows, batch by batch within ``working_memory``
    (:func:`._residuals.smoother_rows`): one pass over the pairs of
    training keys. See :meth:`KernelAttentionRegressor.smoother_diagnostics`
    for the definitions.
    """
    if is_array_api_pool(estimator._pool):
        raise ValueError(
            "smoother_diagnostics needs an estimator fitted on NumPy arrays or "
            "SciPy sparse matrices; the array API path does not compute the "
            "smoother matrix."
        )
    values = np.asarray(estimator.values_, dtype=np.float64)
    values = values.reshape(values.shape[0], -1)
    n_samples = values.shape[0]
    weights = fit_weights(estimator)
    if weights is None:
        weights = np.ones(n_samples)
    weights = np.asarray(weights, dtype=np.float64)
    # Rows of weight zero are no observation: their column of L is zero (so
    # is their own weight), their residual counts for nothing, and their own
    # fit (which may be empty) is not computed.
    positive = np.flatnonzero(weights > 0)
    n = len(positive)
    fitted = np.full_like(values, np.nan)
    self_weight = np.zeros(n_samples)
    keys = training_keys(estimator)[positive]
    counts = []  # (degree 1) the fit_counts of the local-linear fits
    for batch, rows in smoother_rows(estimator, keys, validated=True, counts=counts):
        own = positive[batch]
        fitted[own] = rows @ values
        self_weight[own] = rows[np.arange(len(own)), own]
    effective_df = float(np.sum(self_weight))
    values, fitted_kept = values[positive], fitted[positive]
    w = weights[positive] / weights[positive].sum()
    sigma2 = float(np.mean(w @ (values - fitted_kept) ** 2))
    gcv, aicc = criteria(sigma2, effective_df, n)
    shape = estimator.values_.shape
    # fit_counts: n_shrunk third, the rows with a neighbourhood last.
    totals = np.sum(np.reshape(counts, (-1, 6)), axis=0)
    shrunk_fraction = float(totals[2] / totals[5]) if totals[5] else 0.0
    return Bunch(
        effective_df=effective_df,
        self_weight=self_weight,
        fitted=fitted.reshape(shape),
        n_observations=n,
        rss=n * sigma2,
        sigma2=sigma2,
        gcv=float(gcv),
        aicc=float(aicc),
        shrunk_fraction=shrunk_fraction,
    )
