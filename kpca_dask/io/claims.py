"""One writer at a time for outputs on object storage (fsspec URLs).

A local output is written to a hidden sibling and renamed into place, which
is atomic (:mod:`kpca_dask.io.zarr_io`). Object stores cannot rename a
directory, so a URL output is written in place, and two processes writing
one URL at once would interleave their chunks. So before writing anything a
writer puts a *claim*, an object ``.<output name>.kpca-dask-writers/<random>``
beside the output (not in it, which must stay empty for Zarr), and lists the
claims there: if it sees any other, it withdraws its claim and
raises :class:`~kpca_dask.errors.ConcurrentWriteError` without having
written a byte. Object stores list what was written before (S3 has been
strongly consistent since 2020), so of two writers the one that lists later
sees the other: at most one goes on, never both (both may withdraw; each
is told). The claim is removed when the write ends, complete or failed.

A claim of a process on this machine that no longer runs (killed) is stale
and removed; a stale claim of another machine must be deleted by hand, as
the error message says.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator

from ..errors import ConcurrentWriteError

__all__ = ["CLAIMS", "claims_folder", "exclusive_writer"]

#: Suffix of the folder of claims, a hidden sibling of the output.
CLAIMS = ".kpca-dask-writers"


@contextlib.contextmanager
def exclusive_writer(fs, root: str) -> Iterator[None]:
    """Hold the only claim on the output at ``root`` of filesystem ``fs`` while the block runs.

    Its error names no output: the writer names it (:func:`kpca_dask.errors.about`).

    Raises
    ------
    ConcurrentWriteError
        Another writer holds a claim; nothing was written.

    Examples
    --------
    >>> import fsspec
    >>> fs, root = fsspec.core.url_to_fs("memory://claims-example/out.zarr")
    >>> with exclusive_writer(fs, root):
    ...     with exclusive_writer(fs, root):
    ...         pass
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ConcurrentWriteError: another process is writing this output...
    """
    folder = claims_folder(root)
    name = uuid.uuid4().hex
    fs.pipe_file(f"{folder}/{name}", json.dumps(
        {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}).encode())
    try:
        others = [path for path in _claims(fs, folder) if not path.endswith(name)]
        live = [path for path in others if not _stale(fs, path)]
        if live:
            raise ConcurrentWriteError(
                "another process is writing this output at the same time (its claim: "
                f"{live[0]}); this write was abandoned before writing anything, so the "
                "output is that process's alone. Write again once it has finished; if no "
                "such process runs any more (it was killed on another machine), delete "
                f"{folder} first.")
        yield
    finally:
        with contextlib.suppress(OSError):
            fs.rm_file(f"{folder}/{name}")
            if not _claims(fs, folder):  # no empty folder left behind (where there are any)
                fs.rm(folder, recursive=True)


def _claims(fs, folder: str) -> list[str]:
    fs.invalidate_cache(folder)  # a cached listing would hide a claim made since
    try:
        return [path.rstrip("/") for path in fs.ls(folder, detail=False)]
    except FileNotFoundError:
        return []
    finally:
        # Looking for a folder that does not exist, s3fs caches a listing of its
        # parent: without this, an output written after it would stay invisible
        # to this process (a model saved by another process could not be loaded).
        fs.invalidate_cache(folder)


def _stale(fs, path: str) -> bool:
    """Whether the claim at ``path`` is of a process on this machine that no longer runs."""
    try:
        claim = json.loads(fs.cat_file(path))
    except (OSError, ValueError):
        return False  # being written or removed: count it as live
    if claim.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(claim["pid"]), 0)
    except ProcessLookupError:
        with contextlib.suppress(OSError):
            fs.rm_file(path)
        return True
    except (OSError, KeyError, ValueError):
        pass
    return False


def claims_folder(root: str) -> str:
    """The folder of claims for the output at ``root``: its hidden sibling.

    Examples
    --------
    >>> claims_folder("bucket/runs/embedding.zarr")
    'bucket/runs/.embedding.zarr.kpca-dask-writers'
    """
    parent, _, name = root.rstrip("/").rpartition("/")
    return f"{parent}/.{name}{CLAIMS}"
