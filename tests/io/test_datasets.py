"""Synthetic data sets and the MNIST reader: defaults, bad arguments, bad files."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from kpca_dask.datasets import load_mnist, make_dataset
from kpca_dask.errors import InvalidInputError, InvalidParameterError


@pytest.mark.parametrize("kind, default", [("two-shells", 3), ("circles", 2), ("blobs", 32)])
def test_none_gives_the_default_number_of_features(kind, default):
    """n_features=None gives each data set its default width."""
    X, _ = make_dataset(kind, 10, chunk_rows=4)
    assert X.shape == (10, default)


@pytest.mark.parametrize("kind, n_features, least", [
    ("blobs", 0, 1), ("two-shells", 0, 1), ("two-shells", -2, 1), ("circles", 1, 2),
    ("circles", 0, 2), ("blobs", 2.5, 1), ("blobs", True, 1),
])
def test_too_few_features_are_refused(kind, n_features, least):
    """n_features below the data set's minimum (0 included) raises, naming the data set."""
    with pytest.raises(InvalidParameterError,
                       match=f"n_features must be an int >= {least} for the {kind} data set"):
        make_dataset(kind, 10, n_features=n_features)


def test_explicit_width_is_used():
    """A valid n_features is used as given."""
    X, _ = make_dataset("circles", 10, n_features=5, chunk_rows=4)
    assert X.shape == (10, 5) and X.compute().shape == (10, 5)


def _idx_bytes(magic: int, dims: list[int], payload: bytes) -> bytes:
    return np.array([magic, *dims], dtype=">u4").tobytes() + payload


def _write_mnist(folder, images_magic=2051):
    """Two tiny images in the IDX format, as train and test files."""
    for prefix in ("train", "t10k"):
        with gzip.open(folder / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
            f.write(_idx_bytes(images_magic, [2, 28, 28], bytes(range(256)) * 6 + bytes(32)))
        with gzip.open(folder / f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(_idx_bytes(2049, [2], bytes([3, 7])))


def test_mnist_reader_reads_idx_files(tmp_path):
    """Well-formed IDX files give n x 784 images and the labels."""
    _write_mnist(tmp_path)
    images, labels = load_mnist(tmp_path, "train")
    assert images.shape == (2, 784) and labels.tolist() == [3, 7]


def test_mnist_wrong_magic_number_raises_invalid_input(tmp_path):
    """An images file with the labels' magic number raises InvalidInputError."""
    _write_mnist(tmp_path, images_magic=2049)
    with pytest.raises(InvalidInputError, match="magic number 2049, expected 2051"):
        load_mnist(tmp_path, "train")


@pytest.mark.parametrize("content", [b"not gzip at all", gzip.compress(b"\x00\x00", mtime=0)],
                         ids=["not gzip", "gzip of too few bytes"])
def test_mnist_unreadable_file_raises_invalid_input(tmp_path, content):
    """A file that is not gzip, or too short for a header, raises InvalidInputError."""
    _write_mnist(tmp_path)
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(content)
    with pytest.raises(InvalidInputError, match="train-images-idx3-ubyte.gz"):
        load_mnist(tmp_path, "train")
