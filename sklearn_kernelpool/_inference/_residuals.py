"""The smoother's rows and the residual variances of its training values.

A fitted estimator is a linear smoother: ``f(q) = sum_i l_i(q) y_i`` with
``l(q)`` the row of :meth:`attention_weights` (the equivalent-kernel weights
for ``degree=1``). Its standard errors are ``sum_i l_i(q)**2 sigma_i**2``
with the variances ``sigma_i**2`` estimated here from the residuals of the
training values.
"""

import numpy as np
from scipy import sparse as sp
from sklearn import config_context, get_config

from .._utils._input import validate_queries
from .._utils._working_memory import row_batches

# Below this, a training row's residual carries no information about its
# variance: the row is (almost) alone in its own neighbourhood.
_INFORMATIVE = 1e-8


def smoother_rows(estimator, X, *, validated=False, share=1, counts=None):
    """Yield ``(batch, rows)``: the dense smoother rows of ``X[batch]``.

    ``rows`` has shape ``(n_batch, n_samples_fit)`` and float64 dtype; the
    batches are sized so that a few such arrays fit in scikit-learn's
    ``working_memory`` divided by ``share`` (the caller keeps the rest).
    ``X`` is validated first unless ``validated``. For ``degree=1`` the
    :func:`.._engine._moments.fit_counts` of the local-linear fits are
    appended to ``counts`` when it is a list.
    """
    if not validated:
        X = validate_queries(estimator, X)
    pool = estimator._pool
    n_keys = pool.n_samples_fit
    memory = get_config()["working_memory"] / share
    for batch in row_batches(X.shape[0], share * 4 * 8 * n_keys):
        with config_context(working_memory=memory):
            rows = pool.attention_weights(
                X[batch], n_jobs=estimator.n_jobs, sparse=False, counts=counts
            )
        yield batch, np.asarray(rows, dtype=np.float64)


def training_keys(estimator):
    """The validated training keys of a fitted estimator, as queries.

    ``keys_`` were validated in ``fit`` (categorical features already
    encoded as the engine's codes): only sparse keys change, to CSR.
    """
    keys = estimator.keys_
    return keys.tocsr() if sp.issparse(keys) else keys


def fit_weights(estimator):
    """The weights of the fit: ``sample_weight_`` times the robustness
    weights of a robust fit (``robustness_weights_``); None for unit
    weights."""
    weights = estimator.sample_weight_
    robust = getattr(estimator, "robustness_weights_", None)
    if robust is None:
        return weights
    return robust if weights is None else weights * robust


def residual_variance(estimator):
    """Per-row residual variances of the training values, ``(n, n_outputs)``.

    With ``L`` the smoother matrix on the training keys, ``e = y - L y`` the
    residuals and ``d_i = (1 - L_ii)**2 + sum_{j != i} L_ij**2 =
    1 - 2 L_ii + sum_j L_ij**2``, the estimate is ``sigma_i**2 = e_i**2 /
    d_i``: unbiased for every row when the noise is homoscedastic and the
    smoother unbiased, since ``E e_i**2 = sigma**2 d_i`` then (the
    degrees-of-freedom correction of each row; it reduces to the HC2
    correction of least squares when ``L`` is a projection). Rows with
    ``d_i`` below 1e-8 (a key alone in its own neighbourhood, whose residual
    is 0 whatever the noise) get the pooled estimate ``sum_k e_k**2 / sum_k
    d_k`` over the informative rows of positive sample weight instead.

    Sample weights multiply the kernel, so they enter through ``L``: each
    training row is one observation of variance ``sigma_i**2`` whatever its
    weight, and a row of weight zero has a zero column in ``L``, so its own
    residual never reaches a standard error.

    The cost is one pass of the smoother over the training keys: ``O(n**2)``
    kernel evaluations (fewer on the trees), in batches of rows within
    ``working_memory``.

    Returns
    -------
    variance : ndarray of shape (n_samples_fit, n_outputs)
        The estimates ``sigma_i**2`` per output.
    fitted : ndarray of shape (n_samples_fit, n_outputs)
        The in-sample fit ``L y``.
    self_weight : ndarray of shape (n_samples_fit,)
        The diagonal ``L_ii`` of the smoother matrix.
    """
    variance, fitted, self_weight, _ = residual_parts(estimator)
    return variance, fitted, self_weight


def residual_parts(estimator):
    """:func:`residual_variance` and the row corrections ``d_i``, ``(n,)``."""
    values = np.asarray(estimator.values_, dtype=np.float64).reshape(
        estimator.values_.shape[0], -1
    )
    n = values.shape[0]
    fitted = np.empty_like(values)
    self_weight = np.empty(n)
    denominator = np.empty(n)
    for batch, rows in smoother_rows(
        estimator, training_keys(estimator), validated=True
    ):
        fitted[batch] = rows @ values
        diagonal = rows[np.arange(rows.shape[0]), np.arange(n)[batch]]
        self_weight[batch] = diagonal
        denominator[batch] = 1.0 - 2.0 * diagonal + np.einsum("ij,ij->i", rows, rows)
    variance = variance_from_residuals(
        (values - fitted) ** 2, denominator, fit_weights(estimator)
    )
    return variance, fitted, self_weight, denominator


def variance_from_residuals(squared, denominator, weights):
    """``sigma_i**2`` from squared residuals ``(n, m)`` and corrections ``d_i``.

    Each of the ``m`` columns (outputs, or resamples of a bootstrap) is
    estimated on its own, as in :func:`residual_variance`.
    """
    informative = denominator > _INFORMATIVE
    counted = informative if weights is None else informative & (weights > 0)
    variance = np.empty_like(squared)
    variance[informative] = squared[informative] / denominator[informative, None]
    if not np.all(informative):
        total = np.sum(denominator[counted])
        pooled = (
            np.sum(squared[counted], axis=0) / total
            if total > 0
            else np.full(squared.shape[1], np.nan)
        )
        variance[~informative] = pooled
    if weights is not None:
        # Zero columns of L: any finite value; 0 keeps NaN out of L**2 @ var.
        variance[weights == 0] = 0.0
    return variance
