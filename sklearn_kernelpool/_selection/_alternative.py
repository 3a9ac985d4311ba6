"""The search that ``linear_features="auto"`` did not keep, for the
large-table selection (:mod:`._large`), which falls back on it where the
linear columns the subsample kept cannot be identified at full ``n``
(:func:`._linear_auto.fit_auto` fills it)."""

import contextlib
import contextvars

# Where set (by :func:`keeping_the_alternative`), a dict that the next fit
# of "auto" that keeps the linear columns gives the other search.
ALTERNATIVE = contextvars.ContextVar("linear_alternative", default=None)


@contextlib.contextmanager
def keeping_the_alternative():
    """Within this context, a fit of ``"auto"`` that compares both searches
    and keeps the linear columns leaves under ``"refit"``, in the dict this
    yields, a function of no argument that refits the search of the
    categorical features in the kernel and returns it, as a fitted search of
    its own with the merged results (only a fallback pays for the refit)."""
    holder = {}
    token = ALTERNATIVE.set(holder)
    try:
        yield holder
    finally:
        ALTERNATIVE.reset(token)
