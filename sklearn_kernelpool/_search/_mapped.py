"""The entry of a learned map in the results of a search (``projection``).

A kept map is a candidate of its own: pooling of the mapped keys ``X @ A.T``
at unit width and degree 0. Its entry is scored by the search's own held-out
passes (:class:`._passes.HeldOutPasses`) on the mapped keys, so that its
columns mean what they mean for every other candidate: under leave-one-out,
the keys mapped by the map learned on all the data; under K-fold, in each
split, by the map learned on its training part. The entry is appended last
to ``cv_results_`` and the ranks are recomputed.
"""

import dataclasses

import numpy as np

from .._held_out._pool import HeldOut
from ..kernels import KERNELS
from ._grid import _rank

# The columns of the local-linear candidates: 0 for one of degree 0.
_DEGREE_ONE = ("singular_fraction", "rank_deficient_fraction", "shrunk_fraction")


def map_results(search, kernel, maps):
    """The results of the map's entry (one row), keyed as ``cv_results_``.

    Parameters
    ----------
    search : CandidateSearch
        The fitted search: its data, its passes and its scoring.
    kernel : str
        The kernel of the map, pooled at unit width.
    maps : list of ndarray of shape (n_components, n_features)
        The map learned on all the data (leave-one-out), or those learned on
        the training part of each split of ``search.data.splits`` (K-fold).

    Returns
    -------
    results : dict of ndarray of shape (1,)
    """
    data = search.data
    if data.splits is None:
        held_out = _mapped_held_out(search, data, kernel, maps[0])
        results = search.passes.loo(held_out, data, [0])
        return search.smoother_criteria(None, results)
    parts = [
        search.passes.kfold(
            _mapped_held_out(search, data, kernel, components),
            dataclasses.replace(data, splits=[split]),
            [0],
        )
        for components, split in zip(maps, data.splits, strict=True)
    ]
    scores = np.array([part["mean_test_score"][0] for part in parts])
    sizes = np.array([len(test) for _, test in data.splits])
    empty = np.array([part["empty_fraction"][0] for part in parts])
    results = {f"split{s}_test_score": scores[s : s + 1] for s in range(len(parts))}
    results["mean_test_score"] = np.array([scores.mean()])
    results["std_test_score"] = np.array([scores.std()])
    results["empty_fraction"] = np.array([sizes @ empty / sizes.sum()])
    return results


def _mapped_held_out(search, data, kernel, components):
    """The held-out engine of the keys mapped by ``components``, at unit
    width and degree 0."""
    return HeldOut(
        data.X64 @ components.T,
        data.Y,
        data.weights,
        [KERNELS[kernel]],
        np.ones(1),
        search.n_jobs,
        degree=0,
    )


def append_entry(cv_results, params, results):
    """``cv_results`` with the entry ``params`` and its ``results`` appended.

    A parameter that the others do not have (``projection``) gets a column
    masked for them, as ``param_n_neighbors`` is for the fixed widths; one
    that the entry does not have is masked for it. A column of degree 1 is
    0 for the entry, a result it does not measure NaN, and the ranks are
    recomputed over every entry.
    """
    n = len(cv_results["params"])
    merged = {}
    for key, values in cv_results.items():
        name = key[len("param_") :] if key.startswith("param_") else None
        if key == "params":
            merged[key] = [*values, params]
        elif name is not None:
            merged[key] = _param_column(values, params, name)
        elif key in results:
            merged[key] = np.concatenate([values, results[key]])
        else:
            extra = 0.0 if key in _DEGREE_ONE else np.nan
            merged[key] = np.concatenate([values, [extra]])
    for name in params:
        if f"param_{name}" not in merged:
            mask = np.arange(n + 1) < n
            column = [0] * n + [params[name]]
            merged[f"param_{name}"] = np.ma.MaskedArray(column, mask=mask, dtype=object)
    merged["rank_test_score"] = _rank(merged["mean_test_score"])
    return merged


def _param_column(values, params, name):
    """The column ``param_<name>`` with the entry's value appended, masked
    where the entry has no such parameter."""
    present = name in params
    if not present and not isinstance(values, np.ma.MaskedArray):
        values = np.ma.MaskedArray(values, mask=np.zeros(len(values), dtype=bool))
    if isinstance(values, np.ma.MaskedArray):
        value = params[name] if present else values.data[0]
        extra = np.ma.MaskedArray([value], mask=[not present], dtype=values.dtype)
        return np.ma.concatenate([values, extra])
    return np.concatenate([values, np.array([params[name]], dtype=values.dtype)])
