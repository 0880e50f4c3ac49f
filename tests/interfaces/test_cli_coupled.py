"""``kpca-dask fit --method mca|cca --with DATA_Y``, ``info`` and ``transform --field``.

Two Zarr fields fitted on the command line give the model the library fits with the same
parameters; ``info`` describes the pairs; ``transform --field Y`` writes the second field's
scores. Options of other methods, and what a coupled model cannot do, are refused in words.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from test_cli import main  # kpca-dask ARGS in this process

import kpca_dask
from kpca_dask import KernelCCA, KernelMCA

N = 200


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Two labelled fields sharing their time steps, in xarray Zarr stores."""
    rng = np.random.default_rng(0)
    t = rng.normal(size=N)
    folder = tmp_path_factory.mktemp("fields")
    fields, paths = [], []
    for name, values in (("x", np.outer(t, rng.normal(size=12)).reshape(N, 3, 4)),
                         ("y", np.outer(t**2 - 1, rng.normal(size=6)))):
        values = values + 0.3 * rng.normal(size=values.shape)
        dims = ("time", "lat", "lon") if values.ndim == 3 else ("time", "station")
        field = xr.DataArray(values, dims=dims, name=name, coords={"time": np.arange(N)})
        path = folder / f"{name}.zarr"
        field.to_dataset().to_zarr(path, consolidated=False)
        fields.append(field)
        paths.append(path)
    return fields, paths


@pytest.mark.parametrize("method, options, estimator", [
    ("mca", (), KernelMCA(2, n_landmarks=50, landmarks="uniform", random_state=0)),
    ("cca", ("--n-pca-modes", "4", "--epsilon", "0.1"),
     KernelCCA(2, n_pca_modes=4, epsilon=0.1, n_landmarks=50, landmarks="uniform",
               random_state=0)),
])
def test_fit_info_and_transform(stores, tmp_path, capsys, method, options, estimator):
    (X, Y), (x_path, y_path) = stores
    model, scores = tmp_path / "model.zarr", tmp_path / "scores.zarr"
    done = main("fit", x_path, "--with", y_path, "--model", model, "--method", method,
                "--n-components", "2", "--n-landmarks", "50", "--landmarks", "uniform",
                "--seed", "0", "--sample-dim", "time", *options, "--scheduler", "threads",
                capsys=capsys)
    assert done.returncode == 0, done.stderr
    loaded = kpca_dask.load(model)
    expected = estimator.fit(X, Y)
    assert type(loaded) is type(estimator)
    np.testing.assert_allclose(loaded.singular_values_, expected.singular_values_, rtol=1e-10)
    described = json.loads(main("info", model, "--json", capsys=capsys).stdout)
    assert described["estimator"] == type(estimator).__name__ and described["n_modes"] == 2
    shown = main("info", model, capsys=capsys).stdout
    assert {"mca": "kernel MCA, 2 pairs", "cca": "kernel CCA on 4 and 4 kernel PCs"}[
        method] in shown
    done = main("transform", model, y_path, "--field", "Y", "--out", scores,
                "--sample-dim", "time", "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    written = xr.open_zarr(scores, consolidated=False)["scores"]
    assert written.dims == ("time", "mode")
    np.testing.assert_allclose(written.values, expected.transform(Y=Y).values, atol=1e-10)
    for kind in ("covariance", "eof"):  # a coupled model's patterns need both fields
        done = main("patterns", model, "--kind", kind, "--out", tmp_path / "maps.zarr",
                    capsys=capsys)
        assert done.returncode == 2 and "components(X, Y)" in done.stderr, done.stderr
    assert not (tmp_path / "maps.zarr").exists()


def test_refusals(stores, tmp_path, capsys):
    _, (x_path, y_path) = stores
    model = tmp_path / "m.zarr"
    cases = [(("--method", "mca", "--n-components", "2"), "name the second with --with"),
             (("--with", y_path, "--n-components", "2"), "--with names the second field"),
             (("--method", "mca", "--with", y_path), "needs --n-components Q"),
             (("--method", "mca", "--with", y_path, "--n-components", "2", "--epsilon", "1"),
              "--epsilon is an option of --method cca")]
    for options, message in cases:
        done = main("fit", x_path, "--model", model, "--sample-dim", "time", *options,
                    capsys=capsys)
        assert done.returncode != 0 and message in done.stderr, done.stderr
    assert not model.exists()


def test_epsilon_takes_a_number_or_auto():
    from kpca_dask.cli.coupled_fits import coupled_params
    from kpca_dask.cli.parser import build_parser

    argv = ["fit", "x.zarr", "--with", "y.zarr", "--model", "m.zarr", "--method", "cca",
            "--n-components", "2", "--epsilon"]
    assert coupled_params(build_parser().parse_args([*argv, "auto"]), "cca")["epsilon"] == "auto"
    assert coupled_params(build_parser().parse_args([*argv, "0.5"]), "cca")["epsilon"] == 0.5
