"""Held-out sums and fits: leave-one-out and K-fold predictions of many
candidates (kernels, bandwidths, degrees, neighbour counts, categorical
bandwidths) from one pass over the pairs of points, on every engine, and the
in-sample criteria of a linear smoother (GCV, AICc).

Layer 2. Its modules import from the engines and layer 0 only.
"""
