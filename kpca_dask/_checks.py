"""Checks shared by the estimators: n_components and the number of features."""

from __future__ import annotations

import numbers

from .errors import InvalidInputError, InvalidParameterError

__all__ = ["check_n_components", "check_n_features"]


def check_n_components(n_components) -> None:
    """Refuse anything but None, an int >= 1 or a float in (0, 1).

    Examples
    --------
    >>> check_n_components(0.9)
    >>> check_n_components(2.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: n_components must be None, ...; got 2.5.
    """
    nc = n_components
    if nc is not None and not (
        (isinstance(nc, numbers.Integral) and not isinstance(nc, bool) and nc >= 1)
        or (isinstance(nc, float) and 0 < nc < 1)
    ):
        raise InvalidParameterError(
            f"n_components must be None, an int >= 1 or a float in (0, 1); got {nc!r}.")


def check_n_features(X, expected: int, estimator_name: str) -> None:
    """Refuse data whose number of columns differs from the training data's.

    Examples
    --------
    >>> import numpy as np
    >>> check_n_features(np.ones((2, 3)), 3, "KernelPCA")
    >>> check_n_features(np.ones((2, 4)), 3, "KernelPCA")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidInputError: X has 4 features, but KernelPCA is expecting 3 ...
    """
    if X.shape[1] != expected:
        raise InvalidInputError(
            f"X has {X.shape[1]} features, but {estimator_name} is expecting "
            f"{expected} features as input. Pass data with the columns the model was "
            "fitted on.")
