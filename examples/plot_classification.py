"""
=======================================
Classification by attention pooling
=======================================

:class:`~sklearn_kernelpool.KernelAttentionClassifier` pools one-hot encoded
labels: the probability of a class at a query is its attention-weighted
frequency among the training labels. On the two-moons data set, the bandwidth
of the gaussian kernel is tuned by cross-validated log loss; then the
probabilities and decision regions of three fits are drawn: the tuned
gaussian, the compact Epanechnikov kernel at a comparable width, and a
bandwidth far too small.
"""

# %%
# Data and tuning
# ---------------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_kernelpool import EmptyNeighborhoodWarning, KernelAttentionClassifier

X, y = make_moons(n_samples=300, noise=0.3, random_state=0)
X_test, y_test = make_moons(n_samples=1000, noise=0.3, random_state=1)

search = GridSearchCV(
    KernelAttentionClassifier(),
    {"bandwidth": np.geomspace(0.02, 2, 21)},
    cv=KFold(5, shuffle=True, random_state=0),
    scoring="neg_log_loss",
).fit(X, y)
h = search.best_params_["bandwidth"]
print(f"gaussian bandwidth h = {h:.3f}")

# %%
# Probabilities and decision regions
# ----------------------------------
# The colour is the probability of the second moon; the black line is where
# it crosses 1/2, the boundary of the decision regions. The Epanechnikov
# kernel's support radius is its bandwidth, so it gets ``2 h`` to cover about
# as much as the gaussian's two standard deviations. Far from every key it has
# no attention weight at all, and ``on_empty="nearest"`` gives such a query
# the class of its nearest key.
classifiers = {
    f"gaussian, h = {h:.2f}": search.best_estimator_,
    f"epanechnikov, h = {2 * h:.2f}": KernelAttentionClassifier(
        kernel="epanechnikov", bandwidth=2 * h
    ).fit(X, y),
    "gaussian, h = 0.02": KernelAttentionClassifier(bandwidth=0.02).fit(X, y),
}

grid = np.meshgrid(np.linspace(-2, 3, 200), np.linspace(-1.5, 2, 140))
queries = np.column_stack([grid[0].ravel(), grid[1].ravel()])

fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
for ax, (title, clf) in zip(axes, classifiers.items(), strict=True):
    with warnings.catch_warnings():
        # The compact kernel leaves the far corners of the grid without keys.
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        proba = clf.predict_proba(queries)[:, 1].reshape(grid[0].shape)
        accuracy = clf.score(X_test, y_test)
    image = ax.contourf(*grid, proba, levels=np.linspace(0, 1, 11), cmap="RdBu_r")
    ax.contour(*grid, proba, levels=[0.5], colors="k")
    ax.scatter(*X.T, c=y, cmap="RdBu_r", edgecolors="k", s=15)
    ax.set_title(f"{title}\ntest accuracy {accuracy:.2f}")
fig.colorbar(image, ax=axes, label="probability of class 1")
plt.show()

# %%
# The tuned bandwidth gives a smooth boundary and calibrated-looking
# probabilities. The tiny bandwidth is the nearest-neighbour classifier: every
# query gets the label of its nearest key with probability 1, and the regions
# follow every noisy point.
