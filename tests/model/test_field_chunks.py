"""Fields chunked along their feature dimensions: masked, checked and weighted chunk by chunk,
the same model as whole rows, and no task holding whole rows."""

from __future__ import annotations

import collections
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _counting import CountingRows
from dask.array.core import PerformanceWarning

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import NonFiniteInputError
from kpca_dask.io.preprocessing.field_rows import kept_chunks
from kpca_dask.model.inputs import fit_rows

CHUNKINGS = [{"lat": 2}, {"lat": 2, "lon": 3}]
CHUNK_IDS = ["lat", "lat-lon"]


def _field(masked=((0, 0), (5, 7)), n=40):
    """A (time, lat, lon) field, NaN at every time at ``masked``, in one chunk of features."""
    values = np.random.default_rng(0).normal(size=(n, 6, 8)) + 280.0
    for i, j in masked:
        values[:, i, j] = np.nan
    return xr.DataArray(
        da.from_array(values, chunks=(10, 6, 8)), dims=("time", "lat", "lon"),
        coords={"time": np.arange(n) + 2000, "lat": np.linspace(-50.0, 50.0, 6),
                "lon": np.arange(8) * 10.0}, name="field")


def _weights(field):
    return np.sqrt(np.cos(np.deg2rad(field.lat)))


def _close(got, expected, rtol=1e-10):
    got, expected = np.asarray(got), np.asarray(expected)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=0, equal_nan=True,
                               atol=rtol * np.nanmax(np.abs(expected)))


def _kpca(**params):
    settings = {"n_components": 3, "kernel": "rbf", "gamma": 0.02, "n_landmarks": 20,
                "random_state": 0, "solver": "nystrom", **params}
    return KernelPCA(**settings)


@pytest.fixture(scope="module")
def whole():
    """The model of the field in whole rows, with weights, pre-images and its outputs."""
    field = _field()
    model = _kpca(weights=_weights(field), fit_inverse_transform=True, alpha=1e-3).fit(field)
    Y = model.transform(field)
    return field, model, Y


@pytest.mark.parametrize("chunks", CHUNKINGS, ids=CHUNK_IDS)
def test_chunked_field_is_the_model_of_whole_rows(whole, chunks):
    """Chunked along lat (and lon), with a mask and weights over lat: eigenvalues, embedding,
    pre-images and patterns equal those of whole rows to 1e-10, with no PerformanceWarning,
    and the patterns keep the chunks along lat."""
    field, expected, Y = whole
    chunked = field.chunk(chunks)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        model = _kpca(weights=_weights(field), fit_inverse_transform=True, alpha=1e-3)
        model.fit(chunked)
        _close(model.eigenvalues_, expected.eigenvalues_)
        _close(model.transform(chunked), Y)
        _close(model.inverse_transform(Y), expected.inverse_transform(Y))
        for kind in ("covariance", "correlation"):
            maps = model.patterns(chunked, kind=kind)
            _close(maps, expected.patterns(field, kind=kind))
    assert maps.data.numblocks[1] > 1


@pytest.mark.parametrize("chunks", CHUNKINGS, ids=CHUNK_IDS)
def test_chunked_field_exact_model(chunks):
    """ExactKernelPCA of a chunked field sums its Gram matrix over the kept positions of each
    chunk and equals the whole-row model. Its patterns of the training field take the fit's
    embedding; those of other data are read by runs of rows in their chunks, as the fit read
    the training field, with no warning."""
    field = _field()
    chunked = field.chunk(chunks)
    expected = ExactKernelPCA(n_components=3, gamma=0.02, weights=_weights(field)).fit(field)
    model = ExactKernelPCA(n_components=3, gamma=0.02, weights=_weights(field)).fit(chunked)
    assert model.X_fit_.numblocks[1] > 1
    _close(model.eigenvalues_, expected.eigenvalues_)
    _close(model.transform(chunked), expected.transform(field))
    _close(model.patterns(chunked), expected.patterns(field))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        maps = model.patterns(2 * chunked)
        _close(maps, expected.patterns(2 * field))


def test_fully_masked_chunks_are_joined_to_a_neighbour():
    """A mask over several chunks, the first lat row and a middle one wholly masked: no chunk
    of the rows is empty, and the model (weights over lon) is that of whole rows."""
    masked = [(0, j) for j in range(8)] + [(3, j) for j in range(8)] + [(5, 7)]
    field = _field(masked=masked)
    w = xr.DataArray(np.linspace(0.5, 1.5, 8), dims="lon", coords={"lon": field.lon})
    chunked = field.chunk({"lat": 1})
    rows, layout = fit_rows(chunked, None, w)
    assert rows.chunks[1] == (8, 8, 8, 7) and layout.n_features == 31
    expected = _kpca(weights=w).fit(field)
    model = _kpca(weights=w).fit(chunked)
    _close(model.transform(chunked), expected.transform(field))
    assert np.isnan(model.patterns(chunked).values[:, 3]).all()


def test_kept_chunks_join_empty_chunks():
    """Empty chunks join the chunk before them, the leading ones the first that keeps one."""
    assert kept_chunks((2, 2, 2, 2, 2), np.array([4, 5, 9])) == ((8, 2), (2, 1))
    assert kept_chunks((3, 0, 3), None) == ((3, 3), (3, 3))


def test_no_task_of_a_fit_holds_whole_rows():
    """Every task of a fit of a field chunked along lat (with pre-images, and its patterns)
    gives at most one stored chunk's columns: only the m landmarks are whole rows; the
    field-rows tasks give the kept positions of each stored chunk."""
    field = _field().chunk({"lat": 2})
    m, widest = 5, 16
    rows, _ = fit_rows(field, None, None)
    assert rows.chunks[1] == (15, 16, 15)
    shapes = collections.Counter()

    class Shapes(dask.callbacks.Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            shape = getattr(result, "shape", None) or getattr(
                getattr(result, "cross", None), "shape", None)
            if shape is not None and len(shape) == 2:
                shapes[shape] += 1

    with Shapes():
        model = _kpca(n_landmarks=m, fit_inverse_transform=True, alpha=1e-3).fit(field)
        model.patterns(field).compute()
    wide = {shape for shape in shapes if shape[1] > widest and shape[0] > m}
    assert shapes and not wide


def test_errors_name_coordinates_in_chunks():
    """A NaN that is not fixed, a masked position with a value later, and a value on the
    model's mask at transform: each named by its coordinates, from the chunk holding it."""
    field = _field().compute()
    bad = field.copy()
    bad[12, 2, 3] = np.nan
    with pytest.raises(NonFiniteInputError,
                       match=r"NaN at time=2012, lat=-10.0, lon=30.0, a position that holds"):
        _kpca().fit(bad.chunk({"time": 10, "lat": 2}))
    bad = field.copy()
    bad[:30, 4, 1] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"NaN at lat=30.0, lon=10.0 in its first "
                                                  r"samples but holds a value at time=2030"):
        _kpca().fit(bad.chunk({"time": 10, "lat": 2}))
    model = _kpca().fit(field.chunk({"time": 10, "lat": 2}))
    masked = r"lat=(-50.0, lon=0.0|50.0, lon=70.0)"
    with pytest.raises(NonFiniteInputError,
                       match=rf"X holds a value at time=20\d\d, {masked}, a position the model"):
        model.transform(field.fillna(0.0).chunk({"time": 10, "lat": 2})).compute()


def test_an_all_nan_sample_in_chunks_is_named_with_the_hint():
    """A time step NaN everywhere, seen chunk by chunk: the first NaN is named by its
    coordinates, with the hint to drop the all-NaN samples."""
    field = _field().compute()
    field[7] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"NaN at time=2007, lat=.*If the sample is "
                                                  r"NaN at every position.*X.dropna\('time'"):
        _kpca().fit(field.chunk({"time": 10, "lat": 2}))


def test_stacked_positions_in_column_chunks():
    """A dask array of the field's stacked positions, in column chunks of which two hold only
    masked positions, transforms as the DataArray; a NaN in it is named by its row."""
    field = _field()
    model = _kpca(weights=_weights(field)).fit(field)
    stacked = np.asarray(field.values).reshape(40, -1)
    chunks = (10, (1, 23, 23, 1))
    _close(model.transform(da.from_array(stacked, chunks=chunks)), model.transform(field))
    stacked[3, 30] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"NaN at row=3, lat=10.0, lon=60.0.*Fill it"):
        model.transform(da.from_array(stacked, chunks=chunks)).compute()


def test_chunked_field_on_a_process_cluster(process_cluster, whole):
    """On worker processes the chunks of a field are masked, checked and weighted as locally:
    the same embedding and patterns."""
    from distributed import Client

    field, expected, Y = whole
    chunked = field.chunk({"lat": 2})
    with Client(process_cluster, set_as_default=False) as client:
        with dask.config.set(scheduler=client.get):
            model = _kpca(weights=_weights(field)).fit(chunked)
            _close(model.transform(chunked).compute(), Y)
            _close(model.patterns(chunked).compute(), expected.patterns(field))


def _chunk(key) -> tuple[int, int, int]:
    """A read's (time start, lat start, lat stop)."""
    return key[0].start, key[1].start, key[1].stop


def _recorded_field():
    source = CountingRows(np.asarray(_field().values))
    field = xr.DataArray(da.from_array(source, chunks=(10, 2, 8), asarray=True, fancy=False),
                         dims=("time", "lat", "lon"))
    return source, field


def test_fit_of_a_chunked_field_reads_each_chunk_once_but_the_first():
    """Chunks of (10 time steps, 2 lat): the first rows are read chunk by chunk for the mask's
    candidates, so the chunks of the first row block are read twice, every other once (given
    landmarks, so the pass is the only other read)."""
    source, field = _recorded_field()
    landmarks = np.random.default_rng(1).normal(size=(5, 46))
    KernelPCA(2, landmarks=landmarks, n_landmarks=5).fit(field)
    expected = {(t, lat, lat + 2): 2 if t == 0 else 1 for t in range(0, 40, 10)
                for lat in range(0, 6, 2)}
    assert dict(source.count(_chunk)) == expected


def test_preimage_pass_of_a_chunked_field_reads_each_chunk_twice():
    """With fit_inverse_transform, the pre-image pass reads each chunk twice (for the
    embeddings, then for R once they are known), through a copy of the field's reshape."""
    source, field = _recorded_field()
    KernelPCA(2, landmarks=np.random.default_rng(1).normal(size=(5, 46)), n_landmarks=5,
              fit_inverse_transform=True, alpha=1e-3).fit(field)
    expected = {(t, lat, lat + 2): 4 if t == 0 else 3 for t in range(0, 40, 10)
                for lat in range(0, 6, 2)}
    assert dict(source.count(_chunk)) == expected


def test_patterns_of_a_chunked_field_read_each_chunk_twice():
    """patterns of a field chunked along lat: one compute, each chunk read twice, once for
    the scores and once, when they are known, for its moments."""
    source, field = _recorded_field()
    model = KernelPCA(2, landmarks=np.random.default_rng(1).normal(size=(5, 46)),
                      n_landmarks=5).fit(field)
    source.clear()
    model.patterns(field).compute()
    reads = source.count(_chunk)
    assert set(reads.values()) == {2} and len(reads) == 12
