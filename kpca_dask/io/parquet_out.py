"""Parquet outputs, never seen half-written by kpca-dask's own readers.

The rules are those of the Zarr outputs (:mod:`kpca_dask.io.zarr_io`):

* **local paths**: the dataset directory is written as a hidden sibling
  ``.<name>.tmp-<random>`` and renamed into place once complete; a writer
  killed half-way leaves at most that sibling.
* **fsspec URLs** cannot rename a directory atomically, so the dataset is
  written in place, with a marker object ``_KPCA_DASK_INCOMPLETE`` put there
  before the first part file and removed after the last. A reader of a
  half-written output sees the marker and the part files written so far
  (``part.0.parquet``, ...). kpca-dask's readers refuse a dataset holding the
  marker; other Parquet readers skip names starting with ``_``, so they would
  read the finished parts as if they were all: check for the marker (or
  wait for the writer) before reading an output that may be in progress.

An existing output is never replaced unless ``overwrite=True``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import about
from .atomic import refuse_existing, remove_after_failure, rename_into_place, staging_for
from .locations import PathOrURL, store_location

__all__ = ["INCOMPLETE_MARKER", "OUTPUT_FORMATS", "output_format", "write_table"]

#: Object present in a Parquet output on object storage while it is being written.
INCOMPLETE_MARKER = "_KPCA_DASK_INCOMPLETE"

#: The formats an output can be written in.
OUTPUT_FORMATS = ("zarr", "parquet")


def output_format(path: PathOrURL, out_format: str | None = None) -> str:
    """``out_format`` if given, else Parquet for a ``.parquet``/``.pq`` path, else Zarr.

    Examples
    --------
    >>> output_format("emb.parquet"), output_format("s3://b/emb.zarr")
    ('parquet', 'zarr')
    """
    if out_format is not None:
        from ..errors import InvalidInputError

        if out_format not in OUTPUT_FORMATS:
            raise InvalidInputError(
                f"out_format={out_format!r} is not known; use one of {', '.join(OUTPUT_FORMATS)}.")
        return out_format
    suffix = Path(os.fspath(path).rstrip("/")).suffix.lower()
    return "parquet" if suffix in (".parquet", ".pq") else "zarr"


def write_table(frame: Any, path: PathOrURL, *, overwrite: bool = False,
                storage_options: dict | None = None) -> str:
    """Write a dask (or pandas) DataFrame as a Parquet dataset, partition by partition.

    Returns the path written. Raises :class:`~kpca_dask.errors.OutputExistsError`
    for an existing ``path`` unless ``overwrite``.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> out = tempfile.mkdtemp() + "/t.parquet"
    >>> _ = write_table(pd.DataFrame({"a": [1.0, 2.0]}), out)
    >>> pd.read_parquet(out)["a"].tolist()
    [1.0, 2.0]
    """
    import dask.dataframe as dd

    if not isinstance(frame, dd.DataFrame):
        frame = dd.from_pandas(frame, npartitions=1)
    final = store_location(path, storage_options)
    with about(os.fspath(path)):
        refuse_existing(final, overwrite)
    staging = staging_for(final, overwrite)
    try:
        if not staging.local:
            fs, root = staging.fs()
            fs.pipe_file(f"{root.rstrip('/')}/{INCOMPLETE_MARKER}", b"")
        # A named index (e.g. read with index="id") is data; an unnamed one is row numbers.
        frame.to_parquet(staging.url, storage_options=staging.storage_options or None,
                         write_metadata_file=False, write_index=frame.index.name is not None)
        if staging.local:
            with about(os.fspath(path)):
                rename_into_place(staging.path, final.path, overwrite)
        else:
            fs.rm_file(f"{root.rstrip('/')}/{INCOMPLETE_MARKER}")
    except BaseException:
        # Also on KeyboardInterrupt: nothing left that could be taken for output.
        remove_after_failure(staging)
        raise
    return os.fspath(path)
