"""The pass's sums of one row block for B bootstrap replicates at once, in numpy.

Replicate b counts row i c_bi times (:mod:`kpca_dask.blocks.replicate_counts`);
its sums are the pass's (:mod:`kpca_dask.blocks.statistics`) weighted by
those counts (docs/design.md §18)::

    G_b += D^T diag(c_b) D,   s_b += D^T c_b,   t_b += sum_i c_bi k(x_i, x_i),   n_b = n

Each kernel sub-block D is made once and added to every replicate: one
weighted SYRK per replicate (the rows drawn, scaled by sqrt(c_bi)) and one
GEMM for all B column sums, so B replicates read the data once. The B running
m x m sums are a chain's accumulator: B m^2 float64 words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._parallel import blas_limit
from .kernels import kernel_diagonal
from .landmark_kernel import LandmarkKernel
from .replicate_counts import DrawnCounts
from .sparse_rows import as_block, first_nonfinite
from .statistics import (
    PassStatistics,
    add_gram,
    even_block_rows,
    fill_upper,
    kernel_block_rows,
    kernel_rows_into,
    shifted_to_origin,
)

#: The pass's tree merges and finishes these sums with :func:`.statistics.merge_running` and
#: :func:`.statistics.finish_statistics`, which only call ``add`` and ``finished``.
__all__ = ["ReplicateSums", "replicate_statistics_of_block"]


@dataclass
class ReplicateSums:
    """The weighted sums of the rows counted so far, for B replicates, added to in place.

    ``gram[b]`` holds the lower triangle of G_b until :meth:`finished` fills the upper.
    """

    reference: np.ndarray  # r, (m,)
    gram: np.ndarray  # G_b, (B, m, m)
    column_sums: np.ndarray  # s_b, (B, m)
    diagonal_sums: np.ndarray  # t_b, (B,)
    n_samples: int = 0  # rows read (each replicate draws as many)
    n_nonfinite: int = 0
    first_nonfinite_row: int = -1

    @classmethod
    def empty(cls, reference: np.ndarray, n_replicates: int) -> "ReplicateSums":
        """No rows yet: zero sums for B replicates of the m landmarks of ``reference``."""
        m = reference.shape[0]
        return cls(np.asarray(reference, np.float64), np.zeros((n_replicates, m, m)),
                   np.zeros((n_replicates, m)), np.zeros(n_replicates))

    @property
    def memory_bytes(self) -> int:
        """Bytes of the B replicates' sums: B (m^2 + m + 1) float64 words."""
        return int(self.gram.nbytes + self.column_sums.nbytes + self.diagonal_sums.nbytes)

    def add(self, other: "ReplicateSums") -> "ReplicateSums":
        """Add another chain's sums to these, in place; returns self."""
        self.gram += other.gram
        self.column_sums += other.column_sums
        self.diagonal_sums += other.diagonal_sums
        self.n_samples += other.n_samples
        self.n_nonfinite += other.n_nonfinite
        rows = [row for row in (self.first_nonfinite_row, other.first_nonfinite_row) if row >= 0]
        self.first_nonfinite_row = min(rows) if rows else -1
        return self

    def finished(self) -> "ReplicateSums":
        """Every G_b made symmetric in place; returns self."""
        for gram in self.gram:
            fill_upper(gram)
        return self

    def replicate(self, b: int) -> PassStatistics:
        """Replicate ``b``'s statistics, as a pass over its drawn rows would give them."""
        return PassStatistics(self.n_samples, self.column_sums[b], self.gram[b],
                              float(self.diagonal_sums[b]), self.n_nonfinite,
                              self.first_nonfinite_row, self.reference)


def replicate_statistics_of_block(running, block, row_offset, counts, n_replicates, landmarks,
                                  kernel, params, dtype, reference, origin=None,
                                  blas_threads=None, block_bytes=None):
    """Add one row block's weighted sums to ``running`` (None: start a chain) and return it.

    ``counts`` is a :class:`~kpca_dask.blocks.replicate_counts.DrawnCounts` (the
    block draws its own) or the block's given counts, (B, rows).
    """
    if running is None:
        running = ReplicateSums.empty(reference, n_replicates)
    x = as_block(block)
    rows_here = x.shape[0]
    running.n_samples += rows_here
    n_bad, first_bad = first_nonfinite(x)
    if n_bad:
        running.n_nonfinite += n_bad
        row = int(row_offset + first_bad)
        running.first_nonfinite_row = (row if running.first_nonfinite_row < 0
                                       else min(row, running.first_nonfinite_row))
        return running
    if isinstance(counts, DrawnCounts):
        counts = counts.block(int(row_offset), int(row_offset) + rows_here)
    weights = np.asarray(counts, dtype=np.float64)
    x = shifted_to_origin(x, origin).astype(dtype, copy=False)
    m = landmarks.shape[0]
    shift = reference.astype(dtype, copy=False)
    step = even_block_rows(rows_here, kernel_block_rows(m, np.dtype(dtype).itemsize,
                                                        block_bytes))
    buffer = np.empty((min(step, rows_here), m), dtype)
    kernel_rows = LandmarkKernel(landmarks, kernel, params, dtype)
    with blas_limit(blas_threads):
        for start in range(0, rows_here, step):
            D = kernel_rows_into(buffer[: min(step, rows_here - start)],
                                 x[start:start + step], kernel_rows, shift)
            _add_weighted(running, D, weights[:, start:start + step])
    diagonal = kernel_diagonal(x, kernel, **params).astype(np.float64)
    running.diagonal_sums += weights @ diagonal
    return running


def _add_weighted(running: ReplicateSums, D: np.ndarray, weights: np.ndarray) -> None:
    """Every replicate's G_b += D^T diag(c_b) D and s_b += D^T c_b for one kernel sub-block."""
    running.column_sums += weights @ D.astype(np.float64, copy=False)
    buffer = np.empty_like(D)
    for b in range(weights.shape[0]):
        drawn = np.flatnonzero(weights[b])  # about 63 % of the rows: the others add nothing
        scaled = np.take(D, drawn, axis=0, out=buffer[:drawn.size])
        scaled *= np.sqrt(weights[b, drawn]).astype(D.dtype)[:, None]
        add_gram(running.gram[b], scaled)
