"""A bounded fuzz run of fit and predict on arbitrary float arrays.

Hypothesis draws small arrays whose entries mix ordinary floats with the
troublesome ones (NaN, infinities, 1e308, 1e-300, subnormals, zeros, signs),
and parameters. The outcome must be either a documented ``ValueError`` whose
message is one of ``DOCUMENTED``, or finite predictions (NaN only where
``on_empty="nan"`` asked for it). Any other exception or warning (an overflow
``RuntimeWarning`` is an error under the test settings) fails. The run is
derandomized, as in ``test_properties.py``: the same 300 examples every time.

The classifier gets the same arbitrary keys, weights and queries with integer
labels (150 examples): its probabilities must be finite, in [0, 1], and sum
to one per query.
"""

import re
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
)
from sklearn_kernelpool.kernels import KERNELS

DOCUMENTED = (
    "Input X contains",
    "Input y contains",
    "Input sample_weight contains",
    "sample_weight must be non-negative",
    "at least one non-zero",
    "divided by the bandwidth has coordinates up to",
    "sample_weight spans too wide a range",
    "beyond the range of float32",
    "queries have no training key",
    "rule gives bandwidths",
)

SPECIAL = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    5e-324,
    1e-300,
    -1e-300,
    1e300,
    -1e300,
    1.7e308,
    -1.7e308,
    np.nan,
    np.inf,
    -np.inf,
]


def values(dtype=np.float64):
    ordinary = st.floats(-1e3, 1e3, allow_nan=False, width=64)
    return st.one_of(ordinary, ordinary, st.sampled_from(SPECIAL))


@st.composite
def cases(draw):
    n = draw(st.integers(1, 12))
    d = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    X = draw(arrays(np.float64, (n, d), elements=values()))
    y = draw(arrays(np.float64, (n,), elements=values()))
    w = draw(st.none() | arrays(np.float64, (n,), elements=values()))
    Q = draw(arrays(np.float64, (draw(st.integers(1, 6)), d), elements=values()))
    params = {
        "kernel": draw(st.sampled_from(sorted({k.name for k in KERNELS.values()}))),
        "bandwidth": draw(
            st.sampled_from(["scott", "silverman"])
            | st.floats(1e-300, 1e300, allow_nan=False)
        ),
        "on_empty": draw(st.sampled_from(["nearest", "mean", "nan", "raise"])),
        "algorithm": "auto",
    }
    with np.errstate(over="ignore"):
        return X.astype(dtype), y, w, Q.astype(dtype), params


FUZZ_SETTINGS = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def documented_error_or(call):
    """The result of ``call()``, or None after a documented ``ValueError``.

    The fallback warning is documented behaviour; any other warning fails.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            return call()
    except ValueError as error:
        message = str(error)
        assert any(fragment in message for fragment in DOCUMENTED), message
        return None


@settings(max_examples=300, **FUZZ_SETTINGS)
@given(cases())
def test_fit_predict_give_a_documented_error_or_finite_predictions(case):
    X, y, w, Q, params = case
    reg = KernelAttentionRegressor(**params)
    pred = documented_error_or(lambda: reg.fit(X, y, sample_weight=w).predict(Q))
    if pred is None:
        return
    assert pred.shape == (len(Q),)
    if params["on_empty"] == "nan":
        pred = pred[~np.isnan(pred)]
    assert np.all(np.isfinite(pred)), (pred, re.escape(str(params)))


@settings(max_examples=150, **FUZZ_SETTINGS)
@given(cases(), st.lists(st.integers(-3, 3), min_size=12, max_size=12))
def test_classifier_gives_a_documented_error_or_probabilities(case, codes):
    X, _, w, Q, params = case
    labels = np.array(codes[: len(X)])
    if params["on_empty"] == "nan":
        params["on_empty"] = "mean"  # the classifier has no NaN policy
    clf = KernelAttentionClassifier(**params)
    proba = documented_error_or(
        lambda: clf.fit(X, labels, sample_weight=w).predict_proba(Q)
    )
    if proba is None:
        return
    assert proba.shape == (len(Q), len(np.unique(labels)))
    assert np.all(np.isfinite(proba)), (proba, re.escape(str(params)))
    assert np.all((proba >= 0) & (proba <= 1))
    tol = 1e-12 if proba.dtype == np.float64 else 1e-5
    assert np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=tol)
