"""Exact decisions on pairs of points: the support edge and the nearest keys.

The fast paths compute scaled squared distances that round: brute force by
the BLAS expansion ``|q|^2 + |k|^2 - 2 q.k`` of scaled, centred coordinates,
the trees from scaled coordinates, the leave-one-out from centred ones. Two
decisions must not depend on that rounding, or the paths disagree:

- whether a key lies inside the support of a compact kernel, the strict
  ``u < support`` of the kernels' definitions;
- which keys tie as the nearest of a query (``on_empty="nearest"``).

Every path takes both from the functions here, on the exact differences of
the original coordinates, summed over the features in order:

    u^2 = sum_f ((q_f - k_f) / h_f)^2.

The fast paths only find the pairs to decide: those whose rounded distance
lies within :func:`squared_slack` of the edge or of the smallest distance.
Ties of an isotropic bandwidth are compared on the unscaled distances
``sum_f (q_f - k_f)^2``, whose integer-grid ties no division can break.

:func:`pairwise_squared` and :func:`edge_values` take an array namespace
``xp`` (NumPy by default), so that the array API path decides exactly as
the NumPy one.
"""

import math

import numpy as np

# The edge search of dense distances looks at blocks of this many entries.
_SEARCH_ENTRIES = 2**16


def _feature_widths(bandwidth, n_features):
    """The bandwidth of each feature as Python floats or 0-d arrays, or None."""
    if bandwidth is None:
        return None
    shape = getattr(bandwidth, "shape", ())
    if len(shape) == 0:
        return [bandwidth] * n_features
    return [bandwidth[f] for f in range(n_features)]


def _sum_of_squares(columns, n_features, bandwidth):
    """``sum_f ((q_f - k_f) / h_f)^2`` from the pairs of columns of each
    feature, the features in order."""
    widths = _feature_widths(bandwidth, n_features)
    total = None
    for f in range(n_features):
        q, k = columns(f)
        t = q - k
        if widths is not None:
            t = t / widths[f]
        total = t * t if total is None else total + t * t
    return total


def paired_squared(Q, K, bandwidth):
    """Exact squared distances of the pairs ``(Q[i], K[i])``, shape (n_pairs,).

    Parameters
    ----------
    Q, K : arrays of shape (n_pairs, n_features)
        Unscaled float64 coordinates, of any array namespace.
    bandwidth : float, array of shape (n_features,) or None
        The bandwidth that scales the differences; None leaves them unscaled.
    """
    return _sum_of_squares(lambda f: (Q[:, f], K[:, f]), Q.shape[1], bandwidth)


def pairwise_squared(Q, K, bandwidth, xp=np):
    """Exact squared distances of every query to every key, (n_q, n_k).

    The same operations as :func:`paired_squared`, so the same bits.
    """

    def columns(f):
        return xp.reshape(Q[:, f], (-1, 1)), xp.reshape(K[:, f], (1, -1))

    return _sum_of_squares(columns, Q.shape[1], bandwidth)


def tie_bandwidth(bandwidth):
    """The bandwidth that ties are compared under: None when isotropic."""
    return None if np.ndim(bandwidth) == 0 else bandwidth


def distance_slack(coordinates, radius, n_features):
    """A bound on the rounding of a float64 scaled distance near ``radius``.

    ``coordinates`` is the largest magnitude of the scaled, uncentred
    coordinates of the pair: scaling and centring round each by about eps
    of it, whatever the distance.
    """
    eps = float(np.finfo(np.float64).eps)
    return 64 * eps * radius + 8 * math.sqrt(n_features) * eps * coordinates


def squared_slack(dtype, squares, coordinates, radius, n_features):
    """A bound on the rounding of a fast squared distance near ``radius``.

    Parameters
    ----------
    dtype : dtype
        The dtype of the fast computation.
    squares : float or array
        ``|q|^2 + |k|^2`` of the coordinates the fast path expanded by
        ``|q|^2 + |k|^2 - 2 q.k``, which is exact to a few eps of them.
    coordinates : float or array
        The largest magnitude of the scaled, uncentred coordinates.
    radius : float or array
        The scaled distance where the decision is made.
    n_features : int
    """
    shift = distance_slack(coordinates, radius, n_features)
    return 64 * float(np.finfo(dtype).eps) * squares + shift * (2 * radius + shift)


def edge_values(u2, support, dtype, xp=np):
    """Exact squared distances as the kernels should see them, in ``dtype``.

    A pair inside the support (``u2 < support**2``) keeps a value below
    ``support**2`` after rounding to ``dtype``; a pair outside gets
    ``support**2``, where every compact kernel is zero.
    """
    s2 = support * support
    inside = u2 < s2
    u2 = u2.astype(dtype) if xp is np else xp.astype(u2, dtype)  # NumPy < 2.1
    edge = xp.full_like(u2, s2)
    below = xp.nextafter(edge, xp.zeros_like(edge))
    return xp.where(inside, xp.minimum(u2, below), edge)


def nearest_ties(rows, cols, Q, K, bandwidth, n_queries):
    """The pairs among candidates ``(rows, cols)`` that are nearest exactly.

    ``Q`` and ``K`` are the unscaled float64 queries and keys; the candidates
    hold every key within rounding of each query's smallest distance.
    Returns the (rows, cols) of the keys at the exact smallest distance.
    """
    d2 = paired_squared(Q[rows], K[cols], tie_bandwidth(bandwidth))
    best = np.full(n_queries, np.inf)
    np.minimum.at(best, rows, d2)
    tied = d2 == best[rows]
    return rows[tied], cols[tied]


def redecide_dense(u2, Q, K, bandwidth, support, slack):
    """Re-decide, in place, the pairs of dense ``u2`` near the support edge.

    ``u2`` (n_q, n_k) holds fast squared scaled distances; those within
    ``slack`` (per query, shape (n_q, 1), or a float) of ``support**2`` get
    :func:`edge_values` of their exact distance. The search runs on blocks
    of rows, so that its temporaries stay small next to ``u2``.
    """
    s2 = support * support
    slack = np.broadcast_to(slack, (u2.shape[0], 1))
    step = max(1, _SEARCH_ENTRIES // max(u2.shape[1], 1))
    for start in range(0, u2.shape[0], step):
        block = u2[start : start + step]
        width = slack[start : start + step]
        near = block >= s2 - width
        near &= block <= s2 + width
        if not near.any():
            continue
        rows, cols = np.nonzero(near)
        exact = paired_squared(Q[start + rows], K[cols], bandwidth)
        block[rows, cols] = edge_values(exact, support, u2.dtype)
    return u2


class ExactKeys:
    """The unscaled keys and the bandwidth, to decide pairs exactly.

    Parameters
    ----------
    keys : ndarray of shape (n_keys, n_features)
        The keys, unscaled, in float64.
    bandwidth : float or ndarray of shape (n_features,)
        The bandwidth.
    scaled : ndarray of shape (n_keys, n_features)
        The keys scaled by the bandwidth (uncentred).
    """

    def __init__(self, keys, bandwidth, scaled):
        self.keys = keys
        self.bandwidth = bandwidth
        self.n_features = keys.shape[1]
        self.coordinates = float(np.abs(scaled).max(initial=0.0))

    def query_coordinates(self, scaled):
        """The largest magnitude of each pair's scaled coordinates, (n_q,)."""
        return np.abs(scaled).max(axis=1, initial=0.0) + self.coordinates

    def redecide(self, u2, Q, scaled, support, squares=0.0):
        """Re-decide the pairs of dense ``u2`` (n_q, n_k) near the edge.

        ``Q`` holds the unscaled queries, ``scaled`` the scaled ones, and
        ``squares`` the ``|q|^2 + |k|^2`` of an expansion, per query.
        """
        slack = squared_slack(
            u2.dtype,
            np.reshape(squares, (-1, 1)),
            self.query_coordinates(scaled)[:, None],
            support,
            self.n_features,
        )
        return redecide_dense(u2, Q, self.keys, self.bandwidth, support, slack)

    def ties(self, rows, cols, Q):
        """The exact nearest pairs among candidates (rows, cols) of ``Q``."""
        return nearest_ties(rows, cols, Q, self.keys, self.bandwidth, len(Q))


class EdgeBlock:
    """Exact edge decisions for a block of pairs of the leave-one-out.

    The block's squared distances are computed by the expansion of centred,
    unscaled points, once for every candidate bandwidth. The pairs near the
    edge of any candidate (``radii``, the unscaled support radii) are found
    in one pass over the block; each candidate then re-decides those near
    its own edge on the points themselves.

    Parameters
    ----------
    Q, K : ndarray of shape (n_rows, n_features), (n_cols, n_features)
        The unscaled points of the rows and of the columns of the block.
    d2 : ndarray of shape (n_rows, n_cols)
        The block's squared distances, as computed.
    squares : float
        The largest ``|q|^2 + |k|^2`` of the centred points of the block.
    coordinates : float
        The largest magnitude of the unscaled coordinates.
    radii : ndarray of shape (n_radii,)
        The sorted support radii ``support * h`` of the compact candidates.
    """

    def __init__(self, Q, K, d2, squares, coordinates, radii):
        self.Q, self.K = Q, K
        self.squares = squares
        self.coordinates = coordinates
        self.rows = self.cols = self.d2 = np.zeros(0, dtype=np.intp)
        if not len(radii):
            return
        edges = radii * radii
        slack = self._slack(radii)
        # Within the largest slack of the nearest edge: a pair near an edge
        # is nearer still to the nearest one.
        flat = d2.ravel()
        nearest = np.searchsorted((edges[1:] + edges[:-1]) / 2, flat)
        near = np.abs(flat - edges[nearest]) <= slack.max()
        (index,) = np.nonzero(near)
        self.rows, self.cols = np.divmod(index, d2.shape[1])
        self.d2 = flat[index]

    def _slack(self, radius):
        """The rounding of the block's squared distances near ``radius``."""
        n_features = self.Q.shape[1]
        return squared_slack(
            np.float64, self.squares, self.coordinates, radius, n_features
        )

    def slack(self, bandwidth, support):
        """The rounding of the block's ``u^2`` near ``support``."""
        return self._slack(support * bandwidth) / (bandwidth * bandwidth)

    def redecide(self, u2, bandwidth, support):
        """Re-decide, in place, the pairs of ``u2`` near the edge.

        ``u2`` is the block's squared distances divided by ``bandwidth**2``.
        """
        if not len(self.rows):
            return u2
        edge = (support * bandwidth) ** 2
        near = np.abs(self.d2 - edge) <= self._slack(support * bandwidth)
        rows, cols = self.rows[near], self.cols[near]
        if len(rows):
            exact = paired_squared(self.Q[rows], self.K[cols], bandwidth)
            u2[rows, cols] = edge_values(exact, support, u2.dtype)
        return u2
