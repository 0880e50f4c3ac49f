"""Outputs that are never seen half-written, and never replaced unasked.

* **local paths** are written into a hidden temporary sibling
  ``.<name>.tmp-<random>`` and renamed into place only once complete (a
  rename within one directory is atomic). A writer killed half-way leaves at
  most that hidden sibling, never anything at the final path.
* **fsspec URLs** (``s3://``, ``gs://``, ``memory://`` ...) cannot rename a
  directory atomically, so the output is written in place and carries the
  attribute ``kpca_dask_write = "incomplete"`` from its first metadata write;
  it is set to ``"complete"`` last, and the readers of :mod:`kpca_dask.io`
  refuse an output marked incomplete. One process at a time writes a URL:
  the others stand back before writing anything (:mod:`kpca_dask.io.claims`).

An existing output is never replaced unless ``overwrite=True``. The Zarr
writers (:mod:`kpca_dask.io.zarr_io`) and the Parquet writer
(:mod:`kpca_dask.io.parquet_out`) both go through here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import zarr

from ..errors import OutputExistsError, about
from .claims import exclusive_writer
from .locations import PathOrURL, StoreLocation, store_location

__all__ = ["WRITE_STATE_ATTR", "INCOMPLETE", "COMPLETE", "staged_output", "staging_for",
           "check_can_write", "refuse_existing", "remove_after_failure", "rename_into_place",
           "mark_complete"]

#: Attribute that marks an output of kpca-dask as being written or complete.
WRITE_STATE_ATTR = "kpca_dask_write"
INCOMPLETE, COMPLETE = "incomplete", "complete"


@contextlib.contextmanager
def staged_output(path: PathOrURL, overwrite: bool,
                   storage_options: dict | None) -> Iterator[StoreLocation]:
    """Yield where to write ``path``; put it in place only if the block succeeds.

    The writer must create its root node with ``WRITE_STATE_ATTR`` set to
    "incomplete"; this sets it to "complete" and, for local paths, renames
    the hidden staging directory onto ``path``. Its own errors name ``path``;
    those of the block (about the data being written) pass as they are.
    """
    final = store_location(path, storage_options)
    with contextlib.ExitStack() as claimed:
        with about(os.fspath(path)):
            refuse_existing(final, overwrite)
            if not final.local:
                # Written in place: first make sure no other process writes here too.
                claimed.enter_context(exclusive_writer(*final.fs()))
            staging = staging_for(final, overwrite)
        try:
            yield staging
            mark_complete(staging)
            if final.local:
                with about(os.fspath(path)):
                    rename_into_place(staging.path, final.path, overwrite)
        except BaseException:
            # Also on KeyboardInterrupt: leave nothing behind that could be mistaken for output.
            remove_after_failure(staging)
            raise


def staging_for(final: StoreLocation, overwrite: bool) -> StoreLocation:
    """Where the output for ``final`` is written before it is complete.

    A local path: a hidden sibling, renamed onto ``final`` when complete (a
    rename is atomic there). A URL: ``final`` itself, emptied first when
    overwriting, since object stores have no atomic rename.

    Examples
    --------
    >>> import tempfile
    >>> final = store_location(tempfile.mkdtemp() + "/out.zarr", None)
    >>> staging_for(final, overwrite=False).path.name.startswith(".out.zarr.tmp-")
    True
    """
    if final.local:
        final.path.parent.mkdir(parents=True, exist_ok=True)
        return StoreLocation(str(final.path.with_name(
            f".{final.path.name}.tmp-{uuid.uuid4().hex[:12]}")), local=True)
    if overwrite:
        final.remove()
    return final


#: How long to keep removing a failed output while straggling blocks still write.
_STRAGGLER_SECONDS = 10.0


def remove_after_failure(staging: StoreLocation) -> None:
    """Remove a failed output, again, until no straggling block writes into it.

    A scheduler raises the first block error at once, while blocks already
    running on other threads or workers finish and may write their chunk
    after the first removal, recreating the directory.
    """
    deadline = time.monotonic() + _STRAGGLER_SECONDS
    while True:
        with contextlib.suppress(OSError):
            staging.remove()
        time.sleep(0.2)
        if not staging.exists() or time.monotonic() > deadline:
            return


def refuse_existing(final: StoreLocation, overwrite: bool) -> None:
    """Raise OutputExistsError if ``final`` exists and may not be replaced (naming no place)."""
    if not overwrite and final.exists():
        raise OutputExistsError(
            "the output exists already; choose another output path or pass overwrite=True "
            "(--overwrite on the command line) to replace it.")


def check_can_write(path: PathOrURL, *, overwrite: bool = False,
                    storage_options: dict | None = None) -> None:
    """Raise :class:`~kpca_dask.errors.OutputExistsError` now if writing ``path`` would be refused.

    Lets a caller fail before hours of work instead of after; the writers
    check again when they start.

    Examples
    --------
    >>> import tempfile
    >>> check_can_write(tempfile.mkdtemp() + "/new.zarr")
    """
    with about(os.fspath(path)):
        refuse_existing(store_location(path, storage_options), overwrite)


def mark_complete(where: StoreLocation) -> None:
    node = zarr.open(where.url, mode="r+", **where.zarr_kwargs())
    node.attrs[WRITE_STATE_ATTR] = COMPLETE


def rename_into_place(staging: Path, final: Path, overwrite: bool) -> None:
    """Rename the complete ``staging`` onto ``final``; with ``overwrite``, retire the old one.

    Safe against another process doing the same at the same instant: each
    rename is atomic, so ``final`` is always one writer's complete output,
    never a mixture. Without ``overwrite`` the second writer finds ``final``
    taken and gets :class:`~kpca_dask.errors.OutputExistsError`; with it, the
    writers take turns and the last one's output stays.
    """
    retired: list[Path] = []  # old outputs moved aside, deleted once ours is in place
    try:
        for _ in range(_SWAP_ATTEMPTS):
            try:
                os.rename(staging, final)  # fails if final is a non-empty directory
                return
            except OSError:
                if not final.exists():  # not a race with another writer
                    raise
            if not overwrite:
                raise OutputExistsError(
                    "the output appeared while it was being written (another writer "
                    "finished first); the new output was discarded.")
            # Move the old output aside first so that the final path is never half-old,
            # half-new.
            aside = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:12]}")
            try:
                os.rename(final, aside)
            except FileNotFoundError:
                continue  # another writer moved it aside first: try again
            retired.append(aside)
        raise OutputExistsError(
            f"the output was replaced by other writers {_SWAP_ATTEMPTS} times while this "
            "one tried to put its output in place; the new output was discarded. Write to "
            "another path.")
    except BaseException:
        if retired and not final.exists():
            with contextlib.suppress(OSError):  # put the newest old output back
                os.rename(retired.pop(), final)
        raise
    finally:
        for aside in retired:
            shutil.rmtree(aside, ignore_errors=True)


#: How often a writer with overwrite=True retries the swap while others race for the path.
_SWAP_ATTEMPTS = 20
