"""The interval methods of :class:`KernelAttentionRegressor`: confidence
intervals of the mean function and jackknife+ / CV+ prediction intervals."""

from sklearn.utils.validation import check_is_fitted

from .._binned._dask import check_holds_rows
from .._inference._conformal import prediction_interval
from .._inference._standard_errors import confidence_interval
from . import _partially_linear_methods as _partially_linear


class IntervalMethods:
    """:meth:`confidence_interval` and :meth:`prediction_interval` of a
    fitted :class:`KernelAttentionRegressor` (the engine's work is in
    :mod:`.._inference._standard_errors` and :mod:`.._inference._conformal`)."""

    def confidence_interval(
        self,
        X,
        *,
        level=0.95,
        method="asymptotic",
        simultaneous=False,
        n_resamples=999,
        random_state=None,
    ):
        """Confidence intervals of the smoothed mean function at the queries.

        The intervals cover ``E[f(q)] = sum_i l_i(q) E[y_i]``, the curve the
        estimator smooths, not the regression function itself: their
        centre carries the smoothing bias, of order ``h**2`` (zero for a
        linear truth with ``degree=1``). To cover the true curve, undersmooth:
        use a bandwidth smaller than the one that minimises the error of the
        fit (such as the one :class:`KernelAttentionRegressorCV` selects),
        so that the bias is small against the standard error.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        level : float, default=0.95
            The confidence level, in (0, 1).

        method : {"asymptotic", "bootstrap"}, default="asymptotic"
            - ``"asymptotic"``: ``y_pred -+ z se`` with ``se`` the standard
              error of :meth:`predict` (``return_se=True``) and ``z`` the
              normal quantile;
            - ``"bootstrap"``: the wild bootstrap of the whole smoother
              (Haerdle and Marron 1991): ``y*_i = f(x_i) + v_i sigma_i``
              with Rademacher multipliers ``v_i = -+1`` (which match the
              first two moments and, in studentised wild bootstraps,
              perform better than Mammen's two-point law: Davidson and
              Flachaire 2008) and ``sigma_i`` the residual standard
              deviations of :meth:`predict`. The refit is linear,
              ``f*(q) = l(q) . y*``, and each resample is studentised
              again with its own residuals ``y* - L y*`` and the same
              variance estimator, ``t* = (f*(q) - l(q) . f(x)) / se*(q)``:
              centred on the bootstrap mean, so that the doubly smoothed
              curve ``l(q) . f(x)`` never enters the interval, which is
              the percentile-t interval ``[y_pred - t*_{(1+level)/2} se,
              y_pred - t*_{(1-level)/2} se]`` (Hall 1992).

        simultaneous : bool, default=False
            Whether to return a band that covers the smoothed curve at all
            the given queries at once, with probability ``level``: the
            sup-t band ``y_pred -+ c se`` with ``c`` the ``level`` quantile
            of ``max_q |t(q)|`` over the queries (Montiel Olea and
            Plagborg-Moller 2019; Neumann and Polzehl 1998 for the wild
            bootstrap of kernel smoothers). Under ``"bootstrap"`` the ``t``
            are the studentised resamples above; under ``"asymptotic"``
            they are draws of the estimated normal law of the fit,
            ``t(q) = l(q) . (sigma g) / se(q)`` with ``g`` standard normal,
            so that the band accounts for the correlation of neighbouring
            queries (unlike a Bonferroni band); it ignores the error of
            ``se`` itself, so it covers less than ``level`` where few keys
            weigh in each window (about 0.88 for 0.95 over 12 queries with
            120 keys uniform on [0, 1], bandwidth 0.12 and ``degree=1``,
            where the re-studentised bootstrap band covers about 0.93:
            ``benchmarks/bench_inference.py``). Each output of a
            multi-output ``y`` gets its own band.

        n_resamples : int, default=999
            The number of bootstrap resamples, or of normal draws for the
            asymptotic simultaneous band; unused by the asymptotic
            pointwise interval. Where it is used, at least
            ``ceil(2 / (1 - level))`` (40 for ``level=0.95``), so that each
            tail beyond the quantiles holds at least one draw: fewer raise a
            ``ValueError``, as their "interval" would be the range of a few
            draws (zero-width for one) rather than a quantile of their law.
            Hundreds are needed for stable bounds.

        random_state : int, RandomState instance or None, default=None
            Seeds the resampling: the same ``random_state`` gives the same
            bounds.

        Returns
        -------
        lower, upper : ndarray of the shape and dtype of ``predict(X)``
            The bounds; NaN where the standard error is NaN
            (``on_empty="nan"``).

        Notes
        -----
        The resampling needs, per block of resamples, a pass of the
        smoother over the training keys (the re-studentising residuals)
        and one over the queries; blocks of resamples, of queries and of
        training rows are sized within ``working_memory``. NumPy input only
        (a ``ValueError`` on the array API path).

        References
        ----------
        .. [1] W. Haerdle and J. S. Marron, "Bootstrap simultaneous error
           bars for nonparametric regression", Annals of Statistics 19
           (1991).
        .. [2] E. Mammen, "Bootstrap and wild bootstrap for high
           dimensional linear models", Annals of Statistics 21 (1993).
        .. [3] P. Hall, "The Bootstrap and Edgeworth Expansion", Springer
           (1992).
        .. [4] M. H. Neumann and J. Polzehl, "Simultaneous bootstrap
           confidence bands in nonparametric regression", Journal of
           Nonparametric Statistics 9 (1998).
        .. [5] J. L. Montiel Olea and M. Plagborg-Moller, "Simultaneous
           confidence bands: theory, implementation, and an application to
           SVARs", Journal of Applied Econometrics 34 (2019).
        .. [6] R. Davidson and E. Flachaire, "The wild bootstrap, tamed at
           last", Journal of Econometrics 146 (2008).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_kernelpool import KernelAttentionRegressor
        >>> rng = np.random.RandomState(0)
        >>> X = rng.uniform(0, 1, (200, 1))
        >>> y = 2 * X[:, 0] + rng.normal(scale=0.1, size=200)
        >>> reg = KernelAttentionRegressor(bandwidth=0.1, degree=1).fit(X, y)
        >>> lower, upper = reg.confidence_interval([[0.5]])
        >>> bool(lower[0] < 1.0 < upper[0])
        True
        >>> lower, upper = reg.confidence_interval(
        ...     [[0.25], [0.5]], method="bootstrap", simultaneous=True,
        ...     random_state=0)
        >>> lower.shape
        (2,)
        """
        options = {
            "level": level,
            "method": method,
            "simultaneous": simultaneous,
            "n_resamples": n_resamples,
            "random_state": random_state,
        }
        if _partially_linear.is_partially_linear(self):
            return _partially_linear.shifted_bounds(
                self, "confidence_interval", X, options
            )
        check_is_fitted(self)
        check_holds_rows(self, "confidence_interval")
        return confidence_interval(self, X, **options)

    def prediction_interval(self, X, *, level=0.9, method="jackknife+", cv=None):
        """Jackknife+, CV+ or conformalized quantile prediction intervals.

        Jackknife+ (Barber, Candes, Ramdas and Tibshirani, 2021) combines the
        fits ``mu_{-i}`` of the model without each training row ``i`` and
        the leave-one-out residuals ``R_i = |y_i - mu_{-i}(x_i)|``: at a
        query ``q`` the lower bound is the ``floor(alpha (n + 1))``-th
        smallest of ``mu_{-i}(q) - R_i`` and the upper bound the
        ``ceil((1 - alpha) (n + 1))``-th smallest of ``mu_{-i}(q) + R_i``,
        with ``alpha = 1 - level`` and ``n`` the number of training rows of
        positive sample weight. A rank below 1 gives ``-inf``, above ``n``
        ``+inf`` (``n`` too small for the level). For exchangeable data the
        interval covers a new observation with probability at least
        ``1 - 2 alpha``; in practice about ``1 - alpha``.

        No model is refitted: ``mu_{-i}(q)`` follows in closed form from the weights of
        the prediction (``(f - p_i y_i) / (1 - p_i)`` for ``degree=0``, the
        case-deletion formula of the local weighted least squares for ``degree=1``, its
        slope then shrunk by the safeguard of the fit without row ``i``, as a refit
        would), so the cost is one pass over the keys per query, and per training row
        for the residuals, with memory within ``working_memory``; the two order
        statistics are selected, not sorted. On a tree, a query's leave-out fits and
        order statistics come from its neighbours (a key of weight zero leaves the fit
        unchanged) and a window of the sorted residuals; other rows are dense over every
        key. At 1e4 queries x 1e4 keys: about 4 times the time of ``predict`` with
        ``degree=0`` (brute force, or a compact kernel on a tree) and 6 to 8 with
        ``degree=1``; twice is the floor, as the residuals take a pass over the training
        rows. Where the formula is undefined (a row holding all the weight of the query,
        a leverage of one, a fallback depending on the row), the fit without the row is
        computed by its definition, with the same widths and ``on_empty`` policy.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        level : float, default=0.9
            The nominal coverage ``1 - alpha``, in (0, 1); read as the
            decimal it prints as (0.9 is 9/10 in the ranks).

        method : {"jackknife+", "cv+", "cqr"}, default="jackknife+"
            ``"jackknife+"``: leave-one-out fits. ``"cv+"``: fits without
            each fold ``S_k`` of ``cv`` and the residual of row ``i`` from
            the fit without its fold, ``mu_{-S_k(i)}`` in place of
            ``mu_{-i}``; for folds of equal size the coverage is at least
            ``1 - 2 alpha - sqrt(2 / n)`` (Theorem 4 of the paper).
            ``cv=n`` is jackknife+. ``"cqr"``: conformalized quantile
            regression (Romano, Patterson and Candes, 2019), whose widths
            follow the local spread of ``y``: the quantiles ``q_lo``,
            ``q_hi`` of :meth:`predict_quantiles` at levels ``(1 - level) /
            2`` and ``(1 + level) / 2``, fitted without some rows, and the
            scores ``E_i = max(q_lo(x_i) - y_i, y_i - q_hi(x_i))`` of those
            rows. With one split (the default), the engine is refitted on
            the training part of the split, ``Q`` is the ``ceil(level (m +
            1))``-th smallest score of the ``m`` calibration rows (infinite
            when above ``m``) and the interval is ``[q_lo(q) - Q, q_hi(q) +
            Q]``: it covers a new observation exchangeable with the rows
            with probability at least ``level`` (at most ``level + 1 / (m +
            1)`` without ties). With folds, as CV+: the engine is refitted
            without each fold, each row scored by the fit without its fold,
            and the bounds are the ranks above of ``q_lo^{-k(i)}(q) - E_i``
            and ``q_hi^{-k(i)}(q) + E_i``, at least ``1 - 2 alpha -
            sqrt(2 / n)``, in practice about ``level``. Needs ``degree=0``
            (the weights of the quantiles); adaptive widths are refitted
            with the same ``n_neighbors``, which must not exceed the rows of
            a refit (the error names the usable ``n_neighbors`` and ``cv``).
            Where the calibrated correction is negative (quantiles wider
            than needed), the bounds can cross (``lower > upper``): the
            empty set, as CQR defines it. The guarantee holds for widths
            chosen without the calibration rows: a rule of thumb, or a
            bandwidth selected on all the rows, uses them a little.

        cv : int or cross-validation splitter, default=None
            The folds of ``"cv+"`` over the training rows of positive sample
            weight, in their order: an int ``K`` in ``[2, n]`` for
            :class:`~sklearn.model_selection.KFold` without shuffling
            (contiguous folds; pass ``KFold(K, shuffle=True,
            random_state=...)`` for random ones), or a splitter whose test
            sets partition the rows. None means 5. Must be None for
            ``"jackknife+"``. For ``"cqr"``: None, a splitter with one split
            (its test rows calibrate, the others fit), an int ``K`` or a
            splitter of several folds (cross-fitted as ``"cv+"``). None is
            the fixed split ``ShuffleSplit(n_splits=1, test_size=0.5,
            random_state=0)`` of the rows of positive sample weight: a
            random half calibrates, the same on every call; pass a
            ``ShuffleSplit`` of another ``random_state`` for another.

        Returns
        -------
        lower : ndarray of the shape and dtype of ``predict(X)``
            The lower bounds, per output.
        upper : ndarray of the shape and dtype of ``predict(X)``
            The upper bounds, per output.

        Notes
        -----
        The fits without a row keep the fitted widths ``bandwidth_`` (a rule
        of thumb is not recomputed) and ``categorical_bandwidth_``. Rows of
        sample weight zero are not part of the model: they are neither
        left out nor counted in ``n`` (the guarantee is for data
        exchangeable with the rows of positive weight); each row of positive
        weight is one observation, whatever its weight. For jackknife+ and
        CV+, adaptive widths (``n_neighbors``) depend on the other keys and
        are refused. A robust fit (``robust_iterations``) is refused. Under
        ``on_empty="raise"`` a fit without a row that leaves a query (or a
        training row) with no key raises a ``ValueError``.

        References
        ----------
        .. [1] R. F. Barber, E. J. Candes, A. Ramdas and R. J. Tibshirani,
           "Predictive inference with the jackknife+", Annals of Statistics
           49 (2021).
        .. [2] Y. Romano, E. Patterson and E. J. Candes, "Conformalized
           quantile regression", NeurIPS 32 (2019).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_kernelpool import KernelAttentionRegressor
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(0, 1, (200, 1))
        >>> y = 2 * X[:, 0] + rng.normal(0, 0.1, 200)
        >>> reg = KernelAttentionRegressor(bandwidth=0.1, degree=1).fit(X, y)
        >>> lower, upper = reg.prediction_interval([[0.5]], level=0.9)
        >>> bool(lower[0] < 1.0 < upper[0])
        True

        Conformalized quantiles, on noise that grows with ``x``: the
        interval is wider where the noise is larger.

        >>> y = X[:, 0] + rng.normal(0, 0.05 + 0.5 * X[:, 0], 200)
        >>> reg = KernelAttentionRegressor(bandwidth=0.1).fit(X, y)
        >>> lower, upper = reg.prediction_interval(
        ...     [[0.1], [0.9]], level=0.8, method="cqr")
        >>> (upper - lower).round(2)
        array([0.29, 1.04])
        """
        if _partially_linear.is_partially_linear(self):
            options = {"level": level, "method": method, "cv": cv}
            return _partially_linear.shifted_bounds(
                self, "prediction_interval", X, options
            )
        check_is_fitted(self)
        check_holds_rows(self, "prediction_interval")
        refuse_robust_intervals(self)
        self._check_numpy_queries(X, "prediction_interval")
        lower, upper = prediction_interval(self, X, level, method, cv)
        # The bounds in the dtype of the predictions, as every other answer.
        dtype = self._pool.dtype
        return (
            self._shape_like_y(lower.astype(dtype, copy=False)),
            self._shape_like_y(upper.astype(dtype, copy=False)),
        )


def refuse_robust_intervals(estimator):
    """Refuse the prediction intervals of a robust fit: its robustness
    weights come from every row's residual, the calibration rows' included,
    and give the outliers no weight, so that no interval built on its fit
    covers as it claims."""
    if getattr(estimator, "robustness_weights_", None) is not None:
        raise ValueError(
            "prediction_interval does not take a robust fit (robust_iterations="
            f"{estimator.robust_iterations}): its robustness weights come from "
            "the residuals of every row, those held out for the calibration "
            "included, and drop the outliers that new observations will also "
            "have, so the intervals would not cover. Fit with "
            "robust_iterations=0 for prediction intervals."
        )
