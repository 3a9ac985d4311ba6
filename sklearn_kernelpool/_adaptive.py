"""Adaptive (nearest-neighbour) widths: one bandwidth per query.

With ``n_neighbors=k`` the width of a query ``q`` is ``h * d_k(q)``, where
``h`` is the ``bandwidth`` and ``d_k(q)`` the distance from ``q`` to its
``k``-th nearest training key of positive weight, measured in coordinates
divided by ``h / g``, with ``g`` the geometric mean of ``h`` (``g = h`` for
an isotropic bandwidth, so ``d_k`` is then the plain Euclidean distance).
Per-feature widths thus set the shape of the metric and the neighbour
distance its scale, and ``g`` multiplies the width (Loader, "Local
Regression and Likelihood", 1999, section 2.2.1, the nearest-neighbour
bandwidth; Cleveland and Devlin's LOWESS span).

In the coordinates ``z = x / h`` of the engine, the scaled squared distance
of a query to a key is

    u^2 = ||z_q - z_k||^2 / r^2(q),    r^2(q) = g^2 * d_k(z_q)^2,

so the engine divides each query's row of squared distances by its own
``r^2``, before the kernel. ``r^2`` is computed once per query, by one code
whatever the path, from exact differences of the unscaled coordinates
(:mod:`._exact`), and the pairs near the edge of a compact support are
decided on ``paired_squared(q, k, h) / r^2``: every path takes the same
decisions.

A query whose ``k``-th neighbour lies at distance zero gets the limit of a
vanishing width: the keys at distance zero from it, pooled with their
sample weights, whatever the kernel.
"""

import numpy as np
from scipy.sparse import csr_array
from sklearn.neighbors import NearestNeighbors

from ._brute import _LOGIT_FLOOR
from ._exact import edge_values, paired_squared, pairwise_squared, squared_slack

# The neighbours of queries are searched, and their exact distances computed,
# this many (query, neighbour) pairs at a time: well within working_memory.
_PAIR_BLOCK = 2**13
# Above this many features the neighbour search uses a ball tree.
_KD_TREE_MAX_FEATURES = 15


def check_n_neighbors(n_neighbors, n_keys, loo=False):
    """Refuse more neighbours than there are keys of positive weight."""
    if n_neighbors is None:
        return
    available = n_keys - 1 if loo else n_keys
    if n_neighbors > available:
        others = " other than the held-out one" if loo else ""
        raise ValueError(
            f"n_neighbors={n_neighbors} exceeds the training rows of positive "
            f"sample weight{others} ({available} sample(s)): each such row "
            "counts as one neighbour (rows of weight zero count as none). Use "
            f"n_neighbors <= {available}."
        )


def scale_of(bandwidth):
    """``g**2``: the squared geometric mean of the bandwidth."""
    h = np.asarray(bandwidth, dtype=np.float64)
    if h.ndim == 0:
        return float(h) ** 2
    return float(np.exp(2.0 * np.mean(np.log(h))))


class NeighborRadii:
    """The squared adaptive scale ``r^2`` of each query.

    Parameters
    ----------
    scaled : ndarray of shape (n_keys, n_features)
        The keys of positive weight divided by the bandwidth (uncentred).
    keys : ndarray of shape (n_keys, n_features)
        The same keys, unscaled, in float64.
    bandwidth : float or ndarray of shape (n_features,)
        The bandwidth ``h``.
    n_neighbors : int
        ``k``: each key counts as one neighbour, whatever its weight.
    """

    def __init__(self, scaled, keys, bandwidth, n_neighbors):
        check_n_neighbors(n_neighbors, len(keys))
        self.keys = keys
        self.bandwidth = bandwidth
        self.n_neighbors = n_neighbors
        self.g2 = scale_of(bandwidth)
        # A tree answers each query on its own: the neighbours do not depend
        # on the chunk a query is in, so neither does r^2.
        tree = "kd_tree" if keys.shape[1] <= _KD_TREE_MAX_FEATURES else "ball_tree"
        self.search = NearestNeighbors(algorithm=tree).fit(
            np.asarray(scaled, dtype=np.float64)
        )

    def __call__(self, scaled, raw):
        """``r^2`` of the queries, shape (n_queries,), float64.

        ``scaled`` and ``raw`` are the scaled and unscaled queries. The tree
        finds the ``k`` nearest keys; ``r^2`` is the largest of their exact
        squared distances.
        """
        k = self.n_neighbors
        out = np.empty(len(raw))
        step = max(1, _PAIR_BLOCK // k)
        for start in range(0, len(raw), step):
            rows = slice(start, start + step)
            q = np.asarray(scaled[rows], dtype=np.float64)
            index = self.search.kneighbors(q, k, return_distance=False)
            out[rows] = self._exact(raw[rows], index).max(axis=1)
        return self.g2 * out

    def _exact(self, raw, index):
        """Exact squared scaled distances of each query to its neighbours."""
        n, k = index.shape
        q = np.repeat(np.asarray(raw, dtype=np.float64), k, axis=0)
        d2 = paired_squared(q, self.keys[index.ravel()], self.bandwidth)
        return d2.reshape(n, k)


def safe_radii(r2):
    """``r^2`` with zeros replaced by one, and the mask of the zeros."""
    coincident = ~(r2 > 0)
    return np.where(coincident, 1.0, r2), coincident


def _exact_u2(raw, keys, bandwidth, rows, cols, r2):
    return paired_squared(raw[rows], keys[cols], bandwidth) / r2[rows]


def _coincident_rows(raw, keys, bandwidth):
    """Dense 0/1 rows: which keys lie at distance zero of each query."""
    return pairwise_squared(raw, keys, bandwidth) == 0


def brute_scores(scorer, Q1, out, wide, raw, scaled, r2, categorical=None):
    """Fill ``out`` with a brute chunk's scores under per-query widths.

    The mirror of :meth:`._brute.BruteScorer.scores` with each row of
    squared distances divided by its query's ``r^2`` before the kernel:
    kernels with a log form give ``w alpha(u)`` as a softmax with the row
    maximum subtracted, the others ``alpha(u)``. ``categorical``, the factor
    of the chunk's categorical features (:mod:`._categorical`), multiplies
    the scores (added to the logits of the log forms before their maximum
    is taken). Rows past the chunk's (the padding of the last block) are
    left meaningless.
    """
    kernel = scorer.kernel
    exact = scorer.exact
    n = len(raw)
    safe, coincident = safe_radii(r2)
    scorer.squared_distances(Q1, out, wide)
    divisor = np.ones(len(out))
    divisor[:n] = safe
    out /= divisor[:, None].astype(out.dtype, copy=False)
    if kernel.is_compact:
        squares = Q1[:n, -1] + scorer.key_sq_max
        _redecide(out[:n], squares, raw, scaled, exact, kernel.support, safe)
    if scorer.log_weights is not None:
        kernel.squared_log_function(out)
        out += scorer.log_weights
        finite = True
        if categorical is not None:
            categorical.add_log(out)
            if categorical.excludes:
                finite = out > -np.inf  # pairs of a differing lambda-0 feature
        top = out.max(axis=1, keepdims=True)
        if finite is not True:
            top[~np.isfinite(top)] = 0.0  # rows that weigh no key
        out -= top
        floor = _LOGIT_FLOOR.get(scorer.dtype)
        if floor is not None:
            np.maximum(out, floor, out=out, where=finite)
        np.exp(out, out=out)
    else:
        scorer.kernel_in_place(out)
    if categorical is not None and scorer.log_weights is None:
        categorical.multiply(out)
    rows = np.flatnonzero(coincident)
    if len(rows):
        hit = _coincident_rows(raw[rows], exact.keys, exact.bandwidth)
        value = hit.astype(np.float64)
        if categorical is not None:
            value *= categorical[rows].dense()
        if scorer.log_weights is None:
            out[rows] = value
        else:
            # Scores that carry the weights: those of the keys hit, each row
            # divided by its largest (a factor per row, as the softmax's).
            value *= np.exp(scorer.log_weights.astype(np.float64))
            top = value.max(axis=1, keepdims=True)
            top[top == 0] = 1.0
            out[rows] = value / top
    return out


def _redecide(u2, squares, raw, scaled, exact, support, r2):
    """Re-decide the pairs of ``u2`` near the support edge, exactly.

    ``u2`` holds a chunk's fast squared distances divided by each row's
    ``r^2``; ``squares`` the ``|q|^2`` of the expansion.
    """
    s2 = support * support
    radius = support * np.sqrt(r2)
    slack = squared_slack(
        u2.dtype,
        squares,
        exact.query_coordinates(scaled),
        radius,
        exact.n_features,
    )
    eps = float(np.finfo(u2.dtype).eps)
    slack = (slack / r2 + 4 * eps * s2)[:, None]
    step = max(1, 2**16 // max(u2.shape[1], 1))
    for start in range(0, u2.shape[0], step):
        block = u2[start : start + step]
        width = slack[start : start + step]
        near = (block >= s2 - width) & (block <= s2 + width)
        if not near.any():
            continue
        rows, cols = np.nonzero(near)
        rows = rows + start
        exact_u2 = _exact_u2(raw, exact.keys, exact.bandwidth, rows, cols, r2)
        block[rows - start, cols] = edge_values(exact_u2, support, u2.dtype)
    return u2


def tree_radius(scorer, Q, r2):
    """The radius query of a tree chunk: the support and its rounding."""
    safe, coincident = safe_radii(r2)
    radius = scorer.kernel.support * np.sqrt(safe)
    radius[coincident] = 0.0
    return radius, scorer._slack(Q, radius)


def tree_count(scorer, Q, r2):
    """An upper bound on the keys in each query's adaptive support."""
    radius, slack = tree_radius(scorer, Q, r2)
    if hasattr(scorer.tree, "sorted"):
        return scorer.tree.count(Q, radius + slack)
    return scorer.tree.query_radius(Q, r=radius + slack, count_only=True)


def tree_scores(scorer, Q, raw, r2):
    """Sparse kernel scores ``alpha(u)`` of a tree chunk, per-query widths.

    The mirror of :meth:`._tree.TreeScorer.scores`: one radius per query,
    ``support * r``, widened by the rounding of the tree's distances, and
    the pairs near the edge decided on ``paired_squared(q, k, h) / r^2``.
    """
    kernel, exact, dtype = scorer.kernel, scorer.exact, scorer.dtype
    support = kernel.support
    safe, coincident = safe_radii(r2)
    radius, slack = tree_radius(scorer, Q, r2)
    indptr, cols, x = scorer._neighbors(Q, radius + slack)
    rows = np.repeat(np.arange(len(Q)), np.diff(indptr))
    u2 = ((x * x) / safe[rows]).astype(dtype, copy=False)
    edge = (x >= radius[rows] - slack[rows]) | (u2 >= support * support)
    edge &= ~coincident[rows]
    edge = np.flatnonzero(edge)
    if len(edge):
        values = _exact_u2(
            raw, exact.keys, exact.bandwidth, rows[edge], cols[edge], safe
        )
        u2[edge] = edge_values(values, support, dtype)
    keep = u2 < support * support
    alpha = kernel.squared_function(u2)  # may work in place
    on_zero = coincident[rows]
    if on_zero.any():
        at = np.flatnonzero(on_zero)
        hit = paired_squared(raw[rows[at]], exact.keys[cols[at]], exact.bandwidth) == 0
        keep[at] = hit
        alpha[at] = 1.0
    rows, cols, alpha = rows[keep], cols[keep], alpha[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(Q)))])
    return csr_array((alpha, cols, indptr), shape=(len(Q), scorer.n_keys))


def expected_neighbors(n_neighbors, n_keys, n_features, kernel, bandwidth):
    """A rough number of keys in a query's adaptive support (compact kernels).

    About ``k * (support * g)**d`` keys lie within ``support * g`` times the
    distance of the ``k``-th neighbour, for locally uniform keys.
    """
    reach = kernel.support * np.sqrt(scale_of(bandwidth))
    with np.errstate(over="ignore"):
        estimate = n_neighbors * reach**n_features
    return float(min(max(estimate, 1.0), n_keys))
