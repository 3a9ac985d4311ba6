"""The partially linear model: some columns enter as a global linear term.

``KernelAttentionRegressor(linear_features=...)`` fits

    y = intercept + Z beta + m(X) + noise

with ``Z`` the linear columns (categorical ones one-hot encoded with their
first category dropped, numeric ones as they are) and ``m`` the kernel
smoother of the other columns ``X`` (Robinson, "Root-N-consistent
semiparametric regression", Econometrica 56, 1988; R np's ``npplreg``).

``beta`` is Robinson's double-residual estimate with the estimator's own
smoother: the values ``y`` and every column of ``Z`` are residualised on
``X`` by their leave-one-out fits (each row predicted from the others, so
that its own weight does not pull its fit towards it), ``e_y = y - L_{-}y``
and ``E = Z - L_{-}Z``, and ``beta`` is the least-squares fit of ``e_y`` on
``E`` weighted with the sample weights. The leave-one-out fits are those of
the cross-validated search (:class:`.._held_out._pool.HeldOut`): a row's fit without it
is exactly what the search scores, the local-linear safeguard and the
fallbacks included. The intercept is ``mean_w(y) - mean_w(Z) beta``, and the
kernel part pools the partial residuals ``y - Z beta - intercept``.

:mod:`._linear_columns` holds the encoding of the linear columns;
:func:`leave_one_out_fits` the smoother's leave-one-out fits;
:func:`double_residual` the estimate and its sandwich standard errors;
:mod:`._identification` refuses a linear column that the smoother reproduces
and warns of one it nearly reproduces;
:func:`fit_partially_linear` the fit of the regressor.
"""

from typing import NamedTuple

import numpy as np
from sklearn.utils import _safe_indexing

from .._engine._pooling import resolve_kernel
from .._held_out._adaptive import AdaptiveHeldOut
from .._held_out._categorical import CategoricalHeldOut
from .._held_out._neighbours import NeighbourHeldOut
from .._held_out._neighbours_adaptive import NeighbourAdaptiveHeldOut
from .._held_out._pool import HeldOut
from .._search._engines import takes_neighbour_lists
from .._search._passes import HeldOutPasses
from .._utils._categorical_input import category_levels
from ._base import fit_pool
from ._identification import check_identified, identified_fractions
from ._linear_columns import LinearColumns, LinearDesign, check_collinear
from ._robust import refuse_robust

LINEAR_ATTRIBUTES = (
    "coef_",
    "coef_se_",
    "intercept_",
    "is_linear_",
    "linear_feature_names_",
    "kernel_regressor_",
    "_linear_design",
)


# -- the leave-one-out fits of the smoother -------------------------------------
class _ScaledAdaptive(AdaptiveHeldOut):
    """Adaptive widths ``multiplier * d_k(q)`` (the search scores 1.0)."""

    def __init__(self, held_out, n_neighbors, multiplier):
        super().__init__(held_out, n_neighbors)
        self.multiplier = multiplier

    def _radii(self, d2, allowed):
        return super()._radii(d2, allowed) * self.multiplier**2


def _held_out_coordinates(regressor, keys):
    """The continuous coordinates of the keys as the search scores them, the
    category codes (None without categorical features), the isotropic
    bandwidth and the multiplier of adaptive widths of ``regressor``.

    Per-feature widths divide the coordinates (their ratios only, under
    ``n_neighbors``, whose multiplier is then their geometric mean).
    """
    n = keys.shape[0]
    mask = regressor.is_categorical_
    n_categorical = 0 if mask is None else int(np.count_nonzero(mask))
    X, codes = keys[:, : keys.shape[1] - n_categorical], None
    if n_categorical:
        codes = keys[:, keys.shape[1] - n_categorical :].astype(np.intp)
    if X.shape[1] == 0:
        X = np.zeros((n, 1))  # the engine's constant stand-in
    bandwidth = regressor.bandwidth_
    multiplier = 1.0
    if np.ndim(bandwidth) == 1:
        widths = np.asarray(bandwidth, dtype=np.float64)
        if regressor.n_neighbors is None:
            X, bandwidth = X / widths, 1.0
        else:
            # The metric's shape by the ratios, the multiplier by their mean.
            multiplier = float(np.exp(np.mean(np.log(widths))))
            X = X / (widths / multiplier)
    elif regressor.n_neighbors is not None:
        multiplier = float(bandwidth)
    return X, codes, bandwidth, multiplier


def leave_one_out_fits(regressor, values):
    """The leave-one-out fits of the columns of ``values`` by the smoother of
    the fitted :class:`KernelAttentionRegressor` ``regressor``.

    Row ``i``'s fit is that of the regressor fitted without row ``i`` (its
    whole sample weight removed), at its key: the exact leave-one-out of
    :class:`KernelAttentionRegressorCV`, its ``on_empty`` fallbacks
    included (NaN under ``"nan"`` and ``"raise"``).

    Returns
    -------
    fits : ndarray of shape (n_samples, n_columns)
    empty : ndarray of bool of shape (n_samples,)
        The rows whose neighbourhood was empty.
    shrunk : ndarray of bool of shape (n_samples,)
        The rows whose local-linear slope the safeguard shrank (all False
        for degree 0).
    """
    keys = np.asarray(regressor.keys_, dtype=np.float64)
    n = keys.shape[0]
    weights = regressor.sample_weight_
    weights = np.ones(n) if weights is None else np.asarray(weights, np.float64)
    X, codes, bandwidth, multiplier = _held_out_coordinates(regressor, keys)
    kernel = resolve_kernel(regressor.kernel)
    Y = np.asarray(values, dtype=np.float64).reshape(n, -1)
    # (adaptive candidates take no fixed width, as in the search)
    grid = np.array([bandwidth]) if regressor.n_neighbors is None else np.empty(0)
    arguments = (Y, weights, [kernel], grid, regressor.n_jobs)
    lists = False
    if codes is not None:
        held_out = CategoricalHeldOut(
            X,
            codes,
            regressor.categorical_bandwidth_,
            *arguments,
            degree=regressor.degree,
            levels=category_levels(regressor),
        )
    else:
        # Compact kernels on large tables: the neighbour lists of the search.
        lists = kernel.is_compact and takes_neighbour_lists(np.count_nonzero(weights))
        lists = lists and (regressor.n_neighbors is None or multiplier == 1.0)
        engine = (
            NeighbourHeldOut if lists and regressor.n_neighbors is None else HeldOut
        )
        held_out = engine(X, *arguments, degree=regressor.degree)
    # The leave-one-out pass of the search, for one candidate: predictions
    # only, no scores.
    passes = HeldOutPasses(None, regressor.on_empty)
    adaptive = None
    if regressor.n_neighbors is not None:
        if codes is not None:
            raise ValueError(
                "linear_features with n_neighbors needs no categorical feature in "
                "the kernel part (the leave-one-out fits of adaptive widths take "
                "continuous features only); make the categorical features linear "
                "too, or use a fixed bandwidth."
            )
        if lists:
            held_out = adaptive = NeighbourAdaptiveHeldOut(
                held_out, [regressor.n_neighbors]
            )
        else:
            adaptive = _ScaledAdaptive(held_out, [regressor.n_neighbors], multiplier)
    rows = np.arange(n)
    predictions, empty, flags = passes.held_out(
        held_out, rows, [regressor.degree], adaptive=adaptive
    )

    def others(batch):
        allowed = np.ones((len(batch), n), dtype=bool)
        allowed[np.arange(len(batch)), batch] = False
        return allowed

    passes.fallback(held_out, predictions, empty, rows, others)
    return predictions[0], empty[0], flags[0][:, 2]


# -- the estimate --------------------------------------------------------------
def double_residual(Y, Z, fits, weights):
    """Robinson's estimate from the leave-one-out fits of ``[Y, Z]``.

    Parameters
    ----------
    Y : ndarray of shape (n, n_outputs)
    Z : ndarray of shape (n, n_linear)
    fits : ndarray of shape (n, n_outputs + n_linear)
        The leave-one-out fits of the columns of ``[Y, Z]``; rows not finite
        (no neighbour) are left out.
    weights : ndarray of shape (n,)

    Returns
    -------
    coef : ndarray of shape (n_linear, n_outputs)
        The weighted least-squares fit of ``e_y = Y - fits_Y`` on
        ``E = Z - fits_Z``, minimum-norm where ``E`` is rank-deficient.
    intercept : ndarray of shape (n_outputs,)
        ``mean_w(Y) - mean_w(Z) coef``.
    se : ndarray of shape (n_linear, n_outputs)
        The heteroscedasticity-consistent (HC0, White 1980) sandwich
        standard errors on the residualised design,
        ``sqrt(diag(A^+ B A^+))`` with ``A = E^T W E`` and ``B = E^T W
        diag(u**2) E``, ``u = e_y - E coef``, ``W = diag(w)``.
    """
    k = Y.shape[1]
    rows = (weights > 0) & np.all(np.isfinite(fits), axis=1)
    if not rows.any():
        raise ValueError(
            "No row of positive weight has a leave-one-out fit: every one is "
            "alone in its neighbourhood. Use a wider bandwidth or another "
            "on_empty policy."
        )
    w = weights[rows]
    e_y = Y[rows] - fits[rows, :k]
    E = Z[rows] - fits[rows, k:]
    root = np.sqrt(w)[:, None]
    if E.shape[1]:
        coef = np.linalg.lstsq(E * root, e_y * root, rcond=None)[0]
    else:
        coef = np.zeros((0, k))
    intercept = weights @ (Y - Z @ coef) / weights.sum()
    u = e_y - E @ coef
    bread = np.linalg.pinv((E * w[:, None]).T @ E, hermitian=True)
    se = np.empty_like(coef)
    for o in range(k):
        meat = (E * (w * u[:, o] ** 2)[:, None]).T @ E
        se[:, o] = np.sqrt(np.maximum(np.diag(bread @ meat @ bread), 0.0))
    return coef, intercept, se


# -- the fit of the regressor --------------------------------------------------
def _kernel_parameters(estimator, columns):
    """The parameters of the kernel part: the estimator's, with the
    categorical (and ordered) features and lambdas of the kernel columns of
    the :class:`._linear_columns.LinearColumns` ``columns``. Ordered linear
    columns are one-hot encoded as the others."""
    params = estimator.get_params()
    del params["linear_features"]
    categorical, mask = columns.categorical, columns.linear
    kernel_categorical = None if categorical is None else categorical[~mask]
    if kernel_categorical is not None and not kernel_categorical.any():
        kernel_categorical = None
    params["categorical_features"] = kernel_categorical
    params["ordered_features"] = kernel_ordered(columns)
    lam = params["categorical_bandwidth"]
    if categorical is not None and np.ndim(lam) == 1:
        lam = np.asarray(lam)
        if lam.shape == (int(categorical.sum()),):
            params["categorical_bandwidth"] = lam[~mask[categorical]]
    return params


def kernel_ordered(columns):
    """The ``ordered_features`` of the kernel part: the mask of the ordered
    categorical features among the kernel columns, or None."""
    ordered, mask = columns.ordered, columns.linear
    if ordered is None or not ordered[~mask].any():
        return None
    return ordered[~mask]


class LinearSplit(NamedTuple):
    """The training data of a partially linear fit, split.

    ``X`` and ``y`` validated; ``columns`` the
    :class:`._linear_columns.LinearColumns` of ``X``, ``design`` the fitted
    :class:`._linear_columns.LinearDesign`, ``Z`` the encoded linear
    columns and ``sample_weight`` the validated weights (or None).
    """

    X: object
    y: object
    columns: LinearColumns
    design: LinearDesign
    Z: np.ndarray
    sample_weight: object

    @property
    def kernel_columns(self):
        """The columns of ``X`` that the kernel part pools."""
        return _safe_indexing(self.X, np.flatnonzero(~self.columns.linear), axis=1)


def split_linear_columns(estimator, data):
    """The training data of a partially linear fit, validated by the one way
    in (``data``, an :class:`._input_kinds.Input` of kind ``"linear"``), its
    linear columns encoded and collinear ones refused; a
    :class:`LinearSplit`."""
    X, columns = data.X, data.columns
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        names = np.asarray([f"x{j}" for j in range(X.shape[1])], dtype=object)
    design = LinearDesign(columns.linear, columns.categorical, names)
    Z = design.fit_transform(X)
    weights = np.ones(len(Z)) if data.sample_weight is None else data.sample_weight
    check_collinear(Z, weights, design.feature_names)
    return LinearSplit(X, data.y, columns, design, Z, data.sample_weight)


def fit_partially_linear(estimator, data):
    """``estimator.fit`` with ``linear_features``, on ``data`` validated by
    the one way in (an :class:`._input_kinds.Input` of kind ``"linear"``)."""
    refuse_robust(estimator, "with linear_features")
    split = split_linear_columns(estimator, data)
    y, Z = split.y, split.Z
    weights = np.ones(len(Z)) if split.sample_weight is None else split.sample_weight
    Y = np.asarray(y, dtype=np.float64).reshape(len(Z), -1)
    # The kernel part: an estimator of the same class, without linear part,
    # fitted on y to resolve its widths and encode its keys (its own way in),
    # then on the partial residuals from those keys.
    kernel = type(estimator)(**_kernel_parameters(estimator, split.columns))
    kernel.fit(split.kernel_columns, y, sample_weight=split.sample_weight)
    fits, empty, shrunk = leave_one_out_fits(kernel, np.hstack([Y, Z]))
    if estimator.on_empty == "raise" and np.any(empty & (weights > 0)):
        raise ValueError(
            f"{int(np.count_nonzero(empty & (weights > 0)))} row(s) have no other "
            "key of positive weight in their neighbourhood, so no leave-one-out "
            "fit for the estimate of coef_, which on_empty='raise' refuses; use "
            "a wider bandwidth or another on_empty policy."
        )
    coef, intercept, se = double_residual(Y, Z, fits, weights)
    fractions = identified_fractions(Z, fits[:, Y.shape[1] :], weights, ~shrunk)
    check_identified(fractions, split.design.feature_names)
    residuals = (Y - Z @ coef - intercept).reshape(np.shape(y))
    refit_values(kernel, residuals)
    one_output = np.ndim(y) == 1
    estimator.coef_ = coef[:, 0] if one_output else coef.T
    estimator.coef_se_ = se[:, 0] if one_output else se.T
    estimator.intercept_ = float(intercept[0]) if one_output else intercept
    estimator.is_linear_ = split.columns.linear
    estimator.linear_feature_names_ = split.design.feature_names
    estimator.kernel_regressor_ = kernel
    estimator._linear_design = split.design
    _share_kernel_attributes(estimator, kernel, split.columns.categorical, split.design)
    return estimator


def refit_values(kernel, values):
    """Fit the kernel part again on new ``values`` of its keys, which its
    fit validated and encoded (the widths resolve as they did)."""
    fit_pool(
        kernel,
        kernel.keys_,
        np.asarray(values).reshape(kernel.keys_.shape[0], -1),
        kernel.sample_weight_,
        degree=kernel.degree,
        n_neighbors=kernel.n_neighbors,
    )
    kernel.values_ = values


def _share_kernel_attributes(estimator, kernel, categorical, design):
    """The fitted attributes of the kernel part that the estimator shows:
    its keys, values (the partial residuals), weights, widths and
    algorithm; the categories of every categorical feature."""
    for name in (
        "keys_",
        "values_",
        "sample_weight_",
        "bandwidth_",
        "algorithm_",
        "categorical_bandwidth_",
    ):
        if hasattr(kernel, name):
            setattr(estimator, name, getattr(kernel, name))
    linear_categorical = np.zeros(len(design.mask), dtype=bool)
    linear_categorical[design.columns[design.encoded]] = True
    mask = linear_categorical | (
        np.zeros_like(linear_categorical) if categorical is None else categorical
    )
    estimator.is_categorical_ = mask if mask.any() else None
    learned = dict(zip(design.columns[design.encoded], design.categories, strict=True))
    kernel_columns = np.flatnonzero(~design.mask)
    if kernel.is_categorical_ is not None:
        kernel_categorical = kernel_columns[kernel.is_categorical_]
        learned.update(zip(kernel_categorical, kernel.categories_, strict=True))
    estimator.categories_ = [learned[j] for j in np.flatnonzero(mask)]
    ordered = np.zeros_like(mask)
    if getattr(kernel, "is_ordered_", None) is not None:
        ordered[kernel_columns[kernel.is_ordered_]] = True
    estimator.is_ordered_ = ordered if ordered.any() else None


def clear_fitted(estimator, linear):
    """Remove the fitted attributes of the other kind of fit: those of the
    partially linear model before a fit without ``linear_features`` (and
    the engine's before one with it)."""
    names = ("_pool", "robustness_weights_") if linear else LINEAR_ATTRIBUTES
    for name in names:
        estimator.__dict__.pop(name, None)
