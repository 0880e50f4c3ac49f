"""Deterministic signs for eigenvectors."""

from __future__ import annotations

import numpy as np

__all__ = ["fix_signs"]


def fix_signs(columns: np.ndarray) -> np.ndarray:
    """The signs (+1 or -1 per column) that make each column's largest-magnitude entry positive.

    An eigenvector is defined up to its sign; fixing it this way makes fits
    reproducible across LAPACK builds, chunkings and machines. Multiply the
    columns (and anything derived from them) by the result. An all-zero
    column keeps sign +1.

    Examples
    --------
    >>> fix_signs(np.array([[1.0, 0.5], [-3.0, 0.2]]))
    array([-1.,  1.])
    """
    q = columns.shape[1]
    signs = np.sign(columns[np.argmax(np.abs(columns), axis=0), np.arange(q)])
    signs[signs == 0] = 1.0
    return signs
