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
(degree 1, the columns of :func:`._local_linear.moment_matrix`), chosen by
:func:`pooled_moments` and turned into predictions by
:meth:`HeldOut.predictions`. Removing a point from its own pool is done on
the kernel weights, not on the moments, so the pass is the same for both:
only its width, ``n_outputs + 1`` or ``(d + 1)(d + 2) / 2 + (d + 2) p``
columns for ``d`` features and ``p`` outputs, changes. Local-linear
predictions solve each held-out fit around its query with
:func:`._local_linear.solve`, with the key count and key mean of that fit,
so that its rank-deficient designs get the same minimum-norm slope, and its
designs of rank 0 the same local mean, as the fitted estimator's do. The
pooled sums of every point and candidate are refused up front when they
exceed the physical memory (:meth:`HeldOut.sums_bytes`).

Kernels with a log form are exponentiated without a per-row shift, which is
what lets a block serve both of its sides. A row whose pooled weight falls
below ``tiny ** 0.8`` may have lost precision to underflow; it is recomputed
alone as a softmax with its largest logit subtracted, exactly as the pooling
engine does. Such rows, and those that fall back to ``on_empty``, need every
key: they are taken in batches within scikit-learn's ``working_memory``
(:func:`row_batches`), never all at once.

The fit of all the data at a training point is its leave-one-out fit with
its own key added back: :meth:`HeldOut.in_sample` completes each row's
leave-one-out sums with the self term ``w_i alpha(0)`` (in the row's scale,
shifted where the row was recomputed) and gives the in-sample fits and the
diagonal of the smoother matrix, hence GCV and AICc, with no other pass.
"""

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.neighbors import KDTree

from . import _local_linear
from ._brute import _MAX_DISTANCE_ROUNDING
from ._chunking import row_batches
from ._exact import EdgeBlock, nearest_ties, pairwise_squared, squared_slack
from ._threads import single_threaded_blas
from ._weights import physical_memory

# Blocks of BLOCK x BLOCK pairs: the float64 distances and the kernel buffer
# (1 MiB together) stay in the 2 MiB L2 cache of the benchmark machine while
# every candidate is pooled from them (benchmarks/bench_cv.py --blocks).
BLOCK = 256
# Logits below this are clamped (their weights are below 1e-304 and exp()
# is slow on them); a block whose logits are all below _SKIP_LOGIT is skipped.
_LOGIT_FLOOR = -700.0
_SKIP_LOGIT = -708.0
# A row whose pooled weight is below this is recomputed with a shift.
_TINY = float(np.finfo(np.float64).tiny) ** 0.8
# Bytes per key of a row recomputed with a shift: its squared distances,
# logits and scores (float64) and its masks.
SHIFT_BYTES_PER_KEY = 32
# Rows of an in-sample local-linear fit computed again together.
_REFIT_ROWS = 32
# Bytes per key of a row that falls back to ``on_empty`` (its squared
# distances, tie tolerances and masks).
FALLBACK_BYTES_PER_KEY = 48


def pooled_moments(X, Y, weights, degree=0):
    """The moments pooled per key, shape (n, n_columns), the weight last.

    ``w * [y, 1]`` for degree 0; ``w * [k, upper(k k^T), y, k (x) y, y**2,
    1]`` (:func:`._local_linear.moment_matrix`) for degree 1.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Keys, centred.
    Y : ndarray of shape (n, n_outputs)
        Values (centred for degree 1).
    weights : ndarray of shape (n,)
        Sample weights.
    degree : {0, 1}
        The degree of the local polynomial.
    """
    if degree == 1:
        return _local_linear.moment_matrix(X, Y, weights)
    return np.hstack([Y, np.ones((len(Y), 1))]) * weights[:, None]


def solve_moments(sums):
    """Predictions and empty rows from pooled sums ``[sum a w y, sum a w]``.

    Parameters
    ----------
    sums : ndarray of shape (..., n_outputs + 1)
        Pooled moments.

    Returns
    -------
    predictions : ndarray of shape (..., n_outputs)
        NaN where the pooled weight is zero.
    empty : ndarray of bool of shape (...)
        Whether the pooled weight is zero.
    """
    total = sums[..., -1]
    empty = ~(total > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        predictions = sums[..., :-1] / total[..., None]
    predictions[empty] = np.nan
    return predictions, empty


def _augment(X):
    """``[x, 1, |x|^2]`` and ``[-2 x, |x|^2, 1]^T``: their product is ||x - x'||^2."""
    sq = np.einsum("ij,ij->i", X, X)
    ones = np.ones_like(sq)
    left = np.column_stack([X, ones, sq])
    right = np.ascontiguousarray(np.vstack([-2.0 * X.T, sq, ones]))
    return left, right


def squared_distances(left, right, out):
    """Squared distances of augmented rows into ``out``, clipped at zero."""
    np.matmul(left, right, out=out)
    return np.maximum(out, 0.0, out=out)


def exact_if_far(d2, left, right, bandwidth):
    """``d2`` of augmented rows, from exact differences where it may round.

    The expansion rounds a squared distance by a few ``eps (|x|^2 +
    |x'|^2)``, at most ``3 eps min(|x|^2, |x'|^2)`` plus a part relative to
    the distance itself: where the first may exceed the engine's limit
    (``_MAX_DISTANCE_ROUNDING`` squared bandwidths, for the smallest
    ``bandwidth``), as for groups of points far from the centre of the data,
    the block is recomputed from exact differences, as the engine does.
    """
    if not d2.size:
        return d2
    reach = min(float(left[:, -1].max()), float(right[-2].max()))
    eps = float(np.finfo(np.float64).eps)
    if 3.0 * eps * reach <= _MAX_DISTANCE_ROUNDING * bandwidth**2:
        return d2
    # right holds -2 x^T: halving it is exact.
    d2[...] = pairwise_squared(left[:, :-2], -0.5 * right[:-2].T, None)
    return d2


def kernel_block(kernel, d2, d2_range, bandwidth, out, edge=None):
    """Kernel weights ``alpha(sqrt(d2) / h)`` of a block into ``out``.

    Returns None when every weight of the block is zero (compact kernels) or
    negligible (below ``exp(-708)``, log forms). ``d2_range`` is the smallest
    and largest squared distance of the block. ``edge``, an
    :class:`._exact.EdgeBlock`, decides the pairs near the edge of a compact
    support exactly, as the fitted estimator does.
    """
    inv = 1.0 / (bandwidth * bandwidth)
    low, high = d2_range[0] * inv, d2_range[1] * inv
    if kernel.log_function is None:
        margin = 0.0
        if edge is not None and kernel.is_compact:
            margin = edge.slack(bandwidth, kernel.support)
        if low >= kernel.support**2 + margin:
            return None
        np.multiply(d2, inv, out=out)
        if margin:
            edge.redecide(out, bandwidth, kernel.support)
        return kernel.squared_function(out)
    if kernel.log_function(np.sqrt(low)) < _SKIP_LOGIT:
        return None
    if kernel.log_quadratic is not None:
        np.multiply(d2, kernel.log_quadratic * inv, out=out)
    else:
        np.multiply(d2, inv, out=out)
        kernel.squared_log_function(out)
    if kernel.log_function(np.sqrt(high)) < _LOGIT_FLOOR:
        np.maximum(out, _LOGIT_FLOOR, out=out)
    return np.exp(out, out=out)


def _blocks(n, groups):
    """Slices of at most BLOCK points; with groups (sorted), one group each."""
    if groups is None:
        bounds = [(0, n)]
    else:
        cuts = np.flatnonzero(np.diff(groups)) + 1
        bounds = list(zip([0, *cuts], [*cuts, n], strict=True))
    return [
        slice(a, min(a + BLOCK, stop))
        for start, stop in bounds
        for a in range(start, stop, BLOCK)
    ]


def allowed_keys(points, n, groups=None, train=None):
    """The keys that each held-out point of ``points`` may pool, (len, n).

    Those of ``train`` (a K-fold split), of the other groups (``groups``, a
    partition), or else every key but the point's own (leave-one-out).
    """
    if train is not None:
        allowed = np.zeros((len(points), n), dtype=bool)
        allowed[:, train] = True
        return allowed
    if groups is not None:
        return groups[points][:, None] != groups[None, :]
    return points[:, None] != np.arange(n)[None, :]


class HeldOut:
    """Held-out pooled sums for every candidate from shared distances.

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

    def __init__(self, X, Y, weights, kernels, bandwidths, n_jobs=None, degree=0):
        weights = np.asarray(weights, dtype=np.float64)
        # Predictions do not depend on the scale of the weights; a largest
        # weight of 1 keeps the underflow test on the kernel alone.
        self.weights = weights / weights.max()
        positive = self.weights > 0
        self.X = X - X[positive].mean(axis=0)
        # The unscaled points, on which the support edge and the nearest
        # keys are decided, as the fitted estimator does (:mod:`._exact`).
        self.X_raw = X
        self.coordinates = float(np.abs(X).max(initial=0.0))
        self.support_radii = np.unique(
            [k.support * h for k in kernels if k.is_compact for h in bandwidths]
        ).astype(np.float64)
        self.Y = Y
        self.kernels = kernels
        self.bandwidths = np.asarray(bandwidths, dtype=np.float64)
        self.n_jobs = n_jobs
        self.degree = degree
        self._check_size(X.shape[0], n_jobs)
        # Local-linear moments hold the values centred on their weighted
        # mean, as the engine's do: covariances are then differences of
        # moments of the order of the spread, not of the squared mean.
        self.value_center = np.zeros(Y.shape[1])
        if degree == 1:
            self.value_center = self.weights @ Y / self.weights.sum()
        values = Y - self.value_center
        self.moments = pooled_moments(self.X, values, self.weights, degree)
        # ``w * [y, 1]`` for the fallbacks, whatever the pooled moments are.
        self.weighted_values = (
            np.hstack([Y, np.ones((len(Y), 1))]) * self.weights[:, None]
        )
        self.spatial_order = KDTree(self.X).get_arrays()[1]
        # The moments of unit weight, for scores that hold the weights.
        self.unit_moments = pooled_moments(
            self.X, values, np.ones_like(self.weights), degree
        )

    @property
    def _shape(self):
        return (len(self.kernels), len(self.bandwidths))

    def sums_bytes(self, n, n_jobs):
        """Bytes of the pooled sums of every point and candidate.

        The symmetric pass holds one array of sums per thread, their total
        and its reordering: ``8 n n_columns n_candidates (n_threads + 2)``.
        """
        n_threads = max(1, effective_n_jobs(n_jobs))
        d, p = self.X_raw.shape[1], self.Y.shape[1]
        columns = p + 1
        if self.degree == 1:
            columns = (d + 1) * (d + 2) // 2 + (d + 2) * p
        n_candidates = len(self.kernels) * len(self.bandwidths)
        return 8 * n * columns * n_candidates * (n_threads + 2)

    def _check_size(self, n, n_jobs):
        """Refuse, before any work, pooled sums larger than the physical
        memory.

        The held-out sums of every point and candidate are the result of the
        pass (like an output, they are not bounded by ``working_memory``);
        for ``degree=1`` they grow with the square of the features.
        """
        limit = physical_memory()
        size = self.sums_bytes(n, n_jobs)
        if limit is None or size <= limit:
            return
        d = self.X_raw.shape[1]
        n_candidates = len(self.kernels) * len(self.bandwidths)
        what = "the moments of local-linear fits grow with the features squared; "
        if self.degree == 0:
            what = ""
        raise MemoryError(
            f"The held-out sums of {n} points and {n_candidates} candidates "
            f"with degree={self.degree} and {d} features need about "
            f"{size / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} GiB of "
            f"physical memory ({what}n_jobs threads hold a copy each). Score "
            "fewer kernels or bandwidths, fewer features or samples, fewer "
            "n_jobs, or degree=0."
        )

    # -- the symmetric pass ------------------------------------------------
    def sums_excluding_groups(self, groups):
        """Pooled sums of every point over the points of the other groups.

        Parameters
        ----------
        groups : ndarray of int of shape (n,) or None
            Group of each point; None means one group per point
            (leave-one-out).

        Returns
        -------
        sums : ndarray of shape (n_kernels, n_bandwidths, n, n_outputs + 1)
        """
        n = self.X.shape[0]
        # Points in the order of the leaves of a k-d tree: a block holds
        # nearby points, so that narrow bandwidths skip the far blocks.
        # Under K-fold, sorted by group first, so that same-group pairs
        # gather near the diagonal.
        order = self.spatial_order
        if groups is not None:
            order = order[np.argsort(groups[order], kind="stable")]
            groups = groups[order]
        X, moments = self.X[order], self.moments[order]
        raw = self.X_raw[order]
        unit, weights = self.unit_moments[order], self.weights[order]
        left, right = _augment(X)
        blocks = _blocks(n, groups)
        n_threads = max(1, min(effective_n_jobs(self.n_jobs), len(blocks)))

        def run(block_rows):
            sums = np.zeros((*self._shape, n, moments.shape[1]))
            d2 = np.empty((BLOCK, BLOCK))
            buf = np.empty((BLOCK, BLOCK))
            for a in block_rows:
                for b in range(a, len(blocks)):
                    self._pool_pair(
                        sums,
                        left,
                        right,
                        moments,
                        groups,
                        blocks[a],
                        blocks[b],
                        d2,
                        buf,
                        raw,
                    )
            return sums

        # Block rows dealt round-robin: early rows have more pairs (a <= b).
        with single_threaded_blas():
            if n_threads == 1:
                sums = run(range(len(blocks)))
            else:
                parts = Parallel(n_jobs=n_threads, require="sharedmem")(
                    delayed(run)(range(t, len(blocks), n_threads))
                    for t in range(n_threads)
                )
                sums = np.sum(parts, axis=0)
        shifts = self._restabilise(sums, X, unit, weights, groups)
        unsorted = np.empty_like(sums)
        unsorted[:, :, order] = sums
        self.log_scale = np.empty_like(shifts)
        self.log_scale[:, :, order] = shifts
        return unsorted

    def _edge(self, left, right, Q, K, d2):
        """The :class:`._exact.EdgeBlock` of a block of squared distances."""
        squares = float(left[:, -1].max()) + float(right[-2].max())
        return EdgeBlock(Q, K, d2, squares, self.coordinates, self.support_radii)

    def _pool_pair(self, sums, left, right, moments, groups, rows, cols, d2, buf, raw):
        """Add the block of pairs (rows, cols) to the sums of both sides."""
        if groups is not None and groups[rows.start] == groups[cols.start]:
            return  # blocks hold one group each: a same-group block pools nothing
        n_rows, n_cols = rows.stop - rows.start, cols.stop - cols.start
        d2 = squared_distances(left[rows], right[:, cols], d2[:n_rows, :n_cols])
        d2 = exact_if_far(d2, left[rows], right[:, cols], self.bandwidths.min())
        d2_range = (float(d2.min()), float(d2.max()))
        buf = buf[:n_rows, :n_cols]
        diagonal = rows == cols
        edge = self._edge(left[rows], right[:, cols], raw[rows], raw[cols], d2)
        for k, kernel in enumerate(self.kernels):
            for m, h in enumerate(self.bandwidths):
                weights = kernel_block(kernel, d2, d2_range, h, buf, edge)
                if weights is None:
                    continue
                if diagonal:
                    np.fill_diagonal(weights, 0.0)  # leave-one-out: not itself
                sums[k, m, rows] += weights @ moments[cols]
                if not diagonal:
                    sums[k, m, cols] += weights.T @ moments[rows]

    def _restabilise(self, sums, X, unit, weights, groups):
        """Recompute, with a shift, the rows of log kernels that underflowed.

        Rows are recomputed in batches within ``working_memory``. Returns the
        shifts, shape (n_kernels, n_bandwidths, n): the logarithm of the
        factor by which each row's sums were divided (0 where none was).
        """
        n = len(X)
        shifts = np.zeros(sums.shape[:-1])
        for k, kernel in enumerate(self.kernels):
            if kernel.log_function is None:
                continue
            for m, h in enumerate(self.bandwidths):
                rows = np.flatnonzero(sums[k, m, :, -1] < _TINY)
                for batch in row_batches(len(rows), SHIFT_BYTES_PER_KEY * n):
                    chunk = rows[batch]
                    if groups is None:
                        allowed = np.ones((len(chunk), n), dtype=bool)
                        allowed[np.arange(len(chunk)), chunk] = False
                    else:
                        allowed = groups[chunk][:, None] != groups[None, :]
                    sums[k, m, chunk], shifts[k, m, chunk] = self._shifted_sums(
                        kernel, h, X[chunk], X, allowed, unit, weights, True
                    )
        return shifts

    @staticmethod
    def _shifted_sums(
        kernel, h, Q, X, allowed, unit_moments, weights, return_shift=False
    ):
        """Sums of queries over the allowed keys as a shifted softmax.

        The result is the true sums times a positive factor per row,
        ``exp(-shift)``, which leaves the predictions unchanged.
        ``unit_moments`` are the moments of unit weight: the weights enter
        the scores through their logarithm. With ``return_shift`` the shifts
        (the largest logit of each row) are returned too.
        """
        allowed = allowed & (weights > 0)[None, :]
        left, _ = _augment(Q)
        _, right = _augment(X)
        d2 = squared_distances(left, right, np.empty((len(Q), len(X))))
        d2 = exact_if_far(d2, left, right, h)
        d2 /= h * h
        logits = kernel.squared_log_function(d2)
        with np.errstate(divide="ignore"):
            logits += np.log(weights)
        logits[~allowed] = -np.inf
        top = logits.max(axis=1, keepdims=True)
        if not np.all(np.isfinite(top)):
            raise ValueError(
                "A held-out point has no training point of positive weight: "
                "every fold's training part needs one."
            )
        logits -= top
        np.maximum(logits, _LOGIT_FLOOR, out=logits)
        scores = np.exp(logits, out=logits)
        scores[~allowed] = 0.0
        if return_shift:
            return scores @ unit_moments, top[:, 0]
        return scores @ unit_moments

    # -- one split -----------------------------------------------------------
    def sums_split(self, test, train):
        """Pooled sums of the ``test`` points over the ``train`` points.

        Returns
        -------
        sums : ndarray of shape (n_kernels, n_bandwidths, n_test, n_outputs + 1)
        """
        train = train[self.weights[train] > 0]
        if len(train) == 0:
            raise ValueError(
                "A cross-validation split has no training point of positive weight."
            )
        left, _ = _augment(self.X[test])
        _, right = _augment(self.X[train])
        moments = self.moments[train]
        sums = np.zeros((*self._shape, len(test), moments.shape[1]))
        d2 = np.empty((BLOCK, BLOCK))
        buf = np.empty((BLOCK, BLOCK))
        with single_threaded_blas():
            for a in range(0, len(test), BLOCK):
                rows = slice(a, min(a + BLOCK, len(test)))
                for b in range(0, len(train), BLOCK):
                    cols = slice(b, min(b + BLOCK, len(train)))
                    block = squared_distances(
                        left[rows],
                        right[:, cols],
                        d2[: rows.stop - rows.start, : cols.stop - cols.start],
                    )
                    block = exact_if_far(
                        block, left[rows], right[:, cols], self.bandwidths.min()
                    )
                    d2_range = (float(block.min()), float(block.max()))
                    out = buf[: block.shape[0], : block.shape[1]]
                    edge = self._edge(
                        left[rows],
                        right[:, cols],
                        self.X_raw[test[rows]],
                        self.X_raw[train[cols]],
                        block,
                    )
                    for k, kernel in enumerate(self.kernels):
                        for m, h in enumerate(self.bandwidths):
                            weights = kernel_block(
                                kernel, block, d2_range, h, out, edge
                            )
                            if weights is not None:
                                sums[k, m, rows] += weights @ moments[cols]
        for k, kernel in enumerate(self.kernels):
            if kernel.log_function is None:
                continue
            for m, h in enumerate(self.bandwidths):
                rows = np.flatnonzero(sums[k, m, :, -1] < _TINY)
                row_bytes = SHIFT_BYTES_PER_KEY * len(train)
                for batch in row_batches(len(rows), row_bytes):
                    chunk = rows[batch]
                    sums[k, m, chunk] = self._shifted_sums(
                        kernel,
                        h,
                        self.X[test[chunk]],
                        self.X[train],
                        np.ones((len(chunk), len(train)), dtype=bool),
                        self.unit_moments[train],
                        self.weights[train],
                    )
        return sums

    # -- predictions ---------------------------------------------------------
    def predictions(self, sums, rows, groups=None, train=None, degree=None):
        """Held-out predictions of every candidate from its pooled sums.

        Parameters
        ----------
        sums : ndarray of shape (n_kernels, n_bandwidths, n_rows, n_columns)
            From :meth:`sums_excluding_groups` (``rows`` every point) or
            :meth:`sums_split` (``rows`` the test points).
        rows : ndarray of int of shape (n_rows,)
            The held-out points.
        groups : ndarray of int of shape (n,) or None
            The groups of :meth:`sums_excluding_groups`; None with ``train``
            None means leave-one-out.
        train : ndarray of int or None
            The training points of :meth:`sums_split`.
        degree : {0, 1} or None
            The degree of the predictions; None means that of the moments.
            Degree 0 from the moments of degree 1 takes their columns
            ``[y, 1]``: the local-constant sums are part of the local-linear
            ones.

        Returns
        -------
        predictions : ndarray of shape (n_kernels, n_bandwidths, n_rows, n_outputs)
            NaN where the pooled weight is zero.
        empty : ndarray of bool of shape (n_kernels, n_bandwidths, n_rows)
            Whether the pooled weight is zero.
        singular : ndarray of bool of shape (n_kernels, n_bandwidths, n_rows)
            The rows of positive weight whose local-linear design determines
            no slope (rank 0) and that got the local mean; all False for
            degree 0.
        deficient : ndarray of bool of shape (n_kernels, n_bandwidths, n_rows)
            The rows of positive weight whose local-linear design is
            rank-deficient but determines a slope (minimum-norm solve); all
            False for degree 0.
        """
        if self.degree == 0:
            predictions, empty = solve_moments(sums)
            return predictions, empty, np.zeros_like(empty), np.zeros_like(empty)
        if degree == 0:
            layout = _local_linear.MomentLayout(self.X.shape[1], self.Y.shape[1], 1)
            columns = np.r_[np.arange(sums.shape[-1])[layout.values], -1]
            predictions, empty = solve_moments(sums[..., columns])
            zeros = np.zeros_like(empty)
            return predictions + self.value_center, empty, zeros, zeros.copy()
        n_keys, centers = self._fit_keys(rows, groups, train)
        layout = _local_linear.MomentLayout(self.X.shape[1], self.Y.shape[1], n_keys)
        predictions = np.empty((*sums.shape[:-1], self.Y.shape[1]))
        rank = np.empty(sums.shape[:-1], dtype=np.intp)
        queries = self.X[rows]
        for k in range(sums.shape[0]):
            for m in range(sums.shape[1]):
                predictions[k, m], _, rank[k, m] = _local_linear.solve(
                    sums[k, m], queries, layout, False, centers
                )
                redo = sums[k, m, :, -1] > 0
                redo &= _local_linear.cancelled(sums[k, m], layout)
                self._refit(
                    predictions[k, m],
                    rank[k, m],
                    redo,
                    (k, m),
                    rows,
                    (n_keys, centers),
                    groups,
                    train,
                )
        predictions += self.value_center
        empty = ~(sums[..., -1] > 0)
        predictions[empty] = np.nan
        singular = ~empty & (rank == 0)
        deficient = ~empty & (rank > 0) & (rank < self.X.shape[1])
        return predictions, empty, singular, deficient

    def _refit(self, predictions, rank, redo, candidate, rows, fits, groups, train):
        """Held-out local-linear fits of the ``redo`` rows about their own means.

        For the rows whose moments about the global centres cancel
        (:func:`._local_linear.cancelled`): their weights over the keys of
        their fit, from exact differences, and the two-pass fit of
        :func:`._local_linear.centred_fit`. ``predictions`` and ``rank``
        (those of ``candidate``, a (kernel, bandwidth) index pair) are
        updated in place; ``fits`` is the pair of :meth:`_fit_keys`.
        """
        redo = np.flatnonzero(redo)
        if not len(redo):
            return
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        n, d = self.X.shape
        values = self.Y - self.value_center
        n_keys, centers = fits
        n_keys = np.broadcast_to(n_keys, (len(rows),))
        # Per row: its distances and weights, and the work of its fit.
        row = 8 * (d + 4) * n + _local_linear.fit_bytes(n, d, values.shape[1])
        step = max(1, 2**22 // row)
        for start in range(0, len(redo), step):
            at = redo[start : start + step]
            points = rows[at]
            allowed = allowed_keys(points, n, groups, train)
            allowed &= (self.weights > 0)[None, :]
            diff = self.X[points][:, None, :] - self.X[None, :, :]
            u = np.sqrt(np.einsum("rnf,rnf->rn", diff, diff)) / h
            with np.errstate(divide="ignore"):
                if kernel.log_function is not None:
                    logits = kernel.log_function(u) + np.log(self.weights)
                    logits[~allowed] = -np.inf
                    scores = np.exp(logits - logits.max(axis=1, keepdims=True))
                else:
                    scores = np.where(allowed, kernel.function(u) * self.weights, 0.0)
            # Rows of no weight (empty neighbourhoods) keep their values: the
            # fallbacks replace them.
            total = scores.sum(axis=1)
            weighed = total > 0
            at, points = at[weighed], points[weighed]
            p = scores[weighed] / total[weighed, None]
            layout = _local_linear.MomentLayout(d, values.shape[1], n_keys[at])
            mean, _, fitted = _local_linear.centred_fit(
                p, self.X, values, self.X[points], layout, False, centers[at]
            )
            predictions[at], rank[at] = mean, fitted

    def _fit_keys(self, rows, groups, train):
        """Number and mean of the keys of positive weight of each row's fit.

        The fitted estimator centres its keys on their unweighted mean, over
        the keys of positive weight: the mean of the singular threshold.
        """
        positive = self.weights > 0
        if train is not None:
            keys = self.X[train[positive[train]]]
            n_keys = np.full(len(rows), len(keys))
            return n_keys, np.broadcast_to(
                keys.mean(axis=0), (len(rows), keys.shape[1])
            )
        if groups is None:
            groups = np.arange(len(self.X))
        X = self.X * positive[:, None]
        n_groups = groups.max() + 1
        counts = np.bincount(groups, weights=positive, minlength=n_groups)
        totals = np.zeros((n_groups, X.shape[1]))
        np.add.at(totals, groups, X)
        n_keys = (positive.sum() - counts)[groups[rows]]
        centers = (X.sum(axis=0) - totals[groups[rows]]) / n_keys[:, None]
        return n_keys, centers

    # -- in-sample fits -------------------------------------------------------
    def in_sample(self, sums, degree=None):
        """In-sample fits and self weights of every candidate, from the
        leave-one-out sums.

        The fit of all the data at a training point ``i`` pools the keys of
        its leave-one-out fit and its own key: its sums are the leave-one-out
        sums of the last :meth:`sums_excluding_groups` (with ``groups=None``)
        plus the self term ``c_i = w_i alpha(0)`` times the point's own
        moments, in the scale of the row (times ``exp(-shift)`` where the
        row was recomputed with a shift, see :attr:`log_scale`). For degree 0
        the self weight is ``L_ii = c_i / (D_{-i} + c_i)`` and the fit
        ``(N_{-i} + c_i y_i) / (D_{-i} + c_i)``; for degree 1 the fit is the
        local-linear solve of the completed moments about the mean of the
        keys of positive weight and ``L_ii = p_ii (1 + g . (m - x_i))``, the
        equivalent-kernel weight of :func:`._local_linear.equivalent_kernel`
        (minimum-norm where the design is rank-deficient, ``p_ii`` on rank
        0); rows whose moments cancel are fitted again about their own
        means from their weights over every key, as the estimator does. No
        other pass over the pairs of points is made.

        Parameters
        ----------
        sums : ndarray of shape (n_kernels, n_bandwidths, n, n_columns)
            The leave-one-out sums of :meth:`sums_excluding_groups`.
        degree : {0, 1} or None
            As for :meth:`predictions`.

        Returns
        -------
        fitted : ndarray of shape (n_kernels, n_bandwidths, n, n_outputs)
            The in-sample fits; NaN on rows of weight zero that pool nothing.
        self_weight : ndarray of shape (n_kernels, n_bandwidths, n)
            ``L_ii``; 0 on rows of weight zero.
        """
        degree = self.degree if degree is None else degree
        positive = self.weights > 0
        n, d = self.X.shape
        p = self.Y.shape[1]
        fitted = np.empty((*sums.shape[:-1], p))
        self_weight = np.zeros(sums.shape[:-1])
        layout = None
        columns = slice(None)
        if self.degree == 1:
            layout = _local_linear.MomentLayout(d, p, int(positive.sum()))
            if degree == 0:
                columns = np.r_[np.arange(sums.shape[-1])[layout.values], -1]
        for k in range(sums.shape[0]):
            for m in range(sums.shape[1]):
                full, own = self._full_sums(sums, (k, m))
                total = full[:, -1]
                with np.errstate(invalid="ignore", divide="ignore"):
                    p_self = np.where(positive, own / total, 0.0)
                if degree == 0:
                    fitted[k, m], _ = solve_moments(full[:, columns])
                    fitted[k, m] += self.value_center
                    self_weight[k, m] = p_self
                    continue
                # One eigendecomposition per row for the fit (as
                # :func:`._local_linear.solve`) and the self weight (as
                # :func:`._local_linear.equivalent_kernel`).
                with np.errstate(invalid="ignore", divide="ignore"):
                    means = full[:, :-1] / total[:, None]
                local, vectors, inverse, _ = _local_linear._local_geometry(
                    means, self.X, layout
                )
                ybar = means[:, layout.values]
                cross = means[:, layout.cross].reshape(n, d, p)
                cross -= local[:, :, None] * ybar[:, None]
                fitted[k, m], _ = _local_linear._fit(
                    local, vectors, inverse, ybar, cross, None, self.X
                )
                offset = (local - self.X)[:, :, None]
                g = _local_linear._apply_inverse(vectors, inverse, offset)
                own_weight = p_self * (1.0 + np.einsum("nfo,nfo->n", g, offset))
                self_weight[k, m] = np.where(positive, own_weight, 0.0)
                redo = positive & _local_linear.cancelled(full, layout)
                self._in_sample_refit(fitted[k, m], self_weight[k, m], redo, (k, m))
                fitted[k, m] += self.value_center
        return fitted, self_weight

    def _full_sums(self, sums, candidate):
        """The in-sample sums of every point for one candidate, and the part
        of each point's own key in them: the leave-one-out ``sums`` plus
        the self term, both divided by ``max(1, c_i)`` (in the row's scale)
        so that neither overflows.

        Returns ``full`` (n, n_columns) and ``own`` (n,).
        """
        k, m = candidate
        kernel = self.kernels[k]
        with np.errstate(divide="ignore"):
            log_alpha0 = float(np.log(np.ravel(kernel.function(np.zeros(1)))[0]))
            log_self = np.log(self.weights) + log_alpha0 - self.log_scale[k, m]
        top = np.maximum(log_self, 0.0)
        own = np.exp(log_self - top)
        full = sums[k, m] * np.exp(-top)[:, None]
        full += own[:, None] * self.unit_moments
        return full, own

    def _in_sample_refit(self, fitted, self_weight, redo, candidate):
        """In-sample local-linear fits and self weights of the ``redo`` rows
        about their own means, from their weights over every key of positive
        weight; updated in place.

        The computation of :func:`._local_linear.centred_kernel` and
        :func:`._local_linear.centred_fit` (the keys and values centred on
        each row's local means before any product, the same rank threshold),
        vectorised over a batch of rows: the equivalent-kernel weights
        ``l_j = p_j (1 - g . (k_j - m))``, the self weight ``l_i`` and the fit
        ``ybar + sum_j l_j (y_j - ybar)``.
        """
        # Rows in the order of the k-d tree's leaves, a few at a time: the
        # keys that any of them weighs are then few where the bandwidth is
        # narrow (where moments cancel most).
        rank = np.empty(len(self.X), dtype=np.intp)
        rank[self.spatial_order] = np.arange(len(self.X))
        redo = np.flatnonzero(redo)
        redo = redo[np.argsort(rank[redo])]
        n, d = self.X.shape
        values = self.Y - self.value_center
        p_out = values.shape[1]
        n_keys = int(np.count_nonzero(self.weights > 0))
        layout = _local_linear.MomentLayout(d, p_out, n_keys)
        # Per row: differences, centred and weighted keys, weights, values.
        row = 8 * n * (4 * d + 4 + 2 * p_out)
        for batch in row_batches(len(redo), row):
            for start in range(batch.start, batch.stop, _REFIT_ROWS):
                points = redo[start : min(start + _REFIT_ROWS, batch.stop)]
                self._in_sample_rows(fitted, self_weight, points, candidate, layout)

    def _in_sample_rows(self, fitted, self_weight, points, candidate, layout):
        """:meth:`_in_sample_refit` of the rows ``points``, over the keys
        that any of them weighs."""
        p = self._full_weights(candidate, points)
        keys = np.flatnonzero(p.any(axis=0))
        p = p[:, keys]
        X = self.X[keys]
        values = self.Y[keys] - self.value_center
        m = p @ X
        centred = X[None, :, :] - m[:, None, :]
        cov = (centred * p[:, :, None]).transpose(0, 2, 1) @ centred
        scale = _local_linear._centred_scale(m, cov, None)
        vectors, inverse, _ = _local_linear._pseudo_inverse(cov, scale, layout)
        g = _local_linear._apply_inverse(
            vectors, inverse, (m - self.X[points])[:, :, None]
        )
        weights = p * (1.0 - (centred @ g)[:, :, 0])
        ybar = p @ values
        spread = values[None, :, :] - ybar[:, None, :]
        fitted[points] = ybar + (weights[:, None, :] @ spread)[:, 0]
        # A point whose own weight underflowed to zero is not among the keys.
        own = np.minimum(np.searchsorted(keys, points), len(keys) - 1)
        own_weight = weights[np.arange(len(points)), own]
        self_weight[points] = np.where(keys[own] == points, own_weight, 0.0)

    def _full_weights(self, candidate, points):
        """Normalised weights of ``points`` over every key of positive
        weight, themselves included, shape (len(points), n)."""
        kernel, h = self.kernels[candidate[0]], self.bandwidths[candidate[1]]
        allowed = np.broadcast_to(self.weights > 0, (len(points), len(self.X)))
        u2 = pairwise_squared(self.X[points], self.X, None) / (h * h)
        with np.errstate(divide="ignore"):
            if kernel.log_function is not None:
                logits = kernel.squared_log_function(u2) + np.log(self.weights)
                logits[~allowed] = -np.inf
                scores = np.exp(logits - logits.max(axis=1, keepdims=True))
            else:
                scores = kernel.squared_function(u2) * self.weights
                scores[~allowed] = 0.0
        return scores / scores.sum(axis=1, keepdims=True)

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
        return sums[:, :-1] / sums[:, -1:]

    def mean_values(self, allowed):
        """Weighted mean of the values of the allowed keys of each row.

        Parameters
        ----------
        allowed : ndarray of bool of shape (n_rows, n)
            The keys each row may pool.
        """
        sums = allowed.astype(np.float64) @ self.weighted_values
        return sums[:, :-1] / sums[:, -1:]
