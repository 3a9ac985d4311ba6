"""Held-out local quadratic fits (``degree=2``) of the exact engines.

The pooled sums of a held-out pass hold the moments of degrees 0 and 1
only; a held-out fit of degree 2 is computed from the weights of its point
over the keys of its fit (the engine's ``_refit_weights``: the same keys,
exclusions and adaptive widths as the refits of degree 1), by the
safeguarded local quadratic fit of :mod:`.._engine._local_quadratic`, so
that it equals the fit of the estimator refitted without the point's group
or fold.
"""

import numpy as np

from .._engine._local_quadratic import (
    BATCH_BYTES,
    QuadraticLayout,
    quadratic_fit,
    quadratic_kernel,
)
from .._utils._threads import single_threaded_blas
from .._utils._working_memory import working_memory_bytes
from ._quadratic_moments import pooled_quadratic, spatial_order


def _batches(n_rows, n_keys, d):
    """Slices of rows pooled together: their weights and distances within
    about :data:`.._engine._local_quadratic.BATCH_BYTES` (the exact fits of
    the rows left to them batch again, :func:`quadratic_fit`)."""
    budget = min(BATCH_BYTES, working_memory_bytes())
    step = max(16, int(budget // (8 * (d + 4) * n_keys)))
    return (slice(start, start + step) for start in range(0, n_rows, step))


def _fit_batch(engine, scores, keys, values, rows, at, kernel, out, fit, fits):
    """Fit the points ``rows[at]`` of weights ``scores`` over ``keys``: from
    their pooled moments (:func:`._quadratic_moments.pooled_quadratic`), and
    those it leaves by the exact per-point fit; ``out`` (predictions),
    ``fit`` (rank, shrinkage) are written in place; ``fits`` is the pair
    ``(n_keys, centers)`` of the rows' fits."""
    d = engine.X.shape[1]
    X, Y, queries = engine.X[keys], values[keys], engine.X[rows[at]]
    mean, ok, s1, _ = pooled_quadratic(scores, X, Y, queries, kernel)
    out[at[ok]], fit[0][at[ok]], fit[1][at[ok]] = mean[ok], d, s1[ok]
    left = ~ok
    if not np.any(left):
        return
    at, scores = at[left], scores[left]
    n_keys, centers = fits
    layout = QuadraticLayout(d, Y.shape[1], n_keys[at])
    p = scores / scores.sum(axis=1, keepdims=True)
    mean, _, rank, s1 = quadratic_fit(
        p, X, Y, queries[left], layout, False, centers[at], True, kernel=kernel
    )
    out[at], fit[0][at], fit[1][at] = mean, rank, s1


def _fit_candidates(engine, rows, groups, train, order, out):
    """Fit every candidate's points in batches of near points (``order``),
    writing ``out`` = ``(predictions, rank, shrinkage, empty, n_keys,
    centers, values)`` in place."""
    predictions, rank, shrinkage, empty, n_keys, centers, values = out
    n, d = engine.X.shape
    for k, kernel in enumerate(engine.kernels):
        for m in range(empty.shape[1]):
            fitted = order[~empty[k, m][order]]
            for batch in _batches(len(fitted), n, d):
                at = fitted[batch]
                scores, keys = engine._refit_weights((k, m), rows[at], groups, train)
                total = scores.sum(axis=1)
                weighed = total > 0
                # A point whose only keys sit on the edge of the support by
                # the exact differences has none: it falls back as empty.
                empty[k, m, at[~weighed]] = True
                at, scores = at[weighed], scores[weighed]
                _fit_batch(
                    engine,
                    scores,
                    keys,
                    values,
                    rows,
                    at,
                    kernel,
                    predictions[k, m],
                    (rank[k, m], shrinkage[k, m]),
                    (n_keys, centers),
                )


def quadratic_predictions(engine, sums, rows, groups=None, train=None):
    """Held-out predictions of degree 2 of every candidate of ``engine``.

    As :meth:`.._fits.HeldOutFits.predictions` (same arguments and
    returns), the flags those of the linear block (rank 0, rank-deficient)
    and of the slope's safeguard factor ``s1 < 1``.
    """
    moments = sums.moments
    empty = ~(moments[..., -1] > 0)
    d = engine.X.shape[1]
    p = engine.Y.shape[1]
    values = engine.Y - engine.value_center
    predictions = np.full((*moments.shape[:-1], p), np.nan)
    rank = np.full(moments.shape[:-1], d, dtype=np.intp)
    shrinkage = np.ones(moments.shape[:-1])
    n_keys, centers = engine._fit_keys(rows, groups, train)
    n_keys = np.broadcast_to(n_keys, (len(rows),))
    order = spatial_order(engine.X[rows])
    # BLAS on one thread, as in the pooled passes: the products then round
    # alike whatever the threads of the caller (:mod:`.._utils._threads`).
    out = (predictions, rank, shrinkage, empty, n_keys, centers, values)
    with single_threaded_blas():
        _fit_candidates(engine, rows, groups, train, order, out)
    predictions += engine.value_center
    predictions[empty] = np.nan
    singular = ~empty & (rank == 0)
    deficient = ~empty & (rank > 0) & (rank < d)
    shrunk = ~empty & (shrinkage < 1.0)
    return predictions, empty, singular, deficient, shrunk


def _in_sample_batch(engine, candidate, at, positive, fits, out):
    """The in-sample fits and self weights ``out[0][at]``, ``out[1][at]`` of
    the points ``at`` for one candidate, from their weights over every key
    of positive weight, their own included: from their pooled moments
    (:func:`._quadratic_moments.pooled_quadratic`, the self weight
    ``L_ii = p_ii (1 + s1 (lev1 - 1) + s2 (lev2 - lev1))``), and those it
    leaves from their equivalent-kernel rows (:func:`quadratic_kernel`)."""
    scores, keys = engine._refit_weights(candidate, at, None, positive)
    kernel = engine.kernels[candidate[0]]
    X = engine.X if isinstance(keys, slice) else engine.X[keys]
    values = engine.Y[keys] - engine.value_center
    own = at if isinstance(keys, slice) else np.searchsorted(keys, at)
    p = scores / scores.sum(axis=1, keepdims=True)
    p_own = p[np.arange(len(at)), own]
    mean, ok, _, factor = pooled_quadratic(scores, X, values, engine.X[at], kernel)
    out[0][at[ok]] = mean[ok] + engine.value_center
    out[1][at[ok]] = p_own[ok] * factor[ok]
    left = np.flatnonzero(~ok)
    if not len(left):
        return
    n_keys, centers = fits
    layout = QuadraticLayout(X.shape[1], values.shape[1], n_keys[left])
    L, _, _ = quadratic_kernel(
        p[left], X, engine.X[at[left]], layout, centers[left], kernel=kernel
    )
    out[0][at[left]] = L @ values + engine.value_center
    out[1][at[left]] = L[np.arange(len(left)), own[left]]


def quadratic_in_sample(engine, shape):
    """In-sample local quadratic fits and self weights of every candidate.

    The counterpart of :meth:`.._fits.HeldOutFits.in_sample` for
    ``degree=2`` (``shape`` is its ``(n_kernels, n_bandwidths)``): the fit
    of all the data at each training point of positive weight and the
    diagonal ``L_ii`` of the smoother, from the point's weights over every
    key (its own included), in batches of near points: from their pooled
    moments where the normal matrix is well conditioned, else from the
    point's equivalent-kernel row (:func:`_in_sample_batch`). They equal
    those of :meth:`KernelAttentionRegressor.smoother_diagnostics` of the
    candidate (to about 1e-9 where pooled). Rows of weight zero are no
    observation: NaN fits, zero self weight.
    """
    n, d = engine.X.shape
    positive = np.flatnonzero(engine.weights > 0)
    fitted = np.full((*shape, n, engine.Y.shape[1]), np.nan)
    self_weight = np.zeros((*shape, n))
    order = positive[spatial_order(engine.X[positive])]
    n_keys, centers = engine._fit_keys(order, None, positive)
    n_keys = np.broadcast_to(n_keys, (len(order),))
    with single_threaded_blas():
        for k in range(shape[0]):
            for m in range(shape[1]):
                out = (fitted[k, m], self_weight[k, m])
                for batch in _batches(len(order), n, d):
                    fits = (n_keys[batch], centers[batch])
                    _in_sample_batch(engine, (k, m), order[batch], positive, fits, out)
    return fitted, self_weight
