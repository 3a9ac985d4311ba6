"""A linear map of the keys learned on the leave-one-out loss of attention
pooling (:mod:`._projection_loss`).

The map is learned by L-BFGS with the analytic gradient, the loss in units of
the values' variance (``1 - R^2`` for the squared error), from a given start.
L-BFGS works on the map of the standardised features, ``B = A S`` with ``S``
the diagonal of the features' weighted standard deviations, on the keys ``X
S^{-1}``: the distances ``||A (x_i - x_j)||`` are the same, and the problem
L-BFGS sees, its steps and its tolerances do not depend on the units of
``X`` (a map learned on ``X * s`` from a start divided by ``s`` is the map
of ``X`` divided by ``s``). The searches guard it out of fold
(:mod:`.._selection._learned_map`).
"""

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from .._utils._threads import single_threaded_blas
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
        the variance) in the map of the standardised features exceeds it.
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
    scale = feature_scale(X, weights)
    standardised = X / scale

    evaluations = 0

    def fun(theta):
        nonlocal evaluations
        loss, grad, _ = projection_loss(
            theta.reshape(shape), standardised, Y, weights, kernel, objective=objective
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
            (np.asarray(start, dtype=np.float64) * scale).ravel(),
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
    # The loss at the map returned: where a line search fails, L-BFGS-B
    # returns the last good map with the loss of the failed trial.
    components = result.x.reshape(shape) / scale
    loss = projection_loss(
        components, X, Y, weights, kernel, objective=objective, gradient=False
    )[0]
    return LearnedProjection(components, n_iter, float(loss), converged)


def feature_scale(X, weights):
    """The weighted standard deviation of each feature, 1 for a constant one
    (:class:`~sklearn.preprocessing.StandardScaler`'s ``scale_``): the units
    in which :func:`learn_projection` learns the map."""
    return StandardScaler().fit(X, sample_weight=weights).scale_
