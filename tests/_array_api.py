"""The array API namespace of the tests, or a skip where it cannot run."""

import pytest
from sklearn import config_context


def strict_namespace():
    """``array_api_strict``, or skip the test where array API dispatch is
    unavailable (the packages are missing, or scikit-learn < 1.8 with
    SciPy < 1.14)."""
    xp = pytest.importorskip("array_api_strict")
    pytest.importorskip("array_api_compat")
    try:
        with config_context(array_api_dispatch=True):
            pass
    except ImportError as exc:
        pytest.skip(f"no array API dispatch here: {exc}")
    return xp
