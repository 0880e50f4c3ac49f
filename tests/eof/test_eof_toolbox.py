"""The EOF analyst's calls against eofs and xeofs: variances, North's errors, scalings,
projections and reconstructions, with a linear kernel and every sample a landmark (1e-8)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kpca_dask.errors import InvalidParameterError, NonFiniteInputError

pytest.importorskip("eofs")
from _eof_data import linear_estimators, sqrt_coslat, sst  # noqa: E402
from eofs.xarray import Eof  # noqa: E402

Q = 4
RTOL = 1e-8
ESTIMATORS = linear_estimators(Q)


@pytest.fixture(scope="module")
def field():
    """eofs' SST anomalies, dask-backed in blocks of 20 winters."""
    return sst().chunk({"time": 20})


def _solver(field):
    # A new solver each time: eofs 2.0.0's eofsAsCovariance divides its own data in place.
    return Eof(field.compute(), weights=sqrt_coslat(field).values[:, None])


@pytest.fixture(scope="module", params=list(ESTIMATORS))
def fitted(request, field):
    """A linear fit weighted by sqrt(cos(lat)) and the signs that match it to eofs' pcs."""
    model = ESTIMATORS[request.param](weights=sqrt_coslat(field))
    Y = np.asarray(model.fit_transform(field))
    signs = np.sign(np.sum(Y * _solver(field).pcs(npcs=Q).values, axis=0))
    return model, signs


def _close(got, want, signs=None, axis=0):
    got, want = np.asarray(got), np.asarray(want)
    if signs is not None:
        got = got * np.expand_dims(signs, tuple(i for i in range(got.ndim) if i != axis))
    np.testing.assert_allclose(got, want, rtol=0, atol=RTOL * np.nanmax(np.abs(want)),
                               equal_nan=True)


def test_variances_and_north_errors_equal_eofs(fitted, field):
    """explained_variance_, total_variance_, the ratios and north_errors (scaled or not) are
    eofs' eigenvalues, totalAnomalyVariance, varianceFraction and northTest."""
    model, _ = fitted
    solver = _solver(field)
    _close(model.explained_variance_, solver.eigenvalues(neigs=Q))
    assert model.total_variance_ == pytest.approx(float(solver.totalAnomalyVariance()),
                                                  rel=RTOL)
    _close(model.explained_variance_ratio_, solver.varianceFraction(neigs=Q))
    _close(model.north_errors(), solver.northTest(neigs=Q))
    _close(model.north_errors(scaled=True), solver.northTest(neigs=Q, vfscaled=True))


@pytest.mark.parametrize("pcscaling", [0, 1, 2])
def test_scores_scaled_equal_eofs_pcs(fitted, field, pcscaling):
    """transform(pcscaling=s) is eofs' pcs(pcscaling=s)."""
    model, signs = fitted
    _close(model.transform(field, pcscaling=pcscaling),
           _solver(field).pcs(npcs=Q, pcscaling=pcscaling), signs, axis=1)


@pytest.mark.parametrize("eofscaling", [0, 1, 2])
def test_eof_maps_equal_eofs_eofs(fitted, field, eofscaling):
    """patterns(kind="eof", eofscaling=s) is eofs' eofs(eofscaling=s): weighted, NaN on land."""
    model, signs = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ExactKernelPCA joins feature chunks
        maps = model.patterns(field, kind="eof", eofscaling=eofscaling)
    _close(maps, _solver(field).eofs(neofs=Q, eofscaling=eofscaling), signs)


@pytest.mark.parametrize("pcscaling", [0, 2])
def test_covariance_maps_with_scaled_scores_equal_eofs(fitted, field, pcscaling):
    """patterns(kind="covariance", pcscaling=s) is eofs' eofsAsCovariance(pcscaling=s)."""
    model, signs = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        maps = model.patterns(field, pcscaling=pcscaling)
    _close(maps, _solver(field).eofsAsCovariance(neofs=Q, pcscaling=pcscaling), signs)


def test_projection_of_a_new_period_equals_eofs_project_field(fitted, field):
    """transform of a temporal subset is eofs' projectField of its anomalies from the fit's
    mean (projectField does not centre), with the fit's weights and mask."""
    model, signs = fitted
    part = field.isel(time=slice(10, 30))
    anomalies = (part - field.mean("time")).load()
    _close(model.transform(part), _solver(field).projectField(anomalies, neofs=Q), signs,
           axis=1)


def test_one_time_step_without_the_sample_dim_is_projected(fitted, field):
    """A single map (no time dimension) gives one value per component, as projectField."""
    model, signs = fitted
    one = field.isel(time=7)
    got = model.transform(one)
    assert got.dims == ("mode",)
    anomaly = (one - field.mean("time")).load()
    _close(got, _solver(field).projectField(anomaly, neofs=Q), signs)


def test_a_field_with_another_mask_is_refused_by_position(fitted, field):
    """A map with a NaN where the fit has a feature is refused, naming the position."""
    model, _ = fitted
    holed = field.compute().copy()
    holed[:, 3, 4] = np.nan
    with pytest.raises(NonFiniteInputError, match="latitude=-7.5, longitude=137.5"):
        np.asarray(model.transform(holed))


def test_scaling_and_kind_mismatches_are_refused(fitted, field):
    """A scaling outside 0-2, or given to a kind that does not take it, is refused."""
    model, _ = fitted
    with pytest.raises(InvalidParameterError, match="pcscaling must be 0, 1 or 2"):
        model.transform(field, pcscaling=3)
    with pytest.raises(InvalidParameterError, match="eofscaling does not apply"):
        model.patterns(field, kind="correlation", eofscaling=1)


@pytest.mark.parametrize("k", [1, 3])
def test_reconstruction_from_leading_modes_equals_eofs(field, k):
    """inverse_transform(Y, n_components=k) of a linear fit with every sample a landmark is
    eofs' reconstructedField(k) plus the field's mean (unweighted, NaN on land)."""
    model = ESTIMATORS["KernelPCA"](weights=sqrt_coslat(field), fit_inverse_transform=True,
                                    alpha=1e-12).fit(field)
    got = model.inverse_transform(model.transform(field), n_components=k)
    assert got.dims == field.dims
    want = _solver(field).reconstructedField(k) + field.mean("time")
    np.testing.assert_allclose(got.values, want.values, rtol=0,
                               atol=RTOL * np.nanmax(np.abs(want.values)), equal_nan=True)


def test_reconstruction_needs_a_valid_number_of_modes(field):
    """n_components must be 1..n_components_."""
    model = ESTIMATORS["KernelPCA"](fit_inverse_transform=True).fit(field)
    with pytest.raises(InvalidParameterError, match="n_components must be an int from 1 to 4"):
        model.inverse_transform(model.transform(field), n_components=5)


def test_info_shows_the_variances_and_north_errors(field, capsys):
    """kpca-dask info's summary has each variance, their total and North's errors."""
    from kpca_dask.cli.summary import print_summary, summary

    model = ESTIMATORS["KernelPCA"](weights=sqrt_coslat(field)).fit(field)
    shown = summary(model, "model.zarr")
    assert shown["total_variance"] == pytest.approx(model.total_variance_)
    np.testing.assert_allclose(shown["north_errors"], model.north_errors())
    print_summary(shown)
    printed = capsys.readouterr().out
    assert f"of a total {model.total_variance_:.4g} (exact; eigenvalues / (n - 1))" in printed
    assert "north error  " in printed
