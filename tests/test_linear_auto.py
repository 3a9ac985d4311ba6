"""``linear_features="auto"``, the default of KernelAttentionRegressorCV: the
categorical features linear where that scores better, the search of
``linear_features=None`` without them, and where it steps aside."""

import warnings

import numpy as np
import pandas as pd
import pytest
from _frames import wage_like
from numpy.testing import assert_array_equal
from scipy import sparse

from sklearn_kernelpool import KernelAttentionRegressorCV


def assert_same_search(first, second, X):
    """The same model: predictions bit for bit, the same results."""
    assert_array_equal(first.predict(X), second.predict(X))
    assert first.best_params_ == second.best_params_
    assert first.best_score_ == second.best_score_
    assert sorted(first.cv_results_) == sorted(second.cv_results_)
    for key, value in first.cv_results_.items():
        if key == "params":
            assert value == second.cv_results_[key]
        else:
            assert_array_equal(value, second.cv_results_[key])


def test_auto_is_the_default_and_the_search_of_none_without_categories():
    assert KernelAttentionRegressorCV().linear_features == "auto"
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, (60, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.2 * rng.normal(size=60)
    weights = rng.uniform(0.5, 2.0, 60)
    default = KernelAttentionRegressorCV(bandwidths=6).fit(X, y, sample_weight=weights)
    none = KernelAttentionRegressorCV(bandwidths=6, linear_features=None)
    none.fit(X, y, sample_weight=weights)
    assert_same_search(default, none, X)
    assert default.linear_features_ is None and default.linear_scores_ is None
    assert "linear_features" not in default.best_params_
    # Sparse X too: "auto" keeps the estimator's tag.
    assert KernelAttentionRegressorCV().__sklearn_tags__().input_tags.sparse
    default.fit(sparse.csr_array(X), y)
    assert_same_search(default, none.fit(sparse.csr_array(X), y), X)


def test_the_default_makes_declared_categories_linear_where_that_scores_better():
    X, y = wage_like(n=150)
    search = KernelAttentionRegressorCV(bandwidths=6, n_neighbors=None).fit(X, y)
    assert search.linear_features_ == "categorical"
    assert search.linear_scores_["linear"] > search.linear_scores_["kernel"]
    assert search.best_score_ == search.linear_scores_["linear"]
    assert_array_equal(
        search.best_estimator_.linear_feature_names_,
        ["colour_green", "colour_red", "colour_white", "union_yes"],
    )
    # Integer codes declared by categorical_features, as a pipeline gives them.
    codes = np.column_stack(
        [X["x"], X["colour"].astype("category").cat.codes, X["union"].cat.codes]
    )
    search.set_params(categorical_features=[1, 2]).fit(codes, y)
    assert search.linear_features_ == "categorical"


@pytest.mark.parametrize(
    "options",
    [{"cv": 3}, {"per_feature": True}, {"scoring": "gcv"}, {"scoring": "aicc"}],
    ids=["kfold", "per_feature", "gcv", "aicc"],
)
def test_auto_steps_aside_where_the_linear_search_cannot_be_scored(options):
    # The categorical features stay in the kernel: the search of
    # linear_features=None with the categories that "auto" reads.
    X, y = wage_like(n=60, seed=2)
    params = {"bandwidths": 4, "n_neighbors": None, **options}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the learned widths' convergence
        auto = KernelAttentionRegressorCV(**params).fit(X, y)
        none = KernelAttentionRegressorCV(
            **params, linear_features=None, categorical_features="from_dtype"
        ).fit(X, y)
    assert auto.linear_features_ is None and auto.linear_scores_ is None
    assert_same_search(auto, none, X)


def test_auto_steps_aside_for_more_coefficients_than_a_tenth_of_the_rows():
    # 9 levels: 8 coefficients for 70 rows, more than one per 10 rows.
    rng = np.random.default_rng(3)
    X = pd.DataFrame(
        {"x": rng.uniform(-2, 2, 70), "g": rng.choice(list("abcdefghi"), 70)}
    )
    y = np.sin(2 * X["x"].to_numpy()) + (X["g"] > "d") + 0.2 * rng.normal(size=70)
    auto = KernelAttentionRegressorCV(bandwidths=4, n_neighbors=None).fit(X, y)
    assert auto.linear_features_ is None and auto.linear_scores_ is None
    assert "param_linear_features" not in auto.cv_results_
    # 80 rows take 8 coefficients.
    X = pd.concat([X, X.iloc[:10]], ignore_index=True)
    auto.fit(X, np.r_[y, y[:10]])
    assert auto.linear_scores_ is not None


def test_auto_steps_aside_where_the_linear_part_is_not_identified():
    # Two categorical columns that always agree: their dummies are
    # collinear, which a fit with linear_features refuses.
    X, y = wage_like(n=80, seed=4)
    X["shade"] = X["colour"].map(
        {"blue": "dark", "green": "light", "red": "warm", "white": "pale"}
    )
    auto = KernelAttentionRegressorCV(bandwidths=4, n_neighbors=None).fit(X, y)
    assert auto.linear_features_ is None and auto.linear_scores_ is None
    assert_array_equal(auto.is_categorical_, [False, True, True, True])
    with pytest.raises(ValueError, match="collinear"):
        auto.set_params(linear_features="categorical").fit(X, y)
