"""The methods of :class:`KernelAttentionRegressorCV` that ``best_estimator_``
answers: each takes the signature of the :class:`KernelAttentionRegressor`
method it calls, so that the two cannot drift apart."""

import inspect
import warnings

from sklearn.utils.validation import check_is_fitted

from .._estimator._base import check_flag
from .._estimator._input_kinds import validate_query_input
from .._estimator._linear_columns import validate_linear_input
from .._estimator._partially_linear_methods import (
    is_partially_linear,
    refuse_smoother_diagnostics,
)
from .._estimator._persistence import check_loaded_search, restore_added_parameters
from .._estimator._pool_estimator import PoolEstimatorMixin
from .._estimator._regression_inspection import InspectionMethods
from .._estimator._regression_intervals import IntervalMethods
from .._estimator._regression_paths import PredictionMethods
from .._inference import _gradient
from .._inference._diagnostics import smoother_diagnostics
from .._utils._warnings import EmptyNeighborhoodWarning, LocalLinearFallbackWarning
from ._large_dask import is_dask


def _quiet_diagnostics(estimator):
    """:func:`.._inference._diagnostics.smoother_diagnostics` without the fallback
    warnings of the in-sample fits: as while scoring by leave-one-out, the
    fallbacks of narrow candidates are no news (``predict`` still warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return smoother_diagnostics(estimator)


def _delegate(function, doc, through_map=None):
    """The method of the search named as ``function`` (a method of
    :class:`KernelAttentionRegressor`, defined in :mod:`.._estimator`),
    documented by ``doc``: that of ``best_estimator_`` on the queries
    validated by the search, with the signature of ``function``.
    ``through_map(search, Z, **arguments)`` answers instead where the search
    kept a map (``projection_``), ``Z`` the mapped queries."""
    name = function.__name__
    signature = inspect.signature(function)

    def method(self, /, *args, **kwargs):
        try:
            arguments = signature.bind(self, *args, **kwargs).arguments
        except TypeError as error:  # as Python words it for a plain method
            raise TypeError(f"{type(self).__name__}.{name}() {error}") from None
        del arguments["self"]
        X = self._best_queries(arguments.pop("X"), name)
        if through_map is not None and getattr(self, "projection_", None) is not None:
            return through_map(self, X, **arguments)
        return getattr(self.best_estimator_, name)(X, **arguments)

    method.__name__ = name
    method.__qualname__ = f"BestEstimatorMethods.{name}"
    method.__doc__ = doc
    method.__signature__ = signature
    return method


def _gradient_through_map(search, Z, return_se=False):
    """The gradient (and standard errors) of the search's fit on the mapped
    queries ``Z``, in the original features (:mod:`.._inference._gradient`)."""
    check_flag("return_se", return_se)
    best = search.best_estimator_
    components = search.projection_.components_
    gradient, se = _gradient.predict_gradient(best, Z, return_se, components)
    if best.values_.ndim == 1:
        gradient = gradient[..., 0]
        se = None if se is None else se[..., 0]
    return (gradient, se) if return_se else gradient


class BestEstimatorMethods:
    """What a fitted :class:`KernelAttentionRegressorCV` answers with its
    ``best_estimator_``: predictions, intervals, gradients and its effective
    degrees of freedom."""

    @property
    def effective_df_(self):
        """The effective degrees of freedom of ``best_estimator_``.

        The trace of its smoother matrix on the training data (see
        :meth:`KernelAttentionRegressor.smoother_diagnostics`), computed on
        first access by one pass over the pairs of training keys within
        ``working_memory`` (known from the search with ``scoring="gcv"`` or
        ``"aicc"``, which computes it in ``fit`` for kept per-feature
        widths), so that ``fit`` does not pay for it otherwise.
        """
        check_is_fitted(self)
        if is_partially_linear(self.best_estimator_):
            # (an AttributeError: hasattr says it has none)
            refuse_smoother_diagnostics(self.best_estimator_, AttributeError)
        if getattr(self, "_effective_df", None) is None:
            self._effective_df = _quiet_diagnostics(self.best_estimator_).effective_df
        return self._effective_df

    def __setstate__(self, state):
        super().__setstate__(state)
        restore_added_parameters(self)
        check_loaded_search(self)

    def _best_queries(self, X, method):
        """``X`` validated as the queries of this search's ``method``, for
        ``best_estimator_`` (which reads the categories of categorical
        features from ``X`` as given)."""
        check_is_fitted(self)
        if is_dask(X) and getattr(self, "projection_", None) is None:
            return X  # (best_estimator_ maps itself over the chunks)
        if getattr(self, "linear_features_", None) is not None:
            validate_linear_input(self, X)
            return X
        queries = validate_query_input(self, X, method)
        if getattr(self, "projection_", None) is not None:
            return self.projection_.transform(queries.X)
        return X if queries.kind == "categorical" else queries.X

    predict = _delegate(
        PredictionMethods.predict,
        """Predict with ``best_estimator_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        return_std : bool, default=False
            Whether to return the local spread of the training values, as
            :meth:`KernelAttentionRegressor.predict` does.

        return_se : bool, default=False
            Whether to return the standard error of the fitted mean, as
            :meth:`KernelAttentionRegressor.predict` does, at the selected
            parameters (the selection itself is not accounted for).

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            The pooled values.

        y_std, y_se : ndarray of the shape of ``y_pred``
            Only with ``return_std=True``, respectively ``return_se=True``,
            in this order.
        """,
    )

    confidence_interval = _delegate(
        IntervalMethods.confidence_interval,
        """Confidence intervals of the mean function, by ``best_estimator_``.

        See :meth:`KernelAttentionRegressor.confidence_interval` for the
        parameters and the returned ``(lower, upper)``. The intervals hold
        the selected parameters fixed: they do not account for the
        selection itself.
        """,
    )

    prediction_interval = _delegate(
        IntervalMethods.prediction_interval,
        """Prediction intervals of new observations, by ``best_estimator_``.

        See :meth:`KernelAttentionRegressor.prediction_interval` for the
        parameters and the returned ``(lower, upper)``. The leave-one-out
        fits hold the selected parameters fixed: the coverage guarantee of
        jackknife+ assumes parameters chosen without the data, and the
        selection of one bandwidth out of a grid is not accounted for.
        """,
    )

    predict_gradient = _delegate(
        InspectionMethods.predict_gradient,
        """The gradient of the fit at each query, by ``best_estimator_``.

        See :meth:`KernelAttentionRegressor.predict_gradient` for the
        parameters and what is returned. With a kept map (``projection_``),
        the gradient and its standard errors in the original features, by
        the chain rule through the map, exactly.
        """,
        through_map=_gradient_through_map,
    )

    attention_weights = _delegate(
        PoolEstimatorMixin.attention_weights,
        """The attention weights of ``best_estimator_`` over its training rows.

        See :meth:`KernelAttentionRegressor.attention_weights` for the
        parameters and what is returned; with a kept map, of the mapped
        queries.
        """,
    )
