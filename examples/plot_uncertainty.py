"""
=======================================
Uncertainty bands and local-linear fits
=======================================

``predict(X, return_std=True)`` also returns the attention-weighted standard
deviation of the training values around each prediction: an estimate of the
spread of ``y`` given ``X``, not of the error of the prediction. Here the
noise grows from left to right, and the band ``mean +- 2 std`` follows it.

Near the ends of the data the pooled average (``degree=0``) is pulled
towards the inside; the local-linear fit (``degree=1``) is not, and its
spread is that of the residuals of the local line.
"""

# %%
# Heteroscedastic data
# --------------------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_kernelpool import KernelAttentionRegressor

rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 400))
noise = 0.1 + 0.3 * x_train / 5
y_train = 2 * np.sin(x_train) + x_train + noise * rng.normal(size=400)
x_test = np.linspace(0, 5, 201)
y_true = 2 * np.sin(x_test) + x_test

# %%
# Pooling and the local-linear fit, with their bands
# --------------------------------------------------
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
for ax, degree in zip(axes, (0, 1), strict=True):
    reg = KernelAttentionRegressor("epanechnikov", bandwidth=0.4, degree=degree)
    mean, std = reg.fit(x_train[:, None], y_train).predict(
        x_test[:, None], return_std=True
    )
    ax.plot(x_train, y_train, ".", color="0.75", label="training values")
    ax.plot(x_test, y_true, "k--", label="truth")
    ax.plot(x_test, mean, label="prediction")
    band = (mean - 2 * std, mean + 2 * std)
    ax.fill_between(x_test, *band, alpha=0.3, label="+- 2 std")
    ax.set_title(f"degree={degree}")
    ax.set_xlabel("x")
    fitted, spread = reg.predict(x_train[:, None], return_std=True)
    inside = np.mean(np.abs(y_train - fitted) < 2 * spread)
    print(f"degree={degree}: {inside:.0%} of the training values inside the band")
axes[0].legend(loc="upper left")

# %%
# The spread against the true noise level
# ---------------------------------------
# The estimated standard deviation follows the noise level used to draw the
# data. With ``degree=0`` it also contains the variation of the trend within
# the window, and rises where the curve is steep.
fig, ax = plt.subplots(figsize=(6, 3.5))
for degree in (0, 1):
    reg = KernelAttentionRegressor("epanechnikov", bandwidth=0.4, degree=degree)
    _, std = reg.fit(x_train[:, None], y_train).predict(
        x_test[:, None], return_std=True
    )
    ax.plot(x_test, std, label=f"std, degree={degree}")
ax.plot(x_test, 0.1 + 0.3 * x_test / 5, "k--", label="true noise level")
ax.set_xlabel("x")
ax.legend()

# %%
# The bias at the boundary
# ------------------------
# On the first and last tenth of the interval, the error of each fit against
# the noiseless curve.
for degree in (0, 1):
    reg = KernelAttentionRegressor("epanechnikov", bandwidth=0.4, degree=degree)
    error = reg.fit(x_train[:, None], y_train).predict(x_test[:, None]) - y_true
    edges = (x_test < 0.5) | (x_test > 4.5)
    print(
        f"degree={degree}: mean |error| {np.mean(np.abs(error[edges])):.3f} at the "
        f"edges, {np.mean(np.abs(error[~edges])):.3f} inside"
    )
plt.show()
