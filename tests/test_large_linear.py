"""The large-table selection of a partially linear model where the full
table differs from its subsample: a category of a linear column that the
subsample did not draw, and a linear column that the subsample identifies
but the full table does not."""

import contextlib
import io

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import r2_score

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV
from sklearn_kernelpool._selection import _large

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.WeakIdentificationWarning"),
]

N, M, SEED = 2000, 500, 3


def _undrawn(k, held_out=False):
    """``k`` rows that the subsample does not hold, by the selection's
    documented draw (a permutation by ``RandomState``): held-out rows, or
    rows that neither the subsample nor the held-out rows hold."""
    order = np.random.RandomState(SEED).permutation(N)
    assert N - M - min(_large.HELD_OUT_ROWS, N - M) >= k
    return order[M : M + k] if held_out else order[-k:]


def _table(seed=12):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (N, 3))
    level = rng.integers(0, 4, N)
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2] + 0.8 * level
    y = y + 0.1 * rng.standard_normal(N)
    return X, np.array(list("pqrs"))[level], y


def _frame(X, codes):
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["level"] = pd.Categorical(codes)
    return frame


def _linear_refit(reg):
    """The partially linear model of the candidate ``reg`` selected, with
    the categorical features linear, unfitted."""
    return KernelAttentionRegressor(
        kernel=reg.kernel_,
        bandwidth=reg.bandwidth_,
        n_neighbors=reg.n_neighbors_,
        degree=reg.degree_,
        categorical_features="from_dtype",
        linear_features="categorical",
    )


def _search():
    return KernelAttentionRegressorCV(
        categorical_features="from_dtype", subsample=M, random_state=SEED
    )


@pytest.mark.parametrize("held_out", [False, True])
def test_a_category_the_subsample_did_not_draw_is_estimated_by_the_refit(held_out):
    X, codes, y = _table()
    rare = _undrawn(3, held_out)
    codes[rare] = "t"
    y[rare] += 2.0
    frame = _frame(X, codes)
    reg = _search().fit(frame, y)
    assert reg.linear_features_ == "categorical"
    assert "level_t" in reg.best_estimator_.linear_feature_names_
    # The refit is the partially linear model of the selected kernel part
    # on every row, the rare ones included.
    model = _linear_refit(reg).fit(frame, y)
    np.testing.assert_allclose(reg.best_estimator_.coef_, model.coef_, rtol=1e-10)
    np.testing.assert_allclose(reg.predict(frame), model.predict(frame), rtol=1e-10)
    # The second stage scores the kernel part on the partial residuals of
    # the subsample's coefficients; the rare rows, which have none, weigh 0.
    order = np.random.RandomState(SEED).permutation(N)
    sub = np.sort(order[:M])
    sub_model = KernelAttentionRegressorCV(
        categorical_features="from_dtype", subsample=None
    ).fit(frame.iloc[sub], y[sub])
    best = sub_model.best_estimator_
    seen = np.setdiff1d(np.arange(N), rare)
    kernel_part = best.kernel_regressor_.predict(frame[["a", "b", "c"]].iloc[seen])
    residuals = y[seen] - (best.predict(frame.iloc[seen]) - kernel_part)
    held = np.sort(order[M : M + min(_large.HELD_OUT_ROWS, N - M)])
    train = np.setdiff1d(seen, held)
    at = {row: i for i, row in enumerate(seen)}
    params = reg.cv_results_["params"][0]
    part = KernelAttentionRegressor(
        kernel=params["kernel"],
        bandwidth=params["bandwidth"],
        n_neighbors=params.get("n_neighbors"),
        degree=reg.cv_results_["param_degree"][0],
    ).fit(X[train], residuals[[at[row] for row in train]])
    held = held[np.isin(held, seen)]  # the rare held-out rows weigh zero
    truth = residuals[[at[row] for row in held]]
    r2 = r2_score(truth, part.predict(X[held]))
    np.testing.assert_allclose(reg.cv_results_["mean_test_score"][0], r2, rtol=1e-9)


@pytest.mark.parametrize("categorical_features", ["from_dtype", None])
def test_a_linear_column_not_identified_at_full_n_falls_back_to_the_kernel(
    categorical_features,
):
    X, codes, y = _table()
    # A category the subsample never sees, held by a tight cluster of rows
    # far from the others: at full n its column is a function of the kernel
    # features, which the kernel part reproduces.
    rare = _undrawn(20)
    X[rare] = 4.0 + 0.01 * np.random.default_rng(0).standard_normal((20, 3))
    codes[rare] = "t"
    frame = _frame(X, codes)
    # (None: "auto" finds the categorical column in the dtypes itself)
    reg = _search().set_params(verbose=1, categorical_features=categorical_features)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        reg.fit(frame, y)
    output = buffer.getvalue()
    assert "At full n" in output and "go in the kernel" in output
    # The kernel route of the subsample's own comparison: the categorical
    # features in the kernel, both searches in subsample_results_.
    assert reg.linear_features_ is None
    assert getattr(reg.best_estimator_, "coef_", None) is None
    assert set(reg.subsample_results_["param_linear_features"]) == {
        None,
        "categorical",
    }
    assert reg.linear_scores_["linear"] > reg.linear_scores_["kernel"]
    with pytest.raises(ValueError, match="not identified|reproduce"):
        _linear_refit(reg).fit(frame, y)
    # The model predicts the rare rows from the keys of their category.
    assert np.all(np.isfinite(reg.predict(frame.iloc[rare])))


def test_explicit_linear_columns_not_identified_at_full_n_are_refused():
    X, codes, y = _table()
    rare = _undrawn(20)
    X[rare] = 4.0 + 0.01 * np.random.default_rng(0).standard_normal((20, 3))
    codes[rare] = "t"
    frame = _frame(X, codes)
    reg = _search().set_params(linear_features=["level"])
    with pytest.raises(ValueError, match="level_t"):
        reg.fit(frame, y)
