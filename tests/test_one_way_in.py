"""Every kind of input is validated alike: NumPy arrays, lists, DataFrames
(with categorical columns too), SciPy sparse matrices, array API arrays and
dask arrays all go through the one way in of ``fit`` and ``predict``
(:mod:`sklearn_kernelpool._estimator._input_kinds`): the same errors for the
same bad values, the same features recorded, the same dtypes kept, for every
estimator and every kind it takes."""

import contextlib
import re
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sklearn
from _array_api import strict_namespace
from numpy.testing import assert_allclose

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionClassifierCV,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)


def _kinds():
    kinds = {
        "numpy": (lambda A: A, {}),
        "dataframe": (lambda A: pd.DataFrame(A, columns=["a", "b"]), {}),
        "categorical": (
            lambda A: pd.DataFrame(
                {
                    "a": A[:, 0],
                    "b": A[:, 1],
                    "c": pd.Categorical(np.resize(["x", "y"], len(A))),
                }
            ),
            {"categorical_features": "from_dtype"},
        ),
        "sparse": (sp.csr_matrix, {}),
    }
    try:
        import dask.array as dask_array
    except ImportError:  # the dask extra: tested by .ci/run
        return kinds
    kinds["dask"] = (
        lambda A: dask_array.from_array(A, chunks=(10, -1)),
        {"algorithm": "binned"},
    )
    return kinds


KINDS = _kinds()


def _data(dtype=np.float64):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2)).astype(dtype)
    return X, (X[:, 0] + X[:, 1]).astype(dtype)


def _fit(kind, X, y):
    make, options = KINDS[kind]
    return KernelAttentionRegressor(bandwidth=0.8, **options).fit(make(X), y)


def _computed(prediction):
    return np.asarray(getattr(prediction, "compute", lambda: prediction)())


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_keys_are_refused_alike(kind, bad):
    X, y = _data()
    X[3, 0] = bad
    with pytest.raises(ValueError, match=r"Input X contains (NaN|infinity)"):
        _fit(kind, X, y)


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"dataframe", "categorical"}))
def test_queries_of_the_wrong_width_are_refused_alike(kind):
    X, y = _data()
    model = _fit(kind, X, y)
    make, _ = KINDS[kind]
    with pytest.raises(ValueError, match="X has 3 features, but .* expecting 2"):
        _computed(model.predict(make(np.column_stack([X, X[:, 0]]))))


@pytest.mark.parametrize("kind", ["dataframe", "categorical"])
def test_frames_of_other_columns_are_refused_alike(kind):
    X, y = _data()
    model = _fit(kind, X, y)
    queries = KINDS[kind][0](X).rename(columns={"b": "z"})
    with pytest.raises(ValueError, match="feature names should match"):
        model.predict(queries)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_dtype_of_the_keys_is_kept_alike(kind, dtype):
    X, y = _data(dtype)
    model = _fit(kind, X, y)
    make, _ = KINDS[kind]
    assert _computed(model.predict(make(X[:5]))).dtype == dtype
    assert model.n_features_in_ == X.shape[1] + (kind == "categorical")


@pytest.mark.parametrize("algorithm", ["binned", "brute"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_the_way_in_reads_float_queries_in_place(algorithm, dtype, order):
    # A float32 or float64 array of queries is validated without a copy:
    # the engine receives the caller's array itself, in either order.
    from sklearn_kernelpool._estimator._input_kinds import validate_query_input

    X, y = _data(dtype)
    model = KernelAttentionRegressor(algorithm=algorithm, bandwidth=0.5).fit(X, y)
    queries = np.asarray(np.random.default_rng(0).uniform(size=(50, 2)), order=order)
    queries = queries.astype(dtype, order="K")
    taken = validate_query_input(model, queries)
    assert taken.kind == "dense"
    assert taken.X is queries


def test_array_api_input_is_refused_in_the_same_words():
    xp = strict_namespace()  # where scikit-learn can dispatch to it
    X, y = _data()
    bad = X.copy()
    bad[3, 0] = np.nan
    with sklearn.config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=r"Input X contains NaN"):
            KernelAttentionRegressor(bandwidth=0.8).fit(xp.asarray(bad), xp.asarray(y))
        model = KernelAttentionRegressor(bandwidth=0.8).fit(
            xp.asarray(X), xp.asarray(y)
        )
        with pytest.raises(ValueError, match="X has 3 features, but .* expecting"):
            model.predict(xp.asarray(np.column_stack([X, X[:, 0]])))


# -- every estimator, every kind it takes --------------------------------------
# The data of two features: the first holds three categories (the
# categorical kind reads it as such), the second is continuous.
N = 40
_RNG = np.random.default_rng(1)
X2 = np.column_stack([_RNG.integers(0, 3, N).astype(float), _RNG.uniform(0, 1, N)])
VALUES = X2[:, 1] + 0.5 * X2[:, 0]
LABELS = (X2[:, 1] > 0.5).astype(int)
NAMES = ["g", "x"]
ESTIMATOR_KINDS = {
    KernelAttentionRegressor: (
        *("list", "frame", "sparse", "categorical", "array_api", "dask"),
    ),
    KernelAttentionClassifier: ("list", "frame", "sparse", "categorical", "dask"),
    KernelAttentionRegressorCV: ("list", "frame", "sparse", "categorical"),
    KernelAttentionClassifierCV: ("list", "frame", "sparse"),
}


def _strict():
    return strict_namespace()


def _named(A):
    """A 2-D ``A`` as a DataFrame of the columns ``NAMES`` (and more)."""
    if np.ndim(A) != 2:
        return A
    extra = [f"c{j}" for j in range(len(NAMES), A.shape[1])]
    return pd.DataFrame(A, columns=NAMES[: A.shape[1]] + extra)


def _as(kind, A):
    """``A`` (X, y or the weights) as input of ``kind``."""
    if A is None or kind == "ndarray":
        return A
    if kind == "list":
        return A.tolist()
    if kind in ("frame", "categorical"):
        return _named(A)
    if kind == "sparse":
        return sp.csr_array(A) if np.ndim(A) == 2 else A
    if kind == "array_api":
        return _strict().asarray(A)
    dask_array = pytest.importorskip("dask.array")
    return dask_array.from_array(A, chunks=(16,) + A.shape[1:])


def _params(estimator, kind):
    if estimator in (KernelAttentionRegressorCV, KernelAttentionClassifierCV):
        params = {"bandwidths": [0.5, 1.0], "n_neighbors": None}
        if estimator is KernelAttentionRegressorCV:
            params["degree"] = 0
    else:
        params = {"bandwidth": 0.5}
    if kind == "categorical":
        params["categorical_features"] = ["g"]
    if kind == "dask":
        params["algorithm"] = "binned"
    return params


def _context(kind):
    if kind == "array_api":
        _strict()
        return sklearn.config_context(array_api_dispatch=True)
    return contextlib.nullcontext()


def _target(estimator):
    return LABELS if "Classifier" in estimator.__name__ else VALUES


def _with(A, index, value):
    A = np.array(A, dtype=np.result_type(A, type(value)))
    A[index] = value
    return A


# Each case: (X, y, sample_weight, queries) of the target ``y``; the queries
# None where fit must fail.
CASES = {
    "fit_nan_X": lambda y: (_with(X2, (3, 1), np.nan), y, None, None),
    "fit_inf_X": lambda y: (_with(X2, (3, 1), np.inf), y, None, None),
    "fit_nan_y": lambda y: (X2, _with(y, 5, np.nan), None, None),
    "fit_inf_y": lambda y: (X2, _with(y, 5, -np.inf), None, None),
    "fit_y_length": lambda y: (X2, y[:-1], None, None),
    "fit_complex_X": lambda y: (X2 + 1j, y, None, None),
    "fit_nan_weight": lambda y: (X2, y, _with(np.ones(N), 2, np.nan), None),
    "fit_inf_weight": lambda y: (X2, y, _with(np.ones(N), 2, np.inf), None),
    "fit_negative_weight": lambda y: (X2, y, _with(np.ones(N), 2, -1.0), None),
    "fit_zero_weights": lambda y: (X2, y, np.zeros(N), None),
    "fit_weight_length": lambda y: (X2, y, np.ones(N - 1), None),
    "predict_nan": lambda y: (X2, y, None, _with(X2[:5], (1, 1), np.nan)),
    "predict_inf": lambda y: (X2, y, None, _with(X2[:5], (1, 1), np.inf)),
    "predict_feature_count": lambda y: (X2, y, None, np.ones((5, 3))),
}
# The errors that tell the kind apart: a frame's names are checked before
# its number of features (see the test of the names), and a list of complex
# numbers fails NumPy's conversion first (a TypeError, as in scikit-learn).
OWN_ERRORS = {
    ("frame", "predict_feature_count"),
    ("categorical", "predict_feature_count"),
    ("list", "fit_complex_X"),
}


def _first_line(error):
    """The first line of an error, a dtype named as NumPy names it."""
    line = str(error).split("\n")[0]
    return re.sub(r"for array_api_strict\.(\w+)", r"for dtype('\1')", line)


def _outcome(estimator, kind, case):
    X, y, weights, queries = CASES[case](_target(estimator))
    model = estimator(**_params(estimator, kind))
    with _context(kind):
        try:
            model.fit(_as(kind, X), _as(kind, y), weights)
            if queries is None:
                return "fitted"
            _computed(model.predict(_as(kind, queries)))
        except ValueError as error:
            return _first_line(error)
    return "predicted"


def _estimator_kinds():
    for estimator, kinds in ESTIMATOR_KINDS.items():
        for kind in kinds:
            yield pytest.param(estimator, kind, id=f"{estimator.__name__}-{kind}")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("estimator", "kind"), _estimator_kinds())
def test_every_kind_gets_the_errors_of_ndarrays(estimator, kind, case):
    if (kind, case) in OWN_ERRORS:
        pytest.skip("an error of this kind's own")
    expected = _outcome(estimator, "ndarray", case)
    assert expected not in ("fitted", "predicted")
    assert _outcome(estimator, kind, case) == expected


@pytest.mark.parametrize(("estimator", "kind"), _estimator_kinds())
def test_every_kind_records_the_features_and_keeps_the_dtype(estimator, kind):
    y = _target(estimator)
    model = estimator(**_params(estimator, kind))
    with _context(kind):
        # The names of an earlier fit on a DataFrame do not survive a fit on
        # input without them.
        model.fit(_named(X2), y)
        assert list(model.feature_names_in_) == NAMES
        for dtype in (np.float32, np.float64):
            A = X2.astype(dtype)
            model.fit(_as(kind, A), _as(kind, y))
            assert model.n_features_in_ == 2
            assert hasattr(model, "feature_names_in_") is (
                kind in ("frame", "categorical")
            )
            predicted = model.predict(_as(kind, A[:5]))
            if "Regressor" in estimator.__name__ and kind != "list":
                assert str(_computed(predicted).dtype).endswith(np.dtype(dtype).name)


@pytest.mark.parametrize(
    "estimator", [e for e in ESTIMATOR_KINDS if "categorical" in ESTIMATOR_KINDS[e]]
)
def test_frames_with_categorical_features_check_the_names_as_frames_do(estimator):
    messages = []
    for kind in ("frame", "categorical"):
        model = estimator(**_params(estimator, kind)).fit(
            _named(X2), _target(estimator)
        )
        for queries in (_named(X2[:5])[NAMES[::-1]], _named(np.ones((5, 3)))):
            with pytest.raises(ValueError) as error:
                model.predict(queries)
            messages.append(str(error.value))
    assert messages[:2] == messages[2:]


@pytest.mark.parametrize(
    ("estimator", "kind"),
    [
        (KernelAttentionRegressor, "array_api"),
        (KernelAttentionRegressor, "dask"),
        (KernelAttentionClassifier, "dask"),
    ],
)
def test_a_refit_on_another_kind_records_no_categorical_feature(estimator, kind):
    y = _target(estimator)
    model = estimator(categorical_features="from_dtype", bandwidth=0.5)
    assert model.fit(_named(X2).astype({"g": "category"}), y).is_categorical_[0]
    model.set_params(**_params(estimator, kind))
    with _context(kind):
        model.fit(_as(kind, X2), _as(kind, y))
    assert model.is_categorical_ is None and model.categories_ == []


@pytest.mark.parametrize("kind", ["sparse", "array_api", "dask"])
def test_declared_categorical_features_need_dense_input(kind):
    params = _params(KernelAttentionRegressor, kind)
    X, y = _as(kind, X2), _as(kind, VALUES)
    with _context(kind):
        with pytest.raises(ValueError, match="categorical_features cannot be used"):
            KernelAttentionRegressor(categorical_features=[0], **params).fit(X, y)
        # "from_dtype" declares none of an array, whatever its kind.
        KernelAttentionRegressor(categorical_features="from_dtype", **params).fit(X, y)


@pytest.mark.parametrize(
    ("estimator", "kind", "match"),
    [
        (KernelAttentionClassifier, "array_api", "only KernelAttentionRegressor"),
        (KernelAttentionRegressorCV, "array_api", "only KernelAttentionRegressor"),
        (KernelAttentionClassifierCV, "array_api", "only KernelAttentionRegressor"),
        (KernelAttentionRegressorCV, "dask", r"X\.compute\(\)"),
        (KernelAttentionClassifierCV, "dask", r"X\.compute\(\)"),
    ],
)
def test_kinds_without_a_path_are_refused_with_what_to_do(estimator, kind, match):
    with _context(kind):
        with pytest.raises(ValueError, match=match):
            estimator().fit(_as(kind, X2), _as(kind, _target(estimator)))


@pytest.mark.parametrize(
    "estimator", [KernelAttentionClassifier, KernelAttentionClassifierCV]
)
def test_every_method_names_itself_to_queries_of_another_namespace(estimator):
    xp = _strict()
    model = estimator(**_params(estimator, "ndarray")).fit(X2, LABELS)
    with sklearn.config_context(array_api_dispatch=True):
        for method in ("predict", "predict_proba", "predict_log_proba"):
            with pytest.raises(ValueError, match=rf"\.{method}\(\) must use the same"):
                getattr(model, method)(xp.asarray(X2[:3]))


@pytest.mark.parametrize(
    "column",
    [
        lambda x: x > 0.5,
        lambda x: pd.array(np.round(10 * x), dtype="Int64"),
        lambda x: pd.array(x, dtype="Float64"),
    ],
    ids=["bool", "Int64", "Float64"],
)
def test_categorical_frames_take_the_columns_dense_frames_take(column):
    """scikit-learn converts the boolean and nullable columns of a DataFrame
    first, with all the others to one float dtype: the categorical path reads
    the frame as objects and converts the continuous columns alone."""
    values = column(X2[:, 1])
    frame = pd.DataFrame({"g": pd.Categorical(X2[:, 0]), "x": values})
    as_float = frame.assign(x=np.asarray(values, dtype=float))
    params = {"categorical_features": "from_dtype", "bandwidth": 0.5}
    got = KernelAttentionRegressor(**params).fit(frame, VALUES).predict(frame)
    want = KernelAttentionRegressor(**params).fit(as_float, VALUES).predict(as_float)
    assert_allclose(got, want)


# -- the partially linear fit --------------------------------------------------
def _calls(functions, run):
    """The calls of ``functions`` while ``run()`` runs, from wherever the
    package imported them: ``count(name, first, second=None)`` counts those
    of the function ``name`` whose first argument (and second, if given) is
    the object given (the same object, not an equal one)."""
    codes = {function.__code__: function.__name__ for function in functions}
    seen = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            names = frame.f_code.co_varnames
            arguments = [frame.f_locals.get(name) for name in names[:2]]
            seen.append((codes[frame.f_code], *arguments))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)

    def count(name, first, second=None):
        return sum(
            seen_name == name
            and seen_first is first
            and (second is None or seen_second is second)
            for seen_name, seen_first, seen_second in seen
        )

    return count


@pytest.mark.parametrize(
    "linear, ordered",
    [(["b", "u"], ["g"]), ("categorical", "from_dtype"), ([2], None)],
)
def test_a_partially_linear_fit_goes_through_the_one_way_in_once(linear, ordered):
    from sklearn.utils.validation import validate_data

    from sklearn_kernelpool._estimator._input_kinds import validate_fit_input
    from sklearn_kernelpool._utils._categorical_input import (
        categorical_mask,
        ordered_mask,
    )

    rng = np.random.default_rng(0)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=60),
            "g": pd.Categorical(rng.choice(list("xyz"), 60), ordered=True),
            "b": rng.normal(size=60),
            "u": pd.Categorical(rng.choice(list("pq"), 60)),
        }
    )
    y = X["a"] ** 2 + X["b"] + 0.1 * rng.normal(size=60)
    reg = KernelAttentionRegressor(
        bandwidth=0.7,
        categorical_features=["g", "u"],
        ordered_features=ordered,
        linear_features=linear,
    )
    functions = [validate_fit_input, validate_data, categorical_mask, ordered_mask]
    count = _calls(functions, lambda: reg.fit(X, y))
    kernel = reg.kernel_regressor_
    # The estimator's data once through the one way in, and its kernel part,
    # an estimator of its own, once through its own.
    for estimator in (reg, kernel):
        assert count("validate_fit_input", estimator) == 1
        assert count("validate_data", estimator) == 1
    # The categorical and ordered features of X read once.
    assert count("categorical_mask", reg.categorical_features, X) == 1
    assert count("ordered_mask", reg.ordered_features, X) == 1
