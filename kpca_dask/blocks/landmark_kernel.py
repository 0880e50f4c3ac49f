"""The kernel against fixed landmarks, ``k(A, Z)``, for many row blocks ``A``.

A fit or a transform evaluates the kernel rows of every row block against the
same m landmarks ``Z`` (docs/design.md §2). :class:`LandmarkKernel` computes
what depends on the landmarks alone once, not once per block, makes each
tile with one GEMM and finishes it with the compiled epilogue of
:mod:`kpca_dask.blocks.epilogue` while it is in cache (docs/design.md §8).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
from scipy.spatial.distance import cdist

from . import epilogue
from .distance_kernels import squared_distances
from .kernels import KernelCallable, kernel_name, pairwise_kernel_into
from .sparse_rows import dense, is_sparse

__all__ = ["LandmarkKernel"]


class LandmarkKernel:
    """``k(A, Z)`` for many dense row blocks ``A`` against fixed landmarks ``Z``.

    Whatever depends on the landmarks alone is computed once, not once per
    block. For rbf the whole exponent comes out of one GEMM on augmented
    rows (docs/design.md §8, "keep a kernel block in cache")::

        [a - c, -gamma |a - c|^2, 1] . [2 gamma (z - c), 1, -gamma |z - c|^2]
            = -gamma |a - z|^2,

    with c the landmark mean (as in
    :func:`~kpca_dask.blocks.distance_kernels.squared_distances`). Every
    built-in kernel's tile (that exponent, distances or inner products) is
    then finished by one compiled loop, :mod:`kpca_dask.blocks.epilogue`,
    with the reference shift and the column sums. The values are those of
    :func:`~kpca_dask.blocks.kernels.pairwise_kernel` to rounding.

    Examples
    --------
    >>> Z = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> k = LandmarkKernel(Z, "rbf", {"gamma": 1.0}, np.float64)
    >>> k.into(np.empty((1, 2)), np.array([[0.0, 0.0]])).round(4)
    array([[1.    , 0.3679]])
    """

    def __init__(self, landmarks: np.ndarray, kernel: str | KernelCallable, params: Mapping,
                 dtype) -> None:
        self.landmarks = landmarks
        self.kernel = kernel
        self.params = dict(params)
        self.dtype = np.dtype(dtype)
        name = kernel_name(kernel)
        # nu = infinity is the rbf kernel with the same gamma.
        self._rbf = ((name == "rbf" or (name == "matern" and math.isinf(self.params["nu"])))
                     and not is_sparse(landmarks) and landmarks.shape[0] > 0)
        self._augmented = None  # built on the first dense block: sparse rows never need it

    def prepared(self) -> LandmarkKernel:
        """``self``, with what depends on the landmarks alone made now rather than by the
        first block: before several threads share it.

        Examples
        --------
        >>> LandmarkKernel(np.zeros((2, 3)), "rbf", {"gamma": 1.0}, np.float32).prepared().dtype
        dtype('float32')
        """
        if self._rbf:
            self._augment()
        return self

    def _augment(self) -> np.ndarray:
        if self._augmented is None:
            Z = np.asarray(self.landmarks, dtype=np.float64)
            self._gamma = float(self.params["gamma"])
            self._centre = Z.mean(axis=0)
            # Built transposed, (p + 2) x m, as the GEMM reads it, in the block dtype.
            augmented = np.empty((Z.shape[1] + 2, Z.shape[0]), self.dtype)
            np.multiply(Z.T - self._centre[:, None], 2.0 * self._gamma, out=augmented[:-2])
            augmented[-2] = 1.0
            Zc = Z - self._centre
            augmented[-1] = -self._gamma * np.einsum("ij,ij->i", Zc, Zc)
            self._augmented = augmented
        return self._augmented

    def into(self, out: np.ndarray, A, shift: np.ndarray | None = None,
             column_sums: np.ndarray | None = None) -> np.ndarray:
        """Write ``k(A, Z) - 1 shift^T`` into ``out`` (rows of A x landmarks) and return it.

        One GEMM into ``out``, then the compiled epilogue
        (:func:`kpca_dask.blocks.epilogue.finish_tile`) turns it into kernel
        values, subtracts ``shift`` and adds the columns to ``column_sums``
        (float64) in one pass over each row, while ``out`` is in cache.
        """
        code, a, b, degree = self._tile_into(out, A)
        return epilogue.finish_tile(out, code, a=a, b=b, degree=degree, shift=shift,
                                    column_sums=column_sums)

    def _tile_into(self, out, A) -> tuple[int, float, float, int]:
        """The GEMM tile for ``A`` into ``out``, and the epilogue that finishes it."""
        name = kernel_name(self.kernel)
        params = self.params
        Z = np.asarray(dense(self.landmarks), dtype=A.dtype)  # a view when already dense
        if self._rbf and not is_sparse(A):
            augmented = self._augment()
            rows = np.empty((A.shape[0], A.shape[1] + 2), self.dtype)
            shifted = rows[:, :-2]
            np.subtract(A, self._centre.astype(self.dtype), out=shifted)
            rows[:, -2] = np.einsum("ij,ij->i", shifted, shifted)
            rows[:, -2] *= -self._gamma
            rows[:, -1] = 1.0
            np.matmul(rows, augmented, out=out)  # -gamma |a - z|^2 (docs/design.md §8)
            return epilogue.EXP, 1.0, 0.0, 1
        if name == "rbf" or (name == "laplacian" and not is_sparse(A)):
            if name == "rbf":
                squared_distances(A, Z, out=out)
            else:
                out[...] = cdist(A, Z, metric="cityblock")
            out *= -params["gamma"]
            return epilogue.EXP, 1.0, 0.0, 1
        if name == "matern" and params["nu"] in _MATERN_CLOSED_FORMS:
            squared_distances(A, Z, out=out)
            scale = math.sqrt(2.0 * params["nu"]) * math.sqrt(2.0 * params["gamma"])
            return _MATERN_CLOSED_FORMS[params["nu"]], scale, 0.0, 1
        if name in ("polynomial", "sigmoid"):
            products = A @ Z.T
            out[...] = products.toarray() if is_sparse(products) else products
            code = epilogue.POLYNOMIAL if name == "polynomial" else epilogue.SIGMOID
            return code, params["gamma"], params["coef0"], params.get("degree", 1)
        pairwise_kernel_into(out, A, self.landmarks, self.kernel, **params)
        return epilogue.IDENTITY, 1.0, 0.0, 1


#: Matérn kernels with a closed form the epilogue evaluates, by nu.
_MATERN_CLOSED_FORMS = {0.5: epilogue.MATERN_HALF, 1.5: epilogue.MATERN_3_2,
                        2.5: epilogue.MATERN_5_2}
