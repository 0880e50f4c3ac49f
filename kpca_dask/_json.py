"""Plain JSON values for Zarr attributes: what model files and checkpoints record."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

__all__ = ["jsonable", "array_digest"]


def jsonable(value, *, digest_arrays: bool = False) -> Any:
    """``value`` as plain JSON types (dict, list, str, number, bool, None), or raise TypeError.

    numpy scalars become Python numbers and tuples lists, so the result
    compares equal to what a Zarr attribute gives back after a round trip.
    With ``digest_arrays`` a numpy array is recorded by its SHA-256 (enough
    to tell whether it changed); without, an array is refused like any
    other object, since no representation of it would be both exact and small.

    Examples
    --------
    >>> jsonable({"gamma": np.float64(0.5), "shape": (3, 2)})
    {'gamma': 0.5, 'shape': [3, 2]}
    >>> jsonable(object())
    Traceback (most recent call last):
    ...
    TypeError: object
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, dict):
        return {str(k): jsonable(v, digest_arrays=digest_arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, digest_arrays=digest_arrays) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if digest_arrays and isinstance(value, np.ndarray):
        return {"array_sha256": array_digest(value)}
    raise TypeError(type(value).__name__)


def array_digest(array) -> str:
    """SHA-256 of an array's float64 values, independent of its memory layout.

    Examples
    --------
    >>> array_digest([1, 2]) == array_digest(np.array([1.0, 2.0]))
    True
    """
    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float64).tobytes()).hexdigest()
