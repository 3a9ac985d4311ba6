"""KernelAttentionProjection: a linear map of the keys learned on the
leave-one-out error of attention pooling."""

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.decomposition import PCA
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from ._engine._saved_state import _refuse
from ._estimator._persistence import restore_added_parameters
from ._regression import KernelAttentionRegressor
from ._utils._input import validate_sample_weight
from ._utils._warnings import EmptyNeighborhoodWarning, LocalLinearFallbackWarning
from ._widths._guard import _select_isotropic
from ._widths._projection_learning import MAX_ITER, TOL, learn_projection
from ._widths._projection_loss import differentiable_kernels
from .kernels import KERNELS

# The isotropic widths scored for the starts: log-spaced over this many
# decades around the features' spread.
_START_WIDTHS = np.logspace(-1.5, 1.0, 26)


def target_of(y, given=None):
    """``(Y, objective)``: a float ``y`` as columns for the squared error,
    class labels (of any other dtype) as indicators for the log-loss.

    ``y`` is the validated target, ``given`` the target as passed to ``fit``
    (``y`` itself when None), whose dtype decides: validation turns pandas'
    nullable integers and booleans into floats, but they are class labels,
    as NumPy's integers and booleans are."""
    given = y if given is None else given
    if _holds_floats(given):
        Y = np.asarray(y, dtype=np.float64)
        return Y.reshape(Y.shape[0], -1), "squared_error"
    kind = type_of_target(given, input_name="y", raise_unknown=True)
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            "y must hold floats (the squared error, one or several outputs) or "
            f"class labels of one output; got a target of type {kind!r}."
        )
    _, encoded = np.unique(y, return_inverse=True)
    encoded = encoded.ravel()
    Y = np.zeros((len(encoded), encoded.max() + 1))
    Y[np.arange(len(encoded)), encoded] = 1.0
    return Y, "log_loss"


def _holds_floats(y):
    """Whether the dtype of ``y`` (of any column of a data frame) is a float
    one, NumPy's or an extension's such as pandas' ``Float64``: values of
    the squared error; a pandas ``category`` holds labels whatever its
    categories."""
    dtypes = getattr(y, "dtypes", None)
    if hasattr(y, "dtype") or dtypes is None:
        dtypes = [getattr(y, "dtype", None)]
    kinds = {getattr(dtype, "kind", None) for dtype in dtypes}
    if None in kinds:
        kinds = {np.asarray(y).dtype.kind}
    return "f" in kinds


def start_widths(X, weights):
    """The isotropic bandwidths scored for the starts: log-spaced around the
    root mean variance of the features."""
    mean = np.average(X, axis=0, weights=weights)
    spread = np.sqrt(np.mean(np.average((X - mean) ** 2, axis=0, weights=weights)))
    return _START_WIDTHS * (spread if spread > 0 else 1.0)


def gradient_outer_product(X, Y, weights, kernel, bandwidth):
    """The expected outer product of the gradients of the pooled fit at the
    training points (Trivedi, Wang, Kpotufe and Shakhnarovich 2014): ``sum_i
    w_i sum_k g_ik g_ik^T / sum_i w_i``, ``g_ik`` the gradient of output
    ``k`` of the local-constant fit at ``bandwidth``."""
    regressor = KernelAttentionRegressor(kernel=kernel.name, bandwidth=bandwidth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        regressor.fit(X, Y, sample_weight=weights)
        gradients = regressor.predict_gradient(X).reshape(X.shape[0], X.shape[1], -1)
    gradients = np.nan_to_num(gradients)
    outer = np.einsum("i,ijk,ilk->jl", weights, gradients, gradients)
    return outer / weights.sum()


def initial_map(init, X, Y, weights, kernel, n_components, bandwidth, random_state):
    """The start of the learning: ``init`` as :class:`KernelAttentionProjection`
    documents it, at the isotropic ``bandwidth``."""
    d = X.shape[1]
    if isinstance(init, np.ndarray):
        return init
    if init == "identity":
        return np.eye(n_components, d) / bandwidth
    if init == "pca":
        pca = PCA(n_components=n_components, random_state=random_state).fit(X)
        return pca.components_ / bandwidth
    outer = gradient_outer_product(X, Y, weights, kernel, bandwidth)
    values, vectors = np.linalg.eigh(outer)
    # The leading eigenvectors, largest first; signs made deterministic.
    vectors = vectors[:, np.argsort(values)[::-1][:n_components]].T
    signs = np.sign(vectors[np.arange(n_components), np.abs(vectors).argmax(axis=1)])
    return vectors * signs[:, None] / bandwidth


class KernelAttentionProjection(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """A linear map of the keys learned for attention pooling (MLKR).

    Learns the matrix ``components_`` ``A`` of shape (n_components,
    n_features) that minimises the exact leave-one-out error of attention
    pooling of the training values on the mapped keys ``X @ A.T`` at unit
    width: the weight of key ``j`` for the query ``x_i`` is ``w_j
    alpha(||A (x_i - x_j)||)``. In the words of attention, ``A`` is the
    query and the key projection of an attention layer, tied to one
    matrix, and the width is absorbed into it: ``transform`` followed by
    ``KernelAttentionRegressor(kernel=kernel, bandwidth=1.0)`` reproduces
    the learned pooling. This is metric learning for kernel regression
    (Weinberger and Tesauro 2007), for any differentiable kernel of the
    package, several outputs, sample weights and class labels.

    Read more in the :ref:`User Guide <projection>`.

    Parameters
    ----------
    n_components : int, default=None
        The dimension of the mapped keys; None keeps ``n_features``. A
        rank below ``n_features`` keeps the directions along which the
        target varies (an index model).

    kernel : str, default="gaussian"
        A registered kernel whose weight has a slope in the distance:
        every one but ``"boxcar"`` and ``"constant"``.

    init : {"auto", "pca", "identity"} or ndarray of shape \
            (n_components, n_features), default="auto"
        The start of the learning. Each of the named starts is divided by
        the isotropic bandwidth of smallest leave-one-out loss on a grid
        around the features' spread, so that it starts as the best
        isotropic pooling of its directions:

        - ``"auto"``: the leading eigenvectors of the expected outer product
          of the gradients of that fit at the training points (Trivedi et
          al. 2014), the directions along which it varies most;
        - ``"pca"``: the leading principal axes of ``X`` (unweighted);
        - ``"identity"``: the first ``n_components`` features;
        - an array: taken as it is.

    max_iter : int, default=200
        The iteration cap of L-BFGS; a
        :class:`~sklearn.exceptions.ConvergenceWarning` says when it stops
        the learning.

    tol : float, default=1e-5
        L-BFGS stops when no entry of the gradient of the loss (in units of
        the variance of ``y`` for the squared error) exceeds it, or when an
        iteration lowers the loss by less than SciPy's ``ftol``. The
        gradient is taken in the map of the standardised features
        (``components_`` times the features' standard deviations), on which
        L-BFGS works: keys ``c X`` give ``components_ / c`` and the same
        ``loss_``, whatever the constant ``c``. The starts (``init``) are
        computed on ``X`` as given, so features in units of different
        scales change where the learning starts: standardise them first.

    random_state : int, RandomState instance or None, default=None
        Seeds the principal axes of ``init="pca"``.

    verbose : int, default=0
        Above 0, the leave-one-out loss of each evaluation of L-BFGS is
        printed.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The learned map.

    n_iter_ : int
        The iterations of L-BFGS.

    loss_ : float
        The leave-one-out loss of the learned map: the mean squared error in
        units of the variance of ``y`` (``1 - R^2`` of the leave-one-out
        fits) for a ``y`` of floats, the log-loss for class labels.

    objective_ : {"squared_error", "log_loss"}
        The loss minimised, by the type of ``y``.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``; only when ``X`` has string
        column names.

    See Also
    --------
    KernelAttentionRegressorCV : its ``projection`` learns and guards a map.
    sklearn.neighbors.NeighborhoodComponentsAnalysis : a map learned for
        nearest-neighbour classification.

    Notes
    -----
    The loss is evaluated with its analytic gradient in blocks of rows
    within ``working_memory``: its memory grows with ``n``, not ``n**2``,
    and each evaluation costs ``O(n**2 (n_features + n_outputs))``. A
    ``y`` of floats is fitted on the squared error (one or several
    outputs); a ``y`` of any other dtype (strings, booleans, integers,
    pandas' nullable ``Int64`` and ``boolean``, categories) as class labels,
    on the log-loss of the pooled class indicators: convert an integer count
    to float to fit it on the squared error.

    L-BFGS works on the map of the standardised features, ``components_ *
    s`` with ``s`` the weighted standard deviations of the features, over
    the standardised keys: the distances are the same, and so is the problem
    it solves whatever the units of ``X``: keys ``X * c`` give the map
    ``components_ / c`` and the same ``loss_``, as L-BFGS takes the same
    steps up to rounding.

    A map of ``n_components x n_features`` entries fitted on the same
    leave-one-out error it is judged by can overfit a small noisy table;
    ``KernelAttentionRegressorCV(projection="auto")`` keeps one only where
    it wins out of fold.

    References
    ----------
    K. Q. Weinberger and G. Tesauro, "Metric learning for kernel
    regression", AISTATS 2007.

    S. Trivedi, J. Wang, S. Kpotufe and G. Shakhnarovich, "A consistent
    estimator of the expected gradient outerproduct", UAI 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionProjection
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5))
    >>> y = np.sin(X[:, 0] + X[:, 1])
    >>> projection = KernelAttentionProjection(n_components=1).fit(X, y)
    >>> projection.transform(X).shape
    (200, 1)
    >>> direction = projection.components_[0] / np.linalg.norm(projection.components_)
    >>> bool(abs(direction[0]) > 0.6 and abs(direction[1]) > 0.6)
    True
    """

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(differentiable_kernels())],
        "init": [StrOptions({"auto", "pca", "identity"}), np.ndarray],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_components=None,
        *,
        kernel="gaussian",
        init="auto",
        max_iter=MAX_ITER,
        tol=TOL,
        random_state=None,
        verbose=0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Learn the map on the leave-one-out error of pooling ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training keys.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Float values (the squared error, one or several outputs), or
            class labels of any other dtype (the log-loss), pandas' nullable
            integers and booleans included.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights, not all zero: they weigh the keys in the
            pools and the points in the loss.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        given = y
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=False)
        X = X.astype(np.float64, copy=False)
        weights = validate_sample_weight(sample_weight, X)
        weights = np.ones(X.shape[0]) if weights is None else weights
        n_positive = np.count_nonzero(weights > 0)
        if n_positive < 3:
            raise ValueError(
                "KernelAttentionProjection needs at least 3 samples of positive "
                f"weight for its leave-one-out error; got n_samples={n_positive}."
            )
        Y, self.objective_ = target_of(y, given)
        n_components = self._n_components(X.shape[1])
        kernel = KERNELS[self.kernel]
        h = _select_isotropic(
            X, Y, weights, kernel, start_widths(X, weights), 0, self.objective_
        )
        start = initial_map(
            self.init, X, Y, weights, kernel, n_components, h, self.random_state
        )
        learned = learn_projection(
            X,
            Y,
            weights,
            kernel,
            start,
            objective=self.objective_,
            max_iter=self.max_iter,
            tol=self.tol,
            verbose=self.verbose,
        )
        self.components_ = learned.components
        # At least one, as scikit-learn counts an estimator with max_iter.
        self.n_iter_ = max(learned.n_iter, 1)
        self.loss_ = learned.loss
        return self

    def _n_components(self, n_features):
        """The dimension of the map, checked against ``X`` and ``init``."""
        n_components = n_features if self.n_components is None else self.n_components
        if n_components > n_features:
            raise ValueError(
                f"n_components={n_components} exceeds the {n_features} features "
                "of X; use n_components <= n_features."
            )
        if isinstance(self.init, np.ndarray):
            init = self.init
            if init.ndim != 2 or init.shape[1] != n_features:
                raise ValueError(
                    f"init must have shape (n_components, {n_features}); got "
                    f"{init.shape}."
                )
            if self.n_components is not None and init.shape[0] != n_components:
                raise ValueError(
                    f"init has {init.shape[0]} rows for n_components={n_components}."
                )
            if not np.all(np.isfinite(init)):
                raise ValueError("init must hold finite numbers.")
            n_components = init.shape[0]
        return n_components

    def transform(self, X):
        """Map the keys: ``X @ components_.T``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Keys or queries.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components)
            The mapped keys, in units of unit width.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return X.astype(np.float64, copy=False) @ self.components_.T

    @property
    def _n_features_out(self):
        """The number of mapped features, for ``get_feature_names_out``."""
        return self.components_.shape[0]

    def __setstate__(self, state):
        super().__setstate__(state)
        restore_added_parameters(self)
        _check_loaded_map(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _check_loaded_map(projection):
    """Refuse a loaded map that is not a finite matrix of the features."""
    state = vars(projection)
    if "components_" not in state:
        return  # unfitted
    components = state["components_"]
    n_features = state.get("n_features_in_")
    if (
        not isinstance(components, np.ndarray)
        or components.dtype != np.float64
        or components.ndim != 2
        or components.shape[1] != n_features
        or not np.all(np.isfinite(components))
    ):
        _refuse(
            "components_",
            f"is not a finite float64 matrix of {n_features!r} columns",
        )
