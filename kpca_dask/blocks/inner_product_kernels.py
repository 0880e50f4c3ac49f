"""Inner-product kernels on numpy blocks: polynomial, linear, sigmoid, cosine.

Each is a function of the inner products ``a.b`` alone, so a block is one
product ``A @ B.T`` (sparse ``A`` included) followed by elementwise work, and
the diagonal ``k(a, a)`` the Nyström trace certificate needs
(docs/design.md §2) comes from the row norms without any block. Parameters
carry scikit-learn's names and meanings (docs/design.md §3).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import diags as sparse_diags

from .sparse_rows import is_sparse, row_norms_squared

__all__ = ["polynomial_kernel", "linear_kernel", "sigmoid_kernel", "cosine_kernel",
           "polynomial_diagonal", "linear_diagonal", "sigmoid_diagonal", "cosine_diagonal"]


def polynomial_kernel(A, B, *, gamma, degree, coef0):
    """The polynomial kernel block ``(gamma a.b + coef0)^degree``.

    Examples
    --------
    >>> polynomial_kernel(np.array([[1.0, 2.0]]), np.array([[3.0, 1.0]]),
    ...                   gamma=1.0, degree=2, coef0=1.0)
    array([[36.]])
    """
    K = A @ B.T
    K *= gamma
    K += coef0
    return K**degree


def linear_kernel(A, B):
    """The linear kernel block ``a.b``.

    Examples
    --------
    >>> linear_kernel(np.array([[1.0, 2.0]]), np.array([[3.0, 1.0]]))
    array([[5.]])
    """
    return A @ B.T


def sigmoid_kernel(A, B, *, gamma, coef0):
    """The sigmoid kernel block ``tanh(gamma a.b + coef0)``.

    Examples
    --------
    >>> sigmoid_kernel(np.array([[1.0, 2.0]]), np.array([[3.0, 1.0]]),
    ...                gamma=0.1, coef0=0.0).round(4)
    array([[0.4621]])
    """
    K = A @ B.T
    K *= gamma
    K += coef0
    return np.tanh(K, out=K)


def _unit_rows(A):
    # Zero rows stay zero, as in sklearn.preprocessing.normalize.
    norms = np.sqrt(row_norms_squared(A))
    norms[norms == 0.0] = 1.0
    if is_sparse(A):
        return (sparse_diags(1.0 / norms) @ A).astype(A.dtype, copy=False)
    return A / norms[:, None]


def cosine_kernel(A, B):
    """The cosine kernel block ``a.b / (|a| |b|)``; a zero row gives zeros.

    Examples
    --------
    >>> cosine_kernel(np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[1.0, 1.0]])).round(4)
    array([[0.7071],
           [0.    ]])
    """
    return _unit_rows(A) @ _unit_rows(B).T


def polynomial_diagonal(A, *, gamma, degree, coef0):
    """``(gamma |a|^2 + coef0)^degree`` for each row ``a`` of A."""
    return (gamma * row_norms_squared(A) + coef0) ** degree


def linear_diagonal(A):
    """``|a|^2`` for each row ``a`` of A."""
    return row_norms_squared(A)


def sigmoid_diagonal(A, *, gamma, coef0):
    """``tanh(gamma |a|^2 + coef0)`` for each row ``a`` of A."""
    return np.tanh(gamma * row_norms_squared(A) + coef0)


def cosine_diagonal(A):
    """1 for each nonzero row of A, 0 for a zero row."""
    return (row_norms_squared(A) > 0).astype(A.dtype)
