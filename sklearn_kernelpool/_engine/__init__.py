"""The NumPy engines: attention weights and kernel sums of queries against
keys (brute force, trees, adaptive widths, categorical factors, the array
API), the exact decisions on pairs of points, the local-linear solve and its
safeguard, the chunking of queries and the choice of the exact path.

Layer 1. Its modules import from the engines and layer 0 (:mod:`.._utils`,
:mod:`..kernels`) only; the binned engine (:mod:`.._binned`) is built on
them.
"""
