"""Comparisons of complex modes (Hilbert EOF) that hold modulo one phase per mode."""

from __future__ import annotations

import numpy as np


def phases(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """The unit phase of each mode (row) that turns ``expected`` into ``got``."""
    inner = np.sum(expected.conj() * got, axis=1)
    return inner / np.abs(inner)


def assert_complex_modes(expected, got, *, atol: float = 1e-8) -> None:
    """Maps, scores, amplitudes and phases equal modulo one global phase per mode, the
    same for a mode's map and its scores (xeofs' pairing: X ≈ Σ scores conj(map))."""
    maps, expected_maps = got.components().values, expected.components().values
    turn = phases(expected_maps, maps)
    np.testing.assert_allclose(maps, expected_maps * turn[:, None], atol=atol)
    np.testing.assert_allclose(got.scores().values.T, expected.scores().values * turn[:, None],
                               atol=atol * 10)
    np.testing.assert_allclose(got.components_amplitude().values,
                               expected.components_amplitude().values, atol=atol)
    np.testing.assert_allclose(got.scores_amplitude().values.T,
                               expected.scores_amplitude().values, atol=atol)
    phase = got.components_phase().values - expected.components_phase().values
    difference = np.angle(np.exp(1j * (phase - np.angle(turn)[:, None])))
    np.testing.assert_allclose(difference, 0.0, atol=1e-6)


def assert_xeofs_modes(expected, got, *, rtol: float = 1e-8) -> None:
    """``got`` (a fit or its rotation) has xeofs' ``expected`` variances and their ratios to
    ``rtol``, and its modes (:func:`assert_complex_modes`)."""
    np.testing.assert_allclose(got.explained_variance_,
                               expected.explained_variance().values, rtol=rtol)
    np.testing.assert_allclose(got.explained_variance_ratio_,
                               expected.explained_variance_ratio().values, rtol=rtol)
    assert_complex_modes(expected, got)


def assert_labelled(model, field) -> None:
    """A fit of the DataArray ``field`` (time, x) gives DataArrays: scores over
    (time, mode), maps over (mode, x), modes numbered 1..q, xeofs' names."""
    scores, maps = model.scores(), model.components()
    assert (scores.name, scores.dims) == ("scores", ("time", "mode"))
    assert scores["mode"].values.tolist() == list(range(1, model.n_components_ + 1))
    np.testing.assert_array_equal(scores["time"].values, field["time"].values)
    assert (maps.name, maps.dims) == ("components", ("mode", "x"))
    np.testing.assert_array_equal(maps["x"].values, field["x"].values)
    for name in ("scores_amplitude", "scores_phase", "components_amplitude",
                 "components_phase"):
        assert getattr(model, name)().name == name
    np.testing.assert_allclose(np.abs(model.scores(normalized=True)).values,
                               model.scores_amplitude().values)


def travelling_waves(n: int, p: int, seed: int = 0) -> np.ndarray:
    """Two waves, one propagating over the whole line and one local, with noise (n x p)."""
    rng = np.random.default_rng(seed)
    t, x = np.arange(n)[:, None], np.arange(p)[None, :]
    local = np.exp(-(((x - p / 2) / 4.0) ** 2))
    return (np.cos(0.4 * x - 0.25 * t) + 0.5 * np.cos(0.9 * x + 0.1 * t) * local
            + 0.3 * rng.normal(size=(n, p)))
