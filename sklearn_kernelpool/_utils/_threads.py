"""Threads: BLAS held to one thread while the engine runs, and the default count.

The engine multiplies small blocks of rows (at most 512), on which BLAS
threads cost more in synchronisation than they save, and more still when
the cores are shared. So the engine holds BLAS to one thread and runs its
own threads over chunks instead: ``n_jobs=None`` runs as many threads as
BLAS had.

threadpoolctl's limits are process-wide, so a limit entered and left by
several threads at once restores whatever was current when each entered,
which leaves the pool at one thread for good. :func:`single_threaded_blas`
counts its users instead: the first to enter records the limits and sets
one thread, the last to leave restores them, and nested entries just count.

Some OpenBLAS builds ignore a change of their thread count made by a thread
while the thread that last changed it is alive. The limits are therefore
set and restored by a thread that ends right after, which never keeps
others from changing them.
"""

import contextlib
import functools
import threading

from joblib import cpu_count, effective_n_jobs
from threadpoolctl import ThreadpoolController

_LOCK = threading.Lock()


class _Hold:
    """The shared state of :func:`single_threaded_blas`, guarded by ``_LOCK``."""

    users = 0
    limiter = None  # threadpoolctl's limiter, which restores the limits
    blas_threads = 1  # the BLAS threads there were before the first user


@functools.cache
def _controller():
    """One controller for the process: finding the BLAS libraries is slow."""
    return ThreadpoolController().select(user_api="blas")


def _blas_threads():
    """The threads BLAS uses now: the most of its libraries, or the CPUs."""
    counts = [lib.num_threads for lib in _controller().lib_controllers]
    return max(counts, default=cpu_count())


def _in_own_thread(function):
    """``function()``, called in a thread that ends with it."""
    outcome = {}

    def call():
        try:
            outcome["result"] = function()
        except BaseException as exc:  # raised again in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


@contextlib.contextmanager
def single_threaded_blas():
    """Hold BLAS to one thread, in every thread, while any caller is inside.

    Safe to enter from several threads at once and to nest: the limits in
    force before the first caller entered are restored when the last one
    leaves.
    """
    with _LOCK:
        if _Hold.users == 0:
            _Hold.blas_threads = _blas_threads()
            _Hold.limiter = _in_own_thread(lambda: _controller().limit(limits=1))
        _Hold.users += 1
    try:
        yield
    finally:
        with _LOCK:
            _Hold.users -= 1
            if _Hold.users == 0:
                limiter, _Hold.limiter = _Hold.limiter, None
                _in_own_thread(limiter.restore_original_limits)


def engine_threads(n_jobs):
    """The number of threads the engine runs for ``n_jobs``.

    ``None`` gives as many threads as BLAS would use outside the engine (all
    the cores, unless limited by threadpoolctl or by environment variables
    such as ``OMP_NUM_THREADS``), or the ``n_jobs`` of an enclosing
    :func:`joblib.parallel_config` if that is more; an integer counts as in
    joblib, ``-1`` meaning all the CPUs.
    """
    if n_jobs is not None:
        return effective_n_jobs(n_jobs)
    with _LOCK:
        blas = _Hold.blas_threads if _Hold.users else _blas_threads()
    return max(blas, effective_n_jobs(None))
