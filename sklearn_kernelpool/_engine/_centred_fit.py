"""The local-linear fit of rows of weights from their weighted keys, in two
passes: each row's keys and values centred on their local means before any
product, for many features (whose moment matrix would not fit) and for the
rows whose moments about the global centres cancel
(:func:`._local_linear.cancelled`).
"""

import numpy as np

from ._local_linear import _apply_inverse, _fit, _pseudo_inverse
from ._safeguard import kish_ratio


def fit_bytes(n_keys, n_features, n_outputs=1):
    """Bytes of the work of one row of :func:`centred_fit`.

    The row's keys, their centred and weighted copies (``3 n d``), its
    covariance, the copy LAPACK's ``syevd`` factorises, its eigenvectors and
    workspace (about ``6 d**2``), and the vectors of the row.
    """
    d = n_features
    return 8 * (3 * n_keys * d + 6 * d * d + 2 * n_keys * (n_outputs + 1) + 8 * d)


def _centred_row(p, keys, values):
    """The local moments of one row of normalised weights, about its means.

    Returns ``(m, cov, ybar, cross, variance)``: the local means of the keys
    and values, the key covariance, the key-value cross-covariance and the
    value variance, from the keys and values centred on the local means
    before any product. Only the keys of positive weight enter, and nothing
    of size ``n_keys x n_features**2`` is formed.
    """
    nz = np.flatnonzero(p)
    w = p[nz]
    K = np.asarray(keys[nz], dtype=np.float64)
    m = w @ K
    K -= m
    ybar = w @ values[nz]
    E = values[nz] - ybar
    wK = K * w[:, None]
    return m, wK.T @ K, ybar, wK.T @ E, w @ (E * E)


def centred_geometry(p, keys, layout, centers=None):
    """Local key means, covariances and rank scales of rows of ``p``.

    Returns ``(m, cov, scale)``: the local means of the keys, their
    covariances (shape (n_rows, d, d)) from the keys centred on each row's
    mean, and the rank scale of :func:`centred_fit`.
    """
    d = layout.n_features
    m = np.empty((len(p), d))
    cov = np.empty((len(p), d, d))
    for r in range(len(p)):
        nz = np.flatnonzero(p[r])
        w = p[r, nz]
        K = np.asarray(keys[nz], dtype=np.float64)
        m[r] = w @ K
        K -= m[r]
        cov[r] = (K * w[:, None]).T @ K
    return m, cov, _centred_scale(m, cov, centers)


def _centred_scale(m, cov, centers):
    """The rank scale of a two-pass row (see :func:`centred_fit`)."""
    trace = np.trace(cov, axis1=1, axis2=2)
    offset = m if centers is None else m - centers
    return np.sqrt((trace + np.einsum("rf,rf->r", offset, offset)) * trace)


def centred_kernel(
    p, keys, queries, layout, centers=None, return_shrinkage=False, *, kernel
):
    """:func:`equivalent_kernel` of rows of normalised weights, two-pass.

    Returns ``(offset, g, rank)`` as :func:`equivalent_kernel`, in the
    frame of ``keys`` and ``queries``, from :func:`centred_geometry`, and
    the factors ``s`` with ``return_shrinkage``; ``kernel``, that of the
    weights, for the safeguard (:func:`._safeguard.kish_ratio`).
    """
    m, cov, scale = centred_geometry(p, keys, layout, centers)
    kish = kish_ratio(np.einsum("rn,rn->r", p, p), 1.0, kernel)
    vectors, inverse, rank, s = _pseudo_inverse(cov, scale, layout, m - queries, kish)
    g = _apply_inverse(vectors, inverse, (m - queries)[:, :, None])[:, :, 0]
    offset = 1.0 + np.einsum("rf,rf->r", g, m)
    if return_shrinkage:
        return offset, g, rank, s
    return offset, g, rank


def centred_fit(
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
    """Fits of rows of normalised weights about their own local means.

    The two-pass counterpart of :func:`solve`: the keys and values are
    centred on each row's weighted means before any product, so that no
    moment cancels, whatever the distance of the row's keys and values from
    the global centres. Each row is computed alone, from its keys of positive
    weight, so that its result does not depend on the other rows and its
    work (:func:`fit_bytes`) holds no array of ``n_keys x n_features**2``.

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
    layout : MomentLayout or None
        The layout of local-linear moments, or None for the local mean
        (degree 0).
    return_std : bool
        Whether to compute the spread.
    centers : ndarray of shape (n_rows, n_features) or None
        The mean of the keys of each row's fit (None: the origin).
    return_shrinkage : bool, default=False
        Whether to return the safeguard's factors ``s`` as well (ones for
        degree 0).
    kernel : Kernel
        The kernel of the weights, for the safeguard
        (:func:`._safeguard.kish_ratio` of the rows of ``p``).

    The rank threshold is that of :func:`solve` with the rounding of
    this computation: the centred keys ``k - m`` round by an ulp of
    ``|k - c|`` (``c`` the mean of the keys), so the covariance by about
    ``eps sqrt(E|k - c|^2 trace(C))``, which takes the place of the trace
    ``E|k - c|^2 = trace(C) + |m - c|^2`` of the moments about ``c``. A
    slope that this pass keeps and the moments could not tell from rounding
    (weights of 1e-10 far from every key) is made harmless by the safeguard:
    such a query lies far from its local centre, and its slope is shrunk
    away continuously, before either threshold is reached.

    Returns
    -------
    mean, std, rank
        As :func:`solve` (std: the two-pass spread of the values around the
        local mean for degree 0; rank: None for degree 0), followed by the
        factors ``s`` with ``return_shrinkage``.
    """
    if layout is None:
        ybar = np.einsum("rn,nk->rk", p, values)
        E = values[None] - ybar[:, None]
        variance = np.einsum("rn,rnk,rnk->rk", p, E, E)
        if return_shrinkage:
            return ybar, np.sqrt(variance), None, np.ones(len(p))
        return ybar, np.sqrt(variance), None
    n_rows, d, k = len(p), layout.n_features, layout.n_outputs
    m, ybar = np.empty((n_rows, d)), np.empty((n_rows, k))
    cov, cross = np.empty((n_rows, d, d)), np.empty((n_rows, d, k))
    variance = np.empty((n_rows, k))
    for r in range(n_rows):
        m[r], cov[r], ybar[r], cross[r], variance[r] = _centred_row(p[r], keys, values)
    scale = _centred_scale(m, cov, centers)
    kish = kish_ratio(np.einsum("rn,rn->r", p, p), 1.0, kernel)
    vectors, inverse, rank, s = _pseudo_inverse(cov, scale, layout, m - queries, kish)
    variance = variance if return_std else None
    mean, std = _fit(m, vectors, inverse, ybar, cross, variance, queries, s)
    if return_shrinkage:
        return mean, std, rank, s
    return mean, std, rank
