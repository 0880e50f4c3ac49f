"""The n x n kernel matrices of :class:`~kpca_dask.ExactKernelPCA`, worked in place.

With ``kernel="precomputed"`` the matrix (as
:func:`~kpca_dask.model.inputs.in_memory_fit_input` gives it: dense numpy, or a
dask array of a dask or Zarr input) is read into one float64 buffer block by
block. That buffer, or the Gram matrix of the rows, is symmetrised and centred
here and decomposed by the estimator, all in place: no second n x n array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..blocks.feature_sums import feature_sum
from ..blocks.kernels import pairwise_kernel
from ..engine.gram import gram_by_panels
from ..engine.sampling import read_rows
from ..errors import InvalidInputError
from .inputs import FitInput

__all__ = ["kernel_matrix_buffer", "points_gram", "symmetrise_in_place", "centre_in_place",
           "new_point_kernel_rows"]


def kernel_matrix_buffer(matrix: FitInput) -> np.ndarray:
    """The n x n kernel matrix as one new float64 array, read block by block from a lazy
    input (dask, or a Zarr array by path or URL), or copied from numpy."""
    if matrix.is_lazy:
        lazy = matrix.data
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
        K = matrix.data
        if K.shape[0] != K.shape[1]:
            _refuse_non_square(K.shape)
        buffer = np.array(K, dtype=np.float64)  # our own copy: it is overwritten
    return buffer


def _refuse_non_square(shape) -> None:
    raise InvalidInputError(
        f'With kernel="precomputed", fit takes the square kernel matrix of the training '
        f"points, shape (n_samples, n_samples); got shape {tuple(shape)}. Pass "
        "k(X_train, X_train), not the data.")


def points_gram(X, lazy: bool, kernel, params: dict) -> tuple[Any, bool, np.ndarray]:
    """K = k(X, X) of rows, in one new float64 buffer, with the rows a fit keeps for transform.

    Float64 throughout: a float32 Gram matrix loses the small eigenvalues. Lazy rows stay
    lazy (K summed over their feature panels in one read, docs/design.md §12), unless the
    kernel is not a sum over features (a callable), which needs whole rows: then they are
    read into memory. Returns the rows, whether they stayed lazy, and K.

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0]])
    >>> points_gram(X, False, "linear", {})[2]
    array([[1., 0.],
           [0., 4.]])
    """
    if lazy and feature_sum(kernel) is None:
        X, lazy = read_rows(X.astype(np.float64)), False
    if lazy:
        return X, lazy, gram_by_panels(X, kernel, params)[0]
    return X, lazy, np.asarray(pairwise_kernel(X, X, kernel, **params), dtype=np.float64)


def symmetrise_in_place(K: np.ndarray, block: int = 1024) -> None:
    """K <- (K + K^T) / 2, one pair of off-diagonal blocks at a time (no n x n temporary)."""
    n = K.shape[0]
    for i in range(0, n, block):
        for j in range(i, n, block):
            upper, lower = K[i:i + block, j:j + block], K[j:j + block, i:i + block]
            mean = 0.5 * (upper + lower.T)
            upper[...] = mean
            lower[...] = mean.T


def centre_in_place(K: np.ndarray) -> tuple[np.ndarray, float]:
    """K <- J K J for a symmetric K (docs/design.md §1): its column means and grand mean.

    Subtracts the row and column means and adds back the grand mean, in place: no
    second n x n array. The means are what centres a new point's kernel row.

    Examples
    --------
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> column_means, grand_mean = centre_in_place(K)
    >>> K, column_means, grand_mean
    (array([[ 0.5, -0.5],
           [-0.5,  0.5]]), array([1.5, 1.5]), np.float64(1.5))
    """
    column_means = K.mean(axis=0)
    grand_mean = column_means.mean()
    K -= column_means[None, :]
    K -= column_means[:, None]
    K += grand_mean
    return column_means, grand_mean


def new_point_kernel_rows(K, n_fit: int) -> np.ndarray:
    """The kernel values of new points (dense, as
    :func:`~kpca_dask.model.inputs.in_memory_input` gives them) against the n_fit training
    points, shape checked."""
    if K.shape[1] != n_fit:
        raise InvalidInputError(
            f'With kernel="precomputed", transform takes the kernel values of the new points '
            f"against the {n_fit} training points, shape (n_samples, {n_fit}); got shape "
            f"{K.shape}. Pass k(X_new, X_train).")
    return K
