"""The optional progress bar of long predictions."""

import io
import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn import config_context

from sklearn_kernelpool import (
    KernelAttentionClassifier,
    KernelAttentionRegressor,
    progress_bar,
)
from sklearn_kernelpool._engine import _query_chunks as _chunk_plan

RNG = np.random.default_rng(0)
X = RNG.uniform(size=(300, 2))
Y = X[:, 0] + X[:, 1]
QUERIES = RNG.uniform(size=(5000, 2))


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree"])
@pytest.mark.parametrize("n_jobs", [None, 2])
def test_bar_counts_every_query(algorithm, n_jobs, monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setattr(_chunk_plan, "MIN_THREADED_PAIRS", 0)
    reg = KernelAttentionRegressor(
        kernel="epanechnikov", bandwidth=0.3, algorithm=algorithm, n_jobs=n_jobs
    ).fit(X, Y)
    expected = reg.predict(QUERIES)
    log = io.StringIO()
    # A small working memory makes many chunks.
    with config_context(working_memory=0.5), progress_bar(file=log, mininterval=0):
        got = reg.predict(QUERIES)
    assert_array_equal(got, expected)
    text = log.getvalue()
    assert "5000/5000" in text
    assert "queries" in text
    # It advanced chunk by chunk, not at once at the end.
    assert text.count("/5000") > 2


def test_bar_goes_to_stderr_and_only_when_asked(capsys):
    pytest.importorskip("tqdm")
    clf = KernelAttentionClassifier(bandwidth=0.3).fit(X, Y > 1)
    clf.predict_proba(QUERIES)
    assert capsys.readouterr().err == ""
    with progress_bar():
        clf.predict_proba(QUERIES)
    captured = capsys.readouterr()
    assert "5000/5000" in captured.err
    assert captured.out == ""
    # The setting ends with the block.
    clf.predict(QUERIES)
    assert capsys.readouterr().err == ""


def test_without_tqdm_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    with pytest.raises(ImportError, match=r"progress_bar needs tqdm.*pip install"):
        with progress_bar():
            pass  # pragma: no cover
    # Predictions without the bar do not need tqdm.
    reg = KernelAttentionRegressor(bandwidth=0.3).fit(X, Y)
    assert reg.predict(QUERIES[:3]).shape == (3,)
