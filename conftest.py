"""Test configuration shared by the doctests and the test suite."""

import os

# scikit-learn's array-API common checks run only with SciPy's array API
# support switched on, which must happen before SciPy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")


def pytest_configure(config):
    """Under pytest-xdist (``-n auto``: a worker per core), a BLAS of one
    thread in each worker: the workers share the cores, and a BLAS that
    starts a thread per core in each of them makes the many small LAPACK
    calls of the checks wait on each other's spinning threads (a check of
    the CV estimator took ten times as long beside a busy worker). Set here,
    in the process that starts the workers, before they import NumPy; a
    value the caller set is kept, and the tests of BLAS threads raise the
    count where it is one (``tests/test_concurrency.py``)."""
    workers = getattr(config.option, "numprocesses", None)
    if workers and "PYTEST_XDIST_WORKER" not in os.environ:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
