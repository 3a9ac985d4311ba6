"""SciPy sparse X: the predictions of its dense copy, on every path that
takes it, and a clear refusal where one cannot."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from _array_api import strict_namespace
from _memory import FIXED_SLACK, INPUT_COPIES, output_bytes, traced_peak
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.compose import ColumnTransformer
from sklearn.metrics import log_loss, r2_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)
from sklearn_kernelpool.kernels import KERNELS

# Narrow compact kernels leave some queries empty or singular here, on dense
# and sparse input alike: the fallbacks are compared too.
pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning"),
    pytest.mark.filterwarnings("ignore::sklearn_kernelpool.LocalLinearFallbackWarning"),
]

CANONICAL_KERNELS = sorted({kernel.name for kernel in KERNELS.values()})
FORMATS = {
    "csr_matrix": sp.csr_matrix,
    "csc_matrix": sp.csc_matrix,
    "csr_array": sp.csr_array,
    "csc_array": sp.csc_array,
}
# Sparse input is made dense before any arithmetic: the results are those
# of the dense copy, to the last bit; the tolerance only allows for it.
TIGHT = {"rtol": 1e-13, "atol": 1e-15}


def _data(n=80, n_queries=30, seed=0):
    """One-hot columns (mostly zero) beside two numeric ones, as a
    ColumnTransformer with a OneHotEncoder outputs them."""
    rng = np.random.default_rng(seed)

    def rows(m):
        codes = rng.integers(0, 4, size=(m, 2))
        onehot = np.zeros((m, 8))
        onehot[np.arange(m), codes[:, 0]] = 1.0
        onehot[np.arange(m), 4 + codes[:, 1]] = 1.0
        numeric = rng.normal(size=(m, 2))
        numeric[rng.random(size=(m, 2)) < 0.4] = 0.0
        return np.hstack([onehot, numeric])

    X, Q = rows(n), rows(n_queries)
    y = X[:, 0] - X[:, 5] + np.sin(2 * X[:, 8]) + 0.1 * rng.normal(size=n)
    return X, y, Q


X, Y, Q = _data()
LABELS = np.where(Y > np.median(Y), "high", "low")
WEIGHTS = np.random.default_rng(1).uniform(0.0, 3.0, size=len(X))
WEIGHTS[::7] = 0.0


def _bandwidth(kernel):
    return 2.5 if KERNELS[kernel].is_compact else 1.0


def _outputs(est, queries):
    """Everything a fitted regressor says about ``queries``."""
    out = {"predict": est.predict(queries)}
    out["mean"], out["std"] = est.predict(queries, return_std=True)
    out["weights"] = est.attention_weights(queries)
    out["sparse_weights"] = est.attention_weights(queries, sparse=True).toarray()
    return out


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert_allclose(a[key], b[key], **TIGHT, err_msg=key)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("kernel", CANONICAL_KERNELS)
def test_regressor_sparse_equals_dense(kernel, degree, fmt, dtype):
    X_, Q_ = X.astype(dtype), Q.astype(dtype)
    params = {"kernel": kernel, "bandwidth": _bandwidth(kernel), "degree": degree}
    dense = KernelAttentionRegressor(**params).fit(X_, Y, sample_weight=WEIGHTS)
    sparse = KernelAttentionRegressor(**params).fit(
        FORMATS[fmt](X_), Y, sample_weight=WEIGHTS
    )
    assert sparse.algorithm_ == "brute"
    expected = _outputs(dense, Q_)
    _assert_same(_outputs(sparse, FORMATS[fmt](Q_)), expected)
    # Sparse queries against dense keys, and dense queries against sparse keys.
    _assert_same(_outputs(dense, FORMATS[fmt](Q_)), expected)
    _assert_same(_outputs(sparse, Q_), expected)
    assert sparse.predict(Q_).dtype == dense.predict(Q_).dtype


@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
@pytest.mark.parametrize("degree", [0, 1])
def test_empty_neighbourhoods_fall_back_as_dense(on_empty, degree):
    params = {"kernel": "boxcar", "bandwidth": 0.8, "on_empty": on_empty}
    dense = KernelAttentionRegressor(**params, degree=degree).fit(X, Y)
    sparse = KernelAttentionRegressor(**params, degree=degree).fit(sp.csr_array(X), Y)
    with pytest.warns(EmptyNeighborhoodWarning):
        expected = dense.predict(Q)
    with pytest.warns(EmptyNeighborhoodWarning):
        got = sparse.predict(sp.csr_array(Q))
    assert_array_equal(np.isnan(got), np.isnan(expected))
    assert_allclose(got, expected, **TIGHT)


@pytest.mark.parametrize("fmt", ["csr_matrix", "csc_array"])
@pytest.mark.parametrize("kernel", CANONICAL_KERNELS)
def test_classifier_sparse_equals_dense(kernel, fmt):
    params = {"kernel": kernel, "bandwidth": _bandwidth(kernel)}
    dense = KernelAttentionClassifier(**params).fit(X, LABELS, sample_weight=WEIGHTS)
    sparse = KernelAttentionClassifier(**params).fit(
        FORMATS[fmt](X), LABELS, sample_weight=WEIGHTS
    )
    queries = FORMATS[fmt](Q)
    assert_allclose(sparse.predict_proba(queries), dense.predict_proba(Q), **TIGHT)
    assert_array_equal(sparse.predict(queries), dense.predict(Q))
    assert_allclose(
        sparse.attention_weights(queries, sparse=True).toarray(),
        dense.attention_weights(Q),
        **TIGHT,
    )


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("cv", [None, 3])
@pytest.mark.parametrize("degree", [0, 1])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cv_sparse_equals_dense(degree, cv, weighted, dtype):
    params = {
        "kernels": ("gaussian", "epanechnikov", "tricube"),
        "bandwidths": 6,
        "degree": degree,
        "cv": cv,
    }
    w = WEIGHTS if weighted else None
    X_ = X.astype(dtype)
    dense = KernelAttentionRegressorCV(**params).fit(X_, Y, w)
    sparse = KernelAttentionRegressorCV(**params).fit(sp.csc_matrix(X_), Y, w)
    # With degree 1 the automatic grid is extended down to widths whose
    # local-linear fits are ill-conditioned (the Gaussian's R^2 down to
    # -17). The dense copy of a CSC matrix is in Fortran order, whose
    # products round differently from those of a C-ordered array: the
    # conditioning amplifies that to 7e-9 relative. Against a dense array
    # of the same layout, the scores are equal.
    tolerance = TIGHT if degree == 0 else {"rtol": 1e-7, "atol": 1e-12}
    assert_allclose(
        sparse.cv_results_["mean_test_score"],
        dense.cv_results_["mean_test_score"],
        **tolerance,
    )
    same_layout = KernelAttentionRegressorCV(**params).fit(np.asfortranarray(X_), Y, w)
    assert_allclose(
        sparse.cv_results_["mean_test_score"],
        same_layout.cv_results_["mean_test_score"],
        **TIGHT,
    )
    assert sparse.best_params_ == dense.best_params_
    assert sparse.best_estimator_.algorithm_ == "brute"
    assert_allclose(
        (sparse.predict(sp.csr_array(Q.astype(dtype)))),
        (dense.predict(Q.astype(dtype))),
        **TIGHT,
    )


def test_per_feature_widths_learned_on_sparse_equal_dense():
    params = {"bandwidths": 4, "per_feature": True}
    dense = KernelAttentionRegressorCV(**params).fit(X, Y)
    sparse = KernelAttentionRegressorCV(**params).fit(sp.csr_matrix(X), Y)
    assert_allclose(sparse.bandwidth_, dense.bandwidth_, **TIGHT)
    assert_allclose(sparse.predict(sp.csr_matrix(Q)), dense.predict(Q), **TIGHT)


@pytest.mark.parametrize("to_format", ["coo", "lil", "dok", "bsr", "dia"])
def test_other_formats_are_converted(to_format):
    expected = KernelAttentionRegressor().fit(X, Y).predict(Q)
    reg = KernelAttentionRegressor().fit(sp.csr_array(X).asformat(to_format), Y)
    assert_allclose(reg.predict(sp.csr_array(Q).asformat(to_format)), expected, **TIGHT)


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
@pytest.mark.parametrize(
    "estimator",
    [
        KernelAttentionRegressor(kernel="epanechnikov"),
        KernelAttentionClassifier(kernel="epanechnikov"),
        KernelAttentionRegressorCV(kernels=("epanechnikov",)),
    ],
    ids=type,
)
def test_an_explicit_tree_refuses_sparse_keys(estimator, algorithm):
    y = LABELS if isinstance(estimator, KernelAttentionClassifier) else Y
    message = (
        rf"algorithm='{algorithm}' cannot use sparse X \(a csr_matrix of shape "
        r"\(80, 10\)\).*Use algorithm='brute' or 'auto'.*X\.toarray\(\)"
    )
    with pytest.raises(ValueError, match=message):
        estimator.set_params(algorithm=algorithm).fit(sp.csr_matrix(X), y)


def test_auto_picks_brute_for_sparse_keys_and_trees_take_sparse_queries():
    # One feature and many keys under a narrow compact kernel: the k-d tree
    # for dense keys, brute force for sparse ones, the same predictions.
    rng = np.random.default_rng(0)
    X1 = rng.uniform(0, 100, size=(4000, 1))
    X1[::3] = 0.0
    y1 = np.sin(X1[:, 0])
    Q1 = np.linspace(0, 100, 50)[:, None]
    params = {"kernel": "epanechnikov", "bandwidth": 0.5}
    dense = KernelAttentionRegressor(**params).fit(X1, y1)
    assert dense.algorithm_ == "kd_tree"
    sparse = KernelAttentionRegressor(**params).fit(sp.csr_array(X1), y1)
    assert sparse.algorithm_ == "brute"
    expected = dense.predict(Q1)
    assert_allclose(sparse.predict(sp.csr_array(Q1)), expected, rtol=1e-12)
    # A tree fitted on dense keys takes sparse queries, a chunk at a time.
    assert_allclose(dense.predict(sp.csr_array(Q1)), expected, **TIGHT)
    assert_allclose(
        dense.attention_weights(sp.csr_array(Q1), sparse=True).toarray(),
        dense.attention_weights(Q1),
        **TIGHT,
    )


def test_chunks_and_pickles_keep_the_predictions():
    reg = KernelAttentionRegressor(degree=1).fit(sp.csr_array(X), Y, WEIGHTS)
    queries = sp.csr_array(np.vstack([Q] * 20))
    expected = KernelAttentionRegressor(degree=1).fit(X, Y, WEIGHTS).predict(Q)
    expected = np.tile(expected, 20)
    with config_context(working_memory=0.01):
        assert_allclose(reg.set_params(n_jobs=2).predict(queries), expected, **TIGHT)
    loaded = pickle.loads(pickle.dumps(reg))
    assert sp.issparse(loaded.keys_)
    assert_allclose(loaded.predict(queries), expected, **TIGHT)


def test_threads_share_the_sparse_queries():
    # Enough pairs (2**22) for the engine to start threads over the chunks.
    X_big, y_big, _ = _data(n=2100, n_queries=0, seed=2)
    queries = sp.csr_array(_data(n=2048, n_queries=0, seed=3)[0])
    dense = KernelAttentionRegressor(n_jobs=1).fit(X_big, y_big)
    sparse = KernelAttentionRegressor(n_jobs=2).fit(sp.csc_array(X_big), y_big)
    with config_context(working_memory=1):
        got = sparse.predict(queries, return_std=True)
    expected = dense.predict(queries.toarray(), return_std=True)
    assert_allclose(got, expected, **TIGHT)


def test_predicting_sparse_queries_keeps_to_working_memory():
    # Sparse queries are made dense a chunk at a time: their dense copy
    # (10 MiB, and its scaled copies) would be well over the budget.
    rng = np.random.default_rng(0)
    n_queries, d = 20_000, 64
    X_train = rng.normal(size=(500, d))
    rows = np.repeat(np.arange(n_queries), 2)
    cols = rng.integers(0, d, size=2 * n_queries)
    queries = sp.csr_array((np.ones(2 * n_queries), (rows, cols)), shape=(n_queries, d))
    reg = KernelAttentionRegressor(bandwidth=5.0).fit(X_train, X_train[:, 0])
    working_memory = 1
    result, peak = traced_peak(lambda: reg.predict(queries), working_memory)
    inputs = queries.data.nbytes + queries.indices.nbytes + queries.indptr.nbytes
    budget = working_memory * 2**20 + output_bytes(result) + FIXED_SLACK
    budget += INPUT_COPIES * inputs
    assert 8 * n_queries * d > budget
    assert peak <= budget, f"peak {peak / 2**20:.1f} MiB, budget {budget / 2**20:.1f}"
    assert_allclose(result, reg.predict(queries.toarray()), **TIGHT)


def test_the_array_api_path_refuses_sparse_queries_and_numpy_takes_sparse_keys():
    xp = strict_namespace()
    expected = KernelAttentionRegressor().fit(X, Y).predict(Q)
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(xp.asarray(X), xp.asarray(Y))
        with pytest.raises(ValueError, match="fitted on the array API path"):
            reg.predict(sp.csr_array(Q))
        with pytest.raises(ValueError, match="fitted on the array API path"):
            reg.attention_weights(sp.csr_array(Q))
        # Sparse keys under dispatch are NumPy's: the NumPy engine pools them.
        reg = KernelAttentionRegressor().fit(sp.csr_array(X), Y)
        assert_allclose(reg.predict(sp.csr_array(Q)), expected, **TIGHT)


# -- one-hot encoded categorical columns in a Pipeline -----------------------
def _fair():
    """statsmodels' extramarital affairs survey: six categorical columns
    (occupations, religiousness, marriage rating, education, children)
    beside two numeric ones; one-hot encoded, a quarter of the columns of a
    row are non-zero, and a ColumnTransformer's output is sparse."""
    datasets = pytest.importorskip("statsmodels.datasets")
    data = datasets.fair.load_pandas().data.sample(n=800, random_state=0)
    categorical = [
        "occupation",
        "occupation_husb",
        "religious",
        "rate_marriage",
        "educ",
        "children",
    ]
    numeric = ["age", "yrs_married"]
    X_ = data[categorical + numeric].copy()
    X_[categorical] = X_[categorical].astype(int).astype(str)
    return X_, data["affairs"].to_numpy(), categorical


def _encoder(categorical, sparse_threshold):
    return ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore"), categorical)],
        remainder=StandardScaler(),
        sparse_threshold=sparse_threshold,
    )


@pytest.mark.slow
def test_one_hot_encoded_categories_in_a_pipeline():
    X_, y, categorical = _fair()
    X_train, X_test, y_train, y_test = train_test_split(X_, y, random_state=0)
    encoder = _encoder(categorical, sparse_threshold=0.3)
    assert sp.issparse(encoder.fit_transform(X_train))  # OneHotEncoder's default
    pipe = make_pipeline(encoder, KernelAttentionRegressorCV(bandwidths=8, cv=5))
    pred = pipe.fit(X_train, y_train).predict(X_test)
    dense = make_pipeline(
        _encoder(categorical, sparse_threshold=0),
        KernelAttentionRegressorCV(bandwidths=8, cv=5),
    )
    assert_allclose(pred, dense.fit(X_train, y_train).predict(X_test), **TIGHT)
    # Better than the training mean on held-out rows (a weak signal: ridge
    # regression scores R^2 0.06 by 5-fold CV on this sample).
    assert r2_score(y_test, pred) > 0.0

    clf = make_pipeline(_encoder(categorical, 0.3), KernelAttentionClassifier())
    proba = clf.fit(X_train, y_train > 0).predict_proba(X_test)
    dense_clf = make_pipeline(_encoder(categorical, 0), KernelAttentionClassifier())
    dense_proba = dense_clf.fit(X_train, y_train > 0).predict_proba(X_test)
    assert_allclose(proba, dense_proba, **TIGHT)
    # A lower log-loss on held-out rows than the class frequencies of the
    # training rows.
    prior = np.mean(y_train > 0)
    constant = np.column_stack(
        [np.full(len(y_test), 1 - prior), np.full(len(y_test), prior)]
    )
    assert log_loss(y_test > 0, proba) < log_loss(y_test > 0, constant)


def _reads_sparse_frames(pd):
    """Whether this scikit-learn validates a frame of sparse columns (1.6.1
    with recent pandas reads them as NaN)."""
    from sklearn.utils.validation import check_array

    frame = pd.DataFrame.sparse.from_spmatrix(sp.csr_matrix(np.eye(2)))
    try:
        check_array(frame, accept_sparse=["csr", "csc"])
    except ValueError:
        return False
    return True


def test_frames_of_sparse_columns_are_sparse_keys():
    pd = pytest.importorskip("pandas")
    if not _reads_sparse_frames(pd):
        pytest.skip("this scikit-learn reads frames of sparse columns as NaN")
    names = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame.sparse.from_spmatrix(sp.csr_matrix(X), columns=names)
    queries = pd.DataFrame.sparse.from_spmatrix(sp.csr_matrix(Q), columns=names)
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=2.5)
    expected = reg.fit(X, Y).predict(Q)
    assert_allclose(reg.fit(frame, Y).predict(queries), expected, **TIGHT)
    assert reg.algorithm_ == "brute"
    assert list(reg.feature_names_in_) == names
    with pytest.raises(ValueError, match="algorithm='kd_tree' cannot use sparse X"):
        reg.set_params(algorithm="kd_tree").fit(frame, Y)
