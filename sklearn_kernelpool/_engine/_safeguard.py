"""The safeguard of the local-linear fit: the slope shrunk where the query's
leverage in its local fit is high.

The prediction of a local-linear fit at a query ``q`` extrapolates the local
line from the weighted centre ``m`` of its keys. Its variance, in units of
one observation's noise, grows with the query's Mahalanobis distance ``D``
from ``m`` and falls with the number of keys behind the line: for weights
``a_i`` (sample weight times kernel), normalised to ``p_i = a_i / sum a``,
the variance of the local line's prediction is about the leverage::

    L = (1 + D**2) / n_eff,    D**2 = (q - m)^T C^+ (q - m),
    n_eff = (sum_i a_i)**2 / sum_i a_i**2 = 1 / sum_i p_i**2

with ``C`` the local covariance of the keys and ``n_eff`` Kish's effective
number of keys. ``L`` is exact for weights that are 0 or 1 (a boxcar, an
infinite width): at a training row of an infinite width it is the row's
leverage ``h`` of least squares, which never exceeds 1, and for a row left
out it is ``h / (1 - h)``. Two keys 0.001 apart and a query 1.0 away give a
slope from two keys, ``D`` of about 2000 and ``L`` of about 2e6; a state at
five standard deviations in a table of 51 gives ``L`` of about 0.4, a line
supported by 51 keys. The slope is shrunk to ``s beta``, the local line
still passing through ``(m, ybar)``, as a function of ``u = sqrt(L)``::

    s = 1                       if u <= 1,
    s = exp(-(u - 1)**2 / 2)    otherwise,

so that a query whose local line predicts with at most the variance of one
observation keeps the plain local-linear fit exactly, and the correction of
the local mean vanishes continuously as the leverage grows, where the fit
is the local mean. ``s`` is continuous, and differentiable, in the query and
the widths (no cliff between "slope" and "fallback"). This is a blend
towards the local-constant fit in the spirit of the ridged local-linear
estimators of Seifert & Gasser (1996, JASA 91) and Cheng, Hall &
Titterington (1997), driven by the variance of the extrapolated line (Kish,
"Survey Sampling", 1965, for ``n_eff``). As the factor multiplies ``C^+`` it
applies to everything built on it: the shrunk inverse ``s C^+`` is returned
by :func:`._local_linear._pseudo_inverse` and
:func:`._local_linear._local_geometry`, whose callers need not know of it.

The constant kernel weighs every key alike: its degree-1 fit is the global
weighted least-squares line, which the safeguard leaves as it is (its
callers pass ``kish = 0``, :func:`kish_ratio`).
"""

import numpy as np

#: The leverage ``(1 + D**2) / n_eff`` up to which the slope is kept: the
#: variance of one observation (see the module docstring).
MAX_LEVERAGE = 1.0


def kish_ratio(square_sums, totals, kernel):
    """``1 / n_eff = sum_i a_i**2 / (sum_i a_i)**2`` of rows of weights.

    Parameters
    ----------
    square_sums : ndarray of shape (n,)
        ``sum_i a_i**2`` of each row.
    totals : ndarray of shape (n,) or float
        ``sum_i a_i`` of each row, in the same units (1 for normalised
        weights).
    kernel : Kernel
        The kernel of the weights: 0 for the constant kernel, whose
        degree-1 fit the safeguard leaves as it is.

    Returns
    -------
    kish : ndarray of shape (n,)
        NaN where a row has no weight.
    """
    square_sums = np.asarray(square_sums, dtype=np.float64)
    if kernel.is_constant:
        return np.zeros_like(square_sums)
    totals = np.asarray(totals, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return square_sums / (totals * totals)


def _root_leverage(distance_sq, kish):
    """``u = sqrt((1 + D**2) kish / MAX_LEVERAGE)``."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.sqrt((1.0 + distance_sq) * kish / MAX_LEVERAGE)


def slope_shrinkage(distance_sq, kish):
    """The factor ``s`` of the local slope (see the module docstring).

    Parameters
    ----------
    distance_sq : ndarray of shape (n,)
        The squared Mahalanobis distances ``D**2`` of the queries from their
        local centres, under the pseudo-inverse of the local covariance.
    kish : ndarray of shape (n,)
        ``1 / n_eff`` of each query's weights (:func:`kish_ratio`).

    Returns
    -------
    shrinkage : ndarray of shape (n,)
        ``s`` in ``[0, 1]``: 1 up to the leverage :data:`MAX_LEVERAGE` (and
        where the leverage is NaN, on rows without weight), 0 at an infinite
        one.
    """
    u = _root_leverage(distance_sq, kish)
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.exp(-0.5 * (u - 1.0) ** 2)
    return np.where(u > 1.0, s, 1.0)


def slope_shrinkage_derivative(distance_sq, kish):
    """``(ds / d(D**2), ds / d kish)`` of :func:`slope_shrinkage` (0 up to
    the leverage :data:`MAX_LEVERAGE`)."""
    distance_sq, kish = np.asarray(distance_sq), np.asarray(kish)
    u = _root_leverage(distance_sq, kish)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        # ds/du = -s (u - 1); du/dX = u / (2 X) for X = D**2 + 1 and kish.
        ds_du = -np.exp(-0.5 * (u - 1.0) ** 2) * (u - 1.0) * u / 2.0
        by_distance = ds_du / (1.0 + distance_sq)
        by_kish = ds_du / kish
    outside = u > 1.0
    return (
        np.where(outside & np.isfinite(by_distance), by_distance, 0.0),
        np.where(outside & np.isfinite(by_kish), by_kish, 0.0),
    )


def shrink(vectors, inverse, offset, kish):
    """Apply the safeguard to a pseudo-inverse, in place.

    ``offset`` (n, d) holds ``m - q`` in the frame of ``vectors``, ``kish``
    the :func:`kish_ratio` of each row; the inverted eigenvalues ``inverse``
    are multiplied by each row's factor ``s`` (:func:`slope_shrinkage`),
    which is returned.
    """
    projected = np.einsum("nfe,nf->ne", vectors, offset)
    with np.errstate(invalid="ignore", over="ignore"):
        distance_sq = np.einsum("ne,ne,ne->n", inverse, projected, projected)
    s = slope_shrinkage(distance_sq, kish)
    inverse *= s[:, None]
    return s
