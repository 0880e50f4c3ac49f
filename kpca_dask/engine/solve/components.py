"""How many components a model keeps: an int, a fraction of the variance, or all.

The rules are scikit-learn's KernelPCA's (docs/design.md §3): None keeps the
components with a positive eigenvalue, an int above their number keeps the
extra ones as zero columns (with a warning, unless ``remove_zero_eig``), and a
float eta in (0, 1) keeps the fewest whose explained variance reaches eta.
Where the eigenvalues of the whole centred n x n kernel matrix are known,
:func:`check_spectrum` refuses those that are significantly negative by
scikit-learn's rule (docs/design.md §1).
"""

from __future__ import annotations

import warnings

import numpy as np

from ...errors import (
    NegativeEigenvalueWarning,
    NotPositiveSemidefiniteError,
    TooFewComponentsError,
    ZeroEigenvalueWarning,
)
from ...validation import is_integer

__all__ = ["n_components_for", "ZERO_EIGENVALUE_RTOL", "check_spectrum",
           "SIGNIFICANT_NEGATIVE_RATIO", "SIGNIFICANT_NEGATIVE_VALUE"]

#: Eigenvalues of the features' covariance below this fraction of the largest count
#: as zero; the same ratio scikit-learn uses to decide that an eigenvalue is zero.
ZERO_EIGENVALUE_RTOL = 1e-12

#: A negative eigenvalue below both -SIGNIFICANT_NEGATIVE_RATIO * lambda_max and
#: -SIGNIFICANT_NEGATIVE_VALUE is significant: scikit-learn's float64 thresholds
#: (sklearn.utils.validation._check_psd_eigenvalues); every eigenvalue here is float64.
SIGNIFICANT_NEGATIVE_RATIO = 1e-5
SIGNIFICANT_NEGATIVE_VALUE = 1e-10

#: scikit-learn's sentence after each finding, kept word for word so that code matching
#: its messages keeps working.
_NOT_PSD = ("Either the matrix is not PSD, or there was an issue while computing the "
            "eigendecomposition of the matrix.")


def check_spectrum(eigenvalues: np.ndarray, n_components, stacklevel: int = 4) -> None:
    """Refuse a centred kernel matrix whose selected eigenvalues are significantly negative.

    ``eigenvalues`` are those of the whole centred n x n kernel matrix,
    descending. As in scikit-learn, only those ``n_components`` selects are
    judged: the leading min(q, n) of an int q, all of them for None, none for a
    fraction (which selects positive ones only). A significantly negative one
    (below both :data:`SIGNIFICANT_NEGATIVE_RATIO` times the largest and
    :data:`SIGNIFICANT_NEGATIVE_VALUE`), or a largest one below zero, raises
    :class:`~kpca_dask.errors.NotPositiveSemidefiniteError` with scikit-learn's
    message; smaller negative ones are set to 0 by the caller, with a
    :class:`~kpca_dask.errors.NegativeEigenvalueWarning` when they lie beyond
    the numerical zero (:data:`ZERO_EIGENVALUE_RTOL` of the largest), silently
    when they are rounding (docs/design.md §1).

    Examples
    --------
    >>> check_spectrum(np.array([5.0, 1.0, -1e-14]), None)
    >>> check_spectrum(np.array([5.0, 1.0, -1.0]), 2)  # -1 is not selected
    >>> try:
    ...     check_spectrum(np.array([5.0, 1.0, -1.0]), None)
    ... except ValueError as error:
    ...     print(str(error).split(". ")[0])
    There are significant negative eigenvalues (0.2 of the maximum positive)
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if n_components is None:
        selected = lam
    elif is_integer(n_components):
        selected = lam[:int(n_components)]
    else:  # a fraction keeps positive eigenvalues only
        return
    if selected.size == 0:
        return
    largest, smallest = float(selected.max()), float(selected.min())
    if largest < 0:
        raise NotPositiveSemidefiniteError(
            f"All eigenvalues are negative (maximum is {largest:g}). {_NOT_PSD} The kernel is "
            f"{_NOT_PSD_KERNEL}. {_FIX}.")
    ratio = -smallest / largest if largest > 0 else np.inf
    significant = ((selected < -SIGNIFICANT_NEGATIVE_RATIO * largest)
                   & (selected < -SIGNIFICANT_NEGATIVE_VALUE))
    if significant.any():
        raise NotPositiveSemidefiniteError(
            f"There are significant negative eigenvalues ({ratio:g} of the maximum positive). "
            f"{_NOT_PSD} The centred kernel matrix of the {lam.size} training rows has "
            f"eigenvalue {smallest:.4g} beside {largest:.4g}: the kernel is {_NOT_PSD_KERNEL}. "
            f"{_FIX}, or ask for n_components <= {int(np.argmax(significant))} (the "
            "eigenvalues before the first significantly negative one).")
    if smallest < -ZERO_EIGENVALUE_RTOL * largest:
        warnings.warn(
            f"There are negative eigenvalues ({ratio:g} of the maximum positive). {_NOT_PSD} "
            "Negative eigenvalues will be replaced with 0.", NegativeEigenvalueWarning,
            stacklevel=stacklevel)


_NOT_PSD_KERNEL = ("not positive semi-definite on these data (a sigmoid kernel, a callable, "
                   "or a precomputed matrix that is not a Gram matrix)")


_FIX = ("Use a positive semi-definite kernel (rbf, laplacian, matern, polynomial, linear, "
        "cosine), correct the kernel matrix (e.g. clip its negative eigenvalues)")


def n_components_for(
    n_components, eigenvalues: np.ndarray, n_positive: int, total: float,
    remove_zero_eig: bool = False, n_samples: int | None = None,
) -> int:
    """Number of components q for an int, a ratio eta in (0, 1), or None.

    As in scikit-learn's KernelPCA: None keeps the positive eigenvalues; an
    int above their number keeps that many components (at most ``n_samples``),
    the extra ones with eigenvalue 0 and zero embedding columns, with a
    warning, unless ``remove_zero_eig`` drops them. Components q past
    ``n_positive`` are those zero ones.

    Examples
    --------
    >>> lam = np.array([2.0, 1.0, 0.0])
    >>> n_components_for(2, lam, 2, 3.0), n_components_for(None, lam, 2, 3.0)
    (2, 2)
    >>> n_components_for(3, lam, 2, 3.0, remove_zero_eig=True)
    2
    """
    if n_positive == 0 and not (is_integer(n_components) and not remove_zero_eig):
        if isinstance(n_components, float):  # no variance: no fraction of it to explain
            raise TooFewComponentsError(
                f"n_components={n_components} asks for a fraction of the variance, but the "
                f"centred kernel matrix has no positive eigenvalue: {_NO_VARIANCE} Check the "
                "data, or increase gamma.")
        # scikit-learn's KernelPCA returns an (n, 0) embedding here, silently; the
        # warning says why the embedding is empty.
        warnings.warn(
            f"The centred kernel matrix has no positive eigenvalue, so the model has 0 "
            f"components and transform returns an (n, 0) embedding, as scikit-learn's "
            f"KernelPCA does with n_components=None or remove_zero_eig=True: {_NO_VARIANCE} "
            "Check the data, or increase gamma.",
            ZeroEigenvalueWarning,
            stacklevel=4,
        )
        return 0
    if n_components is None:
        return n_positive
    if isinstance(n_components, float) and 0 < n_components < 1:
        ratios = np.cumsum(eigenvalues[:n_positive]) / total
        # Smallest q with cumulative ratio >= eta (a hair of slack for rounding).
        return int(min(np.searchsorted(ratios, n_components - 1e-12) + 1, n_positive))
    q = int(n_components) if n_samples is None else min(int(n_components), n_samples)
    if q > n_positive:
        if remove_zero_eig:
            return n_positive
        warnings.warn(
            f"n_components={n_components}, but only {n_positive} eigenvalue(s) of the "
            f"centred kernel matrix are positive: the last {q - n_positive} component(s) "
            "have eigenvalue 0 and are zero columns of the embedding, as in scikit-learn. "
            "The data span fewer directions in the kernel's feature space (e.g. a linear "
            "kernel on low-dimensional data, duplicated rows, or too few landmarks). Pass "
            "remove_zero_eig=True to drop them, or ask for fewer components.",
            ZeroEigenvalueWarning,
            stacklevel=4,
        )
    return q


_NO_VARIANCE = (
    "in the kernel's feature space the data have no variance. Either every row of X is "
    "the same (constant data), or the kernel is constant on them, e.g. an rbf gamma so "
    "small that every kernel value rounds to 1.")
