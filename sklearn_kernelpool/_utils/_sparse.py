"""SciPy sparse ``X``: which paths take it, and where it is made dense.

Sparse keys and queries (CSR and CSC matrices and arrays; other formats are
converted to CSR by the validation) are accepted on the brute-force path.
The engine computes its distances on keys scaled by the bandwidth and
centred on their mean, which keeps the BLAS expansion
``|q|^2 + |k|^2 - 2 q.k`` free of cancellation and is what its exact
decisions (:mod:`.._engine._exact`) bound the rounding of; centred keys are dense
whatever the input, so ``fit`` makes the keys dense once, at the memory cost
of dense input. Queries are made dense one chunk at a time, within
``working_memory``, so that predicting never holds a dense copy of all the
queries. The arithmetic after that is the dense one: sparse input gives the
predictions of its dense copy, to the last bit.

The trees and the grid of the binned path index dense points only:
``algorithm="auto"`` picks brute force for sparse keys, and an explicit tree
or ``"binned"`` is refused; so are categorical features, which are columns of
category values (:mod:`._categorical_input`).
"""

from scipy.sparse import issparse

from ._categorical_input import declares_array_features

# What ``validate_data`` keeps of sparse input; other formats become CSR.
# Queries are sliced by rows, so CSC queries become CSR as well.
FIT_FORMATS = ("csr", "csc")
QUERY_FORMATS = ("csr",)

TREES = ("kd_tree", "ball_tree")
# The paths that need dense keys.
DENSE_ONLY = (*TREES, "binned")


def takes_sparse(algorithm, categorical_features=None):
    """Whether an estimator of this ``algorithm`` and ``categorical_features``
    takes SciPy sparse ``X``: the value of its ``input_tags.sparse``."""
    return algorithm not in DENSE_ONLY and not declares_array_features(
        categorical_features
    )


def check_sparse_algorithm(algorithm, X):
    """Refuse a tree or binned ``algorithm`` for sparse keys ``X``."""
    if issparse(X) and algorithm in DENSE_ONLY:
        raise ValueError(
            f"algorithm={algorithm!r} cannot use sparse X (a "
            f"{type(X).__name__} of shape {X.shape}): the trees and the grid "
            "of the binned path index dense points only. Use algorithm='brute' "
            "or 'auto' (which picks brute force for sparse X), or pass dense X "
            "(X.toarray())."
        )


def fitted_algorithm(algorithm, X):
    """The ``algorithm`` the engine gets: brute force for sparse keys."""
    if issparse(X) and algorithm == "auto":
        return "brute"
    return algorithm


def dense_keys(X):
    """The keys as a dense ndarray of their dtype (a copy if sparse)."""
    return X.toarray() if issparse(X) else X


def dense_rows(X, rows):
    """The rows ``rows`` (a slice) of the queries, dense."""
    chunk = X[rows]
    return chunk.toarray() if issparse(chunk) else chunk


def check_not_sparse_array_api(X, method):
    """Refuse sparse queries to an estimator fitted on the array API path."""
    if issparse(X):
        raise ValueError(
            f"{method} got sparse X (a {type(X).__name__}), but this "
            "estimator was fitted on the array API path, which takes dense "
            "arrays of its namespace only. Pass dense queries of the fit's "
            "namespace and device, or fit on NumPy or SciPy sparse data "
            "(array_api_dispatch off, or NumPy input)."
        )
