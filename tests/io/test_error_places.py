"""Errors of the readers and writers name the file, store or URL once, at the boundary."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from kpca_dask import cli
from kpca_dask.errors import InvalidInputError, ModelFormatError, OutputExistsError, about
from kpca_dask.io import open_array, write_array
from kpca_dask.io.checksums import recorded_digests


def test_nested_about_keeps_the_innermost_place():
    """An error keeps the place of the innermost ``about`` it passes through."""
    damaged = {"checksums": {"arrays": ["not", "a", "mapping"]}}
    with pytest.raises(ModelFormatError) as caught:
        with about("model.zarr"), about("model.zarr/statistics"):
            recorded_digests(damaged)
    assert caught.value.where == "model.zarr/statistics"
    assert str(caught.value).startswith("model.zarr/statistics: the attribute 'checksums' ")


def test_reader_error_names_the_file_once(tmp_path):
    """open_array on a file that is not .npy names the path once, at the start."""
    path = tmp_path / "data.npy"
    path.write_bytes(b"not an array")
    with pytest.raises(InvalidInputError, match="not a readable .npy array") as caught:
        open_array(path)
    assert caught.value.where == str(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and text.count(str(path)) == 1


def test_place_survives_pickling(tmp_path):
    """An error sent between processes (as distributed does) keeps its place and message."""
    out = tmp_path / "out.zarr"
    write_array(np.zeros((2, 2)), out)
    with pytest.raises(OutputExistsError) as caught:
        write_array(np.ones((2, 2)), out)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is OutputExistsError and copy.where == str(out)
    assert str(copy) == str(caught.value) and str(copy).startswith(f"{out}: the output exists")


def _refused_block(block):
    raise InvalidInputError("this block was refused")


def test_an_error_of_the_data_written_is_not_named_after_the_output(tmp_path):
    """A writer names its output in its own errors only: an error computing the data it
    writes (about its input) is not given the output's name."""
    import dask.array as da

    X = da.zeros((4, 2), chunks=(2, 2)).map_blocks(_refused_block, dtype=float)
    with pytest.raises(InvalidInputError, match="^this block was refused$") as caught:
        write_array(X, tmp_path / "out.zarr")
    assert caught.value.where is None
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.parametrize("name, content, message", [
    ("gone.npy", None, "No such file: gone.npy"),
    ("bad.npy", b"not an array", "bad.npy: not a readable .npy array"),
    ("bad.zarr", b"", "bad.zarr: it exists but is not a Zarr array or group"),
])
def test_command_line_names_a_bad_input_once(tmp_path, name, content, message, capsys,
                                            monkeypatch):
    """`kpca-dask fit` on a missing or damaged input prints one line naming the file once
    (the command's own entry point, in this process: that a process of its own prints it
    without a traceback is test_cli.py's)."""
    if content is not None:
        if name.endswith(".zarr"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_bytes(content)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", name, "--model", "m.zarr", "--scheduler", "threads"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert lines[0].count(name) == 1, lines[0]
