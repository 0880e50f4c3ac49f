"""`kpca-dask info` shows the rows a model holds; `update` and `merge` refuse rows twice."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr
from test_cli_updates import main  # kpca-dask ARGS in this process

from kpca_dask import KernelPCA

P = 3


@pytest.fixture
def grown(tmp_path):
    """A store of 500 rows and a model of its rows 0:300."""
    X = np.random.default_rng(0).normal(size=(500, P))
    zarr.create_array(str(tmp_path / "data.zarr"), data=X, chunks=(100, P))
    KernelPCA(2, gamma=0.5, n_landmarks=20, random_state=0).partial_fit(
        str(tmp_path / "data.zarr"), rows=(0, 300)).save(tmp_path / "model.zarr")
    return tmp_path


def test_info_shows_the_rows(grown, capsys):
    """info prints the rows held, per source, and --json gives them as data."""
    status, out, _ = main("info", "model.zarr", cwd=grown, capsys=capsys)
    assert status == 0
    assert any(line.startswith("rows") and "rows 0:300 of file://" in line
               for line in out.splitlines()), out
    _, out, _ = main("info", "model.zarr", "--json", cwd=grown, capsys=capsys)
    [source] = json.loads(out)["row_provenance"]["sources"]
    assert source["rows"] == [[0, 300]]


def test_update_with_rows_held_is_refused(grown, capsys):
    """update --rows overlapping the model's rows exits 2 with one line naming the overlap,
    and leaves the model file as it was; the next rows are then taken."""
    status, _, err = main("update", "model.zarr", "data.zarr", "--rows", "200:400",
                          "--scheduler", "threads", cwd=grown, capsys=capsys)
    assert status == 2 and "Rows 200:300 of file://" in err and len(err.splitlines()) == 1
    status, out, _ = main("update", "model.zarr", "data.zarr", "--rows", "300:400",
                          "--scheduler", "threads", cwd=grown, capsys=capsys)
    assert status == 0 and "rows 0:400 of file://" in out
