"""Kernel blocks by name: the registry of kernels, their parameters, one entry point.

Each kernel maps two row blocks ``A`` (n_a x p) and ``B`` (n_b x p) to the
n_a x n_b block ``k(A, B)``, and has a matching diagonal ``k(a, a)`` used for
the Nyström trace certificate (docs/design.md §2). Nothing here knows about dask: the
blockwise code calls these on one chunk at a time, which keeps them easy to
test against scikit-learn and scipy.

The kernels themselves live by family: :mod:`kpca_dask.blocks.distance_kernels`
(rbf, laplacian, and the squared distances and exp without subnormal values
they are made of), :mod:`kpca_dask.blocks.inner_product_kernels` (polynomial,
linear, sigmoid, cosine) and :mod:`kpca_dask.blocks.matern`. This module names
them (docs/design.md §3), resolves their parameters and evaluates any of them,
or a callable, with :func:`pairwise_kernel` and :func:`kernel_diagonal`.
:mod:`kpca_dask.blocks.landmark_kernel` evaluates them against fixed landmarks.

Parameters follow scikit-learn's names: ``gamma``, ``degree``, ``coef0``, plus
``nu`` for Matérn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from ..errors import InvalidParameterError
from .distance_kernels import exp_nonpositive, laplacian_kernel, rbf_kernel, squared_distances
from .inner_product_kernels import (
    cosine_diagonal,
    cosine_kernel,
    linear_diagonal,
    linear_kernel,
    polynomial_diagonal,
    polynomial_kernel,
    sigmoid_diagonal,
    sigmoid_kernel,
)
from .matern import matern_kernel
from .row_pair_kernels import RowPairKernel
from .sparse_rows import dense

__all__ = [
    "KERNEL_NAMES",
    "POINT_KERNEL_NAMES",
    "precomputed_block",
    "pairwise_kernel",
    "pairwise_kernel_into",
    "kernel_diagonal",
    "kernel_name",
    "kernel_parameters",
    "canonical_kernel_name",
    "is_translation_invariant",
]

KernelCallable = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _ones(A, **_):
    return np.ones(A.shape[0], dtype=A.dtype)


def precomputed_block(A, B):
    """A kernel block read off rows that hold it: the first len(B) columns of A.

    With ``kernel="precomputed"`` a row is ``[k(x, z_1), ..., k(x, z_m), k(x, x)]``
    (:mod:`kpca_dask.model.precomputed`); the landmarks are rows of the same kind.

    Examples
    --------
    >>> precomputed_block(np.array([[0.5, 0.25, 1.0]]), np.zeros((2, 3))).tolist()
    [[0.5, 0.25]]
    """
    return np.array(A[:, : B.shape[0]], dtype=A.dtype)


def _precomputed_diagonal(A, **_):
    return np.array(A[:, -1], dtype=A.dtype)


@dataclass(frozen=True)
class _KernelSpec:
    function: Callable[..., np.ndarray]
    diagonal: Callable[..., np.ndarray]
    parameters: tuple[str, ...]


_KERNELS: Mapping[str, _KernelSpec] = {
    "rbf": _KernelSpec(rbf_kernel, _ones, ("gamma",)),
    "laplacian": _KernelSpec(laplacian_kernel, _ones, ("gamma",)),
    "polynomial": _KernelSpec(polynomial_kernel, polynomial_diagonal,
                              ("gamma", "degree", "coef0")),
    "linear": _KernelSpec(linear_kernel, linear_diagonal, ()),
    "sigmoid": _KernelSpec(sigmoid_kernel, sigmoid_diagonal, ("gamma", "coef0")),
    "cosine": _KernelSpec(cosine_kernel, cosine_diagonal, ()),
    "matern": _KernelSpec(matern_kernel, _ones, ("gamma", "nu")),
    "precomputed": _KernelSpec(precomputed_block, _precomputed_diagonal, ()),
}
_ALIASES = {"gaussian": "rbf", "poly": "polynomial"}

#: Kernels of x - y alone, unchanged when data and landmarks move together.
_TRANSLATION_INVARIANT = frozenset({"rbf", "laplacian", "matern"})

#: Names accepted for ``kernel`` (besides a callable).
KERNEL_NAMES: tuple[str, ...] = tuple(sorted([*_KERNELS, *_ALIASES]))
#: The kernels of points: all but "precomputed", whose rows hold kernel values already.
POINT_KERNEL_NAMES: tuple[str, ...] = tuple(name for name in KERNEL_NAMES
                                             if name != "precomputed")


def _spec(kernel: str) -> _KernelSpec:
    name = _ALIASES.get(kernel, kernel)
    try:
        return _KERNELS[name]
    except (KeyError, TypeError):
        raise InvalidParameterError(
            f"Unknown kernel {kernel!r}. Use one of {', '.join(KERNEL_NAMES)}, "
            "or a callable k(A, B) -> ndarray of shape (len(A), len(B))."
        ) from None


def kernel_parameters(kernel: str) -> tuple[str, ...]:
    """The keyword arguments the named ``kernel`` takes (aliases resolved).

    Examples
    --------
    >>> kernel_parameters("poly")
    ('gamma', 'degree', 'coef0')
    """
    return _spec(kernel).parameters


def kernel_name(kernel: str | KernelCallable) -> str | None:
    """The registry name of a named kernel, aliases resolved; None for a callable.

    Unlike :func:`canonical_kernel_name` it does not check the name: an
    unknown one comes back as it is.

    Examples
    --------
    >>> kernel_name("gaussian"), kernel_name(np.dot)
    ('rbf', None)
    """
    return None if callable(kernel) else _ALIASES.get(kernel, kernel)


def is_translation_invariant(kernel: str | KernelCallable) -> bool:
    """Whether ``k(a + c, b + c) == k(a, b)`` for every shift c (False for callables).

    Examples
    --------
    >>> is_translation_invariant("gaussian"), is_translation_invariant("linear")
    (True, False)
    """
    return kernel_name(kernel) in _TRANSLATION_INVARIANT


def canonical_kernel_name(kernel: str | KernelCallable) -> str | KernelCallable:
    """Return the registry name for ``kernel`` (aliases resolved), or the callable."""
    if callable(kernel):
        return kernel
    _spec(kernel)
    return _ALIASES.get(kernel, kernel)


def pairwise_kernel(
    A: np.ndarray, B: np.ndarray, kernel: str | KernelCallable = "rbf", **params
) -> np.ndarray:
    """Kernel block ``k(A, B)`` of shape (len(A), len(B)).

    Computed in the dtype of ``A`` (``B`` is cast to it), so float32 blocks
    stay float32. ``params`` are those returned by :func:`resolve_kernel_params`.
    ``A`` may be a scipy.sparse matrix: every named kernel is then computed
    from sparse . dense products and sparse row norms, never densifying A;
    ``B``, the landmark side, is made dense. A callable kernel receives the
    sparse ``A`` as it is.

    Examples
    --------
    >>> A = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> pairwise_kernel(A, A, "rbf", gamma=1.0).round(4)
    array([[1.    , 0.3679],
           [0.3679, 1.    ]])
    """
    B = np.asarray(dense(B), dtype=A.dtype)
    if callable(kernel):
        K = np.asarray(kernel(A, B, **params))
        if K.shape != (A.shape[0], B.shape[0]):
            raise InvalidParameterError(
                f"The kernel callable returned shape {K.shape}; it must return "
                f"(len(A), len(B)) = {(A.shape[0], B.shape[0])}."
            )
        return K
    return _spec(kernel).function(A, B, **params)


def pairwise_kernel_into(out: np.ndarray, A: np.ndarray, B: np.ndarray,
                         kernel: str | KernelCallable = "rbf", **params) -> np.ndarray:
    """Write the kernel block ``k(A, B)`` into ``out`` and return it.

    The same values as :func:`pairwise_kernel`. For rbf the distance GEMM
    writes straight into ``out`` and the elementwise steps run in place, so a
    caller that passes a sub-block small enough for the cache keeps every
    step in cache (docs/design.md §8); other kernels are evaluated, then copied.

    Examples
    --------
    >>> A = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> pairwise_kernel_into(np.empty((2, 1)), A, A[:1], "rbf", gamma=1.0).round(4)
    array([[1.    ],
           [0.3679]])
    """
    if kernel_name(kernel) == "rbf":
        squared_distances(A, np.asarray(B, dtype=A.dtype), out=out)
        out *= -params["gamma"]
        return exp_nonpositive(out)
    out[...] = pairwise_kernel(A, B, kernel, **params)
    return out


def kernel_diagonal(A: np.ndarray, kernel: str | KernelCallable = "rbf", **params) -> np.ndarray:
    """The values ``k(a, a)`` for each row ``a`` of A, without the full block.

    Examples
    --------
    >>> kernel_diagonal(np.array([[1.0, 2.0]]), "linear")
    array([5.])
    """
    if isinstance(kernel, RowPairKernel):
        return kernel.diagonal(A, **params)  # n calls, not the n x 256 of square blocks
    if callable(kernel):
        # A callable has no known diagonal: evaluate small square blocks.
        step = 256
        return np.concatenate(
            [np.diagonal(pairwise_kernel(A[i : i + step], dense(A[i : i + step]), kernel,
                                         **params))
             for i in range(0, A.shape[0], step)]
            or [np.empty(0, A.dtype)]
        )
    return _spec(kernel).diagonal(A, **params)
