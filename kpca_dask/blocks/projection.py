"""One row block of a transform, in numpy: y = P^T k_m(x) - c (docs/design.md §2)."""

from __future__ import annotations

import numpy as np

from .._parallel import task_blas_limit
from ..errors import NonFiniteInputError
from .landmark_kernel import LandmarkKernel
from .sparse_rows import as_block, first_nonfinite
from .statistics import cache_block_rows, kernel_rows_into, shifted_to_origin

__all__ = ["project_block"]


def project_block(
    block, *, landmarks, projection, offset, kernel, params, dtype_kernel, origin=None,
    block_info=None
):
    """y = P^T k_m(x) - c for one row block (docs/design.md §2, "Projection")."""
    x = as_block(block)  # scipy.sparse rows stay sparse (CSR)
    n_bad, first_bad = first_nonfinite(x)
    if n_bad:
        start = block_info[0]["array-location"][0][0] if block_info else 0
        row = start + first_bad
        raise NonFiniteInputError(
            f"X contains NaN or infinite values (first in row {row}); "
            "remove or impute them before transform."
        )
    x = shifted_to_origin(x, origin).astype(dtype_kernel, copy=False)
    projection = projection.astype(x.dtype, copy=False)
    y = np.empty((x.shape[0], projection.shape[1]))
    # Kernel rows of one cache-sized sub-block at a time, each straight into
    # its B P: the n_b x m block never exists (docs/design.md §8).
    step = cache_block_rows(landmarks.shape[0], x.dtype.itemsize)
    buffer = np.empty((min(step, x.shape[0]), landmarks.shape[0]), x.dtype)
    kernel_rows = LandmarkKernel(landmarks, kernel, params, x.dtype)
    with task_blas_limit():
        for start in range(0, x.shape[0], step):
            B = kernel_rows_into(buffer[: min(step, x.shape[0] - start)],
                                  x[start : start + step], kernel_rows)
            y[start : start + step] = B @ projection
    return y - offset
