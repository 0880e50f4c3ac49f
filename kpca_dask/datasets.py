"""Synthetic data sets from the lecture notes, and a loader for MNIST.

The generators return lazy dask arrays built block by block, so data sets of
10^8 rows never exist in memory. Block b is drawn from a generator seeded by
(seed, b): the same seed and block size give the same data on any scheduler.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path
from typing import Literal

import dask
import dask.array as da
import numpy as np

from .errors import InvalidInputError, InvalidParameterError
from .validation import is_count

__all__ = ["make_two_shells", "make_circles", "make_blobs", "make_dataset", "load_mnist",
           "mnist_to_zarr", "DATASETS"]


def _block_rng(seed: int, block: int) -> np.random.Generator:
    return np.random.default_rng([seed, block])


def _two_shells_block(n, n_features, seed, block):
    # Notes eq. 4.1: X = (1 + 2B)(cos phi sin theta, sin phi sin theta, cos theta) + eps,
    # B ~ Bernoulli(1/2), phi ~ U(0, 2 pi), theta ~ U(0, pi), eps ~ N(0, 0.3^2 I).
    rng = _block_rng(seed, block)
    shell = rng.integers(0, 2, size=n)
    if n_features == 3:
        phi = rng.uniform(0.0, 2.0 * math.pi, n)
        theta = rng.uniform(0.0, math.pi, n)
        direction = np.column_stack(
            [np.cos(phi) * np.sin(theta), np.sin(phi) * np.sin(theta), np.cos(theta)])
    else:  # the same idea in R^p: directions uniform on the unit sphere
        direction = rng.normal(size=(n, n_features))
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    X = (1.0 + 2.0 * shell)[:, None] * direction + rng.normal(0.0, 0.3, (n, n_features))
    return X, shell


def _circles_block(n, n_features, seed, block):
    # Notes: radius 1 or 2 with probability 1/2, Gaussian noise sd 0.5; extra
    # features beyond the first two are noise only.
    rng = _block_rng(seed, block)
    label = rng.integers(0, 2, size=n)
    angle = rng.uniform(0.0, 2.0 * math.pi, n)
    X = rng.normal(0.0, 0.5, (n, n_features))
    X[:, 0] += (1.0 + label) * np.cos(angle)
    X[:, 1] += (1.0 + label) * np.sin(angle)
    return X, label


_BLOB_CENTRES = 8
_CENTRES_STREAM = 2**32 - 1  # a seed stream no data block uses


def _blobs_block(n, n_features, seed, block):
    # A mixture of 8 unit-variance Gaussians whose centres depend on the seed only.
    centres = np.random.default_rng([seed, _CENTRES_STREAM]).normal(
        0.0, 4.0, (_BLOB_CENTRES, n_features))
    rng = _block_rng(seed, block)
    label = rng.integers(0, _BLOB_CENTRES, size=n)
    return centres[label] + rng.normal(size=(n, n_features)), label


_GENERATORS = {"two-shells": (_two_shells_block, 3), "circles": (_circles_block, 2),
               "blobs": (_blobs_block, 32)}
#: Names accepted by :func:`make_dataset` (and ``kpca-dask generate``).
DATASETS = tuple(_GENERATORS)


def _features_block(n, n_features, seed, block, kind, dtype):
    return _GENERATORS[kind][0](n, n_features, seed, block)[0].astype(dtype)


def _labels_block(n, n_features, seed, block, kind):
    return _GENERATORS[kind][0](n, n_features, seed, block)[1].astype(np.int8)


def make_dataset(
    kind: Literal["two-shells", "circles", "blobs"],
    n_samples: int,
    *,
    n_features: int | None = None,
    chunk_rows: int = 100_000,
    seed: int = 0,
    dtype="float64",
) -> tuple[da.Array, da.Array]:
    """A lazy synthetic data set ``(X, labels)``, generated block by block.

    Parameters
    ----------
    kind : {"two-shells", "circles", "blobs"}
    n_samples : int
    n_features : int or None, default=None
        None gives 3 for two-shells (the notes' R^3), 2 for circles, 32 for
        blobs. At least 2 for circles, at least 1 otherwise.
    chunk_rows : int, default=100_000
    seed : int, default=0
    dtype : str, default="float64"

    Examples
    --------
    >>> X, y = make_dataset("two-shells", 1000, chunk_rows=300, seed=1)
    >>> X.shape, X.chunks[0], y.dtype
    ((1000, 3), (300, 300, 300, 100), dtype('int8'))
    """
    if kind not in _GENERATORS:
        raise InvalidParameterError(f"Unknown data set {kind!r}; use one of {', '.join(DATASETS)}.")
    if not is_count(n_samples):
        raise InvalidParameterError(f"n_samples must be an int >= 1; got {n_samples!r}.")
    p = _GENERATORS[kind][1] if n_features is None else n_features
    least = 2 if kind == "circles" else 1  # circles draw in the first two features
    if not is_count(p, least):
        raise InvalidParameterError(
            f"n_features must be an int >= {least} for the {kind} data set, or None for its "
            f"default ({_GENERATORS[kind][1]}); got {n_features!r}.")
    p = int(p)
    if chunk_rows < 1:
        raise InvalidParameterError(f"chunk_rows must be >= 1; got {chunk_rows!r}.")
    sizes = [chunk_rows] * (n_samples // chunk_rows)
    if n_samples % chunk_rows:
        sizes.append(n_samples % chunk_rows)
    dtype = np.dtype(dtype)
    X = da.concatenate([
        da.from_delayed(_delayed(_features_block)(n, p, seed, b, kind, dtype), (n, p), dtype)
        for b, n in enumerate(sizes)])
    y = da.concatenate([
        da.from_delayed(_delayed(_labels_block)(n, p, seed, b, kind), (n,), np.int8)
        for b, n in enumerate(sizes)])
    return X, y


def _delayed(fn):
    return dask.delayed(fn, pure=True)


def make_two_shells(n_samples: int, **kwargs) -> tuple[da.Array, da.Array]:
    """Two noisy spherical shells of radius 1 and 3 (notes eq. 4.1); labels = shell."""
    return make_dataset("two-shells", n_samples, **kwargs)


def make_circles(n_samples: int, **kwargs) -> tuple[da.Array, da.Array]:
    """Two noisy circles of radius 1 and 2 (noise sd 0.5); labels = circle."""
    return make_dataset("circles", n_samples, **kwargs)


def make_blobs(n_samples: int, **kwargs) -> tuple[da.Array, da.Array]:
    """A mixture of 8 Gaussian blobs in R^p (default p = 32); labels = blob."""
    return make_dataset("blobs", n_samples, **kwargs)


_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def load_mnist(directory: str | Path, subset: Literal["train", "test", "all"] = "train"
               ) -> tuple[np.ndarray, np.ndarray]:
    """MNIST images (n x 784, uint8) and labels from the LeCun IDX .gz files.

    Parameters
    ----------
    directory : path
        Folder holding ``train-images-idx3-ubyte.gz`` and the three other files.
    subset : {"train", "test", "all"}
        60 000 training, 10 000 test, or all 70 000 images (train first).
    """
    directory = Path(directory)
    if subset == "all":
        parts = [load_mnist(directory, s) for s in ("train", "test")]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if subset not in _MNIST_FILES:
        raise InvalidParameterError(f"subset must be 'train', 'test' or 'all'; got {subset!r}.")
    images_file, labels_file = (directory / name for name in _MNIST_FILES[subset])
    for path in (images_file, labels_file):
        if not path.is_file():
            raise FileNotFoundError(f"MNIST file {path} not found; pass the folder that holds "
                                    "the four *-ubyte.gz files.")
    images = _read_idx(images_file, magic=2051, header_words=4)
    labels = _read_idx(labels_file, magic=2049, header_words=2)
    return images.reshape(-1, 784), labels


def mnist_to_zarr(directory: str | Path, out, *, chunk_rows: int = 10_000,
                  overwrite: bool = False) -> str:
    """Write MNIST to one Zarr group: ``{train,test}_images`` (n x 784 uint8) and labels.

    Images keep their raw 0-255 pixel values (divide by 255 when reading) and
    are chunked by rows, so they can be read block by block like any other
    data set: ``kpca_dask.io.open_array(out, array="train_images")``.

    Parameters
    ----------
    directory : path
        Folder holding the four ``*-ubyte.gz`` files.
    out : path or URL
        The Zarr group to create (written atomically).
    chunk_rows : int, default=10_000
    overwrite : bool, default=False

    Returns
    -------
    str
        The path written.
    """
    from .io import write_group

    arrays = {}
    for subset in ("train", "test"):
        images, labels = load_mnist(directory, subset)
        arrays[f"{subset}_images"] = da.from_array(images, chunks=(chunk_rows, 784))
        arrays[f"{subset}_labels"] = da.from_array(labels, chunks=chunk_rows)
    attrs = {"dataset": "mnist", "pixels": "uint8, 0-255, 28 x 28 row-major"}
    return write_group(arrays, out, attrs=attrs, overwrite=overwrite)


def _read_idx(path: Path, magic: int, header_words: int) -> np.ndarray:
    """The uint8 payload of a gzipped IDX file, after checking its magic number."""
    try:
        with gzip.open(path) as stream:
            raw = stream.read()
    except (OSError, EOFError) as exc:  # not gzip, or truncated
        raise InvalidInputError(
            f"{path} could not be read as a gzipped IDX file ({exc}); download the MNIST "
            "*-ubyte.gz files again.") from exc
    if len(raw) < 4 * header_words:
        raise InvalidInputError(
            f"{path} is too short for an IDX header ({len(raw)} bytes); download it again.")
    header = np.frombuffer(raw, ">u4", count=header_words)
    if header[0] != magic:
        raise InvalidInputError(
            f"{path} is not an IDX file of the expected kind: magic number {header[0]}, "
            f"expected {magic}. Check that the images and labels files are not swapped "
            "or renamed.")
    return np.frombuffer(raw, np.uint8, offset=4 * header_words)
