"""What each parameter of the EOF estimators may be: one declared table per estimator.

:class:`~kpca_dask.HilbertKernelEOF` and :class:`~kpca_dask.ExtendedKernelEOF`
check their constructor's parameters as :class:`~kpca_dask.KernelPCA` does, by
:func:`~kpca_dask.model.parameters.check_params` over a table of
:class:`~kpca_dask.validation.Constraint` (scikit-learn's
``_parameter_constraints``), at ``fit`` and when a model file is loaded. The
parameters they share with KernelPCA take its entries; the complex kernels,
the padding of the analytic signal and the delay embedding have their own.
What only the data can tell (landmark indices in range, ``n_pca_modes`` within
the field's rank, a record long enough for its lags) is checked at ``fit``.

Examples
--------
>>> from kpca_dask.model.parameters import check_params
>>> check_params({"kernel": "poly", "padding": "none"}, constraints=HILBERT_CONSTRAINTS)
>>> check_params({"tau": 0}, constraints=EXTENDED_CONSTRAINTS)
Traceback (most recent call last):
...
kpca_dask.errors.InvalidParameterError: tau must be an int >= 1 (the delay between lagged \
copies, in samples); got 0.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import numpy as np

from ..blocks.complex_kernels import COMPLEX_KERNELS
from ..engine.bandwidth import BANDWIDTH_RULES
from ..io.preprocessing.analytic_signal import PADDINGS
from ..validation import Constraint, is_count, is_finite_real
from .parameters import CONSTRAINTS

__all__ = ["HILBERT_CONSTRAINTS", "EXTENDED_CONSTRAINTS"]


def _is_sample_indices(value) -> bool:
    """'uniform', or a 1-D array-like of ints (whether they are samples is checked at fit)."""
    if isinstance(value, str):
        return value == "uniform"
    try:
        indices = np.asarray(value)
    except (TypeError, ValueError):
        return False
    return indices.ndim == 1 and indices.dtype.kind in "iu"


_COUNT = Constraint(is_count, "an int >= 1")

#: One entry per constructor parameter of HilbertKernelEOF, in the constructor's order.
HILBERT_CONSTRAINTS: Mapping[str, Constraint] = MappingProxyType({
    "n_components": _COUNT,
    "kernel": Constraint(lambda v: isinstance(v, str) and v in COMPLEX_KERNELS,
                         f"one of {COMPLEX_KERNELS} for complex rows"),
    "gamma": Constraint(lambda v: v is None or (isinstance(v, str) and v in BANDWIDTH_RULES)
                        or (is_finite_real(v) and v > 0),
                        "a number > 0, 'median', 'scale' or None (1 / the median squared "
                        "distance of the landmarks for rbf, 1 / their mean squared norm for "
                        "poly)"),
    # The complex poly kernel (c + <z, w>)^d is positive semi-definite for these.
    "degree": Constraint(is_count, "an int >= 1 (the complex poly kernel's degree)"),
    "coef0": Constraint(lambda v: is_finite_real(v) and v >= 0,
                        "a number >= 0 (the complex poly kernel's constant)"),
    "n_landmarks": _COUNT,
    "landmarks": Constraint(_is_sample_indices, "'uniform' or sample indices (a 1-D array "
                                                "of ints)"),
    "random_state": CONSTRAINTS["random_state"],
    "padding": Constraint(lambda v: isinstance(v, str) and v in PADDINGS,
                          " or ".join(map(repr, PADDINGS))),
    "decay_factor": Constraint(lambda v: is_finite_real(v) and 0 < v <= 1,
                               "a number in (0, 1] (the e-folding length of the padding as a "
                               "share of the record; 0.05 to 0.2 is usual)"),
    **{name: CONSTRAINTS[name] for name in ("sample_dim", "weights", "rcond", "solver")},
})

#: One entry per constructor parameter of ExtendedKernelEOF: KernelPCA's rules for those of
#: its kernel stage, and the delay embedding's.
EXTENDED_CONSTRAINTS: Mapping[str, Constraint] = MappingProxyType({
    "n_components": CONSTRAINTS["n_components"],
    "tau": Constraint(is_count, "an int >= 1 (the delay between lagged copies, in samples)"),
    "embedding": Constraint(is_count, "an int >= 1 (the number of lagged copies, 1 for no "
                                      "embedding)"),
    "n_pca_modes": Constraint(lambda v: v is None or is_count(v),
                              "None (the field itself is embedded) or an int >= 1 (the "
                              "linear EOFs embedded)"),
    **{name: CONSTRAINTS[name] for name in (
        "kernel", "gamma", "degree", "coef0", "kernel_params", "n_landmarks", "landmarks",
        "tol", "max_landmarks", "dtype", "rcond", "random_state", "sample_dim", "weights",
        "solver")},
})
