"""The former path of :class:`SignificanceResult`, which the pickles of
earlier releases name."""

from ._inference._significance_result import SignificanceResult  # noqa: F401
