"""The pass statistics in a Zarr group: one layout for model files and checkpoints.

For fixed landmarks, kernel and parameters the fit is a sum over rows
(docs/design.md §7): n, s, G, t and the reference row r are the model's whole state.
A saved model keeps them so that it can take more rows, be merged with other
shards or be re-solved for another ``n_components``; a checkpoint keeps the
running total of an unfinished pass. Both store them the same way, through
:func:`statistics_arrays`, :func:`statistics_attributes` and
:func:`read_statistics`::

    statistics_gram           (m, m)  float64   G = sum_b D_b^T D_b
    statistics_column_sums    (m,)    float64   s = sum_b D_b^T 1
    statistics_reference      (m,)    float64   r, with D_b = B_b - 1 r^T
    attributes["statistics"]  {"n_samples": n, "diagonal_sum": t,
                               "n_nonfinite": ..., "first_nonfinite_row": ...}

The arrays are float64 and uncompressed: m x m sums of rounding-level
differences do not compress, and a lossless round trip keeps re-solves equal
to the fit bit for bit. Each chunk carries a crc32c checksum, and
:func:`write_statistics` records a digest of each array and of the scalars in
``attributes["checksums"]`` (:mod:`kpca_dask.io.checksums`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import zarr

from ..blocks.statistics import PassStatistics
from ..errors import ModelFormatError
from ..io.checksums import (
    CHECKSUMS_ATTRIBUTE,
    attributes_digest,
    checksummed_codecs,
    digest,
    digest_of_rows,
    read_checked,
)

__all__ = ["STATISTICS_ATTRIBUTE", "STATISTICS_PREFIX", "statistics_arrays",
           "statistics_attributes", "read_statistics", "write_statistics", "file_digest"]

#: Prefix of the array names; the key of the scalar part in the attributes.
STATISTICS_PREFIX = "statistics_"
STATISTICS_ATTRIBUTE = "statistics"
_ARRAYS = ("gram", "column_sums", "reference")
#: Stored when the pass added them up (the linear kernel's feature sums), absent otherwise.
_OPTIONAL_ARRAYS = ("feature_sums",)


def statistics_arrays(stats: PassStatistics) -> dict[str, np.ndarray]:
    """The array part of ``stats``, by the names it is stored under.

    Examples
    --------
    >>> stats = PassStatistics(3, np.zeros(2), np.eye(2), 6.0, 0, -1, np.ones(2))
    >>> sorted(statistics_arrays(stats))
    ['statistics_column_sums', 'statistics_gram', 'statistics_reference']
    """
    return {STATISTICS_PREFIX + name: np.asarray(getattr(stats, name), dtype=np.float64)
            for name in _ARRAYS + _OPTIONAL_ARRAYS if getattr(stats, name) is not None}


def statistics_attributes(stats: PassStatistics) -> dict:
    """The scalar part of ``stats`` as JSON, stored under ``attributes["statistics"]``.

    Examples
    --------
    >>> statistics_attributes(PassStatistics(3, np.zeros(2), np.eye(2), 6.0, 0, -1, np.ones(2)))
    {'n_samples': 3, 'diagonal_sum': 6.0, 'n_nonfinite': 0, 'first_nonfinite_row': -1}
    """
    return {"n_samples": int(stats.n_samples), "diagonal_sum": float(stats.diagonal_sum),
            "n_nonfinite": int(stats.n_nonfinite),
            "first_nonfinite_row": int(stats.first_nonfinite_row)}


def write_statistics(group, stats: PassStatistics,
                     also: Mapping[str, np.ndarray] | None = None) -> None:
    """Add ``stats`` to an open, writable Zarr group (arrays and the attribute).

    ``also`` are more arrays to store beside them, checksummed the same way.
    """
    arrays = {**statistics_arrays(stats), **(also or {})}
    for name, value in arrays.items():
        group.create_array(name, data=value, compressors=checksummed_codecs(compressed=False),
                           overwrite=True)
    scalars = statistics_attributes(stats)
    group.attrs.update({STATISTICS_ATTRIBUTE: scalars, CHECKSUMS_ATTRIBUTE: {
        "arrays": {name: digest(value) for name, value in arrays.items()},
        "attributes": attributes_digest(scalars)}})


def read_statistics(arrays: Mapping, attributes: Mapping, *,
                    lazy_gram: bool = False) -> PassStatistics | None:
    """The statistics stored in ``arrays`` (a Zarr group, or a dict of arrays), or None.

    ``attributes`` are the group's attributes. None when the group holds no
    statistics at all (a model saved before they were kept); a group that
    holds only part of them is damaged. Messages of this module name no file
    (the caller's :func:`~kpca_dask.errors.about` does). With ``lazy_gram`` (a Zarr group) G is
    a dask array over the stored chunks, read where it is computed (the workers
    of a cluster), each chunk checked against its crc32c as it is read.

    Examples
    --------
    >>> stats = PassStatistics(3, np.zeros(2), np.eye(2), 6.0, 0, -1, np.ones(2))
    >>> back = read_statistics(statistics_arrays(stats),
    ...                        {"statistics": statistics_attributes(stats)})
    >>> back.n_samples, back.gram.tolist()
    (3, [[1.0, 0.0], [0.0, 1.0]])
    >>> read_statistics({}, {}) is None
    True
    """
    names = [STATISTICS_PREFIX + name for name in _ARRAYS]
    present = [name for name in names if name in arrays]
    scalars = attributes.get(STATISTICS_ATTRIBUTE)
    if not present and scalars is None:
        return None
    missing = [name for name in names if name not in present]
    if scalars is None:
        missing.append(f'attribute "{STATISTICS_ATTRIBUTE}"')
    if missing:
        raise ModelFormatError(f"the statistics are incomplete: {', '.join(missing)} missing.")
    values = {name: _read(arrays, STATISTICS_PREFIX + name)
              for name in _ARRAYS if not (lazy_gram and name == "gram")}
    if lazy_gram:
        values["gram"] = _lazy(arrays, STATISTICS_PREFIX + "gram")
    for name in _OPTIONAL_ARRAYS:
        values[name] = (_read(arrays, STATISTICS_PREFIX + name)
                        if STATISTICS_PREFIX + name in arrays else None)
    if not isinstance(scalars, Mapping):
        raise ModelFormatError(f'the attribute "{STATISTICS_ATTRIBUTE}" must be a mapping; got '
                               f"{scalars!r}.")
    kinds = {"n_samples": int, "diagonal_sum": float, "n_nonfinite": int,
             "first_nonfinite_row": int}
    for name, kind in kinds.items():
        value = scalars.get(name)
        # JSON has one number type: a float attribute may be written as 6 or 6.0.
        allowed = (int, float) if kind is float else (int,)
        if isinstance(value, bool) or not isinstance(value, allowed):
            raise ModelFormatError(
                f'the statistics are damaged: "{STATISTICS_ATTRIBUTE}.{name}" must be '
                f"{'a number' if kind is float else 'an integer'}; got {value!r}.")
    return PassStatistics(
        n_samples=scalars["n_samples"],
        column_sums=values["column_sums"],
        gram=values["gram"],
        diagonal_sum=float(scalars["diagonal_sum"]),
        n_nonfinite=scalars["n_nonfinite"],
        first_nonfinite_row=scalars["first_nonfinite_row"],
        reference=values["reference"],
        feature_sums=values["feature_sums"],
    )


def _lazy(group, name: str):
    """A stored array as a dask array over its chunks, its dtype checked from its metadata."""
    import dask.array as da

    array = group[name]
    if array.dtype != np.float64:
        raise ModelFormatError(
            f"the array {name!r} has dtype {array.dtype}; the statistics are "
            "stored as float64. The file was edited or damaged: fit and save it again.")
    return da.from_zarr(array, chunks=array.chunks)


def file_digest(array, rows: int | None = None) -> str:
    """:func:`kpca_dask.io.checksums.digest` of a stored 2-D array, read row panel by row
    panel (of ``rows``, default its chunks' rows): a task for a worker, in bounded memory.

    Examples
    --------
    >>> from kpca_dask.io.checksums import digest
    >>> z = zarr.create_array({}, shape=(5, 2), chunks=(2, 2), dtype="f8")
    >>> z[...] = np.arange(10.0).reshape(5, 2)
    >>> file_digest(z) == digest(z[...])
    True
    """
    step = rows or array.chunks[0]
    panels = (array[start:start + step] for start in range(0, array.shape[0], step))
    return digest_of_rows(panels, array.dtype, array.shape)


def _read(arrays: Mapping, name: str) -> np.ndarray:
    """One statistics array as float64, refusing any other dtype rather than converting it."""
    value = np.asarray(read_checked(arrays, name) if isinstance(arrays, zarr.Group)
                       else arrays[name])
    if value.dtype != np.float64:
        raise ModelFormatError(
            f"the array {name!r} has dtype {value.dtype}; the statistics are "
            "stored as float64. The file was edited or damaged: fit and save it again.")
    return value
