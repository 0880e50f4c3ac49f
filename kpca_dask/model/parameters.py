"""What each parameter of :class:`~kpca_dask.KernelPCA` may be: one declared table, one check.

:data:`CONSTRAINTS` holds one :class:`Constraint` per constructor parameter, as
scikit-learn's ``_parameter_constraints`` does, and :func:`check_params` is the
one function that reads it. ``fit``, ``set_n_components``, the model loader
(:mod:`kpca_dask.storage.model_files`) and the command line all check through
it, so they cannot disagree about what a valid parameter is.

What the table cannot know without the data is checked where the data are:
explicit landmark points against the number of features
(:mod:`kpca_dask.landmarks.strategies`), a bandwidth rule against the kernel
(:mod:`kpca_dask.engine.bandwidth`), and the parameters of the kernel chosen
where every kernel's parameters are resolved (:mod:`kpca_dask.engine.kernel_params`,
whose :func:`resolve_kernel_params`, :data:`KERNEL_PARAMETERS` and
:data:`KERNEL_VALUE_CONSTRAINTS` this module gives on).

Examples
--------
>>> check_params({"n_components": 2, "gamma": "median"})
>>> check_params({"tol": 2})
Traceback (most recent call last):
...
kpca_dask.errors.InvalidParameterError: tol must be a number in (0, 1); got 2.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from ..blocks.kernels import KERNEL_NAMES
from ..engine.bandwidth import BANDWIDTH_RULES
from ..engine.kernel_params import (
    KERNEL_PARAMETERS,
    KERNEL_VALUE_CONSTRAINTS,
    resolve_kernel_params,
)
from ..engine.kernel_params import is_kernel_params as _is_kernel_params
from ..errors import InvalidParameterError
from ..landmarks.strategies import landmark_strategy_names
from ..validation import Constraint, is_count, is_finite_real, is_real
from .inputs import weights_allowed

__all__ = ["Constraint", "CONSTRAINTS", "EXACT_CONSTRAINTS", "EIGEN_SOLVERS", "SOLVERS",
           "check_params",
           "DEFAULT_RCOND",
           "rcond_for",
           "KERNEL_PARAMETERS", "KERNEL_VALUE_CONSTRAINTS", "resolve_kernel_params"]

#: Default cut-off on each landmark's residual variance, relative to the largest
#: k(z, z), by kernel-block dtype (docs/design.md §11): float32 blocks carry ~1e-7
#: relative noise, which the features multiply by up to 1 / rcond.
DEFAULT_RCOND = MappingProxyType({"float64": 1e-10, "float32": 1e-3})


def _is_flag(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_positive_finite(value) -> bool:
    return is_finite_real(value) and value > 0


def _is_alpha(value) -> bool:
    return (isinstance(value, str) and value == "auto") or (
        is_finite_real(value) and not isinstance(value, bool) and value >= 0)


def _is_n_components(value) -> bool:
    return value is None or is_count(value) or (isinstance(value, float) and 0 < value < 1)


def _is_kernel(value) -> bool:
    return callable(value) or (isinstance(value, str) and value in KERNEL_NAMES)


_KERNEL_CHOICES = (f"one of {', '.join(KERNEL_NAMES)}, or a callable k(A, B) -> ndarray of "
                   "shape (len(A), len(B))")


def _explain_kernel(value) -> str | None:
    if isinstance(value, str):
        return f"Unknown kernel {value!r}. Use {_KERNEL_CHOICES}."
    return None


def _is_gamma(value) -> bool:
    return (value is None or (isinstance(value, str) and value in BANDWIDTH_RULES)
            or _is_positive_finite(value))


def _explain_gamma(value) -> str | None:
    if isinstance(value, str):
        return (f"gamma={value!r} is not a rule; use a positive number, None (1 / n_features), "
                "'median' (median heuristic) or 'scale' (1 / (n_features * X.var())).")
    return None


def _is_landmarks(value) -> bool:
    if isinstance(value, str):
        return value in landmark_strategy_names()
    if callable(value):
        return True
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        try:  # nested lists of points; whether they fit X is checked at fit
            value = np.asarray(value)
        except (TypeError, ValueError):
            return False
    if len(value.shape) == 1:  # column indices of a precomputed kernel (checked at fit)
        return np.dtype(value.dtype).kind in "iu"
    return len(value.shape) == 2 and np.dtype(value.dtype).kind in "biuf"


def _explain_landmarks(value) -> str | None:
    if isinstance(value, str):
        return (f"Unknown landmarks strategy {value!r}. Use one of "
                f"{', '.join(landmark_strategy_names())}, a strategy function, or an array of "
                "landmark points of shape (n_landmarks, n_features).")
    return None


def _is_random_state(value) -> bool:
    return (value is None or is_count(value, least=0)
            or isinstance(value, (np.random.Generator, np.random.RandomState)))


#: The values of KernelPCA's and the EOF estimators' ``solver``: chosen from the shape and
#: the memory, the Gram matrix (exact), or landmarks (docs/design.md §19).
SOLVERS = ("auto", "gram", "nystrom")

#: One entry per constructor parameter of KernelPCA, in the constructor's order.
CONSTRAINTS: Mapping[str, Constraint] = MappingProxyType({
    "n_components": Constraint(_is_n_components, "None, an int >= 1 or a float in (0, 1)"),
    "kernel": Constraint(_is_kernel, _KERNEL_CHOICES, _explain_kernel),
    "gamma": Constraint(_is_gamma, "a positive finite number, None (1 / n_features) or a rule, "
                                   f"{' or '.join(map(repr, BANDWIDTH_RULES))}", _explain_gamma),
    "degree": KERNEL_VALUE_CONSTRAINTS["degree"],
    "coef0": KERNEL_VALUE_CONSTRAINTS["coef0"],
    "kernel_params": Constraint(_is_kernel_params, "None or a dict of kernel parameters such "
                                                   "as {'nu': 2.5}"),
    "remove_zero_eig": Constraint(_is_flag, "True or False"),
    "n_landmarks": Constraint(lambda v: is_count(v) or (isinstance(v, str) and v == "auto"),
                              "an int >= 1 or 'auto'"),
    "landmarks": Constraint(_is_landmarks, "a landmark strategy name, a strategy function, an "
                                           "array of landmark points of shape (n_landmarks, "
                                           "n_features), or with kernel='precomputed' a 1-D "
                                           "array of column indices", _explain_landmarks),
    "tol": Constraint(lambda v: is_real(v) and 0 < v < 1, "a number in (0, 1)"),
    "max_landmarks": Constraint(lambda v: v is None or is_count(v), "None or an int >= 1"),
    "dtype": Constraint(lambda v: isinstance(v, str) and v in DEFAULT_RCOND,
                        "'float64' or 'float32'"),
    "rcond": Constraint(lambda v: v is None or (is_real(v) and 0 <= v < 1),
                        "None or a number in [0, 1)"),
    "random_state": Constraint(_is_random_state, "None, an int >= 0 or a numpy Generator"),
    "fit_inverse_transform": Constraint(_is_flag, "True or False"),
    "alpha": Constraint(_is_alpha, "a finite number >= 0 (the pre-image map's ridge penalty) "
                                   "or 'auto' (chosen by generalised cross-validation)"),
    "sample_dim": Constraint(lambda v: v is None or isinstance(v, str),
                             "None (the first dimension) or the name of a dimension of X"),
    "weights": Constraint(weights_allowed, "None, a DataArray over the feature dimensions of X, "
                                           "'coslat' (√cos(latitude) of X's latitude), a 1-D "
                                           "array of one weight per feature, or for several "
                                           "fields a list or dict of those"),
    "solver": Constraint(lambda v: isinstance(v, str) and v in SOLVERS,
                         f"one of {', '.join(map(repr, SOLVERS))}"),
})


#: The values of ``ExactKernelPCA(eigen_solver=...)`` (docs/design.md §13).
EIGEN_SOLVERS = ("auto", "dense", "matrix-free")


#: The parameters of :class:`~kpca_dask.ExactKernelPCA`: KernelPCA's rules for those it takes,
#: and its own solver's.
EXACT_CONSTRAINTS: Mapping[str, Constraint] = MappingProxyType({
    **{name: CONSTRAINTS[name] for name in ("n_components", "kernel", "gamma", "degree", "coef0",
                                            "kernel_params", "remove_zero_eig", "sample_dim",
                                            "weights", "dtype")},
    "eigen_solver": Constraint(lambda v: isinstance(v, str) and v in EIGEN_SOLVERS,
                               f"one of {', '.join(map(repr, EIGEN_SOLVERS))}"),
})


def check_params(params: Mapping[str, Any], *,
                 constraints: Mapping[str, Constraint] = CONSTRAINTS,
                 estimator: str = "KernelPCA") -> None:
    """Raise InvalidParameterError unless every one of ``params`` is allowed by the table.

    Parameters
    ----------
    params : mapping
        Parameter names and values, e.g. ``estimator.get_params(deep=False)``;
        any subset of the constructor's parameters. Each is checked against
        its entry of ``constraints`` (:data:`CONSTRAINTS`, or
        :data:`EXACT_CONSTRAINTS` for ``ExactKernelPCA``), in the table's order.
    constraints : mapping, default=CONSTRAINTS
    estimator : str, default="KernelPCA"
        The estimator's name, for the message about an unknown parameter.

    Raises
    ------
    InvalidParameterError
        A name the constructor does not take, or the first value its
        constraint refuses; the message names the parameter and what it must be.

    Examples
    --------
    >>> check_params({"n_landmarks": "auto", "tol": 0.05, "random_state": 0})
    >>> check_params({"n_landmarks": 0})
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: n_landmarks must be an int >= 1 or 'auto'; got 0.
    >>> check_params({"bandwidth": 1.0})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: Unknown parameter(s) ['bandwidth'] of KernelPCA; ...
    """
    unknown = sorted(set(params) - set(constraints))
    if unknown:
        raise InvalidParameterError(
            f"Unknown parameter(s) {unknown} of {estimator}; it takes {', '.join(constraints)}.")
    for name, constraint in constraints.items():
        if name in params and not constraint.allows(params[name]):
            raise InvalidParameterError(constraint.message(name, params[name]))


def rcond_for(rcond: float | None, dtype: str) -> float:
    """The eigenvalue cut-off of K_mm: ``rcond`` when given, else the default for ``dtype``.

    Examples
    --------
    >>> rcond_for(None, "float32"), rcond_for(None, "float64"), rcond_for(1e-8, "float32")
    (0.001, 1e-10, 1e-08)
    """
    return rcond if rcond is not None else DEFAULT_RCOND[dtype]
