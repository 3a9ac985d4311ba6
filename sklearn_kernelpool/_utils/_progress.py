"""An optional progress bar over the chunks of long predictions."""

import contextlib
import contextvars

# The tqdm keyword arguments of the active progress_bar(), or None.
_BAR_OPTIONS = contextvars.ContextVar("sklearn_kernelpool_progress", default=None)


@contextlib.contextmanager
def progress_bar(**options):
    """Show a progress bar while the estimators predict.

    Inside the ``with`` block, every call that pools queries
    (``predict``, ``predict_proba``, ``predict_log_proba``,
    ``attention_weights`` and ``score`` of the estimators) shows a
    :mod:`tqdm` bar of the queries done, advancing chunk by chunk. The
    setting holds in the thread (and context) that entered the block.

    Parameters
    ----------
    **options
        Keyword arguments of :class:`tqdm.tqdm`, such as ``file``,
        ``mininterval`` or ``disable``; ``total`` and ``unit`` are set by
        the package.

    Yields
    ------
    None

    Raises
    ------
    ImportError
        If tqdm is not installed (``pip install tqdm``, or the ``progress``
        extra of the package).

    See Also
    --------
    KernelAttentionRegressorCV : Its ``verbose`` parameter reports the
        progress of the search.

    Notes
    -----
    The bar advances once per chunk of queries; the chunk size follows
    scikit-learn's ``working_memory`` (:func:`sklearn.config_context`).

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionRegressor, progress_bar
    >>> X = np.linspace(0, 1, 50).reshape(-1, 1)
    >>> reg = KernelAttentionRegressor(bandwidth=0.2).fit(X, X.ravel())
    >>> log = io.StringIO()
    >>> with progress_bar(file=log):
    ...     y_pred = reg.predict(np.linspace(0, 1, 1000).reshape(-1, 1))
    >>> "1000/1000" in log.getvalue()
    True
    """
    try:
        import tqdm  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "progress_bar needs tqdm, which is not installed: pip install tqdm, "
            'or the extra: python -m pip install ".[progress]" from a clone of '
            "sklearn-kernelpool."
        ) from exc
    token = _BAR_OPTIONS.set(options)
    try:
        yield
    finally:
        _BAR_OPTIONS.reset(token)


class _NoBar:
    total = None
    n = 0

    def update(self, n):
        pass

    def close(self):
        pass


def new_bar(n_queries):
    """A tqdm bar over ``n_queries`` inside :func:`progress_bar`, else a no-op."""
    options = _BAR_OPTIONS.get()
    if options is None:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(**{**options, "total": n_queries, "unit": "queries"})


def new_stage_bar(n_stages):
    """A tqdm bar over the ``n_stages`` stages of a large-table fit inside
    :func:`progress_bar`, else a no-op."""
    options = _BAR_OPTIONS.get()
    if options is None:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(**{**options, "total": n_stages, "unit": "stages"})
