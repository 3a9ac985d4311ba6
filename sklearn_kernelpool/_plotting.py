"""Pictures of fitted estimators: attention heatmaps, kernel shapes, fits.

matplotlib is optional (the ``plot`` extra): it is imported only when a
picture is drawn, and a clear ``ImportError`` says how to install it.
The displays follow scikit-learn's convention: a ``from_estimator``
class method computes what is drawn, ``plot(ax=...)`` draws it, and the
artists are kept as attributes ending in ``_``.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_regressor
from sklearn.utils.validation import check_consistent_length, check_is_fitted

from . import kernels as _kernels

__all__ = ["AttentionWeightsDisplay", "FitDisplay", "plot_kernels"]


def check_matplotlib(caller):
    """Raise an ``ImportError`` naming the install command without matplotlib."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"{caller} requires matplotlib. Install it with `pip install "
            'matplotlib`, or with the extra `python -m pip install ".[plot]"` '
            "from a clone of sklearn-kernelpool."
        ) from exc


def _new_axes():
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    return ax


def _fitted(estimator, method, caller):
    """The estimator that has ``method``: itself, or its ``best_estimator_``."""
    check_is_fitted(estimator)
    if hasattr(estimator, method):
        return estimator
    best = getattr(estimator, "best_estimator_", None)
    if best is not None and hasattr(best, method):
        return best
    raise TypeError(
        f"{caller} needs an estimator with a {method} method (or a search "
        f"whose best_estimator_ has one); got {type(estimator).__name__}."
    )


def _check_level(name, level, allow_none=True):
    if level is None and allow_none:
        return
    if (
        not isinstance(level, numbers.Real)
        or isinstance(level, bool)
        or not 0 < level < 1
    ):
        accepted = "a float in (0, 1) or None" if allow_none else "a float in (0, 1)"
        raise ValueError(f"{name} must be {accepted}; got {level!r}.")


class AttentionWeightsDisplay:
    """Heatmap of the attention weights of queries over the training keys.

    The picture of Dive into Deep Learning's chapter "Attention Pooling by
    Similarity": one row per query, one column per training key, the colour
    the normalised weight the query gives the key. Build it with
    :meth:`from_estimator`, or from a weight matrix and :meth:`plot`.

    Parameters
    ----------
    weights : ndarray of shape (n_queries, n_keys)
        The weights, in the order drawn (rows top to bottom, columns left to
        right).
    key_order : ndarray of shape (n_keys,), default=None
        The training row of each column; None for the training order.
    keys_sorted : bool, default=False
        Whether the columns are sorted by key value; only names the axis.

    Attributes
    ----------
    im_ : matplotlib.image.AxesImage
        The heatmap.
    colorbar_ : matplotlib.colorbar.Colorbar or None
        The colour bar, None when ``plot(colorbar=False)``.
    ax_ : matplotlib.axes.Axes
        The axes of the heatmap.
    figure_ : matplotlib.figure.Figure
        The figure of the axes.

    See Also
    --------
    KernelAttentionRegressor.attention_weights : The weights drawn.
    plot_kernels : The kernels the weights come from.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import AttentionWeightsDisplay
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, (40, 1))
    >>> reg = KernelAttentionRegressor(bandwidth=0.5).fit(X, np.sin(X[:, 0]))
    >>> queries = np.linspace(0, 5, 50)[:, None]
    >>> display = AttentionWeightsDisplay.from_estimator(reg, queries)
    >>> display.im_.get_array().shape
    (50, 40)
    >>> bool(np.all(np.diff(X[display.key_order, 0]) >= 0))
    True
    """

    def __init__(self, weights, *, key_order=None, keys_sorted=False):
        self.weights = weights
        self.key_order = key_order
        self.keys_sorted = keys_sorted

    def plot(self, *, ax=None, cmap=None, colorbar=True, imshow_kw=None):
        """Draw the heatmap.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, default=None
            The axes to draw on; None for new axes of a new figure.
        cmap : str or matplotlib colormap, default=None
            None for ``"Reds"`` from 0 when no weight is negative, and a
            diverging ``"RdBu_r"`` centred on 0 otherwise (the
            equivalent-kernel weights of ``degree=1`` may be negative).
        colorbar : bool, default=True
            Whether to add a colour bar.
        imshow_kw : dict, default=None
            More keyword arguments of :meth:`matplotlib.axes.Axes.imshow`.

        Returns
        -------
        display : AttentionWeightsDisplay
            The display, its artists stored as attributes.
        """
        check_matplotlib(f"{type(self).__name__}.plot")
        if ax is None:
            ax = _new_axes()
        weights = np.asarray(self.weights)
        kw = {"aspect": "auto", "interpolation": "nearest"}
        if cmap is None:
            # NaN rows (on_empty="nan") are left blank.
            finite = weights[np.isfinite(weights)]
            if finite.size == 0 or finite.min() >= 0:
                cmap, kw["vmin"] = "Reds", 0.0
            else:
                top = np.abs(finite).max()
                cmap, kw["vmin"], kw["vmax"] = "RdBu_r", -top, top
        kw["cmap"] = cmap
        kw.update(imshow_kw or {})
        self.im_ = ax.imshow(weights, **kw)
        self.colorbar_ = (
            ax.figure.colorbar(self.im_, ax=ax, label="attention weight")
            if colorbar
            else None
        )
        keys = "training keys, sorted" if self.keys_sorted else "training keys"
        ax.set_xlabel(f"{keys} (column)")
        ax.set_ylabel("queries (row)")
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_estimator(
        cls,
        estimator,
        X,
        *,
        sort=True,
        ax=None,
        cmap=None,
        colorbar=True,
        imshow_kw=None,
    ):
        """Draw the attention weights of the queries ``X`` of an estimator.

        Parameters
        ----------
        estimator : fitted estimator
            A :class:`KernelAttentionRegressor` or
            :class:`KernelAttentionClassifier`, or a search such as
            :class:`KernelAttentionRegressorCV` whose ``best_estimator_``
            has ``attention_weights``.
        X : array-like of shape (n_queries, n_features)
            The queries, one row of the heatmap each, in their order.
        sort : bool, default=True
            Whether to sort the columns by key value, for one feature; with
            several features the columns keep the training order whatever
            ``sort``.
        ax : matplotlib.axes.Axes, default=None
            The axes to draw on; None for new axes of a new figure.
        cmap : str or matplotlib colormap, default=None
            See :meth:`plot`.
        colorbar : bool, default=True
            Whether to add a colour bar.
        imshow_kw : dict, default=None
            More keyword arguments of :meth:`matplotlib.axes.Axes.imshow`.

        Returns
        -------
        display : AttentionWeightsDisplay
            The display: ``weights`` equals
            ``estimator.attention_weights(X)[:, key_order]``.
        """
        check_matplotlib(f"{cls.__name__}.from_estimator")
        if not isinstance(sort, bool | np.bool_):
            raise ValueError(f"sort must be True or False; got {sort!r}.")
        model = _fitted(estimator, "attention_weights", f"{cls.__name__}")
        weights = np.asarray(model.attention_weights(X))
        keys = model.keys_
        n_keys = weights.shape[1]
        keys_sorted = bool(sort) and model.n_features_in_ == 1
        if keys_sorted:
            column = keys[:, [0]].toarray() if sp.issparse(keys) else keys
            column = np.asarray(column)[:, 0]
            key_order = np.argsort(column, kind="stable")
        else:
            key_order = np.arange(n_keys)
        display = cls(
            weights[:, key_order], key_order=key_order, keys_sorted=keys_sorted
        )
        return display.plot(ax=ax, cmap=cmap, colorbar=colorbar, imshow_kw=imshow_kw)


def _resolve_kernel(kernel):
    """``(label, function)`` of a kernel name, :class:`Kernel` or callable."""
    if isinstance(kernel, str):
        if kernel not in _kernels.KERNELS:
            raise ValueError(
                f"Unknown kernel {kernel!r} in kernels; accepted names: "
                f"{sorted(_kernels.KERNELS)}, or callables."
            )
        return kernel, _kernels.KERNELS[kernel].function
    if isinstance(kernel, _kernels.Kernel):
        return kernel.name, kernel.function
    if callable(kernel):
        return getattr(kernel, "__name__", repr(kernel)), kernel
    raise ValueError(
        f"kernels must hold kernel names, Kernel objects or callables; got {kernel!r}."
    )


def plot_kernels(kernels=None, *, ax=None):
    """Draw kernel shapes ``alpha(x)`` on the scaled distances [-2.5, 2.5].

    Parameters
    ----------
    kernels : list of {str, Kernel, callable}, default=None
        The kernels: names of :data:`~sklearn_kernelpool.kernels.KERNELS`
        (aliases included), :class:`~sklearn_kernelpool.kernels.Kernel`
        objects or vectorised functions of the scaled distance. None for
        every built-in kernel once, under its canonical name.
    ax : matplotlib.axes.Axes, default=None
        The axes to draw on; None for new axes of a new figure.

    Returns
    -------
    ax : matplotlib.axes.Axes
        The axes, one line per kernel (labelled with its name, or the
        function's ``__name__``) and a legend.

    See Also
    --------
    sklearn_kernelpool.kernels : The built-in kernels.

    Examples
    --------
    >>> from sklearn_kernelpool import plot_kernels
    >>> ax = plot_kernels(["gaussian", "epanechikov"])
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['gaussian', 'epanechikov']
    """
    check_matplotlib("plot_kernels")
    if kernels is None:
        kernels = list(dict.fromkeys(k.name for k in _kernels.KERNELS.values()))
    elif isinstance(kernels, str | _kernels.Kernel) or callable(kernels):
        kernels = [kernels]
    resolved = [_resolve_kernel(kernel) for kernel in kernels]
    if not resolved:
        raise ValueError("kernels must hold at least one kernel; got an empty list.")
    if ax is None:
        ax = _new_axes()
    x = np.linspace(-2.5, 2.5, 1001)
    for i, (label, function) in enumerate(resolved):
        values = np.asarray(function(x), dtype=float) * np.ones_like(x)
        # The colour cycle has ten colours: dash the lines that repeat one.
        ax.plot(x, values, label=label, linestyle="-" if i < 10 else "--")
    ax.set_xlabel("scaled distance x = |q - k| / h")
    ax.set_ylabel("alpha(x)")
    # The legend goes above the curves, in rows of up to four names.
    columns = min(len(resolved), 4)
    rows = -(-len(resolved) // columns)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.1 * rows * (high - low))
    ax.legend(loc="upper center", ncols=columns, fontsize="small")
    return ax


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
        name = f"{cls.__name__}.from_estimator"
        check_matplotlib(name)
        check_is_fitted(estimator)
        if not is_regressor(estimator):
            raise TypeError(
                f"{cls.__name__} draws regressors; got {type(estimator).__name__}."
            )
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
        columns = getattr(X, "columns", None)
        X_array = X.toarray() if sp.issparse(X) else np.asarray(X)
        if X_array.ndim != 2:
            raise ValueError(f"X must be 2-D; got an array of shape {X_array.shape}.")
        n_features = X_array.shape[1]
        names = getattr(estimator, "feature_names_in_", None)
        if isinstance(feature, str):
            if names is None or feature not in list(names):
                raise ValueError(
                    f"feature {feature!r} is not a feature name of the estimator; "
                    f"accepted: {None if names is None else list(names)} or a "
                    f"column index in [0, {n_features})."
                )
            index = list(names).index(feature)
        elif isinstance(feature, numbers.Integral) and not isinstance(feature, bool):
            if not -n_features <= feature < n_features:
                raise ValueError(
                    f"feature must be a column index in [0, {n_features}) or a "
                    f"feature name; got {feature!r}."
                )
            index = int(feature) % n_features
        else:
            raise ValueError(
                f"feature must be a column index or a feature name; got {feature!r}."
            )
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

        fitted_model = getattr(estimator, "best_estimator_", estimator)
        categorical = getattr(fitted_model, "is_categorical_", None)
        if categorical is None:
            categorical = np.zeros(n_features, dtype=bool)
        if categorical[index]:
            raise ValueError(
                f"feature {feature!r} is categorical; {cls.__name__} draws along "
                "a continuous feature."
            )
        x = X_array[:, index].astype(np.float64)
        grid = np.linspace(np.min(x), np.max(x), grid_resolution)
        grid_X = _grid_queries(X, X_array, index, grid, categorical)

        def column(values):
            values = np.asarray(values)
            return values if values.ndim == 1 else values[:, target]

        fitted = column(estimator.predict(grid_X))
        confidence_band = prediction_band = None
        if confidence is not None:
            model = _fitted(estimator, "confidence_interval", cls.__name__)
            lower, upper = model.confidence_interval(
                grid_X,
                level=confidence,
                method=method,
                simultaneous=simultaneous,
                random_state=random_state,
            )
            confidence_band = (column(lower), column(upper))
        if prediction is not None:
            model = _fitted(estimator, "prediction_interval", cls.__name__)
            lower, upper = model.prediction_interval(grid_X, level=prediction)
            prediction_band = (column(lower), column(upper))
        if names is not None:
            feature_name = str(names[index])
        elif columns is not None:
            feature_name = str(columns[index])
        else:
            feature_name = f"X[:, {index}]" if n_features > 1 else "x"
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
