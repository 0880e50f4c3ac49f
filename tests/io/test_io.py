"""Zarr / xarray input and output: kpca_dask.io and the estimator's use of it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings
from pathlib import Path

import dask
import dask.array as da
import fsspec
import numpy as np
import pytest
import xarray as xr
import zarr
from dask.array.core import PerformanceWarning
from dask.callbacks import Callback

from kpca_dask import KernelPCA
from kpca_dask.blocks.statistics import PassStatistics
from kpca_dask.errors import InvalidInputError, OutputExistsError
from kpca_dask.io import (
    WRITE_STATE_ATTR,
    open_array,
    open_group,
    write_array,
    write_embedding,
    write_group,
)
from kpca_dask.landmarks import SAMPLE_FACTOR


def _data(n=300, p=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, p))


def _zarr_array(path, X, chunks):
    z = zarr.create_array(str(path), shape=X.shape, chunks=chunks, dtype=X.dtype)
    z[:] = X
    return str(path)


def _memory_url(name):
    return f"memory://kpca-dask-tests/{uuid.uuid4().hex}/{name}"


# -- opening inputs ----------------------------------------------------------


@pytest.mark.parametrize("rows", [7, 64, 300])
def test_zarr_path_keeps_row_chunks(tmp_path, rows):
    """A Zarr array opens lazily with the stored row chunks and one feature chunk."""
    X = _data()
    path = _zarr_array(tmp_path / "x.zarr", X, (rows, 3))
    opened = open_array(path)
    assert isinstance(opened, da.Array)
    assert opened.chunks[0][0] == rows and opened.numblocks[1] == 1
    np.testing.assert_array_equal(opened.compute(), X)


def test_zarr_split_features_keeps_the_stored_chunks(tmp_path):
    """A store chunked along features opens with its stored chunks, without a warning."""
    X = _data(p=4)
    path = _zarr_array(tmp_path / "x.zarr", X, (50, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        opened = open_array(path)
    assert opened.chunks == ((50,) * 6, (2, 2))
    np.testing.assert_array_equal(opened.compute(), X)


def test_zarr_split_features_whole_rows_warns(tmp_path):
    """whole_rows=True reads a store chunked along features in whole rows, with a warning."""
    X = _data(p=4)
    path = _zarr_array(tmp_path / "x.zarr", X, (50, 2))
    with pytest.warns(PerformanceWarning, match="chunked along the feature axis"):
        opened = open_array(path, whole_rows=True)
    assert opened.chunks == ((50,) * 6, (4,))
    np.testing.assert_array_equal(opened.compute(), X)


def test_group_with_array_name(tmp_path):
    """A Zarr group opens by array name, or alone when it holds one 2-D array."""
    X = _data()
    write_group({"X": X, "labels": np.arange(300)}, tmp_path / "g.zarr")
    np.testing.assert_array_equal(open_array(tmp_path / "g.zarr", array="X").compute(), X)
    np.testing.assert_array_equal(open_array(tmp_path / "g.zarr").compute(), X)


def test_group_ambiguous_or_unknown_name(tmp_path):
    """A group with several 2-D arrays, or a wrong name, gives an error naming the arrays."""
    write_group({"a": np.ones((4, 2)), "b": np.ones((4, 2))}, tmp_path / "g.zarr")
    with pytest.raises(InvalidInputError, match=r"2 2-D arrays \(\['a', 'b'\]\)"):
        open_array(tmp_path / "g.zarr")
    with pytest.raises(InvalidInputError, match="has no array 'c'"):
        open_array(tmp_path / "g.zarr", array="c")


def test_missing_path_is_file_not_found(tmp_path):
    """Opening a path where nothing exists raises FileNotFoundError."""
    with pytest.raises(FileNotFoundError, match="No Zarr store"):
        open_array(tmp_path / "nothing.zarr")


def test_not_a_zarr_store(tmp_path):
    """A plain directory is reported as not being Zarr."""
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInputError, match="not a Zarr array or group"):
        open_array(tmp_path / "plain")


def test_one_dimensional_zarr_array_rejected(tmp_path):
    """A 1-D Zarr array is refused with its shape in the message."""
    write_array(np.arange(5.0), tmp_path / "v.zarr")
    with pytest.raises(InvalidInputError, match=r"shape \(5,\)"):
        open_array(tmp_path / "v.zarr")


# -- xarray in, xarray out ---------------------------------------------------


def _labelled(n=200, seed=0, chunks=50):
    X = _data(n, seed=seed)
    return xr.DataArray(
        da.from_array(X, chunks=(chunks, 3)), dims=("time", "channel"),
        coords={"time": np.arange(n) * 10, "station": ("time", np.arange(n) % 7),
                "channel": ["a", "b", "c"]}, name="signal")


def test_data_array_in_data_array_out():
    """transform of a DataArray gives (sample dim, "mode") with coordinates and attrs."""
    X = _labelled()
    kpca = KernelPCA(n_components=4, gamma=0.3, n_landmarks=40, random_state=0).fit(X)
    Y = kpca.transform(X)
    assert isinstance(Y, xr.DataArray)
    assert Y.dims == ("time", "mode")
    np.testing.assert_array_equal(Y["time"], X["time"])
    np.testing.assert_array_equal(Y["station"], X["station"])
    np.testing.assert_array_equal(Y["mode"], np.arange(1, 5))
    assert Y.attrs["kernel"] == "rbf" and Y.attrs["gamma"] == 0.3
    assert isinstance(Y.data, da.Array)
    np.testing.assert_allclose(Y.values, kpca.transform(X.values), rtol=0, atol=1e-12)


def test_data_array_fit_equals_array_fit():
    """Fitting on a DataArray gives the same model as on its values."""
    X = _labelled()
    a = KernelPCA(n_components=3, n_landmarks=40, random_state=1).fit(X)
    b = KernelPCA(n_components=3, n_landmarks=40, random_state=1).fit(X.data)
    np.testing.assert_array_equal(a.projection_, b.projection_)


def test_dims_named_explicitly():
    """sample_dim / feature_dim choose the orientation of a transposed DataArray."""
    X = _labelled().transpose("channel", "time")
    opened = open_array(X, sample_dim="time")
    assert opened.dims == ("time", "channel")
    opened = open_array(X, feature_dim="channel")
    assert opened.dims == ("time", "channel")
    with pytest.raises(InvalidInputError, match="sample_dim='space' is not a dimension"):
        open_array(X, sample_dim="space")


def test_dataset_variable():
    """A Dataset variable is chosen by name, or alone when it is the only 2-D one."""
    ds = _labelled().to_dataset().assign(weight=("time", np.ones(200)))
    assert open_array(ds).name == "signal"
    assert open_array(ds, array="signal").dims == ("time", "channel")
    with pytest.raises(InvalidInputError, match="no data variable 'nope'"):
        open_array(ds, array="nope")


def test_labelled_embedding_round_trips_through_zarr(tmp_path):
    """A DataArray embedding written to Zarr opens again as a DataArray with coordinates."""
    X = _labelled()
    Y = KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(X).transform(X)
    write_embedding(Y, tmp_path / "y.zarr")
    back = open_array(tmp_path / "y.zarr")
    assert isinstance(back, xr.DataArray) and back.dims == ("time", "mode")
    np.testing.assert_array_equal(back["station"], X["station"])
    np.testing.assert_array_equal(back.values, Y.values)
    assert back.attrs["kernel"] == "rbf"


# -- Zarr in, Zarr out without anything n-sized in the client ----------------


def _n_elements(value) -> int:
    if isinstance(value, np.ndarray):
        return value.size
    if isinstance(value, PassStatistics):
        return value.gram.size
    if isinstance(value, (tuple, list)):
        return max((_n_elements(v) for v in value), default=0)
    return 0


class LargestResult(Callback):
    """Records the largest array any task produces (the idea of xarray's raise_if_dask_computes)."""

    def __init__(self):
        super().__init__()
        self.largest = 0
        self.n_tasks = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        self.n_tasks += 1
        self.largest = max(self.largest, _n_elements(result))


def test_zarr_in_zarr_out_holds_no_n_sized_array(tmp_path):
    """Fit on 250 Zarr chunks and write the embedding to Zarr: no task makes an n-sized array."""
    n, p, rows, m, q = 10_000, 3, 40, 30, 3
    X = _data(n, p)
    source = _zarr_array(tmp_path / "x.zarr", X, (rows, p))
    data = open_array(source)
    assert data.numblocks[0] == 250
    watcher = LargestResult()
    with dask.config.set(scheduler="threads"), watcher:
        kpca = KernelPCA(n_components=q, n_landmarks=m, random_state=0).fit(source)
        write_embedding(kpca.transform(source), tmp_path / "y.zarr")
    # Every task result is at most one block of rows, the m x m Gram matrix or
    # the landmark sample (SAMPLE_FACTOR * m rows), all independent of n.
    assert watcher.n_tasks > 500
    assert watcher.largest <= max(rows * p, m * m, SAMPLE_FACTOR * m * p) < n
    written = zarr.open_array(str(tmp_path / "y.zarr"), mode="r")
    assert written.shape == (n, q) and written.chunks == (rows, q)
    np.testing.assert_allclose(written[:], kpca.transform(X), rtol=0, atol=1e-12)


# -- fsspec URLs -------------------------------------------------------------


def test_memory_url_in_and_out():
    """memory:// Zarr input fits and transforms, and the embedding is written to memory://."""
    X = _data(400)
    source = _memory_url("x.zarr")
    write_array(da.from_array(X, chunks=(100, 3)), source)
    kpca = KernelPCA(n_components=2, n_landmarks=50, random_state=0).fit(source)
    out = _memory_url("y.zarr")
    write_embedding(kpca.transform(source), out)
    np.testing.assert_allclose(open_array(out).compute(), kpca.transform(X), rtol=0, atol=1e-12)
    assert zarr.open_array(out, mode="r").attrs[WRITE_STATE_ATTR] == "complete"


def test_memory_url_overwrite_refused():
    """An existing memory:// output is kept unless overwrite=True."""
    out = _memory_url("y.zarr")
    write_array(np.zeros((3, 2)), out)
    with pytest.raises(OutputExistsError, match="exists already"):
        write_array(np.ones((3, 2)), out)
    np.testing.assert_array_equal(open_array(out).compute(), 0.0)
    write_array(np.ones((4, 2)), out, overwrite=True)
    np.testing.assert_array_equal(open_array(out).compute(), np.ones((4, 2)))


# -- atomic writes -----------------------------------------------------------

_RELEASE = threading.Event()


def _block_waiting_for_release(block, block_info=None):
    # Only the last block waits, so that another thread writes the others meanwhile.
    if block_info[0]["chunk-location"][0] == block_info[0]["num-chunks"][0] - 1:
        _RELEASE.wait(timeout=60)
    return block


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_reader_never_sees_a_partial_output(tmp_path, where):
    """While blocks are still being written, the output path does not open as data."""
    out = str(tmp_path / "y.zarr") if where == "local" else _memory_url("y.zarr")
    Y = da.from_array(_data(200), chunks=(20, 3)).map_blocks(_block_waiting_for_release,
                                                             dtype=float)
    _RELEASE.clear()
    writer = threading.Thread(target=write_array, args=(Y, out),
                              kwargs={"overwrite": False})
    with dask.config.set(scheduler="threads"):
        writer.start()
        try:
            if where == "local":
                _wait_for(lambda: list(tmp_path.glob(".y.zarr.tmp-*/c/0/0")))
                with pytest.raises(FileNotFoundError):
                    open_array(out)
            else:
                fs, root = fsspec.core.url_to_fs(out)
                _wait_for(lambda: fs.exists(f"{root}/c/0/0"))
                with pytest.raises(InvalidInputError, match="incomplete kpca-dask output"):
                    open_array(out)
        finally:
            _RELEASE.set()
            writer.join(timeout=60)
    np.testing.assert_array_equal(open_array(out).compute(), Y.compute())


def _raise_on_block_5(block, block_info=None):
    if block_info[0]["chunk-location"][0] == 5:
        raise RuntimeError("disk on fire")
    return block


@pytest.mark.parametrize("where", ["local", "memory"])
def test_failed_write_leaves_nothing(tmp_path, where):
    """An error half-way through a write removes what was written."""
    out = str(tmp_path / "y.zarr") if where == "local" else _memory_url("y.zarr")
    Y = da.ones((100, 2), chunks=(10, 2)).map_blocks(_raise_on_block_5, dtype=float)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_array(Y, out, overwrite=False)
    if where == "local":
        assert list(tmp_path.iterdir()) == []
    else:
        with pytest.raises(FileNotFoundError):
            open_array(out)


def test_overwrite_refused_without_flag(tmp_path):
    """An existing output is never replaced unless overwrite=True, and then fully."""
    out = tmp_path / "y.zarr"
    write_array(np.zeros((6, 2)), out)
    with pytest.raises(OutputExistsError, match="pass overwrite=True"):
        write_array(np.ones((6, 2)), out)
    np.testing.assert_array_equal(open_array(out).compute(), 0.0)
    write_array(da.ones((9, 2), chunks=(4, 2)), out, overwrite=True)
    np.testing.assert_array_equal(open_array(out).compute(), np.ones((9, 2)))
    assert [p.name for p in tmp_path.iterdir()] == ["y.zarr"]


_KILLED_WRITER = textwrap.dedent("""
    import sys, time
    import dask, dask.array as da
    from kpca_dask.io import write_embedding

    def slow_block(block):
        time.sleep(0.2)
        return block

    Y = da.ones((4000, 3), chunks=(50, 3)).map_blocks(slow_block, dtype=float)
    with dask.config.set(scheduler="threads", num_workers=2):
        write_embedding(Y, sys.argv[1])
""")


@pytest.mark.faults
@pytest.mark.slow
def test_killed_writer_leaves_no_output(tmp_path):
    """A writer killed with SIGKILL half-way leaves nothing at the output path."""
    out = tmp_path / "embedding.zarr"
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(out)])
    try:
        def some_chunks_written():
            staged = [p for p in tmp_path.iterdir() if p.name.startswith(".embedding.zarr.tmp-")]
            return bool(staged) and len(list((staged[0] / "c").glob("*/*"))) >= 4
        _wait_for(some_chunks_written)
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert not out.exists()
    with pytest.raises(FileNotFoundError):
        open_array(out)
    # The hidden leftover does not block writing the output again.
    write_embedding(np.ones((4, 3)), out)
    assert open_array(out).shape == (4, 3)


def test_group_written_incomplete_is_refused(tmp_path):
    """A group still marked incomplete (as after a killed remote writer) is refused."""
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w", attributes={WRITE_STATE_ATTR: "incomplete"})
    with pytest.raises(InvalidInputError, match="incomplete kpca-dask output"):
        open_group(tmp_path / "g.zarr")


# -- MNIST to Zarr -----------------------------------------------------------

MNIST = Path(os.environ.get("KPCA_DASK_DATA", Path(__file__).resolve().parents[3] / "shared"
                            / "data")) / "mnist"


@pytest.mark.slow
@pytest.mark.skipif(not (MNIST / "t10k-images-idx3-ubyte.gz").exists(), reason="no MNIST files")
def test_mnist_to_zarr(tmp_path):
    """MNIST goes to one Zarr group, images chunked by rows, equal to the IDX files."""
    from kpca_dask.datasets import load_mnist, mnist_to_zarr

    store = mnist_to_zarr(MNIST, tmp_path / "mnist.zarr", chunk_rows=10_000)
    images = open_array(store, array="test_images")
    assert images.shape == (10_000, 784) and images.dtype == np.uint8
    assert open_array(store, array="train_images").chunks[0] == (10_000,) * 6
    expected, labels = load_mnist(MNIST, "test")
    np.testing.assert_array_equal(images.compute(), expected)
    np.testing.assert_array_equal(open_group(store)["test_labels"][:], labels)
