"""The dask graph of the Nyström pass and of the projection (docs/design.md §2).

:func:`pass_statistics` maps every row block of X to its statistics
(:func:`kpca_dask.blocks.statistics.statistics_of_block`) and tree-reduces
them, so only m-sized and m x m arrays leave the workers; :func:`project`
maps every row block to its embedding. The small arrays every task needs
(landmarks, P, c) are shared once per graph, not copied into each task.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed

from .._parallel import distributed_client
from ..blocks.projection import project_block
from ..blocks.statistics import (
    PassStatistics,
    combine_statistics,
    kernel_origin,
    statistics_of_block,
)
from ..errors import InvalidParameterError, NonFiniteInputError
from .solve import OVERFLOW_MESSAGE, reference_row

__all__ = ["pass_statistics", "block_statistics", "reduce_statistics", "project",
           "shared_values", "row_offsets", "raise_if_nonfinite", "SPLIT_EVERY"]

#: How many partial results one node of the tree reduction adds up.
SPLIT_EVERY = 8


def row_offsets(X: da.Array) -> np.ndarray:
    """Global index of the first row of each row block (from metadata only)."""
    return np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)


def block_statistics(
    X: da.Array,
    landmarks: np.ndarray,
    kernel,
    params: dict,
    dtype=np.float64,
    reference: np.ndarray | None = None,
) -> list[Delayed]:
    """One lazy :class:`PassStatistics` per row block of ``X``, in block order.

    ``X`` must have a single chunk along the feature axis.
    """
    if X.numblocks[1] != 1:
        raise ValueError("pass_statistics needs one chunk along the feature axis")
    if reference is None:
        reference = reference_row(landmarks, kernel, params)
    origin = kernel_origin(landmarks, kernel, X)
    Z = np.asarray(landmarks, dtype=np.float64)
    if origin is not None:
        Z = Z - origin
    shared = shared_values(X, Z.astype(dtype), np.asarray(reference, np.float64), origin)
    statistics_of = dask.delayed(statistics_of_block, pure=True)
    return [
        statistics_of(block, int(offset), shared[0], kernel, params, dtype, shared[1],
                      shared[2])
        for block, offset in zip(X.to_delayed().ravel(), row_offsets(X))
    ]


def shared_values(X: da.Array, *values):
    """One copy of each small array for all the tasks over ``X``, not one per task.

    On a distributed client the arrays are scattered to every worker, so the
    graph stays small (m landmarks of p features are 12 MB at m = 2000,
    p = 784, which distributed would otherwise warn about); the result is then
    tied to that client, as ``persist`` results are. On a local scheduler they
    are one key of the graph. Returns something indexable like ``values``.
    """
    client = distributed_client(X)
    if client is None:
        return dask.delayed(values, pure=True)
    # hash=False: a key of its own per call, so that futures released by an
    # earlier fit can never free the data of this one (same content, same hash).
    return [client.scatter(v, broadcast=True, hash=False) if isinstance(v, np.ndarray) else v
            for v in values]


def reduce_statistics(partials: list, split_every: int = SPLIT_EVERY):
    """Tree-reduce lazy partial statistics to one (``split_every`` per node)."""
    combine = dask.delayed(combine_statistics, pure=True)
    while len(partials) > 1:
        partials = [combine(*partials[i : i + split_every])
                    for i in range(0, len(partials), split_every)]
    return partials[0]


def pass_statistics(
    X: da.Array,
    landmarks: np.ndarray,
    kernel,
    params: dict,
    dtype=np.float64,
    split_every: int = SPLIT_EVERY,
    reference: np.ndarray | None = None,
) -> Delayed:
    """Lazy one-pass statistics of ``X`` against the landmarks.

    ``X`` must have a single chunk along the feature axis. The result is a
    ``Delayed`` that computes to a :class:`PassStatistics`; computing it reads
    every chunk of ``X`` exactly once. ``reference`` is the row r subtracted
    from every kernel row (default: :func:`reference_row`).

    Examples
    --------
    >>> X = da.ones((10, 2), chunks=(4, 2))
    >>> stats = pass_statistics(X, np.ones((3, 2)), "linear", {}).compute()
    >>> stats.n_samples, float(stats.reference[0]), float(stats.gram[0, 0])
    (10, 2.0, 0.0)
    """
    return reduce_statistics(
        block_statistics(X, landmarks, kernel, params, dtype, reference), split_every)


def raise_if_nonfinite(stats: PassStatistics, what: str = "X") -> None:
    """Turn the pass's NaN/inf count, or kernel values that overflowed, into a clear error."""
    if stats.n_nonfinite:
        raise NonFiniteInputError(
            f"{what} contains {stats.n_nonfinite} NaN or infinite value(s), the first in "
            f"row {stats.first_nonfinite_row}. Remove or impute them first, e.g. "
            f"X[~da.isfinite(X).all(axis=1)] to find the rows."
        )
    if not (np.isfinite(stats.gram).all() and np.isfinite(stats.column_sums).all()
            and np.isfinite(stats.diagonal_sum)):
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where=f"{what} and the landmarks"))


def project(X: da.Array, landmarks: np.ndarray, projection: np.ndarray, offset: np.ndarray,
            kernel, params: dict, dtype) -> da.Array:
    """Lazy projection of every row of ``X``: one kernel block per row block.

    Examples
    --------
    >>> X = da.from_array(np.eye(3), chunks=(2, 3))
    >>> project(X, np.eye(3), np.ones((3, 1)), np.zeros(1), "linear", {}, np.float64).compute()
    array([[1.],
           [1.],
           [1.]])
    """
    q = projection.shape[1]
    origin = kernel_origin(landmarks, kernel, X)
    Z = np.asarray(landmarks, dtype=np.float64)
    if origin is not None:
        Z = Z - origin
    shared = shared_values(X, Z.astype(dtype), projection, offset, origin)
    return X.map_blocks(
        project_block,
        landmarks=shared[0],
        projection=shared[1],
        offset=shared[2],
        kernel=kernel,
        params=params,
        dtype_kernel=dtype,
        origin=shared[3],
        chunks=(X.chunks[0], (q,)),
        dtype=np.float64,
        meta=np.empty((0, 0), np.float64),
    )
