"""The exact n x n kernel matrix of lazy data, summed over panels (docs/design.md §12, §19).

With few rows and many features (T-mode: n = 50 to ~3·10^4 samples of 10^4
to 10^7 features) the Gram matrix fits in memory while the data do not. Every
named kernel is a function of a sum over features
(:mod:`kpca_dask.blocks.feature_sums`), added in one of two ways:

* by column panels: a panel holds every row of a range of feature columns
  (whole stored chunks where they fit), read into one float64 array, added
  into the n x n sums by one symmetric rank-k update (BLAS ``dsyrk``, in
  place) or by L1 distances row panel by row panel, and released;
* by pairs of row panels (:func:`sums_by_row_panels`), for data stored in
  chunks along the samples (a field chunked along time), which a column panel
  would read once per panel: runs of whole row chunks held in the data's
  dtype, one read where a run holds them all.

:func:`gram_plan` takes the way that reads the data fewer times. Memory: the
n x n float64 matrix plus a panel or a run. The kernel's function is applied
last, row panel by row panel, in place.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from dask.utils import format_bytes
from scipy.linalg import blas
from scipy.spatial.distance import cdist

from ..._memory import memory_budget, process_room_bytes, release_freed_memory
from ..._parallel import read_scheduler
from ...blocks.feature_sums import (
    CITYBLOCK,
    INNER,
    SQUARED,
    chunk_sums,
    diagonal_from_norms,
    feature_sum,
    kernel_from_sums,
)
from ...errors import InsufficientMemoryError, NonFiniteInputError
from ..sampling import read_rows

__all__ = ["gram_by_panels", "cross_kernel_by_panels", "column_ranges", "panel_bytes",
           "gram_plan", "row_groups", "sums_by_row_panels", "inner_products",
           "gram_hold_bytes", "cross_inner_products", "FEATURE_PANEL", "float64_panel"]

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


#: Data beyond this many bytes are held at most half at once by a Gram pass.
HALF_FROM_BYTES = 2**28


def gram_hold_bytes(X: da.Array) -> int:
    """The most bytes of ``X`` a pass for its Gram matrix holds at once: an eighth of this
    process's room (at least 64 MiB), and at most half the data once they pass
    :data:`HALF_FROM_BYTES`.

    The runs of rows are held, and multiplied, in this process: on a cluster the client,
    to which the workers send the chunks they read, so its room sizes them, not a
    worker's (sized by a worker's, a 2.5 GB field on workers of 1.25 GiB was held 64 MiB
    at a time: 40 runs, 20 reads of the field). Holding half the data costs the row way
    half a read more than holding them all (docs/design.md §19) and halves what it holds;
    holding less saves less for the same cost again.

    Examples
    --------
    >>> import dask
    >>> X = da.zeros((1000, 10**6), dtype=np.float32)
    >>> with dask.config.set({"kpca-dask.memory-limit": "64 GiB"}):
    ...     gram_hold_bytes(X) == X.nbytes // 2
    True
    """
    here = max(2**26, process_room_bytes() // 8)
    return int(min(here, max(HALF_FROM_BYTES, X.nbytes // 2)))


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
    _refuse_non_finite(panel, 0, what)
    return panel


def _refuse_non_finite(rows: np.ndarray, first_row: int, what: str) -> None:
    """Raise :class:`~kpca_dask.errors.NonFiniteInputError` naming the first row (counted
    from ``first_row``) of ``rows`` that holds NaN or an infinity."""
    # A row's sum is NaN or inf if the row holds one (or, rarely, if finite values
    # overflow it): n values to check, not a boolean copy of the rows.
    suspect = np.flatnonzero(~np.isfinite(rows.sum(axis=1, dtype=np.float64)))
    bad = suspect[~np.isfinite(rows[suspect]).all(axis=1)]
    if bad.size:
        raise NonFiniteInputError(
            f"{what} contains NaN or infinite values (first in row {first_row + int(bad[0])});"
            " remove or impute them first.")


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

    The sums over features are added by column panels or by pairs of row
    panels, whichever :func:`gram_plan` finds reads the data fewer times.

    Examples
    --------
    >>> X = da.from_array(np.array([[1.0, 0.0], [0.0, 2.0]]), chunks=(1, 1))
    >>> K, diagonal = gram_by_panels(X, "linear", {})
    >>> K.tolist(), diagonal.tolist()
    ([[1.0, 0.0], [0.0, 4.0]], [1.0, 4.0])
    """
    n = X.shape[0]
    refuse_gram_beyond_memory(n, X)
    sums, norms, _ = _feature_sums(X, feature_sum(kernel))
    # C order, the sums in its upper triangle: kernel rows are made in place, by row panels.
    K = sums.T
    _fill_lower_from_upper(K)
    for start in range(0, n, _ROW_PANEL):
        rows = slice(start, start + _ROW_PANEL)
        terms = np.column_stack([K[rows], norms[rows]])
        kernel_from_sums(K[rows], terms, norms, kernel, params)
    return K, diagonal_from_norms(norms, kernel, params)


def inner_products(X: da.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(X Xᵀ, column sums)``: the n x n Gram matrix of lazy rows in float64 and the sum of
    each column, in one read of ``X`` by the way :func:`gram_plan` prefers.

    Examples
    --------
    >>> X = da.from_array(np.array([[1.0, 0.0], [1.0, 2.0]]), chunks=(1, 1))
    >>> A, column_sums = inner_products(X)
    >>> A.tolist(), column_sums.tolist()
    ([[1.0, 1.0], [1.0, 5.0]], [2.0, 2.0])
    """
    refuse_gram_beyond_memory(X.shape[0], X)
    sums, _, column_sums = _feature_sums(X, INNER)
    A = sums.T
    _fill_lower_from_upper(A)
    return A, column_sums


def _feature_sums(X: da.Array, measure: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The feature sums' n x n matrix (its lower triangle, F order), the rows' squared
    norms and the columns' sums, by column panels or pairs of row panels."""
    most = gram_hold_bytes(X)
    if measure != CITYBLOCK and gram_plan(X, most)[0] == "rows":
        sums, column_sums = sums_by_row_panels(X, most, shifted=measure == SQUARED)
        return sums, np.diag(sums).copy(), column_sums
    return _sums_by_column_panels(X, measure, most)


def _sums_by_column_panels(X: da.Array, measure: str, most_bytes: int
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_feature_sums` one column panel of ``X`` (at most ``most_bytes`` in float64)
    at a time."""
    n = X.shape[0]
    sums = np.zeros((n, n), order="F")  # the lower triangle, as dsyrk adds in place
    norms = np.zeros(n)
    column_sums = np.zeros(X.shape[1])
    for a, b in column_ranges(X, most_bytes):
        panel = _panel(X, a, b, "X")
        column_sums[a:b] = panel.sum(axis=0)
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
    if measure != CITYBLOCK:
        # A row's distance to itself from its own sum, as the row way gives it: exactly 0,
        # where the norm summed apart differs from the product by rounding (Matérn with
        # nu = 1/2 would turn 1e-12 into 1e-6 off its diagonal of 1).
        norms = np.diag(sums).copy()
    return sums, norms, column_sums


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
    if measure in (INNER, SQUARED) and gram_plan(X, gram_hold_bytes(X))[0] == "rows":
        return _cross_kernel_by_rows(A, X, kernel, params, measure)
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


def _cross_kernel_by_rows(A: da.Array, X: da.Array, kernel, params: dict, measure: str
                          ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cross_kernel_by_panels` the row way, for training rows stored in row chunks:
    runs of ``A`` held in their dtype, ``X`` read by runs of whole row chunks against each
    (once for one run of ``A``), each product in float64 feature panels. The squared
    distances see every row less the first run's mean (as the Gram matrix's row way)."""
    n = X.shape[0]
    a_starts = np.cumsum((0,) + tuple(A.chunks[0]))
    starts = np.cumsum((0,) + tuple(X.chunks[0]))
    terms = np.zeros((A.shape[0], n + 2))
    norms = np.zeros(n)
    shift = None
    for first, stop in row_groups(A, gram_hold_bytes(A)):
        held = _read_rows_of(A, first, stop, a_starts)
        if measure == SQUARED and shift is None:
            shift = held.mean(axis=0, dtype=np.float64)
        rows_of_a = slice(int(a_starts[first]), int(a_starts[stop]))
        terms[rows_of_a, n] = _squared_norms(held, shift)
        for a, b in _streamed_runs(X, 0, X.numblocks[0], gram_hold_bytes(X) // 8):
            rows = _read_rows_of(X, a, b, starts)
            terms[rows_of_a, int(starts[a]):int(starts[b])] = _products(held, rows, shift)
            if first == 0:
                norms[int(starts[a]):int(starts[b])] = _squared_norms(rows, shift)
            del rows
        del held
    K = kernel_from_sums(np.empty((A.shape[0], n)), terms, norms, kernel, params)
    return K, diagonal_from_norms(terms[:, n], kernel, params)


def _squared_norms(rows: np.ndarray, shift) -> np.ndarray:
    """|x - shift|^2 of each row in float64, one feature panel at a time."""
    out = np.zeros(rows.shape[0])
    for f in range(0, rows.shape[1], FEATURE_PANEL):
        panel = float64_panel(rows, f, shift)
        out += np.einsum("ij,ij->i", panel, panel)
    return out


# -- the row way: pairs of row panels, for data chunked along the samples ------------------

#: Feature columns turned into float64 at once by the row way's products and the Hilbert maps.
FEATURE_PANEL = 2048

#: Rows of a run that is not held are read this many bytes at once at least, and at most
#: (whole row chunks, an eighth of a held run in between): each read turns the held run
#: into float64 panels once more, so that the more rows it brings, the less that costs.
_STREAMED_BYTES = (2**26, 2**28)

#: Row chunks computed at once when a run is read: one for each thread of the machine.
_READ_AT_ONCE = 2


def row_groups(X: da.Array, most_bytes: int) -> list[tuple[int, int]]:
    """Runs of whole row chunks ``(first, stop)`` (chunk indices), each holding at most
    ``most_bytes`` of ``X``'s rows in their own dtype (at least one chunk a run).

    Examples
    --------
    >>> row_groups(da.zeros((10, 4), dtype=np.float32, chunks=(2, 4)), 2 * 4 * 4 * 3)
    [(0, 3), (3, 5)]
    """
    row_bytes = X.dtype.itemsize * max(X.shape[1], 1)
    groups: list[tuple[int, int]] = []
    first, held = 0, 0
    for index, rows in enumerate(X.chunks[0]):
        if index > first and held + rows * row_bytes > most_bytes:
            groups.append((first, index))
            first, held = index, 0
        held += rows * row_bytes
    groups.append((first, len(X.chunks[0])))
    return groups


def gram_plan(X: da.Array, most_bytes: int) -> tuple[str, float]:
    """``("rows" or "columns", reads)``: the way the Gram matrix of ``X`` is summed, and
    how many times that way reads each value of ``X`` on average.

    The column way reads every feature chunk a column panel touches, whole,
    once per panel; the row way holds runs of row chunks (:func:`row_groups`)
    in the data's own dtype and reads the data (G + 1) / 2 times for G runs. The
    fewer reads win; at equal reads, the way that holds less: a float64 column
    panel of every row, or a run of rows in their dtype (the runs, at equal
    bytes: the column way also joins the chunks of its panel in a copy;
    docs/design.md §19).

    Examples
    --------
    >>> X = da.zeros((100, 1000), dtype=np.float32, chunks=(10, 1000))
    >>> gram_plan(X, 8 * 100 * 250)
    ('rows', 1.5)
    >>> gram_plan(da.zeros((100, 1000), chunks=(100, 100)), 8 * 100 * 250)
    ('columns', 1.0)
    """
    ranges = column_ranges(X, most_bytes)
    edges = np.cumsum((0,) + tuple(X.chunks[1]))
    widths = np.diff(edges)
    touched = sum(int(widths[(edges[:-1] < b) & (edges[1:] > a)].sum()) for a, b in ranges)
    column_reads = touched / max(X.shape[1], 1)
    groups = row_groups(X, most_bytes)
    row_reads = (len(groups) + 1) / 2
    if row_reads == column_reads:
        held = X.dtype.itemsize * X.shape[1] * max(sum(X.chunks[0][i:j]) for i, j in groups)
        widest = 8 * X.shape[0] * max(b - a for a, b in ranges)
        return ("rows", row_reads) if held <= widest else ("columns", column_reads)
    return ("rows", row_reads) if row_reads < column_reads else ("columns", column_reads)


def sums_by_row_panels(X: da.Array, most_bytes: int, *, shifted: bool = False
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``(S, column sums)``: X Xᵀ in float64 (its lower triangle, F order) and the sum of
    each column, reading ``X`` by runs of whole row chunks.

    Each run (:func:`row_groups`) is held in the data's own dtype; its block of
    S is one symmetric rank-k update per feature panel, turned into float64 as
    it is used, and the runs after it are read a few chunks at a time for their
    blocks against it. With one run every chunk is read once; with G runs the
    data are read (G + 1) / 2 times. ``shifted``: every row less the mean of
    the first run's rows (distances do not change; their digits are kept).
    Memory: S, one run, a few chunks and two float64 panels.

    Examples
    --------
    >>> X = da.from_array(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), chunks=(1, 2))
    >>> S, column_sums = sums_by_row_panels(X, 16)
    >>> np.tril(S).tolist(), column_sums.tolist()
    ([[5.0, 0.0, 0.0], [11.0, 25.0, 0.0], [17.0, 39.0, 61.0]], [9.0, 12.0])
    """
    n, p = X.shape
    starts = np.cumsum((0,) + tuple(X.chunks[0]))
    sums = np.zeros((n, n), order="F")
    column_sums = np.zeros(p)
    shift = None
    groups = row_groups(X, most_bytes)
    for index, (first, stop) in enumerate(groups):
        held_rows = slice(int(starts[first]), int(starts[stop]))
        held = _read_rows_of(X, first, stop, starts)
        column_sums += held.sum(axis=0, dtype=np.float64)
        if shifted and shift is None:
            shift = column_sums / held.shape[0]
        _add_own_block(sums, held_rows, held, shift)
        for later_first, later_stop in groups[index + 1:]:
            for a, b in _streamed_runs(X, later_first, later_stop, most_bytes // 8):
                rows = _read_rows_of(X, a, b, starts)
                sums[int(starts[a]):int(starts[b]), held_rows] = _products(rows, held, shift)
                del rows
        del held
    return sums, column_sums


def _add_own_block(sums: np.ndarray, rows: slice, held: np.ndarray, shift) -> None:
    """The block of S of ``held``'s rows with themselves (its lower triangle), in place."""
    whole = rows.start == 0 and rows.stop == sums.shape[0]
    block = sums if whole else np.zeros((held.shape[0],) * 2, order="F")
    for f in range(0, held.shape[1], FEATURE_PANEL):
        panel = float64_panel(held, f, shift)
        block = blas.dsyrk(1.0, panel.T, beta=1.0, c=block, trans=1, lower=1, overwrite_c=1)
    if not whole:
        sums[rows, rows] = block


def _products(left: np.ndarray, right: np.ndarray, shift) -> np.ndarray:
    """left rightᵀ in float64 (rows less ``shift``), one feature panel at a time."""
    out = np.zeros((left.shape[0], right.shape[0]))
    for f in range(0, left.shape[1], FEATURE_PANEL):
        out += float64_panel(left, f, shift) @ float64_panel(right, f, shift).T
    return out


def float64_panel(rows: np.ndarray, first: int, shift=None) -> np.ndarray:
    """Columns first:first + :data:`FEATURE_PANEL` of ``rows`` in float64, less ``shift``
    (None: nothing): the products of rows in their own dtype are summed in float64 one such
    panel at a time, never through a float64 copy of the rows.

    Examples
    --------
    >>> float64_panel(np.ones((2, 3), np.float32), 1, np.array([0.0, 0.5, 0.5])).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    panel = rows[:, first:first + FEATURE_PANEL].astype(np.float64)
    if shift is not None:
        panel -= shift[first:first + FEATURE_PANEL]
    return panel


def _streamed_runs(X: da.Array, first: int, stop: int, most_bytes: int
                   ) -> list[tuple[int, int]]:
    """Row chunks first:stop in runs of about ``most_bytes``, within :data:`_STREAMED_BYTES`
    (one chunk at least)."""
    least, most = _STREAMED_BYTES
    runs = row_groups(X.blocks[first:stop], min(most, max(least, most_bytes)))
    return [(first + a, first + b) for a, b in runs]


def _read_rows_of(X: da.Array, first: int, stop: int, starts: np.ndarray) -> np.ndarray:
    """Row chunks first:stop of ``X`` in one array of its dtype, a few chunks computed at a
    time (no concatenated copy of the run), NaN and infinities refused by row."""
    out = np.empty((int(starts[stop] - starts[first]), X.shape[1]), X.dtype)
    at = 0
    for a in range(first, stop, _READ_AT_ONCE):
        chunks = dask.compute(*(X.blocks[k] for k in range(a, min(stop, a + _READ_AT_ONCE))),
                              scheduler=read_scheduler())
        for chunk in chunks:
            out[at:at + chunk.shape[0]] = chunk
            at += chunk.shape[0]
        del chunks
        release_freed_memory()  # the chunks' decoded copies, kept in the threads' arenas
    _refuse_non_finite(out, int(starts[first]), "X")
    return out


def cross_inner_products(A: da.Array, X: da.Array) -> np.ndarray:
    """A Xᵀ (n_A x n float64) for lazy rows ``A`` and ``X`` of the same features: ``A`` read
    and held in its dtype, ``X`` read once, by runs of whole row chunks (as the row way
    reads the runs it does not hold), each product in float64 feature panels.

    Examples
    --------
    >>> X = da.from_array(np.array([[1.0, 0.0], [1.0, 2.0], [0.0, 3.0]]), chunks=(1, 2))
    >>> cross_inner_products(X[:1], X).tolist()
    [[1.0, 1.0, 0.0]]
    """
    held = _read_rows_of(A, 0, A.numblocks[0], np.cumsum((0,) + tuple(A.chunks[0])))
    starts = np.cumsum((0,) + tuple(X.chunks[0]))
    out = np.zeros((held.shape[0], X.shape[0]))
    for a, b in _streamed_runs(X, 0, X.numblocks[0], gram_hold_bytes(X) // 8):
        rows = _read_rows_of(X, a, b, starts)
        out[:, int(starts[a]):int(starts[b])] = _products(held, rows, None)
        del rows
    return out
