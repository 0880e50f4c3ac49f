"""The Matérn kernel family on numpy blocks, for any smoothness ``nu``.

With the length scale ``l = 1 / sqrt(2 gamma)`` the kernel is::

    k(a, b) = 2^(1-nu) / Gamma(nu) * t^nu K_nu(t),   t = sqrt(2 nu) |a - b| / l,

so that ``nu -> infinity`` gives exactly the rbf kernel with the same
``gamma``, and scikit-learn's ``Matern(length_scale=l, nu=nu)`` is the same
function (docs/design.md §3 lists the kernels). ``nu`` = 1/2, 3/2 and 5/2 have
the usual closed forms; other values go through the modified Bessel function
``K_nu``, evaluated as the exponential of its logarithm so that large ``nu``
neither overflows nor loses its digits. As for the other exponential kernels,
no value is subnormal (see :mod:`kpca_dask.blocks.distance_kernels`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .distance_kernels import squared_distances
from .epilogue import exponent_floor

__all__ = ["matern_kernel", "matern_from_scaled_distance"]


def matern_from_scaled_distance(d, nu):
    """The Matérn kernel of the scaled distances ``d = sqrt(2 gamma) |a - b|``, in float64.

    Examples
    --------
    >>> matern_from_scaled_distance(np.array([0.0, 1.0]), 0.5).round(4)
    array([1.    , 0.3679])
    """
    # The closed forms are the usual ones in terms of sqrt(2 nu) * d, e.g.
    # nu = 3/2: (1 + sqrt(3) d) exp(-sqrt(3) d).
    if nu == 0.5:
        return np.exp(-d)
    if nu == 1.5:
        t = math.sqrt(3.0) * d
        return (1.0 + t) * np.exp(-t)
    if nu == 2.5:
        t = math.sqrt(5.0) * d
        return (1.0 + t + t * t / 3.0) * np.exp(-t)
    if math.isinf(nu):
        return np.exp(-0.5 * d * d)
    t = math.sqrt(2.0 * nu) * d
    return _matern_general(t, nu)


#: Above this nu, t^nu K_nu(t) can overflow at t > 0 where the kernel is not
#: yet 1 to float64 precision; below it, overflow means k = 1 exactly.
_MATERN_DEBYE_NU = 20.0


def _matern_general(t, nu):
    # Maintenance note: k = 2^(1-nu) / Gamma(nu) * t^nu K_nu(t) overflows in
    # every factor for nu above ~170 (Gamma(171) > 1e308), so it is evaluated
    # as the exponential of its logarithm, with K_nu(t) = kve(nu, t) e^(-t).
    # kve itself overflows where t << nu (there K_nu(t) ~ Gamma(nu)/2 (2/t)^nu);
    # those entries use the uniform (Debye) expansion of K_nu, DLMF 10.41.4.
    log_scale = (1.0 - nu) * math.log(2.0) - special.gammaln(nu)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_k = log_scale + nu * np.log(t) + np.log(special.kve(nu, t)) - t
    overflowed = ~np.isfinite(log_k)
    if overflowed.any():
        if nu > _MATERN_DEBYE_NU:
            log_k[overflowed] = log_scale + _log_t_nu_kv_debye(t[overflowed], nu)
        else:
            log_k[overflowed] = 0.0
    K = np.exp(log_k)
    K[t == 0.0] = 1.0  # the limit of t^nu K_nu(t) 2^(1-nu) / Gamma(nu) as t -> 0
    return K


def _log_t_nu_kv_debye(t, nu):
    """log(t^nu K_nu(t)) by the uniform expansion in 1/nu (DLMF 10.41.4, 10.41.10).

    With z = t / nu, s = sqrt(1 + z^2), p = 1 / s, eta = s + log(z / (1 + s)):
    K_nu(nu z) ~ sqrt(pi / (2 nu)) e^(-nu eta) / s^(1/2) * sum_k (-1)^k u_k(p) / nu^k.
    The nu log z of t^nu cancels the one in -nu eta analytically, so nothing
    huge is subtracted. Three terms leave a relative error below 1e-8 for nu > 20.
    """
    z = t / nu
    s = np.sqrt(1.0 + z * z)
    p = 1.0 / s
    p2 = p * p
    u1 = p * (3.0 - 5.0 * p2) / 24.0
    u2 = p2 * (81.0 - 462.0 * p2 + 385.0 * p2 * p2) / 1152.0
    u3 = p * p2 * (30375.0 - 369603.0 * p2 + 765765.0 * p2 * p2
                   - 425425.0 * p2 * p2 * p2) / 414720.0
    series = 1.0 - u1 / nu + u2 / nu**2 - u3 / nu**3
    return (nu * math.log(nu) - nu * s + nu * np.log1p(s) + 0.5 * math.log(math.pi / (2.0 * nu))
            - 0.5 * np.log(s) + np.log(series))


def matern_kernel(A, B, *, gamma, nu):
    """The Matérn kernel block with length scale ``1 / sqrt(2 gamma)``, in the dtype of A.

    Examples
    --------
    >>> matern_kernel(np.array([[0.0]]), np.array([[0.0], [1.0]]), gamma=0.5, nu=0.5).round(4)
    array([[1.    , 0.3679]])
    """
    # Maintenance note: the length scale is l = 1 / sqrt(2 gamma), so that
    # nu -> infinity gives exactly the rbf kernel exp(-gamma |a - b|^2) with the
    # same gamma. sklearn's Matern(length_scale=l, nu=nu) is the same function.
    d = np.sqrt(squared_distances(A, B))
    d *= math.sqrt(2.0 * gamma)
    K = matern_from_scaled_distance(d, nu).astype(A.dtype, copy=False)
    # No subnormal values, as for rbf (module docstring of distance_kernels):
    # the float64 values become subnormal in a float32 A.
    return np.maximum(K, math.exp(exponent_floor(K.dtype)), out=K)
