"""The array API path: non-NumPy arrays pooled in their namespace.

Every prediction is compared with the NumPy engine's on the same data. The
tests run on array-api-strict (the ``test`` extra), on PyTorch on the CPU
(the ``array-api`` extra) and on PyTorch CUDA where a device is available.
The PyTorch tests skip where PyTorch is not installed, and the whole module
where array API dispatch is unavailable.
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import clone, config_context
from sklearn.utils._array_api import device as array_device
from sklearn.utils._array_api import yield_namespace_device_dtype_combinations
from sklearn.utils.estimator_checks import check_array_api_input

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionRegressor
from sklearn_kernelpool._engine._array_api import ArrayAPIPool
from sklearn_kernelpool._engine._pooling import KernelPool
from sklearn_kernelpool.kernels import KERNELS

pytest.importorskip(
    "array_api_compat",
    reason='array-api-compat is not installed; pip install ".[test]"',
)
array_api_strict = pytest.importorskip(
    "array_api_strict",
    reason='array-api-strict is not installed; pip install ".[test]"',
)
try:  # scikit-learn < 1.8 needs SciPy >= 1.14 for array API dispatch
    with config_context(array_api_dispatch=True):
        pass
except ImportError as exc:
    pytest.skip(
        f"array API dispatch is unavailable with scikit-learn {sklearn.__version__} "
        f"and SciPy {scipy.__version__}: {exc}",
        allow_module_level=True,
    )
try:
    import torch
except ImportError:
    torch = None

NO_TORCH = 'PyTorch is not installed; pip install ".[array-api]"'
needs_torch = pytest.mark.skipif(torch is None, reason=NO_TORCH)
needs_cuda = pytest.mark.skipif(
    torch is None or not torch.cuda.is_available(),
    reason=NO_TORCH if torch is None else "PyTorch finds no CUDA device",
)

CANONICAL_KERNELS = sorted({kernel.name for kernel in KERNELS.values()})

NAMESPACES = [
    pytest.param("array_api_strict", None, id="array_api_strict"),
    pytest.param("torch", "cpu", id="torch-cpu", marks=needs_torch),
    pytest.param("torch", "cuda", id="torch-cuda", marks=needs_cuda),
]
# Tolerances of the array API results against the NumPy engine's, by dtype:
# float64 differs by rounding only; float32 work is compared with the NumPy
# engine's float32 predictions, which widen some products to float64.
RTOL = {"float64": 1e-9, "float32": 2e-4}
ATOL = {"float64": 1e-12, "float32": 2e-5}


def _namespace(name):
    return array_api_strict if name == "array_api_strict" else torch


def _to_xp(name, device, a):
    xp = _namespace(name)
    if device is None:
        return xp.asarray(a)
    return xp.asarray(a, device=device)


def _to_numpy(a):
    if torch is not None and isinstance(a, torch.Tensor):
        return a.cpu().numpy()
    return np.asarray(a._array)  # array-api-strict refuses np.asarray


def _data(dtype="float64", n_outputs=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 3)).astype(dtype)
    shape = (60,) if n_outputs is None else (60, n_outputs)
    y = (rng.normal(size=shape) + 5.0).astype(dtype)
    queries = (2.0 * rng.normal(size=(25, 3))).astype(dtype)
    return X, y, queries


def _fit_both(reg, ns, device, X, y, sample_weight=None):
    """The estimator fitted on NumPy arrays and on arrays of ``ns``."""
    numpy_reg = clone(reg).fit(X, y, sample_weight=sample_weight)
    weights = None if sample_weight is None else _to_xp(ns, device, sample_weight)
    with config_context(array_api_dispatch=True):
        xp_reg = clone(reg).fit(
            _to_xp(ns, device, X), _to_xp(ns, device, y), sample_weight=weights
        )
    return numpy_reg, xp_reg


# A standard deviation is the square root of a difference of moments: where
# it is near zero, its rounding is about sqrt(eps) times the spread of y.
STD_ATOL = {"float64": 1e-7, "float32": 3e-3}


def _assert_close(actual, expected, dtype, atol=None):
    atol = ATOL[dtype] * 10 if atol is None else atol
    assert_allclose(_to_numpy(actual), expected, rtol=RTOL[dtype], atol=atol)


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kernel", CANONICAL_KERNELS)
def test_predictions_equal_numpy(ns, device, dtype, kernel):
    X, y, queries = _data(dtype)
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=1.5)
    numpy_reg, xp_reg = _fit_both(reg, ns, device, X, y)
    Q = _to_xp(ns, device, queries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        expected = numpy_reg.predict(queries)
        with config_context(array_api_dispatch=True):
            pred = xp_reg.predict(Q)
    assert isinstance(xp_reg._pool, ArrayAPIPool)
    assert xp_reg.algorithm_ == "brute"
    # The result is an array of the input's namespace, device and dtype.
    assert type(pred) is type(Q)
    assert array_device(pred) == array_device(Q)
    assert pred.dtype == Q.dtype
    assert pred.shape == (25,)
    _assert_close(pred, expected, dtype)


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "cauchy", "cosine"])
def test_weights_multi_output_std_and_attention(ns, device, dtype, kernel):
    X, y, queries = _data(dtype, n_outputs=2, seed=1)
    rng = np.random.default_rng(2)
    sample_weight = rng.uniform(0.5, 3.0, size=60)
    sample_weight[:5] = 0.0  # rows of weight zero never count
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=2.0)
    numpy_reg, xp_reg = _fit_both(reg, ns, device, X, y, sample_weight)
    Q = _to_xp(ns, device, queries)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        mean, std = numpy_reg.predict(queries, return_std=True)
        weights = numpy_reg.attention_weights(queries)
        with config_context(array_api_dispatch=True):
            xp_mean, xp_std = xp_reg.predict(Q, return_std=True)
            xp_weights = xp_reg.attention_weights(Q)
    assert xp_mean.shape == xp_std.shape == (25, 2)
    assert xp_weights.shape == (25, 60)
    _assert_close(xp_mean, mean, dtype)
    _assert_close(xp_std, std, dtype, atol=STD_ATOL[dtype])
    _assert_close(xp_weights, weights, dtype)
    assert np.all(_to_numpy(xp_weights)[:, :5] == 0.0)
    # The defining formula: the prediction is the weights times the values.
    assert_allclose(
        _to_numpy(xp_weights) @ y, _to_numpy(xp_mean), rtol=RTOL[dtype] * 10
    )


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
@pytest.mark.parametrize("on_empty", ["nearest", "mean", "nan"])
def test_fallbacks_equal_numpy(ns, device, on_empty):
    # Keys 0, 1 and 3; a narrow boxcar leaves 1.5 (halfway between two keys
    # of weights 1 and 3: a tie averaged by weight), 2.5 and 10 empty.
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([[0.0, 1.0], [4.0, -1.0], [6.0, 2.0], [8.0, 0.5]])
    sample_weight = np.array([1.0, 1.0, 3.0, 0.0])  # key 3 has weight zero
    queries = np.array([[0.1], [1.5], [2.7], [10.0], [-4.0]])
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.4, on_empty=on_empty)
    numpy_reg, xp_reg = _fit_both(reg, ns, device, X, y, sample_weight)
    Q = _to_xp(ns, device, queries)
    with warnings.catch_warnings(record=True) as expected_warnings:
        warnings.simplefilter("always")
        expected = numpy_reg.predict(queries, return_std=True)
        expected_weights = numpy_reg.attention_weights(queries)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with config_context(array_api_dispatch=True):
            pred = xp_reg.predict(Q, return_std=True)
            weights = xp_reg.attention_weights(Q)
    for actual, wanted in zip(pred, expected, strict=True):
        assert_allclose(_to_numpy(actual), wanted, rtol=1e-12, atol=1e-12)
    assert_allclose(_to_numpy(weights), expected_weights, rtol=1e-12, atol=1e-15)
    # The same warnings, with the same counts, pointing at the caller.
    assert [str(w.message) for w in caught] == [
        str(w.message) for w in expected_warnings
    ]
    assert [w.category for w in caught] == [EmptyNeighborhoodWarning] * 2
    assert [(w.message.n_empty, w.message.n_queries) for w in caught] == [(4, 5)] * 2
    assert caught[0].filename == __file__
    if on_empty == "nearest":
        # The tie at 1.5 shares the weight 1 : 3 between keys 1 and 2.
        assert_allclose(
            _to_numpy(pred[0])[1], [(4.0 + 3 * 6.0) / 4, (-1.0 + 3 * 2.0) / 4]
        )


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
def test_on_empty_raise(ns, device):
    X = np.array([[0.0], [1.0]])
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5, on_empty="raise")
    with config_context(array_api_dispatch=True):
        reg.fit(_to_xp(ns, device, X), _to_xp(ns, device, [0.0, 1.0]))
        assert_allclose(_to_numpy(reg.predict(_to_xp(ns, device, [[0.1]]))), [0.0])
        with pytest.raises(ValueError, match="1 of 2 queries have no training key"):
            reg.predict(_to_xp(ns, device, [[0.1], [5.0]]))


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_far_queries_get_the_nearest_value(ns, device, kernel):
    # exp of the plain logits underflows to 0/0 this far from the keys; the
    # max-subtracted softmax gives the nearest key's value.
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([1.0, 2.0, 3.0])
    reg = KernelAttentionRegressor(kernel=kernel, bandwidth=1e-3)
    with config_context(array_api_dispatch=True):
        reg.fit(_to_xp(ns, device, X), _to_xp(ns, device, y))
        pred = reg.predict(_to_xp(ns, device, [[-500.0], [1e4], [1.0]]))
    assert_allclose(_to_numpy(pred), [1.0, 3.0, 2.0])


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
@pytest.mark.parametrize("bandwidth", ["scott", "silverman", [0.5, 1.0, 2.0]])
def test_bandwidth_rules_and_per_feature(ns, device, bandwidth):
    X, y, queries = _data(seed=3)
    sample_weight = np.random.default_rng(4).uniform(0.5, 2.0, size=60)
    reg = KernelAttentionRegressor(kernel="biweight", bandwidth=bandwidth)
    numpy_reg, xp_reg = _fit_both(reg, ns, device, X, y, sample_weight)
    assert_allclose(_to_numpy(xp_reg.bandwidth_), numpy_reg.bandwidth_, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        expected = numpy_reg.predict(queries)
        with config_context(array_api_dispatch=True):
            pred = xp_reg.predict(_to_xp(ns, device, queries))
    _assert_close(pred, expected, "float64")


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
def test_chunks_do_not_change_predictions(ns, device):
    # Enough keys that 1 MiB of working memory splits the queries in chunks.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 2))
    y = np.sin(X[:, 0])
    queries = rng.normal(size=(500, 2))
    reg = KernelAttentionRegressor(bandwidth=0.3)
    numpy_reg, xp_reg = _fit_both(reg, ns, device, X, y)
    assert xp_reg._pool._chunk_rows(500, n_buffers=4) == 500
    with config_context(array_api_dispatch=True, working_memory=1):
        assert xp_reg._pool._chunk_rows(500, n_buffers=4) < 500
        pred = xp_reg.predict(_to_xp(ns, device, queries))
    _assert_close(pred, numpy_reg.predict(queries), "float64")


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
def test_fitted_attributes_in_the_namespace(ns, device):
    X, y, _ = _data()
    sample_weight = np.ones(60)
    _, reg = _fit_both(
        KernelAttentionRegressor(bandwidth="scott"), ns, device, X, y, sample_weight
    )
    for name in ("keys_", "values_", "sample_weight_", "bandwidth_"):
        attribute = getattr(reg, name)
        assert type(attribute) is type(reg.keys_), name
        assert array_device(attribute) == array_device(reg.keys_), name


def test_xp_path_does_not_convert_to_numpy(monkeypatch):
    # The NumPy engine must not run, and the result is no NumPy array.
    def refuse(*args, **kwargs):
        raise AssertionError("the NumPy engine ran on array API input")

    monkeypatch.setattr(KernelPool, "__init__", refuse)
    X, y, queries = _data()
    X_xp, Q = array_api_strict.asarray(X), array_api_strict.asarray(queries)
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(X_xp, array_api_strict.asarray(y))
        pred = reg.predict(Q)
    assert isinstance(pred, type(Q))
    assert not isinstance(pred, np.ndarray)


@needs_torch
def test_torch_gradients_flow_through_predict():
    # Only torch operations on the tensors: the gradient of the prediction
    # with respect to the query exists and matches a finite difference.
    X, y, _ = _data()
    reg = KernelAttentionRegressor(bandwidth=1.0)
    with config_context(array_api_dispatch=True):
        reg.fit(torch.asarray(X), torch.asarray(y))
        pool = reg._pool
        q = torch.tensor([[0.3, -0.2, 0.1]], dtype=torch.float64, requires_grad=True)
        pool.pool(q)[0, 0].backward()
        step = 1e-6
        shifted = q.detach().clone()
        shifted[0, 0] += step
        slope = (pool.pool(shifted) - pool.pool(q.detach()))[0, 0] / step
    assert_allclose(float(q.grad[0, 0]), float(slope), rtol=1e-4)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"kernel": "boxcar", "algorithm": "kd_tree"}, "algorithm='kd_tree' works on"),
        ({"kernel": "boxcar", "algorithm": "ball_tree"}, "NumPy arrays only"),
        ({"degree": 1}, "degree=1 .local-linear pooling. works on NumPy"),
        ({"kernel": KERNELS["gaussian"].function}, "callable kernel works on NumPy"),
    ],
)
def test_numpy_only_options_are_refused(params, match):
    X, y, _ = _data()
    reg = KernelAttentionRegressor(**params)
    assert not reg.__sklearn_tags__().array_api_support
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=match):
            reg.fit(array_api_strict.asarray(X), array_api_strict.asarray(y))


def test_auto_picks_brute_and_sparse_weights_are_refused():
    # At this size "auto" picks the k-d tree for NumPy input.
    rng = np.random.default_rng(6)
    X = rng.uniform(size=(5000, 1))
    y = X[:, 0]
    reg = KernelAttentionRegressor(kernel="epanechnikov", bandwidth=0.001)
    assert clone(reg).fit(X, y).algorithm_ == "kd_tree"
    with config_context(array_api_dispatch=True):
        reg.fit(array_api_strict.asarray(X), array_api_strict.asarray(y))
        assert reg.algorithm_ == "brute"
        with pytest.raises(ValueError, match="sparse=True returns a SciPy sparse"):
            reg.attention_weights(array_api_strict.asarray(X[:3]), sparse=True)


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
def test_mixed_inputs_follow_x(ns, device):
    X, y, queries = _data()
    X_xp = _to_xp(ns, device, X)
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(X_xp, y, sample_weight=[1.0] * 60)
        assert type(reg.values_) is type(X_xp)
        assert type(reg.sample_weight_) is type(X_xp)
        assert array_device(reg.values_) == array_device(X_xp)
        pred = reg.predict(_to_xp(ns, device, queries))
        reg.fit(X_xp, y, sample_weight=np.full(60, 2.0))
        assert type(reg.sample_weight_) is type(X_xp)
    assert_allclose(
        _to_numpy(pred), KernelAttentionRegressor().fit(X, y).predict(queries)
    )
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match="sample_weight must be non-negative"):
            reg.fit(X_xp, y, sample_weight=-np.ones(60))
        with pytest.raises(ValueError, match="at least one non-zero"):
            reg.fit(X_xp, y, sample_weight=np.zeros(60))


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
def test_queries_of_another_namespace_are_refused(ns, device):
    X, y, queries = _data()
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(
            _to_xp(ns, device, X), _to_xp(ns, device, y)
        )
        with pytest.raises(
            ValueError, match=r"Regressor.predict\(\) must use the same"
        ):
            reg.predict(queries)
    with pytest.raises(ValueError, match="array_api_dispatch is off"):
        reg.predict(_to_xp(ns, device, queries))
    numpy_reg = KernelAttentionRegressor().fit(X, y)
    with config_context(array_api_dispatch=True):
        with pytest.raises(ValueError, match=f"fit .numpy, device cpu., predict .{ns}"):
            numpy_reg.predict(_to_xp(ns, device, queries))
        # NumPy queries to a NumPy fit are the NumPy engine's business.
        assert_allclose(
            numpy_reg.predict(queries), clone(numpy_reg).fit(X, y).predict(queries)
        )


def test_queries_on_another_device_are_refused():
    # array-api-strict's second device stands for a GPU.
    X, y, queries = _data()
    other = array_api_strict.Device("device1")
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(
            array_api_strict.asarray(X), array_api_strict.asarray(y)
        )
        with pytest.raises(
            ValueError, match=r"attention_weights\(\) must use the same.*device1"
        ):
            reg.attention_weights(array_api_strict.asarray(queries, device=other))


@needs_torch
def test_queries_of_another_array_namespace_are_refused():
    X, y, queries = _data()
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor().fit(torch.asarray(X), torch.asarray(y))
        with pytest.raises(
            ValueError, match="fit .torch, device cpu., attention_weights .array_api_s"
        ):
            reg.attention_weights(array_api_strict.asarray(queries))


def _array_api_combinations():
    for ns, device, dtype in yield_namespace_device_dtype_combinations():
        if ns == "array_api_strict":
            yield pytest.param(ns, device, dtype)
        elif ns == "torch" and device in ("cpu", "cuda"):
            marks = needs_torch if device == "cpu" else needs_cuda
            yield pytest.param(ns, device, dtype, marks=marks)


@pytest.mark.parametrize(
    "estimator",
    [
        KernelAttentionRegressor(),
        KernelAttentionRegressor(kernel="tricube", bandwidth=3.0, on_empty="mean"),
        KernelAttentionRegressor(kernel="cauchy", bandwidth="silverman"),
    ],
    ids=repr,
)
@pytest.mark.parametrize(("ns", "device", "dtype"), list(_array_api_combinations()))
def test_check_array_api_input_and_values(estimator, ns, device, dtype):
    """scikit-learn's array API check, with the values compared too."""
    check_array_api_input(
        type(estimator).__name__,
        estimator,
        ns,
        device,
        dtype,
        check_values=True,
    )


def test_common_checks_cover_strict_and_torch():
    combinations = {ns for ns, *_ in yield_namespace_device_dtype_combinations()}
    assert {"array_api_strict", "torch"} <= combinations
    assert KernelAttentionRegressor().__sklearn_tags__().array_api_support


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
def test_pickle_round_trip(ns, device):
    X, y, queries = _data()
    Q = _to_xp(ns, device, queries)
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor(kernel="cauchy").fit(
            _to_xp(ns, device, X), _to_xp(ns, device, y)
        )
        expected = _to_numpy(reg.predict(Q))
        loaded = pickle.loads(pickle.dumps(reg))
        pred = loaded.predict(Q)
    assert type(pred) is type(Q)
    assert_allclose(_to_numpy(pred), expected, rtol=0, atol=0)


@pytest.mark.parametrize("on_empty", ["mean", "nearest", "nan"])
def test_engines_pickled_before_the_shared_layer_load(on_empty):
    # An engine saved with the spread matrix of the values, before their
    # centred values and the fallback weights were attributes, predicts the
    # same after loading, fallbacks and spread included.
    X, y, queries = _data()
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor(
            kernel="epanechikov", bandwidth=0.3, on_empty=on_empty
        ).fit(array_api_strict.asarray(X), array_api_strict.asarray(y))
        Q = array_api_strict.asarray(queries * 3.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
            expected = reg.predict(Q, return_std=True)
            pool = reg._pool
            c = pool.centered_values
            pool.spread_matrix = array_api_strict.concat([c, c * c], axis=1)
            for name in ("centered_values", "mean_weights", "nan_weights"):
                delattr(pool, name)
            loaded = pickle.loads(pickle.dumps(reg))
            got = loaded.predict(Q, return_std=True)
    for a, b in zip(got, expected, strict=True):
        assert_array_equal(_to_numpy(a), _to_numpy(b))


@pytest.mark.parametrize(("ns", "device"), NAMESPACES)
def test_out_of_range_input_is_refused_clearly(ns, device):
    # The NumPy path's limits: squared distances and squared values that
    # would overflow give an error naming the fix, never inf or NaN.
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([0.0, 1.0, 2.0])
    with config_context(array_api_dispatch=True):
        reg = KernelAttentionRegressor(bandwidth=1.0)
        with pytest.raises(ValueError, match="squared distances overflow"):
            reg.fit(_to_xp(ns, device, X * 1e200), _to_xp(ns, device, y))
        with pytest.raises(ValueError, match="Rescale y"):
            reg.fit(_to_xp(ns, device, X), _to_xp(ns, device, y * 1e300))
        reg.fit(_to_xp(ns, device, X), _to_xp(ns, device, y))
        with pytest.raises(ValueError, match="squared distances overflow"):
            reg.predict(_to_xp(ns, device, X * 1e200))
