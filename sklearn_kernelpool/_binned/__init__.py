"""The binned engine: linear binning onto a grid, the kernel sums by one FFT
convolution, the estimates from the interpolated sums, read a chunk of
queries at a time, its engine object and the binned fit of dask arrays.

Layer 1, with :mod:`.._engine`. Its modules import from the engines and
layer 0 only.
"""
