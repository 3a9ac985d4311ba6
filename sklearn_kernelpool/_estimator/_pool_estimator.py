"""What the estimators that hold a fitted engine share: the attention weights
of the queries, the check of the queries' array namespace, and pickling."""

from sklearn.utils.validation import check_is_fitted

from .._binned._dask import check_holds_rows
from .._engine._array_api import is_array_api_pool
from . import _partially_linear_methods as _partially_linear
from ._array_api import array_api_namespace, check_same_namespace
from ._base import check_flag
from ._input_kinds import validate_query_input
from ._persistence import (
    check_loaded_estimator,
    check_picklable_kernel,
    deepcopy_estimator,
    restore_added_parameters,
)


class PoolEstimatorMixin:
    """:meth:`attention_weights`, and the pickling, of
    :class:`KernelAttentionRegressor` and :class:`KernelAttentionClassifier`
    (``fit`` sets their engine ``_pool``, training keys ``keys_`` and values
    ``values_``)."""

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
            The weights the estimator pools ``values_`` with, in the dtype of
            the training ``X``: ``predict(X)`` of the regressor, and
            ``predict_proba(X)`` of the classifier, equals
            ``weights @ values_`` up to rounding. Every row sums to one,
            fallbacks included (a row of NaN under ``on_empty="nan"``), and
            rows of sample weight zero get weight 0. With ``degree=0`` (and
            for the classifier) they are non-negative; with ``degree=1`` they
            are the equivalent-kernel weights of the local-linear fit, which
            may be negative.

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

        A classifier's weights pool its one-hot encoded labels:

        >>> from sklearn_kernelpool import KernelAttentionClassifier
        >>> clf = KernelAttentionClassifier(bandwidth=5.0).fit(X, X[:, 0] > 50)
        >>> w = clf.attention_weights([[48.0]])
        >>> bool(np.allclose(w @ clf.values_, clf.predict_proba([[48.0]])))
        True
        """
        if _partially_linear.is_partially_linear(self):
            return _partially_linear.attention_weights(self, X, sparse)
        check_is_fitted(self)
        check_holds_rows(self, "attention_weights")
        check_flag("sparse", sparse)
        if sparse and is_array_api_pool(self._pool):
            raise ValueError(
                "sparse=True returns a SciPy sparse array, for NumPy input only; "
                "use sparse=False with arrays of other namespaces."
            )
        queries = validate_query_input(self, X, "attention_weights")
        if queries.kind == "array_api":
            return self._pool.attention_weights(queries.X)
        return self._pool.attention_weights(
            queries.X, n_jobs=self.n_jobs, sparse=sparse
        )

    def _check_numpy_queries(self, X, method):
        """Refuse non-NumPy queries to an estimator fitted on NumPy arrays
        (as :func:`._input_kinds.validate_query_input` does, for the methods
        that check them before the NumPy engine validates them)."""
        if array_api_namespace(X) is not None:
            check_same_namespace(self, X, method)

    def __getstate__(self):
        check_picklable_kernel(self)
        return super().__getstate__()

    def __setstate__(self, state):
        super().__setstate__(state)
        restore_added_parameters(self)
        check_loaded_estimator(self)

    def __deepcopy__(self, memo):
        return deepcopy_estimator(self, memo)
