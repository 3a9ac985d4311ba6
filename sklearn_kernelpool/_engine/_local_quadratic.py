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
computation: that of :func:`._centred_fit.centred_fit` for ``C``, and
``10 P2 sqrt(n) eps sum_i p_i |psi_i|**2`` (``n`` keys, in bandwidths to the
fourth) for ``Cr``, so that a feature of two levels (whose square is a
linear function of it) gets no quadratic term along itself.

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


def fit_bytes(n_keys, n_features, n_outputs=1):
    """Bytes of the work of one row of :func:`quadratic_fit`.

    The row's keys and their weighted copy, the products, the residual
    features and their weighted copy (``n (2 d + 3 P2)``), the values and
    residuals, and the two covariances with their eigendecompositions.
    """
    d = n_features
    P2 = d * (d + 1) // 2
    per_key = 2 * d + 3 * P2 + 3 * n_outputs + 2
    return 8 * (n_keys * per_key + 6 * (d * d + P2 * P2) + 8 * (d + P2))


def _inverse(matrix, threshold):
    """The pseudo-inverse of a symmetric matrix over its eigenvalues above
    ``threshold`` (none when it is not finite), and their number."""
    values, vectors = np.linalg.eigh(matrix)
    kept = values > threshold if np.isfinite(threshold) else np.zeros(len(values), bool)
    inverse = (vectors[:, kept] / values[kept]) @ vectors[:, kept].T
    return inverse, int(np.count_nonzero(kept))


def _jacobian(x, layout):
    """The derivative of the products ``upper(x x^T)`` at ``x``, (P2, d)."""
    first, second = layout.pairs
    J = np.zeros((layout.n_products, layout.n_features))
    rows = np.arange(layout.n_products)
    np.add.at(J, (rows, first), x[second])
    np.add.at(J, (rows, second), x[first])
    return J


class _Row:
    """The nested design of one row of weights, and its query's factors."""

    def __init__(self, p, keys, query, layout, center, kish, tolerances):
        self.nz = np.flatnonzero(p)
        w = self.w = p[self.nz]
        K = np.array(keys[self.nz], dtype=np.float64)
        m = w @ K
        K -= m
        wK = K * w[:, None]
        C = wK.T @ K
        scale = _centred_scale(m[None], C[None], center)[0]
        self.C_pinv, self.rank = _inverse(C, tolerances[0] * scale)
        first, second = layout.pairs
        Psi = K[:, first] * K[:, second]
        scale = w @ np.einsum("nf,nf->n", Psi, Psi)
        psibar = w @ Psi
        Psi -= psibar
        self.B = ((Psi * w[:, None]).T @ K) @ self.C_pinv
        R = Psi
        R -= K @ self.B.T
        wR = R * w[:, None]
        tolerance = tolerances[1] * scale
        self.Cr_pinv, self.quadratic_rank = _inverse(wR.T @ R, tolerance)
        self.K, self.wK, self.R, self.wR = K, wK, R, wR
        offset = self.offset = query - m
        self.r_q = offset[first] * offset[second] - psibar - self.B @ offset
        self.a1 = self.C_pinv @ offset
        self.a2 = self.Cr_pinv @ self.r_q
        d1 = max(float(offset @ self.a1), 0.0)
        d2 = d1 + max(float(self.r_q @ self.a2), 0.0)
        self.s1, self.s2 = slope_shrinkage(np.array([d1, d2]), np.array([kish, kish]))

    def fit(self, values, return_std):
        """``(mean, std)`` of the centred ``values`` (std None unless asked)."""
        w = self.w
        V = values[self.nz]
        ybar = w @ V
        E = V - ybar
        beta = self.C_pinv @ (self.wK.T @ E)
        gamma = self.Cr_pinv @ (self.wR.T @ E)
        mean = ybar + self.s1 * (self.offset @ beta) + self.s2 * (self.r_q @ gamma)
        if not return_std:
            return mean, None
        E -= self.s1 * (self.K @ beta)
        E -= self.s2 * (self.R @ gamma)
        return mean, np.sqrt(w @ (E * E))

    def weights(self):
        """The equivalent-kernel weights over the keys of positive weight."""
        factor = 1.0 + self.s1 * (self.K @ self.a1) + self.s2 * (self.R @ self.a2)
        return self.w * factor

    def gradient_weights(self, layout):
        """``G`` (n, d) with the linear coefficients at the query
        ``G^T y`` (per bandwidth), over the keys of positive weight."""
        J = _jacobian(self.offset, layout) - self.B
        linear = self.s1 * (self.wK @ self.C_pinv)
        return linear + self.s2 * (self.wR @ (self.Cr_pinv @ J))


def tolerances(layout, n_rows):
    """The rank tolerances ``(linear, quadratic)`` of each of ``n_rows``
    rows (one per row where the layout counts the keys of each)."""
    linear = np.broadcast_to(layout.rank_tolerance, (n_rows,))
    quadratic = np.broadcast_to(layout.quadratic_tolerance, (n_rows,))
    return np.column_stack([linear, quadratic])


def _rows(p, keys, queries, layout, centers, kernel):
    """The :class:`_Row` of each row of ``p``."""
    kish = kish_ratio(np.einsum("rn,rn->r", p, p), 1.0, kernel)
    tol = tolerances(layout, len(p))
    for r in range(len(p)):
        center = None if centers is None else centers[r][None]
        yield _Row(p[r], keys, queries[r], layout, center, kish[r], tol[r])


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
    for r, row in enumerate(_rows(p, keys, queries, layout, centers, kernel)):
        mean[r], spread = row.fit(values, return_std)
        if return_std:
            std[r] = spread
        rank[r], s1[r] = row.rank, row.s1
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
    for r, row in enumerate(_rows(p, keys, queries, layout, centers, kernel)):
        weights[r, row.nz] = row.weights()
        rank[r], s1[r] = row.rank, row.s1
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
    origin = np.zeros(layout.n_features)
    kish = kish_ratio(np.einsum("rn,rn->r", p, p), 1.0, kernel)
    tol = tolerances(layout, len(p))
    for r in range(len(p)):
        center = centers[r][None]
        row = _Row(p[r], frames[r].T, origin, layout, center, kish[r], tol[r])
        G[r][:, row.nz] = row.gradient_weights(layout).T
    return G
