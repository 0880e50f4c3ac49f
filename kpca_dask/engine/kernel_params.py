"""A kernel's parameters, resolved in one place for every path that uses a kernel.

A fit's parameters (the estimator's ``get_params``) name a kernel or give a
callable, and set ``gamma`` (a number, None or a rule such as "median"),
``degree``, ``coef0`` and ``kernel_params``. :func:`resolve_kernel` turns them
into what the blocks apply, in one descent: the kernel's function (aliases
resolved, a scikit-learn row-pair callable wrapped,
:func:`~kpca_dask.blocks.row_pair_kernels.block_kernel`), ``gamma`` by its rule
from a seeded sample of the rows (:func:`~kpca_dask.engine.bandwidth.resolve_gamma`),
and the keyword arguments the kernel takes, completed and checked
(:func:`resolve_kernel_params`: gamma = 1 / n_features by default, nu = 1.5,
each value by :data:`KERNEL_VALUE_CONSTRAINTS`). The Nyström fit
(:mod:`kpca_dask.model.fitting`), the exact dense and matrix-free fits
(:mod:`kpca_dask.exact.exact_fitting`) and the checks of a loaded model or
checkpoint all resolve here; transform, pre-images and novelty scores apply the
model's resolved kernel as it is.

Examples
--------
>>> import dask.array as da
>>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=2)
>>> params = {"kernel": "gaussian", "gamma": "median", "degree": 3, "coef0": 1.0,
...           "kernel_params": None}
>>> resolve_kernel(params, X, rng=np.random.default_rng(0))
ResolvedKernel(function='rbf', params={'gamma': 0.1})
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from ..blocks.kernels import KERNEL_NAMES, canonical_kernel_name, kernel_parameters
from ..blocks.row_pair_kernels import block_kernel
from ..errors import InvalidParameterError
from ..validation import Constraint, is_finite_real, is_real, short_repr
from .bandwidth import resolve_gamma
from .sampling import RowSampler

__all__ = ["KERNEL_PARAMETERS", "KERNEL_VALUE_CONSTRAINTS", "ResolvedKernel", "is_kernel_params",
           "kernel_function", "resolve_kernel", "resolve_kernel_params", "with_gamma"]


def _is_whole_degree(value) -> bool:
    # A whole degree, as in scikit-learn: (gamma a.b + coef0) is negative for some
    # pairs, and a negative number to a fractional power is NaN.
    return is_finite_real(value) and float(value).is_integer() and value >= 1


def _is_positive_finite(value) -> bool:
    return is_finite_real(value) and value > 0


#: What a kernel parameter may be once resolved, whichever way it was given (a
#: constructor parameter or an entry of kernel_params).
KERNEL_VALUE_CONSTRAINTS: Mapping[str, Constraint] = MappingProxyType({
    "gamma": Constraint(_is_positive_finite, "a positive finite number (a rule such as "
                                             "gamma='median', or a value such as 1 / n_features)"),
    "degree": Constraint(_is_whole_degree, "a whole number >= 1 (the polynomial kernel (gamma "
                                           "<a, b> + coef0)^degree is undefined for a fractional "
                                           "degree when gamma <a, b> + coef0 < 0)"),
    "coef0": Constraint(is_finite_real, "a finite number"),
    "nu": Constraint(lambda v: is_real(v) and v > 0, "a positive number (inf: the rbf kernel)"),
})


def is_kernel_params(value) -> bool:
    """Whether ``value`` may be ``kernel_params``: None or a mapping with string keys."""
    return value is None or (isinstance(value, Mapping) and all(isinstance(k, str)
                                                                 for k in value))


@dataclass(frozen=True)
class ResolvedKernel:
    """The kernel of a fit: the function the blocks apply (a canonical name or a callable)
    and exactly the keyword arguments it takes, resolved."""

    function: Any
    params: dict


def kernel_function(params: Mapping[str, Any], n_features: int):
    """The function of ``params``' kernel: a name's canonical form (aliases resolved), a
    callable as given, or a scikit-learn row-pair callable wrapped to take blocks.

    Examples
    --------
    >>> kernel_function({"kernel": "gaussian", "kernel_params": None}, 3)
    'rbf'
    """
    return block_kernel(canonical_kernel_name(params["kernel"]), n_features,
                        params["kernel_params"])


def with_gamma(params: Mapping[str, Any], n_features: int, function, gamma) -> ResolvedKernel:
    """The kernel ``function`` with its parameters completed from ``params``, ``gamma``
    already a number or None (a checkpoint's gamma, or one a rule gave).

    Examples
    --------
    >>> params = {"degree": 2, "coef0": 0.0, "kernel_params": None}
    >>> with_gamma(params, 4, "polynomial", None).params
    {'gamma': 0.25, 'degree': 2, 'coef0': 0.0}
    """
    return ResolvedKernel(function, resolve_kernel_params(
        function, n_features, gamma=gamma, degree=params["degree"], coef0=params["coef0"],
        kernel_params=params["kernel_params"]))


def resolve_kernel(params: Mapping[str, Any], X, *, rng: np.random.Generator,
                   sampler: RowSampler | None = None, function=None) -> ResolvedKernel:
    """The kernel of a fit of the rows ``X`` with the estimator parameters ``params``.

    A gamma rule ("median", "scale") is resolved from a sample of ``X``'s rows
    drawn by ``rng`` (and read by ``sampler``, which may hold them already), so
    ``X`` must then be a dask array; otherwise nothing of ``X`` but its shape is
    read. ``function`` is the kernel's function where the caller has made it
    already (:func:`kernel_function`). See the module's example.
    """
    n_features = X.shape[1]
    function = kernel_function(params, n_features) if function is None else function
    gamma = resolve_gamma(params["gamma"], X, function, rng=rng, sampler=sampler)
    return with_gamma(params, n_features, function, gamma)


#: The parameters each named kernel takes: the keyword arguments of its function
#: in :mod:`kpca_dask.blocks.kernels`, by canonical name (aliases resolved).
KERNEL_PARAMETERS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    name: kernel_parameters(name) for name in KERNEL_NAMES if canonical_kernel_name(name) == name})


def resolve_kernel_params(
    kernel: str | Callable[..., np.ndarray],
    n_features: int,
    *,
    gamma: float | None = None,
    degree: int = 3,
    coef0: float = 1.0,
    kernel_params: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Validate and complete the parameters one kernel uses.

    ``gamma=None`` resolves to ``1 / n_features`` (scikit-learn's default), and
    ``nu`` to 1.5. ``kernel_params`` may set any parameter the kernel takes
    (it wins over ``gamma``, ``degree`` and ``coef0``). For a callable kernel,
    ``kernel_params`` are passed to it as keyword arguments and the other
    parameters are ignored.

    Returns
    -------
    dict
        Exactly the keyword arguments the kernel takes (floats; ``degree`` an int).

    Raises
    ------
    InvalidParameterError
        An unknown kernel, a key of ``kernel_params`` the kernel does not
        take, or a value :data:`KERNEL_VALUE_CONSTRAINTS` refuses.

    Examples
    --------
    >>> resolve_kernel_params("rbf", n_features=4)
    {'gamma': 0.25}
    >>> resolve_kernel_params("matern", 2, gamma=1.0, kernel_params={"nu": 2.5})
    {'gamma': 1.0, 'nu': 2.5}
    >>> resolve_kernel_params("poly", 2, degree=2.0)
    {'gamma': 0.5, 'degree': 2, 'coef0': 1.0}
    """
    if not is_kernel_params(kernel_params):
        raise InvalidParameterError(
            f"kernel_params must be a dict of kernel parameters such as {{'nu': 2.5}}; got "
            f"{type(kernel_params).__name__} {short_repr(kernel_params)}.")
    extra = dict(kernel_params or {})  # never write into the caller's dict
    if callable(kernel):
        return extra
    takes = KERNEL_PARAMETERS[canonical_kernel_name(kernel)]
    values = {"gamma": gamma, "degree": degree, "coef0": coef0, "nu": 1.5}
    for key, value in extra.items():
        if key not in takes:
            raise InvalidParameterError(
                f"kernel_params has {key!r}, which the {kernel!r} kernel does not take; "
                f"it takes {list(takes) or 'no parameters'}.")
        values[key] = value
    params = {name: values[name] for name in takes}
    if params.get("gamma", 0.0) is None:
        params["gamma"] = 1.0 / n_features
    for name, value in params.items():
        constraint = KERNEL_VALUE_CONSTRAINTS[name]
        if not constraint.allows(value):
            raise InvalidParameterError(constraint.message(name, value))
        params[name] = int(value) if name == "degree" else float(value)
    return params
