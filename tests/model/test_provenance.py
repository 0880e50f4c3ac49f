"""Row provenance of growing models: no row is counted twice (docs/design.md §10).

Updates with rows of a store or row ranges a model holds, and merges of
overlapping shards, are refused, naming the overlap; an in-memory batch given
again counts again with a warning (scikit-learn's partial_fit); the record
survives saving; files without it still load.
"""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import InvalidParameterError, OverlappingRowsError, RepeatedRowsWarning
from kpca_dask.model.provenance import describe, recorded_rows

P = 3


@pytest.fixture
def store(tmp_path):
    """A Zarr store of 1000 rows, and its values."""
    X = np.random.default_rng(0).normal(size=(1000, P))
    path = tmp_path / "data.zarr"
    zarr.create_array(str(path), data=X, chunks=(200, P))
    return path, X


def _model(**params):
    return KernelPCA(n_components=2, gamma=0.5, n_landmarks=20, random_state=0, **params)


def test_the_same_in_memory_batch_again_counts_twice_with_a_warning(tmp_path):
    """A numpy batch passed to partial_fit again counts again, as in scikit-learn: the model
    equals a fit on the rows with that batch repeated, warns, records the repeat, and the
    record survives saving."""
    X = np.random.default_rng(1).normal(size=(200, P))
    model = _model().partial_fit(X[:100]).partial_fit(X[100:])
    with pytest.warns(RepeatedRowsWarning, match="100 rows of in-memory .* count again"):
        model.partial_fit(X[100:].copy())
    assert model.n_samples_fit_ == 300
    assert model.row_provenance_["repeated_rows"] == 100
    twice = KernelPCA(2, gamma=0.5, landmarks=model.landmarks_).fit(
        np.vstack([X, X[100:]]))
    np.testing.assert_allclose(model.eigenvalues_, twice.eigenvalues_, rtol=1e-10)
    loaded = kpca_dask.load(model.save(tmp_path / "model.zarr"))
    assert loaded.row_provenance_ == model.row_provenance_
    assert any("counted more than once" in line
               for line in describe(loaded.row_provenance_))


@pytest.mark.parametrize("how", ["dask array", "rows="])
def test_the_same_lazy_rows_or_row_range_again_is_refused(how):
    """A dask array, or an explicit rows= range, given again is still refused: there a
    repeat is a mistake; the model is unchanged."""
    X = np.random.default_rng(1).normal(size=(200, P))
    if how == "rows=":
        model = _model().partial_fit(X, rows=(0, 100))
        again = dict(rows=(50, 150))
        data = X
    else:
        data = da.from_array(X, chunks=50)
        model = _model().partial_fit(data)
        again = {}
    eigenvalues = model.eigenvalues_.copy()
    with pytest.raises(OverlappingRowsError, match=r"Rows \d+:\d+ of in-memory"):
        model.partial_fit(data, **again)
    np.testing.assert_array_equal(model.eigenvalues_, eigenvalues)


def test_rows_of_a_store_counted_already_are_refused(store):
    """Rows of a stored array are recorded by position: an update overlapping them is
    refused naming the rows and the store; the rows next to them are taken."""
    path, X = store
    model = _model().partial_fit(str(path), rows=(0, 600))
    with pytest.raises(OverlappingRowsError, match=r"Rows 500:600 of file://.*data\.zarr"):
        model.partial_fit(str(path), rows=(500, 700))
    model.partial_fit(str(path), rows=(600, 700))
    [source] = model.row_provenance_["sources"]
    assert source["rows"] == [[0, 700]] and model.n_samples_fit_ == 700
    whole = KernelPCA(2, gamma=0.5, landmarks=model.landmarks_).fit(X[:700])
    np.testing.assert_allclose(model.eigenvalues_, whole.eigenvalues_, rtol=1e-10)


def test_rows_appended_to_a_store_are_the_same_source(store):
    """A store that grows keeps its fingerprint: the new rows are taken, the old refused."""
    path, X = store
    model = _model().fit(str(path))
    z = zarr.open_array(str(path), mode="r+")
    z.resize((1200, P))
    z[1000:] = np.random.default_rng(2).normal(size=(200, P))
    model.partial_fit(str(path), rows=(1000, 1200))
    assert model.row_provenance_["sources"][0]["rows"] == [[0, 1200]]
    with pytest.raises(OverlappingRowsError, match="Rows 900:1000 of"):
        model.partial_fit(str(path), rows=(900, 1000))


def test_merge_of_overlapping_shards_is_refused(store):
    """Shards sharing rows of one store are refused, naming the rows and both models;
    disjoint shards merge and their rows are recorded together."""
    path, _ = store
    first = _model().partial_fit(str(path), rows=(0, 600))
    same = dict(n_components=2, gamma=first.gamma_, landmarks=first.landmarks_)
    overlapping = KernelPCA(**same).partial_fit(str(path), rows=(500, 1000))
    with pytest.raises(OverlappingRowsError,
                       match=r"Rows 500:600 of .* in both a\.zarr and b\.zarr"):
        kpca_dask.merge([first, overlapping], names=["a.zarr", "b.zarr"])
    disjoint = KernelPCA(**same).partial_fit(str(path), rows=(600, 1000))
    merged = kpca_dask.merge([first, disjoint])
    assert merged.row_provenance_["sources"][0]["rows"] == [[0, 1000]]


def test_provenance_is_saved_and_loaded(tmp_path, store):
    """A loaded model keeps its record and refuses the rows it holds."""
    path, _ = store
    saved = _model().partial_fit(str(path), rows=(0, 300)).save(tmp_path / "model.zarr")
    loaded = kpca_dask.load(saved)
    assert loaded.row_provenance_["sources"][0]["rows"] == [[0, 300]]
    with pytest.raises(OverlappingRowsError, match="Rows 0:300"):
        loaded.partial_fit(str(path), rows=(0, 400))


def test_a_file_without_provenance_loads_and_grows(tmp_path, store):
    """A model saved before provenance was recorded loads; its rows count as unrecorded
    (they cannot be checked), and rows added later are recorded and checked."""
    path, X = store
    saved = _model().fit(X[:300]).save(tmp_path / "model.zarr")
    group = zarr.open_group(str(saved), mode="r+")
    attrs = group.attrs.asdict()
    del attrs["fitted"]["row_provenance_"]
    # As written before provenance and digests: format version 2, no digests.
    attrs["format_version"] = 2
    del attrs["checksums"]
    group.attrs.put(json.loads(json.dumps(attrs)))
    old = kpca_dask.load(saved)
    assert recorded_rows(old) == {"sources": [], "unrecorded_rows": 300}
    old.partial_fit(str(path), rows=(300, 400))
    assert old.row_provenance_["unrecorded_rows"] == 300
    with pytest.raises(OverlappingRowsError, match="Rows 300:400"):
        old.partial_fit(str(path), rows=(300, 400))


@pytest.mark.parametrize("rows", [(5, 5), (-1, 10), (0, 1001), (0.0, 10), "0:10"])
def test_bad_row_ranges_are_refused(store, rows):
    """rows must be two ints 0 <= start < stop <= n."""
    path, _ = store
    with pytest.raises(InvalidParameterError, match="rows must be"):
        _model().partial_fit(str(path), rows=rows)
