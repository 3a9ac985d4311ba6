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
from sklearn.neighbors import NearestNeighbors

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


def divide_rows(out, r2):
    """Divide each query's row of squared distances ``out`` by its ``r^2``.

    Rows past the queries' (the padding of a brute block) are left as they
    are. Returns the widths ``(safe, coincident)`` of :func:`safe_radii`,
    which :func:`redecide` and :func:`coincident` take.
    """
    safe, coincident = safe_radii(r2)
    divisor = np.ones(len(out))
    divisor[: len(safe)] = safe
    out /= divisor[:, None].astype(out.dtype, copy=False)
    return safe, coincident


def redecide(u2, squares, queries, exact, kernel, widths):
    """Re-decide the pairs of a brute chunk near the edge of the support.

    ``u2`` holds the chunk's squared distances divided by each row's
    ``r^2``, ``squares`` the ``|q|^2`` of their expansion, ``queries`` the
    unscaled and scaled queries and ``widths`` what :func:`divide_rows`
    returned.
    """
    raw, scaled = queries
    return _redecide(u2, squares, raw, scaled, exact, kernel.support, widths[0])


def coincident(scorer, out, queries, categorical, widths):
    """The scores of the queries of scale zero: the keys at distance zero.

    ``out`` as is without adaptive widths (``widths`` None). Scores that
    carry the weights (``scorer.log_weights``) get those of the keys hit,
    each row divided by its largest (a factor per row, as the softmax's);
    the others 1 on the keys hit. ``categorical`` multiplies them.
    """
    if widths is None:
        return out
    rows = np.flatnonzero(widths[1])
    if not len(rows):
        return out
    exact = scorer.exact
    hit = _coincident_rows(queries[0][rows], exact.keys, exact.bandwidth)
    value = hit.astype(np.float64)
    if categorical is not None:
        value *= categorical[rows].dense()
    if scorer.log_weights is None:
        out[rows] = value
    else:
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


def coincident_pairs(scorer, raw, rows, cols, coincident, inside, alpha):
    """The pairs kept of a tree chunk's sparse scores with adaptive widths.

    ``inside`` marks the pairs within the support; the queries of scale
    zero (``coincident``) keep instead the keys at distance zero from them,
    with score 1 (set in ``alpha``, the scores of the pairs).
    """
    on_zero = coincident[rows]
    if on_zero.any():
        at = np.flatnonzero(on_zero)
        exact = scorer.exact
        hit = paired_squared(raw[rows[at]], exact.keys[cols[at]], exact.bandwidth) == 0
        inside[at] = hit
        alpha[at] = 1.0
    return inside


def expected_neighbors(n_neighbors, n_keys, n_features, kernel, bandwidth):
    """A rough number of keys in a query's adaptive support (compact kernels).

    About ``k * (support * g)**d`` keys lie within ``support * g`` times the
    distance of the ``k``-th neighbour, for locally uniform keys.
    """
    reach = kernel.support * np.sqrt(scale_of(bandwidth))
    with np.errstate(over="ignore"):
        estimate = n_neighbors * reach**n_features
    return float(min(max(estimate, 1.0), n_keys))
