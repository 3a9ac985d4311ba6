"""The fit and :meth:`predict` of :class:`KernelAttentionRegressor` for each
kind of input (:mod:`._input_kinds`): dask arrays (the binned grid sums),
arrays of another array API namespace (the array API pool), and NumPy
arrays, DataFrames or SciPy sparse matrices (the NumPy engine)."""

from sklearn.utils.validation import check_is_fitted

from .._binned._dask import check_holds_rows, fit_dask, predict_dask
from .._engine._array_api import is_array_api_pool
from .._inference._standard_errors import check_numpy_estimator, standard_error
from . import _partially_linear_methods as _partially_linear
from ._array_api import fit_array_api
from ._base import check_flag, fit_pool
from ._input_kinds import KINDS, NUMPY_KINDS, validate_fit_input, validate_query_input
from ._partially_linear import fit_partially_linear
from ._robust import fit_robust, refuse_robust


def fit_regressor(estimator, X, y, sample_weight):
    """``estimator.fit(X, y, sample_weight)`` on the path of ``X``'s kind
    (the partially linear fit with ``linear_features``)."""
    linear = estimator.linear_features is not None
    kinds = ("linear",) if linear else KINDS
    data = validate_fit_input(estimator, X, y, sample_weight, kinds=kinds)
    check_quadratic_path(estimator, data.kind)
    if data.kind == "linear":
        return fit_partially_linear(estimator, data)
    X, y, sample_weight = data.X, data.y, data.sample_weight
    estimator.robustness_weights_ = None
    if data.kind == "dask":
        refuse_robust(estimator, "on dask arrays (the binned grid sums)")
        return fit_dask(estimator, X, y, sample_weight, estimator.degree)
    if data.kind == "array_api":
        refuse_robust(estimator, "on arrays of another array API namespace")
        return fit_array_api(estimator, X, y, sample_weight, data.xp)
    fit_pool(
        estimator,
        X,
        y.reshape(X.shape[0], -1),
        sample_weight,
        degree=estimator.degree,
        n_neighbors=estimator.n_neighbors,
    )
    estimator.keys_ = X
    estimator.values_ = y
    fit_robust(estimator)
    return estimator


#: The paths that fit local quadratics (``degree=2``).
QUADRATIC_PATHS = (
    'algorithm="auto", "brute", "kd_tree" or "ball_tree" on dense NumPy '
    "arrays or DataFrames (with categorical or ordered features, adaptive "
    "widths, sample weights and several outputs)"
)


def check_quadratic_path(estimator, kind):
    """Refuse ``degree=2`` on the paths that do not fit local quadratics:
    the binned grid sums (``algorithm="binned"`` and dask arrays), arrays of
    another array API namespace, SciPy sparse X and the partially linear
    fit."""
    if estimator.degree != 2:
        return
    path = None
    if kind in ("dask", "array_api", "sparse"):
        path = {
            "dask": "dask arrays (the binned grid sums)",
            "array_api": "arrays of another array API namespace",
            "sparse": "SciPy sparse X",
        }[kind]
    elif estimator.algorithm == "binned":
        path = 'algorithm="binned" (the binned grid sums)'
    elif estimator.linear_features is not None:
        path = "linear_features (the partially linear fit)"
    if path is not None:
        raise ValueError(
            f"degree=2 (local quadratic fits) is not available with {path}. "
            f"It is available with {QUADRATIC_PATHS}; use degree=0 or 1 here."
        )


class PredictionMethods:
    """:meth:`predict` of a fitted :class:`KernelAttentionRegressor`."""

    def predict(self, X, return_std=False, return_se=False):
        """Pool the training values with attention weights for each query.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        return_std : bool, default=False
            Whether to return, with the predictions, the attention-weighted
            standard deviation of the training values around them.

        return_se : bool, default=False
            Whether to return, last, the standard error of the predictions.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            The pooled values, of the shape of the training ``y`` per query.

        y_std : ndarray of the shape of ``y_pred``
            Only with ``return_std=True``: per output,
            ``sqrt(sum_i p_i r_i**2)`` with ``p_i`` the normalised attention
            weights (non-negative, sum one) and ``r_i`` the residuals of the
            training values from the local fit at the query (from the pooled
            value for ``degree=0``, from the local-linear model for
            ``degree=1``), without bias correction. It estimates the spread
            of ``y`` given ``X`` near the query, not the error of
            ``y_pred``. Queries that fall back get the spread of the values
            under the fallback: 0 for a unique nearest key
            (``on_empty="nearest"``), the global weighted standard deviation
            (``"mean"``), NaN (``"nan"``), and the local-constant spread
            after a local-linear fallback.

            Accuracy: the spread is computed from moments about the global
            weighted mean of ``y`` (and, for ``degree=1``, of the keys)
            only where the local mean lies within 32 local standard
            deviations of it, which bounds the cancellation to a relative
            error of about ``1024 n eps``; other queries are computed again
            in two passes, from the deviations from their own local mean,
            exact to a few ulps of those deviations (of ``y`` itself for
            the residuals of ``degree=1``), however far the local mean is
            from the global one. The same holds on every path.

        y_se : ndarray of the shape of ``y_pred``
            Only with ``return_se=True``: the heteroscedasticity-consistent
            standard error of ``y_pred`` as an estimate of the smoothed
            curve ``E[y_pred]``, ``sqrt(sum_i l_i(q)**2 sigma_i**2)`` with
            ``l(q)`` the row of :meth:`attention_weights` (the
            equivalent-kernel weights for ``degree=1``) and ``sigma_i**2 =
            e_i**2 / (1 - 2 L_ii + sum_j L_ij**2)`` the variance of training
            value ``i`` from its residual ``e = y - L y`` under the smoother
            matrix ``L`` of the training keys, corrected for the degrees of
            freedom the fit takes from row ``i`` (the HC2 correction of least
            squares when ``L`` is a projection; Wasserman, All of
            Nonparametric Statistics, 2006, section 5.7). A key alone in its
            neighbourhood (correction below 1e-8) gets the pooled estimate
            ``sum_k e_k**2 / sum_k (1 - 2 L_kk + sum_j L_kj**2)``. Sample
            weights multiply the kernel, so they enter through ``l(q)``:
            each training row is one observation with its own variance
            whatever its weight (a weight of 2 is not two independent copies
            here), and rows of weight zero never change the standard error.
            A query that falls back gets the standard error of the value it
            gets (nearest keys, weighted mean, NaN under ``"nan"``). Costs
            one extra pass of the smoother over the training keys (``O(n**2)``
            kernel evaluations, fewer on the trees) for the variances and one
            over the queries, each within ``working_memory``; NumPy input
            only (a ``ValueError`` on the array API path).
        """
        if _partially_linear.is_partially_linear(self):
            return _partially_linear.predict(self, X, return_std, return_se)
        check_is_fitted(self)
        check_flag("return_std", return_std)
        check_flag("return_se", return_se)
        if return_se:
            check_holds_rows(self, "predict(return_se=True)")
            if is_array_api_pool(self._pool):
                check_numpy_estimator(self, "return_se=True")
        queries = validate_query_input(self, X, "predict", (*NUMPY_KINDS, "dask"))
        X = queries.X
        if queries.kind == "dask":
            return predict_dask(self, X, return_std, return_se)
        if queries.kind == "array_api":
            pooled = self._pool.pool(X, return_std=return_std)
        else:
            pooled = self._pool.pool(X, n_jobs=self.n_jobs, return_std=return_std)
        outputs = list(pooled) if return_std else [pooled]
        if return_se:
            se = standard_error(self, X).astype(outputs[0].dtype, copy=False)
            outputs.append(se)
        outputs = tuple(self._shape_like_y(output) for output in outputs)
        return outputs if len(outputs) > 1 else outputs[0]

    def _shape_like_y(self, pooled):
        if self.values_ is None:  # fitted on dask arrays
            return pooled[:, 0] if self._y_ndim == 1 else pooled
        return pooled[:, 0] if self.values_.ndim == 1 else pooled
