"""How the bandwidth search scores a classifier's held-out probabilities.

The held-out class probabilities of :class:`KernelAttentionClassifier` are
the held-out pooled values of the one-hot class indicators:
:class:`._candidates.CandidateSearch` computes them for every candidate at once,
and :class:`ProbabilityScoring`, its scoring policy for
:class:`KernelAttentionClassifierCV`, scores them as probabilities.
"""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import check_scoring

from ._scores import check_weighted_scorer

_EPS = float(np.finfo(np.float64).eps)


def _normalised(predictions):
    """Held-out pooled one-hot labels as probabilities: rows summing to one,
    as :meth:`KernelAttentionClassifier.predict_proba` divides them."""
    return predictions / predictions.sum(axis=-1, keepdims=True)


def _log_losses(proba, true, weights):
    """``log_loss`` of every candidate's probabilities at once.

    ``proba`` is (n_candidates, n, n_classes), ``true`` the column of each
    point's class and ``weights`` its weight (or None). The probability of
    the true class is clipped to ``[eps, 1 - eps]``, as
    :func:`sklearn.metrics.log_loss` does.
    """
    p = proba[:, np.arange(len(true)), true]
    losses = -np.log(np.clip(p, _EPS, 1.0 - _EPS))
    if weights is None:
        return losses.mean(axis=1)
    return losses @ weights / weights.sum()


def _not_a_classification_scorer(scorer):
    """Why a scikit-learn scorer cannot score a classifier, or ""."""
    metric = getattr(scorer, "_score_func", None)
    module = getattr(metric, "__module__", None) or ""
    if module.startswith("sklearn.metrics._regression"):
        return f"scores with {metric.__name__}, a regression metric"
    return ""


class _Probabilities(ClassifierMixin, BaseEstimator):
    """Stands in for a fitted classifier whose probabilities are known.

    ``predict`` is the first class of largest probability, as
    :class:`KernelAttentionClassifier` breaks ties.
    """

    def __init__(self, proba, classes):
        self.proba = proba
        self.classes = classes

    @property
    def classes_(self):
        return self.classes

    def predict_proba(self, X):
        return self.proba

    def predict_log_proba(self, X):
        with np.errstate(divide="ignore"):
            return np.log(self.proba)

    def predict(self, X):
        return self.classes[np.argmax(self.proba, axis=1)]


class ProbabilityScoring:
    """The scores of held-out probabilities of a classifier.

    ``estimator`` is the :class:`KernelAttentionClassifierCV` whose
    ``scoring`` and ``on_empty`` apply; ``labels`` the training labels,
    ``true`` the column of each in ``classes``. The scorer is made before
    the search (:meth:`check_scorer`): None scores the log-loss.
    """

    # Whether the one-standard-error rule of the degree applies on small
    # tables (:func:`._degree_rule.keep_local_linear`).
    uses_degree_rule = False
    # Whether ``per_feature="auto"`` learns widths on its candidates.
    learns_widths = True

    objective = "log_loss"
    loss_name = None  # the out-of-fold losses of the guard are not printed

    def __init__(self, estimator, labels, true, classes):
        self.estimator = estimator
        self.labels = labels
        self.true = true
        self.classes = classes
        self.classifier_scorer = None

    def check_scorer(self, weighted):
        """Make the scorer of ``scoring``, refusing regression scorers."""
        scoring = self.estimator.scoring
        if scoring is None:
            return None
        scorer = check_scoring(self.estimator, scoring=scoring)
        problem = _not_a_classification_scorer(scorer)
        if problem:
            raise ValueError(
                f"scoring={scoring!r} {problem}; KernelAttentionClassifierCV "
                "is a classifier and needs a classification scorer, such as "
                "'accuracy', 'neg_log_loss' or 'roc_auc', or None (the negative "
                "log-loss)."
            )
        if weighted:
            check_weighted_scorer(scorer, scoring, "scores")
        self.classifier_scorer = scorer
        return scorer

    def default_scorer(self):
        """The estimator's ``score`` (unused: None scores the log-loss)."""
        return check_scoring(self.estimator, scoring=None)

    def scorer(self, weighted):
        """The scorer made by :meth:`check_scorer`."""
        return self.classifier_scorer

    def check_small_folds(self, splits, scorer, X, y, sample_weight):
        """Refuse empty test sets (the log-loss is defined on one sample)."""
        if min((len(test) for _, test in splits), default=1) == 0:
            raise ValueError(
                "cv gives a split with an empty test set; every split must "
                "hold out at least one sample."
            )

    def _proba_score(self, scorer, proba, classes, rows, weights, invalid):
        if invalid:
            return np.nan
        kwargs = {} if weights is None else {"sample_weight": weights}
        # The stand-in ignores X: an index column serves.
        X = rows[:, None]
        return float(
            scorer(_Probabilities(proba, classes), X, self.labels[rows], **kwargs)
        )

    def loo_scores(
        self, held_out, predictions, empty, X, y, weights, scorer, weighted, shrunk=None
    ):
        """``mean_test_score`` and ``loo_log_loss`` of the leave-one-out
        probabilities of every candidate."""
        proba = _normalised(predictions)
        loss = _log_losses(proba, self.true, weights)
        loss[(self.estimator.on_empty == "raise") & empty.any(axis=1)] = np.nan
        if scorer is None:
            scores = -loss
        else:
            rows = np.arange(len(self.labels))
            w = weights if weighted else None
            scores = np.array(
                [
                    self._proba_score(scorer, p, self.classes, rows, w, bad)
                    for p, bad in zip(proba, np.isnan(loss), strict=True)
                ]
            )
        return {"mean_test_score": scores, "loo_log_loss": loss}

    def split_scores(self, held_out, split, predictions, bad, X, y, w_test, scorer):
        """The score of every candidate on one K-fold split."""
        train, test = split
        proba = _normalised(predictions)
        if self.classifier_scorer is None:
            scores = -_log_losses(proba, self.true[test], w_test)
            scores[bad] = np.nan
            return scores
        # The classes of the classifier fitted on the training part; the
        # others have no key there and probability 0.
        present = np.unique(self.true[train])
        return np.array(
            [
                self._proba_score(
                    scorer,
                    proba[c][:, present],
                    self.classes[present],
                    test,
                    w_test,
                    bad[c],
                )
                for c in range(len(proba))
            ]
        )

    def learned_loo_score(self, predictions, X, y, weights, scorer, weighted):
        """The score of the leave-one-out probabilities of learned widths."""
        rows = np.arange(len(self.labels))
        return self._proba_score(
            scorer,
            _normalised(predictions),
            self.classes,
            rows,
            weights if weighted else None,
            False,
        )

    def learned_split_score(self, split, predictions, X, y, w_test, scorer, weighted):
        """The score on one split of the out-of-fold probabilities of the
        widths learned on its training part."""
        return self.split_scores(
            None,
            split,
            predictions[split[1]][None],
            np.zeros(1, dtype=bool),
            X,
            y,
            w_test,
            scorer,
        )[0]
