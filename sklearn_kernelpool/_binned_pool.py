"""The former path of :class:`._binned._pool.BinnedKernelPool`, which the pickles
of earlier releases name."""

from ._binned._pool import BinnedKernelPool  # noqa: F401
