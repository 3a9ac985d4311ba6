"""The learned map of KernelAttentionProjection: its loss and gradient against
a plain loop over every pair and central differences, the learning, and the
transformer's contract."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.exceptions import ConvergenceWarning

from sklearn_kernelpool import KernelAttentionProjection, KernelAttentionRegressor
from sklearn_kernelpool._widths._projection_loss import (
    differentiable_kernels,
    projection_loss,
)
from sklearn_kernelpool.kernels import KERNELS

KERNEL_NAMES = sorted({KERNELS[name].name for name in differentiable_kernels()})
EPS = float(np.finfo(np.float64).eps)


def _pair_loss(A, X, Y, w, kernel, objective):
    """The leave-one-out loss and its gradient by a plain loop over the
    pairs: the definition, with the chain rule written term by term."""
    n, p = Y.shape
    Z = X @ A.T
    loss, grad = 0.0, np.zeros_like(A)
    scale = w.sum() * (p if objective == "squared_error" else 1)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        a = np.array([w[j] * kernel(np.linalg.norm(Z[i] - Z[j])) for j in others])
        total = a.sum()
        if total == 0:
            f = (w[others] @ Y[others]) / w[others].sum()
            e = np.zeros(p)
        else:
            f = a @ Y[others] / total
        if objective == "squared_error":
            loss += w[i] * np.sum((Y[i] - f) ** 2) / scale
            e = 2 * w[i] * (f - Y[i]) / scale
        else:
            P = np.clip(f, EPS, 1 - EPS)
            loss -= w[i] * np.sum(Y[i] * np.log(P)) / scale
            e = np.where((Y[i] > 0) & (P == f), -w[i] * Y[i] / f, 0.0) / scale
        if total == 0:
            continue
        for k, j in enumerate(others):
            s = float(np.sum((Z[i] - Z[j]) ** 2))
            if a[k] == 0 or s == 0:
                continue
            slope = float(kernel.log_slope(np.array([s]))[0])
            d = X[i] - X[j]
            # dL/ds_ij, then ds_ij/dA = 2 A d d^T
            dLds = slope * a[k] / total * (e @ (Y[j] - f))
            grad += dLds * 2 * np.outer(A @ d, d)
    return loss, grad


def _data(objective, n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if objective == "squared_error":
        Y = np.column_stack([np.sin(X[:, 0] + X[:, 1]), X[:, 2] ** 2])
    else:
        Y = np.eye(3)[rng.integers(0, 3, n)]
    w = rng.uniform(0.5, 2.0, n)
    return X, Y, w


def _map(kernel, d=3, r=2, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(r, d)) * (0.2 if kernel.is_compact else 0.5)


@pytest.mark.parametrize("objective", ["squared_error", "log_loss"])
@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_loss_and_gradient_equal_the_loop_over_pairs(name, objective):
    kernel = KERNELS[name]
    X, Y, w = _data(objective)
    A = _map(kernel)
    loss, grad, _ = projection_loss(A, X, Y, w, kernel, objective=objective)
    ref_loss, ref_grad = _pair_loss(A, X, Y, w, kernel, objective)
    assert_allclose(loss, ref_loss, rtol=1e-10)
    assert_allclose(grad, ref_grad, rtol=1e-8, atol=1e-10 * np.abs(ref_grad).max())


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_gradient_equals_central_differences(name):
    # Richardson's extrapolation of central differences: an error of order
    # h**4, so that the analytic gradient is checked to 1e-8.
    kernel = KERNELS[name]
    X, Y, w = _data("squared_error", seed=3)
    A = _map(kernel, seed=4)
    _, grad, _ = projection_loss(A, X, Y, w, kernel)

    def loss(B):
        return projection_loss(B, X, Y, w, kernel, gradient=False)[0]

    numeric = np.zeros_like(A)
    h = 1e-4
    for index in np.ndindex(A.shape):
        E = np.zeros_like(A)
        E[index] = 1.0

        def central(step, E=E):
            return (loss(A + step * E) - loss(A - step * E)) / (2 * step)

        numeric[index] = (4 * central(h / 2) - central(h)) / 3
    assert_allclose(grad, numeric, rtol=1e-8, atol=1e-8 * np.abs(numeric).max())


def test_weight_two_is_a_duplicated_key_of_another_point():
    # In the fit of every other point, a key of weight 2 counts as two keys.
    # (The point's own fit differs: leaving it out keeps its twin.)
    kernel = KERNELS["gaussian"]
    X, Y, _ = _data("squared_error", n=20)
    A = _map(kernel)
    w = np.ones(20)
    w[5] = 2.0
    _, _, fits = projection_loss(A, X, Y, w, kernel, gradient=False)
    Xt, Yt = np.vstack([X, X[5:6]]), np.vstack([Y, Y[5:6]])
    _, _, twin_fits = projection_loss(A, Xt, Yt, np.ones(21), kernel, gradient=False)
    others = np.arange(20) != 5
    assert_allclose(fits[others], twin_fits[:20][others], rtol=1e-12)


def test_loss_is_invariant_to_translation_rotation_and_permutation():
    kernel = KERNELS["cauchy"]
    X, Y, w = _data("squared_error", n=30)
    A = _map(kernel, d=3, r=3)
    loss, grad, _ = projection_loss(A, X, Y, w, kernel)
    # A rotation Q of the keys with the map A Q^T gives the same distances.
    Q, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(3, 3)))
    moved, moved_grad, _ = projection_loss(A @ Q.T, X @ Q.T + 7.0, Y, w, kernel)
    assert_allclose(moved, loss, rtol=1e-10)
    assert_allclose(moved_grad, grad @ Q.T, rtol=1e-8, atol=1e-12)
    order = np.random.default_rng(6).permutation(30)
    permuted, _, _ = projection_loss(A, X[order], Y[order], w[order], kernel)
    assert_allclose(permuted, loss, rtol=1e-12)


def test_blocks_within_working_memory_give_the_same_loss():
    from sklearn import config_context

    kernel = KERNELS["biweight"]
    X, Y, w = _data("squared_error", n=50)
    A = _map(kernel)
    loss, grad, _ = projection_loss(A, X, Y, w, kernel)
    with config_context(working_memory=0.001):  # blocks of a few rows
        small, small_grad, _ = projection_loss(A, X, Y, w, kernel)
    assert_allclose(small, loss, rtol=1e-13)
    assert_allclose(small_grad, grad, rtol=1e-10, atol=1e-14)


def test_an_empty_neighbourhood_gets_the_mean_of_the_others():
    kernel = KERNELS["epanechnikov"]
    X = np.array([[0.0], [0.1], [0.2], [10.0]])
    Y = np.array([[1.0], [2.0], [3.0], [9.0]])
    w = np.array([1.0, 1.0, 2.0, 1.0])
    _, grad, fits = projection_loss(np.eye(1), X, Y, w, kernel)
    assert_allclose(fits[3], (1 * 1 + 1 * 2 + 2 * 3) / 4)
    assert np.all(np.isfinite(grad))


def _index_model(n=300, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    direction = np.ones(d) / np.sqrt(d)
    y = np.sin(2 * X @ direction) + 0.1 * rng.normal(size=n)
    return X, y, direction


def test_learned_map_finds_the_index_and_lowers_the_loo_error():
    X, y, direction = _index_model()
    projection = KernelAttentionProjection(n_components=1).fit(X, y)
    found = projection.components_[0] / np.linalg.norm(projection.components_[0])
    assert abs(found @ direction) > 0.95
    # The leave-one-out error of the map against the best isotropic width.
    kernel = KERNELS["gaussian"]
    Y = y[:, None]
    w = np.ones(len(y))
    iso = min(
        projection_loss(np.eye(6) / h, X, Y, w, kernel, gradient=False)[0]
        for h in np.logspace(-1, 1, 21)
    )
    learned = projection_loss(projection.components_, X, Y, w, kernel)[0]
    assert learned < 0.5 * iso
    # loss_ is in units of the variance of y: 1 - R^2 of the fits.
    assert_allclose(projection.loss_, learned / np.var(y), rtol=1e-6)


def test_transform_then_unit_width_pooling_reproduces_the_learned_fits():
    X, y, _ = _index_model(n=120)
    projection = KernelAttentionProjection(n_components=2).fit(X, y)
    Z = projection.transform(X)
    kernel = KERNELS["gaussian"]
    _, _, fits = projection_loss(
        projection.components_, X, y[:, None], np.ones(120), kernel, gradient=False
    )
    # Point i's leave-one-out fit is the unit-width pool of the others.
    for i in (0, 17, 60):
        keep = np.arange(120) != i
        reg = KernelAttentionRegressor(bandwidth=1.0).fit(Z[keep], y[keep])
        assert_allclose(reg.predict(Z[i : i + 1])[0], fits[i, 0], rtol=1e-10)


def test_class_labels_are_fitted_on_the_log_loss():
    X, y, direction = _index_model()
    labels = np.where(X @ direction > 0, "up", "down")
    projection = KernelAttentionProjection(n_components=1).fit(X, labels)
    assert projection.objective_ == "log_loss"
    found = projection.components_[0] / np.linalg.norm(projection.components_[0])
    assert abs(found @ direction) > 0.9


@pytest.mark.parametrize("init", ["auto", "pca", "identity"])
def test_every_start_is_learned_from(init):
    X, y, _ = _index_model(n=150)
    projection = KernelAttentionProjection(n_components=2, init=init).fit(X, y)
    assert projection.components_.shape == (2, 6)
    assert projection.n_iter_ >= 1


def test_an_array_start_and_its_checks():
    X, y, _ = _index_model(n=60)
    start = np.eye(2, 6)
    fitted = KernelAttentionProjection(init=start, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted.fit(X, y)
    assert fitted.components_.shape == (2, 6)
    with pytest.raises(ValueError, match=r"init must have shape \(n_components, 6\)"):
        KernelAttentionProjection(init=np.eye(2, 5)).fit(X, y)
    with pytest.raises(ValueError, match="init has 2 rows for n_components=3"):
        KernelAttentionProjection(n_components=3, init=start).fit(X, y)
    with pytest.raises(ValueError, match="n_components=7 exceeds the 6 features"):
        KernelAttentionProjection(n_components=7).fit(X, y)


def test_the_iteration_cap_warns():
    X, y, _ = _index_model(n=80)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        projection = KernelAttentionProjection(max_iter=1).fit(X, y)
    assert projection.n_iter_ == 1


def test_kernels_without_a_slope_are_refused():
    X, y, _ = _index_model(n=30)
    for name in ("boxcar", "constant"):
        with pytest.raises(ValueError, match="kernel"):
            KernelAttentionProjection(kernel=name).fit(X, y)


def test_feature_names_out():
    X, y, _ = _index_model(n=60)
    projection = KernelAttentionProjection(n_components=2, max_iter=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        projection.fit(X, y)
    names = projection.get_feature_names_out()
    assert list(names) == [
        "kernelattentionprojection0",
        "kernelattentionprojection1",
    ]


def test_keys_far_from_the_origin_give_the_same_map_loss():
    # The stability suite's case: the loss is computed on centred keys.
    kernel = KERNELS["gaussian"]
    X, Y, w = _data("squared_error", n=40)
    A = _map(kernel)
    loss, grad, _ = projection_loss(A, X, Y, w, kernel)
    far, far_grad, _ = projection_loss(A, X + 1e8, Y, w, kernel)
    assert_allclose(far, loss, rtol=1e-7)
    assert_allclose(far_grad, grad, rtol=1e-5, atol=1e-9)


def test_the_loss_stays_within_working_memory():
    from _memory import traced_peak

    kernel = KERNELS["gaussian"]
    rng = np.random.default_rng(0)
    n = 3000
    X, Y = rng.normal(size=(n, 4)), rng.normal(size=(n, 1))
    A = np.eye(4)
    budget = 2 * 2**20  # working_memory of 2 MiB
    _, peak = traced_peak(
        lambda: projection_loss(A, X, Y, np.ones(n), kernel), working_memory=2
    )
    # Blocks of a few rows: far below one n x n array (72 MB).
    assert peak < 4 * budget + 64 * n * 8


@pytest.mark.parametrize(
    "alter, what",
    [
        (lambda p: setattr(p, "components_", p.components_[:, :2]), "columns"),
        (lambda p: p.components_.__setitem__((0, 0), np.nan), "finite"),
        (lambda p: setattr(p, "components_", p.components_.astype(int)), "float64"),
    ],
)
def test_an_altered_map_is_refused_on_load(alter, what):
    import pickle

    X, y, _ = _index_model(n=60)
    projection = KernelAttentionProjection(n_components=2, max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        projection.fit(X, y)
    alter(projection)
    with pytest.raises(ValueError, match="Cannot load this fitted estimator"):
        pickle.loads(pickle.dumps(projection))


def test_a_map_round_trips_through_skops_with_the_trusted_types():
    sio = pytest.importorskip("skops.io")
    from sklearn_kernelpool import KernelAttentionRegressorCV, skops_trusted_types

    X, y, _ = _index_model(n=150)
    search = KernelAttentionRegressorCV(degree=0, projection=2).fit(X, y)
    loaded = sio.loads(sio.dumps(search), trusted=skops_trusted_types())
    assert_allclose(loaded.predict(X[:10]), search.predict(X[:10]), rtol=0, atol=0)


@pytest.mark.parametrize("scale", [1.0, 1e5])
def test_loss_is_the_loss_of_the_components_returned(scale):
    # Where L-BFGS-B's last line search fails it returns the last good map
    # with the loss of the failed trial: loss_ must be the map's own.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 4)) * scale
    y = np.sin((X[:, 0] + X[:, 1]) / scale) + 0.2 * rng.normal(size=50)
    for kernel in ("epanechikov", "tricube", "gaussian"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            P = KernelAttentionProjection(2, kernel=kernel).fit(X, y)
        Y = ((y - y.mean()) / y.std())[:, None]
        loss = projection_loss(
            P.components_, X, Y, np.ones(50), KERNELS[kernel], gradient=False
        )[0]
        assert_allclose(P.loss_, loss, rtol=1e-12)


@pytest.mark.parametrize("s", [1e-8, 1e-4, 1e2, 1e8])
def test_the_learned_map_does_not_depend_on_the_units_of_X(s):
    # A map A on X is the map A / s on X * s: the same distances, the same
    # loss. L-BFGS must see the same problem at every s.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 4))
    y = np.sin(X[:, 0] + X[:, 1])
    reference = KernelAttentionProjection(n_components=2).fit(X, y)
    scaled = KernelAttentionProjection(n_components=2).fit(X * s, y)
    assert_allclose(scaled.loss_, reference.loss_, rtol=1e-6)
    assert scaled.n_iter_ == reference.n_iter_
    assert_allclose(scaled.components_ * s, reference.components_, rtol=1e-9)


@pytest.mark.slow
def test_raw_and_standardised_diabetes_reach_the_same_loss():
    # Its features are centred and scaled alike: the raw table is the
    # standardised one times 0.0476, and the map the same up to that factor.
    from sklearn.datasets import load_diabetes
    from sklearn.preprocessing import StandardScaler

    X, y = load_diabetes(return_X_y=True)
    standardised = StandardScaler().fit_transform(X)
    raw = KernelAttentionProjection(2, max_iter=1000).fit(X, y)
    scaled = KernelAttentionProjection(2, max_iter=1000).fit(standardised, y)
    assert raw.n_iter_ < 1000 and scaled.n_iter_ < 1000  # both converged
    assert_allclose(raw.loss_, scaled.loss_, rtol=1e-6)


@pytest.mark.parametrize(
    "dtype, given",
    [("Int64", int), ("boolean", bool), ("category", float)],
)
def test_pandas_labels_are_class_labels(dtype, given):
    # As NumPy's integers: pandas' nullable integers and booleans, and
    # categories (even of floats), whose validation gives floats.
    pd = pytest.importorskip("pandas")
    X, y, direction = _index_model(n=80)
    labels = (X @ direction > 0).astype(int)
    expected = KernelAttentionProjection(n_components=1, max_iter=20).fit(X, labels)
    fitted = KernelAttentionProjection(n_components=1, max_iter=20)
    fitted.fit(X, pd.Series(labels.astype(given), dtype=dtype))
    assert expected.objective_ == fitted.objective_ == "log_loss"
    assert_allclose(fitted.loss_, expected.loss_, rtol=1e-12)
    assert_allclose(fitted.components_, expected.components_, rtol=1e-12)
    # Pandas' nullable floats stay values of the squared error.
    values = pd.Series(labels, dtype="Float64")
    floats = KernelAttentionProjection(n_components=1, max_iter=20).fit(X, values)
    assert floats.objective_ == "squared_error"


def test_a_frame_with_a_float_column_is_values_of_the_squared_error():
    # One float column among integer ones: several outputs of the squared
    # error, as the same columns of one float array.
    pd = pytest.importorskip("pandas")
    X, y, direction = _index_model(n=80)
    counts = (X @ direction > 0).astype(int) * 3
    frame = pd.DataFrame({"a": y, "b": counts})
    fitted = KernelAttentionProjection(n_components=1, max_iter=300).fit(X, frame)
    array = np.column_stack([y, counts]).astype(np.float64)
    expected = KernelAttentionProjection(n_components=1, max_iter=300).fit(X, array)
    assert fitted.objective_ == "squared_error"
    assert_allclose(fitted.loss_, expected.loss_, rtol=1e-12)
