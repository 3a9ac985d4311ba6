"""Held-out pooled sums: the symmetric pass over blocks of shared distances.

The part of :class:`._pool.HeldOut` that computes, for every candidate
(kernel, bandwidth), the sums each held-out point pools from the keys its
fit may hold (:meth:`HeldOutPairs.sums_excluding_groups` for leave-one-out
and groups, :meth:`HeldOutPairs.sums_split` for a train/test split), and the
kernel blocks they are pooled from; the module docstring of :mod:`._pool`
describes the method.
"""

from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs

from .._engine import _local_linear
from .._engine._exact import EdgeBlock
from .._engine._weight_rows import physical_memory
from .._utils._threads import single_threaded_blas
from .._utils._working_memory import row_batches
from ._base import HeldOutSums
from ._distances import _augment, exact_if_far, squared_distances
from ._fits import HeldOutFits

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


def pooled_moments(X, Y, weights, degree=0):
    """The moments pooled per key, shape (n, n_columns), the weight last.

    ``w * [y, 1]`` for degree 0; ``w * [k, upper(k k^T), y, k (x) y, y**2,
    1]`` (:func:`.._engine._local_linear.moment_matrix`) for degree 1.

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


def kernel_block(kernel, d2, d2_range, bandwidth, out, edge=None):
    """Kernel weights ``alpha(sqrt(d2) / h)`` of a block into ``out``.

    Returns None when every weight of the block is zero (compact kernels) or
    negligible (below ``exp(-708)``, log forms). ``d2_range`` is the smallest
    and largest squared distance of the block. ``edge``, an
    :class:`.._engine._exact.EdgeBlock`, decides the pairs near the edge of a compact
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
    """Slices of at most BLOCK points; with groups (sorted), a block ends at
    the last start of a group in its second half, if any: the blocks of
    large groups hold one group each (their same-group pairs are skipped
    whole), and small groups share blocks of at least BLOCK / 2 points (their
    same-group pairs are masked), so the number of blocks does not grow with
    the number of groups."""
    if groups is None:
        return [slice(a, min(a + BLOCK, n)) for a in range(0, n, BLOCK)]
    starts = np.append(np.flatnonzero(np.diff(groups)) + 1, n)
    blocks, a = [], 0
    while a < n:
        stop = min(a + BLOCK, n)
        lo, hi = np.searchsorted(starts, [a + BLOCK // 2, stop], side="left")
        if hi < len(starts) and starts[hi] == stop:
            hi += 1  # a group starts right after the block
        if hi > lo:
            stop = int(starts[hi - 1])
        blocks.append(slice(a, stop))
        a = stop
    return blocks


class HeldOutPairs(HeldOutFits):
    """Held-out fits whose pooled sums come from one pass over the pairs of
    points (the symmetric blocks of the module docstring)."""

    def sums_bytes(self, n, n_jobs):
        """Bytes of the pooled sums of every point and candidate.

        The symmetric pass holds one array of sums per thread, their total
        and its reordering: ``8 n n_columns n_candidates (n_threads + 2)``,
        with one more column for ``degree=1``, the sums of the squared
        weights.
        """
        n_threads = max(1, effective_n_jobs(n_jobs))
        d, p = self.X_raw.shape[1], self.Y.shape[1]
        columns = p + 1
        if self.degree == 1:
            columns = (d + 1) * (d + 2) // 2 + (d + 2) * p + 1
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
        n_candidates = int(np.prod(self._shape))
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

    def _empty_sums(self, n_rows, n_columns):
        """Zero :class:`._base.HeldOutSums` of ``n_rows`` rows for every
        candidate, with the sums of the squared weights for ``degree=1``."""
        squares = np.zeros((*self._shape, n_rows)) if self.degree == 1 else None
        return HeldOutSums(np.zeros((*self._shape, n_rows, n_columns)), squares)

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
        sums : HeldOutSums
            Moments of shape (n_kernels, n_bandwidths, n, n_columns).
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
        points = _PassPoints.of(self, order, groups)
        blocks = _blocks(n, groups)
        n_threads = max(1, min(effective_n_jobs(self.n_jobs), len(blocks)))

        def run(block_rows):
            out = self._empty_sums(n, points.moments.shape[1])
            d2 = np.empty((BLOCK, BLOCK))
            buf = np.empty((BLOCK, BLOCK))
            for a in block_rows:
                for b in range(a, len(blocks)):
                    self._pool_pair(out, points, blocks[a], blocks[b], d2, buf)
            return out

        # Block rows dealt round-robin: early rows have more pairs (a <= b).
        with single_threaded_blas():
            if n_threads == 1:
                sums = run(range(len(blocks)))
            else:
                sums = _added(
                    Parallel(n_jobs=n_threads, require="sharedmem")(
                        delayed(run)(range(t, len(blocks), n_threads))
                        for t in range(n_threads)
                    )
                )
        shifts = self._restabilise(sums, points, points, points.allowed)
        self.log_scale = np.empty_like(shifts)
        self.log_scale[:, :, order] = shifts
        return _unsorted(sums, order)

    def _edge(self, left, right, Q, K, d2):
        """The :class:`.._engine._exact.EdgeBlock` of a block of squared distances."""
        squares = float(left[:, -1].max()) + float(right[-2].max())
        return EdgeBlock(Q, K, d2, squares, self.coordinates, self.support_radii)

    def _pool_pair(self, out, points, rows, cols, d2, buf):
        """Add the block of pairs (rows, cols) to the sums of both sides.

        Parameters
        ----------
        out : HeldOutSums
            The pooled sums of every candidate and point, added to in place.
        points : _PassPoints
            The points of the pass, whose pairs within a group are left out
            (K-fold), or each point's pair with itself (leave-one-out).
        rows, cols : slice
            The block of points.
        d2, buf : ndarray
            Workspaces of a block: the squared distances, the weights.
        """
        same = None
        groups = points.groups
        if groups is not None:
            # Groups are sorted: blocks of one same group pool nothing, and
            # blocks whose groups overlap mask their same-group pairs.
            first, last = groups[[rows.start, rows.stop - 1]]
            lo, hi = groups[[cols.start, cols.stop - 1]]
            if first == last == lo == hi:
                return
            if first <= hi and lo <= last:
                same = groups[rows][:, None] == groups[cols][None, :]
        left, right = points.left[rows], points.right[:, cols]
        d2 = squared_distances(left, right, d2[: left.shape[0], : right.shape[1]])
        d2 = exact_if_far(d2, left, right, self.bandwidths.min())
        d2_range = (float(d2.min()), float(d2.max()))
        buf = buf[: d2.shape[0], : d2.shape[1]]
        edge = self._edge(left, right, points.raw[rows], points.raw[cols], d2)
        for k, kernel in enumerate(self.kernels):
            for m, h in enumerate(self.bandwidths):
                weights = kernel_block(kernel, d2, d2_range, h, buf, edge)
                if weights is None:
                    continue
                if same is not None:
                    weights[same] = 0.0
                elif rows == cols:
                    np.fill_diagonal(weights, 0.0)  # leave-one-out: not itself
                block = (rows, cols)
                _add_block(out, (k, m), weights, (points, points), block, rows != cols)

    def _restabilise(self, out, queries, keys, allowed):
        """Recompute, with a shift, the rows of log kernels that underflowed.

        The rows whose pooled weight is below ``tiny ** 0.8``, and for
        ``degree=1`` those whose sum of squared weights is (Kish's ratio
        would lose its precision to underflow while the weight keeps it),
        are recomputed in batches within ``working_memory``: ``queries`` and
        ``keys`` (:class:`_PassPoints`) hold the points of the rows and of
        the keys, ``allowed(rows)`` the keys each row may pool. Returns the
        shifts, shape (n_kernels, n_bandwidths, n_rows): the logarithm of
        the factor by which each row's sums were divided (0 where none was).
        """
        n_keys = len(keys.X)
        shifts = np.zeros(out.moments.shape[:-1])
        for k, kernel in enumerate(self.kernels):
            if kernel.log_function is None:
                continue
            for m, h in enumerate(self.bandwidths):
                low = out.moments[k, m, :, -1] < _TINY
                if out.squares is not None:
                    low |= out.squares[k, m] < _TINY
                rows = np.flatnonzero(low)
                for batch in row_batches(len(rows), SHIFT_BYTES_PER_KEY * n_keys):
                    chunk = rows[batch]
                    moments, squares, shifts[k, m, chunk] = self._shifted_sums(
                        kernel,
                        h,
                        queries.X[chunk],
                        keys.X,
                        allowed(chunk),
                        keys.unit,
                        keys.weights,
                    )
                    out.moments[k, m, chunk] = moments
                    if out.squares is not None:
                        out.squares[k, m, chunk] = squares
        return shifts

    @staticmethod
    def _shifted_sums(kernel, h, Q, X, allowed, unit_moments, weights):
        """Sums of queries over the allowed keys as a shifted softmax.

        The result is the true sums times a positive factor per row,
        ``exp(-shift)``, which leaves the predictions unchanged.
        ``unit_moments`` are the moments of unit weight: the weights enter
        the scores through their logarithm. Returns the sums of the moments,
        those of the squared scores (in the same scale) and the shifts (the
        largest logit of each row).
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
        squares = np.einsum("ij,ij->i", scores, scores)
        return scores @ unit_moments, squares, top[:, 0]

    # -- one split -----------------------------------------------------------
    def sums_split(self, test, train):
        """Pooled sums of the ``test`` points over the ``train`` points.

        Returns
        -------
        sums : HeldOutSums
            Moments of shape (n_kernels, n_bandwidths, n_test, n_columns).
        """
        train = train[self.weights[train] > 0]
        if len(train) == 0:
            raise ValueError(
                "A cross-validation split has no training point of positive weight."
            )
        queries = _PassPoints.of(self, test)
        keys = _PassPoints.of(self, train)
        sums = self._empty_sums(len(test), keys.moments.shape[1])
        d2 = np.empty((BLOCK, BLOCK))
        buf = np.empty((BLOCK, BLOCK))
        with single_threaded_blas():
            for a in range(0, len(test), BLOCK):
                rows = slice(a, min(a + BLOCK, len(test)))
                for b in range(0, len(train), BLOCK):
                    cols = slice(b, min(b + BLOCK, len(train)))
                    self._pool_split(sums, queries, keys, (rows, cols), d2, buf)

        def every_key(rows):
            return np.ones((len(rows), len(train)), dtype=bool)

        self._restabilise(sums, queries, keys, every_key)
        return sums

    def _pool_split(self, out, queries, keys, block, d2, buf):
        """Add the pairs of a ``block`` ``(rows, cols)`` of test points
        (``queries``) and training points (``keys``) to the sums of the test
        points."""
        rows, cols = block
        left, right = queries.left[rows], keys.right[:, cols]
        d2 = squared_distances(left, right, d2[: left.shape[0], : right.shape[1]])
        d2 = exact_if_far(d2, left, right, self.bandwidths.min())
        d2_range = (float(d2.min()), float(d2.max()))
        buf = buf[: d2.shape[0], : d2.shape[1]]
        edge = self._edge(left, right, queries.raw[rows], keys.raw[cols], d2)
        for k, kernel in enumerate(self.kernels):
            for m, h in enumerate(self.bandwidths):
                weights = kernel_block(kernel, d2, d2_range, h, buf, edge)
                if weights is not None:
                    _add_block(out, (k, m), weights, (queries, keys), block)


@dataclass
class _PassPoints:
    """Points of a held-out pass, in the order of the pass.

    ``X`` the centred points, ``left`` and ``right`` their augmented
    coordinates as the rows and the columns of the distance product
    (:func:`_augment`), ``moments`` and ``unit`` the moments pooled per key
    (with the sample weights, and of unit weight), ``weights`` the sample
    weights and ``weights_sq`` their squares, ``raw`` the unscaled points
    (for the exact support edge), ``groups`` the sorted group of each point
    under K-fold (None under leave-one-out or for a split).
    """

    X: np.ndarray
    left: np.ndarray
    right: np.ndarray
    moments: np.ndarray
    unit: np.ndarray
    weights: np.ndarray
    weights_sq: np.ndarray
    raw: np.ndarray
    groups: np.ndarray | None = None

    @classmethod
    def of(cls, held_out, order, groups=None):
        """The points ``order`` (indices) of ``held_out``."""
        X = held_out.X[order]
        left, right = _augment(X)
        weights = held_out.weights[order]
        return cls(
            X,
            left,
            right,
            held_out.moments[order],
            held_out.unit_moments[order],
            weights,
            weights * weights,
            held_out.X_raw[order],
            groups,
        )

    def allowed(self, rows):
        """The keys of the pass that each of its points ``rows`` may pool:
        those of the other groups, or every other key under leave-one-out."""
        if self.groups is not None:
            return self.groups[rows][:, None] != self.groups[None, :]
        allowed = np.ones((len(rows), len(self.X)), dtype=bool)
        allowed[np.arange(len(rows)), rows] = False
        return allowed


def _add_block(out, candidate, weights, points, block, symmetric=False):
    """Pool a ``block`` ``(rows, cols)`` of kernel ``weights`` into the sums
    ``out`` of ``candidate``: the moments and, for ``degree=1``, the squared
    weights.

    ``points`` is the pair ``(queries, keys)`` of :class:`_PassPoints` of the
    rows and the columns; a ``symmetric`` block (off the diagonal of a
    symmetric pass, whose rows and columns are the same points) is pooled
    for its columns too. ``weights`` is a workspace: it is squared in place.
    """
    k, m = candidate
    queries, keys = points
    rows, cols = block
    out.moments[k, m, rows] += weights @ keys.moments[cols]
    if symmetric:
        out.moments[k, m, cols] += weights.T @ queries.moments[rows]
    if out.squares is None:
        return
    squared = np.square(weights, out=weights)
    out.squares[k, m, rows] += squared @ keys.weights_sq[cols]
    if symmetric:
        out.squares[k, m, cols] += queries.weights_sq[rows] @ squared


def _added(parts):
    """The sum of the :class:`._base.HeldOutSums` of the threads."""
    squares = None
    if parts[0].squares is not None:
        squares = np.sum([part.squares for part in parts], axis=0)
    return HeldOutSums(np.sum([part.moments for part in parts], axis=0), squares)


def _unsorted(sums, order):
    """The :class:`._base.HeldOutSums` of a pass in the order ``order`` of
    its points, put back in the order of the points."""
    moments = np.empty_like(sums.moments)
    moments[:, :, order] = sums.moments
    squares = None
    if sums.squares is not None:
        squares = np.empty_like(sums.squares)
        squares[:, :, order] = sums.squares
    return HeldOutSums(moments, squares)
