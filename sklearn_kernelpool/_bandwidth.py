"""Bandwidth validation and the rules of thumb."""

from numbers import Real

import numpy as np

RULES_OF_THUMB = ("scott", "silverman")


def _weighted_spread(X, sample_weight):
    """Per-feature weighted standard deviation (frequency weights, ddof=0).

    A feature without spread gets 1.0: its keys all coincide, so any width
    gives the same geometry among the keys.
    """
    mean = np.average(X, axis=0, weights=sample_weight)
    var = np.average((X - mean) ** 2, axis=0, weights=sample_weight)
    spread = np.sqrt(var)
    return np.where(spread > 0, spread, 1.0)


def rule_of_thumb(rule, X, sample_weight):
    """Per-feature bandwidths of the ``"scott"`` or ``"silverman"`` rule.

    With ``n`` the sum of the sample weights (frequency weights), ``d`` the
    number of features and ``sigma_j`` the weighted standard deviation of
    feature ``j``:

    - scott: ``h_j = sigma_j * n ** (-1 / (d + 4))``
    - silverman: ``h_j = sigma_j * (4 / ((d + 2) * n)) ** (1 / (d + 4))``
    """
    n = float(np.sum(sample_weight))
    d = X.shape[1]
    if rule == "scott":
        factor = n ** (-1.0 / (d + 4))
    else:
        factor = (4.0 / ((d + 2) * n)) ** (1.0 / (d + 4))
    return _weighted_spread(X, sample_weight) * factor


def resolve_bandwidth(bandwidth, X, sample_weight):
    """Turn the ``bandwidth`` parameter into ``bandwidth_``.

    Returns a Python float for an isotropic bandwidth and an ndarray of shape
    (n_features,) for per-feature ones.
    """
    if isinstance(bandwidth, str):
        return rule_of_thumb(bandwidth, X, sample_weight)
    if isinstance(bandwidth, Real):
        # Positivity and finiteness are checked by the parameter constraints.
        return float(bandwidth)
    h = np.asarray(bandwidth)
    n_features = X.shape[1]
    if h.ndim != 1 or h.shape[0] != n_features:
        raise ValueError(
            f"bandwidth has shape {h.shape}, but X has n_features = {n_features}; "
            "pass a float > 0 or an array-like of shape (n_features,)."
        )
    if not np.issubdtype(h.dtype, np.number) or np.iscomplexobj(h):
        raise ValueError(
            f"bandwidth must hold real numbers; got an array of dtype {h.dtype}."
        )
    h = h.astype(np.float64)
    if not np.all(np.isfinite(h) & (h > 0)):
        raise ValueError(
            f"Every per-feature bandwidth must be a finite float > 0; got {h.tolist()}."
        )
    return h
