"""Sparse input: scipy.sparse matrices and ``.npz`` files written by ``scipy.sparse.save_npz``.

Zarr stores hold dense arrays only; wide sparse data (TF-IDF, counts, one-hot)
come as a scipy.sparse matrix in memory or saved with
``scipy.sparse.save_npz``. Either becomes a dask array of CSR row blocks with
a sparse meta, which the Nyström pass and transform read without densifying
(:mod:`kpca_dask.blocks.sparse_rows`). An ``.npz`` file is one compressed
archive, so it is read whole: it must fit in memory in its sparse form.
"""

from __future__ import annotations

import os
from pathlib import Path

import dask.array as da
from scipy import sparse

from ..errors import InvalidInputError, about
from ..validation import DEFAULT_BLOCK_ROWS

__all__ = ["is_sparse_source", "open_sparse"]

#: File extension of ``scipy.sparse.save_npz`` archives.
SPARSE_SUFFIX = ".npz"


def is_sparse_source(source) -> bool:
    """Whether ``source`` is a scipy.sparse matrix or the path of an ``.npz`` file.

    Examples
    --------
    >>> is_sparse_source("counts.npz"), is_sparse_source("data.zarr")
    (True, False)
    """
    if sparse.issparse(source):
        return True
    return (isinstance(source, (str, os.PathLike)) and "://" not in os.fspath(source)
            and Path(source).suffix == SPARSE_SUFFIX)


def open_sparse(source, *, block_rows: int = DEFAULT_BLOCK_ROWS) -> da.Array:
    """A dask array of CSR row blocks from a sparse matrix or a ``save_npz`` file.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> path = tempfile.mkdtemp() + "/x.npz"
    >>> sparse.save_npz(path, sparse.random(10, 4, density=0.5, format="csr"))
    >>> X = open_sparse(path, block_rows=4)
    >>> X.chunks, type(X._meta).__name__
    (((4, 4, 2), (4,)), 'csr_matrix')
    """
    if sparse.issparse(source):
        matrix = source
    else:
        text = os.fspath(source)
        if not os.path.exists(text):  # a builtin error: it names the file itself
            raise FileNotFoundError(f"No such file: {text!r}.")
        try:
            matrix = sparse.load_npz(text)
        except (ValueError, KeyError, OSError) as exc:
            with about(text):
                raise InvalidInputError(
                    f"not a sparse matrix saved with scipy.sparse.save_npz ({exc}). Save "
                    "sparse data with scipy.sparse.save_npz(path, X), or store dense data as "
                    "a Zarr array.") from None
    if matrix.ndim != 2:
        raise InvalidInputError(f"A sparse input must be 2-D; got shape {matrix.shape}.")
    matrix = matrix.tocsr()  # row blocks slice rows: CSR, whatever was saved
    rows = max(min(block_rows, matrix.shape[0]), 1)
    return da.from_array(matrix, chunks=(rows, matrix.shape[1]), asarray=False)
