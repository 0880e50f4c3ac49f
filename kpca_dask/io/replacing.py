"""Replacing a local output only if nobody changed it since it was read.

``kpca-dask update model.zarr ...`` reads a model, adds rows for minutes or
hours, and writes it back. Two such updates of one model at once would each
write a model holding only their own rows: the last one to finish would
silently drop the other's. So the update remembers the version it read
(:func:`version_of`, a hash of the root metadata, which changes with every
save) and puts its result in place with :func:`replace_unchanged`, which
refuses, with :class:`~kpca_dask.errors.ConcurrentWriteError`, if the file
is no longer that version. Every step is an atomic rename, so the path
always holds one complete model.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable

from ..errors import ConcurrentWriteError, ModelFormatError
from .locations import PathOrURL

__all__ = ["version_of", "read_unchanged", "replace_unchanged", "staging_path"]

#: The metadata file a Zarr v3 (or v2) group is read from.
_METADATA = ("zarr.json", ".zattrs")


def version_of(path: PathOrURL) -> str:
    """A hash of the root metadata of the local store at ``path``: it changes with each save.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from kpca_dask.io import write_group
    >>> out = write_group({"a": np.eye(2)}, tempfile.mkdtemp() + "/g.zarr")
    >>> len(version_of(out))
    64
    """
    digest = hashlib.sha256()
    for name in _METADATA:
        metadata = Path(path) / name
        if metadata.exists():
            digest.update(metadata.read_bytes())
    return digest.hexdigest()


def read_unchanged(read: Callable[[PathOrURL], Any], path: PathOrURL, version: str) -> Any:
    """``read(path)``; if it fails while another process replaces ``path``, ConcurrentWriteError.

    A replacement swaps whole directories by renames, but a reader opens the
    arrays one by one: one that was reading as the swap happened sees the path
    missing, or arrays of two versions, which their digests refuse as damage.
    That failure is the other process's save, not a damaged file, and is
    reported as such when ``path`` is no longer ``version``.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from kpca_dask.io import open_group, write_group
    >>> out = write_group({"a": np.eye(2)}, tempfile.mkdtemp() + "/g.zarr")
    >>> read_unchanged(open_group, out, version_of(out)).attrs is not None
    True
    """
    try:
        return read(path)
    except (ModelFormatError, FileNotFoundError):
        if version_of(path) != version:
            raise ConcurrentWriteError(_changed(Path(path).absolute())) from None
        raise


def staging_path(final: PathOrURL) -> Path:
    """A hidden sibling of ``final`` to write its replacement to (same directory: atomic rename).

    Examples
    --------
    >>> staging_path("/data/model.zarr").name.startswith(".model.zarr.replacing-")
    True
    """
    final = Path(final).absolute()
    return final.with_name(f".{final.name}.replacing-{uuid.uuid4().hex[:12]}")


def replace_unchanged(staged: PathOrURL, final: PathOrURL, version: str) -> None:
    """Rename ``staged`` onto ``final`` if ``final`` is still ``version``; else refuse.

    The old ``final`` is first moved aside (one atomic rename, which only
    one process can win), its version checked, then ``staged`` renamed into
    place. ``staged`` is removed in every case.

    Raises
    ------
    ConcurrentWriteError
        Another process replaced or is replacing ``final``; it is left as that
        process wrote it.
    """
    staged, final = Path(staged), Path(final).absolute()
    aside = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:12]}")
    try:
        try:
            os.rename(final, aside)
        except FileNotFoundError:
            raise ConcurrentWriteError(_changed(final)) from None
        if version_of(aside) != version:
            with contextlib.suppress(OSError):  # put the other writer's version back
                os.rename(aside, final)
            raise ConcurrentWriteError(_changed(final))
        try:
            os.rename(staged, final)
        except OSError:
            with contextlib.suppress(OSError):
                os.rename(aside, final)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _changed(final: Path) -> str:
    return (f"{final} was changed by another process (another update?) while this one "
            "worked: this result was discarded so that the other one's rows are not lost. "
            "Run the command again: it will start from the model as it is now.")
