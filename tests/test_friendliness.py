"""What a user sees: the progress of a search, and the reprs."""

import re

import numpy as np
import pytest
from sklearn.model_selection import KFold

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 2))
Y = np.sin(2 * X[:, 0]) + 0.1 * RNG.normal(size=80)
PREFIX = "[KernelAttentionRegressorCV] "


def _lines(capsys):
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out.splitlines()


def test_verbose_zero_prints_nothing(capsys):
    KernelAttentionRegressorCV(bandwidths=3).fit(X, Y)
    assert capsys.readouterr() == ("", "")


def test_verbose_kfold_counts_like_grid_search(capsys):
    cv = KernelAttentionRegressorCV(
        kernels=["gaussian", "epanechnikov"], bandwidths=5, cv=KFold(3), verbose=1
    ).fit(X, Y)
    lines = _lines(capsys)
    assert all(line.startswith(PREFIX) for line in lines)
    assert "Fitting 3 folds for each of 10 candidates" in lines[0]
    assert "totalling 30 fits" in lines[0]
    assert lines[-2] == (
        f"{PREFIX}Selected kernel={cv.kernel_!r}, bandwidth={cv.bandwidth_:.6g}, "
        f"score={cv.best_score_:.6g}"
    )
    assert lines[-1] == f"{PREFIX}Refitting the selected candidate on all 80 samples"
    assert len(lines) == 3  # level 1: no per-kernel or per-candidate lines


def test_verbose_leave_one_out_and_per_kernel_phases(capsys):
    kernels = ["gaussian", "cauchy"]
    cv = KernelAttentionRegressorCV(kernels=kernels, bandwidths=4, verbose=2)
    cv.fit(X, Y)
    lines = _lines(capsys)
    assert "Scoring 8 candidates" in lines[0]
    assert "leave-one-out over 80 samples" in lines[0]
    results = cv.cv_results_
    for kernel in kernels:
        mine = results["param_kernel"] == kernel
        best = np.flatnonzero(mine)[np.argmax(results["mean_test_score"][mine])]
        expected = (
            f"{PREFIX}kernel={kernel!r}: best bandwidth "
            f"{results['param_bandwidth'][best]:.6g}, "
            f"score={results['mean_test_score'][best]:.6g}"
        )
        assert expected in lines
    assert not any("bandwidth=" in line and ": score=" in line for line in lines)


def test_verbose_three_prints_every_candidate(capsys):
    cv = KernelAttentionRegressorCV(bandwidths=6, cv=3, verbose=3).fit(X, Y)
    lines = _lines(capsys)
    candidate = re.compile(r"kernel='gaussian', bandwidth=\S+: score=(\S+)$")
    scores = [float(m.group(1)) for m in map(candidate.search, lines) if m]
    np.testing.assert_allclose(scores, cv.cv_results_["mean_test_score"], rtol=1e-5)


def test_verbose_per_feature_phase(capsys):
    cv = KernelAttentionRegressorCV(bandwidths=4, per_feature=True, verbose=1)
    cv.fit(X, Y)
    lines = _lines(capsys)
    assert f"{PREFIX}Learning per-feature widths by leave-one-out" in lines
    widths = [line for line in lines if "Per-feature widths" in line]
    assert len(widths) == 1
    assert str(np.round(cv.bandwidth_, 6).tolist()) in widths[0]


def test_verbose_validation():
    with pytest.raises(ValueError, match="verbose"):
        KernelAttentionRegressorCV(verbose="loud").fit(X, Y)


# -- reprs --------------------------------------------------------------------


@pytest.mark.parametrize(
    "estimator, expected",
    [
        (KernelAttentionRegressor(), "KernelAttentionRegressor()"),
        (
            KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5),
            "KernelAttentionRegressor(bandwidth=0.5, kernel='boxcar')",
        ),
        (KernelAttentionClassifier(), "KernelAttentionClassifier()"),
        (
            KernelAttentionClassifier(on_empty="mean"),
            "KernelAttentionClassifier(on_empty='mean')",
        ),
        (KernelAttentionRegressorCV(), "KernelAttentionRegressorCV()"),
        (
            KernelAttentionRegressorCV(cv=5, verbose=1),
            "KernelAttentionRegressorCV(cv=5, verbose=1)",
        ),
    ],
)
def test_repr_shows_only_changed_parameters(estimator, expected):
    assert repr(estimator) == expected


@pytest.mark.parametrize(
    "estimator",
    [
        KernelAttentionRegressor(kernel="epanechnikov"),
        KernelAttentionClassifier(),
        KernelAttentionRegressorCV(bandwidths=3),
    ],
)
def test_html_repr_renders(estimator):
    name = type(estimator).__name__
    for fitted in (False, True):
        if fitted:
            estimator.fit(X, Y if "Regressor" in name else Y > 0)
        html = estimator._repr_html_()
        assert html.lstrip().startswith("<style>")
        assert name in html
        assert "</div>" in html
    if "epanechnikov" in repr(estimator):
        assert "epanechnikov" in estimator._repr_html_()
