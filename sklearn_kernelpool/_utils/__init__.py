"""Utilities of every layer: the warnings of the package and how they are
issued, validation of numbers and widths, working memory and row batches,
threads, sparse and categorical input, user kernels, the kernels' private
forms and progress bars.

Layer 0. Its modules import nothing of the package but :mod:`..kernels`
(which imports :mod:`._kernel_forms` only).
"""
