"""Inference on a fitted estimator: residuals and smoother rows, standard
errors and confidence intervals, gradients, model diagnostics, and the
jackknife+ and CV+ intervals from exact leave-out fits.

Layer 5. Its modules import from the layers below (search excepted in
practice) and layer 0 only; never from the estimators.
"""
