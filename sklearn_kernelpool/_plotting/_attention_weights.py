"""The attention weights of queries over the training rows, as a heatmap."""

import numpy as np
import scipy.sparse as sp

from ._common import _fitted, _new_axes, check_matplotlib


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
        # The training keys of the pooling model (a search's mapped keys
        # where it kept a map).
        keys = getattr(model, "best_estimator_", model).keys_
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
