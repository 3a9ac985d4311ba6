"""The estimates of the binned engine from its interpolated kernel sums.

:func:`estimates` turns the kernel sums of queries (moments about each
query, :func:`._engine.sum_pairs`) into local-constant or local-linear
estimates with the normalisation, spread and local-linear solve shared by
every engine, and marks the queries whose binned local-linear design is
left to the exact engine (:func:`doubtful_designs`). The safeguard of the
local-linear slope reads Kish's ratio of each query from its binned sums of
squared weights (:func:`binned_kish`).
"""

import numpy as np

from .._engine._local_linear import solve
from .._engine._protocol import moment_spread, normalise
from .._engine._safeguard import kish_ratio


def binned_kish(squares, totals, kernel, floor):
    """Kish's ratio ``1 / n_eff`` of each query from its binned sums.

    Parameters
    ----------
    squares : ndarray of shape (n,)
        The binned sums of the squared weights ``sum_i w_i**2 alpha(u_i)**2``
        of each query.
    totals : ndarray of shape (n,)
        The binned sums of the weights, ``sum_i w_i alpha(u_i)``.
    kernel : Kernel
        The kernel (:func:`.._engine._safeguard.kish_ratio`: 0 for the
        constant kernel).
    floor : float
        The sums of squares at most which the FFT's rounding leaves the
        ratio imprecise (``MIN_SQUARES`` of the total of the squared
        weights).

    Returns
    -------
    kish : ndarray of shape (n,)
    thin : ndarray of bool of shape (n,)
        The queries whose sum of squares is at most ``floor``, left to the
        exact engine.
    """
    return kish_ratio(squares, totals, kernel), ~(squares > floor)


def estimates(
    sums,
    bad,
    layout,
    degree,
    min_variance,
    return_std=False,
    max_extrapolation=np.inf,
    return_shrinkage=False,
    *,
    kish,
):
    """The local-constant or local-linear estimates from kernel sums.

    ``sums`` (n, c) in the layout of :func:`._engine.sum_pairs`, moments about each
    query; ``bad`` (n,) the queries left undecided. The normalisation and
    spread are :func:`.._engine._protocol.normalise` and
    :func:`.._engine._protocol.moment_spread`,
    the local-linear fit :func:`.._engine._local_linear.solve`, as on every engine.
    Returns ``(mean, std, bad)``, centred values (the caller adds the centre
    back), ``std`` None unless asked, and ``bad`` with (degree 1) the
    queries whose local covariance of the scaled keys has an eigenvalue at
    most ``min_variance`` or whose query lies at a squared Mahalanobis
    distance ``m' C^-1 m`` above ``max_extrapolation`` from the local mean
    ``m`` of the scaled keys (covariance ``C``). The values of the ``bad``
    rows are arbitrary. With ``return_shrinkage`` also the safeguard's
    factors ``s`` of the local-linear slopes (:func:`.._engine._local_linear.solve`;
    ones for degree 0 and on the ``bad`` rows), from ``kish`` (n,), Kish's
    ratio of each query (:func:`binned_kish`; None for degree 0).
    """
    p = layout.n_outputs
    n, d = len(sums), layout.n_features
    shrinkage = np.ones(n)
    if degree == 0:
        with np.errstate(invalid="ignore", over="ignore"):
            means, _ = normalise(sums)
        std = moment_spread(means, p)[1] if return_std else None
        out = means[:, :p], std, bad
    else:
        bad = bad | doubtful_designs(sums, bad, layout, min_variance, max_extrapolation)
        mean = np.full((n, p), np.nan)
        std = np.full((n, p), np.nan) if return_std else None
        good = np.flatnonzero(~bad) if bad.any() else slice(None)  # no copy
        picked = sums[good]
        if kish is None:
            raise TypeError("The local-linear estimates need kish, for the safeguard.")
        m, s, _, shrinkage[good] = solve(
            picked,
            np.zeros((len(picked), d)),
            layout,
            return_std,
            return_shrinkage=True,
            kish=kish[good],
        )
        mean[good] = m
        if return_std:
            std[good] = s
        out = mean, std, bad
    return (*out, shrinkage) if return_shrinkage else out


def doubtful_designs(sums, bad, layout, min_variance, max_extrapolation=np.inf):
    """The rows of local-linear kernel sums left to the exact engine.

    Those whose local covariance ``C`` of the scaled keys has an eigenvalue
    at most ``min_variance`` (linear binning spreads each key over a
    variance of up to ``(step / h)**2 / 4``), or whose query lies at
    ``m' C^-1 m`` above ``max_extrapolation`` from the local mean ``m``.
    """
    d = layout.n_features
    total = np.where(bad, 1.0, sums[:, -1])
    means = sums[:, :-1] / total[:, None]
    m = means[:, layout.keys]
    cov = np.empty((len(sums), d, d))
    i, j = layout.upper
    cov[:, i, j] = cov[:, j, i] = means[:, layout.squares]
    cov -= m[:, :, None] * m[:, None, :]
    if d == 1:
        variance = cov[:, 0, 0]
        out = ~(variance > min_variance)
        if np.isfinite(max_extrapolation):
            out |= m[:, 0] ** 2 > max_extrapolation * np.where(out, 1.0, variance)
        return out
    out = ~(np.linalg.eigvalsh(cov)[:, 0] > min_variance)
    if np.isfinite(max_extrapolation):
        cov[out | bad] = np.eye(d)
        distance = np.einsum("nf,nf->n", m, np.linalg.solve(cov, m[..., None])[..., 0])
        out |= distance > max_extrapolation
    return out
