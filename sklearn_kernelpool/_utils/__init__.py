"""Utilities of every layer: validation of numbers and widths, working
memory and row batches, threads, sparse input, user kernels and progress
bars.

Layer 0. Its modules import nothing of the package but :mod:`..kernels` and
:mod:`.._exceptions`.
"""
