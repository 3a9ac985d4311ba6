"""What a user sees: the progress of a search, the reprs and the warnings."""

import re
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_kernelpool import (
    EmptyNeighborhoodWarning,
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    KernelAttentionRegressorCV,
    LocalLinearFallbackWarning,
)
from sklearn_kernelpool._utils import _warn

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
        kernels=["gaussian", "epanechnikov"],
        bandwidths=5,
        cv=KFold(3),
        verbose=1,
        degree=0,
        n_neighbors=None,
        per_feature=False,
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
    # Level 1: no per-kernel or per-candidate lines; one line per extension
    # of the automatic grid past its edge.
    extended = len(np.unique(cv.cv_results_["param_bandwidth"])) > 5
    extensions = [line for line in lines if "on the edge of the grid" in line]
    assert bool(extensions) == extended
    assert len(lines) == 3 + len(extensions)


def test_verbose_leave_one_out_and_per_kernel_phases(capsys):
    kernels = ["gaussian", "cauchy"]
    cv = KernelAttentionRegressorCV(
        kernels=kernels, bandwidths=4, verbose=2, degree=0, n_neighbors=None
    )
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
    cv = KernelAttentionRegressorCV(
        bandwidths=6, cv=3, verbose=3, degree=0, n_neighbors=None
    ).fit(X, Y)
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


# -- warnings -----------------------------------------------------------------
# One warning of a kind per call, with the counts as attributes; a text that
# depends on the configuration only, so that the default filter shows it once
# per candidate of a search.

KEYS = np.sort(RNG.uniform(0, 10, size=(30, 1)), axis=0)
VALUES = np.sin(KEYS[:, 0])
QUERIES = RNG.uniform(-1, 11, size=(200, 1))
H = 0.4


def _n_inside(h=H):
    """The number of keys at scaled distance < 1 of each query, by a loop."""
    return np.array(
        [sum(abs(q - k) / h < 1 for k in KEYS[:, 0]) for q in QUERIES[:, 0]]
    )


@pytest.fixture
def fresh_memory(monkeypatch):
    """Forget which warnings were shown, as a new process would."""
    monkeypatch.setattr(_warn, "_shown", {"filters": None, "keys": set()})


def _shown_under_default(action):
    """Run ``action`` under the "default" filter; the warnings it shows."""
    shown = []
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = lambda message, category, *args, **kw: shown.append(
            (category, str(message), *args[:2])
        )
        action()
    return shown


def test_a_search_warns_once_per_candidate(fresh_memory):
    bandwidths = [0.05, 0.1, 0.15, 0.2]
    search = GridSearchCV(
        KernelAttentionRegressor(kernel="boxcar", on_empty="nearest"),
        {"bandwidth": bandwidths},
        cv=5,
    )

    def fit_and_predict():
        search.fit(KEYS, VALUES)
        search.best_estimator_.predict(QUERIES)

    shown = _shown_under_default(fit_and_predict)
    empty = [s for s in shown if s[0] is EmptyNeighborhoodWarning]
    # 4 candidates x 5 folds leave queries empty: one warning per candidate,
    # and one for the prediction of the refitted estimator.
    assert len(empty) == len(bandwidths) + 1
    for h, (_, text, _, _) in zip(bandwidths, empty, strict=False):
        assert f"'boxcar' kernel at bandwidth={h:.6g} get the value" in text
    assert empty[-1][2] == __file__  # at the line that called predict


def test_the_default_filter_shows_a_configuration_once_per_line(fresh_memory):
    reg = KernelAttentionRegressor("boxcar", H).fit(KEYS, VALUES)

    def predict_three_times():
        for queries in (QUERIES, QUERIES[:50], QUERIES[:100]):
            reg.predict(queries)

    assert len(_shown_under_default(predict_three_times)) == 1
    with warnings.catch_warnings(record=True) as caught:  # the filters change
        warnings.simplefilter("always")
        predict_three_times()
    assert len(caught) == 3
    assert [w.message.n_queries for w in caught] == [200, 50, 100]


def _calls():
    """(estimator, method) pairs of every public call that may warn."""
    for algorithm in ("brute", "kd_tree"):
        for degree in (0, 1):
            reg = KernelAttentionRegressor(
                "boxcar", H, degree=degree, algorithm=algorithm
            )
            reg.fit(KEYS, VALUES)
            yield f"{algorithm}-degree{degree}-predict", reg.predict
            yield (
                f"{algorithm}-degree{degree}-return_std",
                lambda Q, reg=reg: reg.predict(Q, return_std=True),
            )
            yield f"{algorithm}-degree{degree}-weights", reg.attention_weights
            yield (
                f"{algorithm}-degree{degree}-sparse",
                lambda Q, reg=reg: reg.attention_weights(Q, sparse=True),
            )
        clf = KernelAttentionClassifier("boxcar", H, algorithm=algorithm)
        clf.fit(KEYS, VALUES > 0)
        for method in ("predict", "predict_proba", "predict_log_proba"):
            yield f"{algorithm}-classifier-{method}", getattr(clf, method)
    cv = KernelAttentionRegressorCV(
        ["boxcar"], [H], cv=3, degree=0, n_neighbors=None
    ).fit(KEYS, VALUES)
    yield "cv-predict", cv.predict


CALLS = dict(_calls())


@pytest.mark.parametrize("call", CALLS)
def test_each_call_warns_once_per_kind_with_its_counts(call):
    n_inside = _n_inside()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CALLS[call](QUERIES)
    empty = [w for w in caught if w.category is EmptyNeighborhoodWarning]
    singular = [w for w in caught if w.category is LocalLinearFallbackWarning]
    assert len(empty) == 1
    assert empty[0].message.n_empty == np.sum(n_inside == 0)
    assert empty[0].message.n_queries == len(QUERIES)
    if "degree1" in call:
        # One key in the support: the local slope is not determined.
        assert len(singular) == 1
        assert singular[0].message.n_singular == np.sum(n_inside == 1)
        assert singular[0].message.n_queries == len(QUERIES)
    else:
        assert not singular
    assert len(caught) == len(empty) + len(singular)
    for w in caught:  # at the line of the call, not in the package
        assert w.filename == __file__
        assert "attributes count them in each call" in str(w.message)
        assert str(len(QUERIES)) not in str(w.message)
