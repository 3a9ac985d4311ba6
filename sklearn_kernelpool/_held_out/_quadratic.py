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

from .._engine._local_quadratic import QuadraticLayout, fit_bytes, quadratic_fit


def _batches(n_rows, n_keys, d, n_outputs):
    """Slices of rows computed together, within about 4 MiB of work."""
    row = 8 * (d + 4) * n_keys + fit_bytes(n_keys, d, n_outputs)
    step = max(1, 2**22 // row)
    return (slice(start, start + step) for start in range(0, n_rows, step))


def quadratic_predictions(engine, sums, rows, groups=None, train=None):
    """Held-out predictions of degree 2 of every candidate of ``engine``.

    As :meth:`.._fits.HeldOutFits.predictions` (same arguments and
    returns), the flags those of the linear block (rank 0, rank-deficient)
    and of the slope's safeguard factor ``s1 < 1``.
    """
    moments = sums.moments
    empty = ~(moments[..., -1] > 0)
    n, d = engine.X.shape
    p = engine.Y.shape[1]
    values = engine.Y - engine.value_center
    predictions = np.full((*moments.shape[:-1], p), np.nan)
    rank = np.full(moments.shape[:-1], d, dtype=np.intp)
    shrinkage = np.ones(moments.shape[:-1])
    n_keys, centers = engine._fit_keys(rows, groups, train)
    n_keys = np.broadcast_to(n_keys, (len(rows),))
    for k, kernel in enumerate(engine.kernels):
        for m in range(moments.shape[1]):
            fitted = np.flatnonzero(~empty[k, m])
            for batch in _batches(len(fitted), n, d, p):
                at = fitted[batch]
                scores, keys = engine._refit_weights((k, m), rows[at], groups, train)
                total = scores.sum(axis=1)
                weighed = total > 0
                at = at[weighed]
                layout = QuadraticLayout(d, p, n_keys[at])
                fit = quadratic_fit(
                    scores[weighed] / total[weighed, None],
                    engine.X[keys],
                    values[keys],
                    engine.X[rows[at]],
                    layout,
                    False,
                    centers[at],
                    True,
                    kernel=kernel,
                )
                predictions[k, m, at], _, rank[k, m, at], shrinkage[k, m, at] = fit
    predictions += engine.value_center
    empty = ~(moments[..., -1] > 0)
    predictions[empty] = np.nan
    singular = ~empty & (rank == 0)
    deficient = ~empty & (rank > 0) & (rank < d)
    shrunk = ~empty & (shrinkage < 1.0)
    return predictions, empty, singular, deficient, shrunk
