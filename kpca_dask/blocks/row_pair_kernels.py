"""Kernel callables written for scikit-learn: two 1-D rows in, one float out.

kpca-dask calls a kernel on blocks, ``k(A, B) -> (len(A), len(B))``;
scikit-learn's KernelPCA calls a callable kernel on one pair of rows at a
time, ``k(x, y) -> float``. Code written for scikit-learn passes the second
kind. :func:`block_kernel` tells the two apart by one call on a 2 x 3 probe
(a row-pair function fails on blocks of 2 and 3 rows, or returns no 2 x 3
block) and wraps a row-pair function in :class:`RowPairKernel`, which
evaluates it pair by pair within each block, with a
:class:`~kpca_dask.errors.SlowKernelWarning` naming the cost.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import SlowKernelWarning
from .sparse_rows import dense, is_sparse

__all__ = ["RowPairKernel", "block_kernel"]

#: Rows of the probe blocks: unequal, so that a row-pair function cannot broadcast them.
_PROBE_ROWS = (2, 3)


class RowPairKernel:
    """A kernel ``k(x, y) -> float`` on two 1-D rows, called on blocks pair by pair.

    Picklable whenever ``function`` is (dask sends it to the workers); its
    name is the function's, so checkpoints and merge messages name the
    function the user wrote.

    Examples
    --------
    >>> k = RowPairKernel(lambda x, y: float(x @ y))
    >>> k(np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[1.0, 1.0]]))
    array([[3.],
           [1.]])
    """

    def __init__(self, function: Callable[..., float]) -> None:
        self.function = function
        self.__name__ = getattr(function, "__name__", type(function).__name__)
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)
        self.__module__ = getattr(function, "__module__", None) or __name__

    def __call__(self, A, B, **params) -> np.ndarray:
        B = np.asarray(dense(B))
        out = np.empty((A.shape[0], B.shape[0]), dtype=np.result_type(A.dtype, np.float32))
        for i in range(A.shape[0]):
            a = _row(A, i)
            for j in range(B.shape[0]):
                out[i, j] = self.function(a, B[j], **params)
        return out

    def diagonal(self, A, **params) -> np.ndarray:
        """The values k(a, a) for each row of A: one call per row."""
        return np.array([self.function(_row(A, i), _row(A, i), **params)
                         for i in range(A.shape[0])], dtype=np.float64)

    def __eq__(self, other) -> bool:
        return isinstance(other, RowPairKernel) and other.function == self.function

    def __hash__(self) -> int:
        return hash(self.function)

    def __repr__(self) -> str:
        return f"RowPairKernel({self.__qualname__})"


def _row(A, i: int) -> np.ndarray:
    return np.asarray(A[i : i + 1].toarray())[0] if is_sparse(A) else np.asarray(A[i])


def block_kernel(kernel, n_features: int, kernel_params: Mapping | None = None):
    """``kernel`` as the library calls it: on blocks, ``k(A, B) -> (len(A), len(B))``.

    A name or a block-form callable is returned unchanged. A callable that
    fails on blocks (or gives no block) but returns a number for two 1-D rows
    is scikit-learn's style: it is wrapped in :class:`RowPairKernel`, with a
    :class:`~kpca_dask.errors.SlowKernelWarning`. A callable that does
    neither is returned unchanged, so that the fit raises the callable's own
    error or the shape check's.

    Examples
    --------
    >>> import warnings
    >>> def dot(x, y):
    ...     return float(np.dot(x, y))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     block_kernel(dot, n_features=3)
    RowPairKernel(dot)
    >>> block_kernel("rbf", n_features=3)
    'rbf'
    """
    if not callable(kernel) or isinstance(kernel, RowPairKernel):
        return kernel
    params = dict(kernel_params or {})
    # Positive values: kernels such as chi2 refuse negative input.
    probe = np.random.default_rng(0).uniform(0.1, 1.0, size=(sum(_PROBE_ROWS), n_features))
    A, B = probe[: _PROBE_ROWS[0]], probe[_PROBE_ROWS[0] :]
    try:
        if np.shape(kernel(A, B, **params)) == _PROBE_ROWS:
            return kernel
    except Exception:  # noqa: BLE001 - any failure on blocks may mean a row-pair function
        pass
    try:
        value = kernel(A[0], B[0], **params)
    except Exception:  # noqa: BLE001 - neither style: the fit reports the block call's error
        return kernel
    if np.ndim(value) != 0:
        return kernel
    name = getattr(kernel, "__qualname__", repr(kernel))
    warnings.warn(
        f"The kernel callable {name} takes two 1-D rows and returns one number "
        "(scikit-learn's style), so kpca-dask calls it once per pair of a row and a "
        "landmark: n x m Python calls per pass over the data, some 10 microseconds each "
        "against nanoseconds per value for a block (10^9 calls, hours, for n = 10^6 rows "
        "and m = 1000 landmarks, where a named kernel takes seconds). Write it in "
        "block form, k(A, B) -> array of shape (len(A), len(B)), e.g. for an rbf kernel: "
        "def k(A, B): return np.exp(-gamma * scipy.spatial.distance.cdist(A, B, "
        "'sqeuclidean')).",
        SlowKernelWarning,
        stacklevel=3,
    )
    return RowPairKernel(kernel)
