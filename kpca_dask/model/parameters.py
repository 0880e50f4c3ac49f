"""The checks of KernelPCA's parameters, and the default cut-off of K_mm's eigenvalues."""

from __future__ import annotations

__all__ = ["DEFAULT_RCOND", "rcond_for"]

#: Default relative cut-off for eigenvalues of K_mm, by kernel-block dtype:
#: float32 blocks carry ~1e-7 relative noise, which W = U s^{-1/2} must not amplify.
DEFAULT_RCOND = {"float64": 1e-10, "float32": 1e-5}


def rcond_for(rcond: float | None, dtype: str) -> float:
    """``rcond``, or the default for blocks of ``dtype`` when None."""
    return DEFAULT_RCOND[str(dtype)] if rcond is None else rcond


import numbers  # noqa: E402

import numpy as np  # noqa: E402

from ..blocks.kernels import resolve_kernel_params  # noqa: E402,F401
from ..errors import InvalidParameterError  # noqa: E402
from ..validation import check_n_components  # noqa: E402


def _is_positive_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def check_params(p) -> None:
    """Raise InvalidParameterError unless the estimator parameters ``p`` are valid."""
    check_n_components(p["n_components"])
    if isinstance(p["kernel"], str) and p["kernel"] == "precomputed":
        raise InvalidParameterError(
            'kernel="precomputed" needs the n x n kernel matrix of the data, which is what '
            "the Nyström pass avoids. Use kpca_dask.ExactKernelPCA(kernel=\"precomputed\") "
            "for data small enough for it, or pass the kernel as a callable "
            "k(A, B, **kernel_params) -> (len(A), len(B)) array.")
    m = p["n_landmarks"]
    if m != "auto" and not _is_positive_int(m):
        raise InvalidParameterError(f"n_landmarks must be an int >= 1 or 'auto'; got {m!r}.")
    if not (isinstance(p["tol"], numbers.Real) and 0 < p["tol"] < 1):
        raise InvalidParameterError(f"tol must be a number in (0, 1); got {p['tol']!r}.")
    if not _is_positive_int(p["max_landmarks"]):
        raise InvalidParameterError(
            f"max_landmarks must be an int >= 1; got {p['max_landmarks']!r}.")
    if p["dtype"] not in DEFAULT_RCOND:
        raise InvalidParameterError(
            f"dtype must be 'float64' or 'float32'; got {p['dtype']!r}.")
    if p["rcond"] is not None and not (isinstance(p["rcond"], numbers.Real)
                                       and 0 <= p["rcond"] < 1):
        raise InvalidParameterError(f"rcond must be None or in [0, 1); got {p['rcond']!r}.")
    if not isinstance(p["fit_inverse_transform"], (bool, np.bool_)):
        raise InvalidParameterError(
            "fit_inverse_transform must be True or False; got "
            f"{p['fit_inverse_transform']!r}.")
    a = p["alpha"]
    if not (isinstance(a, numbers.Real) and np.isfinite(a) and a > 0):
        raise InvalidParameterError(
            f"alpha must be a finite number > 0 (the pre-image map's ridge penalty); "
            f"got {a!r}.")
