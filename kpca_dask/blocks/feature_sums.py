"""Kernel blocks summed over feature chunks, in numpy (docs/design.md §12).

Every named point kernel is a function of one sum over the features: inner
products (linear, polynomial, sigmoid, cosine), squared distances (rbf,
Matérn) or L1 distances (laplacian). So the kernel block of a row block X_b
against the landmarks Z is::

    k(X_b, Z) = f(sum_c s(X_bc, Z_c), |x|^2, |z|^2)

with X_bc, Z_c the columns of feature chunk c and s the kernel's sum
(:data:`FEATURE_SUMS`). :func:`chunk_sums` makes the terms of one chunk,
(rows, m + 2) in float64: the sum, the row's squared norm (the diagonal of
the inner-product kernels, and the ``|x|^2`` of the squared distances) and its
count of NaN or infinite values. Added over the chunks, they are turned into
kernel values by :func:`kernel_from_sums`, which hands them to the compiled
epilogue (:mod:`kpca_dask.blocks.epilogue`) as the row-chunked pass does.
Translation-invariant kernels see x - o and z - o, o the landmark mean (as
:func:`kpca_dask.blocks.statistics.kernel_origin`), chunk by chunk.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import blas
from scipy.spatial.distance import cdist

from . import epilogue
from .kernels import kernel_name
from .matern import matern_from_scaled_distance
from .statistics import cache_block_rows

__all__ = ["FEATURE_SUMS", "INNER", "SQUARED", "CITYBLOCK", "feature_sum", "chunk_sums",
           "landmark_norms", "kernel_from_sums", "diagonal_from_norms", "kernel_by_panels",
           "panel_columns"]

INNER, SQUARED, CITYBLOCK = "inner", "sqeuclidean", "cityblock"

#: Columns of a feature chunk that :func:`chunk_sums` shifts and multiplies at a time.
SHIFT_COLUMNS = 8192

#: The sum over features each named kernel is a function of.
FEATURE_SUMS = {"linear": INNER, "polynomial": INNER, "sigmoid": INNER, "cosine": INNER,
                "rbf": SQUARED, "matern": SQUARED, "laplacian": CITYBLOCK}

#: Matérn kernels with a closed form the epilogue evaluates, by nu.
_MATERN_CODES = {0.5: epilogue.MATERN_HALF, 1.5: epilogue.MATERN_3_2,
                 2.5: epilogue.MATERN_5_2}


def feature_sum(kernel) -> str | None:
    """The sum over features ``kernel`` is made of; None for a callable or "precomputed".

    Examples
    --------
    >>> feature_sum("gaussian"), feature_sum("laplacian"), feature_sum(np.dot)
    ('sqeuclidean', 'cityblock', None)
    """
    return FEATURE_SUMS.get(kernel_name(kernel)) if not callable(kernel) else None


def chunk_sums(block, panel, origin, measure: str, products_dtype) -> np.ndarray:
    """One feature chunk's terms of a row block against the landmarks: (rows, 1, m + 2).

    ``block`` holds the rows' columns of the chunk, ``panel`` the landmarks'
    (m x p_c, any float dtype), ``origin`` the chunk of the shift o (or None).
    The products run in ``products_dtype``; the result is float64: ``[:, 0, :m]`` the
    kernel's sum, ``[:, 0, m]`` the squared norms of the (shifted) rows and
    ``[:, 0, m + 1]`` how many values of each row are NaN or infinite (whose
    sums are left at zero). Module level: the dashboard names the task.

    Examples
    --------
    >>> x, z = np.array([[1.0, 2.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> chunk_sums(x, z, None, "inner", np.float64)[:, 0]
    array([[1., 2., 5., 0.]])
    """
    x = np.asarray(block)
    m = panel.shape[0]
    out = np.zeros((x.shape[0], 1, m + 2))
    sums, norms = out[:, 0, :m], out[:, 0, m]
    # By slices of SHIFT_COLUMNS columns: the shifted (or converted) copies of the rows and
    # of the panel are of one slice, not of the chunk (two of a 500 x 50 000 float32 chunk
    # and its 400-landmark panel were 0.17 GiB a task); each slice's products are added in
    # float64. A chunk of at most SHIFT_COLUMNS columns is one slice, as before.
    for start in range(0, x.shape[1], SHIFT_COLUMNS):
        columns = slice(start, start + SHIFT_COLUMNS)
        shift = None if origin is None else np.asarray(origin)[columns]
        shifted = _shifted(x[:, columns], shift, products_dtype)
        z = _shifted(panel[:, columns], shift, products_dtype)
        if measure == CITYBLOCK:
            sums += cdist(shifted, z, metric="cityblock")
        else:
            sums += shifted @ z.T
        # Squared norms in the products' dtype, as the whole-row kernels make them; a NaN
        # or an infinity anywhere in a row reaches its norm, so only such rows are counted.
        norms += np.einsum("ij,ij->i", shifted, shifted)
    suspect = ~np.isfinite(out[:, 0, m])
    if suspect.any():
        out[suspect, 0, m + 1] = (~np.isfinite(x[suspect])).sum(axis=1)
        out[out[:, 0, m + 1] > 0, 0, : m + 1] = 0.0
    return out


def _shifted(values, origin, dtype) -> np.ndarray:
    """``values - origin`` in ``dtype``, the origin first rounded to ``dtype``.

    Data and landmarks move by the same rounded shift, so distances do not
    change. The difference of two float32 numbers is exact in float64, so a
    float32 subtraction gives what subtracting in float64 and rounding would:
    one pass over float32 data, no float64 copy.
    """
    dtype = np.dtype(dtype)
    values = np.asarray(values)
    if origin is None:
        return values.astype(dtype, copy=False)
    shift = np.asarray(origin).astype(dtype)
    if values.dtype == dtype:
        return np.subtract(values, shift)
    return (values - shift.astype(np.float64)).astype(dtype, copy=False)


def panel_columns(n_columns: int, n_rows: int, most_bytes: int = 2**26) -> int:
    """Columns per feature panel of ``n_rows`` float64 rows in at most ``most_bytes``.

    Examples
    --------
    >>> panel_columns(10**6, 400), panel_columns(10, 400)
    (20971, 10)
    """
    return int(max(1, min(n_columns, most_bytes // (8 * max(n_rows, 1)))))


def landmark_norms(landmarks: np.ndarray, origin: np.ndarray | None,
                   products_dtype=np.float64) -> np.ndarray:
    """``|z - o|^2`` of each landmark, shifted and squared in ``products_dtype`` as
    :func:`chunk_sums` does, added in float64 by feature panels (no float64 copy of Z).

    Examples
    --------
    >>> landmark_norms(np.array([[3.0, 4.0]], np.float32), None)
    array([25.])
    """
    m, p = landmarks.shape
    norms = np.zeros(m)
    step = panel_columns(p, m)
    for start in range(0, p, step):
        columns = slice(start, start + step)
        z = _shifted(landmarks[:, columns], None if origin is None else origin[columns],
                     products_dtype)
        norms += np.einsum("ij,ij->i", z, z)
    return norms


def kernel_from_sums(out: np.ndarray, sums: np.ndarray, norms: np.ndarray, kernel, params,
                     shift: np.ndarray | None = None, column_sums: np.ndarray | None = None
                     ) -> np.ndarray:
    """Kernel values ``k(X_b, Z) - 1 shift^T`` into ``out`` from the added chunk terms.

    ``sums`` is (rows, m + 1 or more): the kernel's sum and the rows' squared
    norms, as :func:`chunk_sums` adds them up; ``norms`` the landmarks'
    (:func:`landmark_norms`; used by the squared distances and cosine). One
    cache-sized tile at a time, finished by the compiled epilogue with the
    shift and the float64 column sums, as
    :func:`kpca_dask.blocks.statistics.kernel_rows_into` does.

    Examples
    --------
    >>> sums = np.array([[2.0, 1.0, 1.0]])  # |x - z_1|_1 = 2, |x - z_2|_1 = 1, |x|^2 = 1
    >>> kernel_from_sums(np.empty((1, 2)), sums, np.zeros(2), "laplacian",
    ...                  {"gamma": 1.0}).round(4)
    array([[0.1353, 0.3679]])
    """
    step = cache_block_rows(out.shape[1], out.dtype.itemsize)
    for start in range(0, out.shape[0], step):
        rows = slice(start, start + step)
        tile = out[rows]
        code, a, b, degree = _tile_from_sums(tile, sums[rows], norms, kernel, params)
        epilogue.finish_tile(tile, code, a=a, b=b, degree=degree, shift=shift,
                             column_sums=column_sums)
    return out


def _tile_from_sums(tile, sums, norms, kernel, params) -> tuple[int, float, float, int]:
    """Write the epilogue's input for ``kernel`` into ``tile``; return its code and constants."""
    name = kernel_name(kernel)
    m = tile.shape[1]
    total, row_norms = sums[:, :m], sums[:, m]
    if name in ("rbf", "matern"):
        d2 = np.maximum(row_norms[:, None] + norms[None, :] - 2.0 * total, 0.0)
        if name == "rbf" or math.isinf(params["nu"]):
            tile[...] = -params["gamma"] * d2
            return epilogue.EXP, 1.0, 0.0, 1
        if params["nu"] in _MATERN_CODES:
            tile[...] = d2
            scale = math.sqrt(2.0 * params["nu"]) * math.sqrt(2.0 * params["gamma"])
            return _MATERN_CODES[params["nu"]], scale, 0.0, 1
        values = matern_from_scaled_distance(np.sqrt(d2) * math.sqrt(2.0 * params["gamma"]),
                                             params["nu"])
        tile[...] = np.maximum(values, math.exp(epilogue.exponent_floor(tile.dtype)))
        return epilogue.IDENTITY, 1.0, 0.0, 1
    if name == "laplacian":
        tile[...] = -params["gamma"] * total
        return epilogue.EXP, 1.0, 0.0, 1
    if name == "cosine":
        # Zero rows stay zero, as in sklearn.preprocessing.normalize.
        a = np.sqrt(row_norms)
        z = np.sqrt(norms)
        tile[...] = total / np.where(a > 0, a, 1.0)[:, None] / np.where(z > 0, z, 1.0)[None, :]
        return epilogue.IDENTITY, 1.0, 0.0, 1
    tile[...] = total
    if name in ("polynomial", "sigmoid"):
        code = epilogue.POLYNOMIAL if name == "polynomial" else epilogue.SIGMOID
        return code, params["gamma"], params["coef0"], params.get("degree", 1)
    return epilogue.IDENTITY, 1.0, 0.0, 1


def diagonal_from_norms(row_norms: np.ndarray, kernel, params) -> np.ndarray:
    """k(x, x) of each row from its squared norm ``|x|^2`` (float64).

    Examples
    --------
    >>> diagonal_from_norms(np.array([4.0, 0.0]), "cosine", {})
    array([1., 0.])
    """
    name = kernel_name(kernel)
    row_norms = np.asarray(row_norms, np.float64)
    if name == "linear":
        return row_norms
    if name == "polynomial":
        return (params["gamma"] * row_norms + params["coef0"]) ** params["degree"]
    if name == "sigmoid":
        return np.tanh(params["gamma"] * row_norms + params["coef0"])
    if name == "cosine":
        return (row_norms > 0).astype(np.float64)
    return np.ones_like(row_norms)


def kernel_by_panels(A: np.ndarray, Z: np.ndarray, kernel, params, out: np.ndarray,
                     origin: np.ndarray | None = None, z_norms: np.ndarray | None = None
                     ) -> np.ndarray:
    """``k(A, Z)`` in float64 into ``out``, summed over feature panels of A and Z.

    For wide rows held in memory (landmarks of 10^6 features): no float64
    copy of either, only one panel of each at a time.

    Examples
    --------
    >>> Z = np.array([[0.0, 0.0], [1.0, 0.0]], np.float32)
    >>> kernel_by_panels(Z, Z, "rbf", {"gamma": 1.0}, np.empty((2, 2))).round(4)
    array([[1.    , 0.3679],
           [0.3679, 1.    ]])
    """
    measure = feature_sum(kernel)
    if origin is None and measure == SQUARED:
        origin = Z.mean(axis=0, dtype=np.float64)
    if z_norms is None:
        z_norms = landmark_norms(Z, origin)
    if A is Z and measure != CITYBLOCK:
        return kernel_from_sums(out, _symmetric_sums(Z, origin), z_norms, kernel, params)
    sums = np.zeros((A.shape[0], Z.shape[0] + 2))
    step = panel_columns(A.shape[1], A.shape[0] + Z.shape[0])
    for start in range(0, A.shape[1], step):
        columns = slice(start, start + step)
        sums += chunk_sums(A[:, columns], Z[:, columns],
                           None if origin is None else origin[columns], measure,
                           np.float64)[:, 0]
    return kernel_from_sums(out, sums, z_norms, kernel, params)


def _symmetric_sums(Z: np.ndarray, origin) -> np.ndarray:
    """The (m, m + 1) terms of Z against itself: (z - o) . (z' - o) by one symmetric
    rank-k update per panel (BLAS ``dsyrk``, half the products of a GEMM), and |z - o|^2."""
    m = Z.shape[0]
    gram = np.zeros((m, m), order="F")
    norms = np.zeros(m)
    step = panel_columns(Z.shape[1], m)
    for start in range(0, Z.shape[1], step):
        columns = slice(start, start + step)
        z = _shifted(Z[:, columns], None if origin is None else origin[columns], np.float64)
        # z.T is Fortran-ordered: BLAS reads it without a copy and adds z z^T into gram.
        gram = blas.dsyrk(1.0, z.T, beta=1.0, c=gram, trans=1, lower=1, overwrite_c=1)
        norms += np.einsum("ij,ij->i", z, z)
    sums = np.empty((m, m + 1))
    sums[:, :m] = np.tril(gram) + np.tril(gram, -1).T
    sums[:, m] = norms
    return sums
