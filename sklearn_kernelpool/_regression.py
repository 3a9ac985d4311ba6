"""KernelAttentionRegressor: Nadaraya-Watson attention pooling."""

from numbers import Integral

from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _gradient
from ._base import (
    POOL_PARAMETER_CONSTRAINTS,
    check_flag,
    fit_pool,
    pooled_attention_weights,
    validate_fit_data,
    validate_queries,
)
from ._binned_dask import check_holds_rows, fit_dask, is_dask_array, predict_dask
from ._categorical import CATEGORICAL_CONSTRAINTS, check_no_categorical
from ._conformal import prediction_interval
from ._diagnostics import smoother_diagnostics
from ._inference import check_numpy_estimator, confidence_interval, standard_error
from ._persistence import (
    check_loaded_estimator,
    check_picklable_kernel,
    deepcopy_estimator,
)
from ._pooling import ON_EMPTY
from ._sparse import DENSE_ONLY
from ._xp_fit import (
    array_api_namespace,
    check_same_namespace,
    fit_array_api,
    validate_array_api_queries,
)
from ._xp_pool import is_array_api_pool


class KernelAttentionRegressor(RegressorMixin, BaseEstimator):
    """Attention pooling by similarity (Nadaraya-Watson kernel regression).

    ``fit`` stores the training keys ``X`` and values ``y``. ``predict``
    pools the values with attention weights given by a kernel of the scaled
    distance between the query and each key::

        f(q) = sum_i w_i alpha(u_i) y_i / sum_i w_i alpha(u_i)

    with ``u_i = ||q - k_i|| / h`` for an isotropic bandwidth ``h`` and
    ``u_i = ||(q - k_i) / h||`` for per-feature bandwidths, and ``w_i`` the
    sample weights. Every prediction is a convex combination of the values.
    With ``degree=1`` the prediction is instead the intercept of a linear
    model fitted around the query by weighted least squares with these
    weights (local-linear regression), which removes the bias of pooling at
    the boundary of the data.

    Read more in the :doc:`User Guide </user_guide>`.

    Parameters
    ----------
    kernel : str or callable, default="gaussian"
        The attention kernel ``alpha``: one of the names of
        :data:`sklearn_kernelpool.kernels.KERNELS` (``"gaussian"``,
        ``"boxcar"``, ``"constant"``, ``"epanechikov"``, ``"epanechnikov"``,
        ``"biweight"``, ``"triweight"``, ``"tricube"``, ``"cosine"``,
        ``"exponential"``, ``"cauchy"`` and their aliases), or a callable
        mapping an ndarray of scaled distances >= 0 to weights >= 0 of the
        same shape. A callable is treated as having unbounded support; output
        that is negative, not finite or wrongly shaped raises a
        ``ValueError``.

    bandwidth : float, array-like of shape (n_features,), or \
            {"scott", "silverman"}, default=1.0
        The width ``h`` of the kernel: the standard deviation for the
        gaussian and the support radius for compact kernels.

        - a float > 0: one isotropic width (the estimator is then rotation
          invariant);
        - an array-like of floats > 0: one width per feature, which trades
          rotation invariance for anisotropy;
        - ``"scott"`` or ``"silverman"``: per-feature rules of thumb computed
          in ``fit``. With ``n`` the sum of the sample weights, ``d`` the
          number of features and ``sigma_j`` the weighted standard deviation
          of feature ``j`` (1.0 for a constant feature), Scott's rule is
          ``h_j = sigma_j * n ** (-1 / (d + 4))`` and Silverman's is
          ``h_j = sigma_j * (4 / ((d + 2) * n)) ** (1 / (d + 4))``.

    degree : {0, 1}, default=0
        The degree of the local polynomial:

        - ``0``: pool the values (Nadaraya-Watson, local-constant);
        - ``1``: fit ``y ~ b + beta . (k - q)`` around each query ``q`` by
          least squares weighted with the attention weights and predict
          ``b`` (local-linear). It is exact for linear functions and has no
          first-order bias at the boundary. Where the weighted keys do not
          determine every direction (collinear features such as a full
          one-hot encoding, or fewer than ``n_features + 1`` keys in general
          position), the slope is the minimum-norm (Moore-Penrose) solution:
          along the directions the keys determine, none along the others. A
          query whose keys determine no direction at all (its weight on one
          key, or on keys at one point) gets the ``degree=0`` prediction and
          is counted in a
          :class:`~sklearn_kernelpool.LocalLinearFallbackWarning`. Memory
          stays within ``working_memory`` whatever the number of features:
          see :class:`~sklearn_kernelpool.LocalLinearMemoryWarning`.

    on_empty : {"nearest", "mean", "nan", "raise"}, default="nearest"
        What a query gets when no training key of positive weight has a
        positive kernel weight (only possible for compact kernels, or a
        callable kernel that returns zeros):

        - ``"nearest"``: the value of the nearest such key; keys tied at the
          smallest distance are averaged with their sample weights;
        - ``"mean"``: the weighted mean of the training values;
        - ``"nan"``: NaN;
        - ``"raise"``: a ``ValueError`` counting the empty queries.

        Under the first three a call warns once with an
        :class:`~sklearn_kernelpool.EmptyNeighborhoodWarning`, whose
        ``n_empty`` attribute counts the queries that fell back.

    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, default="auto"
        How the weights are computed:

        - ``"brute"``: distances to every key by BLAS, in chunks of queries
          bounded by scikit-learn's ``working_memory``;
        - ``"kd_tree"``, ``"ball_tree"``: a radius query in a tree of the
          keys built in ``fit``, for kernels of compact support only (a
          ``ValueError`` otherwise); with one feature the k-d tree is the
          sorted array of the keys, searched by bisection;
        - ``"auto"``: brute force for kernels of unbounded support; for
          compact kernels the k-d tree when ``fit`` estimates that a query's
          support holds a small enough fraction of the keys for the number
          of features (the rule is measured in ``benchmarks/`` and given in
          the user guide), brute force otherwise, and always for SciPy
          sparse ``X`` (which the trees refuse). With one or two continuous
          features, at least 100000 keys and a width the default grid
          resolves with at least 16 nodes, ``"binned"``.
        - ``"binned"``: for one or two continuous features, the kernel sums
          are computed on a regular grid by linear binning and one FFT
          convolution, then interpolated linearly to the queries (R's
          KernSmooth; see the user guide's page on the binned path): a time
          nearly independent of the number of keys and of the width, at a
          small binning error controlled by ``n_bins``. Queries the grid
          leaves undecided, and the methods that need each key's attention
          weight (``attention_weights``, standard errors, intervals,
          gradients, diagnostics), use the exact engine, built on first use
          from the training rows. Refused for more than two features, user
          kernel callables, categorical features, ``n_neighbors``, sparse
          and non-NumPy arrays.

        The choice is the fitted ``algorithm_``. Every path gives the same
        predictions up to rounding.

    n_jobs : int, default=None
        Number of threads over chunks of queries in ``predict`` and
        ``attention_weights``. ``None`` runs as many threads as BLAS would
        use (all the cores, unless limited by threadpoolctl or by a variable
        such as ``OMP_NUM_THREADS``, as in a joblib worker), or the
        ``n_jobs`` of an enclosing :func:`joblib.parallel_config` if that is
        more; ``-1`` means all processors. While they run, BLAS runs one
        thread: the engine's products are small blocks, on which BLAS threads
        cost more than they save. The threads share ``working_memory``. The
        predictions do not depend on it.

    categorical_features : array-like of {bool, int, str} or "from_dtype", \
            default=None
        The unordered categorical features, as in
        :class:`~sklearn.ensemble.HistGradientBoostingRegressor`:

        - None: no feature is categorical;
        - ``"from_dtype"``: the columns of a pandas DataFrame of dtype
          category, object or string (no feature for other input);
        - an array-like of int: the indices of the categorical features;
        - an array-like of bool of shape (n_features,): a mask;
        - an array-like of str: feature names (``X`` must have string
          column names, as a DataFrame has).

        A categorical feature's values may be any hashable values (strings,
        numbers, the values of a pandas categorical); its categories are
        learned in ``fit`` (``categories_``), and a missing value (None,
        NaN) in it raises a ``ValueError``. It enters the attention weight
        through the unordered kernel of Li and Racine (see
        ``categorical_bandwidth``), never through ``bandwidth``, and gets no
        slope under ``degree=1``. A category not seen in ``fit`` differs
        from every key. ``bandwidth`` (a per-feature array, the rules of
        thumb with ``d`` the number of continuous features) applies to the
        other, continuous, features; without any, it is unused.
        Strings in continuous features are refused.

    categorical_bandwidth : float or array-like of shape \
            (n_categorical_features,), default=0.1
        The weight ``lambda_j`` in [0, 1] of a key whose category differs
        from the query's, per categorical feature (one float for all); the
        attention weight of key ``i`` is::

            w_i * alpha(||(q_c - k_c) / h||) * prod_j lambda_j ** [q_j != k_j]

        with ``q_c``, ``k_c`` the continuous features (Aitchison and Aitken's
        unordered kernel in the form of Li and Racine, Nonparametric
        Econometrics, 2007). 1 ignores the feature; 0 pools only keys of the
        query's category, which can leave a query with no key of positive
        weight: it then gets ``on_empty``, where "nearest" is the nearest key
        in the continuous features, whatever its categories. The default
        prefers the query's category strongly while still borrowing from
        the others; :class:`KernelAttentionRegressorCV` selects it. Unused
        without categorical features.
    n_neighbors : int, default=None
        Adaptive (nearest-neighbour) widths. ``None`` uses the fixed
        ``bandwidth``. An int ``k >= 1`` gives each query ``q`` its own
        width ``bandwidth * d_k(q)``, where ``d_k(q)`` is the distance from
        ``q`` to its ``k``-th nearest training key: wide where the keys are
        sparse, narrow where they are dense (the nearest-neighbour bandwidth
        of LOESS and locfit). ``bandwidth`` is then a multiplier of that
        distance (the default 1.0 puts the ``k``-th neighbour at scaled
        distance 1, on the edge of the support of the compact kernels). With
        per-feature bandwidths the distance is measured in the coordinates
        divided by ``bandwidth / g``, ``g`` the geometric mean of the
        bandwidths: their ratios set the shape of the metric, ``g`` the
        multiplier. Every training row of positive sample weight counts as
        one neighbour whatever its weight, as in
        :class:`~sklearn.neighbors.KNeighborsRegressor` (so an integer
        weight is not a duplicated row here), and rows of weight zero count
        as none; ``fit`` raises a ``ValueError`` when ``k`` exceeds the
        number of rows of positive weight. A query whose ``k``-th neighbour
        is at distance zero gets the limit of a vanishing width: the keys at
        distance zero from it, averaged with their sample weights, whatever
        the kernel.
    n_bins : int, array-like of int or None, default=None
        Grid nodes per feature of ``algorithm="binned"`` (also when
        ``"auto"`` picks it): one int for every feature, or one per feature,
        each at least 2. ``None`` puts 40 nodes per bandwidth over the
        span of the keys plus the kernel's support (at least 64 nodes per
        axis, and at most 131072 in one dimension, 1024 in two), which
        keeps the binning error below 1e-3
        of the scale of ``y`` on smooth data for widths of at least 1/25 of
        each feature's range, with the smooth kernels (the boxcar kernel,
        discontinuous, errs by about the node spacing over the width). The
        error falls as the square of the spacing. Unused on the other paths.

    Attributes
    ----------
    keys_ : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The training keys; sparse keys stay sparse here (CSR or CSC). With
        categorical features, the continuous features followed by the codes
        of the categories (indices into ``categories_``).

    values_ : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        The training values, as validated from ``y``.

    sample_weight_ : ndarray of shape (n_samples,) or None
        The sample weights, or None when ``fit`` was called without them.

    bandwidth_ : float or ndarray of shape (n_features,)
        The bandwidth used: a float when isotropic, an ndarray for
        per-feature bandwidths and the rules of thumb.

    algorithm_ : str
        The algorithm chosen in ``fit``.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when ``X`` has
        feature names that are all strings.

    is_categorical_ : ndarray of bool of shape (n_features,) or None
        Which features are categorical; None when none is.

    categories_ : list of ndarray
        The categories of each categorical feature, sorted, in the order of
        the features; empty without categorical features.

    categorical_bandwidth_ : ndarray of shape (n_categorical_features,)
        The ``lambda_j`` used. Only with categorical features.

    See Also
    --------
    sklearn.neighbors.KNeighborsRegressor : Averages the k nearest values.
    sklearn.neighbors.RadiusNeighborsRegressor : Averages the values within
        a radius; the boxcar kernel with uniform weights.
    sklearn.kernel_ridge.KernelRidge : Kernel ridge regression.

    Notes
    -----
    Kernels with a log form (gaussian, exponential, cauchy) are pooled as a
    softmax of the log weights, so that no query gets 0/0: a query far from
    every key gets the value of the nearest key. Brute-force distances are
    computed on keys and queries centred on the mean of the keys, so that a
    large common offset does not cost precision; the trees subtract exactly.

    Prediction works in chunks of queries: the memory it needs beyond its
    inputs and output is bounded by ``working_memory`` (see
    :func:`sklearn.config_context`), or by one block of rows of the brute
    path (1 MiB of scores per thread) if that is larger, and does not grow
    with the number of queries. The predictions are the
    same to the last bit for every ``working_memory`` and ``n_jobs``.

    An integer sample weight ``k`` is equivalent to ``k`` copies of the row
    (except under ``n_neighbors``, where a row counts as one neighbour), and
    rows of weight zero never influence a prediction.

    Predictions have the floating dtype of the training ``X`` (float32 stays
    float32).

    The local-linear fit (``degree=1``) is computed from kernel-weighted
    moments of the keys and values, gathered by the same chunked products
    as the pooling, then one small ``(n_features, n_features)`` symmetric
    eigenproblem per query, solved in batch. With the gaussian kernel it
    equals statsmodels' ``KernelReg(reg_type="ll")``.

    ``predict(X, return_std=True)`` estimates the conditional standard
    deviation of ``y`` around the prediction (the local spread of the
    values), not the standard error of the prediction, which is
    ``predict(X, return_se=True)``; :meth:`confidence_interval` gives
    intervals and bands of the fitted mean function from it.

    With ``sklearn.config_context(array_api_dispatch=True)`` (and
    ``SCIPY_ARRAY_API=1``), arrays of other array API namespaces, such as
    PyTorch tensors or CuPy arrays, are pooled by brute force with the
    operations of their namespace, on their device, and the predictions and
    fitted arrays are of that namespace and device: every named kernel,
    sample weights, multi-output ``y``, the ``on_empty`` policies,
    ``return_std`` and dense ``attention_weights``. The trees, ``degree=1``,
    callable kernels and ``sparse=True`` work on NumPy arrays only and raise
    a ``ValueError`` for other arrays; ``algorithm="auto"`` is then brute
    force. So do ``return_se`` and :meth:`confidence_interval`. See the
    user guide, "GPU and other arrays".

    References
    ----------
    .. [1] E. A. Nadaraya, "On estimating regression", Theory of Probability
       and its Applications 9 (1964).
    .. [2] G. S. Watson, "Smooth regression analysis", Sankhya A 26 (1964).
    .. [3] A. Zhang, Z. C. Lipton, M. Li and A. J. Smola, "Dive into Deep
       Learning", chapter "Attention Pooling by Similarity".

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> y = np.array([0.0, 1.0, 4.0, 9.0])
    >>> reg = KernelAttentionRegressor(kernel="epanechikov", bandwidth=1.5)
    >>> reg.fit(X, y).predict([[1.5]])
    array([2.5])
    >>> mean, std = reg.predict([[1.5]], return_std=True)
    >>> std
    array([1.5])
    >>> reg.attention_weights([[1.5]])
    array([[0. , 0.5, 0.5, 0. ]])
    >>> reg.set_params(degree=1).fit(X, y).predict([[1.5]])
    array([2.5])
    """

    _parameter_constraints: dict = {
        **POOL_PARAMETER_CONSTRAINTS,
        **CATEGORICAL_CONSTRAINTS,
        "degree": [Interval(Integral, 0, 1, closed="both")],
        "on_empty": [StrOptions(set(ON_EMPTY))],
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "n_bins": [Interval(Integral, 2, None, closed="left"), "array-like", None],
    }

    def __init__(
        self,
        kernel="gaussian",
        bandwidth=1.0,
        *,
        degree=0,
        on_empty="nearest",
        algorithm="auto",
        n_jobs=None,
        categorical_features=None,
        categorical_bandwidth=0.1,
        n_neighbors=None,
        n_bins=None,
    ):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.degree = degree
        self.on_empty = on_empty
        self.algorithm = algorithm
        self.n_jobs = n_jobs
        self.categorical_features = categorical_features
        self.categorical_bandwidth = categorical_bandwidth
        self.n_neighbors = n_neighbors
        self.n_bins = n_bins

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Store the training keys and values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training keys. SciPy sparse matrices and arrays are made dense
            once and pooled by brute force: ``algorithm="auto"`` picks it,
            and ``"kd_tree"`` or ``"ball_tree"`` raise a ``ValueError``.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Training values.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the training rows, not all zero. They
            multiply the attention weights; None gives every row weight 1.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        if is_dask_array(X):
            return fit_dask(self, X, y, sample_weight, self.degree)
        xp = array_api_namespace(X)
        if xp is not None:
            check_no_categorical(self)
            return fit_array_api(self, X, y, sample_weight, xp)
        X, y = validate_fit_data(self, X, y, multi_output=True, y_numeric=True)
        fit_pool(
            self,
            X,
            y.reshape(X.shape[0], -1),
            sample_weight,
            degree=self.degree,
            n_neighbors=self.n_neighbors,
        )
        self.keys_ = X
        self.values_ = y
        return self

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
        check_is_fitted(self)
        check_flag("return_std", return_std)
        check_flag("return_se", return_se)
        if return_se:
            check_holds_rows(self, "predict(return_se=True)")
        if is_dask_array(X):
            return predict_dask(self, X, return_std, return_se)
        if is_array_api_pool(self._pool):
            if return_se:
                check_numpy_estimator(self, "return_se=True")
            X = validate_array_api_queries(self, X, "predict")
            pooled = self._pool.pool(X, return_std=return_std)
        else:
            self._check_numpy_queries(X, "predict")
            X = validate_queries(self, X)
            pooled = self._pool.pool(X, n_jobs=self.n_jobs, return_std=return_std)
        outputs = list(pooled) if return_std else [pooled]
        if return_se:
            se = standard_error(self, X).astype(outputs[0].dtype, copy=False)
            outputs.append(se)
        outputs = tuple(self._shape_like_y(output) for output in outputs)
        return outputs if len(outputs) > 1 else outputs[0]

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
            pointwise interval.

        random_state : int, RandomState instance or None, default=None
            Seeds the resampling: the same ``random_state`` gives the same
            bounds.

        Returns
        -------
        lower, upper : ndarray of the shape of ``predict(X)``
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
        check_is_fitted(self)
        check_holds_rows(self, "confidence_interval")
        return confidence_interval(
            self,
            X,
            level=level,
            method=method,
            simultaneous=simultaneous,
            n_resamples=n_resamples,
            random_state=random_state,
        )

    def prediction_interval(self, X, *, level=0.9, method="jackknife+", cv=None):
        """Jackknife+ or CV+ prediction intervals for new observations.

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

        No model is refitted: ``mu_{-i}(q)`` follows in closed form from the
        weights of the prediction (``(f - p_i y_i) / (1 - p_i)`` for
        ``degree=0``, the case-deletion formula of the local weighted least
        squares for ``degree=1``), so the cost is one pass over the keys
        per query, and per training row for the residuals, with memory
        within ``working_memory``; the two order statistics are selected,
        not sorted. On a tree, a query's leave-out fits and order statistics
        come from its neighbours (a key of weight zero leaves the fit
        unchanged) and a window of the sorted residuals; other rows are
        dense over every key. At 1e4 queries x 1e4 keys: about ten times the
        time of ``predict`` on the brute-force path, 12 for a compact kernel
        with ``degree=0`` on a tree and 43 with ``degree=1``, most of it the
        exact refits below. Where the formula is undefined (a row holding
        all the weight of the query, a leverage of one, a fallback depending
        on the row), the fit without the row is computed by its definition,
        with the same widths and ``on_empty`` policy.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        level : float, default=0.9
            The nominal coverage ``1 - alpha``, in (0, 1); read as the
            decimal it prints as (0.9 is 9/10 in the ranks).

        method : {"jackknife+", "cv+"}, default="jackknife+"
            ``"jackknife+"``: leave-one-out fits. ``"cv+"``: fits without
            each fold ``S_k`` of ``cv`` and the residual of row ``i`` from
            the fit without its fold, ``mu_{-S_k(i)}`` in place of
            ``mu_{-i}``; for folds of equal size the coverage is at least
            ``1 - 2 alpha - sqrt(2 / n)`` (Theorem 4 of the paper).
            ``cv=n`` is jackknife+.

        cv : int or cross-validation splitter, default=None
            The folds of ``"cv+"`` over the training rows of positive sample
            weight, in their order: an int ``K`` in ``[2, n]`` for
            :class:`~sklearn.model_selection.KFold` without shuffling
            (contiguous folds; pass ``KFold(K, shuffle=True,
            random_state=...)`` for random ones), or a splitter whose test
            sets partition the rows. None means 5. Must be None for
            ``"jackknife+"``.

        Returns
        -------
        lower : ndarray of the shape of ``predict(X)``
            The lower bounds, per output.
        upper : ndarray of the shape of ``predict(X)``
            The upper bounds, per output.

        Notes
        -----
        The fits without a row keep the fitted widths ``bandwidth_`` (a rule
        of thumb is not recomputed) and ``categorical_bandwidth_``. Rows of
        sample weight zero are not part of the model: they are neither
        left out nor counted in ``n`` (the guarantee is for data
        exchangeable with the rows of positive weight); each row of positive
        weight is one observation, whatever its weight. Adaptive widths
        (``n_neighbors``) depend on the other keys and are refused. Under
        ``on_empty="raise"`` a fit without a row that leaves a query (or a
        training row) with no key raises a ``ValueError``.

        References
        ----------
        .. [1] R. F. Barber, E. J. Candes, A. Ramdas and R. J. Tibshirani,
           "Predictive inference with the jackknife+", Annals of Statistics
           49 (2021).

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
        """
        check_is_fitted(self)
        check_holds_rows(self, "prediction_interval")
        self._check_numpy_queries(X, "prediction_interval")
        lower, upper = prediction_interval(self, X, level, method, cv)
        return self._shape_like_y(lower), self._shape_like_y(upper)

    def attention_weights(self, X, *, sparse=False):
        """The normalised attention weights of each query over the training rows.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        sparse : bool, default=False
            Whether to return a :class:`scipy.sparse.csr_array` that stores
            only the non-zero weights. The tree algorithms build it without
            a dense intermediate, and brute force chunk by chunk: use it for
            compact kernels and many queries.

        Returns
        -------
        weights : ndarray or scipy.sparse.csr_array of shape \
                (n_queries, n_samples_fit)
            The weights used by ``predict``, in the dtype of the training
            ``X``: ``predict(X)`` equals ``weights @ values_`` up to
            rounding. Every row sums to one, fallbacks included (a row of
            NaN under ``on_empty="nan"``), and rows of sample weight zero get
            weight 0. With ``degree=0`` they are non-negative; with
            ``degree=1`` they are the equivalent-kernel weights of the
            local-linear fit, which may be negative.

        Raises
        ------
        MemoryError
            When the dense matrix would not fit in the machine's physical
            memory, or cannot be allocated; the message suggests
            ``sparse=True`` or fewer queries.

        Examples
        --------
        The effective number of neighbours of each query, ``1 / sum(w**2)``
        of its row, shows a bandwidth too small for the data when it is
        close to 1:

        >>> import numpy as np
        >>> from sklearn_kernelpool import KernelAttentionRegressor
        >>> X = np.arange(100.0)[:, None]
        >>> for h in (0.2, 5.0):
        ...     reg = KernelAttentionRegressor(bandwidth=h).fit(X, X[:, 0])
        ...     w = reg.attention_weights([[20.0], [50.5]])
        ...     print(h, np.round(1 / np.sum(w**2, axis=1), 1))
        0.2 [1. 2.]
        5.0 [17.7 17.7]
        >>> reg.attention_weights([[20.0], [50.5]], sparse=True).shape
        (2, 100)
        """
        check_is_fitted(self)
        check_holds_rows(self, "attention_weights")
        if not is_array_api_pool(self._pool):
            self._check_numpy_queries(X, "attention_weights")
            return pooled_attention_weights(self, X, sparse)
        check_flag("sparse", sparse)
        if sparse:
            raise ValueError(
                "sparse=True returns a SciPy sparse array, for NumPy input only; "
                "use sparse=False with arrays of other namespaces."
            )
        X = validate_array_api_queries(self, X, "attention_weights")
        return self._pool.attention_weights(X)

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
              ``+inf`` where ``tr >= n``.
            - ``aicc``: the corrected AIC of [2]_ (R np's
              ``bwmethod="cv.aic"``), ``log(sigma2) + (1 + tr / n) / (1 -
              (tr + 2) / n)``; ``+inf`` where ``tr + 2 >= n``.

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
        check_is_fitted(self)
        check_holds_rows(self, "smoother_diagnostics")
        return smoother_diagnostics(self)

    def _check_numpy_queries(self, X, method):
        """Refuse non-NumPy queries to an estimator fitted on NumPy arrays."""
        if array_api_namespace(X) is not None:
            check_same_namespace(self, X, method)

    def _shape_like_y(self, pooled):
        if self.values_ is None:  # fitted on dask arrays
            return pooled[:, 0] if self._y_ndim == 1 else pooled
        return pooled[:, 0] if self.values_.ndim == 1 else pooled

    def __getstate__(self):
        check_picklable_kernel(self)
        return super().__getstate__()

    def __setstate__(self, state):
        super().__setstate__(state)
        check_loaded_estimator(self)

    def __deepcopy__(self, memo):
        return deepcopy_estimator(self, memo)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = self.kernel == "constant"
        # SciPy sparse X, on the brute-force path.
        tags.input_tags.sparse = self.algorithm not in DENSE_ONLY
        # The array API path: degree 0, a named kernel, brute force.
        tags.array_api_support = (
            self.degree == 0
            and not callable(self.kernel)
            and self.algorithm in ("auto", "brute")
            and self.n_neighbors is None
        )
        return tags
