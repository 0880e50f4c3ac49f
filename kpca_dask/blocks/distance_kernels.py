"""Distance kernels on numpy blocks: squared distances, exp without subnormals, rbf, laplacian.

Squared Euclidean distances are computed as ``|a|^2 + |b|^2 - 2 a.b`` (one
GEMM) after moving the origin to the mean of ``B``, and clipped at zero
because cancellation can make them slightly negative. The rbf kernel
``exp(-gamma |a - b|^2)`` and the laplacian kernel ``exp(-gamma |a - b|_1)``
are exponentials of them (docs/design.md §3 lists the kernels).

Kernels made of an exponential (rbf, laplacian, matern) never return a
subnormal number: below about 7 times the dtype's smallest normal number
(1e-37 in float32, 1e-307 in float64) the value is that bound, see
:func:`exp_nonpositive`. Subnormal kernel values change nothing a float32 or
float64 sum can hold, and the CPU handles them on a slow path: an exp with
8 % subnormal results took 10 times as long, and so did the products after it.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from .epilogue import exp_floor_into, exponent_floor
from .sparse_rows import cityblock_distances, is_sparse, row_norms_squared

__all__ = ["squared_distances", "exp_nonpositive", "rbf_kernel", "laplacian_kernel"]


def squared_distances(A: np.ndarray, B: np.ndarray, out: np.ndarray | None = None
                      ) -> np.ndarray:
    """Squared Euclidean distances ``|a - b|^2`` between the rows of A and B.

    Computed as ``|a|^2 + |b|^2 - 2 a.b`` in the dtype of ``A`` and clipped at
    zero, after subtracting the mean of ``B`` from both: the rounding error of
    the expansion is ``~eps |a|^2``, so data far from the origin (1e6 + N(0, 1))
    would lose every digit of their distances; distances do not change.
    ``out``, when given, receives the result (shape (len(A), len(B)), dtype of A).

    Examples
    --------
    >>> squared_distances(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]]))
    array([[25.]])
    >>> squared_distances(np.array([[1e8 + 1.0]]), np.array([[1e8], [1e8 + 3.0]]))
    array([[1., 4.]])

    Sparse ``A`` (and ``B``) are not shifted, which would densify them: their
    distances come from the norms and products as they are, accurate to
    ``~eps (|a|^2 + |b|^2)`` rather than ``~eps |a - b|^2``.
    """
    if is_sparse(A) or is_sparse(B):
        d2 = _sparse_squared_distances(A, B)
        if out is None:
            return d2
        out[...] = d2
        return out
    if B.shape[0]:
        centre = B.mean(axis=0, dtype=np.float64).astype(A.dtype)
        A = A - centre
        B = B - centre
    d2 = np.matmul(A, B.T, out=out)
    d2 *= -2.0
    d2 += np.einsum("ij,ij->i", A, A)[:, None]
    d2 += np.einsum("ij,ij->i", B, B)[None, :]
    np.maximum(d2, 0.0, out=d2)
    return d2


def _sparse_squared_distances(A, B):
    products = A @ B.T
    d2 = products.toarray() if is_sparse(products) else np.asarray(products)
    d2 = d2.astype(A.dtype, copy=False)
    d2 *= -2.0
    d2 += row_norms_squared(A)[:, None]
    d2 += row_norms_squared(B)[None, :]
    np.maximum(d2, 0.0, out=d2)
    return d2


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """``exp(x)`` in place for an exponent ``x`` that should be <= 0, with no subnormal result.

    ``x`` is first clipped to [:func:`~kpca_dask.blocks.epilogue.exponent_floor`, 0]:
    above 0 it can only be rounding (a distance's cancellation), and below the
    floor exp would return subnormal numbers, which the CPU handles ten times
    slower in the exp and in every product after it. The values moved are
    below 1e-37 in float32, far under any sum's rounding.

    Examples
    --------
    >>> exp_nonpositive(np.array([0.0, -1.0, -1e4])).round(4)
    array([1.    , 0.3679, 0.    ])
    >>> bool(exp_nonpositive(np.array([-1e4], np.float32))[0] >= np.finfo(np.float32).tiny)
    True
    """
    if x.dtype in (np.float32, np.float64):
        return exp_floor_into(x)  # compiled, the same speed on every CPU
    np.clip(x, exponent_floor(x.dtype), 0.0, out=x)
    return np.exp(x, out=x)


def rbf_kernel(A, B, *, gamma):
    """The rbf (Gaussian) kernel block ``exp(-gamma |a - b|^2)``.

    Examples
    --------
    >>> rbf_kernel(np.array([[0.0, 0.0]]), np.array([[1.0, 0.0]]), gamma=1.0).round(4)
    array([[0.3679]])
    """
    d2 = squared_distances(A, B)
    d2 *= -gamma
    return exp_nonpositive(d2)


def laplacian_kernel(A, B, *, gamma):
    """The laplacian kernel block ``exp(-gamma |a - b|_1)``, sparse ``A`` included.

    Examples
    --------
    >>> laplacian_kernel(np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]]), gamma=0.5).round(4)
    array([[0.3679]])
    """
    if is_sparse(A):
        d1 = cityblock_distances(A, B)
    else:
        d1 = cdist(A, B, metric="cityblock").astype(A.dtype, copy=False)
    d1 *= -gamma
    return exp_nonpositive(d1)
