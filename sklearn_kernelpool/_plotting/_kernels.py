"""The shapes of the kernels."""

import numpy as np

from .. import kernels as _kernels
from ._common import _new_axes, check_matplotlib


def _resolve_kernel(kernel):
    """``(label, function)`` of a kernel name, :class:`Kernel` or callable."""
    if isinstance(kernel, str):
        if kernel not in _kernels.KERNELS:
            raise ValueError(
                f"Unknown kernel {kernel!r} in kernels; accepted names: "
                f"{sorted(_kernels.KERNELS)}, or callables."
            )
        return kernel, _kernels.KERNELS[kernel].function
    if isinstance(kernel, _kernels.Kernel):
        return kernel.name, kernel.function
    if callable(kernel):
        return getattr(kernel, "__name__", repr(kernel)), kernel
    raise ValueError(
        f"kernels must hold kernel names, Kernel objects or callables; got {kernel!r}."
    )


def plot_kernels(kernels=None, *, ax=None):
    """Draw kernel shapes ``alpha(x)`` on the scaled distances [-2.5, 2.5].

    Parameters
    ----------
    kernels : list of {str, Kernel, callable}, default=None
        The kernels: names of :data:`~sklearn_kernelpool.kernels.KERNELS`
        (aliases included), :class:`~sklearn_kernelpool.kernels.Kernel`
        objects or vectorised functions of the scaled distance. None for
        every built-in kernel once, under its canonical name.
    ax : matplotlib.axes.Axes, default=None
        The axes to draw on; None for new axes of a new figure.

    Returns
    -------
    ax : matplotlib.axes.Axes
        The axes, one line per kernel (labelled with its name, or the
        function's ``__name__``) and a legend.

    See Also
    --------
    sklearn_kernelpool.kernels : The built-in kernels.

    Examples
    --------
    >>> from sklearn_kernelpool import plot_kernels
    >>> ax = plot_kernels(["gaussian", "epanechikov"])
    >>> [text.get_text() for text in ax.get_legend().get_texts()]
    ['gaussian', 'epanechikov']
    """
    check_matplotlib("plot_kernels")
    if kernels is None:
        kernels = list(dict.fromkeys(k.name for k in _kernels.KERNELS.values()))
    elif isinstance(kernels, str | _kernels.Kernel) or callable(kernels):
        kernels = [kernels]
    resolved = [_resolve_kernel(kernel) for kernel in kernels]
    if not resolved:
        raise ValueError("kernels must hold at least one kernel; got an empty list.")
    if ax is None:
        ax = _new_axes()
    x = np.linspace(-2.5, 2.5, 1001)
    for i, (label, function) in enumerate(resolved):
        values = np.asarray(function(x), dtype=float) * np.ones_like(x)
        # The colour cycle has ten colours: dash the lines that repeat one.
        ax.plot(x, values, label=label, linestyle="-" if i < 10 else "--")
    ax.set_xlabel("scaled distance x = |q - k| / h")
    ax.set_ylabel("alpha(x)")
    # The legend goes above the curves, in rows of up to four names.
    columns = min(len(resolved), 4)
    rows = -(-len(resolved) // columns)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.1 * rows * (high - low))
    ax.legend(loc="upper center", ncols=columns, fontsize="small")
    return ax
