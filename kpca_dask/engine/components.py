"""How many components a model keeps: an int, a fraction of the variance, or all.

The rules are scikit-learn's KernelPCA's (docs/design.md §3): None keeps the
components with a positive eigenvalue, an int above their number keeps the
extra ones as zero columns (with a warning, unless ``remove_zero_eig``), and a
float eta in (0, 1) keeps the fewest whose explained variance reaches eta.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import TooFewComponentsError, ZeroEigenvalueWarning
from ..validation import is_integer

__all__ = ["n_components_for", "ZERO_EIGENVALUE_RTOL"]

#: Eigenvalues of the features' covariance below this fraction of the largest count
#: as zero; the same ratio scikit-learn uses to decide that an eigenvalue is zero.
ZERO_EIGENVALUE_RTOL = 1e-12


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
