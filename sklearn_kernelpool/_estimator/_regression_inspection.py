"""The inspection methods of :class:`KernelAttentionRegressor`: gradients of
the fit and the smoother's diagnostics (its attention weights are in
:mod:`._pool_estimator`, shared with the classifier)."""

from sklearn.utils.validation import check_is_fitted

from .._binned._dask import check_holds_rows
from .._inference import _gradient
from .._inference._diagnostics import smoother_diagnostics
from . import _partially_linear_methods as _partially_linear
from ._base import check_flag


class InspectionMethods:
    """:meth:`predict_gradient` and :meth:`smoother_diagnostics` of a fitted
    :class:`KernelAttentionRegressor`."""

    def predict_gradient(self, X, return_se=False):
        """The gradient of the fitted function at each query (marginal effects).

        Both fits are linear in the training values, and so is their gradient:
        ``grad f(q) = sum_i G_i(q) y_i``. With ``z = x / h`` the coordinates
        divided by the bandwidth, ``D_i = z_q - z_i``, ``p_i`` the normalised
        attention weights of the query and ``s_i = ||D_i||**2`` the squared
        scaled distance:

        - ``degree=0``: the analytic derivative of the pooled ratio
          ``f = sum_i a_i y_i / sum_i a_i``, namely
          ``grad f = sum_i p_i v_i (y_i - f)`` with
          ``v_i = grad log a_i = phi(s_i) D_i / h`` and
          ``phi(s) = alpha'(u) / (u alpha(u))`` at ``u = sqrt(s)``; so
          ``G_i = p_i (v_i - sum_j p_j v_j)``.
        - ``degree=1``: the slope ``beta`` of the local-linear fit at the
          query, in the units of ``y`` per unit of each feature: the slope
          rows of ``(Z^T P Z)^+ Z^T P`` for the local design
          ``Z = [1, x_i - q]`` and ``P = diag(p)``, with the minimum-norm
          solution where the keys do not determine every direction (see
          ``degree``). This is the local slope estimator of Fan and Gijbels,
          "Local Polynomial Modelling and Its Applications" (1996), and the
          marginal effect of statsmodels' ``KernelReg(reg_type="ll")``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        return_se : bool, default=False
            Whether to return the standard errors of the gradient too:
            ``se(q)**2 = sum_i G_i(q)**2 sigma_i**2`` per feature, with the
            heteroscedasticity-consistent residual variances ``sigma_i**2``
            of the standard errors of ``predict`` (the same sandwich form).
            They are conditional on the training ``X`` and measure the noise
            only: the gradient estimates the derivative of the smoothed
            curve, and the smoothing bias (small for ``degree=1``, which is
            exact on linear functions; larger for ``degree=0``, above all
            near the boundary of the data) is not in them.

        Returns
        -------
        gradient : ndarray of shape (n_queries, n_features) or \
                (n_queries, n_features, n_outputs)
            The partial derivatives of the prediction with respect to each
            feature, in the dtype of the training ``X``; the last axis per
            output of a multi-output ``y``.

        se : ndarray of the shape of ``gradient``
            Only with ``return_se=True``: their standard errors.

        Raises
        ------
        ValueError
            For ``degree=0`` with a callable kernel (no derivative of it is
            known: use ``degree=1``, which needs none), and for an
            estimator fitted on arrays of another array API namespace.

        Notes
        -----
        Kernels without a derivative everywhere:

        - ``"exponential"`` and ``"epanechikov"`` (``max(1 - |u|, 0)``)
          have a kink at ``u = 0``: a key at the query contributes the
          symmetric subgradient, 0;
        - ``"boxcar"`` jumps at the edge of its support, and ``"constant"``
          does not depend on the query: their derivative is 0 almost
          everywhere and the jumps are Dirac terms that no finite number
          represents, so ``degree=0`` returns 0 for them: the derivative of
          ``predict`` wherever no key crosses the edge;
        - the compact kernels are not differentiable at the edge of their
          support (``epanechikov`` jumps there in slope): a key exactly on
          the edge contributes nothing.

        With adaptive widths (``n_neighbors``) the width of a query is held
        fixed at its value ``bandwidth * d_k(q)``: the result is the
        derivative of the pooled ratio for that width (``degree=0``), not
        of ``predict``, whose width moves with the query; a query whose
        ``k``-th neighbour is at distance zero gets 0 with ``degree=0``.
        The local-linear slope (``degree=1``) is the same for either view.

        A query with no key of positive weight gets the derivative of its
        ``on_empty`` fallback: 0 for ``"nearest"`` and ``"mean"`` (locally
        constant), NaN for ``"nan"``; ``"raise"`` raises as in ``predict``.
        A local-linear query whose keys determine no direction gets the
        slope 0. Categorical features have no derivative: their columns are
        NaN, gradient and standard error alike.

        statsmodels' ``KernelReg(reg_type="ll").fit`` returns the same
        local-linear marginal effects (its second value) for the gaussian
        kernel and the same bandwidth. Its local-constant marginal effects
        (``reg_type="lc"``, statsmodels 0.15) are not the derivative of its
        own local-constant fit (off by a constant factor with one feature,
        by varying ones with more), so they are no reference for
        ``degree=0``.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_kernelpool import KernelAttentionRegressor
        >>> X = np.linspace(0, 1, 21)[:, None]
        >>> reg = KernelAttentionRegressor(bandwidth=0.2, degree=1)
        >>> reg.fit(X, 3.0 * X[:, 0] - 1.0).predict_gradient([[0.0], [0.5]])
        array([[3.],
               [3.]])
        """
        if _partially_linear.is_partially_linear(self):
            return _partially_linear.predict_gradient(self, X, return_se)
        check_is_fitted(self)
        check_holds_rows(self, "predict_gradient")
        check_flag("return_se", return_se)
        self._check_numpy_queries(X, "predict_gradient")
        gradient, se = _gradient.predict_gradient(self, X, return_se)
        if self.values_.ndim == 1:
            gradient = gradient[..., 0]
            se = None if se is None else se[..., 0]
        return (gradient, se) if return_se else gradient

    def smoother_diagnostics(self):
        """Effective degrees of freedom, GCV and AICc of the fit on its data.

        The fitted estimator is a linear smoother of its training values: its
        in-sample fit is ``L y``, row ``i`` of ``L`` the attention weights of
        training key ``i`` as a query (:meth:`attention_weights`; the
        equivalent-kernel weights for ``degree=1``, the adaptive widths of
        ``n_neighbors`` at the key itself). Computed here on the stored
        training data, in one pass over the pairs of keys within
        ``working_memory``; ``fit`` only stores the data.

        Returns
        -------
        diagnostics : :class:`~sklearn.utils.Bunch`
            With ``n`` the training rows of positive weight, ``w`` the
            sample weights (1 without) and ``e = y - L y``:

            - ``effective_df``: the trace of ``L``, ``sum_i L_ii``, each
              row's own normalised weight in its own fit (``w_i alpha(0) /
              sum_j w_j alpha(u_ij)`` for ``degree=0``); rows of weight zero
              have ``L_ii = 0``.
            - ``self_weight``: ndarray of shape (n_samples,), the ``L_ii``.
            - ``fitted``: the in-sample fit ``L y``, shaped like ``y``; NaN
              on rows of weight zero, which are no observation (their own
              fit is not computed).
            - ``n_observations``: ``n``.
            - ``sigma2``: the residual mean square
              ``sum_i w_i e_i**2 / sum_i w_i`` (averaged over the outputs).
            - ``rss``: ``n * sigma2``, the residual sum of squares without
              weights.
            - ``gcv``: generalised cross-validation [1]_,
              ``sigma2 / (1 - tr / n)**2``, that is ``n RSS / (n - tr)**2``;
              ``+inf`` where ``tr > n - 1`` (less than one residual degree
              of freedom, where both the residuals and ``n - tr`` are
              rounding error).
            - ``aicc``: the corrected AIC of [2]_ (R np's
              ``bwmethod="cv.aic"``), ``log(sigma2) + (1 + tr / n) / (1 -
              (tr + 2) / n)``; ``+inf`` where ``tr + 2 >= n``.
            - ``shrunk_fraction``: for ``degree=1``, the fraction of the
              ``n`` in-sample fits whose local slope was shrunk towards the
              local mean (the training key of high leverage in its local
              fit; see
              :class:`~sklearn_kernelpool.LocalLinearFallbackWarning`); 0
              for ``degree=0``.

            With integer weights, weight 2 gives the same ``L_ii`` sum,
            fit and ``sigma2`` as a duplicated row, but ``n`` counts rows:
            the weights are relative, and scaling them changes nothing.

        References
        ----------
        .. [1] P. Craven and G. Wahba, "Smoothing noisy data with spline
           functions", Numerische Mathematik 31 (1979).
        .. [2] C. M. Hurvich, J. S. Simonoff and C.-L. Tsai, "Smoothing
           parameter selection in nonparametric regression using an improved
           Akaike information criterion", Journal of the Royal Statistical
           Society B 60 (1998).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_kernelpool import KernelAttentionRegressor
        >>> X = np.linspace(0, 1, 50)[:, None]
        >>> y = np.sin(6 * X[:, 0])
        >>> smooth = KernelAttentionRegressor(bandwidth=0.5).fit(X, y)
        >>> rough = KernelAttentionRegressor(bandwidth=0.02).fit(X, y)
        >>> smooth.smoother_diagnostics().effective_df < 3
        True
        >>> rough.smoother_diagnostics().effective_df > 20
        True
        """
        if _partially_linear.is_partially_linear(self):
            _partially_linear.refuse_smoother_diagnostics(self)
        check_is_fitted(self)
        check_holds_rows(self, "smoother_diagnostics")
        return smoother_diagnostics(self)
