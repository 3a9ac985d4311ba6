"""``algorithm="binned"`` on dask arrays: a map-reduce of the grid sums.

Linear binning is additive in the rows (:mod:`._binning`): ``fit`` on dask
arrays computes, in one pass, the span of the keys, the total weight and the
weighted mean of ``y`` (and counts the non-finite entries); in a second pass
each partition of rows is binned onto the grid on the worker that holds it,
and the grids are summed by a tree reduction. The client then holds the grid
sums only (their size is the grid's) and runs one FFT convolution. The fitted
:class:`GridPool` keeps the grid sums and nothing of the rows.

``predict`` on a dask array maps the fitted estimator over the chunks of
rows (:func:`predict_dask`).

The classifier's fit (:func:`fit_dask_classifier`) finds the classes in one
more pass (:func:`dask.array.unique`) and bins the class indicators, its
multi-output values, by the same map-reduce.
"""

import functools

import numpy as np
from scipy.spatial import cKDTree

from . import _binned
from ._algorithm import prefers_binned
from ._bandwidth import resolve_bandwidth
from ._binned_pool import check_binned_options, check_n_bins
from ._binning import Grid, linear_bin, make_grid
from ._pooling import report_empty, resolve_kernel

NO_ROWS = (
    "{method} needs the training rows, and this model was fitted on a dask "
    "array with algorithm='binned': it holds the binned grid sums only, no "
    "rows. Fit on in-memory NumPy arrays to use it."
)


def is_dask_array(X):
    """Whether ``X`` is a dask array (without importing dask)."""
    return type(X).__module__.startswith("dask.") and hasattr(X, "__dask_graph__")


def check_holds_rows(estimator, method):
    """Refuse ``method`` on a model fitted on dask arrays (no rows held)."""
    if isinstance(getattr(estimator, "_pool", None), GridPool):
        raise ValueError(NO_ROWS.format(method=method))


def _refuse_dask(estimator, reason):
    raise ValueError(
        f"{type(estimator).__name__}.fit takes dask arrays only with "
        f"algorithm='binned' (or 'auto' where it picks it): {reason}. Compute "
        "X and y into NumPy arrays to fit in memory with the other algorithms."
    )


def _as_dask(array, name, like):
    import dask.array as da

    if array is None:
        return None
    if not is_dask_array(array):
        array = np.asarray(array)
        chunks = like.chunks[:1] + tuple((s,) for s in array.shape[1:])
        return da.from_array(array, chunks=chunks)
    return array


def _check_rows(estimator, X, y, sample_weight):
    """Shapes and dtypes, checked lazily; y and the weights rechunked to the
    rows of X, the columns of X in one chunk."""
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2-D dask array X of shape (n_samples, n_features); got "
            f"{X.ndim} dimension(s)."
        )
    y = _as_dask(y, "y", X)
    sample_weight = _as_dask(sample_weight, "sample_weight", X)
    for name, array, ndims in [
        ("X", X, (2,)),
        ("y", y, (1, 2)),
        ("sample_weight", sample_weight, (1,)),
    ]:
        if array is None:
            continue
        if array.ndim not in ndims:
            raise ValueError(
                f"{name} must have {' or '.join(map(str, ndims))} dimension(s); "
                f"got {array.ndim}."
            )
        if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(
            np.empty(0, array.dtype)
        ):
            raise ValueError(f"{name} must hold real numbers; got dtype {array.dtype}.")
        if any(np.isnan(c) for c in array.chunks[0]):
            raise ValueError(
                f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() "
                "before fit."
            )
        if array.shape[0] != X.shape[0]:
            raise ValueError(
                f"X and {name} have different numbers of rows: {X.shape[0]} and "
                f"{array.shape[0]}."
            )
    n_features = X.shape[1]
    if n_features == 0 or n_features > 2:
        _refuse_dask(
            estimator,
            f"X has {n_features} features, and the binned path takes one or two",
        )
    X = X.rechunk({1: -1})
    y = y.rechunk((X.chunks[0],) + tuple((s,) for s in y.shape[1:]))
    if sample_weight is not None:
        sample_weight = sample_weight.rechunk((X.chunks[0],))
    return X, y, sample_weight


def _bin_block(X, y, w, grid, center):
    """The grid sums of one partition: weights, centred weighted values and
    their squares (``_binned.binned_columns``)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(len(X), -1)
    w = np.ones(len(X)) if w is None else np.asarray(w, dtype=np.float64)
    support = w > 0
    if not np.all(support):
        X, y, w = X[support], y[support], w[support]
    columns = _binned.binned_columns(y, w, center, squares=True)
    return linear_bin(grid, X, columns)


def _tree_sum(parts, add):
    """Pairwise sums of delayed grids: a reduction tree of depth log2(n)."""
    while len(parts) > 1:
        pairs = [add(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            pairs.append(parts[-1])
        parts = pairs
    return parts[0]


def _add(a, b):
    return a + b


def fit_dask_classifier(estimator, X, y, sample_weight):
    """Fit the classifier ``estimator`` on dask arrays: its classes from one
    pass, then the map-reduce of :func:`fit_dask` over the class indicators
    (one output per class); sets ``classes_`` and returns it."""
    import dask.array as da
    from sklearn.utils.multiclass import check_classification_targets

    if not is_dask_array(y):
        y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(
            f"y must be 1-D class labels for {type(estimator).__name__}; got "
            f"{y.ndim} dimensions."
        )
    classes = np.asarray(da.unique(y).compute() if is_dask_array(y) else np.unique(y))
    with np.errstate(invalid="ignore"):
        check_classification_targets(classes)
    fit_dask(estimator, X, y, sample_weight, 0, classes=classes)
    estimator.classes_ = classes
    return estimator


def _indicators(labels, classes):
    """The class indicators (n, n_classes), float64, of a block of labels."""
    return (np.asarray(labels)[:, None] == classes[None, :]).astype(np.float64)


def fit_dask(estimator, X, y, sample_weight, degree, classes=None):
    """Fit the regressor ``estimator`` on dask arrays by a map-reduce of the
    grid sums; sets its fitted attributes and returns it. With ``classes``
    (a classifier's), ``y`` holds labels and the binned values are their
    class indicators."""
    import dask
    import dask.array as da

    if estimator.algorithm not in ("binned", "auto"):
        _refuse_dask(estimator, f"algorithm={estimator.algorithm!r}")
    if getattr(estimator, "categorical_features", None) is not None:
        _refuse_dask(estimator, "categorical features")
    if isinstance(estimator.bandwidth, str):
        _refuse_dask(
            estimator,
            f"bandwidth={estimator.bandwidth!r} needs the rows; pass a number or "
            "one per feature",
        )
    if classes is not None:
        X = X if X.ndim != 2 else X.rechunk({1: -1})
        y = _as_dask(y, "y", X)
        if y.ndim == 1 and X.ndim == 2 and y.shape[0] == X.shape[0]:
            y = y.rechunk((X.chunks[0],)).map_blocks(
                _indicators,
                classes,
                chunks=(X.chunks[0], (len(classes),)),
                new_axis=1,
                dtype=np.float64,
                meta=np.empty((0, 0)),
            )
    X, y, sample_weight = _check_rows(estimator, X, y, sample_weight)
    n_samples, n_features = X.shape
    check_binned_options(
        n_features, callable(estimator.kernel), False, estimator.n_neighbors
    )
    n_bins = check_n_bins(estimator.n_bins, n_features)
    bandwidth = resolve_bandwidth(estimator.bandwidth, X, None)
    kernel = resolve_kernel(estimator.kernel)
    y2 = y.reshape(n_samples, -1) if y.ndim == 1 else y
    w = (
        da.ones(n_samples, chunks=X.chunks[0])
        if sample_weight is None
        else (sample_weight.astype(np.float64))
    )
    positive = w > 0
    # One pass: the span of the keys of positive weight, the weight and
    # weighted sum of y, and the non-finite entries.
    inf = np.inf
    lower, upper, total, weighted, bad_x, bad_y, bad_w, negative = dask.compute(
        da.where(positive[:, None], X, inf).min(axis=0),
        da.where(positive[:, None], X, -inf).max(axis=0),
        w.sum(),
        (w[:, None] * y2.astype(np.float64)).sum(axis=0),
        (~da.isfinite(X)).sum(),
        (~da.isfinite(y2)).sum(),
        (~da.isfinite(w)).sum(),
        (w < 0).sum(),
    )
    for name, count in [("X", bad_x), ("y", bad_y), ("sample_weight", bad_w)]:
        if count:
            raise ValueError(
                f"Input {name} contains NaN or infinity ({int(count)} entries); "
                f"{type(estimator).__name__} needs finite values."
            )
    if negative:
        raise ValueError(
            f"sample_weight must be non-negative; got {int(negative)} negative "
            "weight(s)."
        )
    if not total > 0:
        raise ValueError(
            "Sample weights must contain at least one non-zero number; all "
            "sample_weight are zero."
        )
    width = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), (n_features,))
    if estimator.algorithm == "auto" and not prefers_binned(
        n_samples, n_features, width, upper - lower, kernel
    ):
        _refuse_dask(
            estimator,
            "algorithm='auto' would not pick the binned path here (fewer than "
            "100000 rows, a width the default grid resolves with fewer than 16 "
            "nodes, or the constant kernel); pass algorithm='binned' to bin "
            "anyway",
        )
    radius = _binned.truncation_radius(kernel)
    margin = _binned.CAUCHY_MARGIN if not np.isfinite(radius) else radius
    lower = lower - margin * width
    upper = upper + margin * width
    bins = (
        _binned.default_bins(upper - lower, width, n_features)
        if n_bins is None
        else n_bins
    )
    grid = make_grid(lower, upper, bins)
    center = weighted / total
    blocks = X.to_delayed().ravel()
    y_blocks = y.to_delayed().ravel()
    w_blocks = (
        [None] * len(blocks)
        if sample_weight is None
        else (sample_weight.to_delayed().ravel())
    )
    bin_block = dask.delayed(_bin_block, pure=True)
    parts = [
        bin_block(xb, yb, wb, grid, center)
        for xb, yb, wb in zip(blocks, y_blocks, w_blocks, strict=True)
    ]
    (sums,) = dask.compute(_tree_sum(parts, dask.delayed(_add, pure=True)))
    estimator._pool = GridPool(
        grid,
        sums,
        kernel,
        width,
        degree,
        center,
        estimator.on_empty,
        np.float32 if X.dtype == np.float32 else np.float64,
        n_samples,
    )
    estimator.n_features_in_ = n_features
    estimator.bandwidth_ = bandwidth
    estimator.algorithm_ = "binned"
    estimator.sample_weight_ = None
    estimator.keys_ = None
    estimator.values_ = None
    estimator._y_ndim = y.ndim
    return estimator


class GridPool:
    """The binned engine of a fit on dask arrays: grid sums, no rows.

    Queries the binned engine leaves undecided (see :mod:`._binned_pool`)
    get, instead of the exact engine's answer: the local-constant estimate
    from the grid sums where a local-linear design is nearly singular but
    keys are near; else the ``on_empty`` policy applied on the grid:
    ``"mean"`` the weighted mean and standard deviation of ``y``, ``"nan"``
    NaN, ``"raise"`` a ``ValueError``, and ``"nearest"`` the weighted mean
    (and spread) of the values binned onto the nearest grid node that holds
    weight, an approximation of the nearest key's value within about one
    node spacing.
    """

    algorithm = "binned"

    def __init__(
        self, grid, sums, kernel, bandwidth, degree, center, on_empty, dtype, n_rows
    ):
        self.grid = grid
        self.sums = np.asarray(sums, dtype=np.float64)
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.degree = degree
        self.center = np.asarray(center, dtype=np.float64)
        self.on_empty = on_empty
        self.dtype = np.dtype(dtype)
        self.n_samples_fit = n_rows
        self.n_outputs = len(self.center)
        self.n_bins = np.asarray(grid.shape)
        self.binned = self._engine(degree)

    def _engine(self, degree):
        return _binned.BinnedEngine.from_grid_sums(
            self.grid, self.sums, self.kernel, self.bandwidth, degree, self.center
        )

    @functools.cached_property
    def local_constant(self):
        return self._engine(0)

    @functools.cached_property
    def nodes(self):
        """The grid nodes holding weight, scaled by the bandwidth, in a
        k-d tree, and the mean and spread of the values binned there."""
        p = self.n_outputs
        flat = self.sums.reshape(-1, self.sums.shape[-1])
        held = np.flatnonzero(flat[:, 0] > _binned.MIN_WEIGHT * flat[:, 0].sum())
        index = np.unravel_index(held, self.grid.shape)
        coordinates = np.column_stack(
            [
                self.grid.lower[j] + self.grid.step[j] * index[j]
                for j in range(len(index))
            ]
        )
        scale = np.broadcast_to(self.bandwidth, (coordinates.shape[1],))
        weight = flat[held, :1]
        mean = flat[held, 1 : 1 + p] / weight
        spread = np.sqrt(np.maximum(flat[held, 1 + p :] / weight - mean**2, 0.0))
        return cKDTree(coordinates / scale), mean + self.center, spread

    def _global(self):
        flat = self.sums.reshape(-1, self.sums.shape[-1])
        total = flat[:, 0].sum()
        p = self.n_outputs
        mean = flat[:, 1 : 1 + p].sum(axis=0) / total
        variance = flat[:, 1 + p :].sum(axis=0) / total - mean**2
        return mean + self.center, np.sqrt(np.maximum(variance, 0.0))

    def pool(self, X, n_jobs=None, return_std=False):
        """Pooled values of the queries, as :meth:`._pooling.KernelPool.pool`."""
        Q = np.asarray(X, dtype=np.float64)
        mean, std, doubtful = self.binned.predict(Q, return_std)
        if np.any(doubtful):
            rows = np.flatnonzero(doubtful)
            if self.degree == 1:
                m, s, still = self.local_constant.predict(Q[rows], return_std)
                mean[rows] = m
                if return_std:
                    std[rows] = s
                rows = rows[still]
            report_empty(self.on_empty, len(rows), len(Q), self.kernel, self.bandwidth)
            if len(rows):
                if self.on_empty == "mean":
                    m, s = self._global()
                elif self.on_empty == "nan":
                    m, s = np.nan, np.nan
                else:
                    tree, node_mean, node_spread = self.nodes
                    scale = np.broadcast_to(self.bandwidth, (Q.shape[1],))
                    _, nearest = tree.query(Q[rows] / scale)
                    m, s = node_mean[nearest], node_spread[nearest]
                mean[rows] = m
                if return_std:
                    std[rows] = s
        mean = mean.astype(self.dtype, copy=False)
        if return_std:
            return mean, std.astype(self.dtype, copy=False)
        return mean

    def __getstate__(self):
        state = {
            name: getattr(self, name)
            for name in (
                "sums",
                "bandwidth",
                "degree",
                "center",
                "on_empty",
                "dtype",
                "n_samples_fit",
            )
        }
        state["grid"] = (self.grid.lower, self.grid.step, self.grid.shape)
        state["kernel"] = self.kernel.name
        return state

    def __setstate__(self, state):
        lower, step, shape = state["grid"]
        self.__init__(
            Grid(np.asarray(lower), np.asarray(step), tuple(shape)),
            state["sums"],
            resolve_kernel(state["kernel"]),
            state["bandwidth"],
            state["degree"],
            state["center"],
            state["on_empty"],
            state["dtype"],
            state["n_samples_fit"],
        )

    def __getattr__(self, name):
        if name.startswith("_") or name in ("binned", "grid", "sums"):
            raise AttributeError(name)
        raise ValueError(NO_ROWS.format(method=name))


def predict_dask(estimator, X, return_std, return_se):
    """``estimator.predict`` of a dask array of queries: a dask array (or a
    tuple of them) computed chunk by chunk with the fitted estimator."""
    if X.ndim != 2 or X.shape[1] != estimator.n_features_in_:
        raise ValueError(
            f"X has shape {X.shape}, but {type(estimator).__name__} is expecting "
            f"2-D queries of {estimator.n_features_in_} features."
        )
    X = X.rechunk({1: -1})
    n_outputs = 1 + return_std + return_se

    def block(chunk):
        out = estimator.predict(chunk, return_std=return_std, return_se=return_se)
        out = out if isinstance(out, tuple) else (out,)
        return np.stack([o.reshape(len(chunk), -1) for o in out], axis=1)

    p = estimator._pool.n_outputs
    dtype = getattr(estimator._pool, "dtype", np.float64)
    stacked = X.map_blocks(
        block,
        chunks=(X.chunks[0], (n_outputs,), (p,)),
        new_axis=2,
        dtype=dtype,
        meta=np.empty((0, 0, 0), dtype=dtype),
    )
    one_d = (
        estimator._y_ndim == 1
        if estimator.values_ is None
        else estimator.values_.ndim == 1
    )
    outputs = tuple(
        stacked[:, i, 0] if one_d else stacked[:, i] for i in range(n_outputs)
    )
    return outputs if n_outputs > 1 else outputs[0]
