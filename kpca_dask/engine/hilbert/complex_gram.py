"""Exact Hilbert kernel EOF from the field's Gram matrix, one read of the data (docs/design.md §19).

The analytic signal of a record is linear in it: anomalies, xeofs' padding,
the Hilbert transform, the cut and the imaginary part's mean are each linear
along the samples and the same for every feature, so Z = L J X for one
n x n complex matrix L (:func:`analytic_operator`, the transform of the
identity's columns) and J = I − 11ᵀ/n. Every Hermitian kernel of
:mod:`kpca_dask.blocks.complex_kernels` is a function of the inner products
⟨z_i, z_j⟩, which are H = Z Zᴴ = L (J A J) Lᴴ with A = X Xᵀ the real Gram
matrix of the (weighted) field: read once (:func:`~kpca_dask.engine.exact.gram.inner_products`),
never rechunked, never held as complex rows. L is applied to matrices column
by column with the FFT, so H costs O(n² log n) beyond A.

The exact kernel EOF follows from the centred kernel matrix K_c = J K J =
U Λ Uᴴ: variances Λ / (n − 1), scores U Λ^½, and the scores of new kernel
rows k' (against the training samples) (k' − k̄) U Λ^{−½} with k̄ the
kernel's column means, as the Nyström fit with every sample a landmark
gives. The maps need the field once more: Zᴴy = Xᵀ J Lᴴ y for each score y,
one product of the rows with q coefficient vectors (:func:`map_coefficients`).
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from scipy import linalg

from ..._memory import SizedByFields
from ...errors import TooFewComponentsError
from ...io.preprocessing.analytic_signal import analytic_signal
from ..exact.gram import FEATURE_PANEL, float64_panel
from ..passes.nystrom import chain_heads, pass_plan, reads_inlined

__all__ = ["analytic_operator", "applied", "hermitian_gram", "hermitian_kernel", "kernel_of_gram",
           "GramModes", "solve_gram", "map_coefficients", "record_gram", "gram_bytes",
           "GRAM_COMPLEX_ARRAYS", "maps_of_rows"]

#: Columns transformed at once by :func:`applied` (its padded copy: 3 n x this complex).
_COLUMNS = 256


def applied(M: np.ndarray, padding: str, decay_factor: float) -> np.ndarray:
    """L M for the analytic operator L of records of ``len(M)`` samples, ``M`` real or
    complex, column panel by column panel.

    Examples
    --------
    >>> t = np.arange(64) * 2 * np.pi / 16
    >>> z = applied(np.cos(t)[:, None], "none", 0.2)
    >>> bool(np.allclose(z[:, 0], np.exp(1j * t)))
    True
    """
    out = np.empty(M.shape, np.complex128)
    for a in range(0, M.shape[1], _COLUMNS):
        block = M[:, a:a + _COLUMNS]
        zero = np.zeros(block.shape[1])
        out[:, a:a + _COLUMNS] = analytic_signal(block.real, padding, decay_factor, zero)
        if np.iscomplexobj(block):
            out[:, a:a + _COLUMNS] += 1j * analytic_signal(block.imag, padding, decay_factor,
                                                           zero)
    return out


def analytic_operator(n: int, padding: str, decay_factor: float) -> np.ndarray:
    """L (n x n complex128): the analytic signal of anomalies x − mean is L (x − mean).

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(20, 3))
    >>> L = analytic_operator(20, "exp", 0.2)
    >>> bool(np.allclose(L @ (X - X.mean(0)), analytic_signal(X, "exp", 0.2)))
    True
    """
    return applied(np.eye(n), padding, decay_factor)


def _centred(A: np.ndarray) -> np.ndarray:
    """J A J for a symmetric (or Hermitian) A, a new array."""
    means = A.mean(axis=0)
    return A - means[None, :] - means.conj()[:, None] + means.mean()


def hermitian_gram(A: np.ndarray, padding: str, decay_factor: float) -> np.ndarray:
    """H = Z Zᴴ of the analytic signal Z = L J X of rows X, from A = X Xᵀ.

    H = L (L B)ᴴ with B = J A J real symmetric, L applied twice by the FFT.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(30, 4))
    >>> Z = analytic_signal(X, "exp", 0.2)
    >>> bool(np.allclose(hermitian_gram(X @ X.T, "exp", 0.2), Z @ Z.conj().T))
    True
    """
    half = applied(_centred(A), padding, decay_factor)
    H = applied(np.ascontiguousarray(half.conj().T), padding, decay_factor)
    del half
    H += H.conj().T  # Hermitian to the last digit
    H *= 0.5
    return H


def hermitian_kernel(H: np.ndarray, params) -> tuple[np.ndarray, np.ndarray, dict]:
    """The record's Hermitian kernel matrix K from the analytic signal's inner products ``H``
    (:func:`hermitian_gram`), their squared norms and the kernel's parameters: ``params``
    a dict, or a function of (H, norms) that gives it (a rule for gamma).

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(8, 3))
    >>> H = hermitian_gram(X @ X.T, "none", 0.2)
    >>> K, norms, _ = hermitian_kernel(H, {"kernel": "linear"})
    >>> Z = analytic_signal(X, "none", 0.2)
    >>> bool(np.allclose(K, Z @ Z.conj().T)), bool(np.allclose(norms, np.diag(K).real))
    (True, True)
    """
    norms = H.diagonal().real.copy()
    params = params(H, norms) if callable(params) else params
    return kernel_of_gram(H, norms, norms, params), norms, params


def kernel_of_gram(inner: np.ndarray, norms: np.ndarray, other_norms: np.ndarray,
                   params: dict) -> np.ndarray:
    """The Hermitian kernel of :mod:`~kpca_dask.blocks.complex_kernels` from the inner
    products ⟨z_i, w_j⟩ and the squared norms of the z (rows) and the w (columns).

    Examples
    --------
    >>> from kpca_dask.blocks.complex_kernels import complex_kernel
    >>> Z = np.array([[1.0 + 1.0j, 0.0], [0.5j, 2.0]])
    >>> norms = np.sum(np.abs(Z) ** 2, axis=1)
    >>> K = kernel_of_gram(Z @ Z.conj().T, norms, norms, {"kernel": "rbf", "gamma": 0.3})
    >>> bool(np.allclose(K, complex_kernel(Z, Z, "rbf", gamma=0.3)))
    True
    """
    kernel = params["kernel"]
    if kernel == "linear":
        return inner
    if kernel == "poly":
        return (params["gamma"] * inner + params["coef0"]) ** params["degree"]
    return np.exp(-params["gamma"] * (norms[:, None] + other_norms[None, :] - 2.0 * inner))


@dataclass(frozen=True)
class GramModes(SizedByFields):
    """The q leading modes of the exact complex kernel EOF (see the module).

    ``projection`` (n x q) and ``centre`` (n,) make the scores of kernel rows
    (k' − centre) @ projection; ``scores`` are the training samples' (n x q);
    ``explained_variance`` their variances; ``total_variance`` the centred
    kernel's trace / (n − 1).
    """

    projection: np.ndarray
    centre: np.ndarray
    scores: np.ndarray
    explained_variance: np.ndarray
    total_variance: float

    def turned(self, turn: np.ndarray) -> "GramModes":
        """The same modes, each times its unit phase ``turn``."""
        return GramModes(self.projection * turn, self.centre, self.scores * turn,
                         self.explained_variance, self.total_variance)


def solve_gram(K: np.ndarray, n_components: int) -> GramModes:
    """The q leading modes of the Hermitian kernel matrix ``K`` (n x n), centred.

    Examples
    --------
    >>> Z = np.exp(1j * np.arange(40.0) ** 2 / 7).reshape(10, 4)
    >>> modes = solve_gram(Z @ Z.conj().T, 2)
    >>> Zc = Z - Z.mean(axis=0)
    >>> top = np.linalg.eigvalsh(Zc.conj().T @ Zc)[::-1][:2] / 9
    >>> bool(np.allclose(modes.explained_variance, top))
    True
    """
    n = K.shape[0]
    centred = _centred(K)
    total = float(np.trace(centred).real) / (n - 1)
    q = min(n_components, n)
    values, vectors = linalg.eigh(centred, subset_by_index=[n - q, n - 1], overwrite_a=True,
                                  check_finite=False)
    values, vectors = values[::-1], vectors[:, ::-1]
    positive = values > max(float(values[0]) if values.size else 0.0, 0.0) * 1e-12
    if values.size < n_components or not positive.all():
        raise TooFewComponentsError(
            f"n_components={n_components} asks for more modes than the kernel has positive "
            f"eigenvalues ({int(positive.sum())}); ask for fewer.")
    root = np.sqrt(values)
    return GramModes(vectors / root, K.mean(axis=0), vectors * root, values / (n - 1), total)


def map_coefficients(modes: GramModes, L: np.ndarray) -> np.ndarray:
    """C (q x n complex) with C X = (Zᴴ Y)ᵀ for the training scores Y: the maps are one
    product of the rows X with C (Zᴴ = Xᵀ J Lᴴ, so (Zᴴ Y)ᵀ = Yᵀ conj(L) J X).

    Examples
    --------
    >>> X = np.random.default_rng(1).normal(size=(12, 3))
    >>> Z = analytic_signal(X, "none", 0.2)
    >>> modes = solve_gram(Z @ Z.conj().T, 2)
    >>> C = map_coefficients(modes, analytic_operator(12, "none", 0.2))
    >>> bool(np.allclose(C @ X, (Z.conj().T @ modes.scores).T))
    True
    """
    C = (L.T @ modes.scores.conj()).T.conj()  # Yᵀ conj(L), without a conjugated copy of L
    return C - C.mean(axis=1, keepdims=True)  # times J


def record_gram(cross: np.ndarray, own: np.ndarray, train_sums: np.ndarray,
                train_total: float, padding: str, decay_factor: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(H', norms')``: the inner products of a new record's analytic signal with the
    training samples' (n' x n) and its squared norms, from ``cross`` = X' Xᵀ,
    ``own`` = X' X'ᵀ, ``train_sums`` = X Xᵀ 1 and ``train_total`` = 1ᵀ X Xᵀ 1.

    The new record is read as a record of its own, as anomalies from the fit's
    means μ = Xᵀ1/n: Z' = L' (X' − 1μᵀ), so H' = L' (X' − 1μᵀ) Xᵀ J Lᴴ.

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> X, Y = rng.normal(size=(15, 4)), rng.normal(size=(9, 4))
    >>> A = X @ X.T
    >>> H, norms = record_gram(Y @ X.T, Y @ Y.T, A.sum(1), A.sum(), "exp", 0.2)
    >>> Z, W = analytic_signal(X, "exp", 0.2), analytic_signal(Y, "exp", 0.2, X.mean(0))
    >>> bool(np.allclose(H, W @ Z.conj().T)), bool(np.allclose(norms, (abs(W) ** 2).sum(1)))
    (True, True)
    """
    n = cross.shape[1]
    mean_products = cross.sum(axis=1) / n            # X' μ
    D = cross - train_sums[None, :] / n               # (X' − 1μᵀ) Xᵀ
    D -= D.mean(axis=1, keepdims=True)                # ... J
    back = applied(np.ascontiguousarray(D.T), padding, decay_factor)   # L Dᵀ
    H = applied(np.ascontiguousarray(back.conj().T), padding, decay_factor)
    E = own - mean_products[:, None] - mean_products[None, :] + train_total / n**2
    record = applied(E, padding, decay_factor)                          # L' E
    L_new = analytic_operator(own.shape[0], padding, decay_factor)
    norms = np.einsum("ij,ij->i", record, L_new.conj()).real            # diag(L' E L'ᴴ)
    return H, norms


#: n x n complex128 arrays the Gram way holds at once at most (H, its half-transform, the
#: kernel, its centred copy and the eigensolver's workspace), beside the real A.
GRAM_COMPLEX_ARRAYS = 5


def gram_bytes(n: int) -> int:
    """The memory the Gram way's n x n work takes, in bytes (the model of its peak).

    Examples
    --------
    >>> gram_bytes(1000) // 2**20
    83
    """
    return (16 * GRAM_COMPLEX_ARRAYS + 8) * n * n


def maps_of_rows(C: np.ndarray, X: da.Array) -> da.Array:
    """C X (q x p complex), lazily, for the rows X (n x p, any float dtype): each row block's
    product in float64 panels of features, summed over the blocks by chains of tasks
    (:func:`_chained_maps`; a tree when the rows come in feature chunks).

    A task holds its chunk in the chunk's own dtype and a float64 panel of it, never a
    float64 copy of the whole chunk (twice a float32 chunk: 125 MB beside a 62.5 MB
    chunk of a 250 x 1250 grid).

    Examples
    --------
    >>> X = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    >>> C = np.array([[1.0 + 1j, 0.0, 2.0, -1j]])
    >>> bool(np.allclose(maps_of_rows(C, da.from_array(X, chunks=(2, 3))).compute(), C @ X))
    True
    """
    q = C.shape[0]
    coefficients = np.vstack([C.real, C.imag]).T  # (n, 2q)
    if X.numblocks[1] > 1:  # feature chunks: one product per block, summed as a tree
        blocks = da.from_array(coefficients, chunks=(X.chunks[0], 2 * q))
        parts = da.blockwise(_block_maps, "klj", X, "kj", blocks, "kl", dtype=np.float64,
                             adjust_chunks={"k": 1}, meta=np.empty((0, 0, 0), np.float64))
        both = parts.sum(axis=0)
    else:
        both = _chained_maps(coefficients, X)
    return both[:q] + 1j * both[q:]


def _chained_maps(coefficients: np.ndarray, X: da.Array) -> da.Array:
    """coefficientsᵀ X for whole rows, as the pass adds its sums (docs/design.md §2): a few
    chains of tasks each add their row blocks into one (2q x p) float64 sum, each block read
    inside the task that adds it, so a worker holds one sum and one block per chain, not a
    product per block read ahead."""
    rows = X.to_delayed().ravel()
    edges = np.concatenate([[0], np.cumsum(X.chunks[0])])
    add = dask.delayed(_add_block_maps, pure=True)
    heads = chain_heads(len(rows), pass_plan(X, 1).chains, lambda running, i: add(
        running, rows[i], coefficients[edges[i]:edges[i + 1]]))
    total = dask.delayed(sum, pure=True)(heads)
    summed = reads_inlined(total, {block.key for block in rows})
    return da.from_delayed(summed, shape=(coefficients.shape[1], X.shape[1]), dtype=np.float64)


def _add_block_maps(running, rows: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """``running`` (None: a new sum) plus coefficientsᵀ rows, in place: a task of a chain."""
    product = _block_maps(rows, coefficients)[0]
    if running is None:
        return product
    running += product
    return running


def _block_maps(rows: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """coefficientsᵀ rows (1 x 2q x p float64) of one row block, by panels of features."""
    out = np.empty((1, coefficients.shape[1], rows.shape[1]))
    for f in range(0, rows.shape[1], FEATURE_PANEL):
        out[0, :, f:f + FEATURE_PANEL] = coefficients.T @ float64_panel(rows, f)
    return out
