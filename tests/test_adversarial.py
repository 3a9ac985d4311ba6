"""Adversarial inputs, one table row each, with the exact outcome.

A row is an input (estimator parameters, training data, queries) and its
outcome: ``Raises(error, fragment, stage)`` for a clear error at ``fit`` or
``predict``, or ``Returns(expected)`` for the defined result, an array or a
function of the row's data. Whatever a row expects, no prediction may be NaN
unless ``on_empty="nan"`` asked for it, and no row may hang (a watchdog
stops the run).

Every row runs against every estimator of ``FACTORIES``: the regressor, the
classifier (its output is ``predict_proba``, its targets the labels
``LABELS`` where the regressor's are ``y``) and ``KernelAttentionRegressorCV``
(``kernel`` and ``bandwidth`` become ``kernels`` and ``bandwidths=[h]``).
A row states the outcome per estimator where it differs (``outcomes``), and
``NotApplicable`` where the input means nothing to an estimator (a callable
kernel for the CV); such pairs are not generated.
"""

import copy
import datetime
import faulthandler
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)

rng = np.random.default_rng(0)
X = rng.uniform(size=(6, 2))
y = rng.uniform(size=6)
Q = rng.uniform(size=(4, 2))
LABELS = np.array([0, 1, 0, 1, 1, 0])  # the classifier's targets


def cv_params(params):
    """The CV's parameters for a row's, or None where they have no equivalent."""
    out = {}
    for name, value in params.items():
        if name == "kernel":
            if callable(value):
                return None
            out["kernels"] = value
        elif name == "bandwidth":
            if isinstance(value, str) or np.ndim(value) != 0:
                return None
            out["bandwidths"] = [value]
        else:
            out[name] = value
    # The search of KernelAttentionRegressor's own defaults: local-constant
    # pooling at fixed widths.
    out.setdefault("degree", 0)
    out.setdefault("n_neighbors", None)
    return out


@dataclass
class Factory:
    """How an estimator runs the rows."""

    make: Callable  # row parameters -> unfitted estimator, or None
    output: Callable  # (fitted estimator, queries) -> array
    classifier: bool = False


FACTORIES = {
    "regressor": Factory(
        lambda params: KernelAttentionRegressor(**params),
        lambda est, Q: est.predict(Q),
    ),
    "classifier": Factory(
        lambda params: KernelAttentionClassifier(**params),
        lambda est, Q: est.predict_proba(Q),
        classifier=True,
    ),
    "cv": Factory(
        lambda params: (
            None
            if cv_params(params) is None
            else KernelAttentionRegressorCV(**cv_params(params))
        ),
        lambda est, Q: est.predict(Q),
    ),
}


@pytest.fixture(autouse=True)
def watchdog():
    """Dump the stacks and stop the run if a row hangs for 60 s."""
    faulthandler.dump_traceback_later(60, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@dataclass
class Raises:
    error: type
    fragment: str
    stage: str = "fit"


@dataclass
class Returns:
    expected: Any  # an array, or a function of the row giving one
    rtol: float = 1e-12
    atol: float = 0.0
    warns: type | None = None


class NotApplicable:
    """The row's input means nothing to this estimator."""


class Row:
    """An input: parameters, training data and queries (the defaults above).

    ``labels`` are the classifier's targets: ``LABELS`` where ``y`` is the
    default, else ``y`` itself (an adversarial target). ``outcomes`` maps an
    estimator of ``FACTORIES`` to its outcome where it differs from
    ``outcome``.
    """

    def __init__(
        self, outcome, params=None, X=X, y=y, w=None, Q=Q, labels=None, **outcomes
    ):
        self.outcome, self.params = outcome, params or {}
        self.X, self.y, self.w, self.Q = X, y, w, Q
        self.labels = labels if labels is not None else LABELS if y is Y0 else y
        self.outcomes = outcomes
        self.factory = None

    def bound(self, name):
        """A copy of the row for the estimator ``name``, or None."""
        row = copy.copy(self)
        row.factory = FACTORIES[name]
        row.outcome = self.outcomes.get(name, self.outcome)
        if row.outcome is NotApplicable or row.factory.make(self.params) is None:
            return None
        return row

    @property
    def target(self):
        """The targets this row's estimator is fitted on."""
        return self.labels if self.factory.classifier else self.y

    def fit(self, **params):
        est = self.factory.make({**self.params, **params})
        return est.fit(self.X, self.target, sample_weight=self.w)


Y0 = y


def reference(row, X_=None, y_=None, Q_=None, w_="row", **params):
    """The output on well-behaved data the row is equivalent to.

    ``y_`` defaults to the row's targets, and is a function of them when
    callable.
    """
    est = row.factory.make({**row.params, **params})
    X_ = np.asarray(row.X if X_ is None else X_, dtype=float)
    w_ = row.w if isinstance(w_, str) else w_
    y_ = row.target if y_ is None else y_(row.target) if callable(y_) else y_
    est.fit(X_, y_, sample_weight=w_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        return row.factory.output(
            est, np.asarray(row.Q if Q_ is None else Q_, dtype=float)
        )


def mean_of(row, n_queries):
    """The weighted mean of the row's targets (one-hot for the classifier)."""
    mean = np.average(encoded(row), axis=0, weights=row.w)
    return np.broadcast_to(mean, (n_queries, *mean.shape))


def with_value(a, value, index=1):
    a = np.array(a, dtype=float)
    a.flat[index] = value
    return a


def kernel_raising(x):
    raise RuntimeError("the kernel failed")


def kernel_negative(x):
    return 0.5 - x


def kernel_nan(x):
    return np.where(x > 0.3, np.nan, 1.0)


def kernel_flat(x):
    return np.exp(-x).ravel()


def kernel_huge(x):
    return np.full(x.shape, 1e308)


def kernel_tiny(x):
    return 1e-300 * np.exp(-x)


dates = np.array(["2020-01-01", "2020-01-02"] * 3, dtype="datetime64[D]")
frame = pd.DataFrame(X, columns=["a", "b"])
query_frame = pd.DataFrame(Q, columns=["a", "b"])
X1 = np.repeat(X[:1], 6, axis=0)  # all keys identical
wide_X = rng.uniform(size=(20, 10_000))
wide_Q = rng.uniform(size=(3, 10_000))
wide_y = rng.uniform(size=20)


def encoded(row):
    """The row's targets as the estimator pools them (one-hot labels)."""
    target = np.asarray(row.target)
    if row.factory.classifier:
        return (target[:, None] == np.unique(target)[None, :]) * 1.0
    return target


def wide_reference(row):
    d2 = ((wide_Q[:, None, :] - wide_X[None]) ** 2).sum(axis=-1)
    logits = -0.5 * d2 / row.params["bandwidth"] ** 2
    a = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (
        a @ encoded(row) / a.sum(axis=1, keepdims=a.ndim > 1 and row.factory.classifier)
    )


UNKNOWN_LABEL = Raises(ValueError, "Unknown label type: continuous")
NO_CANDIDATE = Raises(ValueError, "No candidate could be scored")


ROWS = {
    # -- non-finite values ---------------------------------------------------
    "nan in X": Row(
        Raises(ValueError, "Input X contains NaN"), X=with_value(X, np.nan)
    ),
    "+inf in X": Row(
        Raises(ValueError, "Input X contains inf"), X=with_value(X, np.inf)
    ),
    "-inf in X": Row(
        Raises(ValueError, "Input X contains inf"), X=with_value(X, -np.inf)
    ),
    "nan in y": Row(
        Raises(ValueError, "Input y contains NaN"), y=with_value(y, np.nan)
    ),
    "inf in y": Row(
        Raises(ValueError, "Input y contains inf"), y=with_value(y, np.inf)
    ),
    "nan weight": Row(
        Raises(ValueError, "sample_weight contains NaN"),
        w=with_value(np.ones(6), np.nan),
    ),
    "inf weight": Row(
        Raises(ValueError, "sample_weight contains inf"),
        w=with_value(np.ones(6), np.inf),
    ),
    "+inf and -inf in X": Row(
        Raises(ValueError, "Input X contains inf"),
        X=with_value(with_value(X, np.inf), -np.inf, 2),
    ),
    "+inf and -inf weights": Row(
        Raises(ValueError, "sample_weight contains inf"),
        w=with_value(with_value(np.ones(6), np.inf), -np.inf, 2),
    ),
    "nan query": Row(
        Raises(ValueError, "Input X contains NaN", "predict"), Q=with_value(Q, np.nan)
    ),
    "-inf query": Row(
        Raises(ValueError, "Input X contains inf", "predict"), Q=with_value(Q, -np.inf)
    ),
    # -- huge and tiny values ------------------------------------------------
    "X of 1e300, bandwidth 1": Row(
        Raises(ValueError, "divided by the bandwidth has coordinates up to 1e+300"),
        X=with_value(X, 1e300),
        # The CV squares distances of the data as it is.
        cv=Raises(ValueError, "X has values up to 1e+300; past 1.19e+153 (float64"),
    ),
    "X and bandwidth of 1e300": Row(
        Returns(lambda row: reference(row, X_=X, Q_=Q, bandwidth=1.0)),
        params={"bandwidth": 1e300},
        X=X * 1e300,
        Q=Q * 1e300,
        cv=Raises(ValueError, "squared distances overflow. Rescale X"),
    ),
    "X of 1e-300, bandwidth 1: the weighted mean": Row(
        Returns(lambda row: mean_of(row, 4)),
        X=X * 1e-300,
        Q=Q * 1e-300,
        # The automatic grid follows X to bandwidths of about 1e-300.
        cv=Raises(ValueError, "automatic bandwidths, which follow the scale of X"),
    ),
    "X and bandwidth of 1e-300": Row(
        Returns(lambda row: reference(row, X_=X, Q_=Q, bandwidth=1.0)),
        params={"bandwidth": 1e-300},
        X=X * 1e-300,
        Q=Q * 1e-300,
        cv=Raises(ValueError, "The bandwidths must lie between 5.97e-154 and"),
    ),
    "bandwidth 1e-300": Row(
        Raises(ValueError, "Rescale X (for example with a StandardScaler) or use a"),
        params={"bandwidth": 1e-300},
        cv=Raises(ValueError, "The bandwidths must lie between 5.97e-154 and"),
    ),
    "query of 1e300": Row(
        Raises(ValueError, "coordinates up to 1e+300", "predict"),
        Q=with_value(Q, 1e300),
        # Divided by the selected bandwidth.
        cv=Raises(ValueError, "divided by the bandwidth has coordinates", "predict"),
    ),
    "query of 1e-300 is the query at 0": Row(
        Returns(lambda row: reference(row, Q_=np.zeros((1, 2)))),
        Q=np.full((1, 2), 1e-300),
    ),
    "query 1e9 bandwidths away: the nearest key": Row(
        # The other keys keep probabilities of exp(-700) at most.
        Returns(lambda row: encoded(row)[[np.argmin(X[:, 0])]], atol=1e-300),
        Q=np.array([[-1e9, 0.5]]),
    ),
    "y of 1e300": Row(
        Returns(lambda row: 1e300 * reference(row, y_=y)),
        y=y * 1e300,
        classifier=UNKNOWN_LABEL,
        cv=Raises(ValueError, "y has values up to 8.63e+299; past 1.68e+153"),
    ),
    "y near the float64 maximum": Row(
        Returns(lambda row: 1.7e308 * reference(row, y_=y)),
        y=y * 1.7e308,
        classifier=UNKNOWN_LABEL,
        cv=Raises(ValueError, "squared errors overflow. Rescale y"),
    ),
    "y of 1e-300": Row(
        Returns(lambda row: 1e-300 * reference(row, y_=y)),
        y=y * 1e-300,
        classifier=UNKNOWN_LABEL,
        # Squared errors of 1e-600 underflow: every candidate scores 0.
        cv=NotApplicable,
    ),
    "weights of 1e300": Row(
        Returns(lambda row: reference(row, w_=None)), w=np.full(6, 1e300)
    ),
    "weights of 1e308": Row(
        Returns(lambda row: reference(row, w_=None)), w=np.full(6, 1e308)
    ),
    "weights of 1e-300": Row(
        Returns(lambda row: reference(row, w_=None)), w=np.full(6, 1e-300)
    ),
    "weights spanning 1e600": Row(
        Raises(ValueError, "sample_weight spans too wide a range for float64"),
        w=np.array([1e300, 1e-300, 1, 1, 1, 1]),
    ),
    "float32 X, weights spanning 1e60": Row(
        Raises(ValueError, "or use float64 X"),
        X=X.astype(np.float32),
        w=np.array([1e30, 1e-30, 1, 1, 1, 1]),
    ),
    "float32 X, y of 1e300": Row(
        Raises(ValueError, "beyond the range of float32"),
        X=X.astype(np.float32),
        y=y * 1e300,
        classifier=UNKNOWN_LABEL,
        cv=Raises(ValueError, "squared errors overflow. Rescale y"),
    ),
    "float32 X of 1e30, bandwidth 1": Row(
        Raises(ValueError, "past 1.63e+18 (float32, 2 features)"),
        params={"bandwidth": 1.0},
        X=(X * 1e30).astype(np.float32),
    ),
    "scott rule, weights of 1e308": Row(
        Returns(lambda row: reference(row, w_=None, bandwidth=row_bandwidth(row))),
        params={"bandwidth": "scott"},
        w=np.full(6, 1e308),
    ),
    "scott rule, X of 1e200": Row(
        Returns(lambda row: reference(row, X_=X, Q_=Q)),
        params={"bandwidth": "scott"},
        X=X * 1e200,
        Q=Q * 1e200,
    ),
    # -- shapes --------------------------------------------------------------
    "empty X": Row(
        Raises(ValueError, "0 sample(s)"), X=np.empty((0, 2)), y=np.empty(0)
    ),
    "one row": Row(
        Returns(lambda row: mean_of(row, 4)),
        X=X[:1],
        y=y[:1],
        labels=LABELS[:1],
        cv=Raises(ValueError, "Leave-one-out needs at least two samples"),
    ),
    "one row, compact kernel, far query": Row(
        Returns(lambda row: mean_of(row, 1), warns=EmptyNeighborhoodWarning),
        params={"kernel": "epanechnikov"},
        X=X[:1],
        y=y[:1],
        labels=LABELS[:1],
        Q=np.array([[9.0, 9.0]]),
        cv=Raises(ValueError, "Leave-one-out needs at least two samples"),
    ),
    "one feature": Row(
        Returns(lambda row: reference(row, X_=X[:, :1], Q_=Q[:, :1])),
        X=X[:, 0:1],
        Q=Q[:, :1],
    ),
    "10 000 features": Row(
        Returns(wide_reference, rtol=1e-10),
        params={"bandwidth": 10.0},
        X=wide_X,
        y=wide_y,
        labels=(wide_y > 0.5) * 1,
        Q=wide_Q,
    ),
    "empty queries": Row(
        Raises(ValueError, "0 sample(s)", "predict"), Q=np.empty((0, 2))
    ),
    "queries with 3 features": Row(
        Raises(ValueError, "X has 3 features, but", "predict"), Q=np.ones((2, 3))
    ),
    "1-D queries": Row(Raises(ValueError, "Expected 2D array", "predict"), Q=Q[0]),
    # -- degenerate data -----------------------------------------------------
    "duplicate keys are weight 2": Row(
        Returns(
            lambda row: reference(row, X_=X[:5], y_=lambda t: t[1:], w_=[2, 1, 1, 1, 1])
        ),
        X=np.vstack([X[:1], X[:5]]),
        y=np.r_[y[:1], y[:5]],
        labels=np.r_[LABELS[:1], LABELS[:5]],
        # Leave-one-out removes a point's whole weight: weight 2 is not a
        # duplicate there (see the Notes of KernelAttentionRegressorCV).
        cv=NotApplicable,
    ),
    "all keys identical: the weighted mean": Row(
        Returns(lambda row: mean_of(row, 4)), X=X1
    ),
    "all keys identical, boxcar, far query": Row(
        Returns(lambda row: mean_of(row, 1), warns=EmptyNeighborhoodWarning),
        params={"kernel": "boxcar", "bandwidth": 0.1},
        X=X1,
        Q=np.array([[5.0, 5.0]]),
    ),
    "all keys identical, on_empty='raise'": Row(
        Raises(ValueError, "1 of 2 queries have no training key", "predict"),
        params={"kernel": "boxcar", "bandwidth": 0.1, "on_empty": "raise"},
        X=X1,
        Q=np.vstack([X1[:1], [[5.0, 5.0]]]),
    ),
    "constant y": Row(
        Returns(np.full(4, 0.1), rtol=4e-16),
        y=np.full(6, 0.1),
        classifier=UNKNOWN_LABEL,
    ),
    "on_empty='raise' with some empty neighbourhoods": Row(
        Raises(ValueError, "2 of 4 queries have no training key", "predict"),
        params={"kernel": "biweight", "bandwidth": 0.5, "on_empty": "raise"},
        Q=np.vstack([Q[:2], [[9.0, 9.0], [-9.0, 0.0]]]),
        cv=NO_CANDIDATE,
    ),
    "on_empty='nan' with some empty neighbourhoods": Row(
        Returns(
            lambda row: np.r_[reference(row, Q_=Q[:2]), np.nan],
            warns=EmptyNeighborhoodWarning,
        ),
        params={"kernel": "biweight", "bandwidth": 0.5, "on_empty": "nan"},
        Q=np.vstack([Q[:2], [[9.0, 9.0]]]),
        # NaN probabilities have no argmax.
        classifier=Raises(InvalidParameterError, "'on_empty' parameter"),
        cv=NO_CANDIDATE,
    ),
    # -- column types --------------------------------------------------------
    "integer X": Row(
        Returns(
            lambda row: reference(row, X_=np.arange(12.0).reshape(6, 2), Q_=[[1, 2]])
        ),
        X=np.arange(12).reshape(6, 2),
        Q=np.array([[1, 2]]),
    ),
    "bool X is 0 and 1": Row(
        Returns(lambda row: reference(row, X_=(X > 0.5) * 1.0, Q_=[[1.0, 0.0]])),
        X=X > 0.5,
        Q=np.array([[True, False]]),
    ),
    "bool y is 0 and 1": Row(
        Returns(lambda row: reference(row, y_=lambda t: t * 1.0)), y=y > 0.5
    ),
    "float16 X: float64 predictions": Row(
        Returns(lambda row: reference(row, X_=X.astype(np.float16).astype(float))),
        X=X.astype(np.float16),
    ),
    "numeric object X": Row(
        Returns(lambda row: reference(row, X_=X)), X=X.astype(object)
    ),
    "string X": Row(
        Raises(ValueError, "X holds strings, for example 'a' in column 0"),
        X=np.array([["a", "b"]] * 6, dtype=object),
    ),
    "complex X": Row(Raises(ValueError, "Complex data not supported"), X=X + 1j),
    "complex y": Row(Raises(ValueError, "Complex data not supported"), y=y + 1j),
    "string labels": Row(
        NotApplicable,
        labels=np.array(["b", "a", "b", "a", "a", "b"], dtype=object),
        classifier=Returns(
            lambda row: reference(row, y_=LABELS[::-1] * 0 + 1 - LABELS)
        ),
    ),
    "datetime64 X": Row(
        Raises(ValueError, "holds dates, times or durations (datetime64[D])"),
        X=dates.reshape(6, 1),
    ),
    "timedelta64 X": Row(
        Raises(ValueError, "holds dates, times or durations (timedelta64[s])"),
        X=np.arange(6).astype("timedelta64[s]").reshape(6, 1),
    ),
    "datetime.date objects": Row(
        Raises(ValueError, "holds dates, times or durations (date)"),
        X=np.array([[datetime.date(2020, 1, i + 1)] for i in range(6)], dtype=object),
    ),
    "datetime64 queries": Row(
        Raises(ValueError, "holds dates, times or durations", "predict"),
        X=np.arange(6.0).reshape(6, 1),
        Q=dates[:2].reshape(2, 1),
    ),
    "pandas datetime column": Row(
        Raises(ValueError, "holds dates, times or durations (datetime64"),
        X=pd.DataFrame({"a": pd.to_datetime(dates), "b": X[:, 1]}),
    ),
    # -- pandas --------------------------------------------------------------
    "pandas frames": Row(
        Returns(lambda row: reference(row, X_=X, Q_=Q)), X=frame, Q=query_frame
    ),
    "pandas queries with reordered columns": Row(
        Raises(ValueError, "Feature names must be in the same order", "predict"),
        X=frame,
        Q=query_frame[["b", "a"]],
    ),
    "pandas queries with renamed columns": Row(
        Raises(ValueError, "Feature names unseen at fit time", "predict"),
        X=frame,
        Q=query_frame.rename(columns={"a": "c"}),
    ),
    "pandas fit, array queries": Row(
        Returns(lambda row: reference(row, X_=X), warns=UserWarning), X=frame
    ),
    # -- sparse input: the predictions of its dense copy ---------------------
    "sparse X": Row(
        Returns(lambda row: reference(row, X_=X), rtol=0.0), X=sp.csr_matrix(X)
    ),
    "sparse queries": Row(
        Returns(lambda row: reference(row, Q_=Q), rtol=0.0), Q=sp.csr_array(Q)
    ),
    # -- parameters ----------------------------------------------------------
    "bandwidth 0": Row(
        Raises(InvalidParameterError, "'bandwidth'"),
        params={"bandwidth": 0},
        cv=Raises(ValueError, "Every bandwidth must be a finite float > 0; got [0.0]"),
    ),
    "negative bandwidth": Row(
        Raises(InvalidParameterError, "'bandwidth'"),
        params={"bandwidth": -1.0},
        cv=Raises(ValueError, "Every bandwidth must be a finite float > 0"),
    ),
    "nan bandwidth": Row(
        Raises(InvalidParameterError, "'bandwidth'"),
        params={"bandwidth": np.nan},
        cv=Raises(ValueError, "Every bandwidth must be a finite float > 0"),
    ),
    "inf bandwidth": Row(
        Raises(InvalidParameterError, "'bandwidth'"),
        params={"bandwidth": np.inf},
        cv=Raises(ValueError, "Every bandwidth must be a finite float > 0"),
    ),
    "string bandwidth": Row(
        Raises(InvalidParameterError, "among {'s"), params={"bandwidth": "wide"}
    ),
    "wrong-length bandwidth": Row(
        Raises(ValueError, "n_features = 2"), params={"bandwidth": [1.0, 2.0, 3.0]}
    ),
    "unknown kernel": Row(
        Raises(InvalidParameterError, "'kernel' parameter"),
        params={"kernel": "gauss"},
        cv=Raises(InvalidParameterError, "'kernels' parameter"),
    ),
    "kernel that raises": Row(
        Raises(RuntimeError, "the kernel failed", "predict"),
        params={"kernel": kernel_raising},
    ),
    "kernel with negative weights": Row(
        Raises(ValueError, "'kernel_negative' returned negative weights", "predict"),
        params={"kernel": kernel_negative},
    ),
    "kernel with NaN weights": Row(
        Raises(ValueError, "'kernel_nan' returned NaN or infinite", "predict"),
        params={"kernel": kernel_nan},
    ),
    "kernel of the wrong shape": Row(
        Raises(
            ValueError, "'kernel_flat' must return an array of the shape of its input"
        ),
        params={"kernel": kernel_flat},
    ),
    "kernel of weights 1e308": Row(
        Returns(lambda row: mean_of(row, 4)), params={"kernel": kernel_huge}
    ),
    "kernel of weights 1e-300": Row(
        Returns(lambda row: reference(row, kernel=lambda x: np.exp(-x))),
        params={"kernel": kernel_tiny},
    ),
    # -- state ---------------------------------------------------------------
    "predict before fit": Row(
        Raises(NotFittedError, "not fitted", "predict before fit")
    ),
    # -- the classifier's targets --------------------------------------------
    "continuous labels": Row(NotApplicable, labels=y, classifier=UNKNOWN_LABEL),
    "a single class: probability 1": Row(
        NotApplicable,
        labels=np.full(6, 3),
        classifier=Returns(np.ones((4, 1))),
    ),
    "2-D labels": Row(
        NotApplicable,
        labels=np.column_stack([LABELS, LABELS]),
        classifier=Raises(ValueError, "y should be a 1d array"),
    ),
    # -- the CV's candidates -------------------------------------------------
    "bandwidths of 1e300": Row(
        NotApplicable,
        params={"bandwidths": [1.0, 1e300]},
        cv=Raises(ValueError, "got bandwidths from 1 to 1e+300"),
    ),
    "bandwidths 2-D": Row(
        NotApplicable,
        params={"bandwidths": [[1.0, 2.0]]},
        cv=Raises(ValueError, "bandwidths must be an int >= 1 or a non-empty 1-D"),
    ),
    "no bandwidths": Row(
        NotApplicable,
        params={"bandwidths": []},
        cv=Raises(ValueError, "bandwidths must be an int >= 1 or a non-empty 1-D"),
    ),
    "string bandwidths": Row(
        NotApplicable,
        params={"bandwidths": ["a", "b"]},
        cv=Raises(ValueError, "bandwidths must be an int >= 1 or a non-empty 1-D"),
    ),
    "complex bandwidths": Row(
        NotApplicable,
        params={"bandwidths": [1j]},
        cv=Raises(ValueError, "bandwidths must be an int >= 1 or a non-empty 1-D"),
    ),
    "a grid of 0 bandwidths": Row(
        NotApplicable,
        params={"bandwidths": 0},
        cv=Raises(InvalidParameterError, "'bandwidths' parameter"),
    ),
    "no kernels": Row(
        NotApplicable,
        params={"kernels": []},
        cv=Raises(ValueError, "kernels must be a kernel name or a non-empty"),
    ),
    "an unknown kernel among kernels": Row(
        NotApplicable,
        params={"kernels": ["gaussian", "gauss"]},
        cv=Raises(ValueError, "got ['gaussian', 'gauss']"),
    ),
    "per-feature widths of a compact kernel": Row(
        NotApplicable,
        params={"kernels": "boxcar", "per_feature": True},
        cv=Raises(ValueError, "per_feature=True needs kernels with a log form"),
    ),
    "K-fold, weights of 1e308": Row(
        NotApplicable,
        params={"cv": 3, "bandwidths": [0.1, 0.3, 1.0]},
        w=np.full(6, 1e308),
        cv=Returns(lambda row: reference(row, w_=None)),
    ),
    "K-fold, y of 1e150": Row(
        NotApplicable,
        params={"cv": 3, "bandwidths": [0.1, 0.3, 1.0]},
        y=y * 1e150,
        cv=Returns(lambda row: 1e150 * reference(row, y_=y), rtol=1e-12),
    ),
}


def row_bandwidth(row):
    return row.fit().bandwidth_


CASES = [
    pytest.param(name, estimator, id=f"{estimator}-{name}")
    for name in ROWS
    for estimator in FACTORIES
    if ROWS[name].bound(estimator) is not None
]


@pytest.mark.parametrize(("name", "estimator"), CASES)
def test_adversarial_input(name, estimator):
    row = ROWS[name].bound(estimator)
    outcome = row.outcome
    est = row.factory.make(row.params)
    if isinstance(outcome, Raises):
        with pytest.raises(outcome.error, match=_escaped(outcome.fragment)):
            if outcome.stage == "predict before fit":
                row.factory.output(est, row.Q)
            else:
                row.fit()
                if outcome.stage == "predict":
                    row.factory.output(row.fit(), row.Q)
        return
    est = row.fit()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = row.factory.output(est, row.Q)
    categories = {w.category for w in caught}
    assert categories == ({outcome.warns} if outcome.warns else set())
    expected = outcome.expected(row) if callable(outcome.expected) else outcome.expected
    assert pred.shape == np.shape(expected)
    assert_allclose(
        pred, expected, rtol=outcome.rtol, atol=outcome.atol, equal_nan=True
    )
    if est.on_empty != "nan":
        assert np.all(np.isfinite(pred))
    if row.factory.classifier:
        assert np.all((pred >= 0) & (pred <= 1))
        assert_allclose(pred.sum(axis=1), 1.0, rtol=1e-12)
    if isinstance(est, KernelAttentionRegressorCV):
        # Every candidate was scored: none is NaN for lack of range.
        assert np.all(np.isfinite(est.cv_results_["mean_test_score"]))


def _escaped(fragment):
    import re

    return re.escape(fragment)


@pytest.mark.parametrize("estimator", FACTORIES)
def test_the_tags_say_sparse_is_accepted(estimator):
    assert get_tags(FACTORIES[estimator].make({})).input_tags.sparse


def test_a_rule_of_thumb_past_the_largest_float_is_a_documented_error():
    # A spread near the largest float and a tiny total weight: the width
    # overflows, which the rule refuses in words rather than warns about.
    X = np.array([[-1e300], [1e300]])
    reg = KernelAttentionRegressor(kernel="biweight", bandwidth="scott")
    with pytest.raises(ValueError, match="'scott' rule gives bandwidths"):
        reg.fit(X, np.zeros(2), sample_weight=np.full(2, 1e-291))
