"""``algorithm="binned"`` on dask arrays: a map-reduce of the grid sums.

Linear binning is additive in the rows (:mod:`._binning`). ``fit`` takes
dask arrays checked without computing a value
(:mod:`.._utils._dask_input`) and, after :func:`check_dask_parameters`,
computes in one pass the span of the keys, the total weight and the weighted
mean of ``y``, refusing non-finite values and negative weights with the
errors of NumPy input (:func:`_summaries`); in a second pass each partition
of rows is binned onto the grid on the worker that holds it (with the
squared weights for ``degree=1``, whose safeguard reads them,
:mod:`._engine`), and the grids are summed by a tree reduction
(:func:`_grid_sums`). The client then holds
the grid sums only (their size is the grid's) and runs one FFT convolution.
The fitted :class:`._grid_pool.GridPool` keeps the grid sums and nothing of
the rows.

``predict`` on a dask array (its shape and features checked by
:mod:`.._utils._dask_input`) maps the fitted estimator over the chunks of
rows (:func:`predict_dask`).

The classifier's fit (:func:`fit_dask_classifier`) finds the classes in one
more pass (:func:`dask.array.unique`) and bins the class indicators, its
multi-output values, by the same map-reduce.
"""

import numpy as np

from .._engine._pooling import resolve_kernel
from .._utils._dask_input import is_dask_array as is_dask_array
from .._utils._validation import float_dtype, raise_not_finite
from .._utils._width_rules import resolve_bandwidth
from . import _engine as _binned
from ._binning import linear_bin
from ._grid import plan_grid, warn_coarse_fit
from ._grid_pool import NO_ROWS, GridPool
from ._pool import check_binned_options, check_n_bins, prefers_binned


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


def _bin_block(X, y, w, grid, center, weight_squares):
    """The grid sums of one partition: weights, centred weighted values,
    their squares and, with ``weight_squares``, the squared weights
    (``_binned.binned_columns``)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(len(X), -1)
    w = np.ones(len(X)) if w is None else np.asarray(w, dtype=np.float64)
    support = w > 0
    if not np.all(support):
        X, y, w = X[support], y[support], w[support]
    columns = _binned.binned_columns(y, w, center, True, weight_squares)
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
    """Fit the classifier ``estimator`` on dask arrays (checked by
    :mod:`.._utils._dask_input`): its classes from one pass, then the
    map-reduce of :func:`fit_dask` over the class indicators (one output per
    class); sets ``classes_`` and returns it."""
    import dask.array as da
    from sklearn.utils.multiclass import check_classification_targets

    check_dask_parameters(estimator)
    classes = np.asarray(da.unique(y).compute())
    if classes.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        has_nan = bool(np.any(np.isnan(classes)))
        raise_not_finite(estimator, "y", has_nan, classes.dtype)
    with np.errstate(invalid="ignore"):
        check_classification_targets(classes)
    indicators = y.map_blocks(
        _indicators,
        classes,
        chunks=(X.chunks[0], (len(classes),)),
        new_axis=1,
        dtype=np.float64,
        meta=np.empty((0, 0)),
    )
    fit_dask(estimator, X, indicators, sample_weight, 0)
    estimator.classes_ = classes
    return estimator


def _indicators(labels, classes):
    """The class indicators (n, n_classes), float64, of a block of labels."""
    return (np.asarray(labels)[:, None] == classes[None, :]).astype(np.float64)


def fit_dask(estimator, X, y, sample_weight, degree):
    """Fit the regressor ``estimator`` on dask arrays (checked by
    :mod:`.._utils._dask_input`) by a map-reduce of the grid sums; sets its
    fitted attributes and returns it."""
    check_dask_parameters(estimator)
    n_samples, n_features = X.shape
    if n_features > 2:
        _refuse_dask(
            estimator,
            f"X has {n_features} features, and the binned path takes one or two",
        )
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
    sums = _grid_sums(X, y, sample_weight, grid, center, degree == 1)
    dtype = float_dtype(X.dtype).type
    estimator._pool = GridPool(
        grid, sums, kernel, width, degree, center, estimator.on_empty, dtype, n_samples
    )
    estimator.bandwidth_ = bandwidth
    estimator.algorithm_ = "binned"
    estimator.sample_weight_ = None
    estimator.keys_ = None
    estimator.values_ = None
    estimator._y_ndim = y.ndim
    return estimator


def check_dask_parameters(estimator):
    """Refuse the options that the binned fit of dask arrays cannot take: an
    algorithm other than ``"binned"`` or ``"auto"``, a rule-of-thumb
    bandwidth (categorical features declared of a dask array are refused
    with those of every other array, :mod:`.._estimator._input_kinds`)."""
    if estimator.algorithm not in ("binned", "auto"):
        _refuse_dask(estimator, f"algorithm={estimator.algorithm!r}")
    if isinstance(estimator.bandwidth, str):
        _refuse_dask(
            estimator,
            f"bandwidth={estimator.bandwidth!r} needs the rows; pass a number or "
            "one per feature",
        )


def _summaries(estimator, X, Y, sample_weight):
    """One pass over the rows: the span of the keys of positive weight
    (``lower``, ``upper``), the total weight and the weighted sum of the
    values; non-finite values and negative or all-zero weights refused, with
    the errors of NumPy input."""
    import dask
    import dask.array as da

    n_samples = X.shape[0]
    w = (
        da.ones(n_samples, chunks=X.chunks[0])
        if sample_weight is None
        else sample_weight.astype(np.float64)
    )
    arrays = {"X": X, "y": Y, "sample_weight": w}
    finite = {name: da.isfinite(array) for name, array in arrays.items()}
    found = {
        name: (da.isnan(array).any(), (~finite[name]).any())
        for name, array in arrays.items()
    }
    # The sums of the finite values only (non-finite ones are refused after
    # the pass), so that they raise no warning of their own.
    w = da.where(finite["sample_weight"], w, 0.0)
    Y = da.where(finite["y"], Y.astype(np.float64), 0.0)
    positive = w > 0
    lower, upper, total, weighted, found, negative = dask.compute(
        da.where(positive[:, None], X, np.inf).min(axis=0),
        da.where(positive[:, None], X, -np.inf).max(axis=0),
        w.sum(),
        (w[:, None] * Y).sum(axis=0),
        found,
        (w < 0).sum(),
    )
    for name, (has_nan, not_finite) in found.items():
        if not_finite:
            dtype = float_dtype(arrays[name].dtype)
            raise_not_finite(estimator, name, has_nan, dtype)
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


def _grid_sums(X, y, sample_weight, grid, center, weight_squares):
    """The binned sums of every block of rows, added up a tree of tasks; the
    squared weights too with ``weight_squares`` (``degree=1``)."""
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
        bin_block(xb, yb, wb, grid, center, weight_squares)
        for xb, yb, wb in zip(blocks, y_blocks, w_blocks, strict=True)
    ]
    (sums,) = dask.compute(_tree_sum(parts, dask.delayed(_add, pure=True)))
    return sums


def predict_dask(estimator, X, return_std, return_se):
    """``estimator.predict`` of a dask array of queries (checked by
    :mod:`.._utils._dask_input`): a dask array (or a tuple of them) computed
    chunk by chunk with the fitted estimator."""
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
