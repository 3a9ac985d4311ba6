"""The guard of learned per-feature widths: K-fold against the isotropic width.

Widths learned on the leave-one-out loss of the same data they are judged on
can overfit it: with many features and few points, or a skewed target, the
optimiser tunes the widths to the leave-one-out noise. The guard judges the
whole procedure on points it never saw: in each training part of a K-fold
split, the isotropic bandwidth is selected on the grid by exact leave-one-out
and the per-feature widths are learned from it (:func:`._widths.learn_widths`),
both on the training part only; both then predict the held-out part. The
learned widths are kept only when their out-of-fold loss is below that of the
isotropic width. This is cross-validation of the selection procedure
(Stone 1974; Varma and Simon 2006, "nested" cross-validation), not of the
selected widths.
"""

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import KFold

from ._diagnostics import SMOOTHER_CRITERIA, in_sample_criteria
from ._exceptions import LocalLinearFallbackWarning
from ._loo import HeldOut
from ._widths import learn_widths
from ._widths_terms import _objective

GUARD_SPLITS = 5


@dataclass
class GuardResult:
    """What the guard found.

    Attributes
    ----------
    keep : bool
        Whether the learned widths beat the isotropic width out of fold.
    isotropic_loss, per_feature_loss : float
        Out-of-fold losses (``objective``, weighted over the held-out
        points) of the isotropic width and of the learned widths, each
        selected or learned on the training parts.
    isotropic_predictions, per_feature_predictions : ndarray of shape (n, n_outputs)
        Their out-of-fold predictions (NaN for points held out by no split).
    splits : list of (train, test)
        The splits used.
    """

    keep: bool
    isotropic_loss: float
    per_feature_loss: float
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
    from ._regression import KernelAttentionRegressor

    model = KernelAttentionRegressor(
        kernel=kernel.name, bandwidth=bandwidth, degree=degree
    )
    Y_fit = Y_train[:, 0] if Y_train.shape[1] == 1 else Y_train
    model.fit(X_train, Y_fit, sample_weight=w_train)
    with warnings.catch_warnings():
        # Held-out fits of the comparison: their fallbacks are part of what
        # is compared, as they are of the scores of the candidates.
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return model.predict(X_test).reshape(len(X_test), -1)


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
):
    """Whether learned per-feature widths beat the isotropic width out of fold.

    In each split, on the training part only: the isotropic bandwidth of
    smallest exact leave-one-out loss among ``bandwidths``, and the
    per-feature widths learned from it (:func:`._widths.learn_widths`, no
    convergence warning). Both predict the test part; the losses of all the
    out-of-fold predictions are compared. Ties keep the isotropic width.

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

    Returns
    -------
    result : GuardResult
    """
    n, p = Y.shape
    if splits is None:
        splits = default_splits(n)
    bandwidths = np.asarray(bandwidths, dtype=np.float64)
    judged = "squared_error" if objective in SMOOTHER_CRITERIA else objective
    losses = np.zeros(2)
    total = 0.0
    oof = [np.full((n, p), np.nan), np.full((n, p), np.nan)]
    for train, test in splits:
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
        w_test = weights[test]
        scale = 1.0
        for c, bandwidth in enumerate((h, widths)):
            pred = _pool(X_train, Y_train, w_train, X[test], kernel, bandwidth, degree)
            oof[c][test] = pred
            losses[c] += _objective(judged, Y[test], pred, w_test, scale)[0]
        total += w_test.sum() * (p if judged == "squared_error" else 1)
    losses /= total
    return GuardResult(
        keep=bool(losses[1] < losses[0]),
        isotropic_loss=float(losses[0]),
        per_feature_loss=float(losses[1]),
        isotropic_predictions=oof[0],
        per_feature_predictions=oof[1],
        splits=splits,
    )
