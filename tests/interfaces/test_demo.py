"""The demo (``make demo``) runs end to end, in a real subprocess."""

from __future__ import annotations

import subprocess
import sys

import dask.array as da
import pytest


@pytest.mark.slow
def test_demo_runs_on_a_small_data_set(tmp_path):
    """Data, embedding and plot are written and the summary is printed."""
    result = subprocess.run(
        [sys.executable, "-m", "kpca_dask.demo", "--n-samples", "20000", "--n-landmarks", "200",
         "--chunk-rows", "5000", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Nyström trace error" in result.stdout and "wall time" in result.stdout
    embedding = da.from_zarr(str(tmp_path / "embedding.zarr"))
    assert embedding.shape == (20000, 2)
    assert (tmp_path / "two_shells.png").stat().st_size > 10_000


@pytest.mark.parametrize("n_landmarks, shown", [(200, "m = 200 landmarks"),
                                                (1500, "m = 1,500 landmarks")])
def test_plot_title_shows_the_landmarks_used(n_landmarks, shown):
    """The kernel PCA panel is titled with the number of landmarks actually used."""
    from kpca_dask.demo import _kernel_title

    assert shown in _kernel_title(n_landmarks)
