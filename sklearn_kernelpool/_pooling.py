"""The former path of :class:`._engine._pooling.KernelPool`, which the pickles
of earlier releases name."""

from ._engine._pooling import KernelPool  # noqa: F401
