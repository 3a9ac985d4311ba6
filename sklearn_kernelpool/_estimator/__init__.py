"""What the estimators share: their parameters and input checks, the fitted
engine and its persistence, categorical and array API input, the partially
linear model and the methods of the regressor.

Layer 6. Its modules import from every layer below; the estimators of the
top (:mod:`.._regression`, :mod:`.._cv`, ...) import from it.
"""
