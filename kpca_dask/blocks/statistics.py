"""Row blocks of the Nyström pass, in numpy: their kernel rows, summed in place.

For a block X_b of rows and the landmarks Z (docs/design.md §2)::

    n += n_b,  s += D_b^T 1,  G += D_b^T D_b,  t += sum_i k(x_i, x_i)

with B_b = k(X_b, Z) and D_b = B_b - 1 r^T, the kernel rows shifted by the
reference row r (see :mod:`kpca_dask.engine.solve.nystrom`). The sums are a
:class:`RunningStatistics`, one per chain of blocks of the pass
(:mod:`kpca_dask.engine.passes.nystrom`), added to in place: G is the one m x m
float64 array of a chain, whatever the number of its blocks (docs/design.md
§11). The kernel rows are made one cache-sized sub-block at a time by the
compiled epilogue (docs/design.md §8); nothing here knows about dask.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from .._compat import meta_of
from .._memory import SizedByFields
from .._parallel import blas_limit, in_ordered_threads
from ..errors import InvalidInputError
from .kernels import is_translation_invariant, kernel_diagonal, kernel_name
from .landmark_kernel import LandmarkKernel
from .rank_update import accepts, syrk_lower
from .sparse_rows import as_block, first_nonfinite, is_sparse
from .workspace import BlockWorkspace

__all__ = ["PassStatistics", "RunningStatistics", "statistics_of_block", "merge_running",
           "finish_statistics", "add_statistics", "combine_statistics", "add_gram",
           "kernel_rows_into", "fill_upper", "pass_block_rows",
           "kernel_block_rows", "cache_block_rows", "even_block_rows", "kernel_origin",
           "shifted_to_origin"]


@dataclass(frozen=True)
class PassStatistics(SizedByFields):
    """What one pass over the data returns: sizes m and m x m only."""

    n_samples: int
    column_sums: np.ndarray  # s = sum_b D_b^T 1, shape (m,)
    gram: np.ndarray  # G = sum_b D_b^T D_b, shape (m, m)
    diagonal_sum: float  # t = sum_i k(x_i, x_i)
    n_nonfinite: int  # NaN/inf entries found in the data
    first_nonfinite_row: int  # global row of the first one, -1 if none
    reference: np.ndarray  # r: D_b = B_b - 1 r^T (kpca_dask.engine.solve.nystrom), shape (m,)
    # sum_i x_i, shape (p,), for the linear kernel: with t, the exact centred trace
    # t - |sum x|^2 / n (docs/design.md §2); None where the pass did not add them up.
    feature_sums: np.ndarray | None = None


@dataclass
class RunningStatistics:
    """The sums of the row blocks counted so far, added to in place.

    ``gram`` holds the lower triangle of G = sum D_b^T D_b in Fortran order (the
    layout BLAS's rank-k update writes in place); :meth:`finished` fills the
    upper one and returns the :class:`PassStatistics`.

    Maintenance note: a chain of the pass hands its accumulator from one task
    to the next, and each task adds to the array it received rather than to a
    copy (a copy per block would be m^2 words each). That is safe because each
    accumulator is the input of exactly one task: dask releases it once that
    task has run, a lost worker recomputes the chain from its start, and no
    task reads an accumulator after handing it on. For the same reason dask
    sizes it as a small object, unlike :class:`PassStatistics`
    (:class:`~kpca_dask._memory.SizedByFields`): for a moment the worker holds
    it under two keys.
    """

    reference: np.ndarray  # r, (m,)
    gram: np.ndarray  # lower triangle of G, (m, m), Fortran order
    column_sums: np.ndarray  # s, (m,)
    n_samples: int = 0
    diagonal_sum: float = 0.0
    n_nonfinite: int = 0
    first_nonfinite_row: int = -1
    feature_sums: np.ndarray | None = None  # sum_i x_i (linear kernel), (p,)
    # The chain's kernel block buffers, for its next task (kpca_dask.blocks.workspace);
    # not part of the sums, and never pickled.
    workspace: BlockWorkspace | None = field(default=None, repr=False, compare=False)

    def __reduce__(self):
        """The sums without the workspace: a chain moved to another process makes its own."""
        return _rebuilt, (type(self), {kept.name: getattr(self, kept.name)
                                       for kept in fields(self) if kept.name != "workspace"})

    @classmethod
    def empty(cls, reference: np.ndarray) -> "RunningStatistics":
        """No rows yet: zero sums for the m landmarks of ``reference``."""
        m = reference.shape[0]
        return cls(np.asarray(reference, np.float64), np.zeros((m, m), order="F"), np.zeros(m))

    def count_nonfinite(self, n_bad: int, row: int) -> "RunningStatistics":
        """Count ``n_bad`` rows with a NaN or an infinity, the first at global ``row``; returns
        self (a block with one is not added: the fit stops at its error, which names it)."""
        self.n_nonfinite += n_bad
        self.first_nonfinite_row = (row if self.first_nonfinite_row < 0
                                    else min(row, self.first_nonfinite_row))
        return self

    def add(self, other: "RunningStatistics") -> "RunningStatistics":
        """Add another chain's sums to these, in place; returns self. Both chains have made
        their last blocks: their workspaces are freed."""
        self.workspace = other.workspace = None
        self.gram += other.gram
        self.column_sums += other.column_sums
        self.n_samples += other.n_samples
        self.diagonal_sum += other.diagonal_sum
        self.feature_sums = summed_features(self.feature_sums, other.feature_sums)
        rows = [row for row in (self.first_nonfinite_row, other.first_nonfinite_row) if row >= 0]
        self.first_nonfinite_row = min(rows) if rows else -1
        self.n_nonfinite += other.n_nonfinite
        return self

    def finished(self) -> PassStatistics:
        """The sums as :class:`PassStatistics`, G made symmetric in place (no copy)."""
        self.workspace = None  # the chain's buffers, freed before the m x m work
        fill_upper(self.gram)
        return PassStatistics(self.n_samples, self.column_sums, self.gram, self.diagonal_sum,
                              self.n_nonfinite, self.first_nonfinite_row, self.reference,
                              self.feature_sums)


def _rebuilt(cls, values: dict):
    """An unpickled accumulator: its fields by name (``RunningStatistics.__reduce__``)."""
    return cls(**values)


def summed_features(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """Two parts' feature sums added (into ``a``, which its owner hands over), or None when
    either part has none: the sum of some of the rows is no sum of them all.

    Examples
    --------
    >>> summed_features(np.ones(2), np.ones(2)).tolist(), summed_features(np.ones(2), None)
    ([2.0, 2.0], None)
    """
    if a is None or b is None:
        return None
    a += b
    return a


def add_feature_sums(running: "RunningStatistics", x) -> None:
    """Add a block's rows to the feature sums, and their squared norms to t in float64:
    the linear kernel's exact centred trace ``t - |sum x|^2 / n`` then loses no digits to
    float32 norms (docs/design.md §2)."""
    if is_sparse(x):
        sums = np.asarray(x.sum(axis=0, dtype=np.float64)).ravel()
        squares = float(x.multiply(x).sum(dtype=np.float64))
    else:
        sums = x.sum(axis=0, dtype=np.float64)
        squares = float(np.einsum("ij,ij->", x, x, dtype=np.float64))
    running.feature_sums = sums if running.feature_sums is None else running.feature_sums + sums
    running.diagonal_sum += squares


def counted_rows(running: "RunningStatistics", block, row_offset: int, kernel, params: dict,
                 origin, dtype, *, totals: bool = True):
    """A block's rows as the kernel sees them (shifted to ``origin``, in ``dtype``), with its
    count, its NaN/inf rows and (``totals``) its part of t added to ``running``; None for a
    block with a NaN or an infinity, which is not added.

    t is the linear kernel's rows and float64 squares (its exact centred trace, before any
    shift or cast), or any other kernel's diagonal of the rows as its blocks see them
    (docs/design.md §2). The row pass, the tiled pass and the coupled pass start each block
    here.

    Examples
    --------
    >>> running = RunningStatistics.empty(np.zeros(1))
    >>> counted_rows(running, np.ones((2, 3)), 0, "linear", {}, None, np.float64).shape
    (2, 3)
    >>> running.n_samples, running.diagonal_sum, running.feature_sums.tolist()
    (2, 6.0, [2.0, 2.0, 2.0])
    """
    x = as_block(block)  # scipy.sparse rows stay sparse (CSR)
    running.n_samples += x.shape[0]
    n_bad, first_bad = first_nonfinite(x)
    if n_bad:
        running.count_nonfinite(n_bad, int(row_offset + first_bad))
        return None
    linear = kernel_name(kernel) == "linear"
    if totals and linear:
        add_feature_sums(running, x)
    x = shifted_to_origin(x, origin).astype(dtype, copy=False)
    if totals and not linear:
        running.diagonal_sum += float(kernel_diagonal(x, kernel, **params).sum(dtype=np.float64))
    return x


#: Columns of fill_upper's panels: its temporaries stay in cache. At m = 1000 the copy took
#: 1.1 ms in panels of 128 columns against 6.6 ms in one panel; at m = 8000, 124-132 ms
#: from 64 to 524 columns.
FILL_PANEL_COLUMNS = 128


def fill_upper(gram: np.ndarray) -> None:
    """Copy the lower triangle of a Fortran-ordered square array onto its upper, by panels
    (in place: no second m x m array).

    Examples
    --------
    >>> A = np.asfortranarray([[1.0, 0.0], [2.0, 3.0]])
    >>> fill_upper(A)
    >>> A.tolist()
    [[1.0, 2.0], [2.0, 3.0]]
    """
    m = gram.shape[0]
    step = FILL_PANEL_COLUMNS
    for start in range(0, m, step):
        stop = min(m, start + step)
        block = gram[start:stop, start:stop]
        block[...] = np.tril(block) + np.tril(block, -1).T
        gram[start:stop, stop:] = gram[stop:, start:stop].T


def statistics_of_block(running, block, row_offset, landmarks, kernel, params, dtype, reference,
                        origin=None, blas_threads=None, block_bytes=None, keep_buffers=True):
    """Add one row block's statistics to ``running`` (None: start a chain) and return it.

    Module level, so the dashboard names the task; ``blas_threads`` is the
    chain's share of the cores (docs/design.md §8), ``block_bytes`` the most
    a kernel block may take (default :data:`KERNEL_BLOCK_BYTES`; the pass
    sets it from the worker's memory, docs/guide/memory.md), a float64 block
    less at small m (:func:`pass_block_rows`). ``keep_buffers``:
    the kernel block's buffers go on to the chain's next task
    (:mod:`kpca_dask.blocks.workspace`), as on the local pool, where a chain has a
    thread of its own; else they are freed with the task.
    """
    if running is None:
        running = RunningStatistics.empty(reference)
    x = counted_rows(running, block, row_offset, kernel, params, origin, dtype)
    if x is None:
        return running
    m = landmarks.shape[0]
    shift = reference.astype(dtype, copy=False)
    # A stored chunk may hold 10^5 rows or more: kernel blocks of bounded size
    # keep a task's memory O(rows x m) whatever the chunking, and keep float32
    # sums short before they are added up in float64.
    rows = even_block_rows(x.shape[0], pass_block_rows(m, dtype, block_bytes))
    if running.workspace is None:
        running.workspace = BlockWorkspace()
    buffer, scratch = running.workspace.arrays(min(rows, x.shape[0]), m, dtype)
    kernel_rows = LandmarkKernel(landmarks, kernel, params, dtype)
    with blas_limit(blas_threads):
        for start in range(0, x.shape[0], rows):
            D = kernel_rows_into(buffer[: min(rows, x.shape[0] - start)],
                                  x[start : start + rows], kernel_rows, shift,
                                  running.column_sums)
            add_gram(running.gram, D, scratch, threads=blas_threads or 1)
    if not keep_buffers:
        running.workspace = None
    return running


def merge_running(*chains: RunningStatistics) -> RunningStatistics:
    """The sums of several chains, added into the first in place: a node of the pass's tree."""
    for chain in chains[1:]:
        chains[0].add(chain)
    return chains[0]


def finish_statistics(running: RunningStatistics) -> PassStatistics:
    """The pass's result: :meth:`RunningStatistics.finished`, as a named task."""
    return running.finished()


#: Bytes of the product of one column panel of a block, added to G at a time.
PANEL_BYTES = 2**25


def add_gram(gram: np.ndarray, D: np.ndarray, scratch: np.ndarray | None = None,
             threads: int = 1) -> None:
    """``gram += D^T D`` on the lower triangle of the Fortran-ordered float64 ``gram``.

    float64 rows (and a column-major ``gram``): one BLAS ``syrk`` into ``gram``
    (:mod:`kpca_dask.blocks.rank_update`). float32 rows with a ``scratch`` (an m x m
    Fortran-ordered float32 array, its content overwritten): one float32 ``syrk`` into
    it, then its lower triangle added into the float64 sums, a column panel at a time.
    Otherwise one column panel at a time, the panel's product with itself and with the
    columns after it (numpy's products, which release the GIL, as the ``syrk`` does),
    each added into the sums at once, so no second m x m array exists. float32 rows are
    summed in float32 within the block either way, as one float32 rank-k update sums
    them. ``threads`` add the scratch's panels into G side by side (a chain running
    alone has the cores: at m = 10^4, 0.044 s a block on two against 0.087 s on one);
    each entry is added once, so the sums do not depend on them.

    Examples
    --------
    >>> G = np.zeros((2, 2), order="F")
    >>> add_gram(G, np.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> np.tril(G)
    array([[10.,  0.],
           [14., 20.]])
    >>> G32 = np.zeros((2, 2), order="F")
    >>> add_gram(G32, np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
    ...          scratch=np.empty((2, 2), np.float32, order="F"))
    >>> bool(np.array_equal(np.tril(G32), np.tril(G)))
    True
    """
    m = D.shape[1]
    width = max(64, PANEL_BYTES // (D.dtype.itemsize * max(m, 1)))
    if accepts(D, gram):
        syrk_lower(D, gram)
        return
    if scratch is not None and accepts(D, scratch):
        syrk_lower(D, scratch, beta=0.0)

        def add_panel(start: int) -> None:  # syrk wrote the scratch's lower triangle only
            stop = min(m, start + width)
            gram[start:stop, start:stop] += np.tril(scratch[start:stop, start:stop])
            gram[stop:, start:stop] += scratch[stop:, start:stop]

        for _ in in_ordered_threads(add_panel, range(0, m, width), threads):
            pass
        return
    for start in range(0, m, width):
        stop = min(m, start + width)
        panel = D[:, start:stop]
        gram[start:stop, start:stop] += panel.T @ panel
        if stop < m:
            gram[stop:, start:stop] += D[:, stop:].T @ panel


#: Bytes of one kernel block inside a task (rows x m) where memory is plentiful: 128 MiB.
KERNEL_BLOCK_BYTES = 2**27

#: Rows of a kernel block are kept between these: fewer make BLAS slow, more
#: gain nothing once the block is far larger than the caches.
KERNEL_BLOCK_ROWS = (256, 65_536)


def kernel_block_rows(n_landmarks: int, itemsize: int = 8, block_bytes: int | None = None) -> int:
    """Rows of data per kernel block: ``block_bytes`` of kernel values (default 128 MiB),
    but 256 to 65 536 rows.

    Examples
    --------
    >>> kernel_block_rows(1000), kernel_block_rows(4096), kernel_block_rows(10)
    (16777, 4096, 65536)
    >>> kernel_block_rows(10_000, itemsize=4)  # float32: twice the rows in the same bytes
    3355
    >>> kernel_block_rows(1000, block_bytes=2**23)  # a small worker's share: 8 MiB
    1048
    """
    most = KERNEL_BLOCK_BYTES if block_bytes is None else block_bytes
    low, high = KERNEL_BLOCK_ROWS
    return int(min(high, max(low, most // (itemsize * max(n_landmarks, 1)))))


#: A float64 kernel block goes into G by one ``syrk`` with no scratch to add in
#: (:func:`add_gram`), whose rate does not grow with the block's rows: 2.76-2.89 s per
#: 200 000 rows from 512 to 16 777 rows at m = 1000 (one thread). So while 8 MiB hold at
#: least 1024 rows (m <= 1024) the block takes at most that and stays in cache, from the
#: epilogue that writes it to the ``syrk`` that reads it, and no new memory is mapped for
#: it: a fit at m = 1000 (200 000 x 32 rows, two chains, Intel Xeon) took 1.82-1.84 s in
#: 2-8 MiB blocks against 2.02 s in 128 MiB ones. A larger m keeps the general rule.
DIRECT_BLOCK_BYTES = 2**23
DIRECT_BLOCK_MIN_ROWS = 1024


def pass_block_rows(n_landmarks: int, dtype, block_bytes: int | None = None) -> int:
    """The most rows of one kernel block of the pass: :func:`kernel_block_rows`, and for
    float64 blocks :data:`DIRECT_BLOCK_BYTES` at most while those hold
    :data:`DIRECT_BLOCK_MIN_ROWS` rows or more.

    Examples
    --------
    >>> pass_block_rows(1000, np.float64), pass_block_rows(100, np.float64)
    (1048, 10485)
    >>> pass_block_rows(1000, np.float32)  # a float32 scratch per block: the general rule
    33554
    >>> pass_block_rows(10_000, np.float64) == kernel_block_rows(10_000)  # so at larger m
    True
    """
    dtype = np.dtype(dtype)
    most = kernel_block_rows(n_landmarks, dtype.itemsize, block_bytes)
    direct = DIRECT_BLOCK_BYTES // (8 * max(n_landmarks, 1))
    if dtype == np.float64 and direct >= DIRECT_BLOCK_MIN_ROWS:
        return min(most, direct)
    return most


#: Bytes of a sub-block whose elementwise kernel steps run while it sits in
#: the cache: the same steps over 2e8 float64 values took 0.87 s in
#: 16 384-row blocks and 0.36 s in 512-row blocks (docs/design.md §8).
CACHE_BLOCK_BYTES = 2**20


#: The fewest rows of a kernel sub-block: each GEMM packs the m landmarks again, so fewer
#: rows pay that for little work. At m = 10^4 (float32, one thread, Intel Xeon) a block's
#: kernel rows took 3.0 ns a value in 26-row sub-blocks (1 MiB), 2.0 in 256 and 512. Never
#: past :data:`CACHE_BLOCK_MOST_BYTES` for that, whatever m.
CACHE_BLOCK_MIN_ROWS = 256
CACHE_BLOCK_MOST_BYTES = 2**25


def cache_block_rows(n_landmarks: int, itemsize: int) -> int:
    """Rows of a kernel sub-block of ~1 MiB, whose elementwise work stays in cache, but at
    least :data:`CACHE_BLOCK_MIN_ROWS` while they take at most 32 MiB.

    Examples
    --------
    >>> cache_block_rows(100, 8), cache_block_rows(1000, 8), cache_block_rows(10**4, 4)
    (1310, 256, 256)
    >>> cache_block_rows(10**5, 8), cache_block_rows(10**6, 8)  # 32 MiB, then 1 MiB's 16 rows
    (41, 16)
    """
    m_bytes = itemsize * max(n_landmarks, 1)
    least = min(CACHE_BLOCK_MIN_ROWS, CACHE_BLOCK_MOST_BYTES // m_bytes)
    return int(max(16, least, CACHE_BLOCK_BYTES // m_bytes))


def even_block_rows(n_rows: int, most: int) -> int:
    """Rows per block when ``n_rows`` are cut into equal blocks of at most ``most``.

    Equal blocks keep every SYRK large: 20 000 rows in blocks of at most
    16 777 are two blocks of 10 000, not 16 777 and a thin 3 223.

    Examples
    --------
    >>> even_block_rows(20_000, 16_777), even_block_rows(100, 16_777), even_block_rows(0, 10)
    (10000, 100, 1)
    """
    n_blocks = max(1, -(-n_rows // most))
    return max(1, -(-n_rows // n_blocks))


def kernel_rows_into(out, x, kernel_rows: LandmarkKernel, shift=None, column_sums=None):
    """``out = k(x, Z) - 1 shift^T``, one cache-sized sub-block at a time (docs/design.md §8).

    The kernel GEMM, the exp and the shift of a sub-block, and its column
    sums into ``column_sums`` (float64), all run while it is in cache; only
    the caller's SYRK or product then reads the whole block.
    """
    step = cache_block_rows(out.shape[1], out.dtype.itemsize)
    for start in range(0, x.shape[0], step):
        # The compiled epilogue adds each value to the float64 column sums as it
        # is made: no second pass, and no sum in the block's dtype.
        kernel_rows.into(out[start : start + step], x[start : start + step], shift, column_sums)
    return out


def shifted_to_origin(x, origin):
    """``x - origin`` (``x`` itself when origin is None), refusing sparse blocks to shift."""
    # Translation-invariant kernels see x - origin, computed in float64 before
    # any cast to float32: data such as 1e6 + N(0, 1) keep their digits.
    if origin is not None and is_sparse(x):
        raise InvalidInputError(
            "A block of X is a scipy.sparse matrix but the dask array's meta is dense, so "
            "it was prepared for dense blocks. Give the array a sparse meta, e.g. "
            "da.from_array(X_csr, chunks=(rows, -1), asarray=False) or "
            "map_blocks(..., meta=scipy.sparse.csr_matrix((0, 0))).")
    return x if origin is None else x - origin


def kernel_origin(landmarks: np.ndarray, kernel, X=None) -> np.ndarray | None:
    """The point both data and landmarks are shifted by (None: no shift).

    A kernel of x - y alone (rbf, laplacian, matern) is unchanged by a common
    shift; shifting to the landmark mean keeps its distances accurate for
    data far from the origin, in float32 too. Sparse data (``X`` with a
    scipy.sparse meta) are never shifted: x - origin would be dense.
    """
    if not is_translation_invariant(kernel) or (X is not None and is_sparse(meta_of(X))):
        return None
    return np.asarray(landmarks).mean(axis=0, dtype=np.float64)  # no float64 copy of Z


def add_statistics(into: PassStatistics, other: PassStatistics) -> PassStatistics:
    """``into`` plus ``other``, added into ``into``'s arrays (which the caller owns).

    Examples
    --------
    >>> a = PassStatistics(2, np.ones(1), np.ones((1, 1)), 2.0, 0, -1, np.zeros(1))
    >>> add_statistics(a, a).gram, a.gram  # a's arrays now hold the sum
    (array([[2.]]), array([[2.]]))
    """
    np.add(into.gram, other.gram, out=into.gram)
    np.add(into.column_sums, other.column_sums, out=into.column_sums)
    bad_rows = [p.first_nonfinite_row for p in (into, other) if p.first_nonfinite_row >= 0]
    return PassStatistics(into.n_samples + other.n_samples, into.column_sums, into.gram,
                          into.diagonal_sum + other.diagonal_sum,
                          into.n_nonfinite + other.n_nonfinite,
                          min(bad_rows) if bad_rows else -1, into.reference,
                          summed_features(into.feature_sums, other.feature_sums))


def combine_statistics(*parts):
    """Add partial statistics: one node of the tree reduction, or a running total."""
    bad_rows = [p.first_nonfinite_row for p in parts if p.first_nonfinite_row >= 0]
    gram = parts[0].gram.copy()
    column_sums = parts[0].column_sums.copy()
    features = None if parts[0].feature_sums is None else parts[0].feature_sums.copy()
    for p in parts[1:]:
        gram += p.gram
        column_sums += p.column_sums
        features = summed_features(features, p.feature_sums)
    return PassStatistics(
        n_samples=sum(p.n_samples for p in parts),
        column_sums=column_sums,
        gram=gram,
        diagonal_sum=float(sum(p.diagonal_sum for p in parts)),
        n_nonfinite=sum(p.n_nonfinite for p in parts),
        first_nonfinite_row=min(bad_rows) if bad_rows else -1,
        reference=parts[0].reference,
        feature_sums=features,
    )
