"""The former path of :class:`._binned._grid_pool.GridPool`, which the pickles
of earlier releases name."""

from ._binned._grid_pool import GridPool  # noqa: F401
