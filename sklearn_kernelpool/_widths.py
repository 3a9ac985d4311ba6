"""Per-feature widths learned on the leave-one-out error, with its gradient."""

import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from ._bandwidth import _weighted_spread
from ._chunking import working_memory_bytes
from ._loo import _LOGIT_FLOOR, _augment, exact_if_far, squared_distances
from ._threads import single_threaded_blas

# Rows per chunk: a chunk holds a few (rows, n) float64 arrays, of at most
# this many bytes each, and all of them within ``working_memory``.
_CHUNK_BYTES = 2**22
_BYTES_PER_KEY = 32
# Widths are bounded to [1e-3, 1e3] times the feature's spread.
_WIDTH_RANGE = 1e3
_MAX_ITER = 200
_EPS = float(np.finfo(np.float64).eps)
# Starts closer than this in every log width are one start.
_SAME_START = np.log(1.1)


def _log_slope(kernel, s):
    """``-2 d log(alpha) / ds`` at squared scaled distances ``s``.

    The derivative of a kernel weight in the log width of feature ``f`` is
    ``alpha * _log_slope(s) * D_f``, ``D_f`` the squared scaled difference of
    that feature. The exponential kernel's slope is unbounded at ``s = 0``,
    where ``D_f = 0``: it is set to 0 there.
    """
    name = kernel.name
    if name == "gaussian":
        return None  # the constant 1
    if name == "cauchy":
        return 2.0 / (1.0 + s)
    if name == "exponential":
        root = np.sqrt(s)
        return np.divide(1.0, root, out=np.zeros_like(s), where=s > 0)
    raise ValueError(f"No gradient for the kernel {name!r}.")


OBJECTIVES = ("squared_error", "log_loss")


def _objective(objective, Y, predictions, weights, scale):
    """The summed loss of ``predictions`` and its derivative in them.

    ``squared_error``: ``sum_i w_i ||y_i - p_i||^2 / scale``. ``log_loss``:
    ``-sum_i w_i sum_c Y_ic log(clip(p_ic)) / scale`` of class indicators
    ``Y``, the probabilities clipped to ``[eps, 1 - eps]`` as
    :func:`sklearn.metrics.log_loss` does (the derivative is zero where they
    are clipped).
    """
    w = weights[:, None]
    if objective == "squared_error":
        residual = predictions - Y
        return float(np.sum(w * residual**2)) / scale, 2.0 * w * residual / scale
    clipped = np.clip(predictions, _EPS, 1.0 - _EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(Y > 0, Y * np.log(clipped), 0.0)
        derivative = np.where(
            (Y > 0) & (clipped == predictions), -w * Y / predictions, 0.0
        )
    return -float(np.sum(w * terms)) / scale, derivative / scale


def loo_loss(
    log_widths,
    X,
    Y,
    weights,
    kernel,
    gradient=True,
    *,
    degree=0,
    objective="squared_error",
):
    """Weighted leave-one-out loss of per-feature widths.

    Parameters
    ----------
    log_widths : ndarray of shape (n_features,)
        Logarithms of the widths.
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values (class indicators for ``objective="log_loss"``).
    weights : ndarray of shape (n,)
        Sample weights: they weigh the keys in the pools and the errors in
        the loss. At least two are positive.
    kernel : Kernel
        A kernel with a log form.
    gradient : bool
        Whether to return the gradient too.
    degree : {0, 1}
        Local-constant (0) or local-linear (1) held-out fits.
    objective : {"squared_error", "log_loss"}
        ``squared_error``: ``sum_i w_i ||y_i - p_i||^2 / (n_outputs sum_i
        w_i)``. ``log_loss`` (degree 0): ``-sum_i w_i sum_c Y_ic log p_ic /
        sum_i w_i`` of the held-out pooled class indicators, clipped to
        ``[eps, 1 - eps]`` as :func:`sklearn.metrics.log_loss` does.

    Returns
    -------
    loss : float
        The loss of the held-out predictions ``p_i``, each fitted on every
        point but ``i``.
    grad : ndarray of shape (n_features,)
        Its gradient in ``log_widths`` (when ``gradient``).
    predictions : ndarray of shape (n, n_outputs)
        The leave-one-out predictions ``p_i``.

    Notes
    -----
    The weight of key ``j`` for point ``i`` is ``a_ij = w_j alpha(s_ij)``,
    ``s_ij = sum_f (x_if - x_jf)^2 / h_f^2``; its derivative in ``log h_f``
    is ``a_ij * _log_slope(s_ij) * D_ijf``, ``D_ijf`` the squared scaled
    difference of feature ``f``. The local-linear prediction is
    ``p_i = e_1^T A_i^{-1} U_i^T W_i y`` (``U_i`` the rows ``[1, x_j -
    x_i]``, ``A_i = U_i^T W_i U_i``); its differential is ``dp_i = sum_j
    da_ij g_ij r_ij`` with ``g_ij = e_1^T A_i^{-1} [1, x_j - x_i]`` (the
    equivalent kernel) and ``r_ij`` the residual of key ``j`` under the fit
    at ``i``. For the local mean ``g_ij = 1 / sum_j a_ij`` and ``r_ij = y_j
    - p_i``. Rows are taken in chunks within ``working_memory``.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}.")
    if degree == 1 and objective != "squared_error":
        raise ValueError(
            "objective='log_loss' pools class indicators locally-constant: it "
            "needs degree=0."
        )
    if degree == 1:
        return _loo_loss_linear(log_widths, X, Y, weights, kernel, gradient)
    n, n_outputs = Y.shape
    Z = X / np.exp(log_widths)
    Z -= Z[weights > 0].mean(axis=0)
    left, right = _augment(Z)
    log_weights = None
    if np.any(weights != weights[0]):
        with np.errstate(divide="ignore"):
            log_weights = np.log(weights)
    scale = weights.sum()
    if objective == "squared_error":
        scale *= n_outputs
    has_zero = bool(np.any(weights == 0))
    loss = 0.0
    grad = np.zeros(X.shape[1])
    predictions = np.empty_like(Y)
    budget = min(_CHUNK_BYTES * _BYTES_PER_KEY // 8, working_memory_bytes())
    rows_per_chunk = max(1, int(min(n, budget // (_BYTES_PER_KEY * n))))
    buffer = np.empty((min(rows_per_chunk, n), n))
    d = Z.shape[1]
    unit = np.hstack([Y, np.ones((n, 1))])
    width = unit.shape[1]
    if gradient:
        # [y, 1], z_f^2 [y, 1] and z_f [y, 1] for every feature f.
        moments = np.hstack(
            [
                unit,
                (Z[:, :, None] ** 2 * unit[:, None, :]).reshape(n, -1),
                (Z[:, :, None] * unit[:, None, :]).reshape(n, -1),
            ]
        )
    for rows, scores, slope in _score_chunks(
        Z, left, right, weights, log_weights, has_zero, kernel, gradient, buffer
    ):
        if gradient and slope is None:
            pooled = scores @ moments  # the pooled sums and the gradient's
            sums = pooled[:, :width]
        else:
            sums = scores @ unit
            if gradient:
                scores *= slope
                pooled = scores @ moments
        total = sums[:, -1]
        pred = sums[:, :-1] / total[:, None]
        predictions[rows] = pred
        part, r = _objective(objective, Y[rows], pred, weights[rows], scale)
        loss += part
        if not gradient:
            continue
        # dp_i / dtheta_f = sum_j T_ij D_ijf (y_j - p_i) / total_i, with
        # T = scores * slope and D_ijf = z_if^2 + z_jf^2 - 2 z_if z_jf: sums
        # of T against [1, z_f^2, z_f] times [y, 1], pooled above. ``r`` is
        # the derivative of the loss in the predictions.
        c = len(rows)
        direct = pooled[:, :width]
        squares = pooled[:, width : width * (d + 1)].reshape(c, d, width)
        linear = pooled[:, width * (d + 1) :].reshape(c, d, width)
        Zr = Z[rows][:, :, None]
        pair_sums = Zr**2 * direct[:, None, :] + squares - 2.0 * Zr * linear
        coef = np.hstack([r, -np.sum(r * pred, axis=1, keepdims=True)])
        coef /= total[:, None]
        grad += np.einsum("ifq,iq->f", pair_sums, coef)
    return (loss, grad, predictions) if gradient else (loss, predictions)


def _score_chunks(Z, left, right, weights, log_weights, has_zero, kernel, slopes, buf):
    """Chunks of rows with their leave-one-out kernel scores (and slopes).

    Yields ``(rows, scores, slope)``: the scores of each row over the keys,
    its own key and keys of zero weight at zero, scaled by the row's largest
    (which cancels in every pooled ratio); ``slope`` is ``_log_slope`` of the
    squared distances, None for the Gaussian (the constant 1) or when
    ``slopes`` is False.
    """
    n = Z.shape[0]
    rows_per_chunk = buf.shape[0]
    # Logits far below their row's maximum are clamped (exp() is slow on
    # them); the squared diagonal of the bounding box bounds every distance.
    box = float(np.sum(np.ptp(Z, axis=0) ** 2))
    positive = weights[weights > 0]
    spread = float(np.log(positive.max() / positive.min()))
    needs_floor = -kernel.log_function(np.sqrt(box)) + spread > -_LOGIT_FLOOR
    for start in range(0, n, rows_per_chunk):
        rows = np.arange(start, min(start + rows_per_chunk, n))
        diagonal = (np.arange(len(rows)), rows)
        s = buf[: len(rows)]
        squared_distances(left[rows], right, s)
        if kernel.name == "exponential":
            # sqrt() turns the rounding error of a zero distance into ~1e-8:
            # pairs within it of zero are taken as duplicates.
            slack = 64 * _EPS * (left[rows, -1][:, None] + right[-2][None, :])
            s[s <= slack] = 0.0
        # Groups of points far apart: exact differences, as the engine does
        # (duplicates then have distance 0 exactly).
        exact_if_far(s, left[rows], right, 1.0)
        slope = _log_slope(kernel, s) if slopes else None
        logits = kernel.squared_log_function(s)  # in place: s is not needed
        if log_weights is not None:
            logits += log_weights
        logits[diagonal] = -np.inf
        logits -= logits.max(axis=1, keepdims=True)
        if needs_floor:
            np.maximum(logits, _LOGIT_FLOOR, out=logits)
        scores = np.exp(logits, out=logits)
        if has_zero:
            scores[:, weights == 0] = 0.0
        scores[diagonal] = 0.0
        yield rows, scores, slope


def _solve_local(cov, rhs, tol):
    """``C^+ rhs`` per row, ``C^+`` the pseudo-inverse over the eigenvalues
    of ``C`` above ``tol`` (the minimum-norm rule of :mod:`._local_linear`):
    zero on the rows of rank 0, which keep the local mean.

    A row is rank-deficient when the smallest eigenvalue of ``C`` is within
    ``tol``. Batched Cholesky
    factorisations are far cheaper than eigendecompositions, so they screen
    the rows: every Cholesky pivot is at least the smallest eigenvalue, and
    a chunk whose factorisation fails or has a pivot within twice ``tol``
    is decided on its eigenvalues. Otherwise the rows whose smallest pivot
    is within ``1e3 tol`` are checked on their eigenvalues, and the others
    are taken as regular: this loss may then keep, as regular, a row whose
    covariance is singular by a conditioning worse than that margin, where
    the fitted estimator takes the local mean.
    """
    try:
        pivots = np.diagonal(np.linalg.cholesky(cov), axis1=1, axis2=2) ** 2
    except np.linalg.LinAlgError:
        pivots = None
    if pivots is not None and np.all(pivots.min(axis=1) > 2 * tol):
        # The smallest eigenvalue may still lie below a pivot: decide the
        # rows near the threshold on it.
        close = np.flatnonzero(pivots.min(axis=1) <= 1e3 * tol)
        if not len(close) or np.all(np.linalg.eigvalsh(cov[close])[:, 0] > tol[close]):
            return np.linalg.solve(cov, rhs)
    eigenvalues, vectors = np.linalg.eigh(cov)
    with np.errstate(divide="ignore"):
        inverse = np.where(eigenvalues > tol[:, None], 1.0 / eigenvalues, 0.0)
    projected = np.einsum("cfe,cfk->cek", vectors, rhs)
    return np.einsum("cfe,cek->cfk", vectors, inverse[:, :, None] * projected)


def _loo_loss_linear(log_widths, X, Y, weights, kernel, gradient):
    """:func:`loo_loss` of local-linear (degree 1) held-out fits.

    The local fits are solved in the scaled coordinates ``z = x / h``, in
    which the local-linear prediction is the same (it is invariant to an
    affine map of the design). A row whose local covariance is
    rank-deficient, by the threshold of the fitted estimator
    (:mod:`._local_linear`), gets its minimum-norm fit; one of rank 0 the
    local mean and the local mean's gradient.
    """
    n, p = Y.shape
    d = X.shape[1]
    Z = X / np.exp(log_widths)
    Z -= Z[weights > 0].mean(axis=0)
    left, right = _augment(Z)
    log_weights = None
    if np.any(weights != weights[0]):
        with np.errstate(divide="ignore"):
            log_weights = np.log(weights)
    has_zero = bool(np.any(weights == 0))
    scale = p * weights.sum()
    center = weights @ Y / weights.sum()
    values = Y - center
    upper = np.triu_indices(d)
    # [z, upper(z z^T), y, z (x) y] per key: the local moments.
    moments = np.hstack(
        [
            Z,
            (Z[:, upper[0]] * Z[:, upper[1]]),
            values,
            (Z[:, :, None] * values[:, None, :]).reshape(n, -1),
        ]
    )
    # Per row: the distances/scores, the slope, the equivalent kernel, the
    # residuals and their product (float64).
    per_key = 8 * 6
    budget = min(_CHUNK_BYTES * _BYTES_PER_KEY // 8, working_memory_bytes())
    budget = max(budget - moments.nbytes, per_key * n)
    rows_per_chunk = max(1, int(min(n, budget // (per_key * n))))
    buffer = np.empty((rows_per_chunk, n))
    n_keys = np.count_nonzero(weights > 0) - (weights > 0)
    loss = 0.0
    grad = np.zeros(d)
    predictions = np.empty_like(Y)
    n_sq = len(upper[0])
    for rows, scores, slope in _score_chunks(
        Z, left, right, weights, log_weights, has_zero, kernel, gradient, buffer
    ):
        c = len(rows)
        total = scores.sum(axis=1)
        sums = scores @ moments / total[:, None]
        m = sums[:, :d]
        second = np.zeros((c, d, d))
        second[:, upper[0], upper[1]] = sums[:, d : d + n_sq]
        second[:, upper[1], upper[0]] = sums[:, d : d + n_sq]
        ybar = sums[:, d + n_sq : d + n_sq + p]
        cross = sums[:, d + n_sq + p :].reshape(c, d, p) - m[:, :, None] * ybar[:, None]
        cov = second - m[:, :, None] * m[:, None, :]
        tol = 10.0 * d * np.sqrt(n_keys[rows]) * _EPS
        tol *= np.trace(second, axis1=1, axis2=2)
        # C^{-1} [cross, z_i - m]: the slopes and the equivalent kernel's.
        rhs = np.concatenate([cross, (Z[rows] - m)[:, :, None]], axis=2)
        solved = _solve_local(cov, rhs, tol)
        beta, lever = solved[:, :, :p], solved[:, :, p]
        pred = ybar + np.einsum("cfk,cf->ck", beta, Z[rows] - m)
        predictions[rows] = pred + center
        part, r = _objective("squared_error", values[rows], pred, weights[rows], scale)
        loss += part
        if not gradient:
            continue
        # g_ij = (1 + lever_i . (z_j - m_i)) / total_i and
        # r . (y_j - p_i - beta_i^T (z_j - z_i)), as (c, n) matrices.
        G = lever @ Z.T
        G += (1.0 - np.einsum("cf,cf->c", lever, m))[:, None]
        G /= total[:, None]
        tilt = np.einsum("cfk,ck->cf", beta, r)
        E = r @ values.T
        E -= tilt @ Z.T
        E += (np.einsum("cf,cf->c", tilt, Z[rows]) - np.sum(r * pred, axis=1))[:, None]
        E *= G
        E *= scores
        if slope is not None:
            E *= slope
        # sum_ij M_ij (z_if^2 + z_jf^2 - 2 z_if z_jf)
        Zr = Z[rows]
        grad += Zr.T**2 @ E.sum(axis=1) + E.sum(axis=0) @ Z**2
        grad -= 2.0 * np.einsum("cf,cf->f", Zr, E @ Z)
    return (loss, grad, predictions) if gradient else (loss, predictions)


def _unique(starts):
    kept = []
    for start in starts:
        if not any(np.all(np.abs(start - other) < _SAME_START) for other in kept):
            kept.append(start)
    return kept


def learn_widths(
    X,
    Y,
    weights,
    kernel,
    bandwidth,
    *,
    degree=0,
    objective="squared_error",
    max_iter=_MAX_ITER,
    warn=True,
):
    """Per-feature widths minimising the leave-one-out loss.

    L-BFGS-B on the log widths with the analytic gradient of
    :func:`loo_loss`, bounded to ``[1e-3 s_j, 1e3 s_j]`` (``s_j`` the
    feature's weighted spread), from three deterministic starts: the
    isotropic ``bandwidth``, the same scaled per feature by ``s_j`` over
    their geometric mean, and twice ``bandwidth`` (the first only for one
    feature; a start within 10% of an earlier one in every width is
    dropped).

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values; class indicators (one-hot) for ``objective="log_loss"``.
    weights : ndarray of shape (n,)
        Sample weights, at least two positive.
    kernel : Kernel
        A kernel with a log form.
    bandwidth : float
        The isotropic bandwidth the starts are made of.
    degree : {0, 1}, default=0
        The degree of the held-out fits.
    objective : {"squared_error", "log_loss"}, default="squared_error"
        The leave-one-out loss minimised (see :func:`loo_loss`).
    max_iter : int, default=200
        The iteration cap of L-BFGS-B, per start.
    warn : bool, default=True
        Whether to issue a :class:`~sklearn.exceptions.ConvergenceWarning`
        when the winning start stopped at ``max_iter``.

    Returns
    -------
    widths : ndarray of shape (n_features,)
    n_iter : int
        Iterations of the winning start.
    loss : float
        Its leave-one-out loss.
    predictions : ndarray of shape (n, n_outputs)
        Its leave-one-out predictions.
    """
    positive = weights > 0
    spread = _weighted_spread(X[positive], weights[positive])
    lower = np.log(spread / _WIDTH_RANGE)
    upper = np.log(spread * _WIDTH_RANGE)
    bounds = list(zip(lower, upper, strict=True))
    relative = spread / np.exp(np.mean(np.log(spread)))
    starts = [
        np.full(X.shape[1], np.log(bandwidth)),
        np.log(bandwidth * relative),
        np.full(X.shape[1], np.log(2.0 * bandwidth)),
    ]
    Y_unit = Y
    if objective == "squared_error":
        # The loss in units of the values' variance, so that the tolerances
        # of L-BFGS-B do not depend on the scale of y.
        mean = np.average(Y, axis=0, weights=weights)
        variance = np.mean(np.average((Y - mean) ** 2, axis=0, weights=weights))
        unit = float(variance) if variance > 0 else 1.0
        Y_unit = (Y - mean) / np.sqrt(unit)

    def fun(theta):
        loss, grad, _ = loo_loss(
            theta, X, Y_unit, weights, kernel, degree=degree, objective=objective
        )
        return loss, grad

    if X.shape[1] == 1:
        # One width: the grid has scanned the curve, refine its minimum.
        starts = starts[:1]
    best = None
    with single_threaded_blas():
        for start in _unique(starts):
            result = minimize(
                fun,
                np.clip(start, lower, upper),
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-9},
            )
            if best is None or result.fun < best.fun:
                best = result
        theta = np.clip(best.x, lower, upper)
        loss, predictions = loo_loss(
            theta,
            X,
            Y,
            weights,
            kernel,
            gradient=False,
            degree=degree,
            objective=objective,
        )
    if warn and best.nit >= max_iter:
        warnings.warn(
            f"The per-feature widths stopped at max_iter={max_iter} iterations "
            "of L-BFGS-B before converging; increase max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )
    return np.exp(theta), int(best.nit), loss, predictions
