"""Attention pooling by similarity: Nadaraya-Watson estimators for scikit-learn."""

from . import kernels
from ._classification import KernelAttentionClassifier
from ._cv import KernelAttentionRegressorCV
from ._exceptions import (
    BandwidthEdgeWarning,
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
)
from ._persistence import skops_trusted_types
from ._progress import progress_bar
from ._regression import KernelAttentionRegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "BandwidthEdgeWarning",
    "EmptyNeighborhoodWarning",
    "KernelAttentionClassifier",
    "KernelAttentionRegressor",
    "KernelAttentionRegressorCV",
    "LocalLinearFallbackWarning",
    "__version__",
    "kernels",
    "progress_bar",
    "skops_trusted_types",
]
