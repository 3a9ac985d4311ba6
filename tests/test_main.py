"""The main job, ``python -m sklearn_kernelpool``."""

import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sklearn_kernelpool._main import (
    MISSION_KERNELS,
    _figure,
    load_toy,
    main,
    true_curve,
    tune,
)


def test_embedded_data_is_the_toy_problem():
    X, y = load_toy()
    assert X.shape == (40, 1)
    assert y.shape == (40,)
    assert np.all((X >= 0) & (X <= 5))
    assert np.all(np.diff(X[:, 0]) >= 0)
    residual = y - true_curve(X[:, 0])
    assert abs(residual.mean()) < 0.3
    assert 0.3 < residual.std() < 0.7


def table_rows(output):
    lines = output.splitlines()
    assert lines[0].split() == ["kernel", "bandwidth", "CV", "MSE", "test", "MSE"]
    return {
        line.split()[0]: [float(v) for v in line.split()[1:]] for line in lines[1:5]
    }


def test_main_prints_the_table_and_writes_the_figure(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert main(["--out", str(tmp_path / "figures")]) == 0
    output = capsys.readouterr().out
    rows = table_rows(output)
    assert list(rows) == list(MISSION_KERNELS)
    for kernel, (bandwidth, cv_mse, test_mse) in rows.items():
        assert bandwidth > 0 and cv_mse > 0 and test_mse > 0
        if kernel != "constant":
            # Tuned local pooling beats the global mean by far.
            assert test_mse < rows["constant"][2] / 3
    path = tmp_path / "figures" / "attention_pooling.png"
    assert f"figure written to {path}" in output
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.filterwarnings("ignore::sklearn_kernelpool.EmptyNeighborhoodWarning")
def test_the_figure_draws_each_fit_with_its_confidence_band():
    pytest.importorskip("matplotlib")
    X, y = load_toy()
    X_test = np.arange(0.0, 5.0, 0.1)[:, None]
    results = {kernel: tune(kernel, X, y) for kernel in ("gaussian", "boxcar")}
    fig = _figure(results, X, y, X_test)
    axes = fig.axes[:2]  # the fits; then the heatmaps and their colour bars
    grid = np.linspace(X.min(), X.max(), 100)[:, None]
    for ax, search in zip(axes, results.values(), strict=True):
        best = search.best_estimator_
        (line,) = [line for line in ax.get_lines() if line.get_label() == "pooled"]
        assert_allclose(line.get_ydata(), best.predict(grid))
        (band,) = ax.collections[:1]
        lower, upper = best.confidence_interval(grid, level=0.95)
        vertices = band.get_paths()[0].vertices
        for edge in (lower, upper):
            points = np.column_stack([grid[:, 0], edge])
            distance = np.abs(points[:, None, :] - vertices[None, :, :]).sum(axis=2)
            assert distance.min(axis=1).max() < 1e-12
        assert np.all(lower <= best.predict(grid)) and np.all(upper >= lower)
    image = fig.axes[2].images[0]
    order = np.argsort(X[:, 0], kind="stable")
    best = results["gaussian"].best_estimator_
    assert_allclose(image.get_array(), best.attention_weights(X_test)[:, order])


def test_main_without_matplotlib(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["--out", str(tmp_path)]) == 0
    assert "matplotlib is not installed" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())


def test_no_plot_and_the_tuned_gaussian(capsys):
    assert main(["--no-plot"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert 0.05 < rows["gaussian"][0] < 1.0
    assert_allclose(rows["constant"][0], 0.05)  # ties: the first candidate


def test_module_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "sklearn_kernelpool", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--out" in result.stdout
