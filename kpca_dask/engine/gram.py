"""The exact n x n kernel matrix of lazy data, summed over feature panels (docs/design.md §12).

With few rows and many features (T-mode: n = 50 to ~3·10^4 samples of 10^4
to 10^7 features) the Gram matrix fits in memory while the data do not. Every
named kernel is a function of a sum over features
(:mod:`kpca_dask.blocks.feature_sums`), so the sums are added one column
panel of the data at a time: a panel holds every row of a range of feature
columns (whole stored chunks where they fit :func:`panel_bytes`), read into
one float64 array, added into the n x n sums by one symmetric rank-k update
(BLAS ``dsyrk``, in place) or by L1 distances row panel by row panel, and
released. Memory: the n x n float64 matrix plus one panel. The kernel's
function is applied last, row panel by row panel, in place.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask.utils import format_bytes
from scipy.linalg import blas
from scipy.spatial.distance import cdist

from .._memory import memory_budget
from ..blocks.feature_sums import (
    CITYBLOCK,
    SQUARED,
    chunk_sums,
    diagonal_from_norms,
    feature_sum,
    kernel_from_sums,
)
from ..errors import InsufficientMemoryError, NonFiniteInputError
from .sampling import read_rows

__all__ = ["gram_by_panels", "cross_kernel_by_panels", "column_ranges", "panel_bytes"]

#: Rows of the data whose L1 distances, or kernel values, are made at once.
_ROW_PANEL = 512


def panel_bytes(X: da.Array) -> int:
    """The most bytes one float64 column panel of ``X`` may take: an eighth of the memory
    available, at least 64 MiB.

    Examples
    --------
    >>> import dask
    >>> with dask.config.set({"kpca-dask.memory-limit": "8 GiB"}):
    ...     panel_bytes(da.zeros((10, 10)))
    1073741824
    """
    return max(2**26, memory_budget(X).free_bytes // 8)


#: Narrow feature chunks are joined into panels of up to this many bytes.
JOINED_BYTES = 2**27


def column_ranges(X: da.Array, most_bytes: int) -> list[tuple[int, int]]:
    """Column ranges of the panels: whole feature chunks, narrow ones joined up to
    :data:`JOINED_BYTES` of float64 rows, a chunk over ``most_bytes`` cut into equal parts.

    Examples
    --------
    >>> column_ranges(da.zeros((10, 12), chunks=(5, 3)), 8 * 10 * 6)
    [(0, 6), (6, 12)]
    >>> column_ranges(da.zeros((10, 12), chunks=(5, 12)), 8 * 10 * 5)
    [(0, 4), (4, 8), (8, 12)]
    """
    most = max(1, min(most_bytes, JOINED_BYTES) // (8 * max(X.shape[0], 1)))
    largest = max(1, most_bytes // (8 * max(X.shape[0], 1)))
    ranges: list[tuple[int, int]] = []
    start = 0
    for width in X.chunks[1]:
        parts = -(-width // largest)
        cuts = [start + (width * k) // parts for k in range(parts + 1)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            if ranges and b - ranges[-1][0] <= most and ranges[-1][1] == a and parts == 1:
                ranges[-1] = (ranges[-1][0], b)
            else:
                ranges.append((a, b))
        start += width
    return ranges


def _panel(X: da.Array, a: int, b: int, what: str) -> np.ndarray:
    """Columns a:b of every row of ``X`` in float64, refusing NaN or inf by row."""
    panel = read_rows(X[:, a:b].astype(np.float64))
    # A row's sum is NaN or inf if the row holds one (or, rarely, if finite values
    # overflow it): n values to check, not a boolean copy of the panel.
    if np.isfinite(panel.sum(axis=1)).all():
        return panel
    bad = np.flatnonzero(~np.isfinite(panel).all(axis=1))
    if bad.size:
        row = int(bad[0])
        raise NonFiniteInputError(
            f"{what} contains NaN or infinite values (first in row {row}); remove or "
            "impute them first.")
    return panel


def refuse_gram_beyond_memory(n: int, X: da.Array) -> None:
    """Refuse an n x n float64 matrix (and a panel) that the memory available cannot hold."""
    needed = 8 * n * n
    budget = memory_budget(X)
    if needed + min(panel_bytes(X), 8 * n * X.shape[1]) > budget.free_bytes:
        raise InsufficientMemoryError(
            f"Exact kernel PCA of {n} samples needs the {n} x {n} kernel matrix in memory: "
            f"{format_bytes(needed)} as float64, plus a panel of the data, more than "
            f"{budget.describe()}. Use ExactKernelPCA(eigen_solver='matrix-free') (the same "
            "eigenpairs, the matrix never held) or kpca_dask.KernelPCA (Nyström, memory "
            "O(m^2)) instead.")


def gram_by_panels(X: da.Array, kernel, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(K, diagonal)``: the kernel matrix k(X, X) (n x n float64) and k(x, x), in one read.

    Examples
    --------
    >>> X = da.from_array(np.array([[1.0, 0.0], [0.0, 2.0]]), chunks=(1, 1))
    >>> K, diagonal = gram_by_panels(X, "linear", {})
    >>> K.tolist(), diagonal.tolist()
    ([[1.0, 0.0], [0.0, 4.0]], [1.0, 4.0])
    """
    n = X.shape[0]
    refuse_gram_beyond_memory(n, X)
    measure = feature_sum(kernel)
    sums = np.zeros((n, n), order="F")  # the lower triangle, as dsyrk adds in place
    norms = np.zeros(n)
    for a, b in column_ranges(X, panel_bytes(X)):
        panel = _panel(X, a, b, "X")
        if measure == SQUARED:
            panel -= panel.mean(axis=0)  # distances do not change; their digits are kept
        norms += np.einsum("ij,ij->i", panel, panel)
        if measure == CITYBLOCK:
            for start in range(0, n, _ROW_PANEL):
                rows = slice(start, start + _ROW_PANEL)
                sums[rows, : rows.stop] += cdist(panel[rows], panel[: rows.stop], "cityblock")
        else:
            sums = blas.dsyrk(1.0, panel.T, beta=1.0, c=sums, trans=1, lower=1,
                              overwrite_c=1)
        del panel
    # C order, the sums in its upper triangle: kernel rows are made in place, by row panels.
    K = sums.T
    _fill_lower_from_upper(K)
    for start in range(0, n, _ROW_PANEL):
        rows = slice(start, start + _ROW_PANEL)
        terms = np.column_stack([K[rows], norms[rows]])
        kernel_from_sums(K[rows], terms, norms, kernel, params)
    return K, diagonal_from_norms(norms, kernel, params)


def _fill_lower_from_upper(K: np.ndarray) -> None:
    """K's strictly lower triangle from its upper one, by row panels (K is C-ordered)."""
    n = K.shape[0]
    for start in range(0, n, _ROW_PANEL):
        stop = min(n, start + _ROW_PANEL)
        block = K[start:stop, start:stop]
        block[...] = np.triu(block) + np.triu(block, 1).T
        K[stop:, start:stop] = K[start:stop, stop:].T


def cross_kernel_by_panels(A, X: da.Array, kernel, params: dict
                           ) -> tuple[np.ndarray, np.ndarray]:
    """``(k(A, X), k(a, a))`` for rows ``A`` (numpy or dask) against lazy ``X``, one read of X.

    The panels are those of :func:`gram_by_panels`, so every sum is shifted
    the same way.

    Examples
    --------
    >>> X = da.from_array(np.array([[1.0, 0.0], [0.0, 2.0]]), chunks=(1, 1))
    >>> K, diagonal = cross_kernel_by_panels(np.array([[1.0, 1.0]]), X, "linear", {})
    >>> K.tolist(), diagonal.tolist()
    ([[1.0, 2.0]], [2.0])
    """
    measure = feature_sum(kernel)
    A = A if isinstance(A, da.Array) else da.from_array(np.asarray(A, np.float64))
    terms = np.zeros((A.shape[0], X.shape[0] + 2))
    norms = np.zeros(X.shape[0])
    for a, b in column_ranges(X, panel_bytes(X)):
        panel = _panel(X, a, b, "The training data")
        rows = _panel(A, a, b, "X")
        centre = panel.mean(axis=0) if measure == SQUARED else None
        terms += chunk_sums(rows, panel, centre, measure, np.float64)[:, 0]
        shifted = panel if centre is None else panel - centre
        norms += np.einsum("ij,ij->i", shifted, shifted)
        del panel, rows, shifted
    K = kernel_from_sums(np.empty((A.shape[0], X.shape[0])), terms, norms, kernel, params)
    return K, diagonal_from_norms(terms[:, X.shape[0]], kernel, params)
