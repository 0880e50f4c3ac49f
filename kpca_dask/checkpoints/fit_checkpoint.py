"""Checkpointed fits: the finished part of the pass, kept in a Zarr group on disk.

A fit over 10^8 rows runs for tens of minutes; if the client or the scheduler
dies, the work done so far must not be lost. ``KernelPCA.fit(X,
checkpoint=path)`` therefore runs the pass in *segments* (runs of consecutive
row blocks) and, as each segment finishes, adds its statistics to a running
total that is written to ``path``. A later fit with the same data and
parameters reads the total back and computes only the unfinished segments.

Layout of the Zarr v3 group (no pickle; JSON attributes and plain arrays)::

    zarr.json            attributes["kpca_dask_checkpoint"]: format version,
                         identity of the fit, segment layout, current state,
                         the resolved kernel parameters and the landmark
                         growth path of ``n_landmarks="auto"``, and the
                         digests of the arrays and of the rest of the attribute
    landmarks            (m, p) float64, the landmark points
    landmark_indices     (m,) int64, their rows in X (absent for explicit points)
    reference            (m,) float64, the shift r of the accumulated kernel rows
    state-NNNNNN/        the running total after some segments:
        statistics_*     n, s, G, t and r of the finished segments, stored as a
                         model file stores them (kpca_dask.checkpoints.statistics_files)
        finished         (n_segments,) bool

Every array carries a crc32c checksum, and a resumed fit checks what it
reads as a model file is checked (kpca_dask.checkpoints.checkpoint_files).

Storage is O(m^2) whatever the number of blocks: one running total, not one
m x m matrix per block (2 500 blocks of m = 1000 would be 20 GB). A new state
is written beside the current one and becomes current by one atomic rewrite
of the root ``zarr.json`` (Zarr's local store writes a temporary file and
renames it); only then is the old state deleted. A kill at any instant leaves
either the old or the new total, both consistent.

The identity records what the user asked for, not what the first try drew
from the data: ``gamma="median"`` stays the word "median", and the gamma it
resolved to is stored beside the landmarks, so that a resumed fit reuses
both even when they came from an unseeded sample.

A resumed fit adds the segments in another order than an uninterrupted one;
sums of float64 differ in the last bits only, far below the 1e-10 the tests ask of
the eigenvalues.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

import dask
import dask.array as da
import numpy as np
import zarr
import zarr.errors

from .._parallel import distributed_client
from ..blocks.statistics import PassStatistics, add_statistics
from ..engine.passes.nystrom import PassPlan, pass_plan, pass_statistics, pass_threads
from ..errors import CheckpointMismatchError, ModelFormatError, about
from ..io import PathOrURL, store_location
from ..io.checksums import CHECKSUMS_ATTRIBUTE
from ..landmarks.strategies import Landmarks
from .checkpoint_files import (
    check_checkpoint_state,
    read_landmark_arrays,
    read_state,
    write_landmark_arrays,
    write_state,
)
from .file_checks import damaged
from .fingerprints import recorded

__all__ = ["FitCheckpoint", "opened_checkpoint", "identity_differences"]

FORMAT = "kpca-dask-checkpoint"
FORMAT_VERSION = 4
#: Version 3 wrote no checksums; version 4 always does (kpca_dask.checkpoints.checkpoint_files).
READABLE_VERSIONS = (3, 4)
_ATTRIBUTE = "kpca_dask_checkpoint"

#: At least this many row blocks per segment (saving the total costs a write of G).
MIN_SEGMENT_BLOCKS = 8

#: At most this many segments: the total is rewritten once per segment, so
#: this bounds the checkpoint I/O at about MAX_SEGMENTS x 8 m^2 bytes.
MAX_SEGMENTS = 256



@dataclass
class FitCheckpoint:
    """A checkpoint of one fit's pass, opened (and checked) but not yet written.

    Use :meth:`open`, then :meth:`run_pass`. When resuming, ``landmarks``,
    ``reference``, ``kernel_params`` and ``landmark_path`` are those of the
    interrupted fit; for a new checkpoint they are None, and the fit sets
    ``landmark_path`` before :meth:`run_pass` writes it.
    """

    path: str
    identity: dict
    landmarks: Landmarks | None = None
    reference: np.ndarray | None = None
    kernel_params: dict | None = None
    landmark_path: list[tuple[int, float]] | None = None
    _group: zarr.Group | None = None
    _location: object = field(default=None, repr=False)  # a StoreLocation

    @property
    def gamma(self):
        """The gamma the interrupted fit resolved (None: the kernel has none, or not resuming)."""
        return None if self.kernel_params is None else self.kernel_params.get("gamma")

    @classmethod
    def open(cls, path: PathOrURL, identity: dict) -> "FitCheckpoint":
        """Read the checkpoint at ``path`` (a local path or fsspec URL), if any; writes nothing.

        Raises
        ------
        CheckpointMismatchError
            ``path`` holds a checkpoint of another fit, or something else.
        ModelFormatError
            The checkpoint was written by an unknown format version.
        """
        where = str(path)
        with about(where):
            return cls._open(path, where, identity)

    @classmethod
    def _open(cls, path: PathOrURL, where: str, identity: dict) -> "FitCheckpoint":
        location = store_location(path)
        if not location.exists():
            return cls(where, identity, _location=location)
        group, meta = opened_checkpoint(location, _ATTRIBUTE, FORMAT, READABLE_VERSIONS,
                                        identity)
        checkpoint = cls(where, identity, _group=group, _location=location)
        arrays = read_landmark_arrays(group, meta)  # checked: a resumed fit uses them
        if meta.get("landmarks_written"):
            checkpoint.landmarks = Landmarks(points=arrays["landmarks"], n_passes=0,
                                             indices=arrays.get("landmark_indices"))
            checkpoint.reference = arrays["reference"]
            checkpoint.kernel_params = meta["kernel_params"]
            path_taken = meta["landmark_path"]
            checkpoint.landmark_path = (None if path_taken is None else
                                        [(int(m), float(error)) for m, error in path_taken])
        return checkpoint

    # -- the pass ------------------------------------------------------------

    def run_pass(self, X: da.Array, landmarks: Landmarks, kernel, params: dict, dtype,
                 reference: np.ndarray) -> PassStatistics:
        """Compute the unfinished segments of the pass, saving the total after each.

        ``landmarks``, ``reference``, ``params`` and :attr:`landmark_path` are
        written when the checkpoint is new (when resuming they must be the
        stored ones). Returns the statistics of the whole pass, as
        ``kpca_dask.engine.passes.nystrom.pass_statistics`` would.
        """
        created = self._group is None
        if created or self.landmarks is None:
            self._create(X, landmarks, params, reference)
        meta = self._group.attrs[_ATTRIBUTE]
        segment_blocks, n_segments = meta["segment_blocks"], meta["n_segments"]
        total, finished = self._load_state(meta, n_segments)
        if total is not None:
            with about(self.path):
                check_checkpoint_state(total, finished, self.reference, X.chunks[0],
                                       segment_blocks)

        # Each segment is one chain of the pass; as many run at once as the pass
        # would run chains (kpca_dask.engine.passes.nystrom.pass_plan).
        plan = pass_plan(X, len(self.landmarks.points))
        one_chain = replace(plan, chains=1)
        segments = [pass_statistics(X, self.landmarks.points, kernel, params, dtype,
                                    self.reference, plan=one_chain,
                                    blocks=slice(i * segment_blocks, (i + 1) * segment_blocks))
                    for i in range(n_segments)]
        todo = [i for i in range(n_segments) if not finished[i]]
        for done, part in _completed_segments(X, segments, todo, plan):
            total = part if total is None else add_statistics(total, part)
            finished[done] = True
            self._save_state(total, finished)
        if created and not _usable(total):
            # The data or the kernel must change before a fit can succeed, and
            # then this checkpoint could never be resumed: leave nothing behind.
            self.remove()
        return total

    def remove(self) -> None:
        """Delete the checkpoint from its store."""
        if self._group is not None:
            self._location.remove()
        self._group = None

    # -- storage ---------------------------------------------------------------

    def _create(self, X, landmarks: Landmarks, params: dict, reference: np.ndarray) -> None:
        n_blocks = X.numblocks[0]
        segment_blocks = max(MIN_SEGMENT_BLOCKS, math.ceil(n_blocks / MAX_SEGMENTS))
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "identity": self.identity,
            "segment_blocks": segment_blocks,
            "n_segments": math.ceil(n_blocks / segment_blocks),
            "landmarks_written": False,
            "state": None,
        }
        if self._group is None:
            self._group = zarr.open_group(self._location.url, mode="w-", zarr_format=3,
                                          attributes={_ATTRIBUTE: meta},
                                          **self._location.zarr_kwargs())
        group = self._group
        arrays = {"landmarks": np.asarray(landmarks.points, np.float64),
                  "reference": np.asarray(reference, np.float64)}
        if landmarks.indices is not None:
            arrays["landmark_indices"] = np.asarray(landmarks.indices, np.int64)
        meta = {**meta, "landmarks_written": True, "kernel_params": recorded(params),
                "landmark_path": recorded(self.landmark_path)}
        # Written with the flag that makes the landmarks count, so a resumed fit
        # finds either all of what the first try chose from the data or none of it.
        group.attrs[_ATTRIBUTE] = {**meta, CHECKSUMS_ATTRIBUTE: write_landmark_arrays(
            group, arrays, meta)}
        self.landmarks = landmarks
        self.reference = np.asarray(reference, np.float64)
        self.kernel_params = group.attrs[_ATTRIBUTE]["kernel_params"]

    def _load_state(self, meta, n_segments):
        current = meta.get("state")
        for name in list(self._group.group_keys()):
            if name.startswith("state-") and name != current:
                del self._group[name]  # left by a kill between two steps of a save
        self._generation = int(current.split("-")[1]) if current else 0
        if current is None:
            return None, np.zeros(n_segments, dtype=bool)
        with about(self.path):
            return read_state(self._group, meta)

    def _save_state(self, total: PassStatistics, finished: np.ndarray) -> None:
        group = self._group
        previous = group.attrs[_ATTRIBUTE]["state"]
        self._generation += 1
        name = f"state-{self._generation:06d}"
        write_state(group.create_group(name, overwrite=True), total, finished.copy())
        group.attrs[_ATTRIBUTE] = {**group.attrs[_ATTRIBUTE], "state": name}  # the commit
        if previous is not None:
            del group[previous]


def _completed_segments(X, segments, todo, plan: PassPlan):
    """Yield ``(segment index, statistics)`` as segments finish, on any scheduler."""
    if not todo:
        return
    client = distributed_client(X)
    if client is not None:
        from distributed import as_completed

        futures = client.compute([segments[i] for i in todo])
        index = {future.key: i for future, i in zip(futures, todo)}
        try:
            for future in as_completed(futures):
                part = future.result()
                future.release()
                yield index[future.key], part
        finally:
            client.cancel(futures)
        return
    # Local schedulers have no futures: compute waves of as many segments as
    # the pass runs chains, one thread each, saving after each wave.
    per_wave = plan.chains
    with pass_threads(X, plan) as options:
        for start in range(0, len(todo), per_wave):
            wave = todo[start:start + per_wave]
            parts = dask.compute(*[segments[i] for i in wave], **options)
            yield from zip(wave, parts)


def _usable(total: PassStatistics | None) -> bool:
    return total is not None and total.n_nonfinite == 0 and bool(
        np.isfinite(total.gram.sum(axis=0)).all() and np.isfinite(total.diagonal_sum))


def opened_checkpoint(location, attribute: str, format_name: str, versions: tuple[int, ...],
                      identity: dict, kind: str = "") -> tuple[zarr.Group, dict]:
    """The checkpoint group at ``location`` (a StoreLocation that exists) and its
    ``attribute``, checked: a checkpoint of ``format_name`` (``kind`` says of what, for the
    message), of one of ``versions``, written by the fit ``identity`` describes.

    Raises
    ------
    CheckpointMismatchError
        Something else is there, or a checkpoint of another fit (its differences named).
    ModelFormatError
        A version this kpca-dask does not read, or no identity recorded.
    """
    not_a_checkpoint = CheckpointMismatchError(
        f"exists and is not a kpca-dask checkpoint{kind}. Pass a new path for the checkpoint, "
        "or delete this one if it is not needed.")
    try:
        group = zarr.open_group(location.url, mode="r+", **location.zarr_kwargs())
    except (FileNotFoundError, zarr.errors.BaseZarrError, ValueError):
        raise not_a_checkpoint from None
    meta = group.attrs.get(attribute)
    if not isinstance(meta, dict) or meta.get("format") != format_name:
        raise not_a_checkpoint
    version = meta.get("format_version")
    if isinstance(version, bool) or version not in versions:
        raise ModelFormatError(
            f"the checkpoint has format version {version!r}; this kpca-dask reads "
            f"version{'s' if len(versions) > 1 else ''} {', '.join(map(str, versions))}. "
            "Finish the fit with the version that wrote it, or delete the checkpoint and "
            "start again.")
    if not isinstance(meta.get("identity"), dict):
        raise damaged("it records no identity of its fit", "checkpoint")
    differences = identity_differences(meta["identity"], identity)
    if differences:
        raise CheckpointMismatchError(
            "the checkpoint belongs to a different fit and cannot be resumed: "
            + "; ".join(differences) + ". Fit with the same data and parameters, or "
            "use a new checkpoint path (or delete this one) to start afresh.")
    return group, meta


def identity_differences(stored: dict, current: dict, prefix: str = "") -> list[str]:
    """How the identity a checkpoint recorded differs from the current fit's, key by key.

    Examples
    --------
    >>> identity_differences({"kernel": "rbf", "dtype": "float64"}, {"kernel": "linear",
    ...                                                             "dtype": "float64"})
    ['kernel is "rbf" in the checkpoint but "linear" now']
    """
    found = []
    for key in sorted(set(stored) | set(current)):
        a, b = stored.get(key), current.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += identity_differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key} is {_short(a)} in the checkpoint but {_short(b)} now")
    return found


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
