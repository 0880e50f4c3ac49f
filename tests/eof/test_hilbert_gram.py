"""Hilbert kernel EOF by the field's Gram matrix (HilbertKernelEOF(solver="gram")).

The exact fit from the n x n Gram matrix of a wide record equals the Nyström fit
with every sample a landmark for the linear, rbf and poly kernels with and without
padding (variances, maps, means, scores and the scores of a new record), and xeofs'
HilbertEOF with a linear kernel; ``solver="auto"`` takes the Gram way for wide data
whose n x n work fits the memory, landmarks otherwise; dask input in any chunks gives
the numpy fit; labelled outputs, rotation and clear errors on the Gram way.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _complex_modes import assert_labelled, assert_xeofs_modes, travelling_waves

import kpca_dask
from kpca_dask import HilbertKernelEOF
from kpca_dask.engine.hilbert.complex_gram import gram_bytes
from kpca_dask.errors import (
    InsufficientMemoryError,
    InvalidInputError,
    InvalidParameterError,
    NonFiniteInputError,
)

xe = pytest.importorskip("xeofs")

Q = 3
N, P = 60, 150  # wide: more features than samples
NEW = 25


def _waves(n: int = N, p: int = P, seed: int = 0) -> np.ndarray:
    return travelling_waves(n, p, seed)


@pytest.fixture(scope="module")
def record() -> np.ndarray:
    return _waves()


@pytest.fixture(scope="module")
def new_record() -> np.ndarray:
    """A later record of the same waves, of its own length."""
    return _waves(NEW, P, seed=7)


@pytest.fixture(scope="module")
def field(record):
    return xr.DataArray(record, dims=("time", "x"),
                        coords={"time": np.arange(N), "x": np.arange(P) * 2.0})


def _close(got, expected, tolerance: float) -> None:
    """Equal to ``tolerance`` relative to the largest value (and entrywise)."""
    got, expected = np.asarray(got), np.asarray(expected)
    np.testing.assert_allclose(got, expected, rtol=tolerance,
                               atol=tolerance * np.abs(expected).max())


def _assert_same_fit(got, expected, tolerance: float = 1e-9) -> None:
    """Two fits of the same modes: variances, their shares, the totals, gamma, the means,
    the maps and the training scores."""
    _close(got.explained_variance_, expected.explained_variance_, tolerance)
    _close(got.explained_variance_ratio_, expected.explained_variance_ratio_, tolerance)
    assert got.total_variance_ == pytest.approx(expected.total_variance_, rel=tolerance)
    assert got.field_total_variance_ == pytest.approx(expected.field_total_variance_,
                                                      rel=tolerance)
    if expected.gamma_ is None:  # linear
        assert got.gamma_ is None
    else:
        assert got.gamma_ == pytest.approx(expected.gamma_, rel=tolerance)
    _close(got.mean_, expected.mean_, tolerance)
    _close(got.components_, expected.components_, tolerance)
    _close(np.asarray(got.scores()), np.asarray(expected.scores()), tolerance)


# -- the Gram way is the exact complex kernel EOF ------------------------------------------


@pytest.mark.parametrize("padding", ["none", "exp"])
@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_gram_equals_every_landmark_nystrom(record, new_record, kernel, padding):
    """The Gram fit of a wide record is the Nyström fit with every sample a landmark: the
    variances, their ratios, the total variances, gamma, the means, the maps and the
    scores to 1e-9, and the scores of a new record of 25 samples to 1e-8."""
    settings = dict(kernel=kernel, padding=padding, decay_factor=0.2)
    model = HilbertKernelEOF(Q, solver="gram", **settings).fit(record)
    expected = HilbertKernelEOF(Q, solver="nystrom", n_landmarks=N, **settings).fit(record)
    assert (model.solver_, expected.solver_) == ("gram", "nystrom")
    assert (model.n_landmarks_, model.landmarks_) == (N, None)
    np.testing.assert_array_equal(model.landmark_indices_, np.arange(N))
    _assert_same_fit(model, expected)
    new = model.transform(new_record)
    assert isinstance(new, np.ndarray) and new.shape == (NEW, Q)
    _close(new, expected.transform(new_record), 1e-8)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_transform_of_the_training_record_is_its_scores(record, kernel):
    """A new record that is the training record itself gets the training scores."""
    model = HilbertKernelEOF(Q, kernel=kernel, solver="gram").fit(record)
    _close(model.transform(record), model.scores(), 1e-10)


@pytest.mark.parametrize("padding", ["none", "exp"])
def test_linear_gram_equals_xeofs_hilbert_eof(field, padding):
    """With a linear kernel the Gram fit of a wide field is xeofs' HilbertEOF (full SVD):
    variances and their ratios to 1e-8, maps, scores, amplitudes and phases modulo a
    global phase per mode."""
    expected = xe.single.HilbertEOF(n_modes=Q, padding=padding, decay_factor=0.15,
                                    solver="full").fit(field, dim="time")
    model = HilbertKernelEOF(Q, padding=padding, decay_factor=0.15, solver="gram").fit(field)
    assert model.solver_ == "gram"
    assert_xeofs_modes(expected, model)


# -- which way ----------------------------------------------------------------------------


def test_auto_takes_gram_for_wide_data_and_landmarks_for_narrow():
    """solver="auto": the Gram way for at least as many features as samples (p = n
    included), the Nyström way for fewer."""
    n = 40
    assert HilbertKernelEOF(2).fit(_waves(n, 3 * n)).solver_ == "gram"
    assert HilbertKernelEOF(2).fit(_waves(n, n)).solver_ == "gram"
    narrow = HilbertKernelEOF(2, n_landmarks=20, random_state=0).fit(_waves(n, n - 1))
    assert narrow.solver_ == "nystrom" and narrow.n_landmarks_ == 20
    assert HilbertKernelEOF(2, solver="nystrom").fit(_waves(n, 3 * n)).solver_ == "nystrom"


def test_gram_way_beyond_the_memory():
    """With a 1 MiB memory limit, less than the n x n work of 120 samples, "auto" takes
    landmarks and "gram" is refused with InsufficientMemoryError that names
    solver="nystrom"; without the limit "auto" takes the Gram way."""
    X = _waves(120, 160)
    assert gram_bytes(120) > 2**20
    assert HilbertKernelEOF(2).fit(X).solver_ == "gram"
    with dask.config.set({"kpca-dask.memory-limit": "1 MiB"}):
        model = HilbertKernelEOF(2, n_landmarks=60, random_state=0).fit(X)
        assert model.solver_ == "nystrom"
        with pytest.raises(InsufficientMemoryError, match='solver="nystrom"'):
            HilbertKernelEOF(2, solver="gram").fit(X)


@pytest.mark.parametrize("solver", ["exact", "Gram", "", None])
def test_bad_solver_is_refused(record, solver):
    """A solver that is not one of "auto", "gram" or "nystrom" is refused, naming them."""
    with pytest.raises(InvalidParameterError,
                       match="solver must be one of 'auto', 'gram', 'nystrom'"):
        HilbertKernelEOF(2, solver=solver).fit(record)


def test_short_new_record_is_refused(record):
    """A new record shorter than the Hilbert transform needs is refused on the Gram way."""
    model = HilbertKernelEOF(2, solver="gram").fit(record)
    with pytest.raises(InvalidInputError, match="at least 4 samples"):
        model.transform(record[:3])


def test_non_finite_values_are_refused_by_their_row(record, new_record):
    """On the Gram way, a NaN in a lazy record, or an infinity in a lazy new record, is
    refused with NonFiniteInputError naming its row."""
    values = record.copy()
    values[37, 5] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"first in row 37\b"):
        HilbertKernelEOF(2, solver="gram").fit(da.from_array(values, chunks=(10, P)))
    model = HilbertKernelEOF(2, solver="gram").fit(record)
    later = new_record.copy()
    later[11, 140] = np.inf
    with pytest.raises(NonFiniteInputError, match=r"first in row 11\b"):
        model.transform(da.from_array(later, chunks=(10, 50)))


def test_gram_way_on_narrow_data_is_exact_too():
    """solver="gram" asked for on narrow data (fewer features than samples) is the fit with
    every sample a landmark as well."""
    X = _waves(120, 16)
    model = HilbertKernelEOF(Q, kernel="rbf", solver="gram").fit(X)
    expected = HilbertKernelEOF(Q, kernel="rbf", solver="nystrom", n_landmarks=120).fit(X)
    _assert_same_fit(model, expected)
    _close(model.transform(X[:30]), expected.transform(X[:30]), 1e-8)


# -- dask input ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunks", [(20, 40), (13, P), (N, 37)],
                         ids=["both", "time", "features"])
def test_dask_input_in_any_chunks_equals_numpy(record, new_record, chunks):
    """A dask record chunked along time, the features or both gives the numpy Gram fit;
    its scores, and the scores of a lazy new record, stay lazy."""
    settings = dict(kernel="rbf", solver="gram")
    expected = HilbertKernelEOF(Q, **settings).fit(record)
    model = HilbertKernelEOF(Q, **settings).fit(da.from_array(record, chunks=chunks))
    assert model.solver_ == "gram"
    _assert_same_fit(model, expected, 1e-12)
    scores = model.scores()
    assert isinstance(scores, da.Array)
    _close(scores.compute(), expected.scores(), 1e-12)
    new = model.transform(da.from_array(new_record, chunks=(10, 50)))
    assert isinstance(new, da.Array)
    _close(new.compute(), expected.transform(new_record), 1e-12)


def test_float32_record_chunked_along_time_equals_its_float64_values(record):
    """A float32 record chunked along time (its Gram matrix summed by rows, in float64)
    gives the fit of the same values in float64."""
    values = record.astype(np.float32)
    model = HilbertKernelEOF(Q, kernel="poly", solver="gram").fit(
        da.from_array(values, chunks=(15, P)))
    expected = HilbertKernelEOF(Q, kernel="poly", solver="gram").fit(
        values.astype(np.float64))
    _assert_same_fit(model, expected, 1e-10)


# -- labels and rotation ------------------------------------------------------------------


def test_labelled_outputs_on_the_gram_way(field, new_record):
    """A DataArray gives DataArrays: scores over (time, mode), maps over (mode, x), modes
    numbered 1..q, xeofs' names; a new DataArray record's scores over its own time."""
    model = HilbertKernelEOF(2, solver="gram").fit(field)
    assert_labelled(model, field)
    later = xr.DataArray(new_record, dims=("time", "x"),
                         coords={"time": np.arange(N, N + NEW), "x": field["x"].values})
    new = model.transform(later)
    assert new.dims == ("time", "mode")
    np.testing.assert_array_equal(new["time"].values, later["time"].values)
    _close(new.values, model.transform(new_record), 1e-12)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_rotation_of_a_gram_fit_equals_every_landmark_rotation(record, kernel):
    """kpca_dask.rotate (varimax) of the Gram fit equals the rotation of the Nyström fit
    with every sample a landmark: variances, maps and scores."""
    model = HilbertKernelEOF(Q, kernel=kernel, solver="gram").fit(record)
    landmarks = HilbertKernelEOF(Q, kernel=kernel, solver="nystrom", n_landmarks=N).fit(record)
    rotated = kpca_dask.rotate(model, record, method="varimax")
    expected = kpca_dask.rotate(landmarks, record, method="varimax")
    assert rotated.estimator.rotation_ is rotated.rotation and model.rotation_ is None
    _close(rotated.explained_variance_, expected.explained_variance_, 1e-9)
    _close(rotated.explained_variance_ratio_, expected.explained_variance_ratio_, 1e-9)
    _close(rotated.components_, expected.components_, 1e-9)
    _close(rotated.scores(), expected.scores(), 1e-9)
