"""``algorithm="binned"`` on dask arrays: a map-reduce of the grid sums.

Linear binning is additive in the rows (:mod:`._binning`): ``fit`` on dask
arrays computes, in one pass, the span of the keys, the total weight and the
weighted mean of ``y`` (and counts the non-finite entries); in a second pass
each partition of rows is binned onto the grid on the worker that holds it,
and the grids are summed by a tree reduction. The client then holds the grid
sums only (their size is the grid's) and runs one FFT convolution. The fitted
:class:`._grid_pool.GridPool` keeps the grid sums and nothing of the rows.

``predict`` on a dask array maps the fitted estimator over the chunks of
rows (:func:`predict_dask`).

The classifier's fit (:func:`fit_dask_classifier`) finds the classes in one
more pass (:func:`dask.array.unique`) and bins the class indicators, its
multi-output values, by the same map-reduce.
"""

import numpy as np

from .._engine._algorithm import prefers_binned
from .._engine._pooling import resolve_kernel
from .._utils._width_rules import resolve_bandwidth
from . import _engine as _binned
from ._binning import linear_bin
from ._grid import plan_grid, warn_coarse_fit
from ._grid_pool import NO_ROWS, GridPool
from ._pool import check_binned_options, check_n_bins


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
    _check_dask_options(estimator)
    if classes is not None:
        X, y = _class_indicators(X, y, classes)
    X, y, sample_weight = _check_rows(estimator, X, y, sample_weight)
    n_samples, n_features = X.shape
    check_binned_options(
        n_features, callable(estimator.kernel), False, estimator.n_neighbors
    )
    n_bins = check_n_bins(estimator.n_bins, n_features)
    bandwidth = resolve_bandwidth(estimator.bandwidth, X, None)
    kernel = resolve_kernel(estimator.kernel)
    Y = y.reshape(n_samples, -1) if y.ndim == 1 else y
    lower, upper, total, weighted = _summaries(estimator, X, Y, sample_weight)
    width = np.broadcast_to(np.asarray(bandwidth, dtype=np.float64), (n_features,))
    if estimator.algorithm == "auto" and not prefers_binned(
        n_samples, n_features, width, upper - lower, kernel, n_bins
    ):
        _refuse_dask(
            estimator,
            "algorithm='auto' would not pick the binned path here (fewer than "
            "100000 rows, a width the grid of n_bins resolves with fewer than 16 "
            "nodes, or the constant kernel); pass algorithm='binned' to bin "
            "anyway",
        )
    sizes = _binned.engine_sizes(n_features, Y.shape[1], degree, squares=True)
    grid = _fit_grid(kernel, lower, upper, width, n_bins, sizes)
    warn_coarse_fit(grid, kernel, bandwidth, given=n_bins is not None)
    center = weighted / total
    sums = _grid_sums(X, y, sample_weight, grid, center)
    dtype = np.float32 if X.dtype == np.float32 else np.float64
    estimator._pool = GridPool(
        grid, sums, kernel, width, degree, center, estimator.on_empty, dtype, n_samples
    )
    estimator.n_features_in_ = n_features
    estimator.bandwidth_ = bandwidth
    estimator.algorithm_ = "binned"
    estimator.sample_weight_ = None
    estimator.keys_ = None
    estimator.values_ = None
    estimator._y_ndim = y.ndim
    return estimator


def _check_dask_options(estimator):
    """Refuse the options that the binned fit of dask arrays cannot take."""
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


def _class_indicators(X, y, classes):
    """``X`` in chunks of whole rows and the class labels ``y`` as indicator
    columns of ``classes``, chunked like the rows of ``X``."""
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
    return X, y


def _summaries(estimator, X, Y, sample_weight):
    """One pass over the rows: the span of the keys of positive weight
    (``lower``, ``upper``), the total weight and the weighted sum of the
    values; non-finite entries and negative or all-zero weights refused."""
    import dask
    import dask.array as da

    n_samples = X.shape[0]
    w = (
        da.ones(n_samples, chunks=X.chunks[0])
        if sample_weight is None
        else sample_weight.astype(np.float64)
    )
    positive = w > 0
    inf = np.inf
    lower, upper, total, weighted, bad_x, bad_y, bad_w, negative = dask.compute(
        da.where(positive[:, None], X, inf).min(axis=0),
        da.where(positive[:, None], X, -inf).max(axis=0),
        w.sum(),
        (w[:, None] * Y.astype(np.float64)).sum(axis=0),
        (~da.isfinite(X)).sum(),
        (~da.isfinite(Y)).sum(),
        (~da.isfinite(w)).sum(),
        (w < 0).sum(),
    )
    for name, count in [("X", bad_x), ("y", bad_y), ("sample_weight", bad_w)]:
        if count:
            raise ValueError(
                f"Input {name} contains NaN or infinity ({int(count)} entries); "
                f"{type(estimator).__name__} does not accept missing or "
                "infinite values."
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
    return lower, upper, total, weighted


def _fit_grid(kernel, lower, upper, width, n_bins, sizes):
    """The grid over the span of the keys, widened by the kernel's reach."""
    radius = _binned.truncation_radius(kernel)
    margin = _binned.CAUCHY_MARGIN if not np.isfinite(radius) else radius
    return plan_grid(
        lower - margin * width,
        upper + margin * width,
        width,
        upper - lower,
        n_bins,
        reach=radius * width,
        sizes=sizes,
    )


def _grid_sums(X, y, sample_weight, grid, center):
    """The binned sums of every block of rows, added up a tree of tasks."""
    import dask

    blocks = X.to_delayed().ravel()
    y_blocks = y.to_delayed().ravel()
    w_blocks = (
        [None] * len(blocks)
        if sample_weight is None
        else sample_weight.to_delayed().ravel()
    )
    bin_block = dask.delayed(_bin_block, pure=True)
    parts = [
        bin_block(xb, yb, wb, grid, center)
        for xb, yb, wb in zip(blocks, y_blocks, w_blocks, strict=True)
    ]
    (sums,) = dask.compute(_tree_sum(parts, dask.delayed(_add, pure=True)))
    return sums


def predict_dask(estimator, X, return_std, return_se):
    """``estimator.predict`` of a dask array of queries: a dask array (or a
    tuple of them) computed chunk by chunk with the fitted estimator."""
    name, expected = type(estimator).__name__, estimator.n_features_in_
    if X.ndim != 2:
        raise ValueError(
            f"X has shape {X.shape}, but {name} is expecting 2-D queries of "
            f"{expected} features."
        )
    if X.shape[1] != expected:
        # The words of scikit-learn's check, as for every other input.
        raise ValueError(
            f"X has {X.shape[1]} features, but {name} is expecting {expected} "
            "features as input."
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
