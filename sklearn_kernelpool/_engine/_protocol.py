"""One interface behind the engines: kernel sums, and what is built on them.

The protocol
------------
An engine scores a chunk of queries against the keys and reduces the scores
``w_j K((q_i - k_j) / h)`` (sample weight times kernel, each row up to a
positive factor) to *kernel sums*: one product of the chunk's scores with a
matrix of per-key columns whose last column is ones (or the sample weights,
where the scores do not carry them). The columns asked for are

- ``[y, 1]`` (``pool_matrix``): the weighted sums of the values and the sum
  of the weights, for the pooled values;
- ``[y - ybar, (y - ybar)**2, 1]`` (``spread_matrix``): the second moments
  of the values, for ``return_std``;
- ``[k, upper(k k^T), k y, y, y**2, 1]`` (``moment_matrix``,
  :mod:`._local_linear`): the first and second moments of the keys and their
  cross moments with the values, for ``degree=1``.

Besides the sums, the fallbacks need two things of an engine: which queries
are empty (their sum of weights is not positive) and, for
``on_empty="nearest"``, the normalised weights of each empty query's nearest
keys of positive weight (:meth:`fallback_weights`, from the candidates the
engine finds: the smallest scaled distances on the brute and array API
paths, a nearest-neighbour query in the trees, with ties settled on the
unscaled coordinates by :mod:`._exact` on every path).

The engines:

- brute (:mod:`._brute`, :class:`._brute_chunks.BruteChunks`) and kd/ball
  tree (:class:`._tree.TreeScorer`), behind :class:`._pooling.KernelPool`
  (NumPy, chunked within ``working_memory`` by :mod:`._query_chunks`): the
  sums are :meth:`._pooling.KernelPool._weighted_sums`, the nearest keys
  :meth:`._fallbacks.EmptyQueries.fallback_weights`, both on the scorer
  protocol below; adaptive widths (:mod:`._adaptive`) are one more
  argument of the scorers' scores, each query's ``r^2``;
- the array API path, :class:`._array_api.ArrayAPIPool`, in the namespace of
  the input: one ``matmul`` of the scores with ``pool_matrix``, the nearest
  keys :meth:`._array_api.ArrayAPIPool.fallback_weights`;
- the held-out sums of cross-validation, on the interface of
  :class:`.._held_out._base.HeldOutPoints` (points, candidates, the
  ``on_empty`` fallbacks): the exact pass of :class:`.._held_out._pool.HeldOut`, the
  same columns summed over the keys each held-out point may pool, and the
  binned grids of :class:`.._held_out._binned.BinnedHeldOut`; both normalised by
  :func:`.._held_out._fits.solve_moments` and solved by
  :func:`._local_linear.solve`;
- the binned grid, :class:`.._binned._pool.BinnedKernelPool`: its
  :meth:`.._binned._engine.BinnedEngine.kernel_sums` interpolates the convolved
  grids to the queries and returns the columns above (``pool_matrix``,
  ``spread_matrix`` or ``moment_matrix``, with the keys as ``(k - q) / h``,
  moments about each query), which :func:`.._binned._estimates.estimates` turns into
  estimates with :func:`normalise`, :func:`moment_spread` and
  :func:`._local_linear.solve`. The queries whose binned sums are not to
  be trusted, and what needs each key's weight (attention weights and what
  is built on them), go to the exact engine through the members
  :meth:`.._binned._pool.BinnedKernelPool.attention_weights` and
  ``.._binned._pool.EXACT_MEMBERS``.

A new engine of sums implements ``kernel_sums(queries, return_std)``,
returning the sums of a chunk of queries in these layouts, and which
queries it can answer; the estimates, fallbacks and held-out scoring are
those above.

What is written once, here, on top of the sums, for NumPy arrays or for the
arrays of any array API namespace ``xp``:

- :func:`normalise` and :func:`normalise_rows`: sums divided by the sum of
  the weights, and the empty queries (also of the held-out sums);
- :func:`spread`: the two-pass weighted standard deviation of the values
  under rows of normalised weights (``return_std`` and its fallbacks), and
  :func:`moment_spread`, the one of normalised moments;
- :func:`policy_weights` and :func:`fill_empty`: the ``on_empty`` policy,
  the fallback rows put in the empty rows of pooled values, of their spread
  or of attention weights (dense, or sparse with
  :meth:`._fallbacks.EmptyQueries.sparse_rows`).

The scorer protocol
-------------------
:class:`._pooling.KernelPool` holds no branch on its path: it asks its
scorer (``SCORERS[algorithm]``) for everything that differs between paths,
so a path of its own is a class with these methods and nothing else.
``pool`` is the :class:`._pooling.KernelPool`; ``queries`` the tuple of
:meth:`._pooling.KernelPool._queries` (scaled, centred and unscaled
coordinates, the widths ``r^2`` with ``n_neighbors``, a ``categorical``
attribute with categorical features); ``workspace`` what :meth:`workspace`
returned to the thread.

- ``for_pool(pool, scaled, kernel, user_kernel)`` (classmethod): the scorer
  of a fitted pool, ``scaled`` its uncentred scaled keys;
- ``weights_folded``: whether the scores carry the sample weights (then the
  matrices of the sums leave them out);
- ``plan_batches(pool, X, extra_row_bytes, n_threads, empty_row_pairs,
  order=None)``: the chunks of queries, as slices (of ``order``, that of
  ``query_order``, where given) within each thread's share of
  ``working_memory``, and the number of (query, key) pairs they hold;
- ``query_order(pool, X)``: a permutation of the queries that the chunks
  follow (each gathers its rows and writes them back in place), or None to
  keep their order;
- ``workspace(n_rows)``: the buffers one thread reuses for its chunks, or
  None;
- ``support_counts(pool, X, n_jobs)``: the number (or a bound on it) of
  keys of positive score of each query, to size sparse weights;
- ``chunk_scores(queries, workspace, rows=None)``: the scores of a chunk,
  dense (possibly with rows past the chunk's) or sparse, each query's
  distances divided by its own ``r^2`` where ``queries`` holds one
  (adaptive widths); ``rows`` asks again for those rows in a stable form;
- ``underflowed(total)``: None, or ``(rows_to_recompute, rows, at)``: the
  rows whose sum of weights ``total`` underflowed, what to pass as ``rows``
  to ``chunk_scores``, and where each row lies in its result;
- ``product(scores, matrix, workspace)``: ``scores @ matrix``, the sums
  (and :func:`square_sums`, the sums of the squared scores, for the
  safeguard of ``degree=1``);
- ``weighted(scores, weights, n, sparse)``: a chunk's ``n`` rows of scores
  with the sample weights, in arrays of their own;
- ``row_scores(queries, workspace, rows, weights)`` and ``refit_scores(
  queries, workspace, redo, step, weights)``: dense float64 weighted scores
  of some rows (``refit_scores`` yields ``(rows, scores)`` ``step`` rows at
  a time), for the rows fitted again about their own means;
- ``nearest_candidates(queries, workspace)``: (rows, cols) pairs among
  which each query's nearest keys lie.

The ``degree=1`` solve on the moment sums is :func:`._local_linear.solve`,
and the attention weights of ``degree=1`` are the equivalent kernel of
:func:`._local_linear.equivalent_kernel`, both shared by the NumPy engines.
"""

import math

import numpy as np
from scipy.sparse import csr_array, issparse


def normalise(sums, xp=None):
    """Kernel sums divided by their last column, the sum of the weights.

    Parameters
    ----------
    sums : array of shape (..., n_columns + 1)
        Weighted sums of a chunk (of queries, or of held-out points and
        candidates), the sum of the weights last.
    xp : namespace or None
        The array API namespace of ``sums``, None for NumPy.

    Returns
    -------
    ratios : array of shape (..., n_columns)
        The normalised sums; arbitrary (NaN for NumPy) in empty rows.
    empty : bool array of shape (...)
        The queries whose sum of weights is not positive.
    """
    total = sums[..., -1:]
    empty = ~(total[..., 0] > 0)
    if xp is None:
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums[..., :-1] / total, empty
    return sums[..., :-1] / _safe(total, empty, xp), empty


def square_sums(scores, n, weights_sq=None):
    """``sum_j a_ij**2`` of the first ``n`` rows of a chunk's scores, in
    float64: the scores squared, times the squared sample weights
    ``weights_sq`` where the scores do not carry them (None: they do). With
    the sum of the weights, Kish's effective number of keys of each query
    (:func:`._safeguard.kish_ratio`)."""
    if issparse(scores):
        # From the entries of the first n rows, without a copy of the rows.
        scores = scores if scores.format == "csr" else csr_array(scores)
        end = scores.indptr[n]
        squared = np.square(scores.data[:end], dtype=np.float64)
        if weights_sq is not None:
            squared *= weights_sq[scores.indices[:end]]
        counts = np.diff(scores.indptr[: n + 1])
        return np.bincount(np.repeat(np.arange(n), counts), squared, minlength=n)
    rows = scores[:n]
    if weights_sq is None:
        return np.einsum("ij,ij->i", rows, rows, dtype=np.float64)
    return np.einsum("ij,ij,j->i", rows, rows, weights_sq, dtype=np.float64)


def normalise_rows(scores, total, xp=None):
    """Rows of scores divided by their sums: attention weights.

    ``scores`` of shape (n_queries, n_keys) is divided in place for NumPy;
    ``total`` of shape (n_queries,) holds the row sums. Returns the weights,
    arbitrary (NaN for NumPy) in the empty rows, and the empty rows.
    """
    empty = ~(total > 0)
    if xp is None:
        with np.errstate(invalid="ignore", divide="ignore"):
            scores /= total[:, None]
        return scores, empty
    return scores / _safe(total[:, None], empty, xp), empty


def _safe(total, empty, xp):
    """The column ``total`` with ones in the ``empty`` rows."""
    return xp.where(empty[..., None], xp.ones_like(total), total)


def moment_spread(moments, n_outputs):
    """The variance and standard deviation of normalised moments.

    ``moments`` of shape (n, 2 n_outputs) holds each row's normalised sums of
    the values and of their squares (the first columns of
    ``spread_matrix`` sums, normalised); returns ``(variance, std)``, each
    of shape (n, n_outputs), negative variances clipped in ``std``.
    """
    p = n_outputs
    with np.errstate(invalid="ignore", over="ignore"):
        variance = moments[:, p : 2 * p] - moments[:, :p] ** 2
    return variance, np.sqrt(np.maximum(variance, 0.0))


def spread(weights, centred, xp=None):
    """Weighted standard deviation of the values under rows of weights.

    Two passes: the deviations from each row's own weighted mean are squared,
    so no moment cancels.

    Parameters
    ----------
    weights : array of shape (n_keys,) or (n_rows, n_keys), or sparse array
        Rows of normalised weights (each summing to one).
    centred : array of shape (n_keys, n_outputs)
        The values, centred on their weighted mean.
    xp : namespace or None
        The array API namespace of the arrays, None for NumPy.

    Returns
    -------
    std : array of shape (n_outputs,) or (n_rows, n_outputs)
    """
    if issparse(weights):
        weights = csr_array(weights)
        mean = weights @ centred
        rows = np.repeat(np.arange(weights.shape[0]), np.diff(weights.indptr))
        deviation = centred[weights.indices] - mean[rows]
        squares = weights.data[:, None] * deviation * deviation
        variance = np.stack(
            [
                np.bincount(rows, squares[:, j], weights.shape[0])
                for j in range(centred.shape[1])
            ],
            axis=1,
        )
        return np.sqrt(variance)
    if xp is None and weights.ndim == 1:
        mean = weights @ centred
        return np.sqrt(weights @ (centred - mean) ** 2)
    if weights.ndim == 1:
        return spread(weights[None, :], centred, xp)[0, ...]
    xp = np if xp is None else xp
    local = xp.matmul(weights, centred)
    columns = []
    for j in range(centred.shape[1]):
        deviation = centred[:, j][None, :] - local[:, j : j + 1]
        columns.append(xp.sum(weights * deviation * deviation, axis=1))
    return xp.sqrt(xp.stack(columns, axis=1))


def policy_weights(engine, chosen):
    """The normalised ``on_empty`` weights of the ``chosen`` empty queries.

    Those of each query's nearest keys (``engine.fallback_weights(chosen)``)
    under "nearest", the normalised sample weights of every key (one row,
    ``engine.mean_weights``) under "mean", None (NaN) under "nan" and
    "raise".
    """
    if engine.on_empty == "nearest":
        return engine.fallback_weights(chosen)
    if engine.on_empty == "mean":
        return engine.mean_weights
    return None


def fill_empty(engine, out, empty, chosen, std=None, pooled=True, xp=None):
    """Put the ``on_empty`` fallback of the empty queries in their rows.

    Under "nearest" the fallback weights are those of each query's nearest
    keys (ties shared by sample weight), under "mean" the sample weights of
    every key, under "nan" and "raise" NaN; pooled values get the weighted
    mean of the values under them and ``std`` (if not None) their spread.

    Parameters
    ----------
    engine : EmptyQueries or ArrayAPIPool
        Provides ``on_empty``, ``values``, ``mean_weights`` (the normalised
        sample weights), ``centered_values`` and ``fallback_weights(chosen)``
        (the normalised weights of the nearest keys of the chosen queries),
        and, for attention weights, ``nan_weights`` (the row of an empty
        query under "nan").
    out : array of shape (n_queries, n_outputs) or (n_queries, n_keys)
        Pooled values (``pooled=True``) or attention weights of a chunk.
    empty : bool array of shape (n_queries,)
        The empty queries.
    chosen : object
        The queries whose fallback is computed, passed to
        ``fallback_weights``: the empty ones for NumPy, whose rows are
        assigned in place, every query of the chunk for another namespace,
        whose rows are selected with ``xp.where`` (no in-place update, so
        that gradients flow).
    std : array of shape (n_queries, n_outputs) or None
        The spread of the pooled values, updated likewise.
    pooled : bool
        Whether ``out`` holds pooled values or attention weights.
    xp : namespace or None
        The array API namespace of the arrays, None for NumPy.

    Returns
    -------
    out, std : arrays
        The arrays with their empty rows replaced (the same NumPy arrays).
    """
    if xp is None and not np.any(empty):
        return out, std
    weights = policy_weights(engine, chosen)
    if weights is None:
        rows = math.nan if pooled else engine.nan_weights
        deviations = math.nan
    else:
        if not pooled:
            rows = weights.toarray() if issparse(weights) else weights
        elif xp is None or weights.ndim == 1:
            rows = weights @ engine.values
        else:
            rows = xp.matmul(weights, engine.values)
        if std is not None:
            if xp is None:
                deviations = spread(weights.astype(np.float64), engine.centered_values)
            else:
                deviations = spread(weights, engine.centered_values, xp)
    out = _put(out, empty, rows, xp)
    if std is not None:
        std = _put(std, empty, deviations, xp)
    return out, std


def _put(out, empty, rows, xp):
    """``out`` with ``rows`` in its ``empty`` rows: in place for NumPy."""
    if xp is None:
        out[empty] = rows
        return out
    if isinstance(rows, float):
        rows = xp.full_like(out, rows)
    return xp.where(empty[:, None], rows, out)
