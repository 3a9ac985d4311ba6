"""What every held-out engine of the CV estimators shares.

The CV estimators score candidates (kernel, bandwidth, degree) from
held-out predictions, whatever computes the held-out sums: the exact pass
of :class:`._pool.HeldOut` (and :class:`._categorical.CategoricalHeldOut`)
or the binned grids of :class:`._binned.BinnedHeldOut`. Both are a
:class:`HeldOutPoints`: the points and their values, the weights scaled to
a largest weight of 1, the candidates, and the interface the scoring of
:mod:`.._search._passes` reads:

- ``sums_excluding_groups(groups)`` and ``sums_split(rows, train)``: the
  held-out sums of every candidate, leave-one-out or K-fold (a
  :class:`HeldOutSums` on the exact engines);
- ``predictions(sums, rows, groups, train, degree)``: the predictions and
  the flags (empty, singular, rank-deficient, shrunk) from the sums,
  normalised by :func:`._fits.solve_moments` and solved by
  :func:`.._engine._local_linear.solve` on both engines;
- :meth:`HeldOutPoints.nearest_values` and
  :meth:`HeldOutPoints.mean_values`: the ``on_empty`` fallbacks of held-out
  points with no key in their support, written here once.
"""

from dataclasses import dataclass

import numpy as np

from .._engine._exact import nearest_ties, squared_slack
from .._engine._protocol import normalise
from .._engine._safeguard import kish_ratio
from ._distances import _augment, squared_distances


@dataclass
class HeldOutSums:
    """The pooled sums of the held-out fits of every candidate.

    Each held-out row ``i`` of a candidate pools the keys ``j`` its fit may
    hold with the weights ``a_ij`` (sample weight times kernel), up to a
    positive factor per row (the shift of a row recomputed after underflow,
    which cancels in every fit).

    Attributes
    ----------
    moments : ndarray of shape (n_kernels, n_widths, n_rows, n_columns)
        ``sum_j a_ij M_j`` of the moments ``M`` of the keys
        (:func:`._sums.pooled_moments`), the weight ``sum_j a_ij`` last.
    squares : ndarray of shape (n_kernels, n_widths, n_rows) or None
        ``sum_j a_ij**2``, with the same exclusions and factor as
        ``moments``: with the weights, Kish's effective number of keys of
        each held-out fit, which the safeguard of ``degree=1`` reads
        (:mod:`.._engine._safeguard`). None where the moments are those of
        ``degree=0``.
    """

    moments: np.ndarray
    squares: np.ndarray | None = None

    def kish(self, candidate, kernel):
        """``1 / n_eff`` of each row of ``candidate``, a (kernel, width)
        index pair whose kernel is ``kernel``
        (:func:`.._engine._safeguard.kish_ratio`)."""
        if self.squares is None:
            raise TypeError(
                "The local-linear held-out fits need the sums of the squared "
                "weights (HeldOutSums.squares), for the safeguard."
            )
        k, m = candidate
        return kish_ratio(self.squares[k, m], self.moments[k, m, :, -1], kernel)

    def set_rows(self, at, scores, moments):
        """Set the sums at ``at`` (a kernel, a width and rows) from the rows
        of ``scores`` over keys of ``moments``: ``scores @ moments`` and,
        with ``squares``, the sums of the squared scores."""
        self.moments[at] = scores @ moments
        if self.squares is not None:
            self.squares[at] = np.einsum("ij,ij->i", scores, scores)


class HeldOutPoints:
    """The held-out points, their values and the candidates.

    ``rows_apart`` (a class attribute) says whether the held-out rows of a
    split may be computed in blocks (:mod:`.._utils._row_blocks`): each
    row's fit from the training keys alone.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        The points, float64.
    Y : ndarray of shape (n, n_outputs)
        Their values, float64.
    weights : ndarray of shape (n,)
        Non-negative sample weights.
    kernels : list of Kernel
        The kernels of the candidates.
    bandwidths : ndarray of shape (n_bandwidths,)
        The isotropic bandwidths of the candidates.
    degree : {0, 1}
        The largest degree of the held-out fits.

    Attributes
    ----------
    X : ndarray of shape (n, n_features)
        The points centred on the mean of those of positive weight.
    X_raw : ndarray of shape (n, n_features)
        The points as given, on which ties are settled (:mod:`.._engine._exact`).
    weights : ndarray of shape (n,)
        The weights divided by the largest.
    weighted_values : ndarray of shape (n, n_outputs + 1)
        ``w * [y, 1]``, for the fallbacks.
    """

    rows_apart = True

    def __init__(self, X, Y, weights, kernels, bandwidths, degree=0):
        weights = np.asarray(weights, dtype=np.float64)
        # Predictions do not depend on the scale of the weights; a largest
        # weight of 1 keeps the underflow test on the kernel alone.
        self.weights = weights / weights.max()
        positive = self.weights > 0
        self.X = X - X[positive].mean(axis=0)
        # The unscaled points, on which the support edge and the nearest
        # keys are decided, as the fitted estimator does (:mod:`.._engine._exact`).
        self.X_raw = X
        self.coordinates = float(np.abs(X).max(initial=0.0))
        self.Y = Y
        self.kernels = kernels
        self.bandwidths = np.asarray(bandwidths, dtype=np.float64)
        self.degree = degree
        # ``w * [y, 1]`` for the fallbacks, whatever the pooled moments are.
        self.weighted_values = (
            np.hstack([Y, np.ones((len(Y), 1))]) * self.weights[:, None]
        )

    @property
    def _shape(self):
        return (len(self.kernels), len(self.bandwidths))

    # -- fallbacks -----------------------------------------------------------
    def nearest_values(self, queries, allowed):
        """Values of each query's nearest allowed key of positive weight.

        Keys tied at the smallest distance are averaged with their weights;
        the ties are settled on exact differences, as the engine does.

        Parameters
        ----------
        queries : ndarray of int
            Indices of the points that fell back.
        allowed : ndarray of bool of shape (n_queries, n)
            The keys each query may pool.
        """
        allowed = allowed & (self.weights > 0)[None, :]
        left, _ = _augment(self.X[queries])
        _, right = _augment(self.X)
        d2 = squared_distances(left, right, np.empty((len(queries), len(self.X))))
        d2[~allowed] = np.inf
        nearest = d2.min(axis=1, keepdims=True)
        slack = squared_slack(
            np.float64,
            left[:, -1][:, None] + right[-2][None, :],
            self.coordinates,
            np.sqrt(nearest),
            self.X.shape[1],
        )
        rows, cols = np.nonzero(d2 <= nearest + slack)
        rows, cols = nearest_ties(
            rows, cols, self.X_raw[queries], self.X_raw, None, len(queries)
        )
        sums = np.zeros((len(queries), self.weighted_values.shape[1]))
        np.add.at(sums, rows, self.weighted_values[cols])
        return normalise(sums)[0]

    def mean_values(self, allowed):
        """Weighted mean of the values of the allowed keys of each row.

        Parameters
        ----------
        allowed : ndarray of bool of shape (n_rows, n)
            The keys each row may pool.
        """
        sums = allowed.astype(np.float64) @ self.weighted_values
        return normalise(sums)[0]
