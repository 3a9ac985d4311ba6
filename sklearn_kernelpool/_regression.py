"""KernelAttentionRegressor: Nadaraya-Watson attention pooling."""

from numbers import Integral

from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from ._engine._categorical import CATEGORICAL_CONSTRAINTS
from ._engine._pooling import ON_EMPTY
from ._estimator._array_api import takes_array_api
from ._estimator._base import POOL_PARAMETER_CONSTRAINTS
from ._estimator._partially_linear import clear_fitted
from ._estimator._pool_estimator import PoolEstimatorMixin
from ._estimator._regression_inspection import InspectionMethods
from ._estimator._regression_intervals import IntervalMethods
from ._estimator._regression_paths import PredictionMethods, fit_regressor
from ._estimator._regression_quantiles import QuantileMethods
from ._utils._sparse import takes_sparse


class KernelAttentionRegressor(
    PredictionMethods,
    QuantileMethods,
    IntervalMethods,
    InspectionMethods,
    PoolEstimatorMixin,
    RegressorMixin,
    BaseEstimator,
):
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

    degree : {0, 1, 2}, default=0
        The degree of the local polynomial:

        - ``0``: pool the values (Nadaraya-Watson);
        - ``1``: fit ``y ~ b + beta . (k - q)`` around each query ``q`` by
          least squares weighted with the attention weights and predict
          ``b`` (local-linear): exact for linear functions, no first-order
          bias at the boundary. Where the weighted keys do not determine
          every direction (collinear features, fewer than ``n_features + 1``
          keys in general position), the slope is the minimum-norm
          (Moore-Penrose) one; a query whose keys determine no direction
          gets the ``degree=0`` prediction and is counted in a
          :class:`~sklearn_kernelpool.LocalLinearFallbackWarning`. Memory
          stays within ``working_memory`` (see its warning).
        - ``2``: fit the full quadratic in ``k - q`` (cross terms included)
          the same way (local quadratic): no curvature bias at peaks and
          troughs. Its quadratic terms shrink towards the ``degree=1`` fit
          by the slope's safeguard rule, before the slope. Exact paths
          only: ``"binned"``, dask, other array API namespaces, sparse
          ``X`` and ``linear_features`` raise (user guide: "Local
          polynomials").

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
          keys built in ``fit``, for kernels of compact support only;
        - ``"binned"``: for one or two continuous features, kernel sums on a
          regular grid by linear binning and one FFT convolution,
          interpolated to the queries (R's KernSmooth), at a small binning
          error controlled by ``n_bins``; the methods that need each key's
          weight use the exact engine;
        - ``"auto"``: brute force for kernels of unbounded support and
          sparse ``X``; the k-d tree for compact kernels where a query's
          support holds few keys; ``"binned"`` for one or two continuous
          features, at least 100000 keys and a width the grid resolves.

        The choice is the fitted ``algorithm_``. Every path gives the same
        predictions up to rounding. See :ref:`choosing-an-algorithm`.

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
        The categorical features, as in
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
        through a kernel of Li and Racine (see ``categorical_bandwidth``),
        never through ``bandwidth``, and gets no slope under ``degree=1``.
        ``bandwidth`` applies to the other, continuous, features.

    categorical_bandwidth : float or array-like of shape \
            (n_categorical_features,), default=0.1
        The weight ``lambda_j`` in [0, 1] of a key whose category differs
        from the query's, per categorical feature (one float for all); the
        attention weight of key ``i`` is::

            w_i * alpha(||(q_c - k_c) / h||) * prod_j lambda_j ** D_j

        with ``q_c``, ``k_c`` the continuous features and ``D_j = [q_j != k_j]``
        (Aitchison and Aitken's unordered kernel in the form of Li and Racine,
        2007), or ``|q_j - k_j|`` for an ordered feature (``ordered_features``);
        a category not seen in ``fit`` differs from every key. 1 ignores the
        feature; 0 pools only keys of the query's category, which can leave a
        query with no key of positive weight: it then gets ``on_empty``, where
        "nearest" is the nearest key in the continuous features, whatever its
        categories. The default prefers the query's category strongly while
        still borrowing from the others; :class:`KernelAttentionRegressorCV`
        selects it. Unused without categorical features.
    ordered_features : array-like of {bool, int, str}, "from_dtype" or None, \
            default="from_dtype"
        The categorical features of ordered levels, with ``D_j = |q_j - k_j|``
        on the positions of the levels (Li and Racine's ordered kernel):
        ``"from_dtype"``, the ordered pandas categorical columns; None, none; or
        as ``categorical_features``. The order is that of a pandas categorical's
        categories, else of the sorted values. See :ref:`categorical-ordered`.
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
        each at least 2. ``None`` puts 40 nodes per bandwidth, and at
        least 1000 over the extent of the keys (400 in two dimensions),
        over the span of the keys
        plus the kernel's support (at least 64 nodes per axis, and at most
        131072 in one dimension, 1024 in two), which keeps the binning
        error below 1e-3 of the scale of ``y`` on smooth data for widths of
        at least 1/25 of each feature's range, with the smooth kernels (the
        boxcar kernel, discontinuous, errs by about the node spacing over
        the width; in two dimensions the cap leaves up to 2e-3 at the
        corners of the data and at the widest widths). The error falls as
        the square of the spacing. Where the grid resolves the width
        with fewer than 8 nodes (keys far apart stretch the capped
        default grid; a given ``n_bins`` may be too coarse), ``fit``
        issues a :class:`CoarseGridWarning`. A given ``n_bins`` whose
        grid needs more than a quarter of the physical memory (or
        scikit-learn's ``working_memory`` where larger) is refused with a
        ``ValueError`` before anything is allocated. Unused on the other
        paths.

    linear_features : array-like of {bool, int, str} or "categorical", \
            default=None
        The columns that enter as a global linear term (a partially linear
        model, Robinson 1988 [4]_; R np's ``npplreg``),
        ``f(x, z) = intercept_ + z . coef_ + m(x)``, with ``z`` the encoded
        linear columns and ``m`` the kernel fit of the others: None (every
        column in the kernel), ``"categorical"`` (every categorical
        feature), or int indices, a boolean mask or feature names, as for
        ``categorical_features``. Categorical linear columns are one-hot
        encoded with the first category dropped. ``coef_`` is Robinson's
        double-residual estimate with this estimator's own leave-one-out
        fits, ``intercept_`` the weighted mean of ``y - z . coef_``, and
        ``kernel_regressor_`` is fitted to the partial residuals, so that
        ``predict(X) = z . coef_ + intercept_ + attention_weights(X) @
        values_`` exactly. Collinear linear columns, no column left to the
        kernel and unseen categories raise a ``ValueError``. The intervals,
        standard errors and gradients hold ``coef_`` fixed (its error is of
        order ``n ** -0.5``); :meth:`predict_gradient` gives ``coef_`` in
        the numeric linear columns and NaN in the categorical ones;
        :meth:`smoother_diagnostics` raises a ``ValueError``. See
        :ref:`tabular-partially-linear`.

    robust_iterations : int, default=0
        Cleveland's robustness iterations [6]_: each takes the residuals
        ``r_i = y_i - f(x_i)`` of the in-sample fit, their weighted median
        ``s`` of ``|r_i|``, and refits with the sample weights times
        ``B(r_i / (6 s))``, ``B(u) = (1 - u**2)**2`` for ``|u| < 1``, else
        0. The last fit, ``robustness_weights_`` held, gives every method. With
        ``kernel="tricube"``, ``degree=1`` and ``n_neighbors=int(frac * n +
        1e-10)`` it is statsmodels' ``lowess(y, x, frac=frac,
        it=robust_iterations, delta=0)`` but for :ref:`robust-lowess` (the
        fit warns of shrunk slopes). Several outputs share one weight per
        row. Dask arrays, other array API namespaces and ``linear_features``
        raise a ``ValueError``, as do prediction intervals. See :ref:`robust-fits`.

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

    is_ordered_ : ndarray of bool of shape (n_features,) or None
        Which categorical features are ordered; None when none is.

    categories_ : list of ndarray
        The categories of each categorical feature, sorted (ordered ones in
        their order), in the order of the features; empty without them.

    categorical_bandwidth_ : ndarray of shape (n_categorical_features,)
        The ``lambda_j`` used. Only with categorical features.

    coef_ : ndarray of shape (n_linear_columns,) or (n_outputs, n_linear_columns)
        With ``linear_features``: the coefficients of the encoded linear
        columns, in the order of ``linear_feature_names_``.

    coef_se_ : ndarray of the shape of ``coef_``
        With ``linear_features``: the heteroscedasticity-consistent (HC0,
        White 1980) standard errors of ``coef_`` on the residualised design
        of Robinson's estimator; see :ref:`tabular-partially-linear` for
        the formula.

    intercept_ : float or ndarray of shape (n_outputs,)
        With ``linear_features``: the intercept of the linear part.

    is_linear_ : ndarray of bool of shape (n_features,)
        With ``linear_features``: which features are linear.

    linear_feature_names_ : ndarray of str of shape (n_linear_columns,)
        With ``linear_features``: the names of the encoded linear columns,
        ``"{feature}_{category}"`` for the dummies of a categorical feature
        (its first category dropped) and the feature's name for a numeric
        one (``x{j}`` without feature names).

    robustness_weights_ : ndarray of shape (n_samples,) or None
        The robustness weights of the final fit, in [0, 1], which pools with
        ``sample_weight_ * robustness_weights_``; 0 for rows of sample weight
        zero. None when ``robust_iterations=0``.

    kernel_regressor_ : KernelAttentionRegressor
        With ``linear_features``: the kernel part, fitted on the other
        columns with the partial residuals as values. ``keys_``,
        ``values_``, ``sample_weight_``, ``bandwidth_``, ``algorithm_`` and
        ``categorical_bandwidth_`` are then its own; ``is_categorical_`` and
        ``categories_`` cover the categorical features of both parts.

    See Also
    --------
    sklearn.neighbors.KNeighborsRegressor : Averages the k nearest values.
    sklearn.neighbors.RadiusNeighborsRegressor : Averages the values within
        a radius; the boxcar kernel with uniform weights.
    sklearn.kernel_ridge.KernelRidge : Kernel ridge regression.

    Notes
    -----
    Kernels with a log form (gaussian, exponential, cauchy) are pooled as a
    softmax of the log weights: a query far from every key gets the value
    of the nearest key, never 0/0. A large common offset of the keys costs
    no precision (see the user guide, "Numerics").

    Prediction works in chunks of queries within ``working_memory``; the
    predictions are the same to the last bit for every ``working_memory``
    and ``n_jobs``.

    An integer sample weight ``k`` is equivalent to ``k`` copies of the row
    (except under ``n_neighbors``, where a row counts as one neighbour), and
    rows of weight zero never influence a prediction. Predictions keep the
    floating dtype of the training ``X``.

    ``predict(X, return_std=True)`` estimates the local spread of ``y``,
    not the standard error of the prediction, ``predict(X,
    return_se=True)``.

    With ``sklearn.config_context(array_api_dispatch=True)``, arrays of other
    array API namespaces (PyTorch, CuPy) are pooled by brute force on their
    device; what stays NumPy-only is listed in the user guide, "GPU and
    other arrays".

    References
    ----------
    .. [1] E. A. Nadaraya, "On estimating regression", Theory of Probability
       and its Applications 9 (1964).
    .. [2] G. S. Watson, "Smooth regression analysis", Sankhya A 26 (1964).
    .. [3] A. Zhang, Z. C. Lipton, M. Li and A. J. Smola, "Dive into Deep
       Learning", chapter "Attention Pooling by Similarity".
    .. [4] P. M. Robinson, "Root-N-consistent semiparametric regression",
       Econometrica 56 (1988).
    .. [5] H. White, "A heteroskedasticity-consistent covariance matrix
       estimator and a direct test for heteroskedasticity", Econometrica 48
       (1980).
    .. [6] W. S. Cleveland, "Robust locally weighted regression and smoothing
       scatterplots", Journal of the American Statistical Association 74
       (1979).

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

    A partially linear model: the second column enters linearly, the first
    through the kernel.

    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 3, 300)
    >>> z = np.cos(x) + rng.normal(size=300)
    >>> y = np.sin(2 * x) + 2 * z + rng.normal(scale=0.1, size=300)
    >>> pl = KernelAttentionRegressor(bandwidth=0.2, linear_features=[1])
    >>> pl.fit(np.column_stack([x, z]), y).coef_.round(3)
    array([2.006])
    >>> pl.coef_se_.round(3)
    array([0.008])
    """

    _parameter_constraints: dict = {
        **POOL_PARAMETER_CONSTRAINTS,
        **CATEGORICAL_CONSTRAINTS,
        "degree": [Interval(Integral, 0, 2, closed="both")],
        "on_empty": [StrOptions(set(ON_EMPTY))],
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "n_bins": [Interval(Integral, 2, None, closed="left"), "array-like", None],
        "linear_features": ["array-like", StrOptions({"categorical"}), None],
        "robust_iterations": [Interval(Integral, 0, None, closed="left")],
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
        ordered_features="from_dtype",
        n_neighbors=None,
        n_bins=None,
        linear_features=None,
        robust_iterations=0,
    ):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.degree = degree
        self.on_empty = on_empty
        self.algorithm = algorithm
        self.n_jobs = n_jobs
        self.categorical_features = categorical_features
        self.categorical_bandwidth = categorical_bandwidth
        self.ordered_features = ordered_features
        self.n_neighbors = n_neighbors
        self.n_bins = n_bins
        self.linear_features = linear_features
        self.robust_iterations = robust_iterations

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
        clear_fitted(self, self.linear_features is not None)
        return fit_regressor(self, X, y, sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = self.kernel == "constant"
        # SciPy sparse X, on the brute-force path, without categorical features.
        tags.input_tags.sparse = (
            self.linear_features is None and self.degree != 2
        ) and takes_sparse(self.algorithm, self.categorical_features)
        # The array API path: degree 0, a named kernel, brute force...
        tags.array_api_support = takes_array_api(self)
        return tags
