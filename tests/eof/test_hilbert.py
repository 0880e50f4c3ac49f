"""Hilbert (complex) kernel EOF (kpca_dask.HilbertKernelEOF): xeofs' HilbertEOF and its rotator
with a linear kernel and every sample a landmark, the exact complex kernel PCA with an rbf
kernel, dask input in any chunks, a propagating wave's phase speed, and clear errors."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _complex_modes import assert_labelled, assert_xeofs_modes, phases, travelling_waves

import kpca_dask
from kpca_dask import HilbertKernelEOF
from kpca_dask.blocks.complex_kernels import complex_kernel
from kpca_dask.errors import InvalidInputError, InvalidParameterError, NonFiniteInputError
from kpca_dask.io.preprocessing.analytic_signal import analytic_signal

xe = pytest.importorskip("xeofs")

Q = 3
N, P = 120, 16


def _waves(n: int = N, p: int = P, seed: int = 0) -> np.ndarray:
    return travelling_waves(n, p, seed)


@pytest.fixture(scope="module")
def field():
    return xr.DataArray(_waves(), dims=("time", "x"),
                        coords={"time": np.arange(N), "x": np.arange(P) * 2.0})


@pytest.mark.parametrize("padding", ["none", "exp"])
def test_linear_every_landmark_equals_xeofs_hilbert_eof(field, padding):
    """Explained variances, their ratios, maps, scores, amplitudes and phases are xeofs'
    HilbertEOF's (full SVD), to 1e-8, modulo a global phase per mode."""
    expected = xe.single.HilbertEOF(n_modes=Q, padding=padding, decay_factor=0.15,
                                    solver="full").fit(field, dim="time")
    model = HilbertKernelEOF(Q, padding=padding, decay_factor=0.15, n_landmarks=N).fit(field)
    assert_xeofs_modes(expected, model)


@pytest.mark.parametrize("method, power", [("varimax", 1), ("promax", 4)])
def test_rotation_equals_xeofs_hilbert_eof_rotator(field, method, power):
    """kpca_dask.rotate of a linear fit is xeofs' HilbertEOFRotator (power 1: varimax)."""
    fitted = xe.single.HilbertEOF(n_modes=Q, padding="exp", solver="full").fit(
        field, dim="time")
    expected = xe.single.HilbertEOFRotator(n_modes=Q, power=power).fit(fitted)
    model = HilbertKernelEOF(Q, n_landmarks=N).fit(field)
    rotated = kpca_dask.rotate(model, field, method=method, power=max(power, 2))
    assert rotated.estimator.rotation_ is rotated.rotation and model.rotation_ is None
    assert_xeofs_modes(expected, rotated)


def test_complex_kernel_is_hermitian_psd_and_nystrom_is_exact():
    """The rbf kernel matrix of analytic rows is Hermitian PSD, and with every sample a
    landmark the fit is the exact complex kernel PCA of the centred kernel matrix."""
    X = _waves(60, 8)
    Z = analytic_signal(X, "exp", 0.2)
    model = HilbertKernelEOF(Q, kernel="rbf", n_landmarks=60).fit(X)
    K = complex_kernel(Z, Z, "rbf", gamma=model.gamma_)
    np.testing.assert_allclose(K, K.conj().T, atol=1e-14)
    assert np.linalg.eigvalsh(K).min() > -1e-10
    H = np.eye(60) - 1.0 / 60
    values, vectors = np.linalg.eigh(H @ K @ H)
    values, vectors = values[::-1][:Q], vectors[:, ::-1][:, :Q]
    np.testing.assert_allclose(model.explained_variance_, values / 59, rtol=1e-8)
    np.testing.assert_allclose(model.total_variance_, np.trace(H @ K @ H).real / 59,
                               rtol=1e-10)
    scores = model.scores().T
    exact = vectors.T * np.sqrt(values)[:, None]
    np.testing.assert_allclose(scores, exact * phases(exact, scores)[:, None], atol=1e-8)


def test_dask_input_in_any_chunks_equals_numpy():
    """An rbf fit of a dask array chunked along samples and features equals the numpy
    fit (same landmarks), and its scores stay lazy."""
    X = _waves(150, 12, seed=3)
    settings = dict(kernel="rbf", n_landmarks=60, random_state=0)
    expected = HilbertKernelEOF(Q, **settings).fit(X)
    model = HilbertKernelEOF(Q, **settings).fit(da.from_array(X, chunks=(40, 5)))
    np.testing.assert_allclose(model.explained_variance_, expected.explained_variance_,
                               rtol=1e-10)
    np.testing.assert_allclose(model.components_, expected.components_, atol=1e-10)
    scores = model.scores()
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), expected.scores(), atol=1e-9)
    np.testing.assert_allclose(expected.transform(X), expected.scores(), atol=1e-9)


def test_rotated_rbf_mode_recovers_phase_speed():
    """ROCK-PCA: two waves on the two halves of a line, of equal amplitude; the varimax-
    rotated rbf modes each sit on one half, and the spatial phase gradient and temporal
    phase rate of each give its phase speed ω/k within 5 %."""
    rng = np.random.default_rng(1)
    n, p = 300, 40
    t, x = np.arange(n)[:, None], np.arange(p)[None, :]
    left = (x < p // 2)[0]
    k, omega = 2 * np.pi / np.array([16.0, 10.0]), 2 * np.pi / np.array([20.0, 40.0])
    X = np.where(left, np.cos(k[0] * x - omega[0] * t), np.cos(k[1] * x - omega[1] * t))
    X = X + 0.3 * rng.normal(size=(n, p))
    model = HilbertKernelEOF(2, kernel="rbf", n_landmarks=150, random_state=0).fit(X)
    rotated = kpca_dask.rotate(model, X, method="varimax")
    scores = rotated.scores()
    for j in range(2):
        amplitude = np.abs(rotated.components_[j])
        half = left if amplitude[left].sum() > amplitude[~left].sum() else ~left
        assert amplitude[half].sum() > 0.9 * amplitude.sum()
        rate = np.polyfit(t[20:-20, 0], np.unwrap(np.angle(scores[20:-20, j])), 1)[0]
        gradient = np.polyfit(x[0, half], np.unwrap(np.angle(rotated.components_[j][half])),
                              1)[0]
        wave = 0 if half[0] else 1
        assert rate / gradient == pytest.approx(omega[wave] / k[wave], rel=0.05)


def test_labelled_outputs(field):
    """A DataArray gives DataArrays: scores on the sample dimension, maps on the field,
    modes numbered 1..q, xeofs' names."""
    model = HilbertKernelEOF(2, n_landmarks=50, random_state=0).fit(field)
    assert_labelled(model, field)


@pytest.mark.parametrize("solver", ["nystrom", "gram"])
def test_gamma_rules_are_the_familys(solver):
    """gamma="median" is KernelPCA's rule, 2 / the median squared distance of the pairs of
    landmarks (spread over the record), twice the default rbf gamma; gamma="scale" is
    1 / their mean squared norm, the default poly gamma; both ways give the same, and a
    model fitted with a rule saves and loads it."""
    X = _waves(60, 8)
    Z = analytic_signal(X - X.mean(axis=0), "exp", 0.2)
    rows = np.hstack([Z.real, Z.imag])
    distances = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(axis=-1)
    h = np.median(distances[np.triu_indices(60, k=1)])
    mean_norm = np.mean(np.sum(np.abs(Z) ** 2, axis=1))

    def gamma(**settings):
        return HilbertKernelEOF(2, n_landmarks=60, solver=solver, **settings).fit(X).gamma_

    assert gamma(kernel="rbf") == pytest.approx(1.0 / h, rel=1e-10)
    assert gamma(kernel="rbf", gamma="median") == pytest.approx(2.0 / h, rel=1e-10)
    assert gamma(kernel="rbf", gamma="scale") == pytest.approx(1.0 / mean_norm, rel=1e-10)
    assert gamma(kernel="poly") == pytest.approx(1.0 / mean_norm, rel=1e-10)
    assert gamma(kernel="poly", gamma="scale") == gamma(kernel="poly")
    assert gamma(kernel="linear", gamma="median") is None


def test_a_model_of_a_gamma_rule_saves_and_loads(tmp_path):
    X = _waves(60, 8)
    model = HilbertKernelEOF(2, kernel="rbf", gamma="median", n_landmarks=30,
                             random_state=0).fit(X)
    loaded = kpca_dask.load(model.save(tmp_path / "model.zarr"))
    assert loaded.gamma == "median" and loaded.gamma_ == model.gamma_
    np.testing.assert_allclose(loaded.transform(X), model.transform(X), atol=1e-12)


@pytest.mark.parametrize("settings, data, error, match", [
    (dict(padding="zero"), None, InvalidParameterError, "padding must be"),
    (dict(decay_factor=0.0), None, InvalidParameterError, "decay_factor must be"),
    (dict(decay_factor=1.5), None, InvalidParameterError, "decay_factor must be"),
    (dict(kernel="sigmoid"), None, InvalidParameterError, "kernel must be one of"),
    (dict(n_components=0), None, InvalidParameterError, "n_components must be"),
    (dict(n_landmarks=1), None, InvalidParameterError, "n_landmarks"),
    (dict(landmarks=[0]), None, InvalidParameterError, "landmarks"),
    (dict(kernel="poly", degree=0), None, InvalidParameterError, "degree"),
    (dict(kernel="rbf", gamma=-1.0), None, InvalidParameterError, "gamma must be a number > 0"),
    (dict(kernel="rbf", gamma="mean"), None, InvalidParameterError,
     "gamma must be a number > 0, 'median', 'scale' or None"),
    (dict(kernel="poly", gamma="median"), None, InvalidParameterError,
     "gamma='median' sets the scale of a distance, which the 'poly' kernel does not use"),
    (dict(landmarks="kmeans"), None, InvalidParameterError,
     "landmarks must be 'uniform' or sample indices"),
    (dict(n_landmarks=True), None, InvalidParameterError, "n_landmarks must be an int >= 1"),
    (dict(sample_dim=3), None, InvalidParameterError, "sample_dim must be"),
    ({}, np.ones((3, 4)), InvalidInputError, "needs at least 4"),
    ({}, "nan", NonFiniteInputError, "NaN"),
    ({}, "dask-nan", NonFiniteInputError, "NaN"),
])
def test_clear_errors(settings, data, error, match):
    """Bad parameters and data are refused with errors that say what to change."""
    X = _waves(20, 4)
    if isinstance(data, str):
        X[5, 1] = np.nan
        X = da.from_array(X, chunks=(10, 2)) if data == "dask-nan" else X
    elif data is not None:
        X = data
    with pytest.raises(error, match=match):
        HilbertKernelEOF(**{"n_components": 2, **settings}).fit(X)
