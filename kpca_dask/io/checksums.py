"""Checksums for the arrays of model files and checkpoints (docs/design.md §10).

Two layers, for two kinds of damage:

- every chunk is stored with Zarr v3's ``crc32c`` codec, the last
  bytes-to-bytes codec of the array, so a chunk changed on disk or in transit
  (a flipped bit, a truncated object) fails its checksum when it is read;
  :func:`read_checked` turns that failure into a
  :class:`~kpca_dask.errors.ModelFormatError` naming the array (the caller's
  :func:`~kpca_dask.errors.about` names the file);
- a digest of each whole array (and of the attributes) is recorded in the
  group's attributes when it is written, so what no chunk checksum can see —
  a chunk file deleted (Zarr then reads its fill value), or an array rewritten
  through Zarr, which writes fresh checksums — is found as well
  (:func:`digest`, :func:`check_digests`).

Files written before checksums were stored have neither layer and still load:
their chunks decode as before and their digests are simply absent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import xxhash
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

from ..errors import ModelFormatError

__all__ = ["CHECKSUMS_ATTRIBUTE", "checksummed_codecs", "has_checksum", "read_checked", "digest",
           "attributes_digest", "recorded_digests", "check_digests", "digest_of_rows"]

#: The attribute of a group that holds its digests: ``{"arrays": {name: digest}, ...}``.
CHECKSUMS_ATTRIBUTE = "checksums"
#: What to do about a damaged model file; checkpoints pass their own advice as ``fix``.
MODEL_FIX = "Copy the file again from its source, or fit and save it again."


def checksummed_codecs(compressed: bool = True) -> tuple:
    """The ``compressors`` of a checksummed array: Zarr's default Zstd (optional), then crc32c.

    The checksum comes last, so it covers the bytes exactly as stored.

    Examples
    --------
    >>> [type(codec).__name__ for codec in checksummed_codecs()]
    ['ZstdCodec', 'Crc32cCodec']
    >>> [type(codec).__name__ for codec in checksummed_codecs(compressed=False)]
    ['Crc32cCodec']
    """
    return (ZstdCodec(level=0), Crc32cCodec()) if compressed else (Crc32cCodec(),)


def has_checksum(array: zarr.Array) -> bool:
    """Whether the chunks of ``array`` carry a crc32c checksum.

    Examples
    --------
    >>> z = zarr.create_array({}, shape=(2,), dtype="f8", compressors=checksummed_codecs())
    >>> has_checksum(z), has_checksum(zarr.create_array({}, shape=(2,), dtype="f8"))
    (True, False)
    """
    return any(isinstance(codec, Crc32cCodec) for codec in array.compressors)


def read_checked(group: zarr.Group, name: str, fix: str = MODEL_FIX) -> np.ndarray:
    """The array ``name`` of ``group`` as numpy, or a ModelFormatError if it is damaged.

    Damaged means: its metadata cannot be read, a stored chunk fails its
    checksum, or a chunk cannot be decoded into the array's dtype and shape.
    The message names the array; the caller's :func:`~kpca_dask.errors.about`
    names the file. Errors of the storage itself (a permission, a network)
    pass through.

    Examples
    --------
    >>> group = zarr.open_group({}, mode="w")
    >>> group.create_array("offset", data=np.arange(3.0), compressors=checksummed_codecs())
    <Array memory://... shape=(3,) dtype=float64>
    >>> read_checked(group, "offset").tolist()
    [0.0, 1.0, 2.0]
    """
    try:
        return group[name][...]
    except (ValueError, RuntimeError, TypeError, KeyError) as exc:
        # crc32c raises ValueError on a mismatch; Zstd a RuntimeError on bytes it cannot
        # decode; a chunk of the wrong size, or edited metadata, a ValueError or TypeError.
        if "checksum" in str(exc):
            reason = ("a stored chunk fails its crc32c checksum: the file was changed or "
                      "corrupted after it was written")
        else:
            reason = f"it cannot be read ({type(exc).__name__}: {exc})"
        raise ModelFormatError(f"the array {name!r} is damaged: {reason}. {fix}") from None


def digest(array) -> str:
    """A digest of an array's dtype, shape and values (xxh3, 128 bits; not a signature).

    Examples
    --------
    >>> digest(np.zeros(2)) == digest(np.zeros(2)), digest(np.zeros(2)) == digest(np.zeros(3))
    (True, False)
    >>> digest(np.zeros(2)) == digest(np.zeros(2, dtype=np.float32))
    False
    """
    array = np.ascontiguousarray(array)
    return digest_of_rows([array], array.dtype, array.shape)


def digest_of_rows(panels, dtype, shape) -> str:
    """:func:`digest` of the array made of the row ``panels`` stacked in order, one at a time.

    For an array too large to hold at once (a dask array's row panels, read one by one).

    Examples
    --------
    >>> a = np.arange(6.0).reshape(3, 2)
    >>> digest_of_rows([a[:2], a[2:]], a.dtype, a.shape) == digest(a)
    True
    """
    hasher = xxhash.xxh3_128(f"{np.dtype(dtype).str}{tuple(shape)}".encode())
    for panel in panels:
        panel = np.ascontiguousarray(panel, dtype=dtype)
        if panel.size:
            hasher.update(panel.view(np.uint8).reshape(-1))
    return hasher.hexdigest()


def attributes_digest(attributes: Mapping) -> str:
    """A digest of JSON attributes, independent of the order of their keys.

    Examples
    --------
    >>> attributes_digest({"a": 1, "b": [2.5]}) == attributes_digest({"b": [2.5], "a": 1})
    True
    """
    text = json.dumps(attributes, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return xxhash.xxh3_128_hexdigest(text.encode())


def recorded_digests(attributes: Mapping, fix: str = MODEL_FIX) -> dict:
    """The array digests recorded in a group's ``attributes``; empty for a file without them.

    Examples
    --------
    >>> recorded_digests({"checksums": {"arrays": {"a": "12ab"}}})
    {'a': '12ab'}
    >>> recorded_digests({})
    {}
    """
    recorded = attributes.get(CHECKSUMS_ATTRIBUTE)
    if recorded is None:
        return {}
    arrays = recorded.get("arrays") if isinstance(recorded, Mapping) else None
    if not (isinstance(arrays, Mapping) and all(isinstance(v, str) for v in arrays.values())):
        raise ModelFormatError(
            f"the attribute {CHECKSUMS_ATTRIBUTE!r} is not the mapping of digests that "
            f"was written: the file was edited. {fix}")
    return dict(arrays)


def check_digests(arrays: Mapping[str, np.ndarray], recorded: Mapping, fix: str = MODEL_FIX,
                  taken: Mapping[str, str] | None = None) -> None:
    """Raise ModelFormatError unless every array of ``recorded`` is present and matches it.

    ``recorded`` maps array names to the digests taken when the file was written;
    ``taken`` gives digests already taken of some arrays (read elsewhere, in panels).

    Examples
    --------
    >>> check_digests({"a": np.ones(2)}, {"a": digest(np.ones(2))})
    >>> from kpca_dask.errors import about
    >>> with about("model.zarr"):
    ...     check_digests({"a": np.zeros(2)}, {"a": digest(np.ones(2))})
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: model.zarr: the array 'a' differs from the array \
that was written (its digest does not match): the file was edited or a chunk of it is \
missing. Copy the file again from its source, or fit and save it again.
    """
    for name, expected in recorded.items():
        if name not in arrays:
            raise ModelFormatError(f"the array {name!r} is missing, although the file was "
                                   f"written with it. {fix}")
        if ((taken or {}).get(name) or digest(arrays[name])) != expected:
            raise ModelFormatError(
                f"the array {name!r} differs from the array that was written (its digest "
                f"does not match): the file was edited or a chunk of it is missing. {fix}")
