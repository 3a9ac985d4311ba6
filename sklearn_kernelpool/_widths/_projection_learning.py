"""A linear map of the keys learned on the leave-one-out loss of attention
pooling (:mod:`._projection_loss`), and its guard: K-fold against the
isotropic bandwidth, each selected or learned on the training parts.

The map is learned by L-BFGS on its entries with the analytic gradient, the
loss in units of the values' variance (``1 - R^2`` for the squared error),
from a given start. The guard is that of the per-feature widths
(:mod:`._guard`): cross-validation of the whole procedure, and the
one-standard-error rule on the paired out-of-fold losses.
"""

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from .._engine._pooling import KernelPool
from .._exceptions import EmptyNeighborhoodWarning
from .._utils._threads import single_threaded_blas
from ._guard import (
    GUARD_MARGIN,
    _select_isotropic,
    default_splits,
    paired_gain,
    point_losses,
)
from ._learning import _in_variance_units
from ._projection_loss import projection_loss

# The iteration cap of each learning and the tolerance of the projected
# gradient, as scikit-learn's NeighborhoodComponentsAnalysis has them.
MAX_ITER = 200
TOL = 1e-5


@dataclass
class LearnedProjection:
    """A map learned by :func:`learn_projection`.

    Attributes
    ----------
    components : ndarray of shape (n_components, n_features)
    n_iter : int
        The iterations of L-BFGS.
    loss : float
        The leave-one-out loss at ``components``, in units of the values'
        variance for the squared error.
    converged : bool
        Whether L-BFGS stopped before ``max_iter``.
    """

    components: np.ndarray
    n_iter: int
    loss: float
    converged: bool


def learn_projection(
    X,
    Y,
    weights,
    kernel,
    start,
    *,
    objective="squared_error",
    max_iter=MAX_ITER,
    tol=TOL,
    verbose=0,
    warn=True,
):
    """The map minimising the leave-one-out loss of pooling, from ``start``.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values; class indicators for ``objective="log_loss"``.
    weights : ndarray of shape (n,)
        Sample weights.
    kernel : Kernel
        A kernel of :func:`._projection_loss.differentiable_kernels`.
    start : ndarray of shape (n_components, n_features)
        The first map.
    objective : {"squared_error", "log_loss"}, default="squared_error"
    max_iter : int, default=200
    tol : float, default=1e-5
        L-BFGS stops when no entry of the gradient of the loss (in units of
        the variance) exceeds it.
    verbose : int, default=0
        Above 0, each evaluation of the loss is printed.
    warn : bool, default=True
        Whether to warn with a :class:`~sklearn.exceptions.ConvergenceWarning`
        when ``max_iter`` stops it.

    Returns
    -------
    learned : LearnedProjection
    """
    Y = _in_variance_units(Y, weights, objective)
    shape = np.shape(start)

    evaluations = 0

    def fun(theta):
        nonlocal evaluations
        loss, grad, _ = projection_loss(
            theta.reshape(shape), X, Y, weights, kernel, objective=objective
        )
        evaluations += 1
        if verbose > 0:
            print(
                f"[KernelAttentionProjection] evaluation {evaluations}: "
                f"leave-one-out loss {loss:.6g}"
            )
        return loss, grad.ravel()

    # The blocks' products are small: BLAS threads wait on each other at
    # every one of them (benchmarks/bench_projection.py measures it).
    with single_threaded_blas():
        result = minimize(
            fun,
            np.asarray(start, dtype=np.float64).ravel(),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iter, "gtol": tol},
        )
    n_iter = int(result.nit)
    converged = n_iter < max_iter or bool(result.success)
    if warn and not converged:
        warnings.warn(
            f"The learning of the projection stopped at max_iter={max_iter} "
            "iterations before it converged; raise max_iter.",
            ConvergenceWarning,
            stacklevel=4,
        )
    return LearnedProjection(
        result.x.reshape(shape), n_iter, float(result.fun), converged
    )


@dataclass
class ProjectionGuard:
    """What the guard of a learned map found.

    Attributes
    ----------
    keep : bool
        Whether the learned map beats the isotropic width out of fold by
        more than ``standard_error`` (the one-standard-error rule).
    isotropic_loss, projection_loss : float
        The out-of-fold losses of both procedures.
    standard_error : float
        The standard error of the paired differences of the losses.
    """

    keep: bool
    isotropic_loss: float
    projection_loss: float
    standard_error: float


def guard_projection(
    X,
    Y,
    weights,
    kernel,
    bandwidths,
    start,
    *,
    objective="squared_error",
    splits=None,
    max_iter=MAX_ITER,
    tol=TOL,
):
    """Whether a learned map beats the isotropic width out of fold.

    In each split, on the training part only: the isotropic bandwidth of
    smallest exact leave-one-out loss among ``bandwidths``, and the map
    learned from ``start(X_train, Y_train, w_train, h)`` (a callable: the
    start of the learning, as the estimator makes it). Both pool the test
    part at degree 0; the map is kept where its out-of-fold loss is below
    the isotropic width's by more than the standard error of the paired
    differences (:func:`._guard.paired_gain`).

    Returns
    -------
    result : ProjectionGuard
    """
    n = X.shape[0]
    if splits is None:
        splits = default_splits(n)
    losses = [[], []]
    held_weights = []
    for train, test in splits:
        X_train, Y_train, w_train = X[train], Y[train], weights[train]
        h = _select_isotropic(
            X_train, Y_train, w_train, kernel, bandwidths, 0, objective
        )
        learned = learn_projection(
            X_train,
            Y_train,
            w_train,
            kernel,
            start(X_train, Y_train, w_train, h),
            objective=objective,
            max_iter=max_iter,
            tol=tol,
            warn=False,
        )
        fits = [
            _pool(X_train / h, Y_train, w_train, X[test] / h, kernel),
            _pool(
                X_train @ learned.components.T,
                Y_train,
                w_train,
                X[test] @ learned.components.T,
                kernel,
            ),
        ]
        for k, fit in enumerate(fits):
            losses[k].append(point_losses(objective, Y[test], fit))
        held_weights.append(weights[test])
    isotropic, learned = (np.concatenate(part) for part in losses)
    w = np.concatenate(held_weights)
    gain, se = paired_gain(isotropic - learned, w)
    total = w.sum()
    return ProjectionGuard(
        keep=bool(gain > GUARD_MARGIN * se),
        isotropic_loss=float(w @ isotropic / total),
        projection_loss=float(w @ learned / total),
        standard_error=float(se),
    )


def _pool(Z_train, Y_train, w_train, Z_test, kernel):
    """The test predictions of pooling at unit width, as the regressor's
    defaults pool them (``on_empty="nearest"``)."""
    engine = KernelPool(Z_train, Y_train, w_train, kernel, 1.0, "nearest", False)
    with warnings.catch_warnings():
        # Held-out fits of the comparison: their fallbacks are part of what
        # is compared.
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        return engine.pool(Z_test).reshape(len(Z_test), -1)
