"""The references of the local quadratic fit agree with each other and with
the defining properties of a least-squares quadratic."""

import numpy as np
import pytest
from _reference import FORMULAS, safeguarded_fit
from _reference_quadratic import guarded_fit, quadratic_fit, upper_jacobian


def _quadratic(X, rng):
    d = X.shape[1]
    A = rng.normal(size=(d, d))
    return 1.5 + X @ rng.normal(size=d) + np.einsum("nf,fg,ng->n", X, A, X)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_a_quadratic_is_reproduced_with_its_gradient(d):
    rng = np.random.default_rng(d)
    X = rng.uniform(-1, 1, size=(60, d))
    A = rng.normal(size=(d, d))
    b = rng.normal(size=d)
    y = 1.5 + X @ b + np.einsum("nf,fg,ng->n", X, A, X)
    Q = rng.uniform(-0.5, 0.5, size=(5, d))
    for fit in (
        quadratic_fit(X, y, Q, FORMULAS["gaussian"], 0.7),
        guarded_fit(X, y, Q, FORMULAS["gaussian"], 0.7),
    ):
        mean, gradient = (
            (fit[0], fit[2])
            if isinstance(fit, tuple)
            else (
                fit["mean"],
                fit["gradient"],
            )
        )
        expected = 1.5 + Q @ b + np.einsum("nf,fg,ng->n", Q, A, Q)
        np.testing.assert_allclose(mean[:, 0], expected, atol=1e-9)
        np.testing.assert_allclose(gradient[:, :, 0], b + Q @ (A + A.T), atol=1e-8)


def test_the_guarded_fit_is_the_plain_quadratic_where_nothing_is_shrunk():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(80, 2))
    y = _quadratic(X, rng) + rng.normal(scale=0.3, size=80)
    w = rng.uniform(0.5, 2.0, size=80)
    Q = rng.uniform(-0.6, 0.6, size=(6, 2))
    guarded = guarded_fit(X, y, Q, FORMULAS["gaussian"], 1.0, w)
    assert np.all(guarded["quadratic_shrinkage"] == 1.0)
    mean, weights, gradient = quadratic_fit(X, y, Q, FORMULAS["gaussian"], 1.0, w)
    np.testing.assert_allclose(guarded["mean"], mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(guarded["weights"], weights, atol=1e-10)
    np.testing.assert_allclose(guarded["gradient"], gradient, atol=1e-9)
    np.testing.assert_allclose(guarded["weights"] @ y, mean[:, 0], atol=1e-10)


def test_the_constant_kernel_gives_the_global_least_squares_quadratic():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    y = rng.normal(size=40)
    Q = rng.normal(scale=4.0, size=(3, 2))  # far: nothing is shrunk
    fit = guarded_fit(X, y, Q, FORMULAS["constant"], 1.0)

    def design(Z):
        return np.column_stack([np.ones(len(Z)), Z, Z**2, Z[:, 0] * Z[:, 1]])

    coef = np.linalg.lstsq(design(X), y, rcond=None)[0]
    np.testing.assert_allclose(fit["mean"][:, 0], design(Q) @ coef, rtol=1e-9)


def test_without_the_quadratic_part_the_fit_is_the_guarded_local_line():
    # Far queries: s2 is 0 while s1 is positive, so the fit is exactly the
    # safeguarded local-linear one.
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, size=(30, 1))
    y = np.sin(4 * X[:, 0]) + rng.normal(scale=0.1, size=30)
    Q = np.linspace(1.0, 1.6, 25)[:, None]
    guarded = guarded_fit(X, y, Q, FORMULAS["gaussian"], 0.15)
    linear = safeguarded_fit(X, y, Q, FORMULAS["gaussian"], 0.15)
    np.testing.assert_allclose(guarded["shrinkage"], linear["shrinkage"])
    assert np.all(guarded["quadratic_shrinkage"] <= guarded["shrinkage"])
    gone = guarded["quadratic_shrinkage"] == 0.0
    assert gone.any() and (guarded["shrinkage"][gone] > 0).any()
    np.testing.assert_allclose(guarded["mean"][gone], linear["mean"][gone])


def test_the_jacobian_is_the_derivative_of_the_products():
    rng = np.random.default_rng(3)
    x, step = rng.normal(size=3), 1e-6
    first, second = np.triu_indices(3)
    numeric = np.column_stack(
        [
            ((x + e)[first] * (x + e)[second] - (x - e)[first] * (x - e)[second])
            / (2 * step)
            for e in np.eye(3) * step
        ]
    )
    np.testing.assert_allclose(upper_jacobian(x), numeric, atol=1e-8)
