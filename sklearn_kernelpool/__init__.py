"""Attention pooling by similarity: Nadaraya-Watson estimators for scikit-learn."""

from . import kernels
from ._classification import KernelAttentionClassifier
from ._classification_cv import KernelAttentionClassifierCV
from ._cv import KernelAttentionRegressorCV
from ._inference._significance import significance_test
from ._inference._significance_result import SignificanceResult
from ._plotting._attention_weights import AttentionWeightsDisplay
from ._plotting._fit import FitDisplay
from ._plotting._kernels import plot_kernels
from ._projection import KernelAttentionProjection
from ._quantile import KernelAttentionQuantileRegressor
from ._regression import KernelAttentionRegressor
from ._skops import skops_trusted_types
from ._utils._progress import progress_bar
from ._utils._warnings import (
    BandwidthEdgeWarning,
    CoarseGridWarning,
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
    LocalLinearMemoryWarning,
    WeakIdentificationWarning,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "AttentionWeightsDisplay",
    "BandwidthEdgeWarning",
    "CoarseGridWarning",
    "EmptyNeighborhoodWarning",
    "FitDisplay",
    "KernelAttentionClassifier",
    "KernelAttentionClassifierCV",
    "KernelAttentionProjection",
    "KernelAttentionQuantileRegressor",
    "KernelAttentionRegressor",
    "KernelAttentionRegressorCV",
    "LocalLinearFallbackWarning",
    "LocalLinearMemoryWarning",
    "SignificanceResult",
    "WeakIdentificationWarning",
    "__version__",
    "kernels",
    "plot_kernels",
    "progress_bar",
    "significance_test",
    "skops_trusted_types",
]
