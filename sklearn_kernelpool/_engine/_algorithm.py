"""The choice of the pooling path, made in ``fit``."""

import numpy as np

from .._utils._working_memory import row_batches
from ._adaptive import expected_neighbors as adaptive_neighbors

ALGORITHMS = ("auto", "brute", "kd_tree", "ball_tree", "binned")

# How many keys the neighbourhood estimate looks at, as queries and as keys.
_N_PROBE_QUERIES = 256
_N_PROBE_KEYS = 8192

# The rule of "auto" for compact kernels, read off
# ``benchmarks/bench_predict.py --crossover`` (n = 20000 Gaussian keys, 2000
# queries, 2 cores) and its full table (docs/performance.rst): the k-d tree
# beats brute force when a query's support holds at most this fraction of the
# keys, by dimension. It beat the ball tree nearly everywhere; from 8
# dimensions on neither tree beat brute force but at n = 20000 and a 0.001
# fraction, which at n = 1e5 was 2.5 times slower than brute force. The
# fraction is taken from the largest dimension listed that is at most
# n_features.
_TREE_MAX_FRACTION = {1: 0.15, 2: 0.05, 4: 0.02, 8: 0.0}
_TREE_MIN_KEYS = 2000


def key_span(X):
    """The extent of the keys per feature; ``inf`` where it overflows."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ptp(X, axis=0).astype(np.float64)


def _max_fraction(n_features):
    return _TREE_MAX_FRACTION[max(d for d in _TREE_MAX_FRACTION if d <= n_features)]


def expected_neighbors(keys, support):
    """Estimated number of keys within ``support`` of a key (scaled units).

    Counts the neighbours of up to 256 evenly spaced keys among up to 8192
    evenly spaced keys, and scales the count to all keys.
    """
    n = keys.shape[0]
    probes = keys[np.linspace(0, n - 1, min(n, _N_PROBE_QUERIES)).astype(np.intp)]
    sample = keys[np.linspace(0, n - 1, min(n, _N_PROBE_KEYS)).astype(np.intp)]
    sample_sq = np.einsum("ij,ij->i", sample, sample)
    # The probes go in batches of rows within working_memory (a row holds the
    # distances to the sample and a temporary of the same size).
    inside = 0
    for batch in row_batches(len(probes), 16 * len(sample)):
        p = probes[batch]
        d2 = p @ sample.T
        d2 *= -2.0
        d2 += sample_sq
        d2 += np.einsum("ij,ij->i", p, p)[:, None]
        inside += int(np.count_nonzero(d2 < support * support))
    return inside / (len(probes) * len(sample)) * n


def choose_algorithm(algorithm, kernel, keys, n_neighbors=None, bandwidth=1.0):
    """The fitted ``algorithm_`` and the expected neighbourhood size.

    Parameters
    ----------
    algorithm : {"auto", "brute", "kd_tree", "ball_tree"}
        The ``algorithm`` parameter ("binned" is decided before, by
        :func:`.._binned._pool.prefers_binned`).
    kernel : Kernel
        The kernel.
    keys : ndarray of shape (n_keys, n_features)
        The keys of positive weight, scaled by the bandwidth.
    n_neighbors : int or None
        The ``n_neighbors`` of adaptive widths: the support of a query then
        holds about ``n_neighbors * (support * g)**d`` keys
        (:func:`._adaptive.expected_neighbors`), whatever the density.
    bandwidth : float or ndarray
        The bandwidth, a multiplier of adaptive widths.

    Returns
    -------
    algorithm_ : str
        ``"brute"``, ``"kd_tree"`` or ``"ball_tree"``.
    neighbors : float or None
        Expected number of keys in a query's support (compact kernels).
    """
    if algorithm in ("kd_tree", "ball_tree") and not kernel.is_compact:
        raise ValueError(
            f"algorithm={algorithm!r} needs a kernel of compact support, and "
            f"{kernel.name!r} has unbounded support: use algorithm='brute' or "
            "'auto', or a compact kernel (boxcar, epanechikov, epanechnikov, "
            "biweight, triweight, tricube, cosine)."
        )
    if not kernel.is_compact:
        return "brute", None
    if n_neighbors is None:
        neighbors = expected_neighbors(keys, kernel.support)
    else:
        neighbors = adaptive_neighbors(
            n_neighbors, keys.shape[0], keys.shape[1], kernel, bandwidth
        )
    if algorithm != "auto":
        return algorithm, neighbors
    n_keys, n_features = keys.shape
    if n_keys < _TREE_MIN_KEYS or neighbors >= _max_fraction(n_features) * n_keys:
        return "brute", neighbors
    return "kd_tree", neighbors
