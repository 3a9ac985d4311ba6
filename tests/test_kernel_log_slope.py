"""Each kernel's derivative lives on the kernel: ``Kernel.log_slope``."""

import numpy as np
import pytest

from sklearn_kernelpool import KernelAttentionRegressor
from sklearn_kernelpool.kernels import KERNELS

# Squared scaled distances inside every support, away from the cusps.
S = np.array([0.01, 0.09, 0.25, 0.49, 0.81])


def _log_alpha_of_s(kernel, s):
    with np.errstate(divide="ignore"):
        return np.log(kernel.function(np.sqrt(s)))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_log_slope_is_the_derivative_of_log_alpha_in_s(name):
    kernel = KERNELS[name]
    h = 1e-6
    numeric = (_log_alpha_of_s(kernel, S + h) - _log_alpha_of_s(kernel, S - h)) / (
        2 * h
    )
    np.testing.assert_allclose(kernel.log_slope(S), numeric, rtol=1e-7, atol=1e-9)
    assert kernel.log_slope(S).shape == S.shape


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_cusp_has_the_subgradient_zero_and_nothing_else_is_unbounded(name):
    kernel = KERNELS[name]
    at_zero = kernel.log_slope(np.zeros(3))
    assert np.all(np.isfinite(at_zero))
    near = np.abs(kernel.log_slope(np.array([1e-16])))[0]
    assert (near > 1e6) == kernel.cusp
    if kernel.cusp:
        assert np.all(at_zero == 0.0)


def test_a_user_kernel_has_no_log_slope():
    def gaussian(x):  # a user callable named like a registered kernel
        return np.exp(-0.5 * x**2)

    X = np.linspace(0, 1, 20)[:, None]
    model = KernelAttentionRegressor(kernel=gaussian, bandwidth=0.3).fit(X, X[:, 0])
    kernel = model._pool.kernel
    assert kernel.log_slope is None and kernel.cusp is False
    with pytest.raises(ValueError, match="registered kernels only"):
        model.predict_gradient(X[:3])
