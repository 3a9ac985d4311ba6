"""
=====================================================
A learned metric: the keys before and after the map
=====================================================

:class:`~sklearn_kernelpool.KernelAttentionProjection` learns a linear map
``A`` of the keys on the exact leave-one-out error of attention pooling: the
query and key projections of an attention layer, tied to one matrix, with the
bandwidth absorbed into it. Here the map is learned on keys in the plane whose
values vary fast along one oblique direction and slowly across it, and the
keys are drawn before and after it. Then three metrics are compared out of
fold: one isotropic width, one width per feature, and the learned map, on
those data, on a single-index model in ten dimensions and on scikit-learn's
diabetes table, where the map overfits.
"""

# %%
# Keys in the plane, values fast along one oblique direction
# ----------------------------------------------------------
# The values oscillate along ``w = (1, 1) / sqrt(2)`` and rise slowly along
# ``v = (-1, 1) / sqrt(2)``. One isotropic width must be narrow enough to
# follow the oscillation along ``w``, and so averages few keys across it,
# where a wide window would do. Widths per feature cannot help: both features
# mix both directions equally.
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_kernelpool import (
    KernelAttentionProjection,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)

rng = np.random.default_rng(0)
n = 400
X_plane = rng.uniform(-2, 2, size=(n, 2))
w = np.array([1.0, 1.0]) / np.sqrt(2)
v = np.array([-1.0, 1.0]) / np.sqrt(2)
y_plane = np.sin(3 * X_plane @ w) + 0.5 * X_plane @ v
y_plane += rng.normal(scale=0.2, size=n)

# %%
# The isotropic width and the learned map
# ---------------------------------------
# A full 2 x 2 map. Its singular values are how much it stretches the keys
# along its two axes, in units of the unit width; the isotropic width ``h``
# stretches every direction by ``1 / h``.
isotropic = KernelAttentionRegressorCV(degree=0, n_neighbors=None)
isotropic.fit(X_plane, y_plane)
projection = KernelAttentionProjection().fit(X_plane, y_plane)
A = projection.components_
_, stretch, directions = np.linalg.svd(A)
h = isotropic.bandwidth_
print(f"isotropic: h = {h:.3f}, stretch 1/h = {1 / h:.2f}")
print("learned A =", np.round(A, 2))
print("stretch along its axes:", np.round(stretch, 2))
print(
    "most stretched direction:", np.round(directions[0] * np.sign(directions[0, 0]), 3)
)
print(
    f"leave-one-out R^2, isotropic: {1 + isotropic.best_score_ / np.var(y_plane):.3f}"
)
print(f"leave-one-out R^2, learned:   {1 - projection.loss_:.3f}")

# %%
# The keys before and after the map
# ---------------------------------
# Left, the keys in their own coordinates, coloured by their values, with the
# neighbourhood of one width around the origin: a circle of radius ``h`` for
# the isotropic width, the ellipse ``||A x|| = 1`` for the learned map.
# Right, the mapped keys ``X @ A.T``, where the learned neighbourhood is the
# unit circle: the map stretches ``w``, along which the values change fast,
# beyond ``1 / h`` and shrinks ``v``, along which they change slowly, so that
# a query pools keys of nearly its value, and many more of them.
circle = np.column_stack(
    [np.cos(np.linspace(0, 2 * np.pi, 200)), np.sin(np.linspace(0, 2 * np.pi, 200))]
)
ellipse = circle @ np.linalg.inv(A).T
fig, (ax_before, ax_after) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
scatter = ax_before.scatter(*X_plane.T, c=y_plane, cmap="viridis", s=12)
ax_before.plot(*(h * circle).T, "k", lw=2, label="isotropic: radius h")
ax_before.plot(*ellipse.T, "C3", lw=2, label="learned: ||A x|| = 1")
ax_before.annotate(
    "", xy=1.6 * w, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "k"}
)
ax_before.text(*(1.7 * w), "w")
ax_before.set_aspect("equal")
ax_before.set_title("keys X")
ax_before.set_xlabel("feature 0")
ax_before.set_ylabel("feature 1")
ax_before.legend(loc="lower right", fontsize="small")
mapped = projection.transform(X_plane)
ax_after.scatter(*mapped.T, c=y_plane, cmap="viridis", s=12)
ax_after.plot(*circle.T, "C3", lw=2)
ax_after.set_aspect("equal")
ax_after.set_title("mapped keys X @ A.T")
ax_after.set_xlabel("component 0")
ax_after.set_ylabel("component 1")
fig.colorbar(scatter, ax=[ax_before, ax_after], label="y")

# %%
# Unit-width pooling of the mapped keys is the learned pooling
# ------------------------------------------------------------
# ``transform`` followed by ``KernelAttentionRegressor(bandwidth=1.0)`` pools
# with the learned weights: its leave-one-out error at width 1 is the
# ``loss_`` of the map.
unit = KernelAttentionRegressorCV(bandwidths=[1.0], degree=0, n_neighbors=None)
unit.fit(mapped, y_plane)
print(f"leave-one-out R^2 at unit width: {1 + unit.best_score_ / np.var(y_plane):.3f}")

# %%
# Three metrics out of fold
# -------------------------
# Five shuffled folds; every pipeline standardises the features in the
# training part. The isotropic width and the per-feature widths are selected
# by :class:`~sklearn_kernelpool.KernelAttentionRegressorCV`; the map is
# learned in full rank and in rank 1. The second data set is a single-index
# model in ten dimensions, ``y = sin(2 w.x) + noise`` with a random unit
# ``w``: no feature alone carries the index. The third is scikit-learn's
# diabetes table (442 rows, 10 features). Its target holds whole numbers,
# which :func:`~sklearn.utils.multiclass.type_of_target` reads as class
# labels: it is standardised, which leaves every :math:`R^2` unchanged and
# makes the map learn on the squared error.
rng = np.random.default_rng(0)
n, d = 600, 10
X_index = rng.normal(size=(n, d))
w_index = rng.normal(size=d)
w_index /= np.linalg.norm(w_index)
y_index = np.sin(2 * X_index @ w_index) + rng.normal(scale=0.2, size=n)

X_diabetes, y_diabetes = load_diabetes(return_X_y=True)
y_diabetes = (y_diabetes - y_diabetes.mean()) / y_diabetes.std()

data = {
    "plane, oblique\n(n=400, d=2)": (X_plane, y_plane),
    "single index\n(n=600, d=10)": (X_index, y_index),
    "diabetes\n(n=442, d=10)": (X_diabetes, y_diabetes),
}
metrics = {
    "isotropic": lambda: KernelAttentionRegressorCV(degree=0),
    "per feature": lambda: KernelAttentionRegressorCV(degree=0, per_feature=True),
    "learned map": lambda: make_pipeline(
        KernelAttentionProjection(),
        KernelAttentionRegressor(bandwidth=1.0),
    ),
    "learned, rank 1": lambda: make_pipeline(
        KernelAttentionProjection(n_components=1),
        KernelAttentionRegressor(bandwidth=1.0),
    ),
}
cv = KFold(5, shuffle=True, random_state=0)
scores = {}
for data_name, (X, y) in data.items():
    for metric_name, metric in metrics.items():
        model = make_pipeline(StandardScaler(), metric())
        with warnings.catch_warnings():
            # On diabetes the full map is still lowering its leave-one-out
            # error, on noise, when L-BFGS stops at max_iter.
            warnings.simplefilter("ignore", ConvergenceWarning)
            scores[data_name, metric_name] = cross_val_score(model, X, y, cv=cv)
        print(
            f"{data_name.splitlines()[0]:17s} {metric_name:16s} "
            f"R^2 = {scores[data_name, metric_name].mean():.3f}"
        )

# %%
# In the plane the full map gains a little over the isotropic width; rank 1
# keeps ``w`` alone and loses the slow trend along ``v``. On the single-index
# model the learned map wins by a wide margin, and rank 1, the true structure,
# wins most (the noise caps :math:`R^2` near 0.93). On diabetes it loses
# badly: a map of 100 entries fitted to the leave-one-out error of 350 noisy
# rows follows their noise. On all 442 rows its leave-one-out :math:`R^2` is
# 0.67 against 0.45 for the isotropic width; out of fold it falls to 0.03.
# ``KernelAttentionRegressorCV(projection="auto")`` keeps a map only where
# the procedure that learns it wins out of fold, for this reason.
fig, ax = plt.subplots(figsize=(9, 4))
width = 0.2
positions = np.arange(len(data))
for k, metric_name in enumerate(metrics):
    means = [scores[data_name, metric_name].mean() for data_name in data]
    errors = [scores[data_name, metric_name].std() for data_name in data]
    ax.bar(
        positions + (k - 1.5) * width,
        means,
        width,
        yerr=errors,
        label=metric_name,
        capsize=3,
    )
ax.set_xticks(positions, list(data))
ax.axhline(0, color="k", lw=0.8)
ax.set_xlabel("data")
ax.set_ylabel("5-fold $R^2$ (mean and spread)")
ax.legend(fontsize="small")
fig.tight_layout()
plt.show()
