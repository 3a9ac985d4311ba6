"""Bandwidth validation and the rules of thumb."""

from numbers import Real

import numpy as np

from ._validation import power_of_two_below

RULES_OF_THUMB = ("scott", "silverman")


def _weighted_spread(X, sample_weight):
    """Per-feature weighted standard deviation (frequency weights, ddof=0).

    A feature without spread gets 1.0: its keys all coincide, so any width
    gives the same geometry among the keys. Computed in float64 on features
    divided by a power of two near their magnitude, so that no square
    overflows whatever the scale of X.
    """
    X = np.asarray(X, dtype=np.float64)
    scale = power_of_two_below(np.max(np.abs(X), axis=0))
    X = X / scale
    mean = np.average(X, axis=0, weights=sample_weight)
    var = np.average((X - mean) ** 2, axis=0, weights=sample_weight)
    spread = np.sqrt(var) * scale
    return np.where(spread > 0, spread, 1.0)


def rule_of_thumb(rule, X, sample_weight):
    """Per-feature bandwidths of the ``"scott"`` or ``"silverman"`` rule.

    With ``n`` the sum of the sample weights (frequency weights), ``d`` the
    number of features and ``sigma_j`` the weighted standard deviation of
    feature ``j``:

    - scott: ``h_j = sigma_j * n ** (-1 / (d + 4))``
    - silverman: ``h_j = sigma_j * (4 / ((d + 2) * n)) ** (1 / (d + 4))``
    """
    sample_weight = np.asarray(sample_weight, dtype=np.float64)
    unit = power_of_two_below(sample_weight.max())
    relative = sample_weight / unit  # exact: a power of two
    d = X.shape[1]
    # In logarithms: the sum of the weights may overflow or be subnormal.
    log_n = np.log(np.sum(relative)) + np.log(unit)
    if rule == "silverman":
        log_n -= np.log(4.0 / (d + 2))
    with np.errstate(over="ignore"):
        # (a width past the largest float is refused below)
        factor = float(np.exp(-log_n / (d + 4)))
        h = _weighted_spread(X, relative) * factor
    if not np.all(np.isfinite(h) & (h > 0)):
        raise ValueError(
            f"The {rule!r} rule gives bandwidths {h.tolist()} for this X and "
            "these sample weights; pass a bandwidth > 0 instead, or rescale X."
        )
    return h


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
    if h.ndim == 0 and np.issubdtype(h.dtype, np.number) and not np.iscomplexobj(h):
        # A 0-d array, such as np.array(0.5) or np.float64 read from a file,
        # is one isotropic width, checked as the constraints check a float.
        if not (np.isfinite(h) and h > 0):
            raise ValueError(
                f"bandwidth must be a finite float > 0; got {bandwidth!r}."
            )
        return float(h)
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
