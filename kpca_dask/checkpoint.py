"""Checkpointed fits: the finished part of the pass, kept in a Zarr group on disk.

A fit over 10^8 rows runs for tens of minutes; if the client or the scheduler
dies, the work done so far must not be lost. ``KernelPCA.fit(X,
checkpoint=path)`` therefore runs the pass in *segments* (runs of consecutive
row blocks) and, as each segment finishes, adds its statistics to a running
total that is written to ``path``. A later fit with the same data and
parameters reads the total back and computes only the unfinished segments.

Layout of the Zarr v3 group (no pickle; JSON attributes and plain arrays)::

    zarr.json            attributes["kpca_dask_checkpoint"]: format version,
                         identity of the fit, segment layout, current state
    landmarks            (m, p) float64, the landmark points
    landmark_indices     (m,) int64, their rows in X (absent for explicit points)
    reference            (m,) float64, the shift r of the accumulated kernel rows
    state-NNNNNN/        the running total after some segments:
        gram             (m, m) float64, G of the finished segments
        column_sums      (m,) float64
        finished         (n_segments,) bool
        zarr.json        n_samples, diagonal_sum, non-finite count

Storage is O(m^2) whatever the number of blocks: one running total, not one
m x m matrix per block (2 500 blocks of m = 1000 would be 20 GB). A new state
is written beside the current one and becomes current by one atomic rewrite
of the root ``zarr.json`` (Zarr's local store writes a temporary file and
renames it); only then is the old state deleted. A kill at any instant leaves
either the old or the new total, both consistent.

A resumed fit adds the segments in another order than an uninterrupted one;
sums of float64 differ in the last bits only, far below the 1e-10 the tests ask of
the eigenvalues.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
import zarr.errors

from ._parallel import capped_blas
from .errors import CheckpointMismatchError, ModelFormatError
from .landmarks import Landmarks
from .nystrom import (
    SPLIT_EVERY,
    PassStatistics,
    _combine_statistics,
    block_statistics,
    reduce_statistics,
)

__all__ = ["FitCheckpoint", "fit_identity"]

FORMAT = "kpca-dask-checkpoint"
FORMAT_VERSION = 1
_ATTRIBUTE = "kpca_dask_checkpoint"

#: At most this many segments: the total is rewritten once per segment, so
#: this bounds the checkpoint I/O at about MAX_SEGMENTS x 8 m^2 bytes.
MAX_SEGMENTS = 256


def fit_identity(X: da.Array, kernel, params: dict, *, dtype: str, landmarks,
                 n_landmarks: int | str, random_state, tol: float | None = None,
                 max_landmarks: int | None = None) -> dict:
    """What a checkpoint must match to be resumed: data, kernel, precision, landmarks.

    The data are identified from metadata only (nothing is read): shape,
    dtype, row chunks and the dask name of ``X``, a token of where it comes
    from (for ``da.from_zarr`` the store and array; for numpy input a hash of
    the values). ``n_components`` and ``rcond`` are not part of it: they act
    after the pass, so a finished checkpoint can be refitted with others.

    Examples
    --------
    >>> X = da.zeros((10, 2), chunks=5)
    >>> fit_identity(X, "rbf", {"gamma": 0.5}, dtype="float64", landmarks="uniform",
    ...              n_landmarks=3, random_state=0)["data"]["shape"]
    [10, 2]
    """
    if isinstance(landmarks, str) or callable(landmarks):
        strategy = landmarks if isinstance(landmarks, str) else _kernel_identity(landmarks)
        landmark_spec = {"strategy": strategy, "random_state": _seed_identity(random_state),
                         # "auto" grows m until the trace error meets tol, capped
                         "n_landmarks": (n_landmarks if n_landmarks == "auto"
                                         else int(n_landmarks))}
        if n_landmarks == "auto":
            landmark_spec.update(tol=tol, max_landmarks=max_landmarks)
    else:
        landmark_spec = {"strategy": "explicit", "sha256": _sha256(landmarks)}
    return _json_safe({
        "data": {
            "shape": list(X.shape),
            "dtype": str(X.dtype),
            "n_row_blocks": X.numblocks[0],
            "row_chunks_sha256": hashlib.sha256(
                np.asarray(X.chunks[0], dtype=np.int64).tobytes()).hexdigest(),
            "name": X.name,
        },
        "kernel": _kernel_identity(kernel),
        "kernel_params": params,
        "dtype": str(np.dtype(dtype)),
        "landmarks": landmark_spec,
    })


@dataclass
class FitCheckpoint:
    """A checkpoint of one fit's pass, opened (and checked) but not yet written.

    Use :meth:`open`, then :meth:`run_pass`. ``landmarks`` and ``reference``
    are those of the interrupted fit when resuming, None for a new checkpoint.
    """

    path: str
    identity: dict
    landmarks: Landmarks | None = None
    reference: np.ndarray | None = None
    _group: zarr.Group | None = None

    @classmethod
    def open(cls, path: str | os.PathLike, identity: dict) -> "FitCheckpoint":
        """Read the checkpoint at ``path`` if there is one; writes nothing.

        Raises
        ------
        CheckpointMismatchError
            ``path`` holds a checkpoint of another fit, or something else.
        ModelFormatError
            The checkpoint was written by an unknown format version.
        """
        path = os.fspath(path)
        not_a_checkpoint = CheckpointMismatchError(
            f"{path!r} exists and is not a kpca-dask checkpoint. Pass a new path for the "
            "checkpoint, or delete this one if it is not needed.")
        try:
            group = zarr.open_group(path, mode="r+")
        except FileNotFoundError:
            if Path(path).exists():  # a directory or file of something else
                raise not_a_checkpoint from None
            return cls(path, identity)
        except (zarr.errors.BaseZarrError, ValueError):
            raise not_a_checkpoint from None
        meta = group.attrs.get(_ATTRIBUTE)
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise not_a_checkpoint
        if meta.get("format_version") != FORMAT_VERSION:
            raise ModelFormatError(
                f"The checkpoint {path!r} has format version {meta.get('format_version')!r}; "
                f"this kpca-dask reads version {FORMAT_VERSION}. Finish the fit with the "
                "version that wrote it, or delete the checkpoint and start again.")
        differences = _differences(meta["identity"], identity)
        if differences:
            raise CheckpointMismatchError(
                f"The checkpoint {path!r} belongs to a different fit and cannot be resumed: "
                + "; ".join(differences) + ". Fit with the same data and parameters, or "
                "use a new checkpoint path (or delete this one) to start afresh.")
        checkpoint = cls(path, identity, _group=group)
        if meta.get("landmarks_written"):
            indices = group["landmark_indices"][:] if "landmark_indices" in group else None
            checkpoint.landmarks = Landmarks(points=group["landmarks"][:], indices=indices,
                                             n_passes=0)
            checkpoint.reference = group["reference"][:]
        return checkpoint

    # -- the pass ------------------------------------------------------------

    def run_pass(self, X: da.Array, landmarks: Landmarks, kernel, params: dict, dtype,
                 reference: np.ndarray) -> PassStatistics:
        """Compute the unfinished segments of the pass, saving the total after each.

        ``landmarks`` and ``reference`` are written when the checkpoint is new
        (when resuming they must be the stored ones). Returns the statistics
        of the whole pass, as ``nystrom.pass_statistics`` would.
        """
        created = self._group is None
        if created or self.landmarks is None:
            self._create(X, landmarks, reference)
        meta = self._group.attrs[_ATTRIBUTE]
        segment_blocks, n_segments = meta["segment_blocks"], meta["n_segments"]
        total, finished = self._load_state(meta, n_segments)

        partials = block_statistics(X, self.landmarks.points, kernel, params, dtype,
                                    self.reference)
        segments = [reduce_statistics(partials[i * segment_blocks:(i + 1) * segment_blocks],
                                      SPLIT_EVERY)
                    for i in range(n_segments)]
        todo = [i for i in range(n_segments) if not finished[i]]
        for done, part in _completed_segments(X, segments, todo, segment_blocks):
            total = part if total is None else _combine_statistics(total, part)
            finished[done] = True
            self._save_state(total, finished)
        if created and not _usable(total):
            # The data or the kernel must change before a fit can succeed, and
            # then this checkpoint could never be resumed: leave nothing behind.
            self.remove()
        return total

    def remove(self) -> None:
        """Delete the checkpoint from disk."""
        if self._group is not None and Path(self.path).exists():
            shutil.rmtree(self.path)
        elif self._group is not None:
            zarr.core.sync.sync(self._group.store.delete_dir(""))
        self._group = None

    # -- storage ---------------------------------------------------------------

    def _create(self, X, landmarks: Landmarks, reference: np.ndarray) -> None:
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
            self._group = zarr.open_group(self.path, mode="w-", attributes={_ATTRIBUTE: meta})
        group = self._group
        group.create_array("landmarks", data=np.asarray(landmarks.points, np.float64),
                           overwrite=True)
        if landmarks.indices is not None:
            group.create_array("landmark_indices",
                               data=np.asarray(landmarks.indices, np.int64), overwrite=True)
        group.create_array("reference", data=np.asarray(reference, np.float64),
                           overwrite=True)
        group.attrs[_ATTRIBUTE] = {**meta, "landmarks_written": True}
        self.landmarks = landmarks
        self.reference = np.asarray(reference, np.float64)

    def _load_state(self, meta, n_segments):
        current = meta.get("state")
        for name in list(self._group.group_keys()):
            if name.startswith("state-") and name != current:
                del self._group[name]  # left by a kill between two steps of a save
        self._generation = int(current.split("-")[1]) if current else 0
        if current is None:
            return None, np.zeros(n_segments, dtype=bool)
        state = self._group[current]
        attrs = state.attrs
        total = PassStatistics(
            n_samples=int(attrs["n_samples"]),
            column_sums=state["column_sums"][:],
            gram=state["gram"][:],
            diagonal_sum=float(attrs["diagonal_sum"]),
            n_nonfinite=int(attrs["n_nonfinite"]),
            first_nonfinite_row=int(attrs["first_nonfinite_row"]),
            reference=self.reference,
        )
        return total, state["finished"][:].astype(bool)

    def _save_state(self, total: PassStatistics, finished: np.ndarray) -> None:
        group = self._group
        previous = group.attrs[_ATTRIBUTE]["state"]
        self._generation += 1
        name = f"state-{self._generation:06d}"
        state = group.create_group(name, overwrite=True, attributes={
            "n_samples": int(total.n_samples),
            "diagonal_sum": float(total.diagonal_sum),
            "n_nonfinite": int(total.n_nonfinite),
            "first_nonfinite_row": int(total.first_nonfinite_row),
        })
        # Uncompressed: m x m floats of rounding noise do not compress.
        state.create_array("gram", data=total.gram, compressors=None)
        state.create_array("column_sums", data=total.column_sums, compressors=None)
        state.create_array("finished", data=finished.copy())
        group.attrs[_ATTRIBUTE] = {**group.attrs[_ATTRIBUTE], "state": name}  # the commit
        if previous is not None:
            del group[previous]


def _completed_segments(X, segments, todo, segment_blocks):
    """Yield ``(segment index, statistics)`` as segments finish, on any scheduler."""
    if not todo:
        return
    client = _distributed_client(X)
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
    threads = dask.config.get("num_workers", None) or os.cpu_count() or 1
    per_wave = max(1, math.ceil(2 * threads / segment_blocks))
    with capped_blas(X):
        for start in range(0, len(todo), per_wave):
            wave = todo[start:start + per_wave]
            parts = dask.compute(*[segments[i] for i in wave])
            yield from zip(wave, parts)


def _distributed_client(collection):
    scheduler = dask.base.get_scheduler(collections=[collection])
    client = getattr(scheduler, "__self__", None)
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    return client if isinstance(client, Client) else None


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


def _json_safe(value):
    # Round-trip through JSON so that the identity compares equal to what the
    # checkpoint stores (tuples become lists, numpy scalars plain numbers).
    return json.loads(json.dumps(value, sort_keys=True, default=_json_default))


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"array_sha256": _sha256(value)}
    return repr(value)


def _kernel_identity(kernel) -> str:
    if callable(kernel):
        return f"callable {getattr(kernel, '__module__', '?')}." \
               f"{getattr(kernel, '__qualname__', type(kernel).__name__)}"
    return kernel


def _seed_identity(random_state):
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return None if random_state is None else int(random_state)
    return type(random_state).__name__  # a Generator's state is not comparable


def _sha256(array) -> str:
    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float64).tobytes()).hexdigest()
