"""Row blocks of the coupled pass, in numpy: two fields' kernel rows and their cross sums.

Two fields x and y share their samples (docs/design.md §20). For a block of
rows, with D_x = k_x(X_b, Z_x) - 1 r_x^T and D_y likewise (each field's
kernel rows against its own landmarks, shifted by its reference row)::

    each field's own sums (n, s, t; :mod:`kpca_dask.blocks.statistics`)
    S_xy += D_x^T D_y        (m_x x m_y, float64: one GEMM)
    G_x += D_x^T D_x, G_y += D_y^T D_y   only when ``within`` (CCA whitens by them)

Kernel MCA needs the cross sums alone: without G_x and G_y a coupled pass costs
2 n m_x m_y flops, as two single passes' SYRKs cost n (m_x^2 + m_y^2).

The two fields' rows of a block are made one row sub-block at a time, side by
side, so that the cross product reads both while they are in memory; nothing
here knows about dask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._memory import SizedByFields
from .._parallel import blas_limit
from .landmark_kernel import LandmarkKernel
from .statistics import (
    PassStatistics,
    RunningStatistics,
    add_gram,
    counted_rows,
    even_block_rows,
    kernel_block_rows,
    kernel_rows_into,
)

__all__ = ["FieldKernel", "CoupledStatistics", "CoupledRunning", "coupled_statistics_of_block"]


@dataclass(frozen=True)
class FieldKernel:
    """One field's side of a block: its landmarks (shifted by ``origin``), kernel and shift."""

    landmarks: np.ndarray
    kernel: object
    params: dict
    reference: np.ndarray  # r, (m,)
    origin: np.ndarray | None = None


@dataclass(frozen=True)
class CoupledStatistics(SizedByFields):
    """What the coupled pass returns: each field's own pass statistics and their cross sums."""

    x: PassStatistics
    y: PassStatistics
    cross: np.ndarray  # S_xy = sum_b D_x^T D_y, (m_x, m_y)

    @property
    def n_samples(self) -> int:
        return self.x.n_samples


@dataclass
class CoupledRunning:
    """The sums of the row blocks counted so far, added to in place (as a chain of the
    single pass hands its :class:`RunningStatistics` on, see that class's note)."""

    x: RunningStatistics
    y: RunningStatistics
    cross: np.ndarray

    @classmethod
    def empty(cls, side_x: FieldKernel, side_y: FieldKernel,
              within: bool = True) -> "CoupledRunning":
        """Zero sums; without ``within``, each field's G is a 0 x 0 array (never added to)."""
        fields = [RunningStatistics.empty(side.reference) for side in (side_x, side_y)]
        if not within:
            for field in fields:
                field.gram = np.zeros((0, 0), order="F")
        return cls(fields[0], fields[1],
                   np.zeros((len(side_x.reference), len(side_y.reference))))

    def add(self, other: "CoupledRunning") -> "CoupledRunning":
        """Add another chain's sums to these, in place; returns self."""
        self.x.add(other.x)
        self.y.add(other.y)
        self.cross += other.cross
        return self

    def finished(self) -> CoupledStatistics:
        """Each field's finished statistics and the cross sums (the pass's tree finishes
        and merges these with :func:`.statistics.finish_statistics` and
        :func:`.statistics.merge_running`, as the single pass's)."""
        return CoupledStatistics(self.x.finished(), self.y.finished(), self.cross)


def coupled_statistics_of_block(running, block_x, block_y, row_offset, side_x: FieldKernel,
                                side_y: FieldKernel, dtype, blas_threads=None,
                                block_bytes=None, within: bool = True) -> CoupledRunning:
    """Add one row block of both fields to ``running`` (None: start a chain) and return it;
    each field's G only when ``within`` (its G stays zero otherwise).

    Examples
    --------
    >>> side = FieldKernel(np.eye(2), "linear", {}, np.zeros(2))
    >>> sums = coupled_statistics_of_block(None, np.eye(2), 2 * np.eye(2), 0, side, side,
    ...                                    np.float64)
    >>> sums.cross.tolist(), sums.x.n_samples
    ([[2.0, 0.0], [0.0, 2.0]], 2)
    """
    if running is None:
        running = CoupledRunning.empty(side_x, side_y, within)
    x = counted_rows(running.x, block_x, row_offset, side_x.kernel, side_x.params,
                     side_x.origin, dtype)
    y = counted_rows(running.y, block_y, row_offset, side_y.kernel, side_y.params,
                     side_y.origin, dtype)
    if x is None or y is None:  # the fit stops at the error, which names the row
        return running
    m_x, m_y = len(side_x.reference), len(side_y.reference)
    rows = even_block_rows(x.shape[0], kernel_block_rows(
        m_x + m_y, np.dtype(dtype).itemsize, block_bytes))
    buffers = [np.empty((min(rows, x.shape[0]), m), dtype) for m in (m_x, m_y)]
    kernels = [LandmarkKernel(side.landmarks, side.kernel, side.params, dtype)
               for side in (side_x, side_y)]
    shifts = [side.reference.astype(dtype, copy=False) for side in (side_x, side_y)]
    with blas_limit(blas_threads):
        for start in range(0, x.shape[0], rows):
            stop = min(x.shape[0], start + rows)
            D_x = kernel_rows_into(buffers[0][: stop - start], x[start:stop], kernels[0],
                                   shifts[0], running.x.column_sums)
            D_y = kernel_rows_into(buffers[1][: stop - start], y[start:stop], kernels[1],
                                   shifts[1], running.y.column_sums)
            if within:
                add_gram(running.x.gram, D_x)
                add_gram(running.y.gram, D_y)
            running.cross += D_x.T @ D_y
    return running
