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
                         model file stores them (kpca_dask.model.statistics_files)
        finished         (n_segments,) bool

Every array carries a crc32c checksum, and a resumed fit checks what it
reads as a model file is checked (kpca_dask.model.checkpoint_files).

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

import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
import zarr.errors
import zarr.storage

from .._json import array_digest, jsonable
from .._parallel import capped_blas, distributed_client, local_threads
from ..engine.nystrom import (
    SPLIT_EVERY,
    PassStatistics,
    block_statistics,
    combine_statistics,
    reduce_statistics,
)
from ..errors import CheckpointMismatchError, InvalidParameterError, ModelFormatError
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

__all__ = ["FitCheckpoint", "fit_identity"]

FORMAT = "kpca-dask-checkpoint"
FORMAT_VERSION = 4
#: Version 3 wrote no checksums; version 4 always does (kpca_dask.model.checkpoint_files).
READABLE_VERSIONS = (3, 4)
_ATTRIBUTE = "kpca_dask_checkpoint"

#: At most this many segments: the total is rewritten once per segment, so
#: this bounds the checkpoint I/O at about MAX_SEGMENTS x 8 m^2 bytes.
MAX_SEGMENTS = 256

#: Names of the dask layers that only read a Zarr array: ``kpca_dask.io.open_array``
#: and ``dask.array.from_zarr`` (whose array sits in a layer of its own).
_ZARR_READ_LAYERS = ("zarr-", "from-zarr-", "original-from-zarr-")


def fit_identity(X: da.Array, kernel, params: dict, *, dtype: str, landmarks,
                 n_landmarks: int | str, random_state, tol: float | None = None,
                 max_landmarks: int | None = None, gamma=None) -> dict:
    """What a checkpoint must match to be resumed: data, kernel, precision, landmarks.

    The data are identified from metadata only (nothing is read): shape,
    dtype and row chunks of ``X``, and where it comes from. An ``X`` that
    reads a Zarr array and nothing else is identified by the store's
    absolute path or URL, the array in it, its attributes and (for a local
    store) the modification time of its metadata file, so the same store
    reached by another spelling resumes and another store never does. Any
    other ``X`` adds its dask name, a token of how it is computed (for numpy
    input a hash of the values). ``n_components`` and ``rcond`` are not part
    of it: they act after the pass, so a finished checkpoint can be refitted
    with others.

    ``params`` are the kernel parameters as resolved before looking at the
    data; a ``gamma`` rule ("median", "scale") replaces the value of gamma,
    since the value it gives depends on the sample drawn.

    Raises
    ------
    InvalidParameterError
        A kernel parameter cannot be recorded (an object with no exact JSON form).

    Examples
    --------
    >>> X = da.zeros((10, 2), chunks=5)
    >>> fit_identity(X, "rbf", {"gamma": 0.5}, dtype="float64", landmarks="uniform",
    ...              n_landmarks=3, random_state=0)["data"]["shape"]
    [10, 2]
    >>> fit_identity(X, "rbf", {"gamma": 0.5}, dtype="float64", landmarks="uniform",
    ...              n_landmarks=3, random_state=0, gamma="median")["kernel_params"]
    {'gamma': 'median'}
    """
    if isinstance(gamma, str) and "gamma" in params:
        params = {**params, "gamma": gamma}
    if isinstance(landmarks, str) or callable(landmarks):
        strategy = landmarks if isinstance(landmarks, str) else _callable_identity(landmarks)
        landmark_spec = {"strategy": strategy, "random_state": _seed_identity(random_state),
                         # "auto" grows m until the trace error meets tol, capped
                         "n_landmarks": (n_landmarks if n_landmarks == "auto"
                                         else int(n_landmarks))}
        if n_landmarks == "auto":
            landmark_spec.update(tol=tol, max_landmarks=max_landmarks)
    else:
        landmark_spec = {"strategy": "explicit", "sha256": array_digest(landmarks)}
    return _recorded({
        "data": _data_identity(X),
        "kernel": _callable_identity(kernel) if callable(kernel) else kernel,
        "kernel_params": params,
        "dtype": str(np.dtype(dtype)),
        "landmarks": landmark_spec,
    })


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
    _where: object = field(default=None, repr=False)

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
        shown = str(path)
        where = store_location(path)
        if not where.exists():
            return cls(shown, identity, _where=where)
        not_a_checkpoint = CheckpointMismatchError(
            f"{shown!r} exists and is not a kpca-dask checkpoint. Pass a new path for the "
            "checkpoint, or delete this one if it is not needed.")
        try:
            group = zarr.open_group(where.url, mode="r+", **where.zarr_kwargs())
        except (FileNotFoundError, zarr.errors.BaseZarrError, ValueError):
            raise not_a_checkpoint from None
        meta = group.attrs.get(_ATTRIBUTE)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise not_a_checkpoint
        version = meta.get("format_version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise ModelFormatError(
                f"The checkpoint {shown!r} has format version {version!r}; this kpca-dask "
                f"reads versions {', '.join(map(str, READABLE_VERSIONS))}. Finish the fit with "
                "the version that wrote it, or delete the checkpoint and start again.")
        if not isinstance(meta.get("identity"), dict):
            raise ModelFormatError(f"The checkpoint at {shown!r} is damaged: it records no "
                                   "identity of its fit. Delete it and fit again.")
        differences = _differences(meta["identity"], identity)
        if differences:
            raise CheckpointMismatchError(
                f"The checkpoint {shown!r} belongs to a different fit and cannot be resumed: "
                + "; ".join(differences) + ". Fit with the same data and parameters, or "
                "use a new checkpoint path (or delete this one) to start afresh.")
        checkpoint = cls(shown, identity, _group=group, _where=where)
        arrays = read_landmark_arrays(group, meta, repr(shown))  # checked: a resumed fit uses them
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
        ``nystrom.pass_statistics`` would.
        """
        created = self._group is None
        if created or self.landmarks is None:
            self._create(X, landmarks, params, reference)
        meta = self._group.attrs[_ATTRIBUTE]
        segment_blocks, n_segments = meta["segment_blocks"], meta["n_segments"]
        total, finished = self._load_state(meta, n_segments)
        if total is not None:
            check_checkpoint_state(total, finished, self.reference, X.chunks[0],
                                   segment_blocks, repr(self.path))

        partials = block_statistics(X, self.landmarks.points, kernel, params, dtype,
                                    self.reference)
        segments = [reduce_statistics(partials[i * segment_blocks:(i + 1) * segment_blocks],
                                      SPLIT_EVERY)
                    for i in range(n_segments)]
        todo = [i for i in range(n_segments) if not finished[i]]
        for done, part in _completed_segments(X, segments, todo, segment_blocks):
            total = part if total is None else combine_statistics(total, part)
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
            self._where.remove()
        self._group = None

    # -- storage ---------------------------------------------------------------

    def _create(self, X, landmarks: Landmarks, params: dict, reference: np.ndarray) -> None:
        n_blocks = X.numblocks[0]
        segment_blocks = max(SPLIT_EVERY, math.ceil(n_blocks / MAX_SEGMENTS))
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
            self._group = zarr.open_group(self._where.url, mode="w-", zarr_format=3,
                                          attributes={_ATTRIBUTE: meta},
                                          **self._where.zarr_kwargs())
        group = self._group
        arrays = {"landmarks": np.asarray(landmarks.points, np.float64),
                  "reference": np.asarray(reference, np.float64)}
        if landmarks.indices is not None:
            arrays["landmark_indices"] = np.asarray(landmarks.indices, np.int64)
        meta = {**meta, "landmarks_written": True, "kernel_params": _recorded(params),
                "landmark_path": _recorded(self.landmark_path)}
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
        return read_state(self._group, meta, repr(self.path))

    def _save_state(self, total: PassStatistics, finished: np.ndarray) -> None:
        group = self._group
        previous = group.attrs[_ATTRIBUTE]["state"]
        self._generation += 1
        name = f"state-{self._generation:06d}"
        write_state(group.create_group(name, overwrite=True), total, finished.copy())
        group.attrs[_ATTRIBUTE] = {**group.attrs[_ATTRIBUTE], "state": name}  # the commit
        if previous is not None:
            del group[previous]


def _completed_segments(X, segments, todo, segment_blocks):
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
    # Local schedulers have no futures: compute waves of segments that keep
    # every thread busy (about two blocks per thread), saving after each wave.
    per_wave = max(1, math.ceil(2 * local_threads() / segment_blocks))
    with capped_blas(X):
        for start in range(0, len(todo), per_wave):
            wave = todo[start:start + per_wave]
            parts = dask.compute(*[segments[i] for i in wave])
            yield from zip(wave, parts)


def _usable(total: PassStatistics | None) -> bool:
    return total is not None and total.n_nonfinite == 0 and bool(
        np.isfinite(total.gram).all() and np.isfinite(total.diagonal_sum))


def _differences(stored: dict, current: dict, prefix: str = "") -> list[str]:
    found = []
    for key in sorted(set(stored) | set(current)):
        a, b = stored.get(key), current.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key} is {_short(a)} in the checkpoint but {_short(b)} now")
    return found


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _recorded(value):
    """``value`` as the JSON a checkpoint stores, so that it compares equal to what is read back."""
    try:
        return jsonable(value, digest_arrays=True)
    except TypeError as exc:
        raise InvalidParameterError(
            f"A parameter of this fit (a {exc}) cannot be recorded in a checkpoint, which "
            "keeps numbers, strings and arrays only. Pass such values as numbers or arrays, "
            "or fit without checkpoint=.") from None


def _callable_identity(function) -> dict | str:
    """A callable kernel or landmark strategy by name; a partial with its arguments."""
    if isinstance(function, functools.partial):
        return {"partial": _callable_identity(function.func),
                "args": _recorded(list(function.args)),
                "keywords": _recorded(dict(function.keywords))}
    name = getattr(function, "__qualname__", type(function).__name__)
    return f"callable {getattr(function, '__module__', '?')}.{name}"


def _seed_identity(random_state):
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return None if random_state is None else int(random_state)
    return type(random_state).__name__  # a Generator's state is not comparable


def _data_identity(X: da.Array) -> dict:
    identity = {
        "shape": list(X.shape),
        "dtype": str(X.dtype),
        "n_row_blocks": X.numblocks[0],
        "row_chunks_sha256": hashlib.sha256(
            np.asarray(X.chunks[0], dtype=np.int64).tobytes()).hexdigest(),
    }
    sources = _zarr_sources(X)
    if sources:
        identity["zarr"] = sorted(sources, key=lambda source: json.dumps(source, sort_keys=True))
    reads_only_zarr = len(sources) == 1 and "url" in sources[0] and all(
        name.startswith(_ZARR_READ_LAYERS) for name in X.dask.layers)
    if not reads_only_zarr:
        # Computed from something: its dask name tokenizes the computation
        # (and any path as typed, so the stores above are what locate it).
        identity["name"] = X.name
    return identity


def _zarr_sources(X: da.Array) -> list[dict]:
    """Identities of the Zarr arrays the tasks of ``X`` read (from the graph; nothing is read)."""
    found = {}
    stack = list(dict(X.__dask_graph__()).values())
    while stack:
        item = stack.pop()
        if isinstance(item, zarr.Array):
            found[id(item)] = item
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        else:
            stack.extend(_task_parts(item))
    # One array opened twice is one source.
    unique = {json.dumps(identity, sort_keys=True): identity
              for identity in map(_zarr_identity, found.values())}
    return list(unique.values())


def _task_parts(node) -> list:
    """What a dask task holds: its arguments (a task) or its value (a data node)."""
    if not type(node).__module__.startswith("dask."):
        return []
    parts = list(getattr(node, "args", ()) or ())
    parts += list((getattr(node, "kwargs", None) or {}).values())
    if hasattr(node, "value"):
        parts.append(node.value)
    return parts


def _zarr_identity(z: zarr.Array) -> dict:
    """Where a Zarr array is stored, its layout and attributes, and when its metadata changed."""
    identity = {"array": z.path, "shape": list(z.shape), "chunks": list(z.chunks),
                "dtype": str(z.dtype),
                "attributes_sha256": hashlib.sha256(json.dumps(
                    z.attrs.asdict(), sort_keys=True).encode()).hexdigest()}
    local, url = _store_location(z.store)
    if url is not None:
        identity["url"] = url
    if local is not None:
        # A store rewritten in place keeps its path but gets new metadata files.
        for name in ("zarr.json", ".zarray"):
            metadata = local / z.path / name
            if metadata.exists():
                identity["metadata_mtime_ns"] = metadata.stat().st_mtime_ns
                break
    return identity


def _store_location(store) -> tuple[Path | None, str | None]:
    """(local directory, URL) of a Zarr store; the URL is None for an in-memory one."""
    if isinstance(store, zarr.storage.LocalStore):
        local = Path(store.root)
    elif isinstance(store, zarr.storage.FsspecStore):
        fs = getattr(store.fs, "sync_fs", store.fs)  # zarr wraps local files as async
        protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
        if "file" not in protocols and "local" not in protocols:
            return None, fs.unstrip_protocol(store.path)
        local = Path(store.path)
    else:
        return None, None
    # resolve(): one directory reached through a symlink or ".." is one store.
    local = local.expanduser().resolve()
    return local, local.as_uri()
