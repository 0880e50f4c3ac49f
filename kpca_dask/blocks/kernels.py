"""Kernel functions on in-memory numpy blocks.

Each kernel maps two row blocks ``A`` (n_a x p) and ``B`` (n_b x p) to the
n_a x n_b block ``k(A, B)``, and has a matching diagonal ``k(a, a)`` used for
the Nyström trace certificate (docs/design.md §2). Nothing here knows about dask: the
blockwise code calls these on one chunk at a time, which keeps them easy to
test against scikit-learn and scipy.

Parameters follow scikit-learn's names: ``gamma``, ``degree``, ``coef0``, plus
``nu`` for Matérn. Distance-based kernels compute squared distances as
``|a|^2 + |b|^2 - 2 a.b`` (one GEMM) after moving the origin to the mean of
``B``, and clip them at zero because cancellation can make them slightly
negative.

Kernels made of an exponential (rbf, laplacian, matern) never return a
subnormal number: below about 7 times the dtype's smallest normal number
(1e-37 in float32, 1e-307 in float64) the value is that bound, see
:func:`exp_nonpositive`. Subnormal kernel values change nothing a float32 or
float64 sum can hold, and the CPU handles them on a slow path: an exp with
8 % subnormal results took 10 times as long, and so did the products after it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np
from scipy import special
from scipy.sparse import diags as sparse_diags
from scipy.spatial.distance import cdist

from ..errors import InvalidParameterError
from . import epilogue
from .epilogue import exp_floor_into, exponent_floor
from .row_pair_kernels import RowPairKernel
from .sparse_rows import cityblock_distances, dense, is_sparse, row_norms_squared

__all__ = [
    "KERNEL_NAMES",
    "pairwise_kernel",
    "pairwise_kernel_into",
    "LandmarkKernel",
    "exp_nonpositive",
    "exponent_floor",
    "kernel_diagonal",
    "squared_distances",
    "is_translation_invariant",
]

KernelCallable = Callable[[np.ndarray, np.ndarray], np.ndarray]


def squared_distances(A: np.ndarray, B: np.ndarray, out: np.ndarray | None = None
                      ) -> np.ndarray:
    """Squared Euclidean distances ``|a - b|^2`` between the rows of A and B.

    Computed as ``|a|^2 + |b|^2 - 2 a.b`` in the dtype of ``A`` and clipped at
    zero, after subtracting the mean of ``B`` from both: the rounding error of
    the expansion is ``~eps |a|^2``, so data far from the origin (1e6 + N(0, 1))
    would lose every digit of their distances; distances do not change.
    ``out``, when given, receives the result (shape (len(A), len(B)), dtype of A).

    Examples
    --------
    >>> squared_distances(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]]))
    array([[25.]])
    >>> squared_distances(np.array([[1e8 + 1.0]]), np.array([[1e8], [1e8 + 3.0]]))
    array([[1., 4.]])

    Sparse ``A`` (and ``B``) are not shifted, which would densify them: their
    distances come from the norms and products as they are, accurate to
    ``~eps (|a|^2 + |b|^2)`` rather than ``~eps |a - b|^2``.
    """
    if is_sparse(A) or is_sparse(B):
        d2 = _sparse_squared_distances(A, B)
        if out is None:
            return d2
        out[...] = d2
        return out
    if B.shape[0]:
        centre = B.mean(axis=0, dtype=np.float64).astype(A.dtype)
        A = A - centre
        B = B - centre
    d2 = np.matmul(A, B.T, out=out)
    d2 *= -2.0
    d2 += np.einsum("ij,ij->i", A, A)[:, None]
    d2 += np.einsum("ij,ij->i", B, B)[None, :]
    np.maximum(d2, 0.0, out=d2)
    return d2


def _sparse_squared_distances(A, B):
    products = A @ B.T
    d2 = products.toarray() if is_sparse(products) else np.asarray(products)
    d2 = d2.astype(A.dtype, copy=False)
    d2 *= -2.0
    d2 += row_norms_squared(A)[:, None]
    d2 += row_norms_squared(B)[None, :]
    np.maximum(d2, 0.0, out=d2)
    return d2


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """``exp(x)`` in place for an exponent ``x`` that should be <= 0, with no subnormal result.

    ``x`` is first clipped to [:func:`exponent_floor`, 0]: above 0 it can only
    be rounding (a distance's cancellation), and below the floor exp would
    return subnormal numbers, which the CPU handles ten times slower in the
    exp and in every product after it. The values moved are below 1e-37 in
    float32, far under any sum's rounding.

    Examples
    --------
    >>> exp_nonpositive(np.array([0.0, -1.0, -1e4])).round(4)
    array([1.    , 0.3679, 0.    ])
    >>> bool(exp_nonpositive(np.array([-1e4], np.float32))[0] >= np.finfo(np.float32).tiny)
    True
    """
    if x.dtype in (np.float32, np.float64):
        return exp_floor_into(x)  # compiled, the same speed on every CPU
    np.clip(x, exponent_floor(x.dtype), 0.0, out=x)
    return np.exp(x, out=x)


def _rbf(A, B, *, gamma):
    d2 = squared_distances(A, B)
    d2 *= -gamma
    return exp_nonpositive(d2)


def _laplacian(A, B, *, gamma):
    if is_sparse(A):
        d1 = cityblock_distances(A, B)
    else:
        d1 = cdist(A, B, metric="cityblock").astype(A.dtype, copy=False)
    d1 *= -gamma
    return exp_nonpositive(d1)


def _polynomial(A, B, *, gamma, degree, coef0):
    K = A @ B.T
    K *= gamma
    K += coef0
    return K**degree


def _linear(A, B):
    return A @ B.T


def _sigmoid(A, B, *, gamma, coef0):
    K = A @ B.T
    K *= gamma
    K += coef0
    return np.tanh(K, out=K)


def _unit_rows(A):
    # Zero rows stay zero, as in sklearn.preprocessing.normalize.
    norms = np.sqrt(row_norms_squared(A))
    norms[norms == 0.0] = 1.0
    if is_sparse(A):
        return (sparse_diags(1.0 / norms) @ A).astype(A.dtype, copy=False)
    return A / norms[:, None]


def _cosine(A, B):
    return _unit_rows(A) @ _unit_rows(B).T


def _matern_from_scaled_distance(d, nu):
    # d = sqrt(2 * gamma) * |a - b|; the closed forms are the usual ones in
    # terms of sqrt(2 nu) * d, e.g. nu = 3/2: (1 + sqrt(3) d) exp(-sqrt(3) d).
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


def _matern(A, B, *, gamma, nu):
    # Maintenance note: the length scale is l = 1 / sqrt(2 gamma), so that
    # nu -> infinity gives exactly the rbf kernel exp(-gamma |a - b|^2) with the
    # same gamma. sklearn's Matern(length_scale=l, nu=nu) is the same function.
    d = np.sqrt(squared_distances(A, B))
    d *= math.sqrt(2.0 * gamma)
    K = _matern_from_scaled_distance(d, nu).astype(A.dtype, copy=False)
    # No subnormal values, as for rbf (module docstring): the float64 values
    # become subnormal in a float32 A.
    return np.maximum(K, math.exp(exponent_floor(K.dtype)), out=K)


def _row_norms_squared(A):
    return row_norms_squared(A)


def _ones(A, **_):
    return np.ones(A.shape[0], dtype=A.dtype)


def _diag_polynomial(A, *, gamma, degree, coef0):
    return (gamma * _row_norms_squared(A) + coef0) ** degree


def _diag_linear(A):
    return _row_norms_squared(A)


def _diag_sigmoid(A, *, gamma, coef0):
    return np.tanh(gamma * _row_norms_squared(A) + coef0)


def _diag_cosine(A):
    return (_row_norms_squared(A) > 0).astype(A.dtype)


@dataclass(frozen=True)
class _KernelSpec:
    function: Callable[..., np.ndarray]
    diagonal: Callable[..., np.ndarray]
    parameters: tuple[str, ...]


_KERNELS: Mapping[str, _KernelSpec] = {
    "rbf": _KernelSpec(_rbf, _ones, ("gamma",)),
    "laplacian": _KernelSpec(_laplacian, _ones, ("gamma",)),
    "polynomial": _KernelSpec(_polynomial, _diag_polynomial, ("gamma", "degree", "coef0")),
    "linear": _KernelSpec(_linear, _diag_linear, ()),
    "sigmoid": _KernelSpec(_sigmoid, _diag_sigmoid, ("gamma", "coef0")),
    "cosine": _KernelSpec(_cosine, _diag_cosine, ()),
    "matern": _KernelSpec(_matern, _ones, ("gamma", "nu")),
}
_ALIASES = {"gaussian": "rbf", "poly": "polynomial"}

#: Kernels of x - y alone, unchanged when data and landmarks move together.
_TRANSLATION_INVARIANT = frozenset({"rbf", "laplacian", "matern"})

#: Names accepted for ``kernel`` (besides a callable).
KERNEL_NAMES: tuple[str, ...] = tuple(sorted([*_KERNELS, *_ALIASES]))


def _spec(kernel: str) -> _KernelSpec:
    name = _ALIASES.get(kernel, kernel)
    try:
        return _KERNELS[name]
    except (KeyError, TypeError):
        raise InvalidParameterError(
            f"Unknown kernel {kernel!r}. Use one of {', '.join(KERNEL_NAMES)}, "
            "or a callable k(A, B) -> ndarray of shape (len(A), len(B))."
        ) from None


def is_translation_invariant(kernel: str | KernelCallable) -> bool:
    """Whether ``k(a + c, b + c) == k(a, b)`` for every shift c (False for callables).

    Examples
    --------
    >>> is_translation_invariant("gaussian"), is_translation_invariant("linear")
    (True, False)
    """
    return not callable(kernel) and _ALIASES.get(kernel, kernel) in _TRANSLATION_INVARIANT


def canonical_kernel_name(kernel: str | KernelCallable) -> str | KernelCallable:
    """Return the registry name for ``kernel`` (aliases resolved), or the callable."""
    if callable(kernel):
        return kernel
    _spec(kernel)
    return _ALIASES.get(kernel, kernel)


def pairwise_kernel(
    A: np.ndarray, B: np.ndarray, kernel: str | KernelCallable = "rbf", **params
) -> np.ndarray:
    """Kernel block ``k(A, B)`` of shape (len(A), len(B)).

    Computed in the dtype of ``A`` (``B`` is cast to it), so float32 blocks
    stay float32. ``params`` are those returned by :func:`resolve_kernel_params`.
    ``A`` may be a scipy.sparse matrix: every named kernel is then computed
    from sparse . dense products and sparse row norms, never densifying A;
    ``B``, the landmark side, is made dense. A callable kernel receives the
    sparse ``A`` as it is.

    Examples
    --------
    >>> A = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> pairwise_kernel(A, A, "rbf", gamma=1.0).round(4)
    array([[1.    , 0.3679],
           [0.3679, 1.    ]])
    """
    B = np.asarray(dense(B), dtype=A.dtype)
    if callable(kernel):
        K = np.asarray(kernel(A, B, **params))
        if K.shape != (A.shape[0], B.shape[0]):
            raise InvalidParameterError(
                f"The kernel callable returned shape {K.shape}; it must return "
                f"(len(A), len(B)) = {(A.shape[0], B.shape[0])}."
            )
        return K
    return _spec(kernel).function(A, B, **params)


def pairwise_kernel_into(out: np.ndarray, A: np.ndarray, B: np.ndarray,
                         kernel: str | KernelCallable = "rbf", **params) -> np.ndarray:
    """Write the kernel block ``k(A, B)`` into ``out`` and return it.

    The same values as :func:`pairwise_kernel`. For rbf the distance GEMM
    writes straight into ``out`` and the elementwise steps run in place, so a
    caller that passes a sub-block small enough for the cache keeps every
    step in cache (docs/design.md §8); other kernels are evaluated, then copied.

    Examples
    --------
    >>> A = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> pairwise_kernel_into(np.empty((2, 1)), A, A[:1], "rbf", gamma=1.0).round(4)
    array([[1.    ],
           [0.3679]])
    """
    if not callable(kernel) and _ALIASES.get(kernel, kernel) == "rbf":
        squared_distances(A, np.asarray(B, dtype=A.dtype), out=out)
        out *= -params["gamma"]
        return exp_nonpositive(out)
    out[...] = pairwise_kernel(A, B, kernel, **params)
    return out


class LandmarkKernel:
    """``k(A, Z)`` for many dense row blocks ``A`` against fixed landmarks ``Z``.

    Whatever depends on the landmarks alone is computed once, not once per
    block. For rbf the whole exponent comes out of one GEMM on augmented
    rows (docs/design.md §8, "keep a kernel block in cache")::

        [a - c, -gamma |a - c|^2, 1] . [2 gamma (z - c), 1, -gamma |z - c|^2]
            = -gamma |a - z|^2,

    with c the landmark mean (as in :func:`squared_distances`). Every
    built-in kernel's tile (that exponent, distances or inner products) is
    then finished by one compiled loop, :mod:`kpca_dask.blocks.epilogue`,
    with the reference shift and the column sums. The values are those of
    :func:`pairwise_kernel` to rounding.

    Examples
    --------
    >>> Z = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> k = LandmarkKernel(Z, "rbf", {"gamma": 1.0}, np.float64)
    >>> k.into(np.empty((1, 2)), np.array([[0.0, 0.0]])).round(4)
    array([[1.    , 0.3679]])
    """

    def __init__(self, landmarks: np.ndarray, kernel: str | KernelCallable, params: Mapping,
                 dtype) -> None:
        self.landmarks = landmarks
        self.kernel = kernel
        self.params = dict(params)
        self.dtype = np.dtype(dtype)
        name = None if callable(kernel) else _ALIASES.get(kernel, kernel)
        # nu = infinity is the rbf kernel with the same gamma.
        self._rbf = ((name == "rbf" or (name == "matern" and math.isinf(self.params["nu"])))
                     and not is_sparse(landmarks) and landmarks.shape[0] > 0)
        self._augmented = None  # built on the first dense block: sparse rows never need it

    def _augment(self) -> np.ndarray:
        if self._augmented is None:
            Z = np.asarray(self.landmarks, dtype=np.float64)
            self._gamma = float(self.params["gamma"])
            self._centre = Z.mean(axis=0)
            # Built transposed, (p + 2) x m, as the GEMM reads it, in the block dtype.
            augmented = np.empty((Z.shape[1] + 2, Z.shape[0]), self.dtype)
            np.multiply(Z.T - self._centre[:, None], 2.0 * self._gamma, out=augmented[:-2])
            augmented[-2] = 1.0
            Zc = Z - self._centre
            augmented[-1] = -self._gamma * np.einsum("ij,ij->i", Zc, Zc)
            self._augmented = augmented
        return self._augmented

    def into(self, out: np.ndarray, A, shift: np.ndarray | None = None,
             column_sums: np.ndarray | None = None) -> np.ndarray:
        """Write ``k(A, Z) - 1 shift^T`` into ``out`` (rows of A x landmarks) and return it.

        One GEMM into ``out``, then the compiled epilogue
        (:func:`kpca_dask.blocks.epilogue.finish_tile`) turns it into kernel
        values, subtracts ``shift`` and adds the columns to ``column_sums``
        (float64) in one pass over each row, while ``out`` is in cache.
        """
        code, a, b, degree = self._tile_into(out, A)
        return epilogue.finish_tile(out, code, a=a, b=b, degree=degree, shift=shift,
                                    column_sums=column_sums)

    def _tile_into(self, out, A) -> tuple[int, float, float, int]:
        """The GEMM tile for ``A`` into ``out``, and the epilogue that finishes it."""
        name = None if callable(self.kernel) else _ALIASES.get(self.kernel, self.kernel)
        params = self.params
        Z = np.asarray(dense(self.landmarks), dtype=A.dtype)  # a view when already dense
        if self._rbf and not is_sparse(A):
            augmented = self._augment()
            rows = np.empty((A.shape[0], A.shape[1] + 2), self.dtype)
            shifted = rows[:, :-2]
            np.subtract(A, self._centre.astype(self.dtype), out=shifted)
            rows[:, -2] = np.einsum("ij,ij->i", shifted, shifted)
            rows[:, -2] *= -self._gamma
            rows[:, -1] = 1.0
            np.matmul(rows, augmented, out=out)  # -gamma |a - z|^2 (docs/design.md §8)
            return epilogue.EXP, 1.0, 0.0, 1
        if name == "rbf" or (name == "laplacian" and not is_sparse(A)):
            if name == "rbf":
                squared_distances(A, Z, out=out)
            else:
                out[...] = cdist(A, Z, metric="cityblock")
            out *= -params["gamma"]
            return epilogue.EXP, 1.0, 0.0, 1
        if name == "matern" and params["nu"] in _MATERN_CLOSED_FORMS:
            squared_distances(A, Z, out=out)
            scale = math.sqrt(2.0 * params["nu"]) * math.sqrt(2.0 * params["gamma"])
            return _MATERN_CLOSED_FORMS[params["nu"]], scale, 0.0, 1
        if name in ("polynomial", "sigmoid"):
            products = A @ Z.T
            out[...] = products.toarray() if is_sparse(products) else products
            code = epilogue.POLYNOMIAL if name == "polynomial" else epilogue.SIGMOID
            return code, params["gamma"], params["coef0"], params.get("degree", 1)
        pairwise_kernel_into(out, A, self.landmarks, self.kernel, **params)
        return epilogue.IDENTITY, 1.0, 0.0, 1


#: Matérn kernels with a closed form the epilogue evaluates, by nu.
_MATERN_CLOSED_FORMS = {0.5: epilogue.MATERN_HALF, 1.5: epilogue.MATERN_3_2,
                        2.5: epilogue.MATERN_5_2}


def kernel_diagonal(A: np.ndarray, kernel: str | KernelCallable = "rbf", **params) -> np.ndarray:
    """The values ``k(a, a)`` for each row ``a`` of A, without the full block.

    Examples
    --------
    >>> kernel_diagonal(np.array([[1.0, 2.0]]), "linear")
    array([5.])
    """
    if isinstance(kernel, RowPairKernel):
        return kernel.diagonal(A, **params)  # n calls, not the n x 256 of square blocks
    if callable(kernel):
        # A callable has no known diagonal: evaluate small square blocks.
        step = 256
        return np.concatenate(
            [np.diagonal(pairwise_kernel(A[i : i + step], dense(A[i : i + step]), kernel,
                                         **params))
             for i in range(0, A.shape[0], step)]
            or [np.empty(0, A.dtype)]
        )
    return _spec(kernel).diagonal(A, **params)
