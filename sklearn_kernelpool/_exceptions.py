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
