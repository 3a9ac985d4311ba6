"""The candidate search of the cross-validated estimators: the candidates and
their grids, the held-out passes that score them, the scoring policies, the
rules of small tables, the learned widths it keeps and the entry of a learned
map.

Layer 4. Its modules import from the learned widths, the held-out sums, the
engines and layer 0 only.
"""
