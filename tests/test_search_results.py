"""The searches give the answers they gave when ``tests/data/searches`` was
written.

``make_search_results.py`` there fits a set of configurations of both CV
estimators (the defaults, weights, compact kernels with adaptive widths,
K-fold, categorical columns linear and in the kernel, the classifier) and
saves their numeric ``cv_results_``, the selected parameters, the best
score and the predictions. Today's package must give the same: bit for bit
on the releases of NumPy, SciPy and scikit-learn that wrote the file, to
rounding (1e-10) on others. A change meant to move these answers rewrites
the file and says why in its commit.
"""

import importlib.util
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy
import sklearn
from numpy.testing import assert_allclose, assert_array_equal

SEARCHES = Path(__file__).parent / "data" / "searches"


def _maker():
    path = SEARCHES / "make_search_results.py"
    spec = importlib.util.spec_from_file_location("make_search_results", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _maker()
SAVED = pickle.loads((SEARCHES / "search_results.pkl").read_bytes())
SAME_RELEASES = SAVED["versions"] == {
    "numpy": np.__version__,
    "scipy": scipy.__version__,
    "sklearn": sklearn.__version__,
}


def _assert_same(got, want):
    if SAME_RELEASES:
        assert_array_equal(got, want)
    else:
        assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def _assert_same_params(got, want):
    assert got.keys() == want.keys()
    for key, value in want.items():
        if isinstance(value, float):
            _assert_same(got[key], value)
        else:
            assert got[key] == value


@pytest.mark.parametrize("name", sorted(MAKER.configurations()))
def test_the_search_gives_the_saved_answers(name):
    want = SAVED[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = MAKER.results(*MAKER.configurations()[name])
    assert got["cv_results"].keys() == want["cv_results"].keys()
    for key, value in want["cv_results"].items():
        _assert_same(got["cv_results"][key], value)
    assert len(got["params"]) == len(want["params"])
    for mine, saved in zip(got["params"], want["params"], strict=True):
        _assert_same_params(mine, saved)
    _assert_same_params(got["best_params"], want["best_params"])
    _assert_same(got["best_score"], want["best_score"])
    _assert_same(got["predictions"], want["predictions"])


def test_a_changed_answer_is_seen():
    # The comparison fails on a search that differs in one candidate's
    # score in the last place.
    want = SAVED["default"]["cv_results"]["mean_test_score"]
    moved = want.copy()
    moved[0] = np.nextafter(moved[0], np.inf) if SAME_RELEASES else moved[0] * 1.01
    with pytest.raises(AssertionError):
        _assert_same(moved, want)
