"""The dask graph of wide data: kernel terms summed over feature chunks (docs/design.md §12).

Data chunked along the features are used as they are stored. Each chunk
(row block i, feature chunk c) becomes one task that reads it and makes its
terms against the landmarks' panel c
(:func:`kpca_dask.blocks.feature_sums.chunk_sums`); the read and the terms
are one blockwise layer, so dask fuses them into one task, and a task holds
one chunk, one panel and rows x m floats. The terms of a row block are then
added over its feature chunks by a tree (``dask.array.sum``), giving one
(rows, m + 2) float64 block per row block: what the pass's chains, the
projection and the novelty score take in place of rows
(:mod:`kpca_dask.blocks.wide_rows`).

The landmarks are shared as panels aligned with the data's feature chunks,
views of the model's array in its own dtype, each shared once
(:mod:`kpca_dask.engine.graph_values`), and each task picks its own: no task
makes a copy of the m x p landmarks. Row blocks whose m + 2 terms would
exceed a task's share of memory are split first (a split, not a read of more
data).
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ..._memory import memory_budget
from ..._parallel import task_blas_limit, with_own_inputs_locally
from ...blocks.feature_sums import chunk_sums, feature_sum, landmark_norms
from ...blocks.kernels import kernel_name
from ...blocks.statistics import kernel_origin
from ..graph_values import shared_values

__all__ = ["WideTerms", "is_wide", "landmark_panels", "split_row_blocks",
           "split_parts", "chunk_terms_at", "chunk_terms_and_moments_at", "split_slice"]


def is_wide(X: da.Array, kernel) -> bool:
    """Whether ``X`` is chunked along its features and ``kernel`` can be summed over them.

    Examples
    --------
    >>> is_wide(da.zeros((4, 6), chunks=(2, 3)), "rbf"), is_wide(da.zeros((4, 6)), "rbf")
    (True, False)
    """
    return X.ndim == 2 and X.numblocks[1] > 1 and feature_sum(kernel) is not None


def landmark_panels(X: da.Array, landmarks: np.ndarray) -> list[np.ndarray]:
    """Views of the landmarks' columns of each feature chunk of ``X`` (no copies).

    Examples
    --------
    >>> [p.shape for p in landmark_panels(da.zeros((4, 6), chunks=(2, 4)), np.ones((3, 6)))]
    [(3, 4), (3, 2)]
    """
    edges = np.cumsum((0,) + X.chunks[1])
    return [landmarks[:, a:b] for a, b in zip(edges[:-1], edges[1:])]


def chunk_terms_at(block, panels, origins, measure, products_dtype, block_info=None):
    """:func:`~kpca_dask.blocks.feature_sums.chunk_sums` of the chunk against its own panel."""
    j = block_info[0]["chunk-location"][1]
    with task_blas_limit():  # dask threads x BLAS threads <= cores
        return chunk_sums(block, panels[j], None if origins is None else origins[j], measure,
                          products_dtype)


def chunk_terms_and_moments_at(block, panels, origins, measure, products_dtype,
                               block_info=None):
    """:func:`chunk_terms_at` and the chunk's float64 column sums and sum of squares, as a
    pair: the linear kernel's exact total (docs/design.md §2) from the same read."""
    terms = chunk_terms_at(block, panels, origins, measure, products_dtype, block_info)
    x = np.asarray(block)
    moments = np.empty((1, x.shape[1] + 1))
    moments[0, :-1] = x.sum(axis=0, dtype=np.float64)
    moments[0, -1] = np.einsum("ij,ij->", x, x, dtype=np.float64)
    return terms, moments


def split_row_blocks(X: da.Array, width: int, most_bytes: int) -> da.Array:
    """``X`` with row blocks cut so that ``width`` float64 terms per row fit ``most_bytes``.

    Examples
    --------
    >>> split_row_blocks(da.zeros((100, 4), chunks=(100, 2)), 402, 8 * 402 * 30).chunks[0]
    (25, 25, 25, 25)
    """
    parts = split_parts(X.chunks[0], width, most_bytes)
    if all(count == 1 for count in parts):
        return X
    rows = []
    for size, count in zip(X.chunks[0], parts):
        rows += [size // count + (1 if k < size % count else 0) for k in range(count)]
    return X.rechunk({0: tuple(rows)})


def split_parts(row_chunks: tuple, width: int, most_bytes: int) -> list[int]:
    """Into how many blocks :func:`split_row_blocks` cuts each row block.

    Examples
    --------
    >>> split_parts((100, 10), 402, 8 * 402 * 30)
    [4, 1]
    """
    most = max(1, most_bytes // (8 * max(width, 1)))
    return [max(1, -(-int(size) // most)) for size in row_chunks]


class WideTerms:
    """The summed feature terms of every row block of ``X`` against the landmarks.

    ``terms`` is a lazy (n, m + 2) float64 dask array with one chunk of
    columns per row block (see the module docstring); ``norms`` the landmarks'
    squared norms ``|z - o|^2``, computed here by panels; ``parts`` how many of its
    row blocks each row block of ``X`` became (:func:`split_row_blocks`).

    Examples
    --------
    >>> X = da.from_array(np.eye(4), chunks=(2, 2))
    >>> wide = WideTerms(X, np.eye(4)[:2], "linear", np.float64)
    >>> wide.terms.compute()[:, :2].tolist()
    [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
    """

    def __init__(self, X: da.Array, landmarks: np.ndarray, kernel, dtype,
                 block_bytes: int | None = None, moments: bool = False) -> None:
        measure = feature_sum(kernel)
        if measure is None:
            raise ValueError(f"the kernel {kernel!r} is not a sum over features")
        m = landmarks.shape[0]
        origin = kernel_origin(landmarks, kernel, X)
        self.norms = landmark_norms(landmarks, origin, dtype)
        budget = block_bytes or memory_budget(X).block_bytes
        self.parts = split_parts(X.chunks[0], m + 2, budget)
        X = split_row_blocks(X, m + 2, budget)
        panels = shared_values(X, *landmark_panels(X, landmarks))
        origins = (None if origin is None
                   else shared_values(X, *[panel[0] for panel in landmark_panels(X, origin[None])]))
        nf = X.numblocks[1]
        terms_chunks = (X.chunks[0], (1,) * nf, (m + 2,))
        options = dict(panels=panels, origins=origins, measure=measure,
                       products_dtype=np.dtype(dtype))
        self.moments = None
        if moments and kernel_name(kernel) == "linear":
            # One task per chunk makes both (its read inlined there, with what only that
            # chunk uses, by the pass's reads_inlined, docs/design.md §2); the terms and the
            # moments are then taken apart from the pair.
            pairs = X.map_blocks(chunk_terms_and_moments_at, **options, new_axis=2,
                                 chunks=terms_chunks, dtype=object,
                                 meta=np.empty((0, 0, 0), object))
            chunk_terms = pairs.map_blocks(_first, chunks=terms_chunks, dtype=np.float64,
                                           meta=np.empty((0, 0, 0), np.float64))
            # (row block, each chunk's p_c + 1 moments, 1): the blocks of the pairs, unjoined
            self.moments = pairs.map_blocks(
                _second, chunks=((1,) * X.numblocks[0], tuple(c + 1 for c in X.chunks[1]),
                                 (1,)), dtype=np.float64, meta=np.empty((0, 0, 0), np.float64))
        else:
            # The tasks that make only one chunk are fused into its terms' task: the
            # transform's graph is computed by the user, past the pass's reads_inlined.
            chunk_terms = with_own_inputs_locally(
                X.map_blocks(chunk_terms_at, **options, new_axis=2, chunks=terms_chunks,
                             dtype=np.float64, meta=np.empty((0, 0, 0), np.float64)))
        self.terms = chunk_terms.sum(axis=1, dtype=np.float64)
        self.row_chunks = X.chunks[0]
        self.source_keys = [key for row in X.__dask_keys__() for key in row]


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1][:, :, None]


def split_slice(parts: list[int], blocks: slice) -> slice:
    """The row blocks after :func:`split_row_blocks` that the row blocks ``blocks`` became.

    Examples
    --------
    >>> split_slice([4, 1, 2], slice(1, 3))
    slice(4, 7, None)
    """
    chosen = range(len(parts))[blocks]
    if not len(chosen):
        return slice(0, 0)
    edges = np.cumsum([0] + list(parts))
    return slice(int(edges[chosen[0]]), int(edges[chosen[-1] + 1]))
