"""
==========================================
The attention kernels and their weights
==========================================

Every kernel of :mod:`sklearn_kernelpool.kernels` is a function of the scaled
distance ``x = ||q - k|| / h``. This example draws them with
:func:`~sklearn_kernelpool.plot_kernels` and shows how the
bandwidth ``h`` turns one kernel into the attention weights of a query over a
handful of keys.
"""

# %%
# The kernel shapes
# -----------------
# Each kernel equals 1 at zero; compact kernels vanish from ``|x| = 1`` on.
# :func:`~sklearn_kernelpool.plot_kernels` draws every built-in kernel, or
# those named.
import matplotlib.pyplot as plt
import numpy as np

from sklearn_kernelpool import kernels, plot_kernels

fig, ax = plt.subplots(figsize=(8, 4.5))
plot_kernels(ax=ax)
ax.set_title("Every built-in kernel")

# %%
# The four kernels of Dive into Deep Learning, and the parabolic
# Epanechnikov kernel of statistics:
ax = plot_kernels(["gaussian", "boxcar", "constant", "epanechikov", "epanechnikov"])
ax.set_title("The four Dive into Deep Learning kernels and the parabolic one")

# %%
# From kernel to attention weights
# --------------------------------
# For a query ``q`` the weights are ``alpha(|q - k_i| / h)`` normalised to sum
# to one. A small bandwidth concentrates attention on the nearest keys.
keys = np.array([0.0, 0.5, 1.0, 2.0, 3.5])
query = 1.2
fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), sharey=True)
for ax, h in zip(axes, [0.3, 1.0, 3.0], strict=True):
    alpha = kernels.gaussian(np.abs(query - keys) / h)
    weights = alpha / alpha.sum()
    ax.bar(keys, weights, width=0.2)
    ax.axvline(query, color="k", linestyle="--")
    ax.set_title(f"gaussian, h = {h}")
    ax.set_xlabel("key")
axes[0].set_ylabel("attention weight")
plt.show()
