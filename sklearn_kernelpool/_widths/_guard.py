"""The guard of learned per-feature widths: K-fold against the isotropic width.

Widths learned on the leave-one-out loss of the same data they are judged on
can overfit it: with many features and few points, or a skewed target, the
optimiser tunes the widths to the leave-one-out noise. The guard judges the
whole procedure on points it never saw: in each training part of a K-fold
split, the isotropic bandwidth is selected on the grid by exact leave-one-out
and the per-feature widths are learned from it (:func:`._learning.learn_widths`),
both on the training part only (nothing learned on all the data enters a
split); both then predict the held-out part. This is cross-validation of the
selection procedure (Stone 1974; Varma and Simon 2006, "nested"
cross-validation), not of the selected widths.

The comparison is the *one-standard-error rule* (Breiman, Friedman, Olshen
and Stone 1984; Hastie, Tibshirani and Friedman 2009, section 7.10) on the
paired out-of-fold losses: each held-out point ``i`` has the loss
``l_i`` of the isotropic choice and ``l'_i`` of the learned widths, and
their difference ``d_i = l_i - l'_i``. With ``W = sum_i w_i`` over the
held-out points, the learned widths gain ``D = sum_i w_i d_i / W`` (the
difference of the two out-of-fold losses), with the standard error

    ``SE = sqrt(m / (m - 1) sum_i w_i^2 (d_i - D)^2) / W``

(``m`` held-out points of positive weight; ``s / sqrt(m)`` for equal
weights, ``s`` the standard deviation of the ``d_i``), and are kept only
where ``D > SE``: a one-sided paired test of about 16% level. The folds of a
small table are noisy, and the widths learned in them differ from split to
split: a gain within one standard error of the paired differences is the
isotropic choice's, which is the simpler model. Ties keep it too.
"""

import warnings
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.model_selection import KFold

from .._engine._pooling import KernelPool
from .._held_out._criteria import SMOOTHER_CRITERIA, in_sample_criteria
from .._held_out._pool import HeldOut
from .._utils._warnings import LocalLinearFallbackWarning
from ._learning import learn_widths
from ._terms import _EPS, _objective

GUARD_SPLITS = 5
# Standard errors of the paired differences by which the learned widths must
# win (the one-standard-error rule).
GUARD_MARGIN = 1.0
#: ``per_feature="auto"`` learns and guards the widths on tables of at most
#: this many rows of positive weight times (features + 1). The guard learns
#: the widths six times (on the five training parts and on all the rows), and
#: one evaluation of the local-linear loss costs about ``n^2 (d + 1)^2``: at
#: the bound (1,000 rows of 10 features) a fit takes about 8 s instead of 1 s.
GUARD_MAX_SIZE = 11_000


def guard_affordable(n_positive, n_features):
    """Whether ``per_feature="auto"`` learns and guards widths on a table of
    ``n_positive`` rows of positive weight and ``n_features`` features:
    ``n_positive * (n_features + 1) <= GUARD_MAX_SIZE``."""
    return n_positive * (n_features + 1) <= GUARD_MAX_SIZE


@dataclass
class GuardResult:
    """What the guard found.

    Attributes
    ----------
    keep : bool
        Whether the learned widths beat the isotropic width out of fold by
        more than ``standard_error`` (the one-standard-error rule).
    isotropic_loss, per_feature_loss : float
        Out-of-fold losses (``objective``, weighted over the held-out
        points) of the isotropic width and of the learned widths, each
        selected or learned on the training parts.
    standard_error : float
        The standard error of their difference, from the paired
        differences of the held-out points' losses (``inf`` with fewer than
        two held-out points of positive weight).
    isotropic_predictions, per_feature_predictions : ndarray of shape (n, n_outputs)
        Their out-of-fold predictions (NaN for points held out by no split).
    splits : list of (train, test)
        The splits used.
    """

    keep: bool
    isotropic_loss: float
    per_feature_loss: float
    standard_error: float
    isotropic_predictions: np.ndarray
    per_feature_predictions: np.ndarray
    splits: list


def default_splits(n):
    """Five deterministic shuffled folds (fewer for fewer than five points)."""
    n_splits = min(GUARD_SPLITS, n)
    folds = KFold(n_splits=n_splits, shuffle=True, random_state=0)
    return [(train, test) for train, test in folds.split(np.empty((n, 1)))]


def _select_isotropic(X, Y, weights, kernel, bandwidths, degree, objective):
    """The bandwidth of smallest exact leave-one-out loss on (X, Y), or of
    smallest criterion of the in-sample fit (``"gcv"``, ``"aicc"``)."""
    held_out = HeldOut(X, Y, weights, [kernel], bandwidths, degree=degree)
    n = X.shape[0]
    sums = held_out.sums_excluding_groups(None)
    if objective in SMOOTHER_CRITERIA:
        fitted, self_weight = held_out.in_sample(sums, degree=degree)
        _, _, gcv, aicc = in_sample_criteria(Y, weights, fitted[0], self_weight[0])
        criterion = gcv if objective == "gcv" else aicc
        return float(bandwidths[int(np.argmin(np.nan_to_num(criterion, nan=np.inf)))])
    predictions, empty, *_ = held_out.predictions(sums, np.arange(n))
    scale = weights.sum() * (Y.shape[1] if objective == "squared_error" else 1)
    losses = np.full(len(bandwidths), np.inf)
    for m in range(len(bandwidths)):
        if np.any(empty[0, m]):
            continue
        losses[m] = _objective(objective, Y, predictions[0, m], weights, scale)[0]
    return float(bandwidths[int(np.argmin(losses))])


def _pool(X_train, Y_train, w_train, X_test, kernel, bandwidth, degree):
    """The test predictions of the engine fitted on the training part, as
    the regressor's defaults pool them (``on_empty="nearest"``)."""
    engine = KernelPool(
        X_train, Y_train, w_train, kernel, bandwidth, "nearest", False, degree=degree
    )
    with warnings.catch_warnings():
        # Held-out fits of the comparison: their fallbacks are part of what
        # is compared, as they are of the scores of the candidates.
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return engine.pool(X_test).reshape(len(X_test), -1)


def point_losses(objective, Y, predictions):
    """The loss of each row: the mean squared error over the outputs, or
    the log-loss of class indicators ``Y`` (probabilities clipped to
    ``[eps, 1 - eps]``, as :func:`._terms._objective` does)."""
    if objective == "squared_error":
        return np.mean((predictions - Y) ** 2, axis=1)
    clipped = np.clip(predictions, _EPS, 1.0 - _EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(Y > 0, Y * np.log(clipped), 0.0), axis=1)


def paired_gain(differences, weights):
    """The weighted mean of paired differences and its standard error.

    ``D = sum_i w_i d_i / W`` and ``sqrt(m / (m - 1) sum_i w_i^2 (d_i -
    D)^2) / W``, ``W = sum_i w_i`` and ``m`` the differences of positive
    weight (the standard error is ``inf`` for ``m < 2``).
    """
    # In units of the largest difference, whose square may overflow (values
    # of 1e150): both outputs scale with the differences.
    unit = float(np.max(np.abs(differences), initial=0.0))
    unit = unit if 0.0 < unit < np.inf else 1.0
    differences = differences / unit
    total = weights.sum()
    gain = float(weights @ differences / total)
    m = np.count_nonzero(weights > 0)
    if m < 2:
        return gain * unit, np.inf
    spread = np.sum(weights**2 * (differences - gain) ** 2) * m / (m - 1)
    return gain * unit, float(np.sqrt(spread) / total) * unit


def _split_fits(X, Y, weights, kernel, bandwidths, train, test, options):
    """The test predictions of the isotropic choice and of the learned
    widths, both selected or learned on the training part."""
    degree, objective, max_iter = options
    w_train = weights[train]
    if np.count_nonzero(w_train > 0) < 3:
        raise ValueError(
            "Each training part of the guard's splits needs at least three "
            "samples of positive weight for its leave-one-out."
        )
    X_train, Y_train = X[train], Y[train]
    h = _select_isotropic(
        X_train, Y_train, w_train, kernel, bandwidths, degree, objective
    )
    widths = learn_widths(
        X_train,
        Y_train,
        w_train,
        kernel,
        h,
        degree=degree,
        objective=objective,
        max_iter=max_iter,
        warn=False,
    )[0]
    return [
        _pool(X_train, Y_train, w_train, X[test], kernel, bandwidth, degree)
        for bandwidth in (h, widths)
    ]


def guard_widths(
    X,
    Y,
    weights,
    kernel,
    bandwidths,
    *,
    degree=0,
    objective="squared_error",
    splits=None,
    max_iter=200,
    n_jobs=None,
):
    """Whether learned per-feature widths beat the isotropic width out of fold.

    In each split, on the training part only: the isotropic bandwidth of
    smallest exact leave-one-out loss among ``bandwidths``, and the
    per-feature widths learned from it (:func:`._learning.learn_widths`, no
    convergence warning). Both predict the test part. The learned widths
    are kept by the one-standard-error rule of the module docstring: where
    their out-of-fold loss is below the isotropic width's by more than the
    standard error of the paired differences of the held-out points'
    losses.

    Parameters
    ----------
    X : ndarray of shape (n, n_features)
        Points, float64.
    Y : ndarray of shape (n, n_outputs)
        Values; class indicators (one-hot) for ``objective="log_loss"``.
    weights : ndarray of shape (n,)
        Sample weights: they weigh the keys in the pools and the held-out
        errors.
    kernel : Kernel
        A kernel with a log form.
    bandwidths : ndarray of shape (n_bandwidths,)
        The isotropic candidates.
    degree : {0, 1}, default=0
        The degree of the fits.
    objective : {"squared_error", "log_loss", "gcv", "aicc"}, \
            default="squared_error"
        The loss of the leave-one-out selection, the learning and the
        out-of-fold comparison; ``"gcv"`` and ``"aicc"`` select and learn on
        that criterion of the in-sample fit, and compare the squared error
        out of fold.
    splits : list of (train, test) index arrays, default=None
        The splits; None means five shuffled folds with a fixed seed
        (:func:`default_splits`). Their test parts need not partition the
        points; a point held out twice counts twice.
    max_iter : int, default=200
        The iteration cap of each learning.
    n_jobs : int, default=None
        Threads over the splits (``None`` means 1 unless in a
        :func:`joblib.parallel_config` context); each holds the chunks of
        its own learning. The result does not depend on it.

    Returns
    -------
    result : GuardResult
    """
    n, p = Y.shape
    if splits is None:
        splits = default_splits(n)
    bandwidths = np.asarray(bandwidths, dtype=np.float64)
    judged = "squared_error" if objective in SMOOTHER_CRITERIA else objective
    options = (degree, objective, max_iter)
    n_threads = max(1, min(effective_n_jobs(n_jobs), len(splits)))
    jobs = (
        delayed(_split_fits)(X, Y, weights, kernel, bandwidths, train, test, options)
        for train, test in splits
    )
    if n_threads == 1:
        fits = [job(*args, **kwargs) for job, args, kwargs in jobs]
    else:
        with warnings.catch_warnings():
            # The filters are the process's: a thread leaving its own
            # catch_warnings (in _pool) restores them while another pools.
            warnings.simplefilter("ignore", LocalLinearFallbackWarning)
            fits = Parallel(n_jobs=n_threads, require="sharedmem")(jobs)
    oof = [np.full((n, p), np.nan), np.full((n, p), np.nan)]
    losses = [[], []]
    for (_, test), predictions in zip(splits, fits, strict=True):
        for c, pred in enumerate(predictions):
            oof[c][test] = pred
            losses[c].append(point_losses(judged, Y[test], pred))
    held_out_weights = np.concatenate([weights[test] for _, test in splits])
    isotropic, per_feature = (np.concatenate(loss) for loss in losses)
    gain, standard_error = paired_gain(isotropic - per_feature, held_out_weights)
    total = held_out_weights.sum()
    return GuardResult(
        keep=bool(gain > GUARD_MARGIN * standard_error),
        isotropic_loss=float(held_out_weights @ isotropic / total),
        per_feature_loss=float(held_out_weights @ per_feature / total),
        standard_error=standard_error,
        isotropic_predictions=oof[0],
        per_feature_predictions=oof[1],
        splits=splits,
    )
