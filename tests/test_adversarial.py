"""Adversarial inputs, one table row each, with the exact outcome.

A row is an input (estimator parameters, training data, queries) and its
outcome: ``Raises(error, fragment, stage)`` for a clear error at ``fit`` or
``predict``, or ``Returns(expected)`` for the defined result, an array or a
function of the row's data. Whatever a row expects, no prediction may be NaN
unless ``on_empty="nan"`` asked for it, and no row may hang (a watchdog
stops the run). The runner is shared: new estimators add their rows, or run
these rows with their own factory.
"""

import datetime
import faulthandler
import warnings
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

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionRegressor

rng = np.random.default_rng(0)
X = rng.uniform(size=(6, 2))
y = rng.uniform(size=6)
Q = rng.uniform(size=(4, 2))


def estimator(**params):
    """The estimator every row runs (a factory other estimators can swap)."""
    return KernelAttentionRegressor(**params)


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
    warns: type | None = None


class Row:
    """An input: parameters, training data and queries (the defaults above)."""

    def __init__(self, outcome, params=None, X=X, y=y, w=None, Q=Q):
        self.outcome, self.params = outcome, params or {}
        self.X, self.y, self.w, self.Q = X, y, w, Q


def reference(row, X_=None, y_=None, Q_=None, w_="row", **params):
    """The prediction of well-behaved data the row is equivalent to."""
    reg = estimator(**{**row.params, **params})
    X_ = np.asarray(row.X if X_ is None else X_, dtype=float)
    w_ = row.w if isinstance(w_, str) else w_
    reg.fit(X_, row.y if y_ is None else y_, sample_weight=w_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        return reg.predict(np.asarray(row.Q if Q_ is None else Q_, dtype=float))


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
mean_y = float(np.mean(y))
X1 = np.repeat(X[:1], 6, axis=0)  # all keys identical
wide_X = rng.uniform(size=(20, 10_000))
wide_Q = rng.uniform(size=(3, 10_000))
wide_y = rng.uniform(size=20)


def wide_reference(row):
    d2 = ((wide_Q[:, None, :] - wide_X[None]) ** 2).sum(axis=-1)
    logits = -0.5 * d2 / row.params["bandwidth"] ** 2
    a = np.exp(logits - logits.max(axis=1, keepdims=True))
    return a @ wide_y / a.sum(axis=1)


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
    ),
    "X and bandwidth of 1e300": Row(
        Returns(lambda row: reference(row, X_=X, Q_=Q, bandwidth=1.0)),
        params={"bandwidth": 1e300},
        X=X * 1e300,
        Q=Q * 1e300,
    ),
    "X of 1e-300, bandwidth 1: the weighted mean": Row(
        Returns(np.full(4, mean_y)), X=X * 1e-300, Q=Q * 1e-300
    ),
    "X and bandwidth of 1e-300": Row(
        Returns(lambda row: reference(row, X_=X, Q_=Q, bandwidth=1.0)),
        params={"bandwidth": 1e-300},
        X=X * 1e-300,
        Q=Q * 1e-300,
    ),
    "bandwidth 1e-300": Row(
        Raises(ValueError, "Rescale X (for example with a StandardScaler) or use a"),
        params={"bandwidth": 1e-300},
    ),
    "query of 1e300": Row(
        Raises(ValueError, "coordinates up to 1e+300", "predict"),
        Q=with_value(Q, 1e300),
    ),
    "query of 1e-300 is the query at 0": Row(
        Returns(lambda row: reference(row, Q_=np.zeros((1, 2)))),
        Q=np.full((1, 2), 1e-300),
    ),
    "query 1e9 bandwidths away: the nearest key": Row(
        Returns(lambda row: y[[np.argmin(X[:, 0])]], rtol=1e-12),
        Q=np.array([[-1e9, 0.5]]),
    ),
    "y of 1e300": Row(Returns(lambda row: 1e300 * reference(row, y_=y)), y=y * 1e300),
    "y near the float64 maximum": Row(
        Returns(lambda row: 1.7e308 * reference(row, y_=y)), y=y * 1.7e308, params={}
    ),
    "y of 1e-300": Row(
        Returns(lambda row: 1e-300 * reference(row, y_=y)), y=y * 1e-300
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
    ),
    "float32 X of 1e30, bandwidth 1": Row(
        Raises(ValueError, "past 1.63e+18 (float32, 2 features)"),
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
    "one row": Row(Returns(np.full(4, y[0])), X=X[:1], y=y[:1]),
    "one row, compact kernel, far query": Row(
        Returns(np.full(1, y[0]), warns=EmptyNeighborhoodWarning),
        params={"kernel": "epanechnikov"},
        X=X[:1],
        y=y[:1],
        Q=np.array([[9.0, 9.0]]),
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
        Returns(lambda row: reference(row, X_=X[:5], y_=y[:5], w_=[2, 1, 1, 1, 1])),
        X=np.vstack([X[:1], X[:5]]),
        y=np.r_[y[:1], y[:5]],
    ),
    "all keys identical: the weighted mean": Row(Returns(np.full(4, mean_y)), X=X1),
    "all keys identical, boxcar, far query": Row(
        Returns(np.full(1, mean_y), warns=EmptyNeighborhoodWarning),
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
    "constant y": Row(Returns(np.full(4, 0.1), rtol=4e-16), y=np.full(6, 0.1)),
    "on_empty='raise' with some empty neighbourhoods": Row(
        Raises(ValueError, "2 of 4 queries have no training key", "predict"),
        params={"kernel": "biweight", "bandwidth": 0.5, "on_empty": "raise"},
        Q=np.vstack([Q[:2], [[9.0, 9.0], [-9.0, 0.0]]]),
    ),
    "on_empty='nan' with some empty neighbourhoods": Row(
        Returns(
            lambda row: np.r_[reference(row, Q_=Q[:2]), np.nan],
            warns=EmptyNeighborhoodWarning,
        ),
        params={"kernel": "biweight", "bandwidth": 0.5, "on_empty": "nan"},
        Q=np.vstack([Q[:2], [[9.0, 9.0]]]),
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
        Returns(lambda row: reference(row, y_=(y > 0.5) * 1.0)), y=y > 0.5
    ),
    "float16 X: float64 predictions": Row(
        Returns(lambda row: reference(row, X_=X.astype(np.float16).astype(float))),
        X=X.astype(np.float16),
    ),
    "numeric object X": Row(
        Returns(lambda row: reference(row, X_=X)), X=X.astype(object)
    ),
    "string X": Row(
        Raises(ValueError, "could not convert string to float"),
        X=np.array([["a", "b"]] * 6, dtype=object),
    ),
    "complex X": Row(Raises(ValueError, "Complex data not supported"), X=X + 1j),
    "complex y": Row(Raises(ValueError, "Complex data not supported"), y=y + 1j),
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
    # -- sparse input (the tags say dense only) ------------------------------
    "sparse X": Row(
        Raises(TypeError, "Sparse data was passed for X"), X=sp.csr_matrix(X)
    ),
    "sparse queries": Row(
        Raises(TypeError, "Sparse data was passed for X", "predict"), Q=sp.csr_array(Q)
    ),
    # -- parameters ----------------------------------------------------------
    "bandwidth 0": Row(
        Raises(InvalidParameterError, "'bandwidth'"), params={"bandwidth": 0}
    ),
    "negative bandwidth": Row(
        Raises(InvalidParameterError, "'bandwidth'"), params={"bandwidth": -1.0}
    ),
    "nan bandwidth": Row(
        Raises(InvalidParameterError, "'bandwidth'"), params={"bandwidth": np.nan}
    ),
    "inf bandwidth": Row(
        Raises(InvalidParameterError, "'bandwidth'"), params={"bandwidth": np.inf}
    ),
    "string bandwidth": Row(
        Raises(InvalidParameterError, "among {'s"), params={"bandwidth": "wide"}
    ),
    "wrong-length bandwidth": Row(
        Raises(ValueError, "n_features = 2"), params={"bandwidth": [1.0, 2.0, 3.0]}
    ),
    "unknown kernel": Row(
        Raises(InvalidParameterError, "'kernel' parameter"), params={"kernel": "gauss"}
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
        Raises(ValueError, "'kernel_flat' returned an array of shape", "predict"),
        params={"kernel": kernel_flat},
    ),
    "kernel of weights 1e308": Row(
        Returns(np.full(4, mean_y)), params={"kernel": kernel_huge}
    ),
    "kernel of weights 1e-300": Row(
        Returns(lambda row: reference(row, kernel=lambda x: np.exp(-x))),
        params={"kernel": kernel_tiny},
    ),
    # -- state ---------------------------------------------------------------
    "predict before fit": Row(
        Raises(NotFittedError, "not fitted", "predict before fit")
    ),
}


def row_bandwidth(row):
    return estimator(**row.params).fit(X, y, sample_weight=row.w).bandwidth_


@pytest.mark.parametrize("name", ROWS, ids=list(ROWS))
def test_adversarial_input(name):
    row = ROWS[name]
    outcome = row.outcome
    reg = estimator(**row.params)
    if isinstance(outcome, Raises):
        with pytest.raises(outcome.error, match=_escaped(outcome.fragment)):
            if outcome.stage == "predict before fit":
                reg.predict(row.Q)
            else:
                reg.fit(row.X, row.y, sample_weight=row.w)
                if outcome.stage == "predict":
                    reg.predict(row.Q)
        return
    reg.fit(row.X, row.y, sample_weight=row.w)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = reg.predict(row.Q)
    categories = {w.category for w in caught}
    assert categories == ({outcome.warns} if outcome.warns else set())
    expected = outcome.expected(row) if callable(outcome.expected) else outcome.expected
    assert pred.shape == np.shape(expected)
    assert_allclose(pred, expected, rtol=outcome.rtol, atol=0, equal_nan=True)
    if reg.on_empty != "nan":
        assert np.all(np.isfinite(pred))


def _escaped(fragment):
    import re

    return re.escape(fragment)


def test_the_tags_say_dense_only():
    assert not get_tags(estimator()).input_tags.sparse
