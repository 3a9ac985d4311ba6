"""The tree paths' chunks of queries: their order, their counts and the
categorical factor of their pairs.

The trees pool the queries in the order of the cells that hold them, and
write each row back in place; their chunks are planned from neighbour
counts taken over threads; the categorical factor of their pairs is looked
up in a table of the combinations of categories. None of it may change a
value: each is compared with a plain computation here.
"""

import numpy as np
import pandas as pd
import pytest
from _reference import FORMULAS
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context

from sklearn_kernelpool import KernelAttentionRegressor
from sklearn_kernelpool._engine import _categorical
from sklearn_kernelpool._engine import _query_chunks as _chunk_plan
from sklearn_kernelpool._engine._categorical import CategoricalFactor

# Queries between the clusters take the fallbacks, which must keep their
# rows too.
pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning"),
]


def clustered(n, d, seed=0):
    """Keys in a few tight clusters, queries spread over them."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-3, 3, size=(6, d))
    X = centres[rng.integers(0, 6, n)] + rng.normal(scale=0.4, size=(n, d))
    y = np.sin(X).sum(axis=1) + rng.normal(scale=0.1, size=n)
    return X, y


@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
def test_queries_in_any_order_get_their_own_rows(degree, algorithm, monkeypatch):
    # Threads from the first pair on, and a working_memory that cuts the
    # queries into many chunks: rows written back from several threads.
    monkeypatch.setattr(_chunk_plan, "MIN_THREADED_PAIRS", 0)
    X, y = clustered(3000, 3)
    Q, _ = clustered(1500, 3, seed=1)
    reg = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.6, degree=degree, algorithm=algorithm
    ).fit(X, y)
    assert reg.algorithm_ == algorithm
    brute = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.6, degree=degree, algorithm="brute"
    ).fit(X, y)
    shuffle = np.random.default_rng(2).permutation(len(Q))
    with config_context(working_memory=0.05):
        for n_jobs in (1, 2):
            reg.set_params(n_jobs=n_jobs)
            mean, std = reg.predict(Q, return_std=True)
            again = reg.predict(Q[shuffle], return_std=True)
            assert_array_equal(again[0], mean[shuffle])
            assert_array_equal(again[1], std[shuffle])
            # One query at a time: no order at all.
            alone = np.concatenate([reg.predict(Q[i : i + 1]) for i in range(0, 40)])
            assert_array_equal(alone, mean[:40])
    expected, spread = brute.predict(Q, return_std=True)
    assert_allclose(mean, expected, rtol=1e-10, atol=1e-10)
    assert_allclose(std, spread, rtol=1e-8, atol=1e-6)


def test_adaptive_widths_order_their_queries_by_the_typical_radius():
    X, y = clustered(3000, 2)
    Q, _ = clustered(800, 2, seed=1)
    reg = KernelAttentionRegressor(
        kernel="epanechnikov", n_neighbors=5, algorithm="kd_tree"
    ).fit(X, y)
    pool = reg._pool
    order = pool.scorer.query_order(pool, Q)
    # Cells of the radius that holds about 5 of the 3,000 keys: many cells,
    # not the few of the bandwidth's multiplier 1.
    cells = np.unique(np.floor(Q / 1.0), axis=0)
    assert len(cells) < 100
    side = pool.kernel.support * (np.ptp(X, axis=0).max() * (5 / 3000) ** 0.5)
    ordered = np.floor(Q[order] / side)
    step = np.diff(ordered, axis=0)
    assert np.all((step[:, 0] > 0) | ((step[:, 0] == 0) & (step[:, 1] >= 0)))
    assert len(np.unique(ordered, axis=0)) > 100
    shuffle = np.random.default_rng(0).permutation(len(Q))
    assert_array_equal(reg.predict(Q[shuffle]), reg.predict(Q)[shuffle])


def test_the_queries_are_pooled_in_the_order_of_their_cells():
    X, y = clustered(2000, 2)
    Q, _ = clustered(500, 2, seed=1)
    h = np.array([0.5, 0.8])
    reg = KernelAttentionRegressor(
        kernel="biweight", bandwidth=h, algorithm="kd_tree"
    ).fit(X, y)
    pool = reg._pool
    order = pool.scorer.query_order(pool, Q)
    assert_array_equal(np.sort(order), np.arange(len(Q)))
    cells = np.floor(Q[order] / (h * pool.kernel.support))
    # Lexicographic: the first feature's cell first, then the second's.
    step = np.diff(cells, axis=0)
    assert np.all((step[:, 0] > 0) | ((step[:, 0] == 0) & (step[:, 1] >= 0)))
    # Sparse queries keep their order.
    from scipy.sparse import csr_array

    assert pool.scorer.query_order(pool, csr_array(Q)) is None


@pytest.mark.parametrize("n_neighbors", [None, 30])
def test_the_counts_over_threads_bound_the_support(n_neighbors):
    X, y = clustered(3000, 3)
    Q, _ = clustered(5000, 3, seed=1)
    params = {"bandwidth": 0.9} if n_neighbors is None else {"n_neighbors": 30}
    reg = KernelAttentionRegressor(
        kernel="epanechnikov", algorithm="kd_tree", on_empty="nan", **params
    ).fit(X, y)
    pool = reg._pool
    one = pool.scorer.support_counts(pool, Q, 1)
    two = pool.scorer.support_counts(pool, Q, 2)
    assert_array_equal(one, two)
    inside = np.count_nonzero(reg.attention_weights(Q) > 0, axis=1)
    assert np.all(one >= inside)
    assert np.all(one <= inside + 2)  # only keys on the widened edge


def pair_factor(query_codes, key_codes, lambdas, levels):
    """``prod_j lambda_j ** D_j`` of each pair, by the defining formula."""
    out = np.ones(len(query_codes))
    for j, lam in enumerate(lambdas):
        q, k = query_codes[:, j], key_codes[:, j]
        if levels[j]:
            far = np.where(q < 0, max(levels[j] - 1, 1), np.abs(q - k))
        else:
            far = (q != k).astype(float)
        out *= lam**far
    return out


@pytest.mark.parametrize("levels", [[0, 0], [0, 5], [4, 6]])
@pytest.mark.parametrize("lambdas", [[0.1, 0.3], [0.0, 0.5], [1.0, 0.2]])
@pytest.mark.parametrize("max_combinations", [4096, 3])
def test_the_factor_of_pairs_is_the_formula(
    levels, lambdas, max_combinations, monkeypatch
):
    # max_combinations=3: more combinations than the table takes, pair by pair.
    monkeypatch.setattr(_categorical, "_MAX_COMBINATIONS", max_combinations)
    rng = np.random.default_rng(0)
    keys = np.column_stack([rng.integers(0, 4, 3000), rng.integers(0, 6, 3000)])
    # Unknown categories (-1) and known ones that no key holds (4, 6).
    queries = np.column_stack([rng.integers(-1, 5, 200), rng.integers(-1, 7, 200)])
    factor = CategoricalFactor(keys, np.array(lambdas), np.array(levels))
    rows = rng.integers(0, len(queries), 100_000)
    cols = rng.integers(0, len(keys), 100_000)
    got = factor.for_queries(queries).pairs(rows, cols)
    expected = pair_factor(queries[rows], keys[cols], lambdas, levels)
    assert_allclose(got, expected, rtol=1e-15, atol=0)
    # The table holds the same products as the pairs computed one by one.
    assert_array_equal(got, factor.for_queries(queries)._each_pair(rows, cols))
    assert (factor.key_combinations() is not None) == (max_combinations > 3)


def test_a_tree_fit_with_categories_is_the_product_kernel():
    rng = np.random.default_rng(3)
    n, m = 600, 300
    Xc = rng.normal(size=(n, 2))
    colour = rng.choice(["red", "green", "blue", "grey"], n)
    size = rng.choice([1, 2, 3], n)
    y = Xc[:, 0] + (colour == "red") + size / 3 + rng.normal(scale=0.1, size=n)
    X = pd.DataFrame({"u": Xc[:, 0], "colour": colour, "v": Xc[:, 1], "size": size})
    Qc = rng.normal(size=(m, 2))
    Q = pd.DataFrame(
        {
            "u": Qc[:, 0],
            "colour": rng.choice(["red", "green", "blue", "pink"], m),
            "v": Qc[:, 1],
            "size": rng.choice([1, 2, 3], m),
        }
    )
    h, lambdas = 12.0, [0.2, 0.05]
    reg = KernelAttentionRegressor(
        "epanechnikov",
        h,
        algorithm="kd_tree",
        categorical_features=["colour", "size"],
        categorical_bandwidth=lambdas,
    ).fit(X, y)
    # Every pair inside the support: 180,000 pairs, enough for the table.
    u = np.sqrt(((Qc[:, None, :] - Xc[None, :, :]) ** 2).sum(axis=2)) / h
    alpha = np.vectorize(FORMULAS["epanechnikov"])(u)
    differ = (Q["colour"].to_numpy()[:, None] != colour[None, :]).astype(float)
    differ2 = (Q["size"].to_numpy()[:, None] != size[None, :]).astype(float)
    W = alpha * lambdas[0] ** differ * lambdas[1] ** differ2
    assert np.all(u < 1)
    assert_allclose(reg.predict(Q), W @ y / W.sum(axis=1), rtol=1e-10, atol=1e-12)
