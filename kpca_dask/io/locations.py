"""Where stores and outputs live: a local directory or an fsspec URL."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from ..errors import InvalidInputError, about

__all__ = ["PathOrURL", "StoreLocation", "store_location"]

PathOrURL = Union[str, os.PathLike]


@dataclass(frozen=True)
class StoreLocation:
    """Where a store or output lives: a local directory or an fsspec URL.

    The one type every reader and writer of :mod:`kpca_dask.io` is given, in
    the manner of zarr-python's ``StorePath``: make it with
    :func:`store_location`, hand ``url`` and :meth:`zarr_kwargs` to zarr, and
    :meth:`fs` to fsspec.

    Examples
    --------
    >>> where = store_location("memory://bucket/model.zarr")
    >>> where.local, where.zarr_kwargs()
    (False, {'storage_options': {}})
    """

    url: str  # what zarr is given: a local path or the URL
    local: bool
    storage_options: dict | None = None

    @property
    def path(self) -> Path:
        """The local directory (for a local location)."""
        return Path(self.url)

    def exists(self) -> bool:
        """Whether anything is stored at the location."""
        if self.local:
            return self.path.exists()
        fs, root = self.fs()
        return fs.exists(root)

    def remove(self) -> None:
        """Delete whatever is stored at the location."""
        if self.local:
            if self.path.is_dir():
                shutil.rmtree(self.path)
            elif self.path.exists():
                self.path.unlink()
            return
        fs, root = self.fs()
        if fs.exists(root):
            fs.rm(root, recursive=True)

    def fs(self):
        """The fsspec filesystem of the location and the path within it."""
        import fsspec

        return fsspec.core.url_to_fs(self.url, **(self.storage_options or {}))

    def zarr_kwargs(self) -> dict:
        """The keyword arguments zarr's openers need for this location."""
        return {} if self.local else {"storage_options": self.storage_options or {}}


def store_location(path: PathOrURL, storage_options: dict | None = None) -> StoreLocation:
    """Where ``path`` lives: an absolute local directory (``~`` expanded, ``file://``
    dropped) or an fsspec URL with its ``storage_options``.

    Examples
    --------
    >>> store_location("file:///tmp/x.zarr").url
    '/tmp/x.zarr'
    """
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://"):]
    if "://" in text:
        return StoreLocation(text, local=False, storage_options=storage_options)
    if storage_options:
        with about(os.fspath(path)):
            raise InvalidInputError(
                "storage_options were given for a local path; they apply to fsspec URLs "
                "(s3://, gs://, memory://...) only.")
    # Absolute, because worker processes need not share our working directory.
    return StoreLocation(str(Path(text).expanduser().absolute()), local=True)
