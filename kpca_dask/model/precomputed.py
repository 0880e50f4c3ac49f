"""``kernel="precomputed"``: Nyström kernel PCA from a stored n x n kernel matrix.

The data are the kernel matrix K itself: row i holds k(x_i, x_j) for every
training point j. With landmarks chosen as column indices J (m of them), the
Nyström pass needs of each row only its m landmark columns K[i, J] and its
diagonal value K[i, i] (for the trace, docs/design.md §2), so a fit reads the
n x m columns and the diagonal of K and nothing else: a Zarr array chunked by
columns is read only in the chunks that hold them.

Those are laid side by side as the rows the engine sees, ``[K[i, J], K[i, i]]``
(n x (m + 1)), and the "precomputed" kernel of
:mod:`kpca_dask.blocks.kernels` reads a kernel block off them: k(A, B) is the
first len(B) columns of A, k(a, a) its last. The landmark points are the
landmark rows of that array, ``[K[J, J], K[J, J] diagonal]``, so K_mm is the
kernel of the landmarks with themselves, as for any kernel. A new point is a
row of kernel values against the n training points, ``K_new[i, :]``; its
landmark columns are all a projection needs. Its k(x, x) is not given, so the
novelty scores are refused.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np

from ..engine.sampling import as_generator, sample_indices
from ..errors import (
    InvalidInputError,
    InvalidParameterError,
    NonSymmetricKernelWarning,
    NotInvertibleError,
)
from .fitted import FittedModel
from .fitting import fit_model
from .kernel_matrices import with_eigenvector_signs
from .provenance import source_of, with_rows

__all__ = ["PRECOMPUTED", "fit_precomputed", "landmark_columns", "precomputed_rows",
           "new_point_rows", "refuse_scores", "refuse_growth"]

PRECOMPUTED = "precomputed"

#: Landmark strategies that apply to a kernel matrix: uniform columns. "kmeans", the
#: default, needs points; with a kernel matrix it draws uniform columns too, so that
#: KernelPCA(kernel="precomputed") works as scikit-learn's does, with no other change.
COLUMN_STRATEGIES = ("uniform", "kmeans")


def fit_precomputed(params: dict, K: da.Array, **fit_options) -> FittedModel:
    """The model of the kernel matrix ``K`` (n x n): its landmark columns and diagonal are
    read in one pass, as the rows of a fit of points are (see the module docstring).

    Examples
    --------
    >>> from sklearn.metrics.pairwise import rbf_kernel
    >>> from kpca_dask import KernelPCA
    >>> K = rbf_kernel(np.random.default_rng(0).normal(size=(30, 2)))
    >>> params = KernelPCA(2, kernel="precomputed", landmarks="uniform").get_params()
    >>> model = fit_precomputed(params, da.from_array(K))
    >>> model.n_features, model.landmark_indices.size, model.landmarks.shape
    (30, 30, (30, 31))
    """
    _refuse_unsupported(params)
    _check_square(K)
    columns = landmark_columns(params, K.shape[0])
    block = np.asarray(K[:, columns][columns].compute(), dtype=np.float64)  # columns first
    symmetric = _symmetric(block)
    rows = precomputed_rows(K, columns, symmetrise=not symmetric)
    # The landmarks' own rows of that array, from K[J, J] read once: its symmetric part
    # (the block itself when symmetric) and its diagonal, K[j, j].
    kmm = block if symmetric else (block + block.T) / 2
    points = np.column_stack([kmm, np.diagonal(block)])  # m x (m + 1)
    inner = {**params, "kernel": PRECOMPUTED, "kernel_params": None, "gamma": None,
             "landmarks": points, "n_landmarks": columns.size}
    model = fit_model(inner, rows, landmark_rows=columns, **fit_options)
    model = model.replace(landmark_indices=columns, n_features=K.shape[0],
                          row_provenance=with_rows(None, source_of(K), 0, K.shape[0]))
    # Every column a landmark: exact kernel PCA of the matrix, with scikit-learn's signs.
    return with_eigenvector_signs(model)


def _refuse_unsupported(params: dict) -> None:
    """What kernel="precomputed" cannot do, refused before anything is read."""
    landmarks = params["landmarks"]
    if isinstance(landmarks, str) and landmarks not in COLUMN_STRATEGIES or callable(landmarks):
        raise InvalidParameterError(
            f'kernel="precomputed" takes landmarks="uniform" or the landmarks\' column indices '
            f"(a 1-D array of ints); got landmarks={landmarks!r}, which needs the points "
            "themselves.")
    if params["n_landmarks"] == "auto":
        raise InvalidParameterError(
            'kernel="precomputed" needs an int n_landmarks (n_landmarks >= n_samples: every '
            'sample, exact kernel PCA); n_landmarks="auto" is not supported with it.')
    if params["fit_inverse_transform"]:
        raise InvalidParameterError(
            # scikit-learn's sentence first, word for word: code written for it matches it.
            "Cannot fit_inverse_transform with a precomputed kernel. The pre-image map goes "
            "back to points, which a kernel matrix does not hold: fit the points with their "
            "kernel (a name or a callable) instead.")


def landmark_columns(params: dict, n: int) -> np.ndarray:
    """The landmarks' column indices, ascending: given, or m drawn as the "uniform" strategy
    draws m rows of n (the same indices as a fit of the points with the same seed).

    Examples
    --------
    >>> params = {"landmarks": "uniform", "n_landmarks": 3, "random_state": 0}
    >>> landmark_columns(params, 10).size, landmark_columns(params, 2).tolist()
    (3, [0, 1])
    """
    given = params["landmarks"]
    if not isinstance(given, str):
        indices = np.asarray(given)
        if (indices.ndim != 1 or indices.size == 0 or indices.dtype.kind not in "iu"
                or (indices < 0).any() or (indices >= n).any()
                or np.unique(indices).size != indices.size):
            raise InvalidParameterError(
                'With kernel="precomputed", explicit landmarks are column indices of the '
                f"kernel matrix: a 1-D array of distinct ints in [0, {n}); got "
                f"{_short_repr(indices)}.")
        return np.sort(indices.astype(np.int64))
    m = min(int(params["n_landmarks"]), n)
    if m >= n:
        return np.arange(n, dtype=np.int64)
    # As the fit of points draws them (kpca_dask.model.fitting: the landmark
    # generator is the seed's, its children go to gamma and the automatic m).
    return np.asarray(sample_indices(n, m, as_generator(params["random_state"])),
                      dtype=np.int64)


def _symmetric(block: np.ndarray) -> bool:
    """Whether K[J, J] is symmetric to rounding; if not, warn that K is symmetrised."""
    gap = float(np.abs(block - block.T).max(initial=0.0))
    if gap <= SYMMETRY_RTOL * float(np.abs(block).max(initial=0.0)):
        return True
    warnings.warn(
        f"The kernel matrix is not symmetric on the landmarks (max |K - K^T| = {gap:.3g}): "
        "it is taken as (K + K^T) / 2, as a centred kernel's eigenvectors are those of its "
        "symmetric part; the landmarks' rows are read as well as their columns. Pass a "
        "symmetric kernel matrix to read the columns only.", NonSymmetricKernelWarning,
        stacklevel=4)
    return False


#: K[J, J] - K[J, J]^T up to this times max |K[J, J]| is rounding, not asymmetry.
SYMMETRY_RTOL = 1e-12


def precomputed_rows(K: da.Array, columns: np.ndarray, symmetrise: bool = False) -> da.Array:
    """``[K[:, J], diag(K)]``, lazily: the rows the engine fits (n x (m + 1)).

    With ``symmetrise``, the columns are those of (K + K^T) / 2: the landmarks'
    rows of K are read too.

    Raises
    ------
    InvalidInputError
        K is not square.

    Examples
    --------
    >>> K = da.from_array(np.arange(16.0).reshape(4, 4), chunks=2)
    >>> precomputed_rows(K, np.array([1, 3])).compute()[:, -1].tolist()
    [0.0, 5.0, 10.0, 15.0]
    """
    _check_square(K)
    diagonal = da.diagonal(K).rechunk((K.chunks[0],))
    landmark_columns_ = K[:, columns]
    if symmetrise:
        landmark_rows = K[columns, :].T.rechunk((K.chunks[0], landmark_columns_.chunks[1]))
        landmark_columns_ = (landmark_columns_ + landmark_rows) / 2
    return da.concatenate([landmark_columns_, diagonal[:, None]], axis=1).rechunk({1: -1})


def _check_square(K: da.Array) -> None:
    if K.shape[0] != K.shape[1]:
        raise InvalidInputError(
            f'With kernel="precomputed", fit takes the n x n kernel matrix of the training '
            f"points; got shape {K.shape}. Compute k(x_i, x_j) for every pair of them, or "
            "pass the points with a named kernel.")


def new_point_rows(K_new: da.Array, columns: np.ndarray) -> da.Array:
    """``[K_new[:, J], 0]``: a projection reads only the landmark columns; the last column,
    the rows' own k(x, x), is not given and not used."""
    zeros = da.zeros((K_new.shape[0], 1), chunks=(K_new.chunks[0], 1), dtype=K_new.dtype)
    return da.concatenate([K_new[:, columns], zeros], axis=1).rechunk({1: -1})


def refuse_scores(method: str) -> None:
    """The novelty scores need k(x, x) of the new points, which a kernel row lacks."""
    raise NotInvertibleError(
        f'{method} is not available with kernel="precomputed": it needs k(x, x) of each new '
        "point, which the rows of kernel values against the training points do not hold. "
        "Fit with the points and a named kernel (or a callable) to score new points.")


def refuse_growth() -> None:
    """Rows added to a precomputed model would need their own k(x, x) and the landmarks'."""
    raise InvalidInputError(
        'partial_fit cannot add rows to a model fitted with kernel="precomputed": a new '
        "row's kernel values against the training points do not hold its own k(x, x), "
        "which the statistics need. Fit the grown kernel matrix again.")


def _short_repr(value: np.ndarray) -> str:
    return f"an array of shape {value.shape} and dtype {value.dtype}"
