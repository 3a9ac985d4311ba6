"""The local quadratic fit (``degree=2``) of rows of weights, safeguarded.

At a query ``q`` the local quadratic fit minimises
``sum_i a_i (y_i - b - beta . (k_i - q) - Gamma : (k_i - q)(k_i - q)^T)**2``
over the intercept ``b``, the linear coefficients ``beta`` and the symmetric
``Gamma`` (cross terms included: ``P = (d + 1)(d + 2) / 2`` parameters), and
predicts ``b``. It is computed by nested least squares (Frisch--Waugh--Lovell)
about the local mean ``m`` of the keys, with ``K_i = k_i - m`` and the
normalised weights ``p``:

1. the local-linear fit of :mod:`._local_linear`: ``C = K^T P K``,
   ``beta_1 = C^+ K^T P y``;
2. the quadratic features ``psi_i = upper(K_i K_i^T)`` (``P2 = d (d + 1) / 2``
   products ``K_ij K_il``, ``j <= l``) regressed on ``[1, K]``:
   ``B = (Psi - psibar)^T P K C^+`` and the residual features
   ``R_i = psi_i - psibar - B K_i``;
3. ``gamma = Cr^+ R^T P y`` with ``Cr = R^T P R`` (the Schur complement of
   the linear block in the quadratic design).

With the query's residual features ``r_q = psi(q - m) - psibar - B (q - m)``
the plain quadratic fit is ``ybar + beta_1 . (q - m) + gamma . r_q``. Each
pseudo-inverse is taken over the eigenvalues above the rounding error of its
computation: that of :func:`._centred_fit.centred_fit` for ``C``; for
``Cr``, with ``t = 10 P2 sqrt(n) eps`` (``n`` keys), a product whose
residual variance is at most ``t`` times its own second moment
``sum_i p_i psi_ij**2`` gets no term (a feature of two levels, whose square
is a linear function of it, gets none along itself), and the correlation
matrix of the others is inverted over its eigenvalues above ``t``, so that
the rank does not depend on the scale of each feature (widths learned per
feature).

**The safeguard** (:mod:`._safeguard`) extends by the same rule: with
``D1**2 = (q - m)^T C^+ (q - m)`` and ``Dr**2 = r_q^T Cr^+ r_q`` the
leverage of the query in the linear and the quadratic design is
``(1 + D1**2) / n_eff`` and ``(1 + D1**2 + Dr**2) / n_eff`` (exact for
weights of 0 and 1; its ``p``-weighted mean over the keys is ``P / n_eff``,
so that it weighs the effective number of keys against the parameters), and
the prediction is::

    ybar + s1 beta_1 . (q - m) + s2 gamma . r_q,
    s1 = slope_shrinkage(D1**2),  s2 = slope_shrinkage(D1**2 + Dr**2)

so ``s2 <= s1``: the quadratic terms are kept where the quadratic's
prediction has at most the variance of one observation, and shrink
continuously towards the safeguarded local-linear fit (``s2 = 0``) as the
leverage grows, before the slope does. Everything is linear in ``y``: the
equivalent-kernel weights are ``l_i = p_i (1 + s1 K_i^T C^+ (q - m) +
s2 R_i^T Cr^+ r_q)``, and the linear coefficients at ``q`` (the gradient of
the fitted quadratic there) ``s1 beta_1 + s2 (J(q - m) - B)^T gamma``, with
``J`` the derivative of ``psi``.

See Fan & Gijbels, "Local Polynomial Modelling and Its Applications" (1996),
for the local polynomial fit, and Loader, "Local Regression and Likelihood"
(1999), for local quadratic fits and their degrees of freedom.
"""

import numpy as np

from .._utils._working_memory import working_memory_bytes
from ._centred_fit import _centred_scale
from ._local_linear import _EPS, MomentLayout
from ._safeguard import kish_ratio, slope_shrinkage


class QuadraticLayout(MomentLayout):
    """The layout of a local quadratic fit: that of the local-linear one
    (its rank tolerance), the pairs of features of the products and the
    rank tolerance of the quadratic block."""

    degree = 2

    def __init__(self, n_features, n_outputs, n_keys):
        super().__init__(n_features, n_outputs, n_keys)
        self.pairs = np.triu_indices(n_features)
        self.n_products = len(self.pairs[0])
        self.quadratic_tolerance = 10.0 * self.n_products * np.sqrt(n_keys) * _EPS


#: The work of one batch of rows fitted together, at most (and at most
#: ``working_memory``).
BATCH_BYTES = 2**25


def fit_bytes(n_keys, n_features, n_outputs=1):
    """Bytes of the work of one row of :func:`quadratic_fit`.

    The row's keys, their weighted copy and a temporary, the products and
    residual features, their weighted copy and two temporaries
    (``n (3 d + 4 P2)``), the values, residuals and weights, and the two
    covariances with their eigendecompositions.
    """
    d = n_features
    P2 = d * (d + 1) // 2
    per_key = 3 * d + 4 * P2 + 4 * n_outputs + 4
    return 8 * (n_keys * per_key + 6 * (d * d + P2 * P2) + 8 * (d + P2))


def _inverse(matrices, thresholds):
    """Pseudo-inverses of symmetric matrices (n, k, k) over their
    eigenvalues above ``thresholds`` (none where a threshold is not
    finite, none whose inverse overflows), and the number of them. A
    matrix whose pseudo-inverse is not finite (a design of subnormal
    spread) gets none: rank 0."""
    values, vectors = np.linalg.eigh(matrices)
    finite = np.isfinite(thresholds)
    kept = (values > np.where(finite, thresholds, 0.0)[:, None]) & finite[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inverse = 1.0 / values
        kept &= np.isfinite(inverse)
        inverse = np.where(kept, inverse, 0.0)
        pinv = np.matmul(vectors * inverse[:, None, :], vectors.transpose(0, 2, 1))
    rank = np.count_nonzero(kept, axis=1)
    bad = ~np.all(np.isfinite(pinv), axis=(1, 2))
    pinv[bad], rank[bad] = 0.0, 0
    return pinv, rank


def _scaled_inverse(matrices, scales, tolerances):
    """Pseudo-inverses of the covariances of the residual quadratic features,
    invariant to the scale of each feature.

    A product whose residual variance is within ``tolerances`` of its own
    second moment ``scales`` (n, P2) is rounding (the square of a feature of
    two levels is a linear function of it) and gets no term; the others are
    scaled to a unit variance, and their correlation matrix is inverted over
    its eigenvalues above ``tolerances``, so that widths of different scales
    per feature (learned widths) decide the rank alike.
    """
    variance = np.einsum("rpp->rp", matrices)
    kept = variance > tolerances[:, None] * scales
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = np.where(kept, 1.0 / np.sqrt(variance), 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = matrices * unit[:, :, None] * unit[:, None, :]
        scaled[~np.isfinite(scaled)] = 0.0
        inverse, rank = _inverse(
            scaled, np.where(np.isfinite(tolerances), tolerances, np.inf)
        )
        inverse = inverse * unit[:, :, None] * unit[:, None, :]
    # (a design of subnormal spread: no quadratic term)
    bad = ~np.all(np.isfinite(inverse), axis=(1, 2))
    inverse[bad], rank[bad] = 0.0, 0
    return inverse, rank


def _jacobian(x, layout):
    """The derivatives of the products ``upper(x x^T)`` at the rows of ``x``
    (n, d), shape (n, P2, d)."""
    first, second = layout.pairs
    J = np.zeros((len(x), layout.n_products, layout.n_features))
    rows = np.arange(layout.n_products)
    J[:, rows, first] += x[:, second]
    J[:, rows, second] += x[:, first]
    return J


def _times(A, B):
    """Batched ``A @ B``."""
    return np.matmul(A, B)


def _t(A):
    """Batched transpose."""
    return A.transpose(0, 2, 1)


class _Rows:
    """The nested designs of rows of normalised weights, and their queries'
    factors, computed together.

    ``keys`` (n_keys, d), shared, or (n_rows, d, n_keys), one frame per row;
    only the keys that some row weighs enter. Holds, per row: ``K`` the keys
    about the local mean, ``R`` the residual quadratic features, their
    weighted copies ``wK`` and ``wR``, the pseudo-inverses ``C_pinv`` and
    ``Cr_pinv`` with their ranks, ``B``, the query's ``offset = q - m`` and
    ``r_q``, ``a1 = C^+ offset``, ``a2 = Cr^+ r_q``, and ``s1``, ``s2``.
    """

    def __init__(self, p, keys, queries, layout, centers, kish, tol):
        used = np.flatnonzero(np.any(p != 0, axis=0))
        self.used = used if len(used) < p.shape[1] else slice(None)
        self.p = w = np.asarray(p[:, self.used], dtype=np.float64)
        if keys.ndim == 2:
            K = np.array(keys[self.used], dtype=np.float64)[None]
        else:
            K = _t(np.asarray(keys[:, :, self.used], dtype=np.float64))
        m = np.einsum("rn,rnf->rf", w, K)
        K = K - m[:, None, :]
        wK = K * w[:, :, None]
        C = _times(_t(wK), K)
        scale = _centred_scale(m, C, centers)
        self.C_pinv, self.rank = _inverse(C, tol[:, 0] * scale)
        first, second = layout.pairs
        Psi = K[:, :, first] * K[:, :, second]
        scale = np.einsum("rn,rnp,rnp->rp", w, Psi, Psi)
        psibar = np.einsum("rn,rnp->rp", w, Psi)
        Psi -= psibar[:, None, :]
        self.B = _times(_times(_t(Psi * w[:, :, None]), K), self.C_pinv)
        R = Psi
        R -= _times(K, _t(self.B))
        wR = R * w[:, :, None]
        self.Cr_pinv, self.quadratic_rank = _scaled_inverse(
            _times(_t(wR), R), scale, tol[:, 1]
        )
        self.K, self.wK, self.R, self.wR = K, wK, R, wR
        offset = self.offset = queries - m
        products = offset[:, first] * offset[:, second]
        self.r_q = products - psibar - np.einsum("rpf,rf->rp", self.B, offset)
        self.a1 = np.einsum("rfg,rg->rf", self.C_pinv, offset)
        self.a2 = np.einsum("rpq,rq->rp", self.Cr_pinv, self.r_q)
        d1 = np.maximum(np.einsum("rf,rf->r", offset, self.a1), 0.0)
        d2 = d1 + np.maximum(np.einsum("rp,rp->r", self.r_q, self.a2), 0.0)
        self.kish = kish
        self.s1 = slope_shrinkage(d1, kish)
        self.s2 = slope_shrinkage(d2, kish)

    def coefficients(self, values):
        """``(ybar, E, beta, gamma)`` of the centred ``values`` (n_keys, k):
        the local means, the values about them, and the coefficients of the
        linear and the residual quadratic features."""
        V = np.asarray(values[self.used], dtype=np.float64)
        ybar = self.p @ V
        E = V[None] - ybar[:, None, :]
        beta = _times(self.C_pinv, _times(_t(self.wK), E))
        gamma = _times(self.Cr_pinv, _times(_t(self.wR), E))
        return ybar, E, beta, gamma

    def fit(self, values, return_std):
        """``(mean, std)`` of the centred ``values`` (std None unless asked)."""
        ybar, E, beta, gamma = self.coefficients(values)
        s1, s2 = self.s1[:, None], self.s2[:, None]
        mean = ybar + s1 * np.einsum("rf,rfk->rk", self.offset, beta)
        mean += s2 * np.einsum("rp,rpk->rk", self.r_q, gamma)
        if not return_std:
            return mean, None
        E -= s1[:, :, None] * _times(self.K, beta)
        E -= s2[:, :, None] * _times(self.R, gamma)
        return mean, np.sqrt(np.einsum("rn,rnk,rnk->rk", self.p, E, E))

    def weights(self):
        """The equivalent-kernel weights over the keys used, (n_rows, n_used)."""
        factor = 1.0 + self.s1[:, None] * np.einsum("rnf,rf->rn", self.K, self.a1)
        factor += self.s2[:, None] * np.einsum("rnp,rp->rn", self.R, self.a2)
        return self.p * factor

    def gradient_weights(self, layout):
        """``G`` (n_rows, d, n_used), the linear coefficients at the queries
        being ``G @ y`` (per bandwidth)."""
        J = _jacobian(self.offset, layout) - self.B
        linear = self.s1[:, None, None] * _t(_times(self.wK, self.C_pinv))
        quadratic = _t(_times(self.wR, _times(self.Cr_pinv, J)))
        return linear + self.s2[:, None, None] * quadratic


def tolerances(layout, n_rows):
    """The rank tolerances ``(linear, quadratic)`` of each of ``n_rows``
    rows (one per row where the layout counts the keys of each)."""
    linear = np.broadcast_to(layout.rank_tolerance, (n_rows,))
    quadratic = np.broadcast_to(layout.quadratic_tolerance, (n_rows,))
    return np.column_stack([linear, quadratic])


def _rows(p, keys, queries, layout, centers, kernel):
    """The :class:`_Rows` of the rows of ``p``, in batches within about
    :data:`BATCH_BYTES` of work."""
    kish = kish_ratio(np.einsum("rn,rn->r", p, p), 1.0, kernel)
    n_used = max(1, int(np.count_nonzero(np.any(p != 0, axis=0))))
    row = fit_bytes(n_used, layout.n_features, layout.n_outputs)
    # (half of working_memory: the rows of weights are held beside it)
    step = max(1, int(min(BATCH_BYTES, working_memory_bytes() / 2) // row))
    tol = tolerances(layout, len(p))
    for start in range(0, len(p), step):
        rows = slice(start, start + step)
        frames = keys if keys.ndim == 2 else keys[rows]
        center = None if centers is None else centers[rows]
        batch = (p[rows], frames, queries[rows], layout, center, kish[rows])
        yield rows, _Rows(*batch, tol[rows])


def quadratic_fit(
    p,
    keys,
    values,
    queries,
    layout,
    return_std,
    centers=None,
    return_shrinkage=False,
    *,
    kernel,
):
    """Safeguarded local quadratic fits of rows of normalised weights.

    The counterpart of :func:`._centred_fit.centred_fit` for ``degree=2``
    (see the module docstring): each row is computed alone, from its keys of
    positive weight centred on their local mean.

    Parameters
    ----------
    p : ndarray of shape (n_rows, n_keys)
        Normalised weights (float64), rows summing to one.
    keys : ndarray of shape (n_keys, n_features)
        The keys, in the frame of ``queries``.
    values : ndarray of shape (n_keys, n_outputs)
        The (centred) values.
    queries : ndarray of shape (n_rows, n_features)
        The queries.
    layout : QuadraticLayout
        The layout and rank tolerances.
    return_std : bool
        Whether to compute the spread of the residuals of the fit.
    centers : ndarray of shape (n_rows, n_features) or None
        The mean of the keys of each row's fit (None: the origin), for the
        rank threshold of the linear block.
    return_shrinkage : bool, default=False
        Whether to return the factors ``s1`` of the slopes as well.
    kernel : Kernel
        The kernel of the weights, for the safeguard.

    Returns
    -------
    mean, std, rank
        The fits (n_rows, n_outputs), the weighted spreads of their
        residuals (or None), and the ranks of the linear blocks, followed by
        ``s1`` with ``return_shrinkage``.
    """
    n_rows, k = len(p), layout.n_outputs
    mean = np.empty((n_rows, k))
    std = np.empty((n_rows, k)) if return_std else None
    rank, s1 = np.empty(n_rows, dtype=np.intp), np.empty(n_rows)
    for rows, batch in _rows(p, keys, queries, layout, centers, kernel):
        mean[rows], spread = batch.fit(values, return_std)
        if return_std:
            std[rows] = spread
        rank[rows], s1[rows] = batch.rank, batch.s1
    if return_shrinkage:
        return mean, std, rank, s1
    return mean, std, rank


def quadratic_kernel(p, keys, queries, layout, centers=None, *, kernel):
    """The equivalent-kernel weights of rows of normalised weights.

    Returns ``(weights, rank, s1)``: the rows ``l`` (n_rows, n_keys, zero
    where ``p`` is) with ``l @ values`` the fit of :func:`quadratic_fit`,
    the ranks of the linear blocks and the slopes' factors.
    """
    weights = np.zeros(p.shape)
    rank, s1 = np.empty(len(p), dtype=np.intp), np.empty(len(p))
    for rows, batch in _rows(p, keys, queries, layout, centers, kernel):
        block = weights[rows]
        block[:, batch.used] = batch.weights()
        weights[rows] = block
        rank[rows], s1[rows] = batch.rank, batch.s1
    return weights, rank, s1


def quadratic_gradient(p, frames, layout, centers, *, kernel):
    """The weights of the linear coefficients of rows of normalised weights.

    ``frames`` (n_rows, n_features, n_keys) holds the keys of each row in
    the frame of its query (the query at the origin), in bandwidths;
    ``centers`` (n_rows, n_features) the mean of the keys in that frame,
    for the rank threshold. Returns ``G`` of the shape of ``frames``: the
    linear coefficients of the fitted quadratic at each query, per
    bandwidth, are ``G[r] @ values``.
    """
    G = np.zeros(frames.shape)
    queries = np.zeros((len(p), layout.n_features))
    for rows, batch in _rows(p, frames, queries, layout, centers, kernel):
        block = G[rows]
        block[:, :, batch.used] = batch.gradient_weights(layout)
        G[rows] = block
    return G
