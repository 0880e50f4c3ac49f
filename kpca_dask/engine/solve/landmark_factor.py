"""The landmark kernel matrix K_mm, factorised once (docs/design.md §11).

The Nyström features are f(x) = W^T k_m(x) with W W^T = K_mm^+ on the
landmarks' span (docs/design.md §2). Here W comes from one Cholesky
factorisation of K_mm, in place, in float64:

- K_mm = L L^T (a blocked factorisation on every core,
  :mod:`kpca_dask.engine.solve.blocked_cholesky`) when every pivot L_jj^2 is above
  the cut-off tau = rcond max_j k(z_j, z_j); then W = L^{-T}.
- Otherwise a pivoted Cholesky factorisation (``pstrf``) stops at the first
  landmark whose residual variance ``k(z, z) - |f(z)|^2``, given the landmarks
  kept before it, is at most tau: K_kk = L L^T on the r kept landmarks k, and
  W = L^{-T} on their rows, zero on the others.

Either way a kept landmark adds a direction with variance above tau given the
ones before it, and a left-out landmark is within tau of their span: that is
what ``rcond`` means, relative to the largest variance of one landmark's
feature. (It is per landmark: a cut-off on K_mm's eigenvalues would add up
what many landmarks share, and with gamma = 1e-9, where every residual is
~1e-8 but three eigenvalues are ~5e-7, it dropped directions exact kernel
PCA keeps.) A kernel that is not positive semi-definite on the landmarks
(sigmoid, some callables) shows a clearly negative residual; then, and only
then, K_mm is eigendecomposed (O(m^3) and m x m more memory) and its positive
part kept, with a warning.

W is never formed: :meth:`LandmarkFactor.whiten` applies W^T and
:meth:`LandmarkFactor.unwhiten` applies W, each one triangular solve. K_mm is
computed by row panels into the one m x m buffer that the factorisation then
overwrites, so the factor costs m^2 float64 words and no more.
"""

from __future__ import annotations

import warnings
import weakref
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

from ..._parallel import blas_thread_count, in_ordered_threads, single_blas_thread
from ...blocks.feature_sums import feature_sum, kernel_by_panels, landmark_norms
from ...blocks.landmark_kernel import LandmarkKernel
from ...blocks.sparse_rows import dense
from ...blocks.statistics import kernel_origin
from ...errors import InvalidParameterError
from .blocked_cholesky import blocked_cholesky

__all__ = ["LandmarkFactor", "factor_landmarks", "reference_row", "landmark_kernel_panels",
           "every_eigenpair",
           "OVERFLOW_MESSAGE", "NO_POSITIVE_DIRECTION", "factor_threads", "ONE_THREAD_BYTES",
           "solve_threads", "THREADED_MOST_LANDMARKS", "THREADED_COLUMNS"]

OVERFLOW_MESSAGE = (
    "The kernel values of {where} are not finite: they overflowed (or a callable kernel "
    "returned NaN/inf). Scale the data down (e.g. standardize the features) or use a "
    "smaller gamma, degree or coef0; with dtype='float32', values above 3e38 overflow, "
    "so use dtype='float64'."
)

NO_POSITIVE_DIRECTION = (
    "The kernel matrix of the landmarks has no positive eigenvalue, so the kernel gives no "
    "features here. Check the kernel and its parameters (e.g. a gamma that is not so large "
    "that every kernel value underflows)."
)

#: Bytes of one row panel of K_mm while it is computed.
PANEL_BYTES = 2**22

#: A residual below -NEGATIVE_MARGIN * tau shows a kernel that is not positive
#: semi-definite on the landmarks (rounding alone stays within tau).
NEGATIVE_MARGIN = 10.0


#: Landmarks of more bytes than this (as float64) are read by feature panels.
WIDE_LANDMARK_BYTES = 2**27


def is_wide_matrix(landmarks, kernel) -> bool:
    """Whether K_mm is summed over feature panels: dense landmarks over
    :data:`WIDE_LANDMARK_BYTES` as float64, and a kernel that is a sum over features.

    Examples
    --------
    >>> is_wide_matrix(np.zeros((400, 10**6), np.float32), "rbf")
    True
    >>> is_wide_matrix(np.zeros((400, 784)), "rbf")
    False
    """
    shape = np.shape(landmarks)
    return (isinstance(landmarks, np.ndarray) and feature_sum(kernel) is not None
            and 8 * shape[0] * shape[1] > WIDE_LANDMARK_BYTES)


def _panel_rows(m: int) -> int:
    return max(1, min(m, PANEL_BYTES // (8 * max(m, 1))))


def landmark_kernel_panels(landmarks, kernel, params: dict, out: np.ndarray | None = None):
    """K_mm = k(Z, Z) in float64, row panel by row panel: its column sums and max row sum.

    With ``out`` (an m x m C-ordered float64 array) the panels are written
    there; without, only the sums are kept, so the reference row of the pass
    costs O(m) memory beside a 4 MiB panel per thread. Returns
    ``(column_sums, max_abs_row_sum)``.

    Examples
    --------
    >>> Z = np.array([[0.0], [1.0]])
    >>> sums, norm = landmark_kernel_panels(Z, "linear", {})
    >>> sums.tolist(), norm
    ([0.0, 1.0], 1.0)
    """
    if out is not None and not out.flags.c_contiguous:
        raise ValueError("landmark_kernel_panels writes its panels into a C-ordered out")
    wide = is_wide_matrix(landmarks, kernel)
    # Wide landmarks (10^6 features) are read by feature panels in their own dtype:
    # a float64 copy of Z would be m x p words more (docs/design.md §12).
    Z = landmarks if wide else np.asarray(dense(landmarks), dtype=np.float64)
    m = Z.shape[0]
    if wide and 16 * m <= Z.shape[1]:
        K = wide_kernel_matrix(Z, kernel, params)
        if out is not None:
            out[...] = K
        return K.sum(axis=0), float(np.abs(K).sum(axis=1).max())
    step = _panel_rows(m)
    if wide:
        origin = kernel_origin(Z, kernel)
        z_norms = landmark_norms(Z, origin)
        threads = 1  # each panel sums over feature panels, reading Z whole

        def make(target: np.ndarray, rows: slice) -> None:
            whole = rows.start == 0 and rows.stop == m  # Z itself: a symmetric update
            kernel_by_panels(Z if whole else Z[rows], Z, kernel, params, target, origin,
                             z_norms)
    else:
        # The pass's kernel rows (one GEMM and the compiled epilogue per panel), on every
        # thread the process may use: at m = 10^4, 0.26 s on two threads against 0.9 s
        # for numpy's elementwise steps on one (docs/design.md §11).
        panel_kernel = LandmarkKernel(Z, kernel, params, np.float64).prepared()
        # A callable kernel runs on one thread: it may not be safe to call from two.
        threads = blas_thread_count() if isinstance(kernel, str) else 1

        def make(target: np.ndarray, rows: slice) -> None:
            panel_kernel.into(target, Z[rows])

    def panel(start: int) -> tuple[np.ndarray, float]:
        rows = slice(start, min(m, start + step))
        target = out[rows] if out is not None else np.empty((rows.stop - start, m))
        make(target, rows)
        return target.sum(axis=0), float(np.abs(target).sum(axis=1).max())

    sums, norm = np.zeros(m), 0.0
    # One BLAS thread per panel thread: K_mm comes just before LAPACK (scipy's BLAS, a
    # library apart from numpy's), whose threads numpy's, spinning after a threaded
    # product, would slow. The panels' sums are added in their order, whatever the threads.
    for panel_sums, panel_norm in in_ordered_threads(panel, range(0, m, step), threads):
        sums += panel_sums
        norm = max(norm, panel_norm)
    return sums, norm


def wide_kernel_matrix(Z: np.ndarray, kernel, params: dict) -> np.ndarray:
    """K_mm of wide landmarks (many more features than landmarks), made once per landmarks.

    Its sums over 10^6 features are the cost (7-8 s at 400 x 10^6 float32 on one
    thread), its m x m words are not (1.3 MB at m = 400; at most a sixteenth of the
    landmarks' bytes here): so it is made on every BLAS thread, and kept for the same
    landmarks array and kernel until that array is gone, so that the factor after the
    pass reuses what the reference row before it made (docs/design.md §12). Read-only.

    Examples
    --------
    >>> Z = np.random.default_rng(0).normal(size=(2, 64)).astype(np.float32)
    >>> wide_kernel_matrix(Z, "linear", {}) is wide_kernel_matrix(Z, "linear", {})
    True
    """
    global _WIDE_KERNEL
    key = (kernel, repr(sorted(params.items())))
    held = _WIDE_KERNEL
    if held is not None and held[0]() is Z and held[1] == key:
        return held[2]
    origin = kernel_origin(Z, kernel)
    m = Z.shape[0]
    K = kernel_by_panels(Z, Z, kernel, params, np.empty((m, m)), origin,
                         landmark_norms(Z, origin))
    K.setflags(write=False)
    _WIDE_KERNEL = (weakref.ref(Z, _forget_wide_kernel), key, K)
    return K


#: (a weak reference to the landmarks, the kernel and its parameters, K_mm) of the last
#: wide landmarks (:func:`wide_kernel_matrix`).
_WIDE_KERNEL: tuple | None = None


def _forget_wide_kernel(reference) -> None:
    global _WIDE_KERNEL
    if _WIDE_KERNEL is not None and _WIDE_KERNEL[0] is reference:
        _WIDE_KERNEL = None


def reference_row(landmarks, kernel, params: dict) -> np.ndarray:
    """The shift r = K_mm 1 / m of the pass's kernel rows (docs/design.md §2), in O(m) memory.

    Examples
    --------
    >>> reference_row(np.array([[0.0], [2.0]]), "linear", {})
    array([0., 2.])
    """
    sums, _ = landmark_kernel_panels(landmarks, kernel, params)
    return sums / max(len(sums), 1)


@dataclass(frozen=True)
class LandmarkFactor:
    """W with W W^T = K_kk^{-1} on the kept landmarks, applied without being formed.

    ``lower`` is the Cholesky factor L of K_kk (r x r, Fortran order) and
    ``kept`` the indices of the r kept landmarks (None: all, in order); or,
    for a kernel that is not positive semi-definite on the landmarks,
    ``eigen_basis`` is W itself (m x r).
    """

    size: int
    cutoff: float
    method: str  # "cholesky", "pivoted cholesky" or "eigen"
    lower: np.ndarray | None = None
    kept: np.ndarray | None = None
    eigen_basis: np.ndarray | None = None

    @property
    def rank(self) -> int:
        """r, the dimension of the features."""
        basis = self.lower if self.lower is not None else self.eigen_basis
        return int(basis.shape[1])

    def whiten(self, Y: np.ndarray) -> np.ndarray:
        """W^T Y for Y of shape (m, b): one triangular solve, L^{-1} Y_k.

        Examples
        --------
        >>> factor = factor_landmarks(np.array([[1.0, 0.0], [0.0, 2.0]]), "linear", {}, 1e-10)
        >>> factor.whiten(np.array([[1.0], [4.0]]))
        array([[1.],
               [2.]])
        """
        Y = np.asarray(Y, dtype=np.float64)
        if self.eigen_basis is not None:
            return self.eigen_basis.T @ Y
        rows = Y if self.kept is None else Y[self.kept]
        with solve_threads(self.rank, rows.shape[1]):
            return blas.dtrsm(1.0, self.lower, np.asfortranarray(rows), lower=1)

    def unwhiten(self, V: np.ndarray) -> np.ndarray:
        """W V for V of shape (r, b): L^{-T} V on the kept rows, zero on the others."""
        V = np.asarray(V, dtype=np.float64)
        if self.eigen_basis is not None:
            return self.eigen_basis @ V
        with solve_threads(self.rank, V.shape[1]):
            solved = blas.dtrsm(1.0, self.lower, np.asfortranarray(V), lower=1, trans_a=1)
        if self.kept is None:
            return solved
        out = np.zeros((self.size, V.shape[1]))
        out[self.kept] = solved
        return out

    def inverse_gram(self) -> np.ndarray:
        """K_kk^{-1} (r x r), computed in place of L: the factor cannot be used after this.

        LAPACK ``potri`` (2 m^3 / 3 flops), for the exact trace of the
        features' covariance (:mod:`kpca_dask.engine.solve.nystrom`); only its lower
        triangle is meaningful.
        """
        if self.eigen_basis is not None:
            return self.eigen_basis @ self.eigen_basis.T
        with factor_threads(self.rank):
            inverse, info = lapack.dpotri(self.lower, lower=1, overwrite_c=1)
        if info != 0:  # pragma: no cover - L came from a successful factorisation
            raise np.linalg.LinAlgError(f"potri failed with info={info}")
        return inverse

    @property
    def W(self) -> np.ndarray:
        """W itself (m x r): for small m only (tests, the automatic m's estimates)."""
        return self.unwhiten(np.eye(self.rank))


#: OpenBLAS's own threaded LAPACK routines (``potrf``, and ``potri``: its ``trtri`` and
#: ``lauum``) on an m x m array of this many bytes or more run on one BLAS thread.
#: OpenBLAS's threaded dpotrf (0.3.30, scipy's copy; 32-bit integers) takes the process
#: down on large arrays: a plain scipy ``lapack.dpotrf`` of an rbf K_mm on two threads
#: segfaulted at m = 16 000 (2.05 GB) with the SkylakeX kernels and passed at 8192, 12 000,
#: 14 000 and 15 000; with the Haswell kernels it failed at 24 000 and passed at 20 000
#: (docs/design.md §11). The factorisation of K_mm does not call it on large arrays any more
#: (:mod:`kpca_dask.engine.solve.blocked_cholesky`: LAPACK on 512-column panels, threaded BLAS
#: for the rest); the guard stays on ``potri`` (the exact trace) and the eigen way.
ONE_THREAD_BYTES = 2**29

#: OpenBLAS's threaded GEMM and ``trsm`` with 20 vectors ran on two threads on m x m arrays
#: of m = 16 000 to 32 000 (8.2 GB) without fault (its threaded ``syrk`` of a whole
#: trailing matrix did not, at m = 20 000): products and solves with a factor or G of at
#: most this many landmarks and :data:`THREADED_COLUMNS` vectors run threaded, the
#: iterative eigensolver's; other shapes keep the one-thread guard past ONE_THREAD_BYTES.
THREADED_MOST_LANDMARKS = 32_000
THREADED_COLUMNS = 64


def factor_threads(m: int):
    """Context for OpenBLAS's own LAPACK on an m x m factor: one thread past the limit."""
    return single_blas_thread() if 8 * m * m >= ONE_THREAD_BYTES else nullcontext()


def solve_threads(m: int, columns: int):
    """Context for a BLAS solve or product of an m x m factor (or G) with ``columns``
    vectors: every thread for the shapes shown safe threaded, else :func:`factor_threads`.

    Examples
    --------
    >>> from contextlib import nullcontext
    >>> isinstance(solve_threads(16_000, 20), nullcontext)
    True
    """
    if m <= THREADED_MOST_LANDMARKS and columns <= THREADED_COLUMNS:
        return nullcontext()
    return factor_threads(m)


def factor_landmarks(landmarks, kernel, params: dict, rcond: float) -> LandmarkFactor:
    """K_mm computed and factorised in one m x m float64 buffer (module docstring).

    Examples
    --------
    >>> Z = np.array([[0.0], [1.0], [1.0]])  # the last two landmarks coincide
    >>> factor = factor_landmarks(Z, "rbf", {"gamma": 1.0}, 1e-10)
    >>> factor.method, factor.rank, factor.kept.tolist()
    ('pivoted cholesky', 2, [0, 1])
    >>> K = np.exp(-(Z - Z.T) ** 2)
    >>> bool(np.allclose(K @ factor.W @ factor.W.T @ K, K))  # K W W^T K = K: exact on Z
    True
    """
    m = len(landmarks)
    buffer = np.empty((m, m))
    _, norm = landmark_kernel_panels(landmarks, kernel, params, out=buffer)
    if not np.isfinite(norm):
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where="the landmarks"))
    cutoff = rcond * float(np.diagonal(buffer).max(initial=0.0))
    # K_mm is symmetric, so its C-ordered buffer read in Fortran order (.T) is the
    # same matrix: it is factorised where it lies, with no copy, and the first panel
    # with a pivot at or below the cut-off stops it.
    if blocked_cholesky(buffer.T, cutoff) == 0:
        return LandmarkFactor(m, cutoff, "cholesky", lower=buffer.T)
    landmark_kernel_panels(landmarks, kernel, params, out=buffer)  # the factor wrote over it
    factor = _pivoted(buffer.T, cutoff)
    if factor is not None:
        return factor
    landmark_kernel_panels(landmarks, kernel, params, out=buffer)
    return _eigen(buffer, cutoff)


def _pivoted(A: np.ndarray, cutoff: float) -> LandmarkFactor | None:
    """Pivoted Cholesky of the Fortran-ordered ``A`` in place; None if A is indefinite."""
    m = A.shape[0]
    diagonal = np.diagonal(A).copy()
    if not diagonal.max(initial=0.0) > cutoff:
        raise InvalidParameterError(NO_POSITIVE_DIRECTION)
    # Reference LAPACK's pstrf (OpenBLAS has no threaded version of its own): its
    # updates are threaded BLAS, like the blocked factorisation's.
    L, pivots, rank, info = lapack.dpstrf(A, tol=cutoff, lower=1, overwrite_a=1)
    if info < 0:  # pragma: no cover - the arguments are valid
        raise np.linalg.LinAlgError(f"pstrf failed with info={info}")
    order = pivots[:m] - 1  # LAPACK counts from 1
    # Each left-out landmark's residual variance given the kept ones: in
    # [0, cutoff] for a positive semi-definite K_mm, up to rounding.
    below = L[rank:, :rank]
    residual = diagonal[order[rank:]] - np.einsum("ij,ij->i", below, below)
    if residual.size and residual.min() < -NEGATIVE_MARGIN * cutoff:
        return None
    kept = None if rank == m and np.array_equal(order, np.arange(m)) else order[:rank]
    return LandmarkFactor(m, cutoff, "pivoted cholesky", lower=_leading_block(L, rank),
                          kept=kept)


def _leading_block(L: np.ndarray, r: int) -> np.ndarray:
    """The leading r x r block of the Fortran-ordered m x m ``L``, moved to its first r^2
    words so that BLAS reads it as a contiguous matrix (no second m x m buffer)."""
    m = L.shape[0]
    if r == m:
        return L
    flat = L.reshape(-1, order="F")  # a view: L is Fortran-contiguous
    for j in range(1, r):  # column j moves down from j * m to j * r; numpy copes with overlap
        flat[j * r:(j + 1) * r] = flat[j * m:j * m + r]
    return flat[: r * r].reshape((r, r), order="F")


def every_eigenpair(A: np.ndarray, overwrite_a: bool = False):
    """Every eigenpair of the symmetric ``A``, ascending, by LAPACK's divide and conquer
    (``syevd``, the fastest for all of them).

    scipy before 1.14 refuses ``driver="evd"`` for a 1 x 1 matrix (its workspace check
    fails), so that one takes scipy's default driver.

    Examples
    --------
    >>> every_eigenpair(np.array([[2.0]]))[0], every_eigenpair(np.diag([3.0, 1.0]))[0]
    (array([2.]), array([1., 3.]))
    """
    return linalg.eigh(A, overwrite_a=overwrite_a, driver="evd" if A.shape[0] > 1 else None)


def _eigen(kmm: np.ndarray, cutoff: float) -> LandmarkFactor:
    """The documented exception: K_mm not positive semi-definite, eigendecomposed (O(m^3))."""
    with factor_threads(kmm.shape[0]):
        s, U = every_eigenpair(kmm, overwrite_a=True)
    s, U = s[::-1], U[:, ::-1]
    if not s[0] > 0:
        raise InvalidParameterError(NO_POSITIVE_DIRECTION)
    keep = s > cutoff
    n_negative = int(np.sum(s < -cutoff))
    warnings.warn(
        f"The kernel is not positive semi-definite on the landmarks: {n_negative} of "
        f"{s.size} eigenvalues of K_mm are negative (smallest {s[-1]:.3g}). They are "
        "excluded; the model uses the kernel's positive semi-definite part.",
        UserWarning, stacklevel=4)
    return LandmarkFactor(kmm.shape[0], cutoff, "eigen",
                          eigen_basis=np.ascontiguousarray(U[:, keep] / np.sqrt(s[keep])))
