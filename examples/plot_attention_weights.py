"""
=================================
Attention weights as a heatmap
=================================

Dive into Deep Learning's chapter "Attention Pooling by Similarity" draws the
attention weights of every query over every training key as a heatmap.
:class:`~sklearn_kernelpool.AttentionWeightsDisplay` draws the same picture
from a fitted estimator: one row per query, one column per training key
(sorted by value for one feature), the colour the normalised weight.
"""

# %%
# The toy problem of the book
# ---------------------------
# Forty noisy training points of ``y = 2 sin(x) + x**0.8`` and fifty queries
# on ``[0, 5)``.
import matplotlib.pyplot as plt
import numpy as np

from sklearn_kernelpool import AttentionWeightsDisplay, KernelAttentionRegressor

rng = np.random.default_rng(0)
x_train = np.sort(rng.uniform(0, 5, 40))
y_train = 2 * np.sin(x_train) + x_train**0.8 + rng.normal(0, 0.5, 40)
x_test = np.arange(0, 5, 0.1)

# %%
# A few bandwidths
# ----------------
# A small bandwidth gives each query to its nearest keys: a thin diagonal. A
# large one spreads the attention over many keys and smooths the fit.
fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
for ax, bandwidth in zip(axes, [0.1, 0.5, 2.0], strict=True):
    reg = KernelAttentionRegressor("gaussian", bandwidth=bandwidth)
    reg.fit(x_train[:, None], y_train)
    AttentionWeightsDisplay.from_estimator(reg, x_test[:, None], ax=ax)
    ax.set_title(f"gaussian, h = {bandwidth}")

# %%
# The fits these weights make
# ---------------------------
# Each prediction is its row of weights times the training values.
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(x_train, y_train, "o", alpha=0.5, label="training values")
for bandwidth in [0.1, 0.5, 2.0]:
    reg = KernelAttentionRegressor("gaussian", bandwidth=bandwidth)
    reg.fit(x_train[:, None], y_train)
    ax.plot(x_test, reg.predict(x_test[:, None]), label=f"h = {bandwidth}")
ax.set_xlabel("x")
ax.legend()

# %%
# Local-linear weights can be negative
# ------------------------------------
# With ``degree=1`` the weights are those of the local-linear fit's equivalent
# kernel. Near the ends of the data they turn negative to undo the pull
# towards the inside; the display then switches to a diverging colour map
# centred on zero.
reg = KernelAttentionRegressor("gaussian", bandwidth=0.8, degree=1)
reg.fit(x_train[:, None], y_train)
display = AttentionWeightsDisplay.from_estimator(reg, x_test[:, None])
display.ax_.set_title("local-linear equivalent kernel, h = 0.8")
plt.show()
