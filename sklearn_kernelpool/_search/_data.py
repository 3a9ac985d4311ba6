"""What every pass of a candidate search reads: the training data, its
weights, the scorer and the splits (:class:`SearchData`)."""

from dataclasses import dataclass

import numpy as np
from sklearn.model_selection import check_cv


@dataclass(frozen=True)
class SearchData:
    """The training data of a search, as its passes read it.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
        The continuous features, dense, in their own dtype.
    X64 : ndarray of shape (n_samples, n_features)
        The same in float64, on which the candidates are scored.
    y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        The target as the estimator received it (class indices for a
        classifier).
    Y : ndarray of shape (n_samples, n_outputs)
        The target as float64 columns (class indicators for a classifier).
    weights : ndarray of shape (n_samples,)
        The sample weights, float64, ones without them.
    sample_weight : ndarray of shape (n_samples,) or None
        The (relative) sample weights as given, or None.
    scorer : callable or None
        The scorer of the scoring policy, or None for its own loss.
    splits : list of (ndarray, ndarray) or None
        The (train, test) indices of ``cv``, drawn once; None for
        leave-one-out.
    """

    X: np.ndarray
    X64: np.ndarray
    y: np.ndarray
    Y: np.ndarray
    weights: np.ndarray
    sample_weight: np.ndarray | None
    scorer: object
    splits: list | None

    @property
    def weighted(self):
        """Whether sample weights were given."""
        return self.sample_weight is not None

    @property
    def positive(self):
        """The rows of positive weight."""
        return self.weights > 0

    @property
    def keys(self):
        """The float64 features of the rows of positive weight."""
        return self.X64[self.positive]


def search_data(search, X, y, sample_weight):
    """The :class:`SearchData` of ``search`` (its ``cv`` and ``policy``) on
    ``X``, ``y`` and ``sample_weight``, with the checks of leave-one-out and
    of small folds."""
    weights = (np.ones(X.shape[0]) if sample_weight is None else sample_weight).astype(
        np.float64
    )
    n_positive = np.count_nonzero(weights > 0)
    if search.cv is None and n_positive < 2:
        raise ValueError(
            "Leave-one-out needs at least two samples of positive weight; "
            f"got {n_positive} sample(s)."
        )
    scorer = search.policy.scorer(sample_weight is not None)
    # The splits once: a generator given as cv can be consumed only once.
    splits = None
    if search.cv is not None:
        cv = check_cv(search.cv, y, classifier=False)
        splits = [(np.asarray(tr), np.asarray(te)) for tr, te in cv.split(X, y)]
        search.policy.check_small_folds(splits, scorer, X, y, sample_weight)
    return SearchData(
        X=X,
        X64=X.astype(np.float64),
        y=y,
        Y=y.reshape(X.shape[0], -1).astype(np.float64),
        weights=weights,
        sample_weight=sample_weight,
        scorer=scorer,
        splits=splits,
    )
