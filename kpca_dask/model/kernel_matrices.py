"""The n x n kernel matrices: :class:`~kpca_dask.ExactKernelPCA`'s, worked in place, and
:class:`~kpca_dask.KernelPCA`'s when every training row is a landmark.

With ``kernel="precomputed"`` the matrix (as
:func:`~kpca_dask.model.inputs.in_memory_fit_input` gives it: dense numpy, or a
dask array of a dask or Zarr input) is read into one float64 buffer block by
block. That buffer, or the Gram matrix of the rows, is symmetrised and centred
here and decomposed by the estimator, all in place: no second n x n array.

When every training row is a landmark, K_mm is the whole kernel matrix and the
Nyström fit is exact kernel PCA (docs/design.md §2): its centred eigenvalues
are judged as scikit-learn judges them (:func:`check_landmark_spectrum`), and
the unit eigenvectors scikit-learn keeps as ``eigenvectors_`` are the
training rows' embedding scaled by lambda^{-1/2} (:func:`training_eigenvectors`).
With ``kernel="precomputed"`` the model holds the kernel matrix itself, so they are
found as scikit-learn finds them, bit for bit: its centring
(:func:`centre_as_kernel_centerer`), its eigensolver call and its signs; the
model's components take the same signs (:func:`with_eigenvector_signs`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy import linalg

from ..blocks.feature_sums import feature_sum
from ..blocks.kernels import pairwise_kernel
from ..blocks.signs import fix_signs
from ..engine.exact.gram import gram_by_panels
from ..engine.preimages.reconstruction import embed_landmarks
from ..engine.sampling import read_rows
from ..engine.solve.components import check_spectrum
from ..engine.solve.landmark_factor import landmark_kernel_panels
from ..errors import InvalidInputError
from .fitted import FittedModel
from .inputs import FitInput

__all__ = ["kernel_matrix_buffer", "points_gram", "symmetrise_in_place", "centre_in_place",
           "centre_as_kernel_centerer", "new_point_kernel_rows", "every_row_a_landmark",
           "check_landmark_spectrum", "training_eigenvectors", "with_eigenvector_signs"]


def kernel_matrix_buffer(matrix: FitInput) -> np.ndarray:
    """The n x n kernel matrix as one new float64 array, read block by block from a lazy
    input (dask, or a Zarr array by path or URL), or copied from numpy."""
    if matrix.is_lazy:
        lazy = matrix.data
        if lazy.ndim != 2 or lazy.shape[0] != lazy.shape[1]:
            _refuse_non_square(lazy.shape)
        buffer = np.empty(lazy.shape, dtype=np.float64)
        start = 0
        for rows in lazy.chunks[0]:  # one row block held at a time beside the buffer
            buffer[start:start + rows] = lazy[start:start + rows].compute()
            start += rows
        if not np.isfinite(buffer).all():  # numpy input was checked as it was read
            raise InvalidInputError("The kernel matrix holds NaN or infinite values; kernel "
                                    "PCA needs a finite kernel.")
    else:
        K = matrix.data
        if K.shape[0] != K.shape[1]:
            _refuse_non_square(K.shape)
        buffer = np.array(K, dtype=np.float64)  # our own copy: it is overwritten
    return buffer


def _refuse_non_square(shape) -> None:
    raise InvalidInputError(
        f'With kernel="precomputed", fit takes the square kernel matrix of the training '
        f"points, shape (n_samples, n_samples); got shape {tuple(shape)}. Pass "
        "k(X_train, X_train), not the data.")


def points_gram(X, lazy: bool, kernel, params: dict) -> tuple[Any, bool, np.ndarray]:
    """K = k(X, X) of rows, in one new float64 buffer, with the rows a fit keeps for transform.

    Float64 throughout: a float32 Gram matrix loses the small eigenvalues. Lazy rows stay
    lazy (K summed over their feature panels in one read, docs/design.md §12), unless the
    kernel is not a sum over features (a callable), which needs whole rows: then they are
    read into memory. Returns the rows, whether they stayed lazy, and K.

    Examples
    --------
    >>> X = np.array([[1.0, 0.0], [0.0, 2.0]])
    >>> points_gram(X, False, "linear", {})[2]
    array([[1., 0.],
           [0., 4.]])
    """
    if lazy and feature_sum(kernel) is None:
        X, lazy = read_rows(X.astype(np.float64)), False
    if lazy:
        return X, lazy, gram_by_panels(X, kernel, params)[0]
    return X, lazy, np.asarray(pairwise_kernel(X, X, kernel, **params), dtype=np.float64)


def symmetrise_in_place(K: np.ndarray, block: int = 1024) -> None:
    """K <- (K + K^T) / 2, one pair of off-diagonal blocks at a time (no n x n temporary)."""
    n = K.shape[0]
    for i in range(0, n, block):
        for j in range(i, n, block):
            upper, lower = K[i:i + block, j:j + block], K[j:j + block, i:i + block]
            mean = 0.5 * (upper + lower.T)
            upper[...] = mean
            lower[...] = mean.T


def centre_in_place(K: np.ndarray) -> tuple[np.ndarray, float]:
    """K <- J K J for a symmetric K (docs/design.md §1): its column means and grand mean.

    Subtracts the row and column means and adds back the grand mean, in place: no
    second n x n array. The means are what centres a new point's kernel row.

    Examples
    --------
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> column_means, grand_mean = centre_in_place(K)
    >>> K, column_means, grand_mean
    (array([[ 0.5, -0.5],
           [-0.5,  0.5]]), array([1.5, 1.5]), np.float64(1.5))
    """
    column_means = K.mean(axis=0)
    grand_mean = column_means.mean()
    K -= column_means[None, :]
    K -= column_means[:, None]
    K += grand_mean
    return column_means, grand_mean


def centre_as_kernel_centerer(K: np.ndarray) -> np.ndarray:
    """K <- J K J in place, with scikit-learn's KernelCenterer's arithmetic step for step.

    Its fit takes the column means and their mean, its transform the row means, then
    subtracts and adds in that order: the same operations on the same matrix give the
    same bits. A non-symmetric matrix whose centred form is symmetric (every 2 x 2
    one) then gives exactly that centred matrix, as scikit-learn's does; the centred
    matrix is centred again to itself when its means are exactly 0.

    Examples
    --------
    >>> centre_as_kernel_centerer(np.array([[1.0, 2.0], [3.0, 40.0]]))
    array([[ 9., -9.],
           [-9.,  9.]])
    """
    n = K.shape[0]
    fit_rows = np.sum(K, axis=0) / n  # KernelCenterer.K_fit_rows_
    fit_all = np.sum(fit_rows) / n  # KernelCenterer.K_fit_all_
    pred_cols = (np.sum(K, axis=1) / n)[:, None]  # its transform's K_pred_cols
    K -= fit_rows
    K -= pred_cols
    K += fit_all
    return K


def new_point_kernel_rows(K, n_fit: int) -> np.ndarray:
    """The kernel values of new points (dense, as
    :func:`~kpca_dask.model.inputs.in_memory_input` gives them) against the n_fit training
    points, shape checked."""
    if K.shape[1] != n_fit:
        raise InvalidInputError(
            f'With kernel="precomputed", transform takes the kernel values of the new points '
            f"against the {n_fit} training points, shape (n_samples, {n_fit}); got shape "
            f"{K.shape}. Pass k(X_new, X_train).")
    return K


def every_row_a_landmark(indices, n_samples: int) -> bool:
    """Whether the landmarks' row indices are every training row (each once).

    Examples
    --------
    >>> every_row_a_landmark(np.array([2, 0, 1]), 3), every_row_a_landmark(None, 3)
    (True, False)
    """
    if indices is None or len(indices) != n_samples:
        return False
    return bool(np.array_equal(np.sort(np.asarray(indices)), np.arange(n_samples)))


def check_landmark_spectrum(landmarks, kernel, params: dict, n_components) -> None:
    """Refuse the kernel matrix of landmarks that are every training row if its centred form has
    significantly negative eigenvalues among those ``n_components`` selects, as scikit-learn's
    KernelPCA refuses it (:func:`~kpca_dask.engine.solve.components.check_spectrum`).

    O(m^3), like the eigendecomposition of K_mm that a kernel which is not positive
    semi-definite on the landmarks takes already (docs/design.md §11): only then is it needed,
    since J K J is positive semi-definite whenever K is.

    Examples
    --------
    >>> Z = np.array([[0.0], [1.0], [3.0]])
    >>> check_landmark_spectrum(Z, "linear", {}, None)
    >>> sign_flip = lambda A, B: -A @ B.T  # a negative semi-definite "kernel"
    >>> check_landmark_spectrum(Z, sign_flip, {}, None)
    Traceback (most recent call last):
    ...
    kpca_dask.errors.NotPositiveSemidefiniteError: There are significant negative ...
    """
    m = len(landmarks)
    K = np.empty((m, m))
    landmark_kernel_panels(landmarks, kernel, params, out=K)
    symmetrise_in_place(K)
    centre_in_place(K)
    eigenvalues = linalg.eigh(K.T, eigvals_only=True, overwrite_a=True, check_finite=False)
    check_spectrum(eigenvalues[::-1], n_components, stacklevel=5)


def training_eigenvectors(model: FittedModel) -> np.ndarray | None:
    """A_q, the unit eigenvectors of the centred n x n kernel matrix in training-row order, when
    every training row is a landmark (None otherwise).

    The embedding of the training rows is Y = A_q Lambda_q^{1/2} (docs/design.md §1), so a
    component with eigenvalue lambda > 0 is its embedding column over lambda^{1/2}: the same
    vector as scikit-learn's ``eigenvectors_``, with the sign of this model's embedding. The
    components with eigenvalue 0 get unit vectors orthogonal to the others (the null space has
    no preferred basis; scikit-learn's are whatever its solver returns).

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(20, 3))
    >>> A = training_eigenvectors(KernelPCA(2, n_landmarks=20, random_state=0).fit(X).model_)
    >>> bool(np.allclose(A.T @ A, np.eye(2)))
    True
    """
    if not every_row_a_landmark(model.landmark_indices, model.n_samples):
        return None
    if model.kernel == "precomputed":
        return _kernel_matrix_eigenvectors(model)
    solution = model.solution
    Y = embed_landmarks(np.asarray(model.landmarks), solution.projection, solution.offset,
                        model.kernel, model.kernel_params, np.float64)
    A = np.empty((model.n_samples, Y.shape[1]))
    A[model.landmark_indices] = Y
    positive = solution.eigenvalues > 0
    A[:, positive] /= np.sqrt(solution.eigenvalues[positive])
    zero = int(np.sum(~positive))
    if zero:
        basis = linalg.null_space(A[:, positive].T)[:, :zero]
        A[:, ~positive] = basis * fix_signs(basis)
    return A


def _kernel_matrix_eigenvectors(model: FittedModel) -> np.ndarray:
    """The leading unit eigenvectors of a precomputed model's kernel matrix, as scikit-learn's
    KernelPCA finds them: the matrix centred by :func:`centre_as_kernel_centerer`, the
    eigenpairs of its top ``n_components_`` by LAPACK's ``syevr`` on that subset (its
    ``eigen_solver="dense"``), each column's largest entry positive, largest first.

    The model's landmarks are the rows of the (symmetrised) kernel matrix with its
    diagonal beside them (:mod:`kpca_dask.model.precomputed`), in landmark order.
    """
    n = model.n_samples
    order = np.argsort(model.landmark_indices)
    K = np.asarray(model.landmarks, dtype=np.float64)[:, :n][np.ix_(order, order)]
    centre_as_kernel_centerer(K)
    q = model.solution.eigenvalues.size
    if q == 0:
        return np.empty((n, 0))
    vectors = linalg.eigh(K, subset_by_index=(n - q, n - 1))[1]
    vectors = vectors * fix_signs(vectors)
    return vectors[:, ::-1]


def with_eigenvector_signs(model: FittedModel) -> FittedModel:
    """A precomputed model with every row a landmark, each component's sign that of its
    eigenvector (:func:`training_eigenvectors`, scikit-learn's signs), so that the
    embedding of the training rows is ``eigenvectors_`` times lambda^{1/2} in sign as in
    value. Other models are returned as they are.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> K = np.array([[1.0, 2.0], [3.0, 40.0]])
    >>> model = KernelPCA(1, kernel="precomputed").fit((K + K.T) / 2).model_
    >>> training_eigenvectors(with_eigenvector_signs(model)).ravel().round(4).tolist()
    [0.7071, -0.7071]
    """
    A = training_eigenvectors(model)
    if model.kernel != "precomputed" or A is None or A.shape[1] == 0:
        return model
    solution = model.solution
    Y = embed_landmarks(np.asarray(model.landmarks), solution.projection, solution.offset,
                        model.kernel, model.kernel_params, np.float64)
    signs = np.sign(np.sum(A[model.landmark_indices] * Y, axis=0))
    signs[signs == 0] = 1.0
    return model.replace(solution=dataclasses.replace(
        solution, projection=solution.projection * signs, offset=solution.offset * signs))
