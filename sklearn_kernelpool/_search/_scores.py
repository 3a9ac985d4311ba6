"""How the bandwidth search scores a regressor's held-out predictions.

:class:`RegressionScoring` is the scoring policy of
:class:`._candidates.CandidateSearch` for :class:`KernelAttentionRegressorCV`:
the leave-one-out squared error or a regression scorer, R^2 under K-fold.
"""

import inspect
import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import check_scoring

from .._held_out._criteria import SMOOTHER_CRITERIA


class _Predicted(RegressorMixin, BaseEstimator):
    """Stands in for a fitted estimator whose predictions are known.

    Lets any scikit-learn scorer score held-out predictions computed in one
    pass, instead of refitting an estimator per split and candidate.
    """

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, X):
        return self.predictions


def _accepts_sample_weight(scorer):
    # A scikit-learn scorer passes its keyword arguments on to its metric.
    scorer = getattr(scorer, "_score_func", scorer)
    try:
        parameters = inspect.signature(scorer).parameters
    except (TypeError, ValueError):
        return True
    return "sample_weight" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def check_weighted_scorer(scorer, scoring, what):
    """Refuse a scorer that cannot weigh the held-out ``what`` (errors,
    scores) by their sample weights."""
    if not _accepts_sample_weight(scorer):
        raise ValueError(
            f"With sample_weight, scoring={scoring!r} must accept a "
            f"sample_weight keyword argument: the held-out {what} are "
            "weighted. Use a weighted metric, or no sample_weight."
        )


def _not_a_regression_scorer(scorer):
    """Why a scikit-learn scorer cannot score a regressor, or "".

    A scorer made by scikit-learn (by name or ``make_scorer``) names the
    method it calls and its metric: it scores a regressor when it calls
    ``predict`` and its metric, if scikit-learn's, is one of
    :mod:`sklearn.metrics`' regression metrics (not a classification,
    ranking or clustering one). Other callables are trusted.
    """
    response = getattr(scorer, "_response_method", "predict")
    if response != "predict":
        return f"scores the output of {response}, which a regressor does not have"
    metric = getattr(scorer, "_score_func", None)
    module = getattr(metric, "__module__", None) or ""
    if module.startswith("sklearn.") and not module.startswith(
        "sklearn.metrics._regression"
    ):
        return f"scores with {metric.__name__}, a classification or clustering metric"
    return ""


def _r2_scores(Y, predictions, sample_weight):
    """R^2 of every candidate's predictions, as ``r2_score`` computes it.

    ``Y`` is (n, n_outputs) and ``predictions`` (n_candidates, n, n_outputs);
    outputs are averaged uniformly, and an output without variance scores 1
    when predicted exactly and 0 otherwise (``force_finite=True``).
    """
    w = np.ones(len(Y)) if sample_weight is None else sample_weight
    numerator = np.einsum("i,cio->co", w, (Y[None] - predictions) ** 2)
    mean = np.average(Y, axis=0, weights=w)
    denominator = w @ (Y - mean) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = 1.0 - numerator / denominator
    constant = denominator == 0
    scores[:, constant] = np.where(numerator[:, constant] == 0, 1.0, 0.0)
    return scores.mean(axis=1)


class RegressionScoring:
    """The scores of held-out predictions of a regressor.

    ``estimator`` is the :class:`KernelAttentionRegressorCV` whose
    ``scoring``, ``cv`` and ``on_empty`` apply. The hooks of
    :class:`._candidates.CandidateSearch`: :meth:`scorer`,
    :meth:`check_small_folds`, :meth:`loo_scores`, :meth:`split_scores` and
    the scores of learned per-feature widths.
    """

    # Whether the one-standard-error rule of the degree applies on small
    # tables (:func:`._degree_rule.keep_local_linear`).
    uses_degree_rule = True
    # Whether ``per_feature="auto"`` learns widths on its candidates.
    learns_widths = True

    # The leave-one-out loss that per-feature widths minimise, and its name
    # in the verbose output.
    objective = "squared_error"
    loss_name = "mean squared error"

    def __init__(self, estimator):
        self.estimator = estimator

    def default_scorer(self):
        """The estimator's ``score``, R^2."""
        return check_scoring(self.estimator, scoring=None)

    def scorer(self, weighted):
        """The scorer of ``scoring``, None for the default scores; a
        classification scorer, or one that cannot weigh the held-out errors
        when ``weighted``, is refused."""
        scoring = self.estimator.scoring
        if scoring is None or (
            isinstance(scoring, str) and scoring in SMOOTHER_CRITERIA
        ):
            return None
        scorer = check_scoring(self.estimator, scoring=scoring)
        problem = _not_a_regression_scorer(scorer)
        if problem:
            raise ValueError(
                f"scoring={scoring!r} {problem}; KernelAttentionRegressorCV "
                "is a regressor and needs a regression scorer, such as 'r2', "
                "'neg_mean_squared_error' or 'neg_mean_absolute_error', or None "
                "(the negative mean squared error under leave-one-out, R^2 "
                "under K-fold)."
            )
        if weighted:
            check_weighted_scorer(scorer, scoring, "errors")
        return scorer

    def check_small_folds(self, splits, scorer, X, y, sample_weight):
        """Refuse test folds of one sample that the scorer cannot score.

        A test fold of one sample (``KFold`` with as many folds as samples,
        ``LeaveOneOut``) is scored on that sample alone, where R^2 (the
        default under K-fold) and other scores relative to the held-out
        spread are undefined. The scorer is tried on the first such fold with
        exact and with wrong predictions: an ``UndefinedMetricWarning``, a
        non-finite score or the same score for both refuses it. ``cv=None``
        is the exact leave-one-out, scored over all the held-out predictions
        at once.
        """
        cv, scoring = self.estimator.cv, self.estimator.scoring
        sizes = [len(test) for _, test in splits]
        if min(sizes, default=1) == 0:
            raise ValueError(
                f"cv={cv!r} gives a split with an empty test set; every "
                "split must hold out at least one sample."
            )
        small = [test for _, test in splits if len(test) < 2]
        if not small:
            return
        test = small[0]
        if scorer is None:
            scorer = self.default_scorer()
        w_test = None if sample_weight is None else sample_weight[test]
        exact = y[test].astype(np.float64)
        scores = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UndefinedMetricWarning)
            for predictions in (exact, exact + 1.0 + np.abs(exact)):
                scores.append(
                    self._score(
                        scorer,
                        predictions,
                        X[test],
                        y[test],
                        w_test,
                        False,
                        w_test is not None,
                    )
                )
        undefined = any(issubclass(w.category, UndefinedMetricWarning) for w in caught)
        if undefined or not np.all(np.isfinite(scores)) or scores[0] == scores[1]:
            name = "None (R^2)" if scoring is None else repr(scoring)
            raise ValueError(
                f"cv={cv!r} holds out a single sample in {len(small)} of "
                f"its {len(splits)} splits, where scoring={name} is undefined "
                "or cannot tell predictions apart. For leave-one-out use "
                "cv=None, the exact leave-one-out scored over all the held-out "
                "predictions at once; or use fewer folds."
            )

    def loo_scores(
        self, held_out, predictions, empty, X, y, weights, scorer, weighted, shrunk=None
    ):
        """``mean_test_score`` and ``loo_mse`` of the leave-one-out predictions.

        ``predictions`` (candidates, n, outputs) are those of every point,
        fallbacks included; ``empty`` (candidates, n) the points that fell
        back.
        """
        errors = np.mean((predictions - held_out.Y[None]) ** 2, axis=2)
        loo_mse = errors @ weights / weights.sum()
        invalid = self.estimator.on_empty in ("nan", "raise")
        loo_mse[invalid & empty.any(axis=1)] = np.nan
        if scorer is None:
            scores = -loo_mse
        else:
            scores = np.array(
                [
                    self._score(scorer, pred, X, y, weights, bad, weighted)
                    for pred, bad in zip(predictions, np.isnan(loo_mse), strict=True)
                ]
            )
        return {"mean_test_score": scores, "loo_mse": loo_mse}

    def split_scores(self, held_out, split, predictions, bad, X, y, w_test, scorer):
        """The score of every candidate on one K-fold split.

        ``split`` is its (train, test) pair, ``predictions`` (candidates,
        n_test, outputs) the held-out predictions of its test points and
        ``bad`` the candidates not eligible on it.
        """
        test = split[1]
        if self.estimator.scoring is None and len(test) > 1:
            # The estimator's score, R^2, for every candidate at once.
            scores = _r2_scores(held_out.Y[test], predictions, w_test)
            scores[bad] = np.nan
            return scores
        return np.array(
            [
                self._score(
                    scorer,
                    predictions[c],
                    X[test],
                    y[test],
                    w_test,
                    bad[c],
                    weighted=w_test is not None,
                )
                for c in range(len(predictions))
            ]
        )

    def _score(self, scorer, predictions, X, y, weights, invalid, weighted):
        if invalid:
            return np.nan
        predictions = predictions.reshape(y.shape)
        kwargs = {"sample_weight": weights} if weighted else {}
        return float(scorer(_Predicted(predictions), X, y, **kwargs))

    def learned_loo_score(self, predictions, X, y, weights, scorer, weighted):
        """The score of the leave-one-out predictions of learned widths."""
        return self._score(scorer, predictions, X, y, weights, False, weighted)

    def learned_split_score(self, split, predictions, X, y, w_test, scorer, weighted):
        """The score on one split of the out-of-fold predictions of the
        widths learned on its training part."""
        test = split[1]
        return self._score(
            scorer or self.default_scorer(),
            predictions[test],
            X[test],
            y[test],
            w_test,
            False,
            weighted,
        )
