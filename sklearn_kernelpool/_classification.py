"""KernelAttentionClassifier: attention pooling of one-hot encoded labels."""

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ._binned._dask import fit_dask_classifier
from ._engine._categorical import CATEGORICAL_CONSTRAINTS
from ._estimator._base import POOL_PARAMETER_CONSTRAINTS, fit_pool
from ._estimator._input_kinds import (
    NUMPY_KINDS,
    validate_fit_input,
    validate_query_input,
)
from ._estimator._pool_estimator import PoolEstimatorMixin
from ._utils._sparse import takes_sparse

# NaN probabilities have no argmax, so the classifier offers no "nan" policy.
ON_EMPTY_CLASSIFIER = ("nearest", "mean", "raise")


class KernelAttentionClassifier(PoolEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Attention pooling by similarity of class labels (kernel classification).

    ``fit`` stores the training keys ``X`` and the labels ``y``, encoded one
    hot. ``predict_proba`` pools the encoded labels with the attention
    weights of :class:`KernelAttentionRegressor`, so that the probability of
    class ``c`` at a query ``q`` is the attention-weighted frequency of ``c``
    among the training labels::

        p(c | q) = sum_i w_i alpha(u_i) [y_i = c] / sum_i w_i alpha(u_i)

    with ``u_i = ||q - k_i|| / h`` (``||(q - k_i) / h||`` for per-feature
    bandwidths) and ``w_i`` the sample weights. ``predict`` returns the class
    of largest probability.

    Parameters
    ----------
    kernel : str or callable, default="gaussian"
        The attention kernel ``alpha``: one of the names of
        :data:`sklearn_kernelpool.kernels.KERNELS`, or a callable mapping an
        ndarray of scaled distances >= 0 to weights >= 0 of the same shape
        (treated as having unbounded support). See
        :class:`KernelAttentionRegressor`.

    bandwidth : float, array-like of shape (n_features,), or \
            {"scott", "silverman"}, default=1.0
        The width ``h`` of the kernel: one isotropic width > 0, one width > 0
        per feature, or a rule of thumb computed in ``fit``, exactly as for
        :class:`KernelAttentionRegressor`.

    on_empty : {"nearest", "mean", "raise"}, default="nearest"
        What a query gets when no training key of positive weight has a
        positive kernel weight (only possible for compact kernels, or a
        callable kernel that returns zeros):

        - ``"nearest"``: the class of the nearest such key, with probability
          1; when keys of different classes are tied at the smallest
          distance, the query gets their class frequencies weighted by their
          sample weights;
        - ``"mean"``: the class priors, the class frequencies of the
          training labels weighted by the sample weights;
        - ``"raise"``: a ``ValueError`` counting the empty queries.

        Under the first two a call warns once with an
        :class:`~sklearn_kernelpool.EmptyNeighborhoodWarning`, whose
        ``n_empty`` attribute counts the queries that fell back. There is no
        ``"nan"`` policy: a row of NaN probabilities has no class.

    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, default="auto"
        How the weights are computed, as for
        :class:`KernelAttentionRegressor`; the tree paths need a kernel of
        compact support. The choice is the fitted ``algorithm_``, and every
        path gives the same probabilities up to rounding.

    n_jobs : int, default=None
        Number of threads over chunks of queries in ``predict_proba``.
        ``None`` runs as many threads as BLAS would use (all the cores,
        unless limited by threadpoolctl or by a variable such as
        ``OMP_NUM_THREADS``), ``-1`` all processors; BLAS runs one thread
        meanwhile, as in :class:`KernelAttentionRegressor`. The
        probabilities do not depend on it.

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
        :class:`~sklearn.neighbors.KNeighborsClassifier` (so an integer
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

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted; the columns of ``predict_proba``.

    keys_ : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The training keys; sparse keys stay sparse here (CSR or CSC). With
        categorical features, the continuous features followed by the codes
        of the categories (indices into ``categories_``).

    values_ : ndarray of shape (n_samples, n_classes)
        The one-hot encoded training labels: ``values_[i, j]`` is 1 when
        ``y[i] == classes_[j]`` and 0 otherwise, of the floating dtype of the
        training ``X``. ``predict_proba(X)`` is
        ``attention_weights(X) @ values_``.

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

    See Also
    --------
    KernelAttentionRegressor : The same pooling of real values.
    sklearn.neighbors.RadiusNeighborsClassifier : Votes of the labels within
        a radius; the boxcar kernel with uniform weights.
    sklearn.neighbors.KNeighborsClassifier : Votes of the k nearest labels.

    Notes
    -----
    Every row of ``predict_proba`` is a convex combination of one-hot rows:
    its entries are non-negative and sum to one. A class absent from the
    support of a query's kernel gets probability exactly 0 there.

    ``predict`` is the class of largest probability; a tie between classes
    goes to the first of them in ``classes_``, as :func:`numpy.argmax` does.
    Ties are decided on the computed probabilities, so only exact ties (for
    example equal counts under the boxcar or the constant kernel) are
    guaranteed to be broken this way.

    With the boxcar kernel and no sample weights, the probabilities are the
    label frequencies among the training keys at distance less than the
    bandwidth, those of
    :class:`~sklearn.neighbors.RadiusNeighborsClassifier` with
    ``weights="uniform"`` wherever no key lies exactly at the radius (the
    boxcar excludes it, the radius includes it).

    An integer sample weight ``k`` is equivalent to ``k`` copies of the row
    (except under ``n_neighbors``, where a row counts as one neighbour), and
    rows of weight zero never influence a prediction. The probabilities
    have the floating dtype of the training ``X`` (float32 stays float32).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> y = np.array(["a", "a", "b", "b"])
    >>> clf = KernelAttentionClassifier(kernel="boxcar", bandwidth=1.5)
    >>> clf.fit(X, y).predict_proba([[0.4], [1.5]])
    array([[1. , 0. ],
           [0.5, 0.5]])
    >>> clf.predict([[0.4], [1.5]])
    array(['a', 'a'], dtype='<U1')
    """

    _parameter_constraints: dict = {
        **POOL_PARAMETER_CONSTRAINTS,
        **CATEGORICAL_CONSTRAINTS,
        "on_empty": [StrOptions(set(ON_EMPTY_CLASSIFIER))],
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "n_bins": [Interval(Integral, 2, None, closed="left"), "array-like", None],
    }

    def __init__(
        self,
        kernel="gaussian",
        bandwidth=1.0,
        *,
        on_empty="nearest",
        algorithm="auto",
        n_jobs=None,
        categorical_features=None,
        categorical_bandwidth=0.1,
        ordered_features="from_dtype",
        n_neighbors=None,
        n_bins=None,
    ):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.on_empty = on_empty
        self.algorithm = algorithm
        self.n_jobs = n_jobs
        self.categorical_features = categorical_features
        self.categorical_bandwidth = categorical_bandwidth
        self.ordered_features = ordered_features
        self.n_neighbors = n_neighbors
        self.n_bins = n_bins

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Store the training keys and the one-hot encoded labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training keys. SciPy sparse matrices and arrays are made dense
            once and pooled by brute force: ``algorithm="auto"`` picks it,
            and ``"kd_tree"`` or ``"ball_tree"`` raise a ``ValueError``.
            With ``algorithm="binned"``, a dask array too (``y`` and
            ``sample_weight`` dask or NumPy arrays): the classes and the grid
            sums of the class indicators are computed on the cluster and the
            model holds no rows (see the user guide's page on dask).

        y : array-like of shape (n_samples,)
            Class labels: strings, integers, booleans or any other labels
            :func:`numpy.unique` can sort. Continuous and multi-output
            targets raise a ``ValueError``.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the training rows, not all zero. They
            multiply the attention weights; None gives every row weight 1.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        data = validate_fit_input(
            self, X, y, sample_weight, target="labels", kinds=(*NUMPY_KINDS, "dask")
        )
        X, y, sample_weight = data.X, data.y, data.sample_weight
        if data.kind == "dask":
            return fit_dask_classifier(self, X, y, sample_weight)
        # scikit-learn tells integral floats by a cast to int, which warns
        # before its clear error on huge continuous targets.
        with np.errstate(invalid="ignore"):
            check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        onehot = np.zeros((X.shape[0], len(self.classes_)), dtype=X.dtype)
        onehot[np.arange(X.shape[0]), encoded] = 1
        fit_pool(self, X, onehot, sample_weight, n_neighbors=self.n_neighbors)
        self.keys_ = X
        self.values_ = onehot
        return self

    def predict_proba(self, X):
        """Attention-weighted class frequencies for each query.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        Returns
        -------
        proba : ndarray of shape (n_queries, n_classes)
            The probability of each class of ``classes_``; every row sums to
            one.
        """
        return self._probabilities(X, "predict_proba")

    def _probabilities(self, X, method):
        """:meth:`predict_proba` of the queries ``X`` of ``method``."""
        check_is_fitted(self)
        X = validate_query_input(self, X, method).X
        proba = self._pool.pool(X, n_jobs=self.n_jobs)
        # The rows sum to one up to the rounding of the pooling product.
        proba /= proba.sum(axis=1, keepdims=True)
        return proba

    def predict_log_proba(self, X):
        """Logarithm of the class probabilities for each query.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        Returns
        -------
        log_proba : ndarray of shape (n_queries, n_classes)
            ``log(predict_proba(X))``: ``-inf`` for a class of probability 0.
        """
        proba = self._probabilities(X, "predict_log_proba")
        with np.errstate(divide="ignore"):
            return np.log(proba)

    def predict(self, X):
        """The class of largest attention-weighted frequency for each query.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        Returns
        -------
        y_pred : ndarray of shape (n_queries,)
            The predicted labels; ties go to the first tied class in
            ``classes_``.
        """
        proba = self._probabilities(X, "predict")
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = self.kernel == "constant"
        # SciPy sparse X, on the brute-force path, without categorical features.
        tags.input_tags.sparse = takes_sparse(self.algorithm, self.categorical_features)
        return tags
