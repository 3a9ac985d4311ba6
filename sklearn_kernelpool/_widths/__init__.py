"""Learned widths: the leave-one-out losses and criteria of per-feature
widths (and categorical lambdas) with their analytic gradients, their
minimisation, and the guard that keeps them only where they win out of fold.

Layer 3. Its modules import from the held-out sums, the engines and layer 0
only.
"""
