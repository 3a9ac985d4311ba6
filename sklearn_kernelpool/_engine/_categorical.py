"""Categorical features: the Li-Racine kernels and their encoding.

A categorical feature ``j`` enters the attention weight of a key through a
kernel of weight ``lambda_j ** D_j(q, k)``, with ``lambda_j`` in [0, 1], that
multiplies the continuous kernel of the other features::

    w_i * alpha(||(q_c - k_c) / h||) * prod_j lambda_j ** D_j(q_j, k_j)

An unordered feature has ``D_j = [q_j != k_j]``: the unordered kernel of
Aitchison and Aitken (1976) in the form of Li and Racine (2007), weight 1 for
a key of the query's category, ``lambda_j`` for one of another. An ordered
feature has ``D_j = |q_j - k_j|``, the distance of the positions of the
levels in their order: the ordered kernel of Li and Racine (2007, section
4.1), weight ``lambda_j`` for the next level, ``lambda_j ** 2`` for the one
after. With two levels both are the same. ``lambda_j = 1`` ignores the
feature, ``lambda_j = 0`` pools only the keys of the query's category
(``0 ** 0 = 1``). Categories are learned in ``fit`` (any hashable values);
a category unseen in ``fit`` (code -1) differs from every key: by 1 for an
unordered feature, by ``max(L_j - 1, 1)`` for an ordered one of ``L_j``
levels, the distance of its farthest levels.

The estimators hand the engine one float array per call: the continuous
columns first, then one column per categorical feature holding the
category's integer code (its position in the order of an ordered feature;
-1 for an unknown category), built from the input by
:mod:`.._utils._categorical_input`. The engine splits it
(:func:`split_codes`) and applies :class:`CategoricalFactor` to its scores:
as ``sum_j D_j log lambda_j`` added to the log scores of kernels with a log
form (``-inf`` where ``lambda_j = 0`` and ``D_j > 0``), as a product
otherwise. ``levels`` says which features are ordered: the number of levels
``L_j`` of an ordered feature, 0 for an unordered one (None: every feature
unordered, as in the saved engines of earlier releases).

References
----------
J. Aitchison and C. G. G. Aitken, "Multivariate binary discrimination by the
kernel method", Biometrika 63 (1976). Q. Li and J. S. Racine, "Nonparametric
Econometrics: Theory and Practice", Princeton University Press (2007),
section 4.1.
"""

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

# The factor of a chunk is computed in blocks of rows of about this size.
_BLOCK_BYTES = 2**21
# The factor of sparse pairs is looked up in a table of the combinations of
# categories of the queries and keys (:meth:`_Bound.pairs`) where the keys
# hold at most this many combinations, the table at most this many entries
# and fewer than the pairs, and the pairs more than the last.
_MAX_COMBINATIONS = 4096
_MAX_LOOKUP = 2**20
_MIN_LOOKUP_PAIRS = 2**16

CATEGORICAL_CONSTRAINTS = {
    "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
    "categorical_bandwidth": [Interval(Real, 0, 1, closed="both"), "array-like"],
    "ordered_features": ["array-like", StrOptions({"from_dtype"}), None],
}
# Those of the features alone, for the CV estimators that select the lambdas.
CATEGORICAL_FEATURE_CONSTRAINTS = {
    name: CATEGORICAL_CONSTRAINTS[name]
    for name in ("categorical_features", "ordered_features")
}


def resolve_categorical_bandwidth(value, n_categorical):
    """``categorical_bandwidth`` as an ndarray of one lambda per feature."""
    try:
        lam = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        lam = None
    if lam is None or lam.ndim > 1 or (lam.ndim == 1 and lam.shape[0] != n_categorical):
        raise ValueError(
            "categorical_bandwidth must be a float in [0, 1] or an array-like of "
            f"shape (n_categorical_features,) = ({n_categorical},); got {value!r}."
        )
    if not np.all((lam >= 0) & (lam <= 1)):
        raise ValueError(
            f"categorical_bandwidth must lie in [0, 1]; got {np.ravel(lam).tolist()}."
        )
    return np.broadcast_to(lam, (n_categorical,)).copy()


# -- the engine ------------------------------------------------------------------
def split_codes(X, n_categorical):
    """The continuous columns and the integer codes of an engine array."""
    d = X.shape[1] - n_categorical
    return X[:, :d], X[:, d:].astype(np.intp)


def unknown_distances(levels):
    """The distance of an unknown category to every key, per feature: 1 for
    an unordered feature (``levels`` 0), ``max(L - 1, 1)`` for an ordered
    one of ``L`` levels."""
    return np.maximum(np.asarray(levels, dtype=np.float64) - 1.0, 1.0)


def check_levels(levels, n_categorical):
    """``levels`` as an ndarray of int of shape (n_categorical,); None (every
    feature unordered) as zeros."""
    if levels is None:
        return np.zeros(n_categorical, dtype=np.intp)
    return np.asarray(levels, dtype=np.intp).reshape(n_categorical)


def distances(query_codes, key_codes, levels):
    """``D_j`` of every (query, key) pair, float64 of shape (n_queries,
    n_keys, n_categorical): ``|a - b|`` for an ordered feature, ``[a != b]``
    for an unordered one, the :func:`unknown_distances` for a query's
    unknown category (-1)."""
    q = np.asarray(query_codes, dtype=np.intp)[:, None, :]
    k = np.asarray(key_codes, dtype=np.intp)[None, :, :]
    levels = check_levels(levels, q.shape[2])
    out = np.where(levels > 0, np.abs(q - k), q != k).astype(np.float64)
    unknown = np.broadcast_to(q < 0, out.shape)
    out[unknown] = np.broadcast_to(unknown_distances(levels), out.shape)[unknown]
    return out


class CategoricalFactor:
    """The product kernel ``prod_j lambda_j ** D_j(q_j, k_j)`` over the keys.

    Parameters
    ----------
    key_codes : ndarray of int of shape (n_keys, n_categorical)
        The codes of the keys.
    lambdas : ndarray of shape (n_categorical,)
        The weights of a category at distance 1, in [0, 1].
    levels : ndarray of int of shape (n_categorical,) or None, default=None
        The number of levels of each ordered feature, 0 for an unordered one;
        None: every feature unordered.
    """

    def __init__(self, key_codes, lambdas, levels=None):
        self.keys = np.ascontiguousarray(key_codes, dtype=np.intp)
        self.lambdas = np.asarray(lambdas, dtype=np.float64)
        self.levels = check_levels(levels, len(self.lambdas))
        self.unknown = unknown_distances(self.levels)
        with np.errstate(divide="ignore"):
            self.logs = np.log(self.lambdas)
        # Features of lambda 1 change nothing.
        self.active = np.flatnonzero(self.lambdas < 1)
        self.excludes = bool(np.any(self.lambdas == 0))
        self._combinations = None

    def key_combinations(self):
        """``(grid, of_key)``: the factor of the distinct combinations of the
        keys' categories in the features of lambda below 1 (the others 0),
        and each key's row in it; None where there are more than
        :data:`_MAX_COMBINATIONS` or no such feature. Built on first use
        (a race builds it twice, the same)."""
        if self._combinations is None:
            combos = False
            if len(self.active) and len(self.keys):
                grid, of_key = np.unique(
                    self.keys[:, self.active], axis=0, return_inverse=True
                )
                if len(grid) <= _MAX_COMBINATIONS:
                    codes = np.zeros((len(grid), self.keys.shape[1]), dtype=np.intp)
                    codes[:, self.active] = grid
                    factor = CategoricalFactor(codes, self.lambdas, self.levels)
                    combos = factor, of_key.reshape(-1)
            self._combinations = combos
        return self._combinations or None

    def for_queries(self, codes):
        """The factor of these queries' codes, shape (n_queries, n_categorical)."""
        return _Bound(self, np.asarray(codes, dtype=np.intp))


class _Bound:
    """:class:`CategoricalFactor` of one chunk of queries."""

    def __init__(self, factor, codes):
        self.factor = factor
        self.codes = codes

    def __getitem__(self, rows):
        return _Bound(self.factor, self.codes[rows])

    @property
    def excludes(self):
        return self.factor.excludes

    def _blocks(self, out):
        """Row blocks of the first rows of ``out``, with a float and a bool
        buffer of a block each (at most 2 MiB together)."""
        n_keys = out.shape[1]
        step = max(1, _BLOCK_BYTES // (9 * max(n_keys, 1)))
        values = np.empty((step, n_keys), dtype=out.dtype)
        differ = np.empty((step, n_keys), dtype=bool)
        for start in range(0, len(self.codes), step):
            rows = slice(start, min(start + step, len(self.codes)))
            size = rows.stop - rows.start
            yield rows, values[:size], differ[:size]

    def _differ(self, rows, j, out):
        return np.not_equal(
            self.codes[rows, j, None], self.factor.keys[None, :, j], out=out
        )

    def _distance(self, rows, j, out):
        """``D_j`` of an ordered feature ``j`` into the float ``out``."""
        codes = self.codes[rows, j]
        np.subtract(codes[:, None], self.factor.keys[None, :, j], out=out)
        np.abs(out, out=out)
        out[codes < 0] = self.factor.unknown[j]
        return out

    def add_log(self, out, scale=1.0):
        """Add ``scale * sum_j D_j log lambda_j`` to the first rows of ``out``
        (``-inf`` where a feature of lambda 0 differs); ``scale`` turns the
        natural logarithms into those of logits of another base."""
        for rows, values, differ in self._blocks(out):
            view = out[rows]
            for j in self.factor.active:
                ordered = self.factor.levels[j] > 0
                if ordered:
                    np.greater(self._distance(rows, j, values), 0, out=differ)
                else:
                    self._differ(rows, j, differ)
                if self.factor.lambdas[j] == 0:
                    np.copyto(view, -np.inf, where=differ)
                    continue
                if ordered:
                    values *= self.factor.logs[j] * scale
                else:
                    np.multiply(differ, self.factor.logs[j] * scale, out=values)
                view += values
        return out

    def multiply(self, out):
        """Multiply the first rows of ``out`` by the factor."""
        for rows, values, differ in self._blocks(out):
            view = out[rows]
            for j in self.factor.active:
                lam = self.factor.lambdas[j]
                if self.factor.levels[j]:
                    np.power(lam, self._distance(rows, j, values), out=values)
                else:
                    self._differ(rows, j, differ)
                    np.multiply(differ, lam - 1.0, out=values)
                    values += 1.0
                view *= values
        return out

    def pairs(self, rows, cols):
        """The factor of the (query, key) pairs ``(rows, cols)``.

        Where the keys hold few combinations of categories, the factor of
        each combination of the queries' and the keys' is computed once,
        by :meth:`_each_pair`, and looked up: the same products, in the
        same order, as pair by pair.
        """
        combos = self.factor.key_combinations()
        if combos is not None and len(rows) > _MIN_LOOKUP_PAIRS:
            grid, of_key = combos
            active = self.factor.active
            # np.unique(axis=0) sorts lexicographically, whatever the codes.
            mine, of_query = np.unique(
                self.codes[:, active], axis=0, return_inverse=True
            )
            n_grid = len(grid.keys)
            if len(mine) * n_grid <= min(_MAX_LOOKUP, len(rows)):
                codes = np.zeros((len(mine), self.codes.shape[1]), dtype=np.intp)
                codes[:, active] = mine
                table = _Bound(grid, codes)._each_pair(
                    np.repeat(np.arange(len(mine)), n_grid),
                    np.tile(np.arange(n_grid), len(mine)),
                )
                table = table.reshape(len(mine), n_grid)
                return table[of_query.reshape(-1)[rows], of_key[cols]]
        return self._each_pair(rows, cols)

    def _each_pair(self, rows, cols):
        """The factor of the pairs ``(rows, cols)``, feature by feature."""
        out = np.ones(len(rows))
        for j in self.factor.active:
            codes = self.codes[rows, j]
            if self.factor.levels[j]:
                far = np.abs(codes - self.factor.keys[cols, j]).astype(np.float64)
                far[codes < 0] = self.factor.unknown[j]
                out *= np.power(self.factor.lambdas[j], far)
            else:
                out[codes != self.factor.keys[cols, j]] *= self.factor.lambdas[j]
        return out

    def dense(self):
        """The factor of every (query, key) pair, float64."""
        return self.multiply(np.ones((len(self.codes), len(self.factor.keys))))

    def scale_sparse(self, scores):
        """Multiply sparse (csr) scores by the factor, in place; explicit zeros
        of excluded pairs are removed."""
        rows = np.repeat(np.arange(scores.shape[0]), np.diff(scores.indptr))
        scores.data *= self.pairs(rows, scores.indices).astype(scores.data.dtype)
        if self.excludes:
            scores.eliminate_zeros()
        return scores


class Queries(tuple):
    """The engine's tuple of a chunk's queries, with their categorical factor."""

    def __new__(cls, parts, categorical):
        queries = super().__new__(cls, parts)
        queries.categorical = categorical
        return queries


def check_no_categorical(estimator):
    """Refuse categorical features on the array API path."""
    if estimator.categorical_features is not None:
        raise ValueError(
            "categorical_features works on NumPy arrays and pandas DataFrames "
            "only; arrays of other array API namespaces are pooled without "
            f"categorical features. Got categorical_features="
            f"{estimator.categorical_features!r}: pass NumPy input, or "
            "categorical_features=None."
        )
