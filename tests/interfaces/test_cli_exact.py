"""``kpca-dask fit --exact``, run in-process through :func:`kpca_dask.cli.main`."""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from test_cli import assert_user_error, main

import kpca_dask
from kpca_dask.io import open_array

THREADS = ["--scheduler", "threads"]


def _data(tmp_path):
    X = np.random.default_rng(0).normal(size=(600, 4))
    zarr.create_array(tmp_path / "data.zarr", data=X, chunks=(150, 4))
    return X


@pytest.mark.slow
def test_fit_exact_matrix_free_with_checkpoint_then_transform_and_info(tmp_path, capsys,
                                                                      monkeypatch):
    """fit --exact (matrix-free, median gamma, a checkpoint, a progress bar) writes a model that
    transform and info read; it equals the library's fit, and a rerun goes on from the
    finished checkpoint."""
    monkeypatch.chdir(tmp_path)
    X = _data(tmp_path)
    args = ["fit", "data.zarr", "--model", "exact.zarr", "--exact", "--eigen-solver",
            "matrix-free", "--n-components", 3, "--gamma", "median", "--checkpoint",
            "solve.ckpt", "--progress", *THREADS]
    done = main(*args, capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "solver       exact, matrix-free, 12 products with J K J" in done.stdout
    assert "|J K J v - lambda v| <=" in done.stdout and "[####" in done.stderr
    expected = kpca_dask.ExactKernelPCA(n_components=3, gamma="median",
                                        eigen_solver="matrix-free").fit(X)
    model = kpca_dask.load(tmp_path / "exact.zarr")
    np.testing.assert_allclose(model.eigenvalues_, expected.eigenvalues_, rtol=1e-12)

    done = main("transform", "exact.zarr", "data.zarr", "--out", "y.zarr", *THREADS,
                capsys=capsys)
    assert done.returncode == 0, done.stderr
    embedding = open_array(tmp_path / "y.zarr").compute()
    np.testing.assert_allclose(embedding, expected.transform(X), atol=1e-10)

    done = main("info", "exact.zarr", capsys=capsys)
    assert done.returncode == 0 and "trained on   n = 600 rows x 4 features" in done.stdout
    again = main(*args[:3], "again.zarr", *args[4:], capsys=capsys)
    assert again.returncode == 0 and "12 products" in again.stdout, again.stderr


def test_fit_exact_refuses_landmark_options(tmp_path, capsys, monkeypatch):
    """A Nyström option with --exact is one line naming it; nothing is written."""
    monkeypatch.chdir(tmp_path)
    _data(tmp_path)
    done = main("fit", "data.zarr", "--model", "exact.zarr", "--exact", "--n-landmarks", 50,
                *THREADS, capsys=capsys)
    assert_user_error(done, "--n-landmarks set the Nystrom fit's landmarks")
    assert not (tmp_path / "exact.zarr").exists()
