"""Warnings of the package."""


class EmptyNeighborhoodWarning(UserWarning):
    """Warn that queries had no training key inside a compact kernel's support.

    Such queries get the estimator's ``on_empty`` fallback: the value of the
    nearest key, the weighted mean of the training values, or NaN. A larger
    bandwidth, or a kernel with unbounded support, avoids the fallback.

    Examples
    --------
    >>> import warnings
    >>> from sklearn_kernelpool import EmptyNeighborhoodWarning
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5)
    >>> reg = reg.fit([[0.0], [1.0]], [0.0, 1.0])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg.predict([[10.0]])
    array([1.])
    >>> caught[0].category is EmptyNeighborhoodWarning
    True
    """


class LocalLinearFallbackWarning(UserWarning):
    """Warn that local-linear fits fell back to the local mean.

    With ``degree=1`` a query's local design is singular when fewer than
    ``n_features + 1`` keys in general position carry its attention weight
    (numerically: the smallest eigenvalue of the weighted covariance of the
    keys is within rounding error of zero). The slope is then undetermined,
    and such queries get the local-constant (``degree=0``) prediction, as do
    their attention weights and standard deviations. A larger bandwidth
    avoids the fallback.

    Examples
    --------
    >>> import warnings
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> from sklearn_kernelpool import LocalLinearFallbackWarning
    >>> reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.6, degree=1)
    >>> reg = reg.fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 4.0])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg.predict([[0.1], [0.5]])
    array([0. , 0.5])
    >>> caught[0].category is LocalLinearFallbackWarning
    True
    """
