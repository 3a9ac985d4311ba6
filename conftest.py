"""Test configuration shared by the doctests and the test suite."""

import os

# scikit-learn's array-API common checks run only with SciPy's array API
# support switched on, which must happen before SciPy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")
