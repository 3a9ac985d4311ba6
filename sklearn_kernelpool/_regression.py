"""KernelAttentionRegressor: Nadaraya-Watson attention pooling."""

from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import (
    POOL_PARAMETER_CONSTRAINTS,
    fit_pool,
    validate_fit_data,
    validate_queries,
)
from ._pooling import ON_EMPTY


class KernelAttentionRegressor(RegressorMixin, BaseEstimator):
    """Attention pooling by similarity (Nadaraya-Watson kernel regression).

    ``fit`` stores the training keys ``X`` and values ``y``. ``predict``
    pools the values with attention weights given by a kernel of the scaled
    distance between the query and each key::

        f(q) = sum_i w_i alpha(u_i) y_i / sum_i w_i alpha(u_i)

    with ``u_i = ||q - k_i|| / h`` for an isotropic bandwidth ``h`` and
    ``u_i = ||(q - k_i) / h||`` for per-feature bandwidths, and ``w_i`` the
    sample weights. Every prediction is a convex combination of the values.

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

    on_empty : {"nearest", "mean", "nan", "raise"}, default="nearest"
        What a query gets when no training key of positive weight has a
        positive kernel weight (only possible for compact kernels, or a
        callable kernel that returns zeros):

        - ``"nearest"``: the value of the nearest such key; keys tied at the
          smallest distance are averaged with their sample weights;
        - ``"mean"``: the weighted mean of the training values;
        - ``"nan"``: NaN;
        - ``"raise"``: a ``ValueError`` counting the empty queries.

        Under the first three an :class:`~sklearn_kernelpool.EmptyNeighborhoodWarning`
        says how many queries fell back.

    algorithm : {"auto", "brute", "kd_tree", "ball_tree"}, default="auto"
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
          the user guide), brute force otherwise.

        The choice is the fitted ``algorithm_``. Every path gives the same
        predictions up to rounding.

    n_jobs : int, default=None
        Number of threads over chunks of queries in ``predict``. ``None``
        means 1 unless in a :obj:`joblib.parallel_backend` context; ``-1``
        means all processors. With more than one thread BLAS runs one thread
        per chunk. The predictions do not depend on it.

    Attributes
    ----------
    keys_ : ndarray of shape (n_samples, n_features)
        The training keys.

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
    path (1 MiB of scores) if that is larger, and does not grow with the
    number of queries. The predictions are the same to the last bit for
    every ``working_memory`` and ``n_jobs``.

    An integer sample weight ``k`` is equivalent to ``k`` copies of the row,
    and rows of weight zero never influence a prediction.

    Predictions have the floating dtype of the training ``X`` (float32 stays
    float32).

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
    """

    _parameter_constraints: dict = {
        **POOL_PARAMETER_CONSTRAINTS,
        "on_empty": [StrOptions(set(ON_EMPTY))],
    }

    def __init__(
        self,
        kernel="gaussian",
        bandwidth=1.0,
        *,
        on_empty="nearest",
        algorithm="auto",
        n_jobs=None,
    ):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.on_empty = on_empty
        self.algorithm = algorithm
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Store the training keys and values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training keys.

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
        X, y = validate_fit_data(self, X, y, multi_output=True, y_numeric=True)
        fit_pool(self, X, y.reshape(X.shape[0], -1), sample_weight)
        self.keys_ = X
        self.values_ = y
        return self

    def predict(self, X):
        """Pool the training values with attention weights for each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The queries.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            The pooled values, of the shape of the training ``y`` per query.
        """
        check_is_fitted(self)
        X = validate_queries(self, X)
        pooled = self._pool.pool(X, n_jobs=self.n_jobs)
        if self.values_.ndim == 1:
            return pooled[:, 0]
        return pooled

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = self.kernel == "constant"
        return tags
