"""Varimax and promax rotation of kept modes: the small q x q problem, in numpy.

The modes are rotated by their loadings L (p features x r modes): the
covariance of each feature of the weighted input with the mode's score scaled
to unit variance, which for a linear kernel is the EOF times √λ (xeofs'
loadings). Varimax (Kaiser 1958) finds the orthogonal R that maximises the
variance of the squared, row-normalised loadings; promax (Hendrickson and
White 1964) raises the varimax loadings to a ``power`` and fits an oblique
rotation to them, so the rotated scores may correlate (``correlation``). The
steps are those of xeofs 3's ``EOFRotator`` (Kaiser normalisation, the same
stopping rule), so a linear fit rotates to its numbers; the rotated modes are
sorted by the variance they explain, Σ_i L_ij², with the sign that makes each
mode's largest loading positive (docs/design.md §15).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["METHODS", "DEFAULT_OPTIONS", "asks_for", "Rotation", "varimax", "promax",
           "rotated_count", "rotation_of", "score_rotation", "kernel_space_variance",
           "complex_rotation_of", "complex_score_rotation"]

#: The rotations :func:`rotation_of` makes.
METHODS = ("varimax", "promax")


@dataclass(frozen=True)
class Rotation:
    """A rotation of the leading r modes, and what it explains (float64 unless said).

    ``matrix`` R (r x r) rotates the loadings, before sorting; ``order`` sorts the
    rotated modes by ``explained_variance`` (sorted), ``signs`` flips them;
    ``loadings`` are the rotated, sorted, signed loadings (r x p, over the weighted
    features); ``correlation`` is the correlation of the rotated scores (sorted and
    signed; the identity for varimax); ``total_variance`` the variance of the weighted
    features that ``explained_variance`` is a share of.
    """

    method: str
    power: int
    matrix: np.ndarray
    correlation: np.ndarray
    order: np.ndarray  # int64
    signs: np.ndarray
    explained_variance: np.ndarray
    total_variance: float
    loadings: np.ndarray

    @property
    def n_components(self) -> int:
        """The number r of rotated modes."""
        return int(np.shape(self.explained_variance)[0])

    def __repr__(self) -> str:
        power = f", power={self.power}" if self.method == "promax" else ""
        return (f"Rotation({self.method}{power}, {self.n_components} modes over "
                f"{np.shape(self.loadings)[1]} features, field variance "
                f"{float(np.sum(self.explained_variance)):.4g} of {self.total_variance:.4g})")


def varimax(loadings: np.ndarray, *, max_iter: int = 1000, rtol: float = 1e-8
            ) -> tuple[np.ndarray, np.ndarray]:
    """The varimax rotation of ``loadings`` (p x r): the rotated loadings and R (r x r).

    Real or complex: for complex loadings (Hilbert EOF) the squares are squared moduli,
    the transposes conjugate and R is unitary, as in xeofs' complex rotator; for real
    ones the same arithmetic is the real rotation's, to the bit.

    Examples
    --------
    >>> L = np.array([[1.0, 1.0], [1.0, -1.0], [0.5, 0.5]])
    >>> rotated, R = varimax(L)
    >>> bool(np.allclose(R @ R.T, np.eye(2))), bool(np.allclose(L @ R, rotated))
    (True, True)
    """
    p, r = loadings.shape
    h = np.sqrt(np.sum(np.abs(loadings) ** 2, axis=1))
    # xeofs' stabiliser: a feature of zero loadings stays zero.
    X = loadings / (h + np.finfo(loadings.dtype).eps)[:, None]
    R, delta = np.eye(r, dtype=np.result_type(loadings.dtype, np.float64)), 0.0
    for _ in range(max_iter):
        previous = delta
        basis = X @ R
        squares = np.abs(basis) ** 2
        target = X.conj().T @ (basis * (squares - squares.sum(axis=0) / p))
        U, singular, VT = np.linalg.svd(target)
        R = U @ VT
        delta = float(np.sum(singular))
        if abs(delta - previous) / delta < rtol:
            break
    else:
        raise InvalidParameterError(
            f"The varimax rotation did not converge in max_iter={max_iter} iterations "
            f"(rtol={rtol}); raise max_iter or rtol.")
    return (h[:, None] * X) @ R, R


def promax(loadings: np.ndarray, power: int, *, max_iter: int = 1000, rtol: float = 1e-8
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The promax rotation of ``loadings`` (p x r) with ``power``: the rotated loadings,
    R (r x r, from the unrotated loadings) and the correlation of the rotated modes. Real
    or complex, as :func:`varimax`.

    Examples
    --------
    >>> L = np.array([[1.0, 0.2], [0.9, -0.1], [0.1, 1.0], [0.2, 0.8]])
    >>> rotated, R, phi = promax(L, 4)
    >>> bool(np.allclose(L @ R, rotated)), bool(np.allclose(np.diag(phi), 1.0))
    (True, True)
    """
    X, R = varimax(loadings, max_iter=max_iter, rtol=rtol)
    h = np.sqrt(np.sum(np.abs(X) ** 2, axis=1))
    X = X / (h + np.finfo(X.dtype).eps)[:, None]
    normed = X / np.max(np.abs(X), axis=0)
    target = normed * np.abs(normed) ** (power - 1)
    L = np.linalg.inv(X.conj().T @ X) @ X.conj().T @ target
    try:
        scale = np.diag(np.diag(np.linalg.inv(L.conj().T @ L)))
    except np.linalg.LinAlgError:
        scale = np.diag(np.diag(np.linalg.pinv(L.conj().T @ L)))
    L = L @ np.sqrt(scale)
    inverse = np.linalg.inv(L)
    return h[:, None] * (X @ L), R @ L, inverse @ inverse.conj().T


#: ``kpca_dask.rotate``'s options when none is given: (method, power, n_components).
DEFAULT_OPTIONS = ("varimax", 4, None)


def asks_for(rotation, method: str, power, n_components) -> bool:
    """Whether a call of ``kpca_dask.rotate`` with these options and no data asks for the
    ``rotation`` a model holds: its defaults ask for whatever it holds; otherwise the method
    (and promax's power) must be the held rotation's, and ``n_components`` its count if
    given.

    Examples
    --------
    >>> held = type("Held", (), {"method": "promax", "power": 3, "n_components": 2})()
    >>> asks_for(held, "varimax", 4, None), asks_for(held, "promax", 3, 2)
    (True, True)
    >>> asks_for(held, "promax", 4, None), asks_for(held, "varimax", 4, 2)
    (False, False)
    """
    if (method, power, n_components) == DEFAULT_OPTIONS:
        return True
    same = rotation.method == method and (method != "promax" or rotation.power == power)
    return same and (n_components is None or n_components == rotation.n_components)


def rotated_count(q: int, n_components, method: str, power) -> int:
    """How many of the q leading modes to rotate (all when ``n_components`` is None), with
    the rotation's parameters checked.

    Examples
    --------
    >>> rotated_count(5, None, "varimax", 4), rotated_count(5, 3, "promax", 2)
    (5, 3)
    """
    r = q if n_components is None else n_components
    if not (isinstance(r, (int, np.integer)) and not isinstance(r, bool) and 2 <= r <= q):
        raise InvalidParameterError(
            f"n_components must be an int from 2 to {q} (the modes to rotate); got {r!r}.")
    if method == "promax" and not (isinstance(power, (int, np.integer)) and power >= 2):
        raise InvalidParameterError(f"promax needs an int power >= 2; got {power!r}.")
    return int(r)


def rotation_of(loadings: np.ndarray, total_variance: float, method: str = "varimax",
                power: int = 4, *, max_iter: int = 1000, rtol: float = 1e-8) -> Rotation:
    """Rotate the loadings (r x p) of r modes, sort them by the variance each explains and
    fix their signs.

    Examples
    --------
    >>> L = np.array([[1.0, 1.0, 0.5, 0.0], [1.0, -1.0, 0.5, 0.1]])
    >>> rotation = rotation_of(L, 5.0)
    >>> variance = rotation.explained_variance
    >>> variance.round(3).tolist(), round(float(variance.sum()), 6)
    ([2.503, 2.007], 4.51)
    """
    if method not in METHODS:
        raise InvalidParameterError(f"method must be 'varimax' or 'promax'; got {method!r}.")
    L = np.asarray(loadings, dtype=np.float64).T
    if method == "varimax":
        rotated, R = varimax(L, max_iter=max_iter, rtol=rtol)
        phi = np.eye(R.shape[0])
    else:
        rotated, R, phi = promax(L, power, max_iter=max_iter, rtol=rtol)
    variance = np.sum(rotated * rotated, axis=0)
    order = np.argsort(variance, kind="stable")[::-1].astype(np.int64)
    rotated = rotated[:, order]
    # xeofs' rule: each mode's entry of largest magnitude (its max if ties) is positive.
    signs = np.where(rotated.max(axis=0) >= np.abs(rotated.min(axis=0)), 1.0, -1.0)
    return Rotation(method, int(power if method == "promax" else 1), R,
                    phi[np.ix_(order, order)] * np.outer(signs, signs), order, signs,
                    variance[order],
                    float(total_variance), (rotated * signs).T.copy())


def score_rotation(rotation: Rotation, variances: np.ndarray) -> np.ndarray:
    """The r x r matrix A that makes rotated scores of the leading scores: Y_r A.

    As xeofs does: the scores scaled to unit norm, rotated by (R⁻¹)ᵀ (R itself
    for varimax), sorted, scaled by the rotated modes' norms
    √(explained variance × (n - 1)) and signed; ``variances`` are the scores'
    own (``explained_variance_``), so n - 1 cancels.

    Examples
    --------
    >>> L = np.array([[1.0, 1.0, 0.5, 0.0], [1.0, -1.0, 0.5, 0.1]])
    >>> A = score_rotation(rotation_of(L, 5.0), np.array([4.0, 1.0]))
    >>> A.shape
    (2, 2)
    """
    R = rotation.matrix
    inverse_transpose = R if rotation.method == "varimax" else np.linalg.inv(R).T
    lam = np.asarray(variances, dtype=np.float64)[:rotation.n_components]
    with np.errstate(divide="ignore"):
        unit = np.where(lam > 0, 1.0 / np.sqrt(lam), 0.0)
    return (unit[:, None] * inverse_transpose[:, rotation.order]) * (
        np.sqrt(rotation.explained_variance) * rotation.signs)[None, :]


def kernel_space_variance(rotation: Rotation, variances: np.ndarray) -> np.ndarray:
    """The variance along each rotated mode's direction in the kernel's feature space.

    The unrotated modes are orthonormal directions there with variances λ_i
    (``variances``, the scores' own); rotated mode j is the direction
    Σ_i R_ij e_i, of variance Σ_i λ_i R_ij² (sorted as the rotated modes).
    For a linear kernel, whose loadings are √λ_i times orthonormal EOFs, this
    is the squared norm of the rotated loadings: the field-space variance
    (docs/design.md §15). An orthogonal R keeps the sum, Σ_j of it = Σ_i λ_i.

    Examples
    --------
    >>> L = np.array([[1.0, 1.0, 0.5, 0.0], [1.0, -1.0, 0.5, 0.1]])
    >>> rotation = rotation_of(L, 5.0)
    >>> round(float(kernel_space_variance(rotation, np.array([4.0, 1.0])).sum()), 9)
    5.0
    """
    lam = np.asarray(variances, dtype=np.float64)[:rotation.n_components]
    R = rotation.matrix[:, rotation.order]
    return lam @ (R * R)


# -- complex modes (Hilbert kernel EOF, docs/design.md §16) ---------------------------
# The same steps with conjugate transposes, as xeofs 3's ``HilbertEOFRotator`` rotates
# complex loadings (Bloomfield and Davis 1994): R is unitary for varimax. A complex mode
# has a free phase rather than a sign; ``Rotation.signs`` holds the unit phase that makes
# each rotated map's largest entry real and positive.


def complex_rotation_of(loadings: np.ndarray, total_variance: float,
                        method: str = "varimax", power: int = 4, *, max_iter: int = 1000,
                        rtol: float = 1e-8) -> Rotation:
    """Rotate complex loadings (r x p), sort the modes by the variance each explains
    (the sum of its loadings' squared moduli) and turn each so that its largest entry is
    real and positive.

    Examples
    --------
    >>> L = np.array([[1.0, 1.0j, 0.5, 0.0], [1.0, -1.0j, 0.5, 0.1]])
    >>> rotation = complex_rotation_of(L, 5.0)
    >>> round(float(rotation.explained_variance.sum()), 6)
    4.51
    """
    if method not in METHODS:
        raise InvalidParameterError(f"method must be 'varimax' or 'promax'; got {method!r}.")
    L = np.asarray(loadings, dtype=np.complex128).T
    if method == "varimax":
        rotated, R = varimax(L, max_iter=max_iter, rtol=rtol)
        phi = np.eye(R.shape[0], dtype=np.complex128)
    else:
        rotated, R, phi = promax(L, power, max_iter=max_iter, rtol=rtol)
    variance = np.sum(np.abs(rotated) ** 2, axis=0)
    order = np.argsort(variance, kind="stable")[::-1].astype(np.int64)
    rotated = rotated[:, order]
    peak = rotated[np.argmax(np.abs(rotated), axis=0), np.arange(rotated.shape[1])]
    turns = np.where(np.abs(peak) > 0, np.abs(peak) / np.where(peak == 0, 1, peak), 1.0)
    return Rotation(method, int(power if method == "promax" else 1), R,
                    phi[np.ix_(order, order)] * np.outer(turns.conj(), turns), order, turns,
                    variance[order], float(total_variance), (rotated * turns).T.copy())


def complex_score_rotation(rotation: Rotation, variances: np.ndarray) -> np.ndarray:
    """The r x r matrix A that makes rotated complex scores of the leading scores: Y_r A.

    As xeofs' ``HilbertEOFRotator``: the scores scaled to unit variance, times
    (R⁻¹)ᴴ (R itself for varimax), sorted, scaled by √(rotated variance) and turned.

    Examples
    --------
    >>> L = np.array([[1.0, 1.0j, 0.5, 0.0], [1.0, -1.0j, 0.5, 0.1]])
    >>> complex_score_rotation(complex_rotation_of(L, 5.0), np.array([4.0, 1.0])).shape
    (2, 2)
    """
    R = rotation.matrix
    inverse_adjoint = R if rotation.method == "varimax" else np.linalg.inv(R).conj().T
    lam = np.asarray(variances, dtype=np.float64)[:rotation.n_components]
    with np.errstate(divide="ignore"):
        unit = np.where(lam > 0, 1.0 / np.sqrt(lam), 0.0)
    return (unit[:, None] * inverse_adjoint[:, rotation.order]) * (
        np.sqrt(rotation.explained_variance) * rotation.signs)[None, :]
