"""
=================================================
Attention pooling on the Dive into Deep Learning
=================================================

The toy problem of the chapter "Attention Pooling by Similarity": 40 noisy
samples of ``y = 2 sin(x) + x`` on ``[0, 5]``. Each kernel's bandwidth is tuned
with :class:`~sklearn.model_selection.GridSearchCV`; then the fits and the
attention weights are drawn.
"""

# %%
# Data and tuning
# ---------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionRegressor,
    kernels,
)

rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 40))
y_train = 2 * np.sin(x_train) + x_train + rng.normal(scale=0.5, size=40)
x_test = np.arange(0, 5, 0.1)
y_true = 2 * np.sin(x_test) + x_test

searches = {}
for name in ["gaussian", "boxcar", "constant", "epanechikov"]:
    search = GridSearchCV(
        KernelAttentionRegressor(kernel=name),
        {"bandwidth": np.geomspace(0.05, 5, 25)},
        cv=KFold(5, shuffle=True, random_state=0),
        scoring="neg_mean_squared_error",
    )
    with warnings.catch_warnings():
        # Narrow compact kernels leave some validation points without keys.
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        searches[name] = search.fit(x_train[:, None], y_train)
    print(f"{name:12s} h = {search.best_params_['bandwidth']:.3f}")

# %%
# The fits
# --------
fig, axes = plt.subplots(1, 4, figsize=(16, 3.5), sharey=True)
for ax, (name, search) in zip(axes, searches.items(), strict=True):
    ax.plot(x_test, y_true, label="truth")
    ax.plot(x_test, search.predict(x_test[:, None]), label="pooled")
    ax.plot(x_train, y_train, "o", alpha=0.4, label="training values")
    ax.set_title(name)
axes[0].legend()

# %%
# The attention weights
# ---------------------
# The weights are the kernel of the scaled distances, normalised per query;
# pooling the training values with them is exactly ``predict``.
fig, axes = plt.subplots(1, 4, figsize=(16, 3.5))
for ax, (name, search) in zip(axes, searches.items(), strict=True):
    h = search.best_estimator_.bandwidth_
    alpha = getattr(kernels, name)(np.abs(x_test[:, None] - x_train[None, :]) / h)
    weights = alpha / alpha.sum(axis=1, keepdims=True)
    if name != "boxcar":  # the boxcar leaves a few queries without keys
        pooled = search.predict(x_test[:, None])
        np.testing.assert_allclose(weights @ y_train, pooled, rtol=1e-10)
    ax.imshow(np.nan_to_num(weights), cmap="Reds", aspect="auto", vmin=0)
    ax.set_title(name)
    ax.set_xlabel("sorted training keys")
axes[0].set_ylabel("queries")
plt.show()
