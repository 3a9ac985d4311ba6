"""The fitted mean function along one feature, with its bands."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_regressor
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from ._common import _check_level, _fitted, _new_axes, check_matplotlib


def _grid_queries(X, X_array, index, grid, categorical):
    """Queries along feature ``index``: the grid there, each continuous feature
    at its median and each categorical one at its most frequent value (the
    first such row's value), in the form of ``X`` (DataFrame or array)."""
    n = len(grid)
    held = {}
    for j in range(X_array.shape[1]):
        if j == index:
            held[j] = grid
        elif categorical[j]:
            values, inverse, counts = np.unique(
                X_array[:, j].astype(str), return_inverse=True, return_counts=True
            )
            row = int(np.flatnonzero(inverse.ravel() == np.argmax(counts))[0])
            held[j] = row  # a row position: keeps the value and its dtype
        else:
            held[j] = np.full(n, np.median(X_array[:, j].astype(np.float64)))
    if hasattr(X, "iloc"):
        queries = X.iloc[np.zeros(n, dtype=int)].reset_index(drop=True)
        for j, value in held.items():
            name = X.columns[j]
            if categorical[j]:
                queries[name] = X[name].iloc[np.full(n, value)].reset_index(drop=True)
            else:
                queries[name] = value
        return queries
    queries = np.array(X_array[np.zeros(n, dtype=int)])
    if queries.dtype.kind not in "fO":
        queries = queries.astype(np.float64)
    for j, value in held.items():
        queries[:, j] = X_array[value, j] if categorical[j] else value
    return queries


def _check_arguments(owner, estimator, confidence, prediction, grid_resolution):
    """Refuse an unfitted or non-regressor estimator, bad levels and grids."""
    check_is_fitted(estimator)
    if not is_regressor(estimator):
        raise TypeError(f"{owner} draws regressors; got {type(estimator).__name__}.")
    _check_level("confidence", confidence)
    _check_level("prediction", prediction)
    if (
        not isinstance(grid_resolution, numbers.Integral)
        or isinstance(grid_resolution, bool)
        or grid_resolution < 2
    ):
        raise ValueError(
            f"grid_resolution must be an integer >= 2; got {grid_resolution!r}."
        )


def _as_2d(X):
    """``X`` as a dense 2-D array."""
    X_array = X.toarray() if sp.issparse(X) else np.asarray(X)
    if X_array.ndim != 2:
        raise ValueError(f"X must be 2-D; got an array of shape {X_array.shape}.")
    return X_array


def _feature_index(feature, names, n_features):
    """The column index of ``feature``, given as an index or a feature name."""
    if isinstance(feature, str):
        if names is None or feature not in list(names):
            raise ValueError(
                f"feature {feature!r} is not a feature name of the estimator; "
                f"accepted: {None if names is None else list(names)} or a "
                f"column index in [0, {n_features})."
            )
        return list(names).index(feature)
    if isinstance(feature, numbers.Integral) and not isinstance(feature, bool):
        if not -n_features <= feature < n_features:
            raise ValueError(
                f"feature must be a column index in [0, {n_features}) or a "
                f"feature name; got {feature!r}."
            )
        return int(feature) % n_features
    raise ValueError(
        f"feature must be a column index or a feature name; got {feature!r}."
    )


def _checked_targets(X_array, y, target):
    """``y`` as a float array, checked against ``X`` and the output ``target``."""
    check_consistent_length(X_array, y)
    y_array = np.asarray(y, dtype=np.float64)
    n_outputs = 1 if y_array.ndim == 1 else y_array.shape[1]
    if (
        not isinstance(target, numbers.Integral)
        or isinstance(target, bool)
        or not 0 <= target < n_outputs
    ):
        raise ValueError(
            f"target must be an output index in [0, {n_outputs}); got {target!r}."
        )
    return y_array


def _is_categorical(estimator, n_features):
    """Which features the fitted model treats as categorical."""
    fitted_model = getattr(estimator, "best_estimator_", estimator)
    categorical = getattr(fitted_model, "is_categorical_", None)
    if categorical is None:
        categorical = np.zeros(n_features, dtype=bool)
    return categorical


def _output(values, target):
    """The column ``target`` of multi-output values; one output as it is."""
    values = np.asarray(values)
    return values if values.ndim == 1 else values[:, target]


def _confidence_band(
    estimator,
    grid_X,
    target,
    owner,
    *,
    confidence,
    method,
    simultaneous,
    random_state,
):
    """``(lower, upper)`` of the confidence band on the grid; None for none."""
    if confidence is None:
        return None
    model = _fitted(estimator, "confidence_interval", owner)
    lower, upper = model.confidence_interval(
        grid_X,
        level=confidence,
        method=method,
        simultaneous=simultaneous,
        random_state=random_state,
    )
    return (_output(lower, target), _output(upper, target))


def _prediction_band(estimator, grid_X, target, owner, prediction):
    """``(lower, upper)`` of the prediction band on the grid; None for none."""
    if prediction is None:
        return None
    model = _fitted(estimator, "prediction_interval", owner)
    lower, upper = model.prediction_interval(grid_X, level=prediction)
    return (_output(lower, target), _output(upper, target))


def _feature_label(names, columns, index, n_features):
    """The label of the horizontal axis: the feature's name, or its column."""
    if names is not None:
        return str(names[index])
    if columns is not None:
        return str(columns[index])
    return f"X[:, {index}]" if n_features > 1 else "x"


class FitDisplay:
    """The data, the fitted curve along one feature and its bands.

    The picture statisticians draw first: the training values against one
    feature, the fit on a grid along it (the other features at their
    medians), the confidence band of the mean function and, optionally, the
    prediction band of new observations (categorical features at their most
    frequent value). Build it with
    :meth:`from_estimator`, or from arrays and :meth:`plot`.

    Parameters
    ----------
    grid : ndarray of shape (n_grid,)
        The values of the feature along which the fit is drawn.
    fitted : ndarray of shape (n_grid,)
        The fit on the grid.
    x : ndarray of shape (n_samples,)
        The feature of the data points.
    y : ndarray of shape (n_samples,)
        Their target values.
    confidence_band : tuple of two ndarrays of shape (n_grid,), default=None
        ``(lower, upper)`` of the confidence band; None for no band.
    prediction_band : tuple of two ndarrays of shape (n_grid,), default=None
        ``(lower, upper)`` of the prediction band; None for no band.
    confidence : float, default=None
        The level of the confidence band, for its label.
    prediction : float, default=None
        The level of the prediction band, for its label.
    feature_name : str, default=None
        The label of the horizontal axis.

    Attributes
    ----------
    grid_X : ndarray or DataFrame of shape (n_grid, n_features)
        The queries of the grid, in the form of ``X``; set by
        :meth:`from_estimator` only.
    scatter_ : matplotlib.collections.PathCollection
        The data points.
    line_ : matplotlib.lines.Line2D
        The fitted curve.
    band_ : matplotlib.collections.PolyCollection or None
        The confidence band.
    prediction_band_ : matplotlib.collections.PolyCollection or None
        The prediction band.
    ax_ : matplotlib.axes.Axes
        The axes.
    figure_ : matplotlib.figure.Figure
        The figure of the axes.

    See Also
    --------
    KernelAttentionRegressor.confidence_interval : The confidence band.
    KernelAttentionRegressor.prediction_interval : The prediction band.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import FitDisplay, KernelAttentionRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, (100, 1))
    >>> y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=100)
    >>> reg = KernelAttentionRegressor(bandwidth=0.4, degree=1).fit(X, y)
    >>> display = FitDisplay.from_estimator(reg, X, y, prediction=0.9)
    >>> display.line_.get_xydata().shape
    (100, 2)
    >>> lower, upper = display.confidence_band
    >>> bool(np.all(lower <= display.fitted) and np.all(display.fitted <= upper))
    True
    """

    def __init__(
        self,
        *,
        grid,
        fitted,
        x,
        y,
        confidence_band=None,
        prediction_band=None,
        confidence=None,
        prediction=None,
        feature_name=None,
    ):
        self.grid = grid
        self.fitted = fitted
        self.x = x
        self.y = y
        self.confidence_band = confidence_band
        self.prediction_band = prediction_band
        self.confidence = confidence
        self.prediction = prediction
        self.feature_name = feature_name

    def plot(
        self,
        *,
        ax=None,
        scatter_kw=None,
        line_kw=None,
        band_kw=None,
        prediction_band_kw=None,
    ):
        """Draw the data, the fit and the bands.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, default=None
            The axes to draw on; None for new axes of a new figure.
        scatter_kw, line_kw, band_kw, prediction_band_kw : dict, default=None
            More keyword arguments of :meth:`~matplotlib.axes.Axes.scatter`,
            :meth:`~matplotlib.axes.Axes.plot` and (for the two bands)
            :meth:`~matplotlib.axes.Axes.fill_between`.

        Returns
        -------
        display : FitDisplay
            The display, its artists stored as attributes.
        """
        check_matplotlib(f"{type(self).__name__}.plot")
        if ax is None:
            ax = _new_axes()
        self.prediction_band_ = None
        if self.prediction_band is not None:
            label = "prediction band"
            if self.prediction is not None:
                label = f"{self.prediction:.0%} {label}"
            kw = {"alpha": 0.15, "color": "C1", "linewidth": 0, "label": label}
            kw.update(prediction_band_kw or {})
            self.prediction_band_ = ax.fill_between(
                self.grid, *self.prediction_band, **kw
            )
        self.band_ = None
        if self.confidence_band is not None:
            label = "confidence band"
            if self.confidence is not None:
                label = f"{self.confidence:.0%} {label}"
            kw = {"alpha": 0.3, "color": "C0", "linewidth": 0, "label": label}
            kw.update(band_kw or {})
            self.band_ = ax.fill_between(self.grid, *self.confidence_band, **kw)
        kw = {"s": 12, "color": "0.5", "alpha": 0.6, "label": "data"}
        kw.update(scatter_kw or {})
        self.scatter_ = ax.scatter(self.x, self.y, **kw)
        kw = {"color": "C0", "label": "fit"}
        kw.update(line_kw or {})
        (self.line_,) = ax.plot(self.grid, self.fitted, **kw)
        ax.set_xlabel(self.feature_name if self.feature_name is not None else "x")
        ax.set_ylabel("y")
        ax.legend()
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        y,
        *,
        feature=0,
        target=0,
        confidence=0.95,
        method="asymptotic",
        simultaneous=False,
        random_state=None,
        prediction=None,
        grid_resolution=100,
        ax=None,
        scatter_kw=None,
        line_kw=None,
        band_kw=None,
        prediction_band_kw=None,
    ):
        """Draw a fitted regressor along one feature with its bands.

        Parameters
        ----------
        estimator : fitted regressor
            A :class:`KernelAttentionRegressor`, or a search such as
            :class:`KernelAttentionRegressorCV` (its ``best_estimator_``
            draws the bands when the search has no interval methods).
        X : array-like of shape (n_samples, n_features)
            The data to draw, usually the training data. The grid runs over
            the range of ``X[:, feature]``; the other continuous features are
            held at their medians over ``X``, and categorical ones at their
            most frequent value.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Their targets.
        feature : int or str, default=0
            The continuous feature along which to draw: a column index, or a
            name of ``estimator.feature_names_in_``.
        target : int, default=0
            The output drawn, for multi-output fits; 0 for one output.
        confidence : float or None, default=0.95
            The level of the confidence band of the mean function, from
            ``confidence_interval(grid, level=confidence, method=method,
            simultaneous=simultaneous)``; None for no band.
        method : {"asymptotic", "bootstrap"}, default="asymptotic"
            The method of ``confidence_interval``.
        simultaneous : bool, default=False
            Whether the confidence band covers the whole curve at once
            (see ``confidence_interval``).
        random_state : int, RandomState instance or None, default=None
            Of the bootstrap band.
        prediction : float or None, default=None
            The level of the jackknife+ prediction band of new observations,
            from ``prediction_interval(grid, level=prediction)``; None for no
            band.
        grid_resolution : int, default=100
            The number of grid points.
        ax : matplotlib.axes.Axes, default=None
            The axes to draw on; None for new axes of a new figure.
        scatter_kw, line_kw, band_kw, prediction_band_kw : dict, default=None
            See :meth:`plot`.

        Returns
        -------
        display : FitDisplay
            The display; ``grid_X`` holds the queries of the grid.
        """
        check_matplotlib(f"{cls.__name__}.from_estimator")
        _check_arguments(
            cls.__name__, estimator, confidence, prediction, grid_resolution
        )
        columns = getattr(X, "columns", None)
        X_array = _as_2d(X)
        n_features = X_array.shape[1]
        names = getattr(estimator, "feature_names_in_", None)
        index = _feature_index(feature, names, n_features)
        y_array = _checked_targets(X_array, y, target)
        categorical = _is_categorical(estimator, n_features)
        if categorical[index]:
            raise ValueError(
                f"feature {feature!r} is categorical; {cls.__name__} draws along "
                "a continuous feature."
            )
        x = X_array[:, index].astype(np.float64)
        grid = np.linspace(np.min(x), np.max(x), grid_resolution)
        grid_X = _grid_queries(X, X_array, index, grid, categorical)
        fitted = _output(estimator.predict(grid_X), target)
        confidence_band = _confidence_band(
            estimator,
            grid_X,
            target,
            cls.__name__,
            confidence=confidence,
            method=method,
            simultaneous=simultaneous,
            random_state=random_state,
        )
        prediction_band = _prediction_band(
            estimator, grid_X, target, cls.__name__, prediction
        )
        feature_name = _feature_label(names, columns, index, n_features)
        display = cls(
            grid=grid,
            fitted=fitted,
            x=x,
            y=y_array if y_array.ndim == 1 else y_array[:, target],
            confidence_band=confidence_band,
            prediction_band=prediction_band,
            confidence=confidence,
            prediction=prediction,
            feature_name=feature_name,
        )
        display.grid_X = grid_X
        return display.plot(
            ax=ax,
            scatter_kw=scatter_kw,
            line_kw=line_kw,
            band_kw=band_kw,
            prediction_band_kw=prediction_band_kw,
        )
