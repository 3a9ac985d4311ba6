"""The NumPy engines: attention weights and kernel sums of queries against
keys (brute force, trees, adaptive widths, categorical factors, the array
API), the exact decisions on pairs of points, the local-linear solve and its
safeguard, the chunking of queries and the choice of the path.

Layer 1, with :mod:`.._binned`. Its modules import from the engines and
layer 0 (:mod:`.._utils`, :mod:`..kernels`) only.
"""
