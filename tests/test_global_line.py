"""The global weighted least-squares line, a candidate of small tables."""

import numpy as np
import pytest

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV


def _plane(n=24, d=3, seed=0, noise=0.3):
    """A noisy plane on keys in a cube: well inside the safeguard's radius."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    return X, X @ np.linspace(1.0, -2.0, d) + 0.5 + noise * rng.normal(size=n)


def _wls(X, y, w, queries):
    """Weighted least squares with an intercept, by lstsq."""
    design = np.column_stack([np.ones(len(X)), X])
    root = np.sqrt(w)
    coef = np.linalg.lstsq(design * root[:, None], y * root, rcond=None)[0]
    return np.column_stack([np.ones(len(queries)), queries]) @ coef


def _line_index(cv):
    params = cv.cv_results_["params"]
    found = [i for i, p in enumerate(params) if p["kernel"] == "constant"]
    assert len(found) == 1
    return found[0]


def test_a_small_linear_table_selects_the_global_line():
    X, y = _plane()
    cv = KernelAttentionRegressorCV().fit(X, y)
    assert cv.kernel_ == "constant" and cv.degree_ == 1
    queries = np.random.default_rng(1).uniform(-1, 1, (10, 3))
    np.testing.assert_allclose(
        cv.predict(queries), _wls(X, y, np.ones(len(y)), queries), rtol=1e-10
    )


def test_the_line_is_scored_by_exact_leave_one_out():
    X, y = _plane()
    cv = KernelAttentionRegressorCV().fit(X, y)
    line = _line_index(cv)
    # The refitted line without each point (none is beyond the safeguard's
    # radius: the keys fill a cube).
    errors = [
        (
            _wls(np.delete(X, i, 0), np.delete(y, i), np.ones(len(y) - 1), X[i : i + 1])
            - y[i]
        )[0]
        ** 2
        for i in range(len(y))
    ]
    np.testing.assert_allclose(
        -cv.cv_results_["mean_test_score"][line], np.mean(errors), rtol=1e-9
    )
    # And by the hat matrix: e_i = r_i / (1 - h_ii).
    design = np.column_stack([np.ones(len(X)), X])
    hat = design @ np.linalg.pinv(design)
    residuals = y - hat @ y
    np.testing.assert_allclose(
        np.mean((residuals / (1 - np.diag(hat))) ** 2), np.mean(errors), rtol=1e-9
    )


def test_sample_weights_of_the_line():
    X, y = _plane(seed=3)
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(y))
    cv = KernelAttentionRegressorCV().fit(X, y, sample_weight=w)
    line = _line_index(cv)
    fit = KernelAttentionRegressor(**cv.cv_results_["params"][line]).fit(
        X, y, sample_weight=w
    )
    np.testing.assert_allclose(fit.predict(X), _wls(X, y, w, X), rtol=1e-10)
    # Weight 2 is a duplicated row, for the fit.
    w2 = np.ones(len(y))
    w2[:5] = 2.0
    doubled = KernelAttentionRegressor(**cv.cv_results_["params"][line]).fit(
        np.vstack([X, X[:5]]), np.concatenate([y, y[:5]])
    )
    np.testing.assert_allclose(
        fit.set_params().fit(X, y, sample_weight=w2).predict(X),
        doubled.predict(X),
        rtol=1e-10,
    )


def test_the_line_is_invariant_to_translation_rotation_and_order():
    X, y = _plane(seed=5)
    cv = KernelAttentionRegressorCV().fit(X, y)
    line = cv.cv_results_["mean_test_score"][_line_index(cv)]
    rotation, _ = np.linalg.qr(np.random.default_rng(6).normal(size=(3, 3)))
    order = np.random.default_rng(7).permutation(len(y))
    for Z, v in ((X @ rotation + 10.0, y), (X[order], y[order])):
        other = KernelAttentionRegressorCV().fit(Z, v)
        np.testing.assert_allclose(
            other.cv_results_["mean_test_score"][_line_index(other)], line, rtol=1e-8
        )


def test_a_curved_small_table_keeps_a_local_fit():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1.5, 1.5, (25, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.normal(size=25)
    cv = KernelAttentionRegressorCV().fit(X, y)
    # The local quadratic, kept by one standard error (see test_degree_rule).
    assert cv.kernel_ == "gaussian" and cv.degree_ == 2
    # The line was scored and lost.
    scores = cv.cv_results_["mean_test_score"]
    assert scores[_line_index(cv)] < scores[cv.best_index_]


@pytest.mark.parametrize(
    "params",
    [{"degree": 0}, {"degree": 1}, {"cv": 5}, {"scoring": "neg_mean_absolute_error"}],
)
def test_the_line_is_a_candidate_of_degree_auto_leave_one_out_only(params):
    X, y = _plane()
    cv = KernelAttentionRegressorCV(**params).fit(X, y)
    assert "constant" not in set(cv.cv_results_["param_kernel"])


def test_the_line_is_not_a_candidate_of_large_tables():
    X, y = _plane(n=80, d=3)  # 20 rows per parameter of the line
    cv = KernelAttentionRegressorCV().fit(X, y)
    assert "constant" not in set(cv.cv_results_["param_kernel"])
    X, y = _plane(n=79, d=3)
    cv = KernelAttentionRegressorCV().fit(X, y)
    assert "constant" in set(cv.cv_results_["param_kernel"])


@pytest.mark.parametrize("per_feature", [True, "auto"])
def test_per_feature_widths_are_not_learned_for_the_line(per_feature):
    X, y = _plane()
    cv = KernelAttentionRegressorCV(per_feature=per_feature).fit(X, y)
    assert cv.kernel_ == "constant" and cv.per_feature_ is False
    assert np.ndim(cv.bandwidth_) == 0
    reference = KernelAttentionRegressorCV().fit(X, y)
    np.testing.assert_allclose(cv.predict(X), reference.predict(X), rtol=1e-12)


def test_adaptive_candidates_alone_take_their_best_as_the_baseline():
    # bandwidths=None: no fixed width, the best adaptive local-constant
    # candidate is the baseline the line must beat.
    X, y = _plane()
    cv = KernelAttentionRegressorCV(bandwidths=None, n_neighbors=[3, 8]).fit(X, y)
    assert "constant" in set(cv.cv_results_["param_kernel"])
    assert cv.kernel_ == "constant" and cv.degree_ == 1
