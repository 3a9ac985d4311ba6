"""Derivatives of the fitted function with respect to the query.

Both fits are linear in the training values, and so are their gradients:
``grad f(q) = sum_i G_i(q) y_i`` with one vector ``G_i(q)`` of
``n_features`` entries per training row. With ``z = x / h`` the coordinates
scaled by the (per-feature) bandwidth, ``D_i = z_q - z_i``, ``r^2`` the
squared adaptive scale of the query (1 for a fixed width, see
:mod:`.._engine._adaptive`) and ``s_i = |D_i|^2 / r^2`` the squared scaled distance,
the normalised attention weights ``p_i`` of the query give:

- ``degree=0`` (the ratio ``f = sum_i a_i y_i / sum_i a_i``, ``a_i`` the
  attention scores)::

      v_i = grad log a_i = phi(s_i) D_i / (h r^2),
      G_i = p_i (v_i - sum_j p_j v_j),

  with ``phi(s) = d log alpha / d(s / 2) = alpha'(u) / (u alpha(u))`` at
  ``u = sqrt(s)``, twice :attr:`..kernels.Kernel.log_slope`. Sample weights
  and the categorical
  factor do not depend on the continuous query and drop out of ``v_i``.
- ``degree=1`` (the slope ``beta`` of the weighted least-squares fit of
  ``y ~ b + beta . (z - z_q)``): with ``K_i = -D_i``, ``m = sum_i p_i K_i`` and
  ``C = sum_i p_i (K_i - m)(K_i - m)^T``, ``beta = sum_i C^+ p_i (K_i - m)
  y_i`` (the slope rows of ``(Z^T P Z)^+ Z^T P`` for the design
  ``Z = [1, K]``), so ``G_i = C^+ p_i (K_i - m) / h``, with the pseudo-inverse
  over the numerical rank of :mod:`.._engine._local_linear`.
- ``degree=2``: the linear coefficients of the local quadratic fit at the
  query, the gradient there of the fitted quadratic
  (:mod:`.._engine._local_quadratic`):
  ``G_i = p_i (s1 C^+ K_i + s2 (J(q - m) - B)^T Cr^+ R_i) / h``, with both
  safeguard factors as in the fit.

The standard errors are ``sqrt(sum_i G_i^2 sigma_i^2)`` with the residual
variances of :func:`._residuals.residual_variance`.

A fit on mapped keys ``z = A x`` (a learned map, :mod:`.._widths._projection_loss`)
has the gradient ``A^T grad_z f`` in the original coordinates: the factors
are mapped, ``G_i <- A^T G_i``, before the gradient and its standard errors
are formed from them, so both are exact in ``x``.

Numerics: ``D_i`` is the difference of the unscaled coordinates, divided by
the bandwidth; the local frame of degree 1 is first taken from the key of
largest weight (so that a fit resting on keys of tiny weight, far from the
data, keeps its relative accuracy); the factors are corrected to
``G_i - p_i sum_j G_j``, which sum to 0 also in floating point, and the
gradient is computed as ``sum_i G_i (y_i - c)`` with ``c`` the mean of the
values, which equals ``sum_i G_i y_i`` and leaves the level of ``y`` out:
one product for every output. The ``n_features x n_keys``
factors of a query are formed for a few queries at a time, within
``working_memory`` shared with the chunk's weights.
"""

import numpy as np
from sklearn.utils import gen_batches

from .._engine._adaptive import safe_radii
from .._engine._array_api import is_array_api_pool
from .._engine._centred_fit import _centred_scale
from .._engine._local_linear import MomentLayout, _pseudo_inverse
from .._engine._local_quadratic import QuadraticLayout, quadratic_gradient
from .._engine._safeguard import kish_ratio
from .._utils._input import validate_queries
from .._utils._threads import engine_threads
from .._utils._working_memory import working_memory_bytes
from ._residuals import residual_variance

# float64 arrays of n_keys x n_features per query held at once: the
# differences, the gradient factors, their squares and temporaries.
_ROW_ARRAYS = 5


def check_gradient_support(estimator):
    """Refuse the estimators whose fit has no gradient here."""
    pool = estimator._pool
    if is_array_api_pool(pool):
        raise ValueError(
            "predict_gradient works on NumPy arrays only; this estimator was "
            "fitted on arrays of another array API namespace. Fit it on NumPy "
            "arrays to compute gradients."
        )
    if pool.degree == 0 and pool._arguments["user_kernel"]:
        raise ValueError(
            "predict_gradient with degree=0 needs the derivative of the kernel, "
            "which is known for the registered kernels only "
            "(Kernel.log_slope); "
            f"got the callable kernel {pool.kernel.name!r}. Use a built-in kernel, "
            "or degree=1, whose slope needs no derivative of the kernel."
        )


def _gradient_factors(pool, p, diff, r2, layout, centers):
    """The factors ``G`` of rows of weights ``p``, and their correction.

    ``diff`` holds ``D = z_q - z_i`` with shape (n_rows, n_features, n_keys)
    and is overwritten; ``r2`` the squared adaptive scales (ones for a fixed
    width). Returns ``(G, mean)``: for degree 1, ``G`` of shape
    (n_rows, n_features, n_keys) and ``mean`` None; for degree 0, ``p_i v_i``
    in ``G`` and ``mean = sum_j p_j v_j`` of shape (n_rows, n_features), the
    factors being ``G - p mean`` (left to the caller, which needs them only
    for the standard errors).
    """
    d = diff.shape[1]
    h = np.broadcast_to(pool.bandwidth, (d,))
    if pool.degree == 0:
        s = np.einsum("qfn,qfn->qn", diff, diff)
        s /= r2[:, None]
        inside = p > 0
        if np.isfinite(pool.kernel.support):
            inside &= s < pool.kernel.support**2
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            phi = 2.0 * pool.kernel.log_slope(np.where(inside, s, 0.0))
        a = np.where(inside, p * phi, 0.0)
        diff *= a[:, None, :]
        diff *= (1.0 / (h[None, :] * r2[:, None]))[:, :, None]
        return diff, diff.sum(axis=2)
    if pool.degree == 2:
        frames = np.negative(diff, out=diff)
        G = quadratic_gradient(p, frames, layout, centers, kernel=pool.kernel)
        G /= h[None, :, None]
        return G, None
    # The local frame: K_i = z_i - z_q, centred on its weighted mean m. The
    # keys are first taken from the heaviest one, which then sits exactly at
    # 0: where it carries almost all the weight, m is within rounding of it,
    # and K_i - m would otherwise be rounding errors amplified by C^+.
    local = np.negative(diff, out=diff)
    heaviest = np.argmax(p, axis=1)
    reference = np.take_along_axis(local, heaviest[:, None, None], axis=2)
    local -= reference
    m = np.matmul(local, p[:, :, None])[:, :, 0]
    local -= m[:, :, None]
    m += reference[:, :, 0]
    weighted = local * p[:, None, :]
    cov = np.matmul(weighted, local.transpose(0, 2, 1))
    scale = _centred_scale(m, cov, centers)
    # The query sits at the origin of the frame: m - q is m.
    kish = kish_ratio(np.einsum("qn,qn->q", p, p), 1.0, pool.kernel)
    vectors, inverse, _, _ = _pseudo_inverse(cov, scale, layout, m, kish)
    projected = np.matmul(vectors.transpose(0, 2, 1), weighted, out=weighted)
    projected *= inverse[:, :, None]
    factors = np.matmul(vectors, projected, out=local)
    factors /= h[None, :, None]
    return factors, None


def predict_gradient(estimator, X, return_se, components=None):
    """The gradients (and standard errors) of a fitted regressor at ``X``.

    Returns ``(gradient, se)`` of shape (n_queries, n_features, n_outputs),
    ``se`` None unless ``return_se``; NaN in the categorical features. With
    ``components``, the map ``A`` (n_components, n_original) of which the
    regressor's keys and ``X`` are the images: the gradients in the original
    coordinates, of shape (n_queries, n_original, n_outputs).
    """
    check_gradient_support(estimator)
    X = validate_queries(estimator, X)
    pool = estimator._pool
    values = np.asarray(estimator.values_, dtype=np.float64)
    values = values.reshape(values.shape[0], -1)[pool.support]
    variance = None
    if return_se:
        variance = residual_variance(estimator)[0][pool.support]
    n_keys, d = pool.keys.shape
    work = _ChunkGradients(estimator, values, variance, return_se, components)
    chunks = pool._run_chunks(
        X, None, work, estimator.n_jobs, extra_row_bytes=8 * n_keys
    )
    if components is not None:
        d = components.shape[1]
    grad = np.concatenate([c[0] for c in chunks]) if chunks else np.empty((0, d, 1))
    se = None
    if return_se:
        se = np.concatenate([c[1] for c in chunks]) if chunks else np.empty_like(grad)
    if components is not None:  # no categorical feature beside a map
        return grad.astype(pool.dtype, copy=False), (
            None if se is None else se.astype(pool.dtype, copy=False)
        )
    return _place(estimator, grad, pool.dtype), (
        None if se is None else _place(estimator, se, pool.dtype)
    )


def feature_gradients(estimator, X, values, features):
    """The gradient along each of ``features`` of the fit of its own values.

    ``values`` of shape (n_samples, len(features), n_outputs): the fit being
    linear in the values and its widths fixed, the gradient along the
    ``k``-th of ``features`` (indices of the pool's columns, the continuous
    features) of the fit of ``values[:, k]`` is
    ``sum_i G_i(q)[features[k]] values[i, k]``, one product per feature over
    the factors ``G`` of the fitted pool, which do not depend on the values.
    Returns an ndarray of shape (n_queries, len(features), n_outputs),
    float64. Used by :func:`..significance_test` for the gradients of many
    bootstrap targets, each along its own feature.
    """
    check_gradient_support(estimator)
    X = validate_queries(estimator, X)
    pool = estimator._pool
    values = np.asarray(values, dtype=np.float64)[pool.support]
    work = _ChunkGradients(estimator, values, None, False, features=features)
    chunks = pool._run_chunks(
        X, None, work, estimator.n_jobs, extra_row_bytes=8 * pool.keys.shape[0]
    )
    if not chunks:
        return np.empty((0, len(features), values.shape[2]))
    return np.concatenate([c[0] for c in chunks])


class _ChunkGradients:
    """The work of ``pool._run_chunks``: the gradients of a chunk of queries.

    Parameters
    ----------
    estimator : fitted regressor
        Its pool, and its ``n_jobs`` for the share of ``working_memory``.
    values : ndarray of shape (n_keys, n_outputs)
        The training values of the keys, float64.
    variance : ndarray of shape (n_keys, n_outputs) or None
        Their residual variances, for the standard errors.
    return_se : bool
        Whether to compute the standard errors too.
    components : ndarray of shape (n_features, n_original) or None
        The map of which the keys are the images: the factors are mapped
        back to the original coordinates.
    features : sequence of int or None
        With ``values`` of shape (n_keys, len(features), n_outputs): the
        gradient along ``features[k]`` of the fit of ``values[:, k]`` only
        (:func:`feature_gradients`).
    """

    def __init__(
        self, estimator, values, variance, return_se, components=None, features=None
    ):
        pool = estimator._pool
        self.pool = pool
        # Centred once: the gradients do not depend on the level of y.
        self.values = values - values.mean(axis=0)
        self.variance = variance
        self.return_se = return_se
        self.n_keys, self.d = pool.keys.shape
        layout = QuadraticLayout if pool.degree == 2 else MomentLayout
        self.layout = layout(self.d, values.shape[1], self.n_keys)
        # The unscaled keys of positive weight (float64), one row per feature.
        self.keys_t = np.ascontiguousarray(pool.exact.keys.T)
        self.h_column = np.broadcast_to(pool.bandwidth, (self.d,))[:, None]
        self.fill = np.nan if pool.on_empty in ("nan", "raise") else 0.0
        self.components = components
        self.features = features
        self.d_out = self.d if components is None else components.shape[1]
        if features is not None:
            self.d_out = len(features)
        self.budget = working_memory_bytes() / engine_threads(estimator.n_jobs)
        self.row_bytes = 8 * _ROW_ARRAYS * self.n_keys * max(self.d, self.d_out)

    def __call__(self, X_chunk, workspace):
        """``((gradient, se), empty)`` of the queries ``X_chunk``."""
        p, empty, raw, r2, coincident = self._weights(X_chunk, workspace)
        n_rows = len(raw)
        # The chunk's weights and the factors of its rows share the budget.
        sub_rows = max(1, int((self.budget - p.nbytes) // self.row_bytes))
        grad = np.empty((n_rows, self.d_out, self.values.shape[-1]))
        se = np.empty_like(grad) if self.return_se else None
        for rows in gen_batches(n_rows, sub_rows):
            self._batch(
                p[rows],
                raw[rows],
                r2[rows],
                grad[rows],
                None if se is None else se[rows],
            )
        still = coincident if self.pool.degree == 0 else np.zeros_like(coincident)
        grad[still] = 0.0
        grad[empty] = self.fill
        if self.return_se:
            se[still] = 0.0
            se[empty] = self.fill
        return (grad, se), empty

    def _weights(self, X_chunk, workspace):
        """The normalised weights of the queries (0 in the empty rows), the
        empty rows, the unscaled queries, their squared adaptive scales and
        which of them coincide with a key."""
        queries = self.pool._queries(X_chunk)
        p, empty = self.pool._normalized_scores(queries, workspace, sparse=False)
        p = np.asarray(p, dtype=np.float64)  # a new array: ours to change
        p[empty] = 0.0
        raw = queries[2]
        if len(queries) > 3:
            r2, coincident = safe_radii(queries[3])
        else:
            r2, coincident = np.ones(len(raw)), np.zeros(len(raw), dtype=bool)
        return p, empty, raw, r2, coincident

    def _batch(self, p, q, r2, grad, se):
        """Write the gradients of the queries ``q`` of weights ``p`` into
        ``grad``, and their standard errors into ``se`` unless None."""
        # Only the keys some query of the batch weighs (compact kernels).
        used = np.flatnonzero(np.any(p != 0, axis=0))
        if len(used) > self.n_keys // 2:
            used = slice(None)  # no copies where most are weighed
        weights, Y = p[:, used], self.values[used]
        diff = np.subtract(q[:, :, None], self.keys_t[None, :, used])
        diff /= self.h_column
        centers = self.pool.center - q / self.pool.bandwidth
        G, _ = _gradient_factors(self.pool, weights, diff, r2, self.layout, centers)
        del diff
        if self.components is not None:  # A^T G, corrected below as G is
            G = np.einsum("kj,rki->rji", self.components, G)
        # The factors summing to 0: G_i - p_i sum_j G_j, the correction of
        # degree 0 (sum_j G_j = sum_j p_j v_j) and rounding errors for degree
        # 1. Then sum_i G_i y_i = sum_i G_i (y_i - c) for the centred values:
        # one product for every output, the level of y (times rounding
        # errors) left out.
        total = G.sum(axis=2)
        for j in range(G.shape[1]):
            G[:, j] -= weights * total[:, j, None]
        if self.features is None:
            grad[...] = _times(G, Y)
        else:
            for k, j in enumerate(self.features):
                grad[:, k] = G[:, j] @ Y[:, k]
        if se is None:
            return
        np.square(G, out=G)
        se[...] = np.sqrt(_times(G, self.variance[used]))


def _times(G, matrix):
    """``G @ matrix`` for ``G`` of shape (n_rows, d, n_keys), as one product."""
    n_rows, d, n_keys = G.shape
    return (G.reshape(n_rows * d, n_keys) @ matrix).reshape(n_rows, d, -1)


def _place(estimator, continuous, dtype):
    """Put the continuous features' columns in place, NaN in the others."""
    mask = getattr(estimator, "is_categorical_", None)
    if mask is None:
        return continuous.astype(dtype, copy=False)
    out = np.full(
        (continuous.shape[0], len(mask), continuous.shape[2]), np.nan, dtype=dtype
    )
    if not np.all(mask):
        out[:, ~mask] = continuous
    return out
