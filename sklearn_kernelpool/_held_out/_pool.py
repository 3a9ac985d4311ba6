"""Held-out predictions for many kernels and bandwidths from shared distances.

Leave-one-out and K-fold cross-validation of attention pooling need, for every
candidate (kernel, bandwidth) and every held-out point ``i``, the pooled sums

    S_i = sum_{j allowed for i} alpha(||x_i - x_j|| / h) * w_j * [y_j, 1]

over the keys ``j`` that the fit without ``i``'s fold would hold: every other
point under leave-one-out, the points of the other folds under K-fold. Both
exclusions are "j is not in i's group", with one group per point for
leave-one-out and one per fold for K-fold, and the kernel matrix is symmetric:
each block of pairs is computed once and pooled for both of its sides. A block
of squared distances is computed once and reused for every candidate; the
kernel is applied in a cache-sized buffer; pairs of the same group are zeroed
before pooling (never subtracted afterwards, which would cancel). Points are
taken in the leaf order of a k-d tree, so that blocks hold nearby points and
a block whose weights are all zero, or all below ``exp(-708)``, is skipped.

The pooled moments are ``w * [y, 1]`` for local-constant pooling (degree 0)
and ``w * [k, upper(k k^T), y, k (x) y, y**2, 1]`` for local-linear pooling
(degree 1, the columns of :func:`.._engine._local_linear.moment_matrix`), chosen by
:func:`pooled_moments` and turned into predictions by
:meth:`HeldOut.predictions`. Removing a point from its own pool is done on
the kernel weights, not on the moments, so the pass is the same for both:
only its width, ``n_outputs + 1`` or ``(d + 1)(d + 2) / 2 + (d + 2) p``
columns for ``d`` features and ``p`` outputs, changes. Local-linear
predictions solve each held-out fit around its query with
:func:`.._engine._local_linear.solve`, with the key count and key mean of that fit,
so that its rank-deficient designs get the same minimum-norm slope, and its
designs of rank 0 the same local mean, as the fitted estimator's do. Its
safeguard (:mod:`.._engine._safeguard`) reads the query's leverage in its
held-out fit, ``(1 + D**2) / n_eff``, with Kish's ``n_eff`` of the weights
of the keys that fit may hold: the pass pools, beside the moments, the sums
of the squared weights ``sum_j a_ij**2`` from the same blocks, after the
same exclusions (:class:`._base.HeldOutSums`). The pooled sums of every
point and candidate are refused up front when they exceed the physical
memory (:meth:`HeldOut.sums_bytes`).

Kernels with a log form are exponentiated without a per-row shift, which is
what lets a block serve both of its sides. A row whose pooled weight falls
below ``tiny ** 0.8`` may have lost precision to underflow; it is recomputed
alone as a softmax with its largest logit subtracted, exactly as the pooling
engine does, its sum of squared weights with the same shift (Kish's ratio
does not change). So is a row of ``degree=1`` whose sum of squared weights
falls below ``tiny ** 0.8`` (its weights about ``exp(-283)`` or less): its
pooled weight keeps its precision, the squares would not. Such rows, and
those that fall back to ``on_empty``, need every key: they are taken in
batches within scikit-learn's ``working_memory`` (:func:`row_batches`),
never all at once.

The fit of all the data at a training point is its leave-one-out fit with
its own key added back: :meth:`HeldOut.in_sample` completes each row's
leave-one-out sums with the self term ``w_i alpha(0)`` (in the row's scale,
shifted where the row was recomputed; its square in the sum of the squared
weights) and gives the in-sample fits and the
diagonal of the smoother matrix, hence GCV and AICc, with no other pass.

:class:`HeldOut` holds the points and their moments. It is one line of
classes, each a concept: the points, candidates and fallbacks
(:class:`._base.HeldOutPoints`, shared with the binned held-out sums of
:class:`._binned.BinnedHeldOut`), the fits from pooled sums
(:class:`._fits.HeldOutFits`), and the pass over the pairs that pools them
(:class:`._sums.HeldOutPairs`); the adaptive and categorical engines
specialise the pass.
"""

import numpy as np
from sklearn.neighbors import KDTree

from ._sums import HeldOutPairs, pooled_moments


class HeldOut(HeldOutPairs):
    """Held-out pooled sums for every candidate from shared distances.

    Parameters
    ----------
    X, Y, weights, kernels, bandwidths
        The points, their values and weights, and the candidates, as for
        :class:`._base.HeldOutPoints`.
    n_jobs : int or None
        Threads over blocks of rows.
    degree : {0, 1}
        The degree of the local polynomial of the held-out fits.

    Attributes
    ----------
    log_scale : ndarray of shape (n_kernels, n_bandwidths, n)
        Set by :meth:`sums_excluding_groups`: the logarithm of the factor by
        which each row of its sums was divided (the shift of the rows
        recomputed after underflow, else 0), for :meth:`in_sample`.
    """

    def __init__(
        self, X, Y, weights, kernels, bandwidths, n_jobs=None, degree=0, held_rows=None
    ):
        super().__init__(X, Y, weights, kernels, bandwidths, degree)
        self.support_radii = np.unique(
            [k.support * h for k in kernels if k.is_compact for h in bandwidths]
        ).astype(np.float64)
        self.n_jobs = n_jobs
        # (the sums of the rows a pass holds: every row, or a split's test rows)
        self._check_size(X.shape[0] if held_rows is None else held_rows, n_jobs)
        # Local-linear moments hold the values centred on their weighted
        # mean, as the engine's do: covariances are then differences of
        # moments of the order of the spread, not of the squared mean.
        self.value_center = np.zeros(Y.shape[1])
        if degree == 1:
            self.value_center = self.weights @ Y / self.weights.sum()
        values = Y - self.value_center
        self.moments = pooled_moments(self.X, values, self.weights, degree)
        self.spatial_order = KDTree(self.X).get_arrays()[1]
        # The moments of unit weight, for scores that hold the weights.
        self.unit_moments = pooled_moments(
            self.X, values, np.ones_like(self.weights), degree
        )
