"""The safeguard of the local-linear fit: the slope shrunk far from the
local centre of the keys.

Where the query lies far from the local centre ``m`` in
units of the local spread of the keys, the slope is extrapolated from few
keys or keys of tiny weight, and the plain fit can move arbitrarily far from
the values (a slope resting on two close keys). The fit is therefore a
blend of the local-linear and the local-constant fits: the slope is shrunk
to ``s beta``, the local line still passing through ``(m, ybar)``, with
``s`` a function of the query's Mahalanobis distance from the local centre,
``D**2 = (q - m)^T C^+ (q - m)``, against the radius
``tau = 2 sqrt(r + 1)`` (``r`` the rank of ``C``; ``D**2`` of a key about
its local mean averages ``r``)::

    s = 1                          if D <= tau,
    s = exp(-(D / tau - 1)**2 / 2)  otherwise.

``s`` is continuous, and differentiable, in the query and the widths (no
cliff between "slope" and "fallback"); a design whose queries lie within
``tau`` keeps the plain local-linear answer exactly. Since
``|beta . (q - m)| <= D sd_p(y)`` (Cauchy--Schwarz, ``sd_p`` the weighted
spread of the values), the correction of the local mean is at most
``1.34 tau`` local standard deviations of the values, and vanishes far from
the keys, where the fit is the local mean. This is a blend towards the
local-constant fit in the spirit of the ridged local-linear estimators of
Seifert & Gasser (1996, JASA 91) and Cheng, Hall & Titterington (1997),
driven by the distance of the query from the local weighted centre. As the
factor multiplies ``C^+`` it applies to everything built on it: the
shrunk inverse ``s C^+`` is returned by :func:`_pseudo_inverse` and
:func:`_local_geometry`, whose callers need not know of it.
"""

import numpy as np

#: The radius of the safeguard, per ``sqrt(rank + 1)``, in local standard
#: deviations of the keys (see the module docstring).
SLOPE_RADIUS = 2.0


def slope_shrinkage(distance_sq, rank):
    """The factor ``s`` of the local slope (see the module docstring).

    Parameters
    ----------
    distance_sq : ndarray of shape (n,)
        The squared Mahalanobis distances ``D**2`` of the queries from their
        local centres, under the pseudo-inverse of the local covariance.
    rank : ndarray of shape (n,)
        The ranks of the local covariances.

    Returns
    -------
    shrinkage : ndarray of shape (n,)
        ``s`` in ``[0, 1]``: 1 within the radius (and where ``D`` is NaN,
        on rows without weight), 0 at an infinite distance.
    """
    radius_sq = SLOPE_RADIUS**2 * (np.asarray(rank) + 1.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        u = np.sqrt(distance_sq / radius_sq)
        s = np.exp(-0.5 * (u - 1.0) ** 2)
    return np.where(u > 1.0, s, 1.0)


def slope_shrinkage_derivative(distance_sq, rank):
    """``ds / d(D**2)`` of :func:`slope_shrinkage` (0 within the radius)."""
    radius_sq = SLOPE_RADIUS**2 * (np.asarray(rank) + 1.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        u = np.sqrt(distance_sq / radius_sq)
        ds = -np.exp(-0.5 * (u - 1.0) ** 2) * (u - 1.0) / (2.0 * u * radius_sq)
    return np.where((u > 1.0) & np.isfinite(ds), ds, 0.0)


def shrink(vectors, inverse, rank, offset):
    """Apply the safeguard to a pseudo-inverse, in place.

    ``offset`` (n, d) holds ``m - q`` in the frame of ``vectors``; the
    inverted eigenvalues ``inverse`` are multiplied by each row's factor
    ``s`` (:func:`slope_shrinkage`), which is returned.
    """
    projected = np.einsum("nfe,nf->ne", vectors, offset)
    with np.errstate(invalid="ignore", over="ignore"):
        distance_sq = np.einsum("ne,ne,ne->n", inverse, projected, projected)
    s = slope_shrinkage(distance_sq, rank)
    inverse *= s[:, None]
    return s
