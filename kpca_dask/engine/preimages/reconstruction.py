"""Going back: pre-images and the feature-space reconstruction error (docs/design.md §6).

**Pre-image map.** Kernel ridge regression from embeddings back to input
space, with the forward kernel and its parameters applied to embeddings. The
centres are the landmarks' embeddings Y_Z = y(Z), so nothing depends on n::

    K_ZZ = k(Y_Z, Y_Z) = U_Y diag(s_Y) U_Y^T,   W_Y = U_Y,r diag(s_Y,r^{-1/2})
    g(y) = W_Y^T k(y, Y_Z)                                         (r)
    H_c = sum_i (g_i - g_bar)(g_i - g_bar)^T,   R_c = sum_i (g_i - g_bar)(x_i - x_bar)^T
    B = (H_c + alpha I)^{-1} R_c,   x_hat(y) = x_bar + B^T (g(y) - g_bar)
                                             = k(y, Y_Z) (W_Y B) + (x_bar - B^T g_bar)

a ridge regression with an unpenalised intercept, so that a reconstruction
is the field with its mean for every kernel (for the linear kernel, the EOF
truncation x_bar + sum_k y_k eof_k as alpha -> 0). ``preimage_statistics``
builds the lazy pass that maps each training row block to its sums (shifted
by a reference near the means, :mod:`kpca_dask.engine.preimages.preimage_ridge`) and
tree-reduces them, like the fit's pass; ``solve_preimage`` turns them into
the m x p dual coefficients W_Y B and the intercept, for a given alpha or
one chosen by generalised cross-validation from the same sums. With m = n
landmarks, G = K W_Y = U s^{1/2}, so x_hat(y) = x_bar + (k(y, Y) - K 1 / n)^T
J (J K J + alpha I)^{-1} (X - x_bar) with J = I - 1 1^T / n: scikit-learn's
kernel ridge regression on the centred kernel (``KernelCenterer``).

**Reconstruction error** (Hoffmann 2007): the squared distance from phi(x)
to the principal subspace::

    e(x) = [k(x, x) - |f(x)|^2] + |f(x) - mu|^2 - |y(x)|^2
         = k(x, x) - 2 k_m(x)^T v + |mu|^2 - |y(x)|^2,   v = W mu.

Maintenance note: the second line is the first with ``|f|^2`` cancelled; it
needs the m-vector v instead of the m x r matrix W, so a row costs the
transform's kernel block plus one more column in its product, not an m x r
product (which would triple the flops). With m = n, k_m(x)^T v is the mean
kernel value (1/n) sum_i k(x, x_i) and ``|mu|^2`` the grand mean of K, so e(x)
is the exact ``|phi(x) - phi_bar|^2 - sum_{j<=q} y_j(x)^2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed

from ..._compat import independent_copy
from ..._memory import memory_budget
from ...blocks.kernels import kernel_diagonal, pairwise_kernel
from ...blocks.landmark_kernel import LandmarkKernel
from ...blocks.projection import project_block
from ...blocks.sparse_rows import as_block, first_nonfinite
from ...blocks.statistics import kernel_block_rows, kernel_origin, kernel_rows_into
from ...blocks.wide_rows import error_of_sums, project_sums
from ...errors import InvalidParameterError, NonFiniteInputError
from ...validation import DEFAULT_BLOCK_ROWS, one_feature_chunk
from ..graph_values import shared_values
from ..passes.nystrom import SPLIT_EVERY, reads_inlined
from ..passes.wide import WideTerms, is_wide
from ..solve.landmark_factor import factor_landmarks
from ..solve.nystrom import NoveltyTerms
from .preimage_ridge import CentredRidge, centred_ridge, solve_ridge

__all__ = ["PreimageStatistics", "PreimageSolution", "embed_landmarks", "preimage_basis",
           "preimage_statistics", "solve_preimage", "reconstruct", "reconstruction_error"]


@dataclass(frozen=True)
class PreimageStatistics:
    """What the pre-image pass returns: sizes r x r and r x p only, sums shifted by
    (g_0, x_0) (:mod:`kpca_dask.engine.preimages.preimage_ridge`)."""

    n_samples: int
    gram: np.ndarray  # H' = sum_i (g_i - g_0)(g_i - g_0)^T, (r, r)
    cross: np.ndarray  # R' = sum_i (g_i - g_0)(x_i - x_0)^T, (r, p)
    feature_sum: np.ndarray  # sum_i (g_i - g_0), (r,)
    target_sum: np.ndarray  # sum_i (x_i - x_0), (p,)
    target_square: float  # sum_i |x_i - x_0|^2
    feature_shift: np.ndarray  # g_0, (r,)
    target_shift: np.ndarray  # x_0, (p,)

    def centred(self) -> CentredRidge:
        """The centred regression these sums give (H_c, R_c, S in V's basis)."""
        return centred_ridge(self.n_samples, self.gram, self.cross, self.feature_sum,
                             self.target_sum, self.target_square, self.feature_shift,
                             self.target_shift)


@dataclass(frozen=True)
class PreimageSolution:
    """The pre-image map: x_hat(y) = k(y, Y_Z) @ coefficients + intercept, with the alpha
    used and its generalised cross-validation score (per value)."""

    coefficients: np.ndarray  # W_Y B, (m, p)
    intercept: np.ndarray  # x_bar - B^T g_bar, (p,)
    alpha: float
    score: float


def preimage_basis(centres: np.ndarray, kernel, params: dict, rcond: float) -> np.ndarray:
    """W_Y of the centres' kernel matrix K_ZZ = k(Y_Z, Y_Z), dropping its noise.

    Formed (m x r): the pre-image pass applies it to every row block's kernel rows.
    """
    return factor_landmarks(np.asarray(centres, dtype=np.float64), kernel, params, rcond).W


def embed_landmarks(landmarks: np.ndarray, projection: np.ndarray, offset: np.ndarray,
                    kernel, params: dict, dtype) -> np.ndarray:
    """Y_Z = y(Z), the centres of the pre-image map, in memory (m rows, no dask).

    Examples
    --------
    >>> embed_landmarks(np.eye(2), np.eye(2), np.ones(2), "linear", {}, np.float64)
    array([[ 0., -1.],
           [-1.,  0.]])
    """
    origin = kernel_origin(landmarks, kernel)
    Z = np.asarray(landmarks, dtype=np.float64)
    shifted = Z if origin is None else Z - origin
    return project_block(Z, landmarks=shifted.astype(dtype), projection=projection,
                          offset=offset, kernel=kernel, params=params, dtype_kernel=dtype,
                          origin=origin)


def _preimage_block_statistics(block, landmarks, projection, offset, kernel, params, dtype,
                               origin, centres, centre_basis, feature_shift, target_shift,
                               block_bytes=None):
    """The sums of one training row block, shifted by (g_0, x_0); module level so the
    dashboard names it.

    A scipy.sparse block stays sparse (CSR): its sums are taken unshifted in x and
    shifted after (R_b = g^T x taken as (x^T g)^T).
    """
    x = as_block(block).astype(np.float64)
    dense = isinstance(x, np.ndarray)
    r, p = centre_basis.shape[1], x.shape[1]
    gram, cross, feature_sum = np.zeros((r, r)), np.zeros((r, p)), np.zeros(r)
    target_sum, target_square = np.zeros(p), 0.0
    step = kernel_block_rows(max(landmarks.shape[0], centres.shape[0]), block_bytes=block_bytes)
    # k(y, Y_Z) one block at a time into one buffer, made in cache by the compiled
    # epilogue: a task holds the chunk, that block and its features g, within the model
    # of a task (docs/design.md §14).
    buffer = np.empty((min(step, x.shape[0]), centres.shape[0]))
    centre_rows = LandmarkKernel(centres, kernel, params, np.float64)
    for start in range(0, x.shape[0], step):
        rows = x[start : start + step]
        y = project_block(rows, landmarks=landmarks, projection=projection, offset=offset,
                           kernel=kernel, params=params, dtype_kernel=dtype, origin=origin)
        g = kernel_rows_into(buffer[: rows.shape[0]], y, centre_rows) @ centre_basis
        g -= feature_shift
        gram += g.T @ g
        feature_sum += g.sum(axis=0)
        shifted = rows - target_shift if dense else rows
        cross += (shifted.T @ g).T
        if dense:
            target_sum += shifted.sum(axis=0)
            target_square += float(np.einsum("ij,ij->", shifted, shifted))
    n = x.shape[0]
    if not dense:  # sum (x - x_0) and sum |x - x_0|^2 from the sparse rows' own sums
        plain = np.asarray(x.sum(axis=0)).ravel()
        cross -= np.outer(feature_sum, target_shift)
        target_sum = plain - n * target_shift
        target_square = (float(x.multiply(x).sum()) - 2.0 * float(target_shift @ plain)
                         + n * float(target_shift @ target_shift))
    return PreimageStatistics(n, gram, cross, feature_sum, target_sum, target_square,
                              feature_shift, target_shift)


def combine_preimage_statistics(*parts: PreimageStatistics) -> PreimageStatistics:
    """Add partial pre-image statistics (all with the same shifts): one node of the tree
    reduction."""
    first = parts[0]
    gram, cross = first.gram.copy(), first.cross.copy()
    feature_sum, target_sum = first.feature_sum.copy(), first.target_sum.copy()
    for part in parts[1:]:
        gram += part.gram
        cross += part.cross
        feature_sum += part.feature_sum
        target_sum += part.target_sum
    return PreimageStatistics(sum(p.n_samples for p in parts), gram, cross, feature_sum,
                              target_sum, sum(p.target_square for p in parts),
                              first.feature_shift, first.target_shift)


def preimage_shifts(centres: np.ndarray, centre_basis: np.ndarray, landmarks: np.ndarray,
                    kernel, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """(g_0, x_0): the mean features of (at most 256 of) the centres and the landmarks' mean
    row, references near the training rows' means that the pass's sums are shifted by.

    Examples
    --------
    >>> g0, x0 = preimage_shifts(np.eye(2), np.eye(2), np.array([[1.0, 3.0]]), "linear", {})
    >>> g0.tolist(), x0.tolist()
    ([0.5, 0.5], [1.0, 3.0])
    """
    some = np.asarray(centres, np.float64)[:256]
    features = pairwise_kernel(some, np.asarray(centres, np.float64), kernel, **params)
    return ((features @ centre_basis).mean(axis=0),
            np.asarray(landmarks, np.float64).mean(axis=0))


def preimage_statistics(
    X: da.Array,
    landmarks: np.ndarray,
    projection: np.ndarray,
    offset: np.ndarray,
    kernel,
    params: dict,
    dtype,
    centres: np.ndarray,
    centre_basis: np.ndarray,
    split_every: int = SPLIT_EVERY,
) -> Delayed:
    """Lazy pre-image statistics of the training rows ``X``: one more pass.

    Each row block is projected (y = P^T k_m(x) - c, as in transform), mapped
    to g(y), and g and x are summed, shifted by :func:`preimage_shifts`, in
    float64 (:class:`PreimageStatistics`); only r x r and r x p arrays leave the
    workers. ``X`` must have one chunk along the feature axis.

    Examples
    --------
    >>> X = da.from_array(np.eye(3), chunks=(2, 3))
    >>> stats = preimage_statistics(X, np.eye(3), np.eye(3), np.zeros(3), "linear", {},
    ...                             np.float64, np.eye(3), np.eye(3)).compute()
    >>> stats.n_samples, stats.gram.shape, stats.cross.shape
    (3, (3, 3), (3, 3))
    """
    shifts = preimage_shifts(centres, centre_basis, landmarks, kernel, params)
    if is_wide(X, kernel):
        return _wide_preimage_statistics(X, landmarks, projection, offset, kernel, params,
                                         dtype, centres, centre_basis, shifts)
    X = one_feature_chunk(X, stacklevel=3)  # a callable kernel needs whole rows
    origin = kernel_origin(landmarks, kernel, X)  # none for sparse rows
    Z = np.asarray(landmarks, dtype=np.float64)
    if origin is not None:
        Z = Z - origin
    shared = shared_values(X, Z.astype(dtype), projection, offset, origin, centres, centre_basis,
                           *shifts)
    statistics_of = dask.delayed(_preimage_block_statistics, pure=True)
    block_bytes = memory_budget(X).block_bytes
    partials = [statistics_of(block, *shared[:3], kernel, params, dtype, *shared[3:],
                              block_bytes)
                for block in X.to_delayed().ravel()]
    combine = dask.delayed(combine_preimage_statistics, pure=True)
    while len(partials) > 1:
        partials = [combine(*partials[i : i + split_every])
                    for i in range(0, len(partials), split_every)]
    return partials[0]


def _preimage_features(y, *, centres, centre_basis, kernel, params, shift):
    """g(y) - g_0 = W_Y^T k(y, Y_Z) - g_0 of one row block of embeddings."""
    return (pairwise_kernel(np.asarray(y, np.float64), centres, kernel, **params) @ centre_basis
            - shift)


def _cross_block(x, g, target_shift):
    """One chunk's part of R', sum (x - x_0) and sum (x - x_0)^2 by column, stacked as
    (r + 2) x p_c on a leading axis of length 1."""
    shifted = np.asarray(x, np.float64) - target_shift
    return np.vstack([np.asarray(g).T @ shifted, shifted.sum(axis=0),
                      np.einsum("ij,ij->j", shifted, shifted)])[None]


def _wide_statistics(n, gram, feature_sum, sums, feature_shift, target_shift):
    """:class:`PreimageStatistics` from the wide pass's pieces (sums: R', s_x, |x - x_0|^2)."""
    sums = np.concatenate(sums, axis=1)
    r = gram.shape[0]
    return PreimageStatistics(n, gram, sums[:r], feature_sum, sums[r], float(sums[r + 1].sum()),
                              feature_shift, target_shift)


def _wide_preimage_statistics(X, landmarks, projection, offset, kernel, params, dtype,
                              centres, centre_basis, shifts) -> Delayed:
    """The sums of data chunked along the features: R' = G^T (X - x_0) by feature chunks
    (§12).

    The embeddings come from the feature terms (:mod:`kpca_dask.engine.passes.wide`).
    R' is one product per (row block, feature chunk), added over the row blocks, so
    R' arrives by feature chunks too, with the sums of x - x_0 and its squares. Its
    chunks are read a second time, by a copy of X's graph
    (:func:`~kpca_dask._compat.independent_copy`) whose reads are made part of the
    products: a chunk is read when its row block's g(y) is ready, not held from the
    first read until then.
    """
    wide = WideTerms(X, landmarks, kernel, dtype)
    shared = shared_values(X, wide.norms, projection, offset, centres, centre_basis, shifts[0])
    Y = wide.terms.map_blocks(
        project_sums, norms=shared[0], projection=shared[1], offset=shared[2], kernel=kernel,
        params=params, dtype_kernel=dtype, chunks=(wide.row_chunks, (projection.shape[1],)),
        dtype=np.float64, meta=np.empty((0, 0), np.float64))
    r = centre_basis.shape[1]
    G = Y.map_blocks(_preimage_features, centres=shared[3], centre_basis=shared[4],
                     kernel=kernel, params=params, shift=shared[5],
                     chunks=(wide.row_chunks, (r,)), dtype=np.float64,
                     meta=np.empty((0, 0), np.float64))
    rows = independent_copy(X.rechunk({0: wide.row_chunks}))
    target_shift = da.from_array(shifts[1], chunks=(rows.chunks[1],))
    parts = da.blockwise(_cross_block, "irj", rows, "ij", G, "ir", target_shift, "j",
                         dtype=np.float64, adjust_chunks={"i": 1, "r": r + 2}, new_axes={},
                         concatenate=True, meta=np.empty((0, 0, 0), np.float64))
    # One graph, not optimised array by array: each array optimised on its own would
    # get its own renamed copy of the terms, and X would be read once per copy.
    gram = (G.T @ G).to_delayed(optimize_graph=False)[0, 0]
    feature_sum = G.sum(axis=0).to_delayed(optimize_graph=False)[0]
    sums = parts.sum(axis=0).to_delayed(optimize_graph=False).ravel().tolist()
    result = dask.delayed(_wide_statistics, pure=True)(X.shape[0], gram, feature_sum, sums,
                                                       *shifts)
    reads = {key for row in rows.__dask_keys__() for key in row} | set(wide.source_keys)
    return reads_inlined(result, reads)


def solve_preimage(stats: PreimageStatistics, centre_basis: np.ndarray,
                   alpha: float | str) -> PreimageSolution:
    """The pre-image map of the pass's sums: dual coefficients W_Y B and the intercept
    x_bar - B^T g_bar, so that x_hat(y) = k(y, Y_Z) W_Y B + intercept, for ``alpha`` or,
    with ``alpha="auto"``, the alpha of least generalised cross-validation score
    (:mod:`kpca_dask.engine.preimages.preimage_ridge`).

    Examples
    --------
    >>> g = np.array([[0.0], [1.0], [2.0]]); x = 2.0 * g + 1.0  # x = 1 + 2 g
    >>> stats = PreimageStatistics(3, g.T @ g, g.T @ x, g.sum(0), x.sum(0),
    ...                            float((x**2).sum()), np.zeros(1), np.zeros(1))
    >>> solution = solve_preimage(stats, np.eye(1), alpha=1e-12)
    >>> np.round(solution.coefficients, 9), np.round(solution.intercept, 9)
    (array([[2.]]), array([1.]))
    """
    ridge = solve_ridge(stats.centred(), alpha)
    return PreimageSolution(coefficients=centre_basis @ ridge.coefficients,
                            intercept=ridge.intercept, alpha=ridge.alpha, score=ridge.score)


def _reconstruct_block(block, *, centres, coefficients, intercept, kernel, params,
                       block_bytes=None, block_info=None):
    """x_hat = k(y, Y_Z) (W_Y B) + intercept for one row block of embeddings."""
    y = np.asarray(block, dtype=np.float64)
    row = _first_nonfinite_row(y, block_info)
    if row is not None:
        raise NonFiniteInputError(
            f"The embedding contains NaN or infinite values (first in row {row}); "
            "inverse_transform needs finite embeddings.")
    out = np.empty((y.shape[0], coefficients.shape[1]))
    step = kernel_block_rows(centres.shape[0], block_bytes=block_bytes)
    buffer = np.empty((min(step, y.shape[0]), centres.shape[0]))
    centre_rows = LandmarkKernel(centres, kernel, params, np.float64)
    for start in range(0, y.shape[0], step):
        rows = y[start : start + step]
        out[start : start + step] = (kernel_rows_into(buffer[: rows.shape[0]], rows,
                                                      centre_rows) @ coefficients)
    if intercept is not None:
        out += intercept
    return out


def reconstruct(Y: da.Array, centres: np.ndarray, coefficients: np.ndarray, kernel,
                params: dict, intercept: np.ndarray | None = None) -> da.Array:
    """Lazy pre-images x_hat(y) = k(y, centres) @ coefficients + intercept of every row of
    the embedding ``Y`` (no intercept: a map saved before it had one).

    Examples
    --------
    >>> Y = da.from_array(np.eye(2), chunks=(1, 2))
    >>> reconstruct(Y, np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]]), "linear", {},
    ...             intercept=np.array([10.0, 0.0])).compute()
    array([[11.,  2.],
           [13.,  4.]])
    """
    if Y.numblocks[1] != 1:
        Y = Y.rechunk({1: -1})  # each block must hold whole embeddings
    block_bytes = memory_budget(Y).block_bytes
    known = [rows for rows in Y.chunks[0] if not np.isnan(rows)]  # a frame's may be unknown
    widths = output_columns(coefficients.shape[1], int(max(known, default=DEFAULT_BLOCK_ROWS)),
                            block_bytes)
    if intercept is not None:
        intercept = np.asarray(intercept, np.float64)
    if len(widths) > 1:
        return _reconstruct_by_columns(Y, centres, coefficients, intercept, kernel, params,
                                       widths)
    shared = shared_values(Y, np.asarray(centres, np.float64), np.asarray(coefficients, np.float64),
                           intercept)
    return Y.map_blocks(
        _reconstruct_block, centres=shared[0], coefficients=shared[1], intercept=shared[2],
        kernel=kernel, params=params, block_bytes=memory_budget(Y).block_bytes,
        chunks=(Y.chunks[0], (coefficients.shape[1],)), dtype=np.float64,
        meta=np.empty((0, 0), np.float64))


def output_columns(p: int, rows: int, most_bytes: int) -> tuple[int, ...]:
    """Column chunks of wide pre-images: equal ones of at most ``most_bytes`` per row block.

    Examples
    --------
    >>> output_columns(10, 100, 2**20)
    (10,)
    >>> columns = output_columns(10**6, 500, 2**27)  # 128 MiB: 33 554 columns of 500 rows
    >>> len(columns), columns[0], sum(columns)
    (30, 33334, 1000000)
    """
    most = max(1, most_bytes // (8 * max(rows, 1)))
    parts = -(-p // most)
    return tuple(p // parts + (1 if k < p % parts else 0) for k in range(parts))


def _reconstruct_columns(y, column, *, centres, panels, kernel, params, block_bytes=None):
    """x_hat's columns of one output chunk: k(y, Y_Z) times that chunk's coefficients, plus
    its intercept (the panel's last row, when the map has one)."""
    panel = panels[int(column[0])]
    coefficients, intercept = ((panel[:-1], panel[-1]) if panel.shape[0] > centres.shape[0]
                               else (panel, None))
    return _reconstruct_block(y, centres=centres, coefficients=coefficients,
                              intercept=intercept, kernel=kernel, params=params,
                              block_bytes=block_bytes)


def _reconstruct_by_columns(Y, centres, coefficients, intercept, kernel, params,
                            widths) -> da.Array:
    """Pre-images as wide as the data, made and handed on by column chunks (§12)."""
    edges = np.cumsum((0,) + widths)
    if intercept is not None:  # one array per chunk: the intercept rides as a last row
        coefficients = np.vstack([coefficients, intercept])
    panels = [np.asarray(coefficients[:, a:b], np.float64)
              for a, b in zip(edges[:-1], edges[1:])]
    shared = shared_values(Y, np.asarray(centres, np.float64), *panels)
    columns = da.arange(len(widths), chunks=1)
    return da.blockwise(
        _reconstruct_columns, "ij", Y, "ik", columns, "j", centres=shared[0],
        panels=[shared[k] for k in range(1, len(panels) + 1)], kernel=kernel, params=params,
        block_bytes=memory_budget(Y).block_bytes, adjust_chunks={"j": widths},
        dtype=np.float64, concatenate=True, meta=np.empty((0, 0), np.float64))


def _error_block(block, *, landmarks, weights, offset, mean_norm2, kernel, params,
                 dtype_kernel, origin=None, block_bytes=None, block_info=None):
    """``e(x) = k(x, x) - 2 k_m(x)^T v + |mu|^2 - |y(x)|^2`` for one row block (scipy.sparse
    rows stay sparse, and unshifted)."""
    x = as_block(block)
    row = _first_nonfinite_row(x, block_info)
    if row is not None:
        raise NonFiniteInputError(
            f"X contains NaN or infinite values (first in row {row}); "
            "remove or impute them before scoring.")
    x = (x if origin is None else x - origin).astype(dtype_kernel, copy=False)
    q = offset.shape[0]
    # [P, v]: the projection and the mean's weights in one product per kernel block.
    weights = weights.astype(x.dtype, copy=False)
    e = np.empty(x.shape[0])
    step = kernel_block_rows(landmarks.shape[0], x.dtype.itemsize, block_bytes)
    buffer = np.empty((min(step, x.shape[0]), landmarks.shape[0]), x.dtype)
    landmark_rows = LandmarkKernel(landmarks, kernel, params, x.dtype)
    for start in range(0, x.shape[0], step):
        rows = x[start : start + step]
        Bw = (kernel_rows_into(buffer[: rows.shape[0]], rows, landmark_rows)
              @ weights).astype(np.float64)
        y = Bw[:, :q] - offset
        diagonal = np.asarray(_diagonal(rows, kernel, params), dtype=np.float64)
        e[start : start + step] = (diagonal - 2.0 * Bw[:, q] + mean_norm2
                                   - np.einsum("ij,ij->i", y, y))
    # A squared distance: rounding must not make it negative.
    return np.maximum(e, 0.0)


def _diagonal(rows, kernel, params):
    try:
        diagonal = kernel_diagonal(rows, kernel, **params)
    except (ValueError, IndexError) as exc:
        raise InvalidParameterError(
            f"The kernel's diagonal k(x, x) could not be evaluated ({exc}); the "
            "reconstruction error needs it. A callable kernel must return the "
            "(len(A), len(B)) block for any A and B, including square ones.") from None
    if np.shape(diagonal) != (rows.shape[0],):
        raise InvalidParameterError(
            "The kernel's diagonal k(x, x) has the wrong shape; a callable kernel must "
            "return the (len(A), len(B)) block.")
    return diagonal


def reconstruction_error(X: da.Array, landmarks: np.ndarray, projection: np.ndarray,
                         offset: np.ndarray, terms: NoveltyTerms, kernel, params: dict,
                         dtype) -> da.Array:
    """Lazy squared feature-space distance from each row of ``X`` to the principal subspace.

    Examples
    --------
    >>> X = da.from_array(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), chunks=2)
    >>> terms = NoveltyTerms(mean_weights=np.zeros(2), mean_norm2=0.0)
    >>> # linear kernel, landmarks e1, e2, one component along e1: e = x_2^2
    >>> reconstruction_error(X, np.eye(2), np.array([[1.0], [0.0]]), np.zeros(1), terms,
    ...                      "linear", {}, np.float64).compute()
    array([0., 0., 1.])
    """
    weights = np.column_stack([projection, terms.mean_weights])
    if is_wide(X, kernel):
        wide = WideTerms(X, landmarks, kernel, dtype)
        shared = shared_values(X, wide.norms, weights, np.asarray(offset, np.float64))
        return wide.terms.map_blocks(
            error_of_sums, norms=shared[0], weights=shared[1], offset=shared[2],
            mean_norm2=terms.mean_norm2, kernel=kernel, params=params, dtype_kernel=dtype,
            chunks=(wide.row_chunks,), drop_axis=1, dtype=np.float64,
            meta=np.empty((0,), np.float64))
    X = one_feature_chunk(X, stacklevel=3)  # a callable kernel needs whole rows
    origin = kernel_origin(landmarks, kernel, X)  # none for sparse rows
    Z = np.asarray(landmarks, dtype=np.float64)
    if origin is not None:
        Z = Z - origin
    shared = shared_values(X, Z.astype(dtype), weights, np.asarray(offset, np.float64), origin)
    return X.map_blocks(
        _error_block, landmarks=shared[0], weights=shared[1], offset=shared[2],
        mean_norm2=terms.mean_norm2, kernel=kernel, params=params, dtype_kernel=dtype,
        origin=shared[3], block_bytes=memory_budget(X).block_bytes, chunks=(X.chunks[0],),
        drop_axis=1, dtype=np.float64,
        meta=np.empty((0,), np.float64))


def _first_nonfinite_row(values: np.ndarray, block_info) -> int | None:
    """The global row of the block's first NaN or infinite value; None if all are finite."""
    count, first = first_nonfinite(values)
    if not count:
        return None
    start = block_info[0]["array-location"][0][0] if block_info else 0
    start = 0 if start is None or np.isnan(start) else start  # rows of unknown blocks
    return int(start) + first
