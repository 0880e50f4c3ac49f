"""Kernel matrices given to :class:`~kpca_dask.ExactKernelPCA` with ``kernel="precomputed"``.

The n x n matrix is read into one float64 buffer block by block (numpy,
scipy.sparse, dask or Zarr), symmetrised there, and then centred and
decomposed in place by the estimator: no second n x n array.
"""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import zarr
from scipy import sparse

from ..errors import InvalidInputError
from ..validation import as_numpy_array

__all__ = ["kernel_matrix_buffer", "symmetrise_in_place", "new_point_kernel_rows"]


def kernel_matrix_buffer(K) -> np.ndarray:
    """The n x n kernel matrix as one new float64 array, read block by block from numpy,
    scipy.sparse, a dask array or a Zarr array (by path or URL)."""
    if isinstance(K, (str, os.PathLike, zarr.Array, da.Array)):
        from ..io import open_array

        lazy = open_array(K, whole_rows=False)
        if lazy.ndim != 2 or lazy.shape[0] != lazy.shape[1]:
            _refuse_non_square(lazy.shape)
        buffer = np.empty(lazy.shape, dtype=np.float64)
        start = 0
        for rows in lazy.chunks[0]:  # one row block held at a time beside the buffer
            buffer[start:start + rows] = lazy[start:start + rows].compute()
            start += rows
        if not np.isfinite(buffer).all():  # numpy input was checked as it was read
            raise InvalidInputError("The kernel matrix holds NaN or infinite values; kernel "
                                    "PCA needs a finite kernel.")
    else:
        K = as_numpy_array(K, min_samples=2)
        K = K.toarray() if sparse.issparse(K) else K
        if K.shape[0] != K.shape[1]:
            _refuse_non_square(K.shape)
        buffer = np.array(K, dtype=np.float64)  # our own copy: it is overwritten
    return buffer


def _refuse_non_square(shape) -> None:
    raise InvalidInputError(
        f'With kernel="precomputed", fit takes the square kernel matrix of the training '
        f"points, shape (n_samples, n_samples); got shape {tuple(shape)}. Pass "
        "k(X_train, X_train), not the data.")


def symmetrise_in_place(K: np.ndarray, block: int = 1024) -> None:
    """K <- (K + K^T) / 2, one pair of off-diagonal blocks at a time (no n x n temporary)."""
    n = K.shape[0]
    for i in range(0, n, block):
        for j in range(i, n, block):
            upper, lower = K[i:i + block, j:j + block], K[j:j + block, i:i + block]
            mean = 0.5 * (upper + lower.T)
            upper[...] = mean
            lower[...] = mean.T


def new_point_kernel_rows(K, n_fit: int) -> np.ndarray:
    """The kernel values of new points against the n_fit training points, shape checked."""
    K = K.toarray() if sparse.issparse(K) else K
    if K.shape[1] != n_fit:
        raise InvalidInputError(
            f'With kernel="precomputed", transform takes the kernel values of the new points '
            f"against the {n_fit} training points, shape (n_samples, {n_fit}); got shape "
            f"{K.shape}. Pass k(X_new, X_train).")
    return K
