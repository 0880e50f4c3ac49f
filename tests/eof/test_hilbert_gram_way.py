"""Hilbert kernel EOF by the field's Gram matrix (solver="gram", docs/design.md §19): the
Nyström fit with every sample a landmark, xeofs' HilbertEOF with a linear kernel, new
records, the automatic choice and its refusal, lazy and labelled outputs, rotation."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import kpca_dask
from kpca_dask import HilbertKernelEOF
from kpca_dask.errors import InsufficientMemoryError, InvalidParameterError

xe = pytest.importorskip("xeofs")

N, P, Q = 60, 150, 3


def _wide(n: int = N, p: int = P, seed: int = 0) -> np.ndarray:
    """A travelling wave, a slow standing one and noise: more features than samples."""
    rng = np.random.default_rng(seed)
    t, x = np.arange(n)[:, None], np.arange(p)[None, :]
    return (np.cos(0.3 * x - 0.2 * t) + 0.5 * np.cos(0.05 * x) * np.sin(0.11 * t)
            + 0.3 * rng.normal(size=(n, p)))


def _field(values: np.ndarray) -> xr.DataArray:
    n, p = values.shape
    return xr.DataArray(values, dims=("time", "x"),
                        coords={"time": np.arange(n), "x": np.arange(p) * 0.5})


def _fits(kernel: str, padding: str, X):
    settings = dict(kernel=kernel, padding=padding, decay_factor=0.15)
    landmarks = HilbertKernelEOF(Q, n_landmarks=N, solver="nystrom", **settings).fit(X)
    gram = HilbertKernelEOF(Q, solver="gram", **settings).fit(X)
    return landmarks, gram


@pytest.mark.parametrize("padding", ["none", "exp"])
@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_gram_way_is_the_nystrom_fit_with_every_landmark(kernel, padding):
    """Variances, totals, gamma, means, maps, scores and a new record's scores equal."""
    X = _wide()
    expected, model = _fits(kernel, padding, X)
    assert (expected.solver_, model.solver_) == ("nystrom", "gram")
    for name in ("explained_variance_", "explained_variance_ratio_", "mean_"):
        np.testing.assert_allclose(getattr(model, name), getattr(expected, name), rtol=1e-10,
                                   atol=1e-13)
    for name in ("total_variance_", "field_total_variance_"):
        assert getattr(model, name) == pytest.approx(getattr(expected, name), rel=1e-12)
    if kernel != "linear":
        assert model.gamma_ == pytest.approx(expected.gamma_, rel=1e-12)
    np.testing.assert_allclose(model.components_, expected.components_, atol=1e-10)
    np.testing.assert_allclose(model.scores(), expected.scores(), atol=1e-9)
    record = _wide(25, P, seed=1)
    np.testing.assert_allclose(model.transform(record), expected.transform(record), atol=1e-8)


@pytest.mark.parametrize("padding", ["none", "exp"])
def test_linear_gram_way_equals_xeofs_hilbert_eof(padding):
    """With a linear kernel the Gram way is xeofs' HilbertEOF (full SVD) on a wide field:
    variances, ratios, and maps and scores modulo one phase per mode."""
    field = _field(_wide())
    expected = xe.single.HilbertEOF(n_modes=Q, padding=padding, decay_factor=0.15,
                                    solver="full").fit(field, dim="time")
    model = HilbertKernelEOF(Q, padding=padding, decay_factor=0.15).fit(field)
    assert model.solver_ == "gram"
    np.testing.assert_allclose(model.explained_variance_,
                               expected.explained_variance().values, rtol=1e-8)
    np.testing.assert_allclose(model.explained_variance_ratio_,
                               expected.explained_variance_ratio().values, rtol=1e-8)
    maps, expected_maps = model.components().values, expected.components().values
    inner = np.sum(expected_maps.conj() * maps, axis=1)
    turn = inner / np.abs(inner)
    np.testing.assert_allclose(maps, expected_maps * turn[:, None], atol=1e-8)
    np.testing.assert_allclose(model.scores().values.T,
                               expected.scores().values * turn[:, None], atol=1e-7)


def test_auto_takes_the_gram_way_for_wide_data_that_fits():
    """auto: the Gram way for p >= n, landmarks for a long record of few features or where
    n x n does not fit; "gram" refuses what does not fit, naming the other way."""
    assert HilbertKernelEOF(2).fit(_wide()).solver_ == "gram"
    assert HilbertKernelEOF(2, n_landmarks=40).fit(_wide(200, 20)).solver_ == "nystrom"
    with dask.config.set({"kpca-dask.memory-limit": "64 KiB"}):
        assert HilbertKernelEOF(2, n_landmarks=40).fit(_wide()).solver_ == "nystrom"
        with pytest.raises(InsufficientMemoryError, match='solver="nystrom"'):
            HilbertKernelEOF(2, solver="gram").fit(_wide())


def test_dask_input_in_any_chunks_equals_numpy():
    """A dask array chunked along both axes gives the numpy fit; its scores stay lazy."""
    X = _wide(seed=2)
    expected = HilbertKernelEOF(Q, kernel="rbf").fit(X)
    model = HilbertKernelEOF(Q, kernel="rbf").fit(da.from_array(X, chunks=(17, 40)))
    np.testing.assert_allclose(model.explained_variance_, expected.explained_variance_,
                               rtol=1e-12)
    np.testing.assert_allclose(model.components_, expected.components_, atol=1e-12)
    scores = model.scores()
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), expected.scores(), atol=1e-10)


def test_labelled_outputs_and_rotation():
    """A DataArray gives labelled scores and maps; the rotation of a Gram fit is that of
    the Nyström fit with every sample a landmark."""
    field = _field(_wide(seed=3))
    model = HilbertKernelEOF(2, kernel="rbf").fit(field)
    scores, maps = model.scores(), model.components_amplitude()
    assert (scores.name, scores.dims) == ("scores", ("time", "mode"))
    assert (maps.name, maps.dims) == ("components_amplitude", ("mode", "x"))
    np.testing.assert_array_equal(maps["x"].values, field["x"].values)
    landmarks = HilbertKernelEOF(2, kernel="rbf", n_landmarks=N, solver="nystrom").fit(field)
    rotated = kpca_dask.rotate(model, field, method="varimax")
    expected = kpca_dask.rotate(landmarks, field, method="varimax")
    np.testing.assert_allclose(rotated.explained_variance_, expected.explained_variance_,
                               rtol=1e-9)
    np.testing.assert_allclose(np.abs(rotated.components_), np.abs(expected.components_),
                               atol=1e-9)


def test_unknown_solver_is_refused():
    with pytest.raises(InvalidParameterError, match="solver must be one of"):
        HilbertKernelEOF(2, solver="dense").fit(_wide())
