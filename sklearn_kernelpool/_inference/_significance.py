"""significance_test: whether a feature matters in a kernel regression.

The consistent nonparametric significance test of Racine (1997) for the
continuous features and of Racine, Hart and Li (2006) for the categorical
ones, with the widths of the fitted regressor held fixed (R np's
``npsigtest``, ``boot.type="I"``) and the null distribution by the wild
bootstrap from the fit without the feature. The fit and its gradient being
linear in the values for fixed widths, every draw is one more output of the
same fit: the draws of a group are one pass of the engine.
"""

from numbers import Integral

import numpy as np
from scipy import sparse
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, validate_params
from sklearn.utils.validation import _num_features, check_is_fitted

from .._binned._dask import check_holds_rows
from .._engine._array_api import is_array_api_pool
from .._utils._categorical_input import (
    _is_dataframe,
    fitted_categorical_mask,
)
from .._utils._working_memory import row_batches
from ._gradient import feature_gradients
from ._significance_null import frozen_params, null_fit
from ._significance_result import SignificanceResult


@validate_params(
    {
        "estimator": [HasMethods(["fit", "predict_gradient"])],
        "X": ["array-like", "sparse matrix"],
        "y": ["array-like"],
        "features": ["array-like", Integral, str, None],
        "n_resamples": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def significance_test(
    estimator, X, y, features=None, n_resamples=399, random_state=None
):
    """Test whether each feature matters in a kernel regression.

    The nonparametric significance test of Racine (1997) [1]_ for a
    continuous feature and of Racine, Hart and Li (2006) [2]_ for a
    categorical one: the null hypothesis is that the regression function
    ``E[y | x]`` does not depend on feature ``j``. With ``f`` the fit of
    ``estimator``'s parameters and widths on ``(X, y)`` and ``w_i`` its
    sample weights (1 without), the statistic is, for a continuous feature,
    the weighted mean squared partial derivative at the data::

        lambda_j = sum_i w_i (d f / d x_j (x_i))**2 / sum_i w_i

    with the derivatives of :meth:`KernelAttentionRegressor.predict_gradient`
    (for ``degree=1`` the local-linear slopes, as in [1]_, for ``degree=2``
    the linear coefficients of the local quadratic), and for a
    categorical feature of categories ``C_j`` the weighted mean squared
    change of the fit when ``x_ij`` is set to each other category::

        lambda_j = sum_i w_i sum_{c in C_j} (f(x_i | x_ij = c) - f(x_i))**2
                   / sum_i w_i.

    The null distribution is that of the wild bootstrap under the null
    hypothesis, with the widths fixed (R np's ``npsigtest``,
    ``boot.type="I"``): ``g`` is the fit without feature ``j``, with the
    same widths of the other features, ``L`` its smoother matrix on the
    data, ``u_i = |y_i - g(x_i)| / sqrt(1 - 2 L_ii + sum_k L_ik**2)`` its
    residuals rescaled to the variance of the noise (the HC2-type
    transformation that Davidson and Flachaire, 2008 [3]_, recommend for
    the wild bootstrap; the residual variances of
    ``predict(return_se=True)``), and draw ``b`` the statistic of the fit,
    with the widths of ``f``, of ``y*_b = g(x_i) + u_i v_ib`` with
    Rademacher multipliers ``v_ib = +-1`` of probability 1/2 each [3]_; the
    p-value is ``(1 + #{b : lambda*_b >= lambda_j}) / (n_resamples + 1)``.

    Parameters
    ----------
    estimator : KernelAttentionRegressor or KernelAttentionRegressorCV
        A fitted regressor, whose parameters, fitted ``bandwidth_`` and
        ``categorical_bandwidth_`` and sample weights are used (those of
        ``best_estimator_`` for a search).

    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The data, given as to ``estimator.fit``: typically its training
        data. With sample weights, ``n_samples`` rows, one per weight.

    y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        The values. Each output is tested on its own.

    features : int, str, array-like of int or str, or None, default=None
        The features to test: indices, or feature names of an estimator
        fitted on string column names; None tests every feature.

    n_resamples : int, default=399
        The number of bootstrap draws ``B``; the smallest p-value is
        ``1 / (B + 1)``.

    random_state : int, RandomState instance or None, default=None
        The seed of the multipliers. The draws are the same for every
        subset of ``features`` and every ``working_memory``.

    Returns
    -------
    result : SignificanceResult
        ``statistics``, ``pvalues``, ``null_statistics``, ``features``,
        ``categorical`` and ``n_resamples``; printing it shows a table.

    Raises
    ------
    ValueError
        For a partially linear fit (``linear_features``), a robust fit
        (``robust_iterations > 0``), a search with a learned map
        (``projection_``), a fit on arrays of another array API
        namespace or on dask arrays, a continuous feature of a ``degree=0``
        fit with a callable kernel or a kernel flat inside its support
        (``"boxcar"``, ``"constant"``: its derivative is 0 almost
        everywhere), and data that do not match the estimator.

    See Also
    --------
    KernelAttentionRegressor.predict_gradient : The partial derivatives.

    Notes
    -----
    The widths are those of ``estimator`` for every fit: the null fit
    drops feature ``j`` and its own width (a per-feature bandwidth or
    ``n_bins`` loses its ``j``-th entry, an isotropic one is kept, a
    categorical feature's ``lambda_j`` goes with it; with one feature the
    null fit is the weighted mean of ``y``) and keeps the other features'
    kinds: ``categorical_features`` and ``ordered_features``, by indices,
    mask or names, select the same features among the remaining columns
    (an ordered feature is tested as the others). The statistic of every
    draw comes from the full model, whose fit and gradient are linear in
    the values: all the draws are the outputs of one fit, and their
    gradients are computed in groups of draws within scikit-learn's
    ``working_memory``. The draws use the same multipliers for every
    feature and every output.

    The test is consistent and of the right size asymptotically; with the
    widths held fixed it does not account for their selection (the
    ``boot.type="II"`` of ``npsigtest``), which a search on the same data
    makes somewhat liberal in small samples. With adaptive widths
    (``n_neighbors``) the null fit keeps ``n_neighbors`` and the gradient
    holds each query's width fixed (see ``predict_gradient``).

    References
    ----------
    .. [1] J. Racine, "Consistent significance testing for nonparametric
       regression", Journal of Business & Economic Statistics 15 (1997).
    .. [2] J. Racine, J. Hart and Q. Li, "Testing the significance of
       categorical predictor variables in nonparametric regression models",
       Econometric Reviews 25 (2006).
    .. [3] R. Davidson and E. Flachaire, "The wild bootstrap, tamed at
       last", Journal of Econometrics 146 (2008).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionRegressor, significance_test
    >>> rng = np.random.default_rng(1)
    >>> X = rng.uniform(0, 1, (200, 2))
    >>> y = np.sin(4 * X[:, 0]) + rng.normal(scale=0.3, size=200)
    >>> reg = KernelAttentionRegressor(bandwidth=[0.1, 0.2], degree=1).fit(X, y)
    >>> result = significance_test(reg, X, y, n_resamples=99, random_state=0)
    >>> result.pvalues
    array([0.01, 0.38])
    >>> print(result)
    feature  kind        statistic  p-value
    0        continuous  7.128      0.01
    1        continuous  0.07688    0.38
    (wild bootstrap, 99 resamples)
    """
    regressor = _tested_regressor(estimator)
    X = _as_table(X, regressor)
    tested, names = _tested_features(regressor, features)
    mask = fitted_categorical_mask(regressor)
    _check_gradients(regressor, tested[~mask[tested]])
    params = frozen_params(regressor, mask)
    weights = _weights(regressor, X)
    full = clone(regressor).set_params(**params)
    full.fit(X, y, regressor.sample_weight_)
    Y = np.asarray(full.values_, dtype=np.float64)
    Y = Y.reshape(len(Y), -1)
    test = _Statistics(full, X, weights, tested, mask)
    statistics = test(np.broadcast_to(Y[:, None, :], (len(Y), len(tested), Y.shape[1])))
    nulls = [null_fit(regressor, params, X, Y, j, mask) for j in tested]
    rng = check_random_state(random_state)
    signs = rng.randint(0, 2, size=(n_resamples, len(Y))).astype(np.int8) * 2 - 1
    draws = _null_statistics(test, Y, nulls, signs)
    if Y.shape[1] == 1 and full.values_.ndim == 1:
        statistics, draws = statistics[:, 0], draws[:, 0]
    return SignificanceResult(statistics, draws, names, mask[tested])


# -- the inputs ---------------------------------------------------------------
def _tested_regressor(estimator):
    """The fitted regressor of ``estimator`` whose fit can be tested."""
    check_is_fitted(estimator)
    if hasattr(estimator, "best_estimator_"):  # KernelAttentionRegressorCV
        if getattr(estimator, "projection_", None) is not None:
            raise ValueError(
                "significance_test does not test a search with a learned map "
                "(projection_): its regressor pools mapped features, not the "
                "features of X. Fit the search with projection=None."
            )
        estimator = estimator.best_estimator_
    if not hasattr(estimator, "values_"):
        raise ValueError(
            "significance_test tests a fitted KernelAttentionRegressor or "
            f"KernelAttentionRegressorCV; got a {type(estimator).__name__}."
        )
    if getattr(estimator, "kernel_regressor_", None) is not None:
        raise ValueError(
            "significance_test does not test a partially linear fit "
            "(linear_features); fit the estimator with linear_features=None, "
            "or read the linear columns' coef_ and coef_se_."
        )
    if getattr(estimator, "robustness_weights_", None) is not None:
        raise ValueError(
            "significance_test does not test a robust fit (robust_iterations="
            f"{estimator.robust_iterations}): the robustness weights of each "
            "bootstrap draw would come from its own residuals, which one "
            "multi-output pass cannot hold. Fit with robust_iterations=0."
        )
    check_holds_rows(estimator, "significance_test")
    if is_array_api_pool(estimator._pool):
        raise ValueError(
            "significance_test works on NumPy arrays only; this estimator was "
            "fitted on arrays of another array API namespace."
        )
    return estimator


def _as_table(X, regressor):
    """``X`` as an array or DataFrame whose columns can be dropped and set,
    of the estimator's number of features."""
    if not (_is_dataframe(X) or sparse.issparse(X)):
        X = np.asarray(X)
        if X.dtype.kind in "US":
            X = X.astype(object)  # a category may be longer than the others
    if X.ndim != 2 or _num_features(X) != regressor.n_features_in_:
        raise ValueError(
            f"X must have shape (n_samples, {regressor.n_features_in_}), the "
            f"features of the estimator; got shape {X.shape}."
        )
    names = getattr(regressor, "feature_names_in_", None)
    if names is not None and _is_dataframe(X):
        if list(X.columns) != list(names):
            raise ValueError(
                "X must have the feature names of the estimator, in its order: "
                f"{list(names)}; got {list(X.columns)}."
            )
    return X


def _tested_features(regressor, features):
    """The indices of the tested features, and their names (or indices)."""
    names = getattr(regressor, "feature_names_in_", None)
    d = regressor.n_features_in_
    if features is None:
        tested = np.arange(d)
    else:
        given = np.atleast_1d(np.asarray(features, dtype=object))
        if given.ndim != 1 or given.size == 0:
            raise ValueError(
                "features must be a feature or a non-empty 1-D array-like of "
                f"distinct features; got {features!r}."
            )
        tested = np.array([_feature_index(f, names, d) for f in given], dtype=int)
        if len(np.unique(tested)) != len(tested):
            raise ValueError(
                "features must be a feature or a non-empty 1-D array-like of "
                f"distinct features; got {features!r}."
            )
    return tested, (tested if names is None else np.asarray(names)[tested])


def _feature_index(feature, names, d):
    """The index of one feature, given by its index or its name."""
    if isinstance(feature, str):
        if names is None or feature not in list(names):
            raise ValueError(
                f"features names {feature!r}, which is not a feature name of "
                f"the estimator; its names are {_listed(names)}."
            )
        return list(names).index(feature)
    if isinstance(feature, Integral | np.integer) and not isinstance(feature, bool):
        if -d <= feature < d:
            return int(feature) % d
    raise ValueError(
        f"features must hold indices in [0, {d}) or feature names; got {feature!r}."
    )


def _listed(names):
    return None if names is None else list(names)


def _check_gradients(regressor, continuous):
    """Refuse the continuous features of a fit whose gradient says nothing."""
    if len(continuous) == 0 or regressor.degree >= 1:
        return
    kernel = regressor._pool.kernel
    slope = kernel.log_slope
    if slope is None:
        raise ValueError(
            "significance_test of a continuous feature with degree=0 needs the "
            f"derivative of the kernel; the callable kernel {kernel.name!r} has "
            "none. Use a registered kernel, or degree=1."
        )
    if np.all(slope(np.array([0.01, 0.25, 0.81])) == 0):
        raise ValueError(
            f"The kernel {kernel.name!r} is flat inside its support: the "
            "derivative of its degree=0 fit is 0 almost everywhere, which tests "
            "nothing. Use degree=1 or a kernel with a slope to test the "
            "continuous features."
        )


def _weights(regressor, X):
    weights = regressor.sample_weight_
    n = X.shape[0]
    if weights is None:
        return np.ones(n)
    if len(weights) != n:
        raise ValueError(
            f"The estimator was fitted with {len(weights)} sample weights, and "
            f"X has {n} rows: significance_test weighs the rows of X with them, "
            "so X must be the training data."
        )
    return np.asarray(weights, dtype=np.float64)


def _with_category(X, j, category):
    """``X`` with every row's feature ``j`` set to ``category``."""
    if _is_dataframe(X):
        import pandas as pd

        column = pd.Series([category] * len(X), index=X.index, dtype=X.dtypes.iloc[j])
        X = X.copy()
        X.isetitem(j, column)
        return X
    X = X.copy()
    X[:, j] = category
    return X


# -- the statistics -----------------------------------------------------------
class _Statistics:
    """The statistics ``lambda_j`` of targets of the full model.

    Called with ``targets`` of shape (n_samples, n_tested, n_columns), the
    values of the ``k``-th tested feature in ``targets[:, k]``, it returns
    the statistic of each feature for each column, of shape
    (n_tested, n_columns): from one pass of the gradients for the continuous
    features, and one fit and its predictions per category for the
    categorical ones.
    """

    def __init__(self, full, X, weights, tested, mask):
        self.full, self.X, self.tested, self.mask = full, X, tested, mask
        self.weights = weights / weights.sum()
        self.positive = weights > 0
        # The engine's columns: the continuous features, in order.
        self.column = np.cumsum(~mask) - 1
        self.category = np.cumsum(mask) - 1

    def __call__(self, targets):
        out = np.empty((len(self.tested), targets.shape[2]))
        continuous = np.flatnonzero(~self.mask[self.tested])
        if len(continuous):
            features = self.column[self.tested[continuous]]
            grads = feature_gradients(
                self.full, self.X, targets[:, continuous], features
            )
            out[continuous] = self._mean_square(grads)
        for k in np.flatnonzero(self.mask[self.tested]):
            out[k] = self._categorical(self.tested[k], targets[:, k])
        if not np.all(np.isfinite(out)):
            raise ValueError(
                "The statistics are not finite: some rows of X have no key of "
                "positive weight (on_empty='nan'). Test on the training data, "
                "or fit with another on_empty."
            )
        return out

    def _mean_square(self, values):
        """The weighted mean over the rows of ``values ** 2``, the rows of
        weight zero (whatever their value) left out."""
        values[~self.positive] = 0.0
        np.square(values, out=values)
        return np.tensordot(self.weights, values, axes=(0, 0))

    def _categorical(self, j, values):
        fit = clone(self.full).fit(self.X, values, self.full.sample_weight_)
        base = np.asarray(fit.predict(self.X), dtype=np.float64).reshape(values.shape)
        total = np.zeros(values.shape[1])
        for category in self.full.categories_[self.category[j]]:
            other = fit.predict(_with_category(self.X, j, category))
            other = np.asarray(other, dtype=np.float64).reshape(values.shape)
            other -= base
            total += self._mean_square(other)
        return total


def _null_statistics(test, Y, nulls, signs):
    """The statistics of the wild bootstrap draws, of shape
    (n_tested, n_outputs, n_resamples), in groups of draws within
    ``working_memory``."""
    n, n_outputs = Y.shape
    n_tested, n_resamples = len(nulls), len(signs)
    # (n, tested, outputs, 1)
    fitted = np.stack([null[0] for null in nulls], axis=1)[:, :, :, None]
    residuals = np.stack([null[1] for null in nulls], axis=1)[:, :, :, None]
    # The targets, their gradients and the engine's temporaries per draw.
    draw_bytes = 8 * n * n_outputs * (3 * n_tested + 4)
    draws = np.empty((n_tested, n_outputs, n_resamples))
    for group in row_batches(n_resamples, draw_bytes):
        v = signs[group].T[:, None, None, :]  # (n, 1, 1, m)
        targets = fitted + residuals * v  # (n, tested, outputs, m)
        m = targets.shape[3]
        statistics = test(targets.reshape(n, n_tested, n_outputs * m))
        draws[:, :, group] = statistics.reshape(n_tested, n_outputs, m)
    return draws
