"""
==============================================
A fit with its confidence and prediction bands
==============================================

:class:`~sklearn_kernelpool.FitDisplay` draws the data, the fitted curve along
one feature and two bands:

* the **confidence band** of the mean function, from
  :meth:`~sklearn_kernelpool.KernelAttentionRegressor.confidence_interval`:
  where the smoothed curve lies (pointwise by default, or over the whole
  curve at once with ``simultaneous=True``);
* the **prediction band** of new observations, from the jackknife+ interval
  of :meth:`~sklearn_kernelpool.KernelAttentionRegressor.prediction_interval`:
  where a new ``y`` falls, the noise included.
"""

# %%
# Noisy data whose noise grows to the right
# -----------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_kernelpool import FitDisplay, KernelAttentionRegressor

rng = np.random.default_rng(0)
X = rng.uniform(0, 5, (300, 1))
noise = 0.1 + 0.3 * X[:, 0] / 5
y = 2 * np.sin(X[:, 0]) + X[:, 0] + noise * rng.normal(size=300)

# %%
# The local-linear fit and its bands
# ----------------------------------
# The 95 % confidence band is narrow: it covers the smoothed curve, whose
# uncertainty shrinks with the number of points in a window. The 90 %
# prediction band also holds the noise of a new observation, and widens with
# it.
reg = KernelAttentionRegressor("epanechnikov", bandwidth=0.6, degree=1).fit(X, y)
display = FitDisplay.from_estimator(reg, X, y, confidence=0.95, prediction=0.9)
x = display.grid
display.ax_.plot(x, 2 * np.sin(x) + x, "k--", label="truth")
display.ax_.legend()

# %%
# A simultaneous band
# -------------------
# A pointwise band covers the curve at each ``x`` with probability 95 %; the
# simultaneous (sup-t, wild bootstrap) band covers the whole curve at once, so
# it is wider.
fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True, layout="constrained")
FitDisplay.from_estimator(reg, X, y, ax=axes[0])
axes[0].set_title("pointwise")
FitDisplay.from_estimator(
    reg, X, y, method="bootstrap", simultaneous=True, random_state=0, ax=axes[1]
)
axes[1].set_title("simultaneous")
plt.show()
