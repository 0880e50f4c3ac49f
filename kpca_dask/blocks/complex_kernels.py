"""Hermitian kernels on complex rows: the blocks of a complex (Hilbert) kernel EOF.

For complex rows z, w (analytic signals, docs/design.md §16) with the
Hermitian inner product ⟨z, w⟩ = wᴴz = Σ_f z_f conj(w_f):

* ``linear``: k(z, w) = ⟨z, w⟩, so that the kernel EOF is the complex EOF;
* ``rbf``: ROCK-PCA's Gaussian kernel (Bueso, Piles and Camps-Valls 2020), built
  from the complex "distance" ‖z‖² + ‖w‖² − 2⟨z, w⟩ (with moduli for the norms,
  where their MATLAB code squares conjugated entries):
  k(z, w) = exp(−γ‖z‖²) exp(−γ‖w‖²) exp(2γ⟨z, w⟩)
  = exp(−γ‖z − w‖²) · exp(2iγ Im⟨z, w⟩);
* ``poly``: k(z, w) = (γ⟨z, w⟩ + coef0)^degree, for an int degree >= 1 and coef0 >= 0.

Each is Hermitian, k(w, z) = conj(k(z, w)), and positive semi-definite: a
power series with non-negative coefficients in the Hermitian PSD kernel ⟨z, w⟩
(Schur's product theorem holds for Hermitian matrices), times f(z) f(w) with
f real. A phase shift of the whole record, z → e^{iθ}z for every row, leaves
every kernel value unchanged: the modes do not depend on where the phase of the
analytic signal starts.
"""

from __future__ import annotations

import numpy as np

__all__ = ["COMPLEX_KERNELS", "complex_kernel", "kernel_diagonal"]

#: The kernels :func:`complex_kernel` evaluates.
COMPLEX_KERNELS = ("linear", "rbf", "poly")


def complex_kernel(Z: np.ndarray, W: np.ndarray, kernel: str, gamma: float = 1.0,
                   degree: int = 3, coef0: float = 1.0) -> np.ndarray:
    """k(z_i, w_j) for complex rows ``Z`` (n x p) and ``W`` (m x p), complex128 (n x m).

    Examples
    --------
    >>> Z = np.array([[1.0 + 1.0j, 0.0], [0.5j, 2.0]])
    >>> K = complex_kernel(Z, Z, "rbf", gamma=0.3)
    >>> bool(np.allclose(K, K.conj().T)), bool(np.linalg.eigvalsh(K).min() > -1e-12)
    (True, True)
    """
    inner = np.asarray(Z, dtype=np.complex128) @ np.asarray(W, dtype=np.complex128).conj().T
    if kernel == "linear":
        return inner
    if kernel == "poly":
        return (gamma * inner + coef0) ** degree
    z2 = np.sum(np.abs(Z) ** 2, axis=1)
    w2 = np.sum(np.abs(W) ** 2, axis=1)
    return np.exp(-gamma * (z2[:, None] + w2[None, :] - 2.0 * inner))


def kernel_diagonal(Z: np.ndarray, kernel: str, gamma: float = 1.0, degree: int = 3,
                    coef0: float = 1.0) -> np.ndarray:
    """k(z_i, z_i) of each row of ``Z``, real (float64).

    Examples
    --------
    >>> kernel_diagonal(np.array([[1.0j, 1.0]]), "linear").tolist()
    [2.0]
    """
    z2 = np.sum(np.abs(Z) ** 2, axis=1)
    if kernel == "linear":
        return z2
    if kernel == "poly":
        return (gamma * z2 + coef0) ** degree
    return np.ones_like(z2)
