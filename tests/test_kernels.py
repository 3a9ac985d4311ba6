"""The kernel registry: formulas, shapes, dtypes and the properties of kernels."""

import math

import numpy as np
import pytest
from _reference import FORMULAS
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import kernels
from sklearn_kernelpool.kernels import KERNELS

SUPPORT = {
    "gaussian": math.inf,
    "constant": math.inf,
    "exponential": math.inf,
    "cauchy": math.inf,
}
ALIASES = {
    "tophat": "boxcar",
    "uniform": "boxcar",
    "triangular": "epanechikov",
    "quartic": "biweight",
    "laplacian": "exponential",
}
CANONICAL = sorted(FORMULAS)
GRID = np.concatenate([np.linspace(-3, 3, 601), [-1.0, 1.0, 1 - 1e-12, 1 + 1e-12]])


def test_registry_holds_exactly_the_documented_kernels():
    assert sorted({k.name for k in KERNELS.values()}) == CANONICAL
    assert set(KERNELS) == set(CANONICAL) | set(ALIASES)
    for alias, name in ALIASES.items():
        assert KERNELS[alias] is KERNELS[name]
        assert getattr(kernels, alias) is getattr(kernels, name)


@pytest.mark.parametrize("name", CANONICAL)
def test_kernel_matches_its_formula(name):
    expected = np.array([FORMULAS[name](x) for x in GRID])
    assert_allclose(getattr(kernels, name)(GRID), expected, rtol=1e-15, atol=1e-16)
    assert_allclose(KERNELS[name](GRID), expected, rtol=1e-15, atol=1e-16)


@pytest.mark.parametrize("name", CANONICAL)
def test_support_radius(name):
    kernel = KERNELS[name]
    assert kernel.support == SUPPORT.get(name, 1.0)
    assert kernel.is_compact == (name not in SUPPORT)
    if kernel.is_compact:
        outside = np.array([1.0, 1.0 + 1e-12, 1.5, 10.0, 1e300])
        assert_array_equal(kernel(outside), 0.0)
        assert_array_equal(kernel(-outside), 0.0)
        assert np.all(kernel(np.array([0.0, 0.5, 1 - 1e-9])) > 0)
    else:
        assert np.all(kernel(np.array([0.0, 1.0, 5.0, 30.0])) > 0)


@pytest.mark.parametrize("name", CANONICAL)
def test_kernel_properties(name):
    f = KERNELS[name]
    values = f(GRID)
    assert f(0.0) == 1.0
    assert np.all(values >= 0)
    assert np.all(values <= 1)
    assert_array_equal(f(-GRID), values)
    positive = np.sort(np.abs(GRID))
    assert np.all(np.diff(f(positive)) <= 0), "not non-increasing in |x|"


@pytest.mark.parametrize("name", CANONICAL)
def test_log_form_is_the_log_of_the_function(name):
    kernel = KERNELS[name]
    if kernel.log_function is None:
        assert name not in ("gaussian", "exponential", "cauchy")
        return
    assert_allclose(
        kernel.log_function(GRID), np.log(kernel(GRID)), rtol=1e-14, atol=1e-15
    )


@pytest.mark.parametrize("name", CANONICAL)
def test_scalars_give_floats_and_arrays_keep_their_shape(name):
    f = getattr(kernels, name)
    for scalar in (0.5, 2, np.float64(0.5), np.array(0.5)):
        out = f(scalar)
        assert type(out) is float
        # numpy's vectorised libm may differ from math's by an ulp.
        assert out == pytest.approx(FORMULAS[name](float(scalar)), rel=1e-15, abs=0)
    for shape in [(0,), (3,), (2, 3), (2, 1, 4)]:
        x = np.linspace(0, 2, math.prod(shape)).reshape(shape)
        assert f(x).shape == shape
    assert f([0.0, 0.5]).shape == (2,)
    assert f([[0, 1], [2, 3]]).dtype == np.float64


@pytest.mark.parametrize("name", CANONICAL)
def test_float32_stays_float32(name):
    x = np.linspace(0, 2, 11, dtype=np.float32)
    out = getattr(kernels, name)(x)
    assert out.dtype == np.float32
    assert_allclose(out, getattr(kernels, name)(x.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("name", CANONICAL)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_squared_forms_agree_with_the_function(name, dtype):
    kernel = KERNELS[name]
    x = np.abs(GRID).astype(dtype)
    tol = {"rtol": 1e-14, "atol": 1e-15} if dtype == np.float64 else {"rtol": 1e-5}
    if kernel.squared_function is not None:
        s = x * x
        out = kernel.squared_function(s)
        assert out.dtype == dtype
        assert_allclose(out, kernel(x), **tol)
    if kernel.squared_log_function is not None:
        out = kernel.squared_log_function(x * x)
        assert out.dtype == dtype
        assert_allclose(out, kernel.log_function(x), **tol)
    if kernel.log_quadratic is not None:
        assert_allclose(kernel.log_quadratic * x * x, kernel.log_function(x), **tol)
    # Every shipped kernel has a squared form for the engine.
    assert (kernel.squared_function is None) != (kernel.squared_log_function is None)
