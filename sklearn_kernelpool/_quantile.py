"""KernelAttentionQuantileRegressor: a conditional quantile of attention
pooling."""

from numbers import Integral

from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._engine._categorical import CATEGORICAL_CONSTRAINTS
from ._engine._pooling import ON_EMPTY
from ._estimator._base import POOL_PARAMETER_CONSTRAINTS, fit_pool
from ._estimator._input_kinds import validate_fit_input
from ._estimator._pool_estimator import PoolEstimatorMixin
from ._estimator._regression_quantiles import QuantileMethods
from ._inference._quantiles import LevelInterval
from ._utils._sparse import takes_sparse


class KernelAttentionQuantileRegressor(
    QuantileMethods, PoolEstimatorMixin, RegressorMixin, BaseEstimator
):
    """A conditional quantile of ``y`` by attention pooling.

    ``predict`` returns the quantile at level ``quantile`` of the
    attention-weighted distribution of the training values,
    ``F(y | q) = sum_i p_i(q) 1{y_i <= y}``, with ``p_i(q)`` the normalised
    attention weights of :class:`KernelAttentionRegressor` with
    ``degree=0``: the smallest training value ``y_i`` where ``F`` reaches
    the level (quantile regression forests, Meinshausen 2006, with kernel
    weights). See :meth:`predict_quantiles` for the definition, its
    tolerance for rounding and the fallbacks of empty neighbourhoods. The
    pinball loss of the level is its natural score, so that
    :class:`~sklearn.model_selection.GridSearchCV` with
    ``make_scorer(mean_pinball_loss, alpha=quantile,
    greater_is_better=False)`` tunes the bandwidth for it.

    Read more in the :doc:`User Guide </user_guide>`.

    Parameters
    ----------
    kernel : str or callable, default="gaussian"
        The attention kernel, as for :class:`KernelAttentionRegressor`.

    bandwidth : float, array-like of shape (n_features,), or \
            {"scott", "silverman"}, default=1.0
        The width of the kernel, as for :class:`KernelAttentionRegressor`.

    quantile : float, default=0.5
        The level ``tau`` in [0, 1] of the quantile that :meth:`predict`
        returns (0.5: the conditional median; 0 and 1: the smallest and the
        largest training value of positive weight). A boolean is refused.

    on_empty : {"nearest", "mean", "nan", "raise"}, default="nearest"
        The weights of a query without any key in its neighbourhood, as for
        :class:`KernelAttentionRegressor`: the quantile of its nearest keys,
        of every key, NaN, or a ``ValueError``.

    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, \
            default="auto"
        How the weights are computed, as for
        :class:`KernelAttentionRegressor`; ``"binned"`` answers through its
        exact engine, as every quantile needs each key's weight.

    n_jobs : int, default=None
        Threads over chunks of queries, as for
        :class:`KernelAttentionRegressor`.

    categorical_features : array-like of {bool, int, str} or "from_dtype", \
            default=None
        The categorical features, as for :class:`KernelAttentionRegressor`.

    ordered_features : array-like of {bool, int, str}, "from_dtype" or None, \
            default="from_dtype"
        Which categorical features take the ordered kernel, as for
        :class:`KernelAttentionRegressor`.

    categorical_bandwidth : float or array-like, default=0.1
        The weight of a key of another category, as for
        :class:`KernelAttentionRegressor`.

    n_neighbors : int, default=None
        Adaptive (nearest-neighbour) widths, as for
        :class:`KernelAttentionRegressor`.

    n_bins : int, array-like of int or None, default=None
        Grid nodes per feature of ``algorithm="binned"``.

    Attributes
    ----------
    keys_ : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The training keys.

    values_ : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        The training values.

    sample_weight_ : ndarray of shape (n_samples,) or None
        The sample weights, or None when ``fit`` was called without them.

    bandwidth_ : float or ndarray of shape (n_features,)
        The bandwidth used.

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
        The categories of each categorical feature.

    categorical_bandwidth_ : ndarray of shape (n_categorical_features,)
        The ``lambda_j`` used. Only with categorical features.

    See Also
    --------
    KernelAttentionRegressor : The conditional mean; its
        :meth:`~KernelAttentionRegressor.predict_quantiles` gives several
        levels at once, and ``prediction_interval(method="cqr")``
        conformalized intervals from them.
    sklearn.linear_model.QuantileRegressor : Linear quantile regression.

    Notes
    -----
    The weights are those of local-constant pooling (``degree=0``): the
    equivalent-kernel weights of a local-linear fit can be negative, and
    their cumulative sum is no distribution. An integer sample weight is a
    repeated row (except under ``n_neighbors``, where a row of positive
    weight counts as one neighbour). NumPy input only (dense, sparse or
    with categorical features).

    References
    ----------
    .. [1] N. Meinshausen, "Quantile regression forests", Journal of Machine
       Learning Research 7 (2006).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionQuantileRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 1, (500, 1))
    >>> y = X[:, 0] + rng.normal(scale=0.1 + X[:, 0], size=500)
    >>> upper = KernelAttentionQuantileRegressor(bandwidth=0.1, quantile=0.9)
    >>> upper.fit(X, y).predict([[0.1], [0.9]]).round(2)
    array([0.38, 2.24])
    """

    _parameter_constraints: dict = {
        **POOL_PARAMETER_CONSTRAINTS,
        **CATEGORICAL_CONSTRAINTS,
        "quantile": [LevelInterval()],
        "on_empty": [StrOptions(set(ON_EMPTY))],
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "n_bins": [Interval(Integral, 2, None, closed="left"), "array-like", None],
    }

    def __init__(
        self,
        kernel="gaussian",
        bandwidth=1.0,
        *,
        quantile=0.5,
        on_empty="nearest",
        algorithm="auto",
        n_jobs=None,
        categorical_features=None,
        ordered_features="from_dtype",
        categorical_bandwidth=0.1,
        n_neighbors=None,
        n_bins=None,
    ):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.quantile = quantile
        self.on_empty = on_empty
        self.algorithm = algorithm
        self.n_jobs = n_jobs
        self.categorical_features = categorical_features
        self.ordered_features = ordered_features
        self.categorical_bandwidth = categorical_bandwidth
        self.n_neighbors = n_neighbors
        self.n_bins = n_bins

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Store the training keys and values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training keys.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Training values.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the training rows, not all zero: the
            weights of the weighted quantiles.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        data = validate_fit_input(self, X, y, sample_weight)
        X, y = data.X, data.y
        fit_pool(
            self,
            X,
            y.reshape(X.shape[0], -1),
            data.sample_weight,
            degree=0,
            n_neighbors=self.n_neighbors,
        )
        self.keys_ = X
        self.values_ = y
        return self

    def predict(self, X):
        """The conditional quantile at level ``quantile`` of each query.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            ``predict_quantiles(X, quantiles=quantile)``: a training value
            per query (and output).
        """
        check_is_fitted(self)
        return self.predict_quantiles(X, quantiles=float(self.quantile))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = self.kernel == "constant"
        tags.input_tags.sparse = takes_sparse(self.algorithm, self.categorical_features)
        return tags
