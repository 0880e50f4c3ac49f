"""Row blocks stored as scipy.sparse matrices: the few operations the pass needs.

Text (TF-IDF, counts) and one-hot data are sparse and wide: a block of
16 000 rows of 10^5 features is 13 GB dense. The Nyström pass never needs
them dense: kernel blocks against the (dense, m x p) landmarks are sparse .
dense products plus row norms, and the checks for NaN/inf only look at the
stored values. The functions here accept dense numpy blocks too, so callers
need no branch of their own.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = ["is_sparse", "as_block", "dense", "row_norms_squared", "first_nonfinite",
           "cityblock_distances"]

#: Entries of the (nonzeros x landmarks) work array of :func:`cityblock_distances`.
_CITYBLOCK_WORK = 2**22


def is_sparse(x) -> bool:
    """Whether ``x`` is a scipy.sparse matrix or array.

    Examples
    --------
    >>> is_sparse(sparse.eye(2)), is_sparse(np.eye(2))
    (True, False)
    """
    return sparse.issparse(x)


def as_block(x):
    """A row block as CSR (sparse input, any format) or as a numpy array (anything else).

    Examples
    --------
    >>> as_block(sparse.coo_matrix(np.eye(2))).format
    'csr'
    """
    return x.tocsr() if sparse.issparse(x) else np.asarray(x)


def dense(x) -> np.ndarray:
    """``x`` as a numpy array: for the few rows (landmarks, samples of them) kept dense.

    Examples
    --------
    >>> dense(sparse.csr_matrix(np.eye(2)))
    array([[1., 0.],
           [0., 1.]])
    """
    return x.toarray() if sparse.issparse(x) else np.asarray(x)


def row_norms_squared(x) -> np.ndarray:
    """``|x_i|^2`` of every row, from the stored values alone for sparse rows.

    Examples
    --------
    >>> row_norms_squared(sparse.csr_matrix([[3.0, 4.0], [0.0, 0.0]]))
    array([25.,  0.])
    """
    if sparse.issparse(x):
        x = x.tocsr()
        return np.asarray(x.multiply(x).sum(axis=1), dtype=x.dtype).ravel()
    return np.einsum("ij,ij->i", x, x)


def first_nonfinite(x) -> tuple[int, int]:
    """Number of NaN/inf entries of a block and the first row holding one (-1 if none).

    For sparse rows only the stored values can be NaN or inf, so only they are read.

    Examples
    --------
    >>> first_nonfinite(sparse.csr_matrix([[1.0, 0.0], [0.0, np.nan]]))
    (1, 1)
    >>> first_nonfinite(np.ones((2, 2)))
    (0, -1)
    """
    if sparse.issparse(x):
        x = x.tocsr()
        bad = ~np.isfinite(x.data)
        if not bad.any():
            return 0, -1
        rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
        return int(bad.sum()), int(rows[bad].min())
    finite = np.isfinite(x)
    if finite.all():
        return 0, -1
    return int((~finite).sum()), int(np.flatnonzero(~finite.all(axis=1))[0])


def cityblock_distances(A, B: np.ndarray) -> np.ndarray:
    """L1 distances between sparse rows ``A`` and dense rows ``B``, never densifying A.

    Uses ``|a - b|_1 = |b|_1 + sum_{j : a_j != 0} (|a_j - b_j| - |b_j|)``: work
    proportional to the stored values of A times len(B), done in pieces of at
    most 2^22 entries. The subtraction loses about ``eps |b|_1`` in absolute terms,
    as the dense sum would lose ``eps |a - b|_1``; distances far below ``|b|_1`` are
    less accurate than with dense input.

    Examples
    --------
    >>> A = sparse.csr_matrix([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    >>> cityblock_distances(A, np.array([[0.0, 2.0, 0.0]]))
    array([[3.],
           [2.]])
    """
    A = A.tocsr()
    B = np.asarray(B, dtype=A.dtype)
    m = B.shape[0]
    columns = np.ascontiguousarray(B.T)  # p x m: the landmarks' values of one feature
    base = np.abs(B).sum(axis=1, dtype=np.float64)
    out = np.empty((A.shape[0], m), dtype=A.dtype)
    per_row = max(A.nnz / max(A.shape[0], 1), 1.0)
    step = max(1, int(_CITYBLOCK_WORK // (per_row * max(m, 1))))
    for start in range(0, A.shape[0], step):
        piece = A[start : start + step]
        block = np.empty((piece.shape[0], m), dtype=np.float64)
        block[:] = base
        if piece.nnz:
            values = columns[piece.indices]  # nnz x m
            change = np.abs(piece.data[:, None] - values) - np.abs(values)
            counts = np.diff(piece.indptr)
            stored = counts > 0
            block[stored] += np.add.reduceat(change, piece.indptr[:-1][stored], axis=0)
        np.maximum(block, 0.0, out=block)
        out[start : start + step] = block
    return out
