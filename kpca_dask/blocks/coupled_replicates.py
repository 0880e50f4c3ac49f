"""The coupled pass's sums of one row block for B bootstrap replicates at once, in numpy.

Replicate b counts sample i c_bi times (:mod:`kpca_dask.blocks.replicate_counts`), the same
count for both fields, since a sample is a pair; its sums are the coupled pass's
(:mod:`kpca_dask.blocks.cross_sums`) weighted by those counts (docs/design.md §20)::

    S_xy,b += D_x^T diag(c_b) D_y,   s_x,b += D_x^T c_b,   s_y,b += D_y^T c_b
    G_x,b += D_x^T diag(c_b) D_x,   G_y,b likewise      (only when ``within``: CCA)

Each pair of kernel sub-blocks is made once and added to every replicate, over the rows
the replicate drew (about 63 % of them). The B running sums are a chain's accumulator:
B (m_x m_y + m_x^2 + m_y^2) float64 words with ``within``, B m_x m_y without.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._parallel import blas_limit
from .cross_sums import CoupledStatistics, FieldKernel
from .landmark_kernel import LandmarkKernel
from .replicate_counts import DrawnCounts, FoldCounts
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

__all__ = ["CoupledReplicateSums", "coupled_replicates_of_block"]


@dataclass
class CoupledReplicateSums:
    """The weighted sums of the samples counted so far, for B replicates, added to in place."""

    references: tuple[np.ndarray, np.ndarray]  # r_x, r_y
    column_sums: tuple[np.ndarray, np.ndarray]  # s_x,b (B, m_x), s_y,b (B, m_y)
    grams: tuple[np.ndarray, np.ndarray]  # G_x,b (B, m_x, m_x) or (B, 0, 0); G_y,b
    cross: np.ndarray  # S_xy,b (B, m_x, m_y)
    counted: np.ndarray | None = None  # sum_i c_bi, (B,): n for a bootstrap, a fold's rows
    n_samples: int = 0
    n_nonfinite: int = 0
    first_nonfinite_row: int = -1
    nonfinite_field: str = "X"  # the field of the first NaN or infinity

    @classmethod
    def empty(cls, sides: tuple[FieldKernel, FieldKernel], n_replicates: int,
              within: bool) -> "CoupledReplicateSums":
        sizes = [len(side.reference) for side in sides]
        return cls(tuple(np.asarray(side.reference, np.float64) for side in sides),
                   tuple(np.zeros((n_replicates, m)) for m in sizes),
                   tuple(np.zeros((n_replicates, m, m) if within else (n_replicates, 0, 0))
                         for m in sizes),
                   np.zeros((n_replicates, *sizes)), np.zeros(n_replicates))

    def add(self, other: "CoupledReplicateSums") -> "CoupledReplicateSums":
        """Add another chain's sums to these, in place; returns self."""
        for mine, theirs in zip(self.column_sums + self.grams, other.column_sums + other.grams):
            mine += theirs
        self.cross += other.cross
        self.counted += other.counted
        self.n_samples += other.n_samples
        self.n_nonfinite += other.n_nonfinite
        mine, theirs = self.first_nonfinite_row, other.first_nonfinite_row
        if theirs >= 0 and (mine < 0 or theirs < mine):
            self.first_nonfinite_row, self.nonfinite_field = theirs, other.nonfinite_field
        return self

    def finished(self) -> "CoupledReplicateSums":
        """Every G_b made symmetric in place; returns self."""
        for grams in self.grams:
            for gram in grams:
                fill_upper(gram)
        return self

    @property
    def n_replicates(self) -> int:
        return int(self.cross.shape[0])

    def replicate(self, b: int) -> CoupledStatistics:
        """Replicate ``b``'s sums, as the coupled pass over its drawn samples gives them."""
        fields = [PassStatistics(int(round(self.counted[b])), sums[b], gram[b], 0.0,
                                 self.n_nonfinite,
                                 self.first_nonfinite_row, reference)
                  for sums, gram, reference in zip(self.column_sums, self.grams,
                                                   self.references)]
        return CoupledStatistics(fields[0], fields[1], self.cross[b])


def _kernel_rows(x, side: FieldKernel, dtype, rows: int, start: int, stop: int, buffer):
    kernel = LandmarkKernel(side.landmarks, side.kernel, side.params, dtype)
    return kernel_rows_into(buffer[: stop - start], x[start:stop], kernel,
                            side.reference.astype(dtype, copy=False))


def coupled_replicates_of_block(running, block_x, block_y, row_offset, counts, n_replicates,
                                sides: tuple[FieldKernel, FieldKernel], dtype, within: bool,
                                blas_threads=None, block_bytes=None) -> CoupledReplicateSums:
    """Add one row block's weighted sums to ``running`` (None: start a chain) and return it.

    ``counts`` is a :class:`~kpca_dask.blocks.replicate_counts.DrawnCounts` or
    :class:`~kpca_dask.blocks.replicate_counts.FoldCounts` (the block makes its own) or the
    block's given counts, (B, rows).
    """
    if running is None:
        running = CoupledReplicateSums.empty(sides, n_replicates, within)
    blocks = [as_block(block) for block in (block_x, block_y)]
    running.n_samples += blocks[0].shape[0]
    for field, block in zip("XY", blocks):
        n_bad, first_bad = first_nonfinite(block)
        if n_bad:
            running.n_nonfinite += n_bad
            row = int(row_offset + first_bad)
            if running.first_nonfinite_row < 0 or row < running.first_nonfinite_row:
                running.first_nonfinite_row, running.nonfinite_field = row, field
            return running
    n = blocks[0].shape[0]
    if isinstance(counts, (DrawnCounts, FoldCounts)):
        counts = counts.block(int(row_offset), int(row_offset) + n)
    weights = np.asarray(counts, dtype=np.float64)
    running.counted += weights.sum(axis=1)
    x, y = (shifted_to_origin(block, side.origin).astype(dtype, copy=False)
            for block, side in zip(blocks, sides))
    sizes = [len(side.reference) for side in sides]
    step = even_block_rows(n, kernel_block_rows(sum(sizes), np.dtype(dtype).itemsize,
                                                block_bytes))
    buffers = [np.empty((min(step, n), m), dtype) for m in sizes]
    with blas_limit(blas_threads):
        for start in range(0, n, step):
            stop = min(n, start + step)
            D_x, D_y = (_kernel_rows(rows, side, dtype, step, start, stop, buffer)
                        for rows, side, buffer in zip((x, y), sides, buffers))
            _add_weighted(running, D_x, D_y, weights[:, start:stop], within)
    return running


def _add_weighted(running: CoupledReplicateSums, D_x, D_y, weights, within: bool) -> None:
    """Every replicate's weighted sums for one pair of kernel sub-blocks."""
    running.column_sums[0][...] += weights @ D_x.astype(np.float64, copy=False)
    running.column_sums[1][...] += weights @ D_y.astype(np.float64, copy=False)
    for b in range(weights.shape[0]):
        drawn = np.flatnonzero(weights[b])
        counts = weights[b, drawn].astype(D_x.dtype)[:, None]
        taken_x, taken_y = D_x[drawn], D_y[drawn]
        running.cross[b] += (taken_x * counts).T @ taken_y
        if within:
            root = np.sqrt(counts)
            add_gram(running.grams[0][b], taken_x * root)
            add_gram(running.grams[1][b], taken_y * root)
