"""Row blocks of wide data, in numpy: statistics, embedding and novelty from feature sums.

The feature-chunked pass (docs/design.md §12) hands each row block to these
functions as the added terms of :func:`kpca_dask.blocks.feature_sums.chunk_sums`,
(rows, m + 2) float64, instead of the rows themselves; they do what
:func:`kpca_dask.blocks.statistics.statistics_of_block` and
:func:`kpca_dask.blocks.projection.project_block` do with rows: kernel
values by the compiled epilogue, one kernel block of bounded size at a time,
then the symmetric update or the product with P.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._parallel import blas_limit, task_blas_limit
from ..errors import NonFiniteInputError
from .feature_sums import diagonal_from_norms, kernel_from_sums
from .statistics import RunningStatistics, add_gram, even_block_rows, kernel_block_rows

__all__ = ["statistics_of_sums", "project_sums", "error_of_sums", "nonfinite_rows",
           "moments_total", "with_feature_moments"]


def nonfinite_rows(sums: np.ndarray, m: int) -> tuple[int, int]:
    """How many NaN or infinite values the rows of ``sums`` held, and the first such row.

    Examples
    --------
    >>> nonfinite_rows(np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 2.0]]), 1)
    (2, 1)
    """
    counts = sums[:, m + 1]
    if not counts.any():
        return 0, -1
    return int(counts.sum()), int(np.flatnonzero(counts)[0])


def statistics_of_sums(running, sums, row_offset, norms, kernel, params, dtype, reference,
                       blas_threads=None, block_bytes=None):
    """Add one row block's statistics, from its feature sums, to ``running`` and return it.

    The wide pass's counterpart of
    :func:`~kpca_dask.blocks.statistics.statistics_of_block`: the same sums
    n, s, G and t (docs/design.md §2), with ``norms`` the landmarks' squared
    norms (:func:`~kpca_dask.blocks.feature_sums.landmark_norms`).
    """
    if running is None:
        running = RunningStatistics.empty(reference)
    sums = np.asarray(sums)
    m = reference.shape[0]
    n_rows = sums.shape[0]
    running.n_samples += n_rows
    n_bad, first_bad = nonfinite_rows(sums, m)
    if n_bad:
        return running.count_nonfinite(n_bad, int(row_offset + first_bad))
    shift = reference.astype(dtype, copy=False)
    rows = even_block_rows(n_rows, kernel_block_rows(m, np.dtype(dtype).itemsize, block_bytes))
    buffer = np.empty((min(rows, n_rows), m), dtype)
    with blas_limit(blas_threads):
        for start in range(0, n_rows, rows):
            D = kernel_from_sums(buffer[: min(rows, n_rows - start)], sums[start : start + rows],
                                 norms, kernel, params, shift, running.column_sums)
            add_gram(running.gram, D)
    running.diagonal_sum += float(diagonal_from_norms(sums[:, m], kernel, params).sum())
    return running


def moments_total(moments: np.ndarray, feature_chunks: tuple) -> tuple[np.ndarray, float]:
    """``(sum_i x_i, sum_i |x_i|^2)`` from the added moments of every feature chunk (each
    chunk's column sums, then its sum of squares).

    Examples
    --------
    >>> moments_total(np.array([1.0, 2.0, 5.0, 3.0, 9.0]), (2, 1))
    (array([1., 2., 3.]), 14.0)
    """
    ends = np.cumsum([c + 1 for c in feature_chunks]) - 1
    keep = np.ones(moments.size, bool)
    keep[ends] = False
    return moments[keep], float(moments[ends].sum())


def with_feature_moments(stats, moments: np.ndarray, feature_chunks: tuple):
    """The pass's statistics of a linear kernel with the rows' float64 moments added in the
    same read: ``sum_i x_i``, and ``t = sum_i ||x_i||^2`` in float64 in place of the
    products' dtype's, so the centred trace ``t - ||sum x||^2 / n`` is exact
    (docs/design.md §2)."""
    sums, squares = moments_total(np.asarray(moments), feature_chunks)
    return dataclasses.replace(stats, feature_sums=sums, diagonal_sum=squares)


def _raise_if_nonfinite(sums, m, block_info, doing: str) -> None:
    n_bad, first_bad = nonfinite_rows(sums, m)
    if n_bad:
        start = block_info[0]["array-location"][0][0] if block_info else 0
        raise NonFiniteInputError(
            f"X contains NaN or infinite values (first in row {start + first_bad}); "
            f"remove or impute them before {doing}.")


def project_sums(sums, *, norms, projection, offset, kernel, params, dtype_kernel,
                 block_info=None):
    """y = P^T k_m(x) - c for one row block, from its feature sums (docs/design.md §2)."""
    sums = np.asarray(sums)
    m = norms.shape[0]
    _raise_if_nonfinite(sums, m, block_info, "transform")
    projection = projection.astype(dtype_kernel, copy=False)
    y = np.empty((sums.shape[0], projection.shape[1]))
    step = kernel_block_rows(m, np.dtype(dtype_kernel).itemsize, 2**24)
    buffer = np.empty((min(step, sums.shape[0]), m), dtype_kernel)
    with task_blas_limit():
        for start in range(0, sums.shape[0], step):
            B = kernel_from_sums(buffer[: min(step, sums.shape[0] - start)],
                                 sums[start : start + step], norms, kernel, params)
            y[start : start + step] = B @ projection
    return y - offset


def error_of_sums(sums, *, norms, weights, offset, mean_norm2, kernel, params, dtype_kernel,
                  block_info=None):
    """``e(x) = k(x, x) - 2 k_m(x)^T v + |mu|^2 - |y(x)|^2`` from one row block's feature sums.

    ``weights`` is [P, v] (docs/design.md §6), as the row-chunked novelty score takes it.
    """
    sums = np.asarray(sums)
    m = norms.shape[0]
    _raise_if_nonfinite(sums, m, block_info, "scoring")
    q = offset.shape[0]
    weights = weights.astype(dtype_kernel, copy=False)
    e = np.empty(sums.shape[0])
    step = kernel_block_rows(m, np.dtype(dtype_kernel).itemsize, 2**24)
    buffer = np.empty((min(step, sums.shape[0]), m), dtype_kernel)
    with task_blas_limit():
        for start in range(0, sums.shape[0], step):
            rows = sums[start : start + step]
            B = kernel_from_sums(buffer[: rows.shape[0]], rows, norms, kernel, params)
            Bw = (B @ weights).astype(np.float64)
            y = Bw[:, :q] - offset
            diagonal = diagonal_from_norms(rows[:, m], kernel, params)
            e[start : start + step] = (diagonal - 2.0 * Bw[:, q] + mean_norm2
                                       - np.einsum("ij,ij->i", y, y))
    return np.maximum(e, 0.0)  # a squared distance: rounding must not make it negative
