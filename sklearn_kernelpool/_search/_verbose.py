"""What the candidate search prints with ``verbose``: the candidates it
scores and the scores it gives them (:class:`._candidates.CandidateSearch`)."""

import numpy as np

from ._grid import _width


def say_search(search, X, names, grid, splits, n_degrees=1, counts=()):
    """Say how many candidates ``search`` scores, and how."""
    n_lambdas = len(search._categorical[1])
    n_widths = len(grid) * n_lambdas + len(counts)
    n_candidates = len(names) * n_widths * n_degrees
    what = f"{n_candidates} candidates ({len(names)} kernel(s) x {len(grid)} "
    what += "bandwidths"
    if n_lambdas > 1:
        what += f" x {n_lambdas} categorical bandwidths"
    if n_degrees > 1:
        what += f" x {n_degrees} degrees"
    if counts:
        what += f" + {len(counts)} neighbour counts"
    what += ")"
    if splits is None:
        search.say(
            f"Scoring {what} by leave-one-out over {X.shape[0]} samples, "
            "in one pass over the pairs of points"
        )
    else:
        n_splits = len(splits)
        search.say(
            f"Fitting {n_splits} folds for each of {what}, totalling "
            f"{n_splits * n_candidates} fits, in one pass over the pairs of "
            "points"
        )


def say_scores(search, params, names):
    """Say the score of every candidate (``verbose >= 3``), the best of each
    kernel (``>= 2``) and the selected one."""
    scores = search.cv_results_["mean_test_score"]
    for i, candidate in enumerate(params):
        search.say(
            f"kernel={candidate['kernel']!r}, {_width(candidate)}: "
            f"score={scores[i]:.6g}",
            level=3,
        )
    for name in names:
        mine = [i for i, p in enumerate(params) if p["kernel"] == name]
        if np.all(np.isnan(scores[mine])):
            search.say(f"kernel={name!r}: no eligible bandwidth", level=2)
            continue
        best = mine[int(np.nanargmax(scores[mine]))]
        search.say(
            f"kernel={name!r}: best {_width(params[best], ' ')}, "
            f"score={scores[best]:.6g}",
            level=2,
        )
    search.say(
        f"Selected kernel={search.kernel_!r}, {_width(search.best_params_)}, "
        f"score={search.best_score_:.6g}"
    )
