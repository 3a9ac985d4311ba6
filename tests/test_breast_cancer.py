"""Kernels compared at their own optima, and the classifier on breast cancer."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import StratifiedKFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import KernelAttentionClassifierCV, KernelAttentionRegressorCV


def _breast_cancer():
    data = load_breast_cancer()
    return StandardScaler().fit_transform(data.data), data.target


def _kernel_best(search, name):
    results = search.cv_results_
    fixed = np.array([p.get("n_neighbors") is None for p in results["params"]])
    mine = fixed & (results["param_kernel"] == name)
    scores = np.where(mine, results["mean_test_score"], -np.inf)
    i = int(np.argmax(scores))
    return results["param_bandwidth"][i], scores[i], results["param_bandwidth"][fixed]


def test_every_kernel_is_scored_at_an_interior_optimum():
    # On 30 standardised features the exponential kernel's leave-one-out
    # optimum lies far below the automatic grid, the Gaussian's inside it:
    # the grid is extended until both are interior.
    X, y = _breast_cancer()
    both = KernelAttentionClassifierCV(kernels=("gaussian", "exponential")).fit(X, y)
    for name in ("gaussian", "exponential"):
        alone = KernelAttentionClassifierCV(kernels=name).fit(X, y)
        bandwidth, score, grid = _kernel_best(both, name)
        assert grid.min() < bandwidth < grid.max()
        # The same optimum as a search of that kernel alone.
        assert bandwidth == pytest.approx(alone.bandwidth_, rel=1e-12)
        assert score == pytest.approx(alone.best_score_, rel=1e-10)
    # And the better of the two is selected.
    scores = [_kernel_best(both, name)[1] for name in ("gaussian", "exponential")]
    assert both.kernel_ == ("gaussian", "exponential")[int(np.argmax(scores))]
    assert both.best_score_ == max(scores)


def test_an_interior_best_kernel_extends_for_the_others_in_regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 8))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=150)
    options = {"degree": 0, "n_neighbors": None, "per_feature": False}
    both = KernelAttentionRegressorCV(
        kernels=("gaussian", "exponential"), **options
    ).fit(X, y)
    for name in ("gaussian", "exponential"):
        alone = KernelAttentionRegressorCV(kernels=name, **options).fit(X, y)
        bandwidth, score, grid = _kernel_best(both, name)
        assert bandwidth == pytest.approx(alone.bandwidth_, rel=1e-12)
        assert score == pytest.approx(alone.best_score_, rel=1e-10)


def test_breast_cancer_selects_the_exponential_kernel():
    # Its leave-one-out log-loss at its own optimum (0.30) is below the
    # Gaussian's (at 0.92), which is interior from the first grid.
    X, y = _breast_cancer()
    search = KernelAttentionClassifierCV().fit(X, y)
    # kernels="auto": the Gaussian and the exponential below 10,000 rows.
    assert search.kernels == "auto"
    assert set(search.cv_results_["param_kernel"]) == {"gaussian", "exponential"}
    assert search.kernel_ == "exponential"
    assert search.n_neighbors_ is None
    assert search.bandwidth_ == pytest.approx(0.2987, rel=1e-3)
    assert -search.best_score_ < -_kernel_best(search, "gaussian")[1]


@pytest.mark.parametrize("seed", [0, 1])
def test_breast_cancer_accuracy_and_log_loss(seed):
    data = load_breast_cancer()
    model = make_pipeline(StandardScaler(), KernelAttentionClassifierCV())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cross_validate(
            model,
            data.data,
            data.target,
            cv=StratifiedKFold(5, shuffle=True, random_state=seed),
            scoring=["accuracy", "neg_log_loss"],
        )
    # 0.9666 and 0.9648 (549 of 569 rows): 0.965 to three decimals.
    assert result["test_accuracy"].mean() >= 0.9645
    assert -result["test_neg_log_loss"].mean() <= 0.11
