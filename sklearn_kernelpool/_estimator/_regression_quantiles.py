"""The conditional quantiles and distribution functions of
:class:`KernelAttentionRegressor` and :class:`KernelAttentionQuantileRegressor`
(the engine's work is in :mod:`.._inference._quantiles`)."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._binned._dask import check_holds_rows
from .._inference import _quantiles
from . import _partially_linear_methods as _partially_linear


class QuantileMethods:
    """:meth:`predict_quantiles` and :meth:`predict_cdf` of a fitted
    estimator whose engine is ``_pool`` and values ``values_``."""

    def predict_quantiles(self, X, quantiles=(0.1, 0.5, 0.9)):
        """Conditional quantiles of ``y``: quantiles of the attention-weighted
        distribution of the training values.

        The normalised attention weights ``p_i(q)`` of a query define the
        distribution ``F(y | q) = sum_i p_i(q) 1{y_i <= y}`` (see
        :meth:`predict_cdf`), and its quantile at level ``tau`` is the
        smallest training value where it reaches ``tau``::

            Q(tau | q) = min {y_i : F(y_i | q) >= tau - t}

        for ``0 < tau < 1``, with the tolerance ``t = 64 (eps + n eps_64)``
        for the rounding of the cumulative weights (``eps`` the machine
        epsilon of the dtype of the fit, ``eps_64`` that of float64, ``n``
        the number of training rows): where the weights reach ``tau``
        exactly, the lower value is taken (two keys of weight 1/2 give the
        lower at ``tau=0.5``); a value whose cumulative weight falls short
        of ``tau`` by at most ``t`` counts as reaching it. The ends take no
        tolerance: level 0 gives the smallest training value of positive
        weight, level 1 the largest, however small its weight, so that the
        quantiles at 0 and 1 of ``-y`` are exactly those at 1 and 0 of
        ``y``, negated (and those at ``1 - tau`` and ``tau`` too, away from
        a jump of ``F``). This is the estimator of quantile regression
        forests (Meinshausen, 2006) with kernel weights in place of the
        forest's; with sample weights, the weighted quantiles (an integer
        weight is a repeated row). Every quantile is a training value, and
        the quantiles are non-decreasing in ``tau``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        quantiles : float or array-like of shape (n_levels,), \
                default=(0.1, 0.5, 0.9)
            The levels ``tau``, in [0, 1]; strings and booleans are refused.

        Returns
        -------
        y_quantiles : ndarray of shape (n_queries, n_levels) or \
                (n_queries, n_levels, n_outputs)
            The quantiles per query and level, and per output of a
            multi-output ``y``, in the dtype of the predictions; without the
            axis of the levels for a float ``quantiles``. A query with no key
            in its neighbourhood gets the quantiles of its ``on_empty``
            weights: of its nearest keys, of every key, NaN under
            ``on_empty="nan"``.

        Raises
        ------
        ValueError
            For ``degree=1``: the equivalent-kernel weights of the
            local-linear fit can be negative, so their cumulative sum is no
            distribution; use ``degree=0``. For an estimator fitted on
            arrays of another array API namespace. For levels out of [0, 1],
            none, strings or booleans.

        Notes
        -----
        The keys are sorted by their values once per output, on first use;
        per chunk of queries (within ``working_memory``) the weights are
        taken in that order, summed cumulatively and searched per level:
        about the cost of :meth:`predict` plus a pass over the weights. The
        weights are those of :meth:`attention_weights`, on every
        ``algorithm`` (``"binned"`` through its exact engine). With
        ``linear_features``, the quantiles of the kernel part shifted by the
        linear part.

        References
        ----------
        .. [1] N. Meinshausen, "Quantile regression forests", Journal of
           Machine Learning Research 7 (2006).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_kernelpool import KernelAttentionRegressor
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> y = np.array([0.0, 1.0, 4.0, 9.0])
        >>> reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=1.5)
        >>> reg.fit(X, y).attention_weights([[1.5]])
        array([[0. , 0.5, 0.5, 0. ]])
        >>> reg.predict_quantiles([[1.5]], quantiles=[0.25, 0.5, 0.75])
        array([[1., 1., 4.]])
        """
        levels, scalar = _quantiles.check_levels(quantiles)
        if _partially_linear.is_partially_linear(self):
            check_is_fitted(self)
            linear, X_kernel = _partially_linear._linear_parts(self, X)
            kernel = self.kernel_regressor_
            check_holds_rows(kernel, "predict_quantiles")
            out = _quantiles.predict_quantiles(kernel, X_kernel, levels)
            out = (out + linear[:, None, :]).astype(out.dtype, copy=False)
        else:
            check_is_fitted(self)
            check_holds_rows(self, "predict_quantiles")
            self._check_numpy_queries(X, "predict_quantiles")
            out = _quantiles.predict_quantiles(self, X, levels)
        if scalar:
            out = out[:, 0]
        return out if np.ndim(self._y_values()) > 1 else out[..., 0]

    def predict_cdf(self, X, y_values):
        """The conditional distribution function of ``y`` at given values.

        ``F(y | q) = sum_i p_i(q) 1{y_i <= y}``: the attention-weighted
        empirical distribution function of the training values, with
        ``p_i(q)`` the normalised attention weights of the query (those of
        :meth:`attention_weights`, sample weights included), of which
        :meth:`predict_quantiles` gives the quantiles. A step function, right
        continuous, from 0 below the smallest value of positive weight to 1
        (exactly: the cumulative weights are divided by their total) from
        the largest on (Meinshausen, 2006).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        y_values : array-like of shape (n_values,) or (n_values, n_outputs)
            The values ``y`` at which ``F`` is evaluated, at least one: the
            same for every output, or one column per output. Infinite values
            are allowed; NaN and strings are not.

        Returns
        -------
        cdf : ndarray of shape (n_queries, n_values) or \
                (n_queries, n_values, n_outputs)
            ``F(y | q)`` per query and value, and per output of a
            multi-output ``y``, float64. NaN for a query without keys under
            ``on_empty="nan"``.

        Raises
        ------
        ValueError
            For ``degree=1``, whose equivalent-kernel weights can be
            negative (see :meth:`predict_quantiles`), and for ``y_values``
            empty, with NaN or strings, or of another number of outputs.

        Notes
        -----
        The keys are sorted by their values once per output; per chunk of
        queries the cumulative sum of their weights in that order is read at
        the place of each value in the sorted values. With
        ``linear_features``, ``F(y - z . coef_ - intercept_ | x)`` of the
        kernel part.

        References
        ----------
        .. [1] N. Meinshausen, "Quantile regression forests", Journal of
           Machine Learning Research 7 (2006).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_kernelpool import KernelAttentionRegressor
        >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
        >>> y = np.array([0.0, 1.0, 4.0, 9.0])
        >>> reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=1.5)
        >>> reg.fit(X, y).predict_cdf([[1.5]], [0.5, 1.0, 3.0, 4.0])
        array([[0. , 0.5, 0.5, 1. ]])
        """
        if _partially_linear.is_partially_linear(self):
            check_is_fitted(self)
            linear, X_kernel = _partially_linear._linear_parts(self, X)
            kernel = self.kernel_regressor_
            check_holds_rows(kernel, "predict_cdf")
            values = _quantiles.check_thresholds(y_values, linear.shape[1])
            out = _quantiles.predict_cdf(kernel, X_kernel, values, shift=linear)
        else:
            check_is_fitted(self)
            check_holds_rows(self, "predict_cdf")
            self._check_numpy_queries(X, "predict_cdf")
            n_outputs = self._pool.n_outputs
            values = _quantiles.check_thresholds(y_values, n_outputs)
            out = _quantiles.predict_cdf(self, X, values)
        return out if np.ndim(self._y_values()) > 1 else out[..., 0]

    def _y_values(self):
        """The training values, as ``y`` was (those of the kernel part of a
        partially linear fit have its shape too)."""
        if _partially_linear.is_partially_linear(self):
            return self.kernel_regressor_.values_
        return self.values_
