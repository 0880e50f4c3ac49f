"""A checkpoint's arrays on disk: written with checksums, read back checked (docs/design.md §10).

A resumed fit believes what its checkpoint holds: the landmarks and
reference row it continues with, and the running total it adds to. They are
therefore stored as a model file's arrays are — a crc32c checksum on every
chunk and a digest of every array in the attributes
(:mod:`kpca_dask.io.checksums`) — and read back through the same kind of
checks (:mod:`kpca_dask.model.checks`): the layout against the data's
row blocks, the landmarks against the data's shape, the kernel parameters
through the kernel's own checks, and the running total against the rows of
the segments it says are finished. A failure is a
:class:`~kpca_dask.errors.ModelFormatError` naming the array or attribute
(and the checkpoint, named once by :mod:`kpca_dask.checkpoints.fit_checkpoint`);
checkpoints written before checksums were kept resume as before, still
checked.

The layout itself is described in :mod:`kpca_dask.checkpoints.fit_checkpoint`.
"""

from __future__ import annotations

import re

import numpy as np
import zarr

from ..blocks.statistics import PassStatistics
from ..engine.kernel_params import resolve_kernel_params
from ..errors import KPCAError, ModelFormatError
from ..io.checksums import (
    CHECKSUMS_ATTRIBUTE,
    attributes_digest,
    check_digests,
    checksummed_codecs,
    digest,
    read_checked,
    recorded_digests,
)
from ..validation import is_count
from .file_checks import check_array, check_landmark_path, check_statistics, damaged
from .statistics_files import (
    read_statistics,
    statistics_arrays,
    statistics_attributes,
    write_statistics,
)

__all__ = ["write_landmark_arrays", "read_landmark_arrays", "write_state", "read_state",
           "check_checkpoint", "check_checkpoint_state"]

_LANDMARK_ARRAYS = ("landmarks", "landmark_indices", "reference")
_FIX = "Delete the checkpoint and fit again: a fit with a new checkpoint path starts afresh."
#: The first checkpoint format version that always records digests.
CHECKSUMMED_VERSION = 4
_STATE_NAME = re.compile(r"^state-\d{6,}$")


def write_landmark_arrays(group: zarr.Group, arrays: dict[str, np.ndarray], meta: dict) -> dict:
    """Store the landmarks, their indices and the reference row; return the digests to record.

    The digests, of the arrays and of the checkpoint's attribute ``meta``
    (all but its current state, which each saved total moves on), go into
    that attribute with the flag that makes the landmarks count, so all are
    written at once.

    Examples
    --------
    >>> group = zarr.open_group({}, mode="w")
    >>> sorted(write_landmark_arrays(group, {"landmarks": np.zeros((2, 3)),
    ...                                      "reference": np.ones(2)}, {})["arrays"])
    ['landmarks', 'reference']
    """
    for name, value in arrays.items():
        group.create_array(name, data=value, compressors=checksummed_codecs(), overwrite=True)
    return {"arrays": {name: digest(value) for name, value in arrays.items()},
            "attributes": attributes_digest(_fixed_part(meta))}


def read_landmark_arrays(group: zarr.Group, meta: dict) -> dict[str, np.ndarray]:
    """The checkpoint's landmark arrays, checked; empty when none were written yet.

    ``meta`` is the checkpoint's attribute, its identity already matched
    against the fit that resumes it. Messages of this module name no file: the
    checkpoint's :func:`~kpca_dask.errors.about` does.
    """
    arrays = {}
    if meta.get("landmarks_written"):
        arrays = {name: read_checked(group, name, _FIX) for name in _LANDMARK_ARRAYS
                  if name in group or name != "landmark_indices"}
        _require_digests(meta, meta)
    check_checkpoint(meta, arrays)
    check_digests(arrays, recorded_digests(meta, _FIX), _FIX)
    recorded = meta.get(CHECKSUMS_ATTRIBUTE) or {}
    if "attributes" in recorded and attributes_digest(_fixed_part(meta)) != recorded["attributes"]:
        raise damaged("its attribute differs from the one written (its digest does not "
                      "match): it was edited", "checkpoint")
    return arrays


def _require_digests(meta: dict, attributes: dict) -> None:
    """Refuse a checkpoint of a version that always records digests, without them."""
    if meta["format_version"] >= CHECKSUMMED_VERSION and CHECKSUMS_ATTRIBUTE not in attributes:
        raise damaged(f"the attribute {CHECKSUMS_ATTRIBUTE!r} is missing (every "
                      f"checkpoint of format version {meta['format_version']} records it)",
                      "checkpoint")


def _fixed_part(meta: dict) -> dict:
    return {key: value for key, value in meta.items() if key not in ("state", CHECKSUMS_ATTRIBUTE)}


def write_state(state: zarr.Group, total: PassStatistics, finished: np.ndarray) -> None:
    """Store a running total and the flags of the segments it holds, checksummed."""
    write_statistics(state, total, also={"finished": finished})


def read_state(group: zarr.Group, meta: dict) -> tuple[PassStatistics, np.ndarray]:
    """The running total and the finished flags of the current state, their digests checked.

    ``meta`` is the checkpoint's attribute, which names the current state.
    :func:`check_checkpoint_state` checks them against the data.
    """
    name = meta["state"]
    if not (_STATE_NAME.match(str(name)) and name in group.group_keys()):
        raise damaged(f"its current state {name!r} is missing", "checkpoint")
    state = group[name]
    attrs = state.attrs.asdict()
    _require_digests(meta, attrs)
    total = read_statistics(state, attrs)
    finished = read_checked(state, "finished", _FIX)
    check_digests({"finished": finished, **statistics_arrays(total)},
                  recorded_digests(attrs, _FIX), _FIX)
    recorded = attrs.get(CHECKSUMS_ATTRIBUTE) or {}
    if ("attributes" in recorded and recorded["attributes"]
            != attributes_digest(statistics_attributes(total))):
        raise damaged(f"the attribute 'statistics' of its state {name!r} differs from "
                      "the one written (its digest does not match): it was edited",
                      "checkpoint")
    return total, finished


def check_checkpoint(meta: dict, arrays: dict) -> int:
    """Refuse a checkpoint's layout, landmarks or kernel parameters unless a fit could write them.

    ``meta`` is the checkpoint's attribute (its identity already matched the
    fit resuming it) and ``arrays`` the landmarks, their indices (if any) and
    the reference row, as read. Returns the number of landmarks m.

    Examples
    --------
    >>> meta = {"identity": {"data": {"shape": [10, 2], "n_row_blocks": 2}, "kernel": "rbf"},
    ...         "segment_blocks": 1, "n_segments": 2, "state": None, "landmarks_written": True,
    ...         "kernel_params": {"gamma": 0.5}, "landmark_path": None}
    >>> check_checkpoint(meta, {"landmarks": np.zeros((3, 2)), "reference": np.ones(3)})
    3
    >>> check_checkpoint({**meta, "n_segments": 5}, {})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: the checkpoint is damaged: n_segments is 5 ...
    """
    data = meta["identity"]["data"]
    (n, p), n_blocks = data["shape"], data["n_row_blocks"]
    if not _check_layout(meta, n_blocks):
        return 0
    m = _check_landmark_arrays(arrays, n, p)
    _check_kernel_params(meta["identity"]["kernel"], meta.get("kernel_params"), p)
    check_landmark_path(meta.get("landmark_path"), "checkpoint")
    return m


def _check_layout(meta: dict, n_blocks: int) -> bool:
    """Check the segments and the state; True when landmarks were written."""
    segment_blocks, n_segments = meta.get("segment_blocks"), meta.get("n_segments")
    if not (is_count(segment_blocks) and is_count(n_segments)
            and n_segments == -(-n_blocks // segment_blocks)):
        raise damaged(f"n_segments is {n_segments!r} and segment_blocks "
                      f"{segment_blocks!r}, but the data have {n_blocks} row blocks",
                      "checkpoint")
    written = meta.get("landmarks_written")
    missing = [key for key in ("state", "landmarks_written") + (
        ("kernel_params", "landmark_path") if written else ()) if key not in meta]
    if missing or not isinstance(written, bool):
        raise damaged(f"its attribute lacks {', '.join(missing)}" if missing else
                      f"landmarks_written is {written!r}", "checkpoint")
    state = meta["state"]
    if state is not None and not (isinstance(state, str) and _STATE_NAME.match(state)
                                  and written):
        raise damaged(f"the current state is {state!r}"
                      + ("" if written else ", but no landmarks were written"), "checkpoint")
    return written


def _check_landmark_arrays(arrays: dict, n: int, p: int) -> int:
    """Check the landmarks, their reference row and row indices; return m."""
    landmarks = arrays["landmarks"]
    m = landmarks.shape[0] if getattr(landmarks, "ndim", 0) == 2 else 0
    if not 1 <= m <= n:
        raise damaged(f"the array 'landmarks' has shape {np.shape(landmarks)}; a fit "
                      f"on {n} rows of {p} features chooses 1 to {n} landmarks of {p}",
                      "checkpoint")
    check_array(landmarks, "landmarks", (m, p), kind="x", found_in="checkpoint")
    check_array(arrays.get("reference"), "reference", (m,), found_in="checkpoint")
    if "landmark_indices" in arrays:
        indices = check_array(arrays["landmark_indices"], "landmark_indices", (m,),
                              kind="i", found_in="checkpoint")
        if (indices < 0).any() or (indices >= n).any():
            raise damaged(f"the array 'landmark_indices' holds rows outside the {n} "
                          "rows of the data", "checkpoint")
    return m


def _check_kernel_params(kernel, params, p: int) -> None:
    """The stored kernel parameters must be those the kernel takes, with valid values."""
    try:
        if not isinstance(params, dict):
            raise ModelFormatError(f"kernel_params is {params!r}, not a mapping")
        if isinstance(kernel, str) and not kernel.startswith("callable "):
            resolved = resolve_kernel_params(kernel, p, kernel_params=params)
            if set(resolved) != set(params):
                raise ModelFormatError(f"kernel_params has {sorted(params)}; the {kernel!r} "
                                       f"kernel takes {sorted(resolved)}")
    except KPCAError as exc:
        raise damaged(f"the kernel parameters are invalid: {exc}", "checkpoint") from None


def check_checkpoint_state(stats: PassStatistics, finished, reference: np.ndarray,
                           row_chunks: tuple, segment_blocks: int) -> None:
    """Refuse a checkpoint's running total unless it counts exactly its finished segments' rows.

    Examples
    --------
    >>> stats = PassStatistics(4, np.zeros(2), np.eye(2), 4.0, 0, -1, np.ones(2))
    >>> check_checkpoint_state(stats, np.array([True, False]), np.ones(2), (4, 4), 1)
    >>> check_checkpoint_state(stats, np.array([True, True]), np.ones(2), (4, 4), 1)
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: the checkpoint is damaged: the running total counts \
4 rows, but its finished segments hold 8. Delete it and fit again: a fit with a new \
checkpoint path starts afresh.
    """
    m = reference.shape[0]
    check_statistics(stats, m, least_rows=0, found_in="checkpoint")
    if not np.array_equal(stats.reference, reference):
        raise damaged("the reference row of the running total is not the checkpoint's",
                      "checkpoint")
    n_segments = -(-len(row_chunks) // segment_blocks)
    if (not isinstance(finished, np.ndarray) or finished.dtype != np.bool_
            or finished.shape != (n_segments,)):
        raise damaged(f"the array 'finished' must be {n_segments} booleans; got "
                      f"{getattr(finished, 'dtype', type(finished).__name__)} of shape "
                      f"{getattr(finished, 'shape', '?')}", "checkpoint")
    rows = np.add.reduceat(np.asarray(row_chunks, dtype=np.int64),
                           np.arange(0, len(row_chunks), segment_blocks))
    counted = int(rows[finished].sum())
    if stats.n_samples != counted:
        raise damaged(f"the running total counts {stats.n_samples} rows, but its "
                      f"finished segments hold {counted}", "checkpoint")
