"""The binned engine: linear binning onto a grid, the kernel sums by one FFT
convolution, the estimates from the interpolated sums, read a chunk of
queries at a time, its engine object, the rule by which ``algorithm="auto"``
picks it, and the binned fit of dask arrays.

Layer 1, above :mod:`.._engine`: its modules import from the engines and
layer 0 only, and the engines never from them.
"""
