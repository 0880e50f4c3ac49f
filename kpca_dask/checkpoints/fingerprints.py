"""Fingerprints of a fit: what identifies its data and its parameters, from metadata only.

A checkpoint is resumed only by the fit it was made for, and a growing model
refuses rows it has already counted (:mod:`kpca_dask.model.provenance`). Both
need to recognise "the same data" without reading them: this module reads
shapes, chunks, dask names and the Zarr stores a graph reads from, and turns
parameters (callables and seeds included) into JSON that compares equal when
they are the same (docs/design.md §7).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import dask.array as da
import numpy as np
import zarr
import zarr.storage

from .._json import array_digest, jsonable
from ..errors import InvalidParameterError
from ..io.tables import TableLocation

__all__ = ["fit_identity", "data_identity", "recorded", "callable_identity", "seed_identity",
           "zarr_sources", "table_locations"]

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
        strategy = landmarks if isinstance(landmarks, str) else callable_identity(landmarks)
        landmark_spec = {"strategy": strategy, "random_state": seed_identity(random_state),
                         # "auto" grows m until the trace error meets tol, capped
                         "n_landmarks": (n_landmarks if n_landmarks == "auto"
                                         else int(n_landmarks))}
        if n_landmarks == "auto":
            landmark_spec.update(tol=tol, max_landmarks=max_landmarks)
    else:
        landmark_spec = {"strategy": "explicit", "sha256": array_digest(landmarks)}
    return recorded({
        "data": data_identity(X),
        "kernel": callable_identity(kernel) if callable(kernel) else kernel,
        "kernel_params": params,
        "dtype": str(np.dtype(dtype)),
        "landmarks": landmark_spec,
    })


def recorded(value):
    """``value`` as the JSON a checkpoint stores, so that it compares equal to what is read back."""
    try:
        return jsonable(value, digest_arrays=True)
    except TypeError as exc:
        raise InvalidParameterError(
            f"A parameter of this fit (a {exc}) cannot be recorded in a checkpoint, which "
            "keeps numbers, strings and arrays only. Pass such values as numbers or arrays, "
            "or fit without checkpoint=.") from None


def callable_identity(function) -> dict | str:
    """A callable kernel or landmark strategy by name; a partial with its arguments."""
    if isinstance(function, functools.partial):
        return {"partial": callable_identity(function.func),
                "args": recorded(list(function.args)),
                "keywords": recorded(dict(function.keywords))}
    name = getattr(function, "__qualname__", type(function).__name__)
    return f"callable {getattr(function, '__module__', '?')}.{name}"


def seed_identity(random_state):
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return None if random_state is None else int(random_state)
    return type(random_state).__name__  # a Generator's state is not comparable


def data_identity(X: da.Array) -> dict:
    identity = {
        "shape": list(X.shape),
        "dtype": str(X.dtype),
        "n_row_blocks": X.numblocks[0],
        "row_chunks_sha256": hashlib.sha256(
            np.asarray(X.chunks[0], dtype=np.int64).tobytes()).hexdigest(),
    }
    sources = zarr_sources(X)
    if sources:
        identity["zarr"] = sorted(sources, key=lambda source: json.dumps(source, sort_keys=True))
    reads_only_zarr = len(sources) == 1 and "url" in sources[0] and all(
        name.startswith(_ZARR_READ_LAYERS) for name in X.dask.layers)
    if not reads_only_zarr:
        # Computed from something: its dask name tokenizes the computation
        # (and any path as typed, so the stores above are what locate it).
        identity["name"] = X.name
    return identity


def zarr_sources(X: da.Array) -> list[dict]:
    """Identities of the Zarr arrays the tasks of ``X`` read (from the graph; nothing is read)."""
    found = {id(item): item for item in _graph_items(X, zarr.Array)}
    # One array opened twice is one source.
    unique = {json.dumps(identity, sort_keys=True): identity
              for identity in map(_zarr_identity, found.values())}
    return list(unique.values())


def table_locations(X: da.Array) -> list[str]:
    """The URLs of the Parquet or CSV tables the tasks of ``X`` read, sorted (from the graph).

    Examples
    --------
    >>> table_locations(da.zeros(3))
    []
    """
    return sorted({str(item) for item in _graph_items(X, TableLocation)})


def _graph_items(X: da.Array, kind: type) -> list:
    """Every object of type ``kind`` held by the tasks of ``X``."""
    found, stack = [], list(dict(X.__dask_graph__()).values())
    while stack:
        item = stack.pop()
        if isinstance(item, kind):
            found.append(item)
        elif isinstance(item, str):
            continue
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        else:
            stack.extend(_task_parts(item))
    return found


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
