"""The command line on sparse .npz input and with --remove-zero-eig, run in-process through
:func:`kpca_dask.cli.main`."""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import zarr
from scipy import sparse
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from test_cli_updates import main as _main  # kpca-dask ARGS in this process, in a folder

import kpca_dask
from kpca_dask.errors import ZeroEigenvalueWarning
from kpca_dask.io import open_array


def run(*args, cwd, capsys):
    """``kpca-dask ARGS`` in this process, in ``cwd``: (exit status, stdout, stderr)."""
    return subprocess.CompletedProcess(args, *_main(*args, cwd=cwd, capsys=capsys))


def test_fit_and_transform_a_save_npz_file(tmp_path, capsys):
    """`fit counts.npz` and `transform MODEL counts.npz` read the sparse file as data."""
    X = sparse.random(200, 30, density=0.2, format="csr", random_state=0)
    sparse.save_npz(tmp_path / "counts.npz", X)
    fit = run("fit", "counts.npz", "--model", "model.zarr", "--kernel", "cosine",
              "--n-components", "3", "--n-landmarks", "40", "--scheduler", "threads",
              cwd=tmp_path, capsys=capsys)
    assert fit.returncode == 0, fit.stderr
    transform = run("transform", "model.zarr", "counts.npz", "--out", "Y.zarr",
                    "--scheduler", "threads", cwd=tmp_path, capsys=capsys)
    assert transform.returncode == 0, transform.stderr
    model = kpca_dask.load(tmp_path / "model.zarr")
    Y = np.asarray(open_array(tmp_path / "Y.zarr").compute())
    np.testing.assert_allclose(Y, model.transform(X), atol=1e-12)


def test_remove_zero_eig_flag(tmp_path, capsys):
    """A linear kernel on 2-D data with --n-components 4 and --remove-zero-eig saves a model
    of the 2 positive components, scikit-learn's (without the flag the library keeps 4, two
    of them zero)."""
    X = np.random.default_rng(0).normal(size=(100, 2))
    z = zarr.create_array(tmp_path / "flat.zarr", shape=(100, 2), chunks=(50, 2), dtype="f8")
    z[:] = X
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroEigenvalueWarning)  # none is warned of
        dropped = run("fit", "flat.zarr", "--kernel", "linear", "--n-components", "4",
                      "--n-landmarks", "100", "--landmarks", "uniform", "--scheduler", "threads",
                      "--model", "dropped.zarr", "--remove-zero-eig", cwd=tmp_path,
                      capsys=capsys)
    assert dropped.returncode == 0, dropped.stderr
    assert "ZeroEigenvalueWarning" not in dropped.stderr
    model = kpca_dask.load(tmp_path / "dropped.zarr")
    assert model.n_components_ == 2 and model.remove_zero_eig is True
    reference = SklearnKernelPCA(4, kernel="linear", remove_zero_eig=True).fit(X)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(np.abs(model.transform(X)), np.abs(reference.transform(X)),
                               atol=1e-10)
