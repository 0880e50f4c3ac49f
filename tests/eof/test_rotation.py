"""Varimax and promax rotation (kpca_dask.rotate): xeofs' EOFRotator with a linear kernel and
every sample a landmark, a kernel's rotation, and the rotation saved with the model."""

from __future__ import annotations

import warnings

import dask
import numpy as np
import pytest

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import InvalidParameterError, ModelFormatError

xe = pytest.importorskip("xeofs")
pytest.importorskip("eofs")
from _eof_data import linear_estimators, sqrt_coslat, sst, z500  # noqa: E402

Q = 4
ESTIMATORS = linear_estimators(Q)
ROTATIONS = [("varimax", 1), ("promax", 4)]


@pytest.fixture(scope="module")
def field():
    return sst().chunk({"time": 25})


@pytest.fixture(scope="module")
def xeofs_eof(field):
    """xeofs' EOF of the SST with the same weights, by a full SVD."""
    model = xe.single.EOF(n_modes=Q, solver="full")
    return model.fit(field.compute(), dim="time", weights=sqrt_coslat(field))


@pytest.mark.parametrize("method, power", ROTATIONS)
@pytest.mark.parametrize("make", list(ESTIMATORS))
def test_rotation_equals_xeofs_eof_rotator(field, xeofs_eof, make, method, power):
    """Rotated variances, their ratios, maps and scores are xeofs' EOFRotator's (power 1 is
    its varimax), with its signs, to 1e-8."""
    model = ESTIMATORS[make](weights=sqrt_coslat(field)).fit(field)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ExactKernelPCA joins feature chunks
        rotated = kpca_dask.rotate(model, field, method=method, power=max(power, 2))
    expected = xe.single.EOFRotator(n_modes=Q, power=power).fit(xeofs_eof)
    np.testing.assert_allclose(rotated.explained_variance_,
                               expected.explained_variance().values, rtol=1e-8)
    np.testing.assert_allclose(rotated.explained_variance_ratio_,
                               expected.explained_variance_ratio().values, rtol=1e-8)
    maps = rotated.components()
    assert maps.dims == ("mode", "latitude", "longitude")
    np.testing.assert_allclose(maps.values, expected.components().transpose("mode", ...).values,
                               rtol=0, atol=1e-8, equal_nan=True)
    scores = expected.scores().transpose("time", "mode").values
    np.testing.assert_allclose(rotated.transform(field).values, scores, rtol=0,
                               atol=1e-8 * np.abs(scores).max())


def test_varimax_scores_stay_uncorrelated_and_promax_scores_correlate(field):
    """Varimax is orthogonal: its rotated scores are uncorrelated; promax's correlate as its
    correlation_matrix_ says."""
    model = ESTIMATORS["KernelPCA"](weights=sqrt_coslat(field)).fit(field)
    for method, orthogonal in (("varimax", True), ("promax", False)):
        rotated = kpca_dask.rotate(model, field, method=method)
        corr = np.corrcoef(rotated.transform(field).values.T)
        np.testing.assert_allclose(corr, rotated.correlation_matrix_, atol=1e-8)
        assert np.allclose(corr, np.eye(Q), atol=1e-8) == orthogonal


def test_a_kernel_rotation_gives_lazy_scores_and_correlation_maps(field):
    """An rbf kernel EOF rotates: lazy rotated scores, uncorrelated (varimax), their correlation
    maps on the grid, and rotated variances within the field's total."""
    model = KernelPCA(n_components=Q, kernel="rbf", gamma="median", n_landmarks=50,
                      solver="nystrom",
                      landmarks="uniform", weights=sqrt_coslat(field)).fit(field)
    rotated = kpca_dask.rotate(model, field, method="varimax")
    scores = rotated.transform(field)
    maps = rotated.patterns(field, kind="correlation")
    assert dask.is_dask_collection(scores) and dask.is_dask_collection(maps)
    np.testing.assert_allclose(np.corrcoef(scores.values.T), np.eye(Q), atol=1e-8)
    assert maps.dims == ("mode", "latitude", "longitude")
    assert np.nanmax(np.abs(maps.values)) <= 1 + 1e-12
    assert 0 < rotated.explained_variance_ratio_.sum() <= 1


def test_the_rotation_is_saved_and_loaded_with_the_model(field, tmp_path):
    """rotate leaves the model it is given as it was and gives the rotation with a copy that
    holds it; the copy's file keeps it; rotate(loaded) gives it back."""
    model = ESTIMATORS["KernelPCA"](weights=sqrt_coslat(field)).fit(field)
    unrotated = model.model_
    rotated = kpca_dask.rotate(model, field, method="promax", power=3, n_components=3)
    assert model.model_ is unrotated and not hasattr(model, "rotation_")
    assert rotated.estimator is not model and rotated.estimator.rotation_ is rotated.rotation
    assert rotated.estimator.eigenvalues_ is model.eigenvalues_  # the fitted arrays shared
    loaded = kpca_dask.load(rotated.save(tmp_path / "model.zarr"))
    again = kpca_dask.rotate(loaded)
    assert (again.rotation.method, again.rotation.power, again.n_components_) == ("promax", 3, 3)
    np.testing.assert_array_equal(again.explained_variance_, rotated.explained_variance_)
    np.testing.assert_allclose(again.transform(field).values, rotated.transform(field).values,
                               rtol=0, atol=1e-12)


def test_an_exact_models_rotation_is_saved_and_a_damaged_one_refused(field, tmp_path):
    """An exact model's file keeps its rotation as a landmark model's does; a rotation whose
    arrays do not fit the model is refused by name."""
    from _model_files import rewritten_attributes

    model = kpca_dask.ExactKernelPCA(Q, kernel="linear").fit(field)
    rotated = kpca_dask.rotate(model, field, method="varimax")
    path = rotated.save(tmp_path / "model.zarr")
    again = kpca_dask.rotate(kpca_dask.load(path))
    np.testing.assert_array_equal(again.rotation.loadings, rotated.rotation.loadings)
    rewritten_attributes(path, lambda attrs: attrs["fitted"]["rotation"].update(
        method="quartimax"))
    with pytest.raises(ModelFormatError, match="its rotation is invalid"):
        kpca_dask.load(path)


def test_a_re_solve_drops_the_rotation(field):
    """Another number of components re-solves the model: its rotation is dropped."""
    model = kpca_dask.rotate(ESTIMATORS["KernelPCA"]().fit(field), field).estimator
    model.set_n_components(3)
    assert not hasattr(model, "rotation_")
    with pytest.raises(InvalidParameterError, match="holds no rotation"):
        kpca_dask.rotate(model)


def test_two_fields_rotate_to_a_list_of_maps(field):
    """A rotation of two fields gives its maps as a list, one per field."""
    fields = [field, z500().chunk({"time": 25})]
    model = ESTIMATORS["KernelPCA"](weights=[sqrt_coslat(f) for f in fields]).fit(fields)
    maps = kpca_dask.rotate(model, fields).components()
    assert [m.name for m in maps] == ["sst", "z"] and maps[1].shape == (Q, 29, 49)


@pytest.mark.parametrize("kwargs, match", [
    ({"n_components": 1}, "from 2 to 4"),
    ({"method": "promax", "power": 1}, "power >= 2"),
    ({"method": "quartimax"}, "'varimax' or 'promax'"),
])
def test_bad_rotations_are_refused(field, kwargs, match):
    """Fewer than two modes, a promax power below 2 or an unknown method are refused."""
    model = ESTIMATORS["KernelPCA"]().fit(field)
    with pytest.raises(InvalidParameterError, match=match):
        kpca_dask.rotate(model, field, **kwargs)


def test_info_shows_the_rotation(field, capsys):
    """kpca-dask info's summary names the rotation, its modes and their variance fractions."""
    from kpca_dask.cli.summary import print_summary, summary

    model = ESTIMATORS["KernelPCA"](weights=sqrt_coslat(field)).fit(field)
    rotated = kpca_dask.rotate(model, field, method="promax", power=3, n_components=2)
    model = rotated.estimator  # the copy that holds the rotation, as its saved file does
    shown = summary(model, "model.zarr")["rotation"]
    assert (shown["method"], shown["power"], shown["n_components"]) == ("promax", 3, 2)
    np.testing.assert_allclose(shown["explained_variance_ratio"],
                               rotated.explained_variance_ratio_)
    print_summary(summary(model, "model.zarr"))
    assert "rotation     promax, power 3 of 2 modes, explaining " in capsys.readouterr().out


def test_with_no_data_the_held_rotation_comes_back_only_when_it_is_the_one_asked(field):
    """A rotated model given no data gives back its rotation for rotate's defaults or the
    same options; other options are refused for a KernelPCA (its loadings need the data) and
    rotated afresh from the fit's loadings for a Hilbert EOF."""
    rotated = kpca_dask.rotate(ESTIMATORS["KernelPCA"]().fit(field), field, method="promax",
                               power=3)
    held = rotated.estimator
    assert kpca_dask.rotate(held).rotation is rotated.rotation
    assert kpca_dask.rotate(held, method="promax", power=3).rotation is rotated.rotation
    with pytest.raises(InvalidParameterError, match="not the rotation asked for"):
        kpca_dask.rotate(held, method="varimax", n_components=2)
    t, x = np.arange(80)[:, None], np.arange(12)[None, :]
    record = np.cos(0.3 * x - 0.2 * t) + np.cos(0.1 * t) * (x < 4)
    hilbert = kpca_dask.rotate(kpca_dask.HilbertKernelEOF(3, padding="none").fit(record),
                               n_components=3)
    again = kpca_dask.rotate(hilbert.estimator, method="promax", power=2, n_components=2)
    assert (again.rotation.method, again.n_components_) == ("promax", 2)


def test_the_options_that_ask_for_a_held_rotation_are_rotates_defaults():
    """asks_for takes rotate's defaults as asking for whatever a model holds: the two stay
    the same (engine/orthomax.py cannot import rotate, so it writes them down)."""
    import inspect

    from kpca_dask.engine.orthomax import DEFAULT_OPTIONS

    defaults = inspect.signature(kpca_dask.rotate).parameters
    assert DEFAULT_OPTIONS == tuple(defaults[name].default
                                    for name in ("method", "power", "n_components"))
