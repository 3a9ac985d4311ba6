"""matplotlib for the plotting tests: the Agg backend, and every figure closed
after each test of a module that imports ``close_figures``. Importing this
module skips the importing test module when matplotlib is missing."""

import pytest

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")
