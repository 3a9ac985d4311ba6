"""Where a robust fit differs from statsmodels' ``lowess``, and why.

With ``kernel="tricube"``, ``degree=1`` and statsmodels' count of neighbours,
``robust_iterations=it`` is ``lowess(y, x, frac, it, delta=0)`` to rounding
(``test_robust.py``), but for the cases that ``docs/user_guide/robust.rst``
lists. Two plain loops stand for the two sides: :func:`_lowess_loop` follows
statsmodels' rules (a window of ``k`` consecutive sorted rows, ``y_i`` where
fewer than two weights exceed 1e-12, a floor of 1e-12 on the variance of
``x``), :func:`_documented_loop` the package's documented ones (the ``k``
nearest rows, the rows at ``x_i`` at zero width, the fit of the rows of
positive weight, the slope safeguard), and records where a documented rule
or the safeguard took a decision. Each difference of the estimator from
statsmodels must be explained by them: a documented rule, or a shrunk slope
that the fit warns of with its counts.
"""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from _reference import safeguarded_row
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_kernelpool import KernelAttentionRegressor, LocalLinearFallbackWarning

lowess_module = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess")

#: Differences above this are differences (the issue's measure).
DIFFERENT = 1e-7
#: statsmodels' threshold of a weight that counts (``calculate_weights``).
LOWESS_WEIGHT = 1e-12
#: The package's rounding of an exact fit (``_estimator/_robust.py``).
ROUNDING = 1e3 * np.finfo(np.float64).eps


def _tricube(u):
    u = np.minimum(np.abs(u), 1.0)
    return (1.0 - u**3) ** 3


def _bisquare_weights(residuals, tolerance=0.0):
    """Cleveland's weights from residuals: ``B(r / (6 median |r|))``, the
    limit (1 at an exact fit, 0 elsewhere) where the median is 0."""
    r = np.abs(residuals)
    r[r <= tolerance] = 0.0
    s = np.median(r)
    if s == 0:
        return (r == 0).astype(float)
    u = r / (6.0 * s)
    return np.where(u < 1.0, (1.0 - u**2) ** 2, 0.0)


def _lowess_pass(x, y, delta, k, clamped):
    """One fit at every ``x_i`` by statsmodels' rules, row by row.

    The rows are sorted; the window of ``k`` consecutive rows slides right
    while ``x_i`` is past the midpoint of its ends, and its radius is the
    further end; ``y_i`` where fewer than two weights exceed 1e-12; the
    weighted variance of ``x`` is floored at 1e-12 (the rows where it is
    go in ``clamped``); a row tied with the one before copies its fit.
    """
    n = len(x)
    order = np.argsort(x)
    xs, ys, ds = x[order], y[order], delta[order]
    fit = np.empty(n)
    left, right = 0, k
    for i in range(n):
        if i and xs[i] == xs[i - 1]:
            fit[i] = fit[i - 1]
            continue
        while right < n and xs[i] > (xs[left] + xs[right]) / 2.0:
            left, right = left + 1, right + 1
        radius = max(xs[i] - xs[left], xs[right - 1] - xs[i])
        w = np.zeros(n)
        if radius > 0:  # at zero width every weight is NaN: none counts
            w[left:right] = _tricube((xs[left:right] - xs[i]) / radius)
            w[left:right] *= ds[left:right]
        if np.count_nonzero(w > LOWESS_WEIGHT) < 2:
            fit[i] = ys[i]
            continue
        p = w / w.sum()
        m = p @ xs
        variance = p @ (xs - m) ** 2
        if variance < 1e-12:
            clamped.add(int(order[i]))
        variance = max(variance, 1e-12)
        fit[i] = (p * (1.0 + (xs[i] - m) * (xs - m) / variance)) @ ys
    out = np.empty(n)
    out[order] = fit
    return out


def _lowess_loop(x, y, k, iterations):
    """statsmodels' ``lowess`` by a plain loop; returns the fit and whether
    rounding errors decide it: a floored variance (whose fit is rounding
    over 1e-12), or a scale of the residuals at rounding level (whose
    weights are rounding over rounding)."""
    delta, clamped = np.ones(len(x)), set()
    rounding = False
    for iteration in range(iterations + 1):
        fit = _lowess_pass(x, y, delta, k, clamped)
        if iteration < iterations:
            rounding |= _exact_but_for_rounding(y, fit)
            delta = _bisquare_weights(y - fit)
    return fit, rounding or bool(clamped)


def _exact_but_for_rounding(y, fit):
    """Whether the median residual is a rounding error of the values."""
    return bool(np.median(np.abs(y - fit)) <= 1e3 * ROUNDING * np.max(np.abs(y)))


def _documented_row(x, y, delta, i, k, events):
    """The fit at ``x_i`` by the documented rules, each decision recorded."""
    d = np.abs(x - x[i])
    radius = np.sort(d)[k - 1]
    if radius == 0:
        # k or more rows at x_i: the rows at distance zero, with their weights.
        events["ties"].add(i)
        a = (d == 0) * delta
    else:
        a = _tricube(d / radius) * delta
    if np.count_nonzero(a > LOWESS_WEIGHT) < 2 or np.unique(x[a > 0]).size < 2:
        events["few"].add(i)
    if not np.any(a > 0):
        # on_empty="nearest": the nearest rows of positive weight.
        kept = delta > 0
        nearest = d[kept] == d[kept].min()
        return np.average(y[kept][nearest], weights=delta[kept][nearest])
    kept = delta > 0  # the keys of the pool: the rows of positive weight
    keys = x[kept][:, None]
    row = safeguarded_row(
        a[kept] / a.sum(), keys, y[kept][:, None], x[i : i + 1], keys.mean(axis=0)
    )
    if row["shrinkage"] < 1:
        events["shrunk"].add(i)
    return float(row["mean"][0])


def _documented_loop(x, y, k, iterations):
    """The robust fit by the documented rules; returns the fit and, per
    in-sample fit (the plain fit's first, the final fit's last), the rows
    where a documented rule or the safeguard took a decision, and whether
    its residuals were rounding errors (an exact fit)."""
    n = len(x)
    delta = np.ones(n)
    passes = []
    tolerance = ROUNDING * np.max(np.abs(y))
    for iteration in range(iterations + 1):
        events = {"ties": set(), "few": set(), "shrunk": set()}
        fit = np.array([_documented_row(x, y, delta, i, k, events) for i in range(n)])
        events["rounding"] = _exact_but_for_rounding(y, fit)
        passes.append(events)
        if iteration < iterations:
            delta = _bisquare_weights(y - fit, tolerance)
    return fit, passes


def _configuration(seed):
    """The issue's experiment: random n, frac, iterations, ties in a third of
    the configurations, 10 % outliers."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(10, 120))
    frac = float(rng.uniform(0.05, 0.9))
    iterations = int(rng.integers(1, 4))
    ties = rng.random() < 1 / 3
    x = rng.uniform(0, 10, n)
    if ties:
        levels = max(2, int(n * rng.uniform(0.1, 0.6)))
        x = np.round(x * levels / 10) * 10 / levels
    y = np.sin(x) + 0.3 * rng.normal(size=n)
    m = max(1, round(0.1 * n))
    outliers = rng.choice(n, m, replace=False)
    y[outliers] += rng.choice([-1, 1], m) * rng.uniform(3, 8, m)
    k = min(max(int(frac * n + 1e-10), 2), n)
    return x, y, frac, k, iterations


def _statsmodels(y, x, frac, iterations):
    """statsmodels' fit at the rows, in their order."""
    with warnings.catch_warnings():
        # Its weights are NaN at zero width (0 / 0): no weight counts.
        warnings.simplefilter("ignore", RuntimeWarning)
        return lowess_module.lowess(
            y, x, frac=frac, it=iterations, delta=0.0, return_sorted=False
        )


def _fit(x, y, k, iterations):
    """The robust fit at the training rows, and its fit-time warning."""
    reg = KernelAttentionRegressor(
        kernel="tricube", n_neighbors=k, degree=1, robust_iterations=iterations
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg.fit(x[:, None], y)
    shrunk = [w.message for w in caught if w.category is LocalLinearFallbackWarning]
    with warnings.catch_warnings():
        # The fallbacks of the final fit, warned of by predict, are the
        # documented rules.
        warnings.simplefilter("ignore")
        fitted = reg.predict(x[:, None])
    return fitted, shrunk


def _explain(seed):
    """Check one configuration; return the classes of its difference from
    statsmodels (empty where there is none)."""
    x, y, frac, k, iterations = _configuration(seed)
    ours, shrunk = _fit(x, y, k, iterations)
    theirs = _statsmodels(y, x, frac, iterations)
    documented, passes = _documented_loop(x, y, k, iterations)
    rounding = any(p["rounding"] for p in passes)
    lowess_fit, lowess_rounding = _lowess_loop(x, y, k, iterations)
    if not (rounding or lowess_rounding):
        # The loop of statsmodels' rules is statsmodels.
        assert_allclose(lowess_fit, theirs, rtol=0, atol=1e-9)
    if not rounding:
        # The documented rules are the estimator's, and so are the counts
        # of the warning: the rows shrunk in each in-sample fit.
        assert_allclose(ours, documented, rtol=0, atol=1e-9)
        counts = tuple(len(p["shrunk"]) for p in passes)
        if any(counts):
            assert len(shrunk) == 1
            assert shrunk[0].n_shrunk_per_fit == counts
            assert shrunk[0].n_shrunk == counts[-1]
            assert shrunk[0].n_queries == len(x)
        else:
            assert not shrunk
    if np.max(np.abs(ours - theirs)) <= DIFFERENT:
        return set()
    causes = {key for p in passes for key in ("ties", "few", "shrunk") if p[key]}
    causes |= {"rounding"} if rounding else set()
    # Without a documented rule or a shrunk slope, the two loops decide
    # alike: a difference must have one of them.
    assert causes, seed
    return causes


# Seeds of the experiment, one of each class: shrunk slopes; shrunk slopes
# and fewer than two weights; k or more rows at one x; fewer than two
# weights; an exact fit but for rounding; no difference.
SEEDS = {
    382: {"shrunk"},
    272: {"shrunk", "few"},
    591: {"ties", "few"},
    325: {"few"},
    515: {"rounding"},
    212: set(),
}


@pytest.mark.parametrize("seed", SEEDS)
def test_seeded_differences_are_documented_or_warned(seed):
    assert _explain(seed) == SEEDS[seed]


@pytest.mark.slow
def test_every_difference_of_the_experiment_is_documented_or_warned():
    """The issue's 600 configurations: every difference above 1e-7 has a
    documented rule or a shrunk slope, warned of with the right counts."""
    classes = [_explain(seed) for seed in range(600)]
    differing = [c for c in classes if c]
    # Measured: 99 of 600 differ, 66 of them with shrunk slopes.
    assert len(differing) == 99
    assert sum("shrunk" in c for c in differing) == 66


def test_a_shrunk_slope_is_warned_of_with_its_counts():
    """A line with one gross outlier: the rows beside it lose their weight
    in the first iteration, and the rows of that run on either side of the
    outlier are fitted from keys on one side of them; the safeguard shrinks
    their slopes where LOWESS extrapolates the line."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 21)
    y = x + 0.1 * rng.normal(size=21)
    y[10] += 2.0
    with pytest.warns(LocalLinearFallbackWarning, match="robust_iterations=2") as w:
        reg = KernelAttentionRegressor(
            kernel="tricube", n_neighbors=8, degree=1, robust_iterations=2
        ).fit(x[:, None], y)
    documented, passes = _documented_loop(x, y, 8, 2)
    message = w[0].message
    assert message.n_shrunk_per_fit == tuple(len(p["shrunk"]) for p in passes)
    assert message.n_shrunk_per_fit[1] > 0
    assert message.n_queries == 21
    assert_allclose(reg.predict(x[:, None]), documented, rtol=0, atol=1e-10)
    theirs = _statsmodels(y, x, 8 / 21, 2)
    assert np.max(np.abs(documented - theirs)) > 1e-3


def test_no_warning_without_a_shrunk_slope():
    # test_robust.py's lowess data: no slope is shrunk, and the fit is
    # statsmodels'; warnings are errors in the suite.
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 80))
    y = np.sin(x) + 0.3 * rng.normal(size=80)
    y[[5, 40, 41, 70]] += [6.0, -5.0, 4.0, 8.0]
    _, passes = _documented_loop(x, y, 24, 3)
    assert not any(p["shrunk"] for p in passes)
    KernelAttentionRegressor(
        kernel="tricube", n_neighbors=24, degree=1, robust_iterations=3
    ).fit(x[:, None], y)


def test_k_or_more_rows_at_one_x_are_pooled():
    """Six rows at x = 5 and k = 5: the width there is zero. LOWESS gives
    all six the value of the first of them in its sort; the estimator their
    mean weighted by the robustness weights (the limit of a vanishing
    width)."""
    x = np.r_[np.arange(0, 3.01, 0.5), np.full(6, 5.0), np.arange(7, 10.01, 0.5)]
    rng = np.random.default_rng(0)
    y = np.sin(x / 2) + 0.2 * rng.normal(size=len(x))
    y[15] += 3.0
    reg = KernelAttentionRegressor(
        kernel="tricube", n_neighbors=5, degree=1, robust_iterations=1
    ).fit(x[:, None], y)
    with warnings.catch_warnings():
        # The local means and fallbacks of the final fit, warned of by
        # predict: the tied rows, and rows with fewer than two weights.
        warnings.simplefilter("ignore")
        ours = reg.predict(x[:, None])
    tied = x == 5.0
    delta = reg.robustness_weights_
    assert np.ptp(delta[tied]) > 0.5
    assert_allclose(ours[tied], np.average(y[tied], weights=delta[tied]), atol=1e-12)
    # The loop of the documented rules: the tied rows are its zero widths,
    # and no slope is shrunk (the fit does not warn).
    documented, passes = _documented_loop(x, y, 5, 1)
    assert_allclose(ours, documented, rtol=0, atol=1e-10)
    assert all(p["ties"] == set(np.flatnonzero(tied)) for p in passes)
    assert not any(p["shrunk"] for p in passes)
    # statsmodels: the first tied row of its sort, for every tied row.
    theirs = _statsmodels(y, x, 5 / len(x), 1)
    first = np.argsort(x)[np.searchsorted(np.sort(x), 5.0)]
    assert_array_equal(theirs[tied], y[first])
    assert_allclose(_lowess_loop(x, y, 5, 1)[0], theirs, rtol=0, atol=1e-12)
    assert np.max(np.abs(ours[tied] - theirs[tied])) > 0.1


def test_fewer_than_two_weights_fit_the_rows_of_weight():
    """Two adjacent outliers lose their weight with their neighbours; the
    neighbourhoods of rows 9 to 12 (k = 5) keep no second row of weight.
    LOWESS returns each row's own value there, the outliers themselves; the
    estimator the fit of the rows of weight that remain: the nearest row of
    weight (on_empty="nearest") where none does."""
    x = np.arange(20.0)
    rng = np.random.default_rng(0)
    y = np.sin(x / 3) + 0.1 * rng.normal(size=20)
    y[[10, 11]] += 5.0
    reg = KernelAttentionRegressor(
        kernel="tricube", n_neighbors=5, degree=1, robust_iterations=1
    ).fit(x[:, None], y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallbacks, warned of by predict
        ours = reg.predict(x[:, None])
    documented, passes = _documented_loop(x, y, 5, 1)
    assert_allclose(ours, documented, rtol=0, atol=1e-10)
    few = sorted(passes[-1]["few"])
    assert few == [9, 10, 11, 12]
    theirs = _statsmodels(y, x, 5 / 20, 1)
    assert_array_equal(theirs[few], y[few])  # LOWESS's rule: y_i
    assert_allclose(_lowess_loop(x, y, 5, 1)[0], theirs, rtol=0, atol=1e-12)
    assert np.min(np.abs(ours[[10, 11]] - y[[10, 11]])) > 4.0
    keep = np.setdiff1d(np.arange(20), few)
    assert_allclose(ours[keep], theirs[keep], rtol=0, atol=1e-10)


def test_the_fit_does_not_depend_on_the_units_of_x():
    """LOWESS floors the local variance of x at 1e-12 in the units of x: on
    x a millionth as large its slopes shrink. The estimator's fit is the
    same in any units."""
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 10, 60))
    y = np.sin(x) + 0.3 * rng.normal(size=60)
    y[[7, 30]] += [4.0, -5.0]
    reg = KernelAttentionRegressor(
        kernel="tricube", n_neighbors=18, degree=1, robust_iterations=1
    )
    ours = reg.fit(x[:, None], y).predict(x[:, None])
    small = 1e-6 * x
    in_small_units = reg.fit(small[:, None], y).predict(small[:, None])
    assert_allclose(in_small_units, ours, rtol=0, atol=1e-12)
    theirs = _statsmodels(y, x, 0.3, 1)
    theirs_small = _statsmodels(y, small, 0.3, 1)
    assert_allclose(ours, theirs, rtol=0, atol=1e-10)
    assert np.max(np.abs(theirs_small - theirs)) > 0.1
    assert_allclose(_lowess_loop(small, y, 18, 1)[0], theirs_small, atol=1e-9)
    assert_allclose(_documented_loop(small, y, 18, 1)[0], ours, rtol=0, atol=1e-9)


def test_the_binned_path_counts_as_the_exact_one():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 1, 400))
    y = x + 0.1 * rng.normal(size=400)
    y[200:206] += 2.0
    counts = []
    for algorithm in ("brute", "binned"):
        reg = KernelAttentionRegressor(
            "epanechnikov", 0.03, degree=1, robust_iterations=2, algorithm=algorithm
        )
        with pytest.warns(LocalLinearFallbackWarning) as caught:
            reg.fit(x[:, None], y)
        counts.append(caught[0].message.n_shrunk_per_fit)
    assert counts[0] == counts[1]
    assert len(counts[0]) == 3 and any(counts[0])


def test_the_warning_stays_what_it_was_for_predictions():
    """Built as before (its counts given in order), and issued by predict,
    the warning has no counts per fit."""
    old = LocalLinearFallbackWarning("text", 1, 2, 0, 1, 0.5)
    assert (old.n_singular, old.n_queries, old.n_shrunk) == (1, 2, 1)
    assert old.n_shrunk_per_fit is None
    reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.6, degree=1)
    reg.fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 4.0])
    with pytest.warns(LocalLinearFallbackWarning) as caught:
        reg.predict([[0.1], [0.5]])
    assert caught[0].message.n_singular == 1
    assert caught[0].message.n_shrunk_per_fit is None


def test_a_final_fit_without_keys_under_raise_still_fits():
    """The final weights leave the three outliers no key (boxcar): counting
    the final fit's slopes does not refuse the fit, predicting them does."""
    X = np.r_[np.linspace(0, 1, 20), 5.0, 5.05, 5.1][:, None]
    y = np.r_[np.linspace(0, 0.1, 20), 50.0, -50.0, 50.0]
    reg = KernelAttentionRegressor(
        "boxcar", 0.3, degree=1, robust_iterations=1, on_empty="raise"
    ).fit(X, y)
    assert_array_equal(reg.robustness_weights_[-3:], 0)
    with pytest.raises(ValueError, match="no training key"):
        reg.predict(X[-3:])


#: The classes of the tests, by their titles in the user guide.
TITLES = {
    "shrunk": "Shrunk slopes (warned)",
    "ties": "k or more rows at one x",
    "few": "Fewer than two weights",
    "units": "The units of x",  # test_the_fit_does_not_depend_on_the_units_of_x
    "rounding": "A fit exact but for rounding",
}


def test_the_user_guide_lists_every_class():
    page = Path(__file__).resolve().parents[1] / "docs" / "user_guide" / "robust.rst"
    text = page.read_text()
    section = text[text.index(".. _robust-lowess:") :]
    section = section[: section.index("\nSample weights, several outputs")]
    assert re.findall(r"^\*\*(.+?)\.\*\*", section, flags=re.M) == list(TITLES.values())
