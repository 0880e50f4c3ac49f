"""``kpca-dask fit --method hilbert|extended``, ``info`` and ``transform`` of their models.

A Zarr field fitted on the command line gives the model the library fits with the same
parameters; ``info`` describes it; ``transform`` writes its scores (complex for the Hilbert
EOF) as the library computes them. Options of another method, and what these models
cannot do, are refused in words before any data are read.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from _complex_modes import travelling_waves
from test_cli import main  # kpca-dask ARGS in this process

import kpca_dask
from kpca_dask import ExtendedKernelEOF, HilbertKernelEOF

N, P = 60, 24


@pytest.fixture(scope="module")
def field_store(tmp_path_factory):
    """A (time, lat, lon) field in an xarray Zarr store."""
    values = travelling_waves(N, P, seed=2).reshape(N, 4, 6)
    field = xr.DataArray(values, dims=("time", "lat", "lon"), name="z", coords={
        "time": np.arange(N), "lat": [-30.0, -10.0, 10.0, 30.0], "lon": np.arange(6.0) * 60})
    path = tmp_path_factory.mktemp("field") / "field.zarr"
    field.to_dataset().to_zarr(path, consolidated=False)
    return field, path


@pytest.mark.parametrize("method, options, estimator", [
    ("hilbert", ("--solver", "gram", "--padding", "none"),
     HilbertKernelEOF(3, padding="none", solver="gram")),
    ("extended", ("--tau", "2", "--embedding", "3", "--n-pca-modes", "5", "--n-landmarks", "60",
                  "--landmarks", "uniform"),
     ExtendedKernelEOF(3, tau=2, embedding=3, n_pca_modes=5, n_landmarks=60,
                       landmarks="uniform")),
])
def test_fit_info_and_transform(field_store, tmp_path, capsys, method, options, estimator):
    field, path = field_store
    model, scores = tmp_path / "model.zarr", tmp_path / "scores.zarr"
    done = main("fit", path, "--model", model, "--method", method, "--n-components", "3",
                "--sample-dim", "time", *options, "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    loaded = kpca_dask.load(model)
    assert type(loaded) is type(estimator) and loaded.kernel == "linear"
    expected = estimator.fit(field)
    np.testing.assert_allclose(loaded.explained_variance_ratio_,
                               expected.explained_variance_ratio_, rtol=1e-10)
    done = main("info", model, capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert {"hilbert": "Hilbert (complex) EOF", "extended": "extended EOF: 3 copies 2 samples "
            "apart, on the scores of 5 linear EOFs"}[method] in done.stdout
    assert f"n = {N} samples" in done.stdout or method == "extended"
    described = json.loads(main("info", model, "--json", capsys=capsys).stdout)
    assert described["estimator"] == type(estimator).__name__
    np.testing.assert_allclose(described["explained_variance_ratio"],
                               expected.explained_variance_ratio_, rtol=1e-10)
    done = main("transform", model, path, "--out", scores, "--scheduler", "threads",
                capsys=capsys)
    assert done.returncode == 0, done.stderr
    written = xr.open_zarr(scores, consolidated=False)
    written = written[list(written.data_vars)[0]]
    want = expected.transform(field)
    assert written.dtype == want.dtype and written.dims == want.dims
    np.testing.assert_allclose(written.values, want.values, rtol=1e-8, atol=1e-10)


def test_a_gamma_rule_fits_a_hilbert_eof(field_store, tmp_path, capsys):
    """--gamma median means for --method hilbert what it means for the others: the family's
    rule (2 / the median squared distance), as HilbertKernelEOF(gamma="median") fits it."""
    field, path = field_store
    model = tmp_path / "model.zarr"
    done = main("fit", path, "--model", model, "--method", "hilbert", "--n-components", "2",
                "--kernel", "rbf", "--gamma", "median", "--n-landmarks", "40", "--seed", "0",
                "--sample-dim", "time", "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    loaded = kpca_dask.load(model)
    expected = HilbertKernelEOF(2, kernel="rbf", gamma="median", n_landmarks=40,
                                random_state=0).fit(field)
    assert loaded.gamma == "median" and loaded.gamma_ == pytest.approx(expected.gamma_)


@pytest.mark.parametrize("argv, message", [
    (("--tau", "3"), "--tau is an option of --method extended"),
    (("--padding", "none", "--exact"), "--padding is an option of --method hilbert"),
    (("--method", "hilbert", "--exact"), "--exact asks for --method exact"),
    (("--method", "hilbert"), "--method hilbert needs --n-components Q"),
    (("--method", "hilbert", "--n-components", "2", "--kernel", "poly", "--gamma", "median"),
     "gamma='median' sets the scale of a distance"),
    (("--method", "extended", "--n-components", "2", "--fit-inverse-transform"),
     "--fit-inverse-transform is an option of --method nystrom"),
    (("--method", "hilbert", "--n-components", "2", "--tol", "0.1"),
     "--tol is not an option of --method hilbert"),
])
def test_options_of_another_method_are_refused(field_store, tmp_path, capsys, argv, message):
    _, path = field_store
    done = main("fit", path, "--model", tmp_path / "m.zarr", *argv, capsys=capsys)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "m.zarr").exists()


@pytest.mark.parametrize("estimator", [
    HilbertKernelEOF(2, padding="none"),
    ExtendedKernelEOF(2, tau=2, embedding=3, n_landmarks=60, landmarks="uniform")])
def test_patterns_writes_the_maps_their_fit_computed(field_store, tmp_path, capsys, estimator):
    """patterns --kind eof of a Hilbert or extended EOF model writes components(), on the
    field (complex for the Hilbert EOF, over the lags for the extended one), without DATA."""
    field, _ = field_store
    model = estimator.fit(field).save(tmp_path / "model.zarr")
    done = main("patterns", model, "--kind", "eof", "--out", tmp_path / "maps.zarr",
                capsys=capsys)
    assert done.returncode == 0, done.stderr
    written = xr.open_zarr(tmp_path / "maps.zarr", consolidated=False)
    written = written[list(written.data_vars)[0]]
    expected = kpca_dask.load(model).components()
    assert written.dims == expected.dims and written.dtype == expected.dtype
    np.testing.assert_array_equal(written.values, expected.values)


def test_what_these_models_cannot_do_is_refused(field_store, tmp_path, capsys):
    field, path = field_store
    model = HilbertKernelEOF(2, padding="none").fit(field).save(tmp_path / "h.zarr")
    done = main("info", model, "--n-components", "1", capsys=capsys)
    assert done.returncode == 2 and "keeps no statistics to re-solve from" in done.stderr
    done = main("transform", model, path, "--out", tmp_path / "y.parquet", capsys=capsys)
    assert done.returncode == 2 and "complex, which Parquet does not hold" in done.stderr
    done = main("patterns", model, "--out", tmp_path / "maps.zarr", capsys=capsys)
    assert done.returncode == 2 and "--kind eof writes them (components())" in done.stderr
    done = main("patterns", model, path, "--kind", "eof", "--out", tmp_path / "maps.zarr",
                capsys=capsys)
    assert done.returncode == 2 and "leave DATA out" in done.stderr
    assert not (tmp_path / "maps.zarr").exists()
    for command, extra, message in (
            ("score", (path, "--out", tmp_path / "s.zarr"), "has no reconstruction_error"),
            ("inverse-transform", (path, "--out", tmp_path / "x.zarr"),
             "has no inverse_transform"),
            ("transform", (path, "--out", tmp_path / "y.zarr", "--out-dtype", "float32"),
             "leave --out-dtype out"),
            ("resolve", ("--n-components", "1", "--out", tmp_path / "r.zarr"),
             "resolve takes the models of kpca-dask fit --method nystrom"),
            ("update", (path, "--out", tmp_path / "u.zarr"), "update takes the models"),
            ("merge", (model, "--out", tmp_path / "m.zarr"), "merge takes the models")):
        done = main(command, model, *extra, capsys=capsys)
        assert done.returncode == 2 and message in done.stderr, (command, done.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.zarr"]
