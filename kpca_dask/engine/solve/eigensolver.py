"""The leading eigenpairs of a symmetric operator given only its products (docs/design.md §11).

The small problem's matrix M = W^T S W (r x r) is never formed when r is
large: :mod:`kpca_dask.engine.solve.nystrom` hands over a function that applies it to
a block of vectors (two triangular solves and one symmetric product, each
reading an m x m array once). :func:`leading_eigenpairs` finds the top q
eigenpairs with a block Krylov method:

- a block of b = q + p orthonormal vectors (seeded), extended by ``depth``
  products to the Krylov basis [Q, MQ, M^2 Q, ...], each new block
  orthogonalised twice against the basis (classical Gram-Schmidt, twice is
  enough in floating point);
- Rayleigh-Ritz on that basis: the eigenpairs of H = B^T M B give Ritz values
  theta and vectors u = B y, and since M B is known, the residuals
  ``|M u - theta u|`` come for free;
- a restart from the b best Ritz vectors until the q leading residuals are at
  most ``tol`` times the largest Ritz value, or stop improving (the rounding
  floor of the products);
- with a ``budget`` (the columns M may be applied to, the cost of a dense
  eigendecomposition in products), it watches its own rate: after each cycle
  it predicts from the residuals' fall per cycle how many products the rest
  will take, and stops unconverged (``converged=False``) once finishing would
  pass the budget. A flat or clustered spectrum, where the residuals fall by
  a few percent a cycle, is then handed to the dense way after two or three
  cycles instead of sixty (docs/design.md §11).

Each product reads M's arrays once for the whole block, so the cost is that of
a few passes over m x m memory, not of an O(m^3) tridiagonal reduction. The
residuals are the certificate of the result: an eigenvalue is within
``|r|^2 / gap`` of the true one, an eigenvector within ``|r| / gap``.

:func:`estimate_trace` estimates trace(M) from the same basis (the exact part
trace(B^T M B)) plus a Hutchinson estimate of the rest with seeded Rademacher
probes, and the estimate's standard error.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import linalg

__all__ = ["Eigenpairs", "KrylovState", "leading_eigenpairs", "estimate_trace", "DEFAULT_TOL",
           "DEPTH", "MAX_CYCLES"]

#: Residual tolerance, relative to the largest eigenvalue: embeddings agree with
#: a dense eigendecomposition's to ~tol / (relative gap).
DEFAULT_TOL = 1e-12

Operator = Callable[[np.ndarray], np.ndarray]

#: Blocks of the Krylov basis per cycle: the basis is a polynomial of degree
#: DEPTH - 1 in M applied to the restart block, and the caller holds it with its
#: images, 2 size b DEPTH float64 words (docs/design.md §13: 0.36 GiB at
#: size = 10^5, b = 20), so a deeper basis costs memory the products do not need.
DEPTH = 12

#: The most Rayleigh-Ritz steps of one call: a bound for the calls without a
#: ``budget`` (checkpointed and forced-iterative solves), where a flat spectrum
#: would otherwise go on cycling while its residuals fall by a few percent each
#: (docs/design.md §11); the residuals returned say how far it got.
MAX_CYCLES = 60

#: A basis needs the restart block and at least one block of new directions, or
#: Rayleigh-Ritz would find nothing the restart block did not hold.
_LEAST_DEPTH = 2

#: Default extra vectors in the block: max(_OVERSAMPLE_LEAST, count // _OVERSAMPLE_PER).
#: Extra vectors separate the wanted eigenvalues from the next ones, so clustered
#: ones converge in fewer cycles; ten is the randomized range finder's usual
#: oversampling (Halko, Martinsson and Tropp, 2011), half of count for many pairs.
_OVERSAMPLE_LEAST = 10
_OVERSAMPLE_PER = 2

#: A thick restart keeps this many blocks of the best Ritz vectors: the b leading
#: ones and b more, whose directions the next cycle's basis would otherwise have to
#: find again.
_RESTART_BLOCKS = 2

#: A cycle makes progress when its worst residual is below this share of the least
#: worst so far (a tenth off); past the rounding floor of the products it is not.
_STALL_FALL = 0.9

#: Cycles in a row without progress (_STALL_FALL) before the solver stops there.
_PATIENCE = 5

#: A new Krylov direction keeps at least this fraction of its image's norm.
_NEW_DIRECTION = 1e-13


@dataclass(frozen=True)
class Eigenpairs:
    """The leading eigenpairs found, with their residual norms ``|M v - lambda v|``."""

    values: np.ndarray  # (k,), descending
    vectors: np.ndarray  # (size, k), orthonormal columns
    residuals: np.ndarray  # (k,)
    basis: np.ndarray  # the last Krylov basis B (size, K), orthonormal
    basis_trace: float  # trace(B^T M B)
    products: int  # columns M was applied to, in all
    passes: int = 0  # calls of the operator, in all
    converged: bool = True  # False: stopped because finishing would pass the budget


def leading_eigenpairs(apply: Operator, size: int, count: int, *, tol: float = DEFAULT_TOL,
                       seed: int = 0, oversample: int | None = None, depth: int = DEPTH,
                       max_cycles: int = MAX_CYCLES, start: np.ndarray | None = None,
                       budget: float | Callable[[], float] | None = None,
                       state: KrylovState | None = None,
                       on_product: Callable[[KrylovState], None] | None = None) -> Eigenpairs:
    """The ``count`` leading eigenpairs of the symmetric ``size`` x ``size`` operator ``apply``.

    Parameters
    ----------
    apply : callable
        ``apply(V)`` returns M V for V of shape (size, b).
    size, count : int
        The order of M and how many eigenpairs are wanted (count <= size).
    tol : float
        Stop when the ``count`` leading residuals are at most ``tol`` times the
        largest Ritz value.
    seed : int
        Seeds the starting block, so the result is reproducible.
    oversample : int, optional
        Extra vectors in the block (default max(10, count // 2)): more make
        clustered eigenvalues converge in fewer cycles.
    depth : int
        Blocks of the Krylov basis per cycle (:data:`DEPTH`).
    max_cycles : int
        The most Rayleigh-Ritz steps (:data:`MAX_CYCLES`).
    start : ndarray, optional
        Vectors to start from (e.g. the result of an earlier, smaller call).
    budget : float or callable, optional
        The most columns M may be applied to in all (None: no limit), or a
        function that returns it when asked after each cycle (a budget set by
        rates measured as the solve goes). The solver stops with
        ``converged=False`` as soon as its residuals' rate of fall predicts
        that it would pass this (module docstring).
    state : KrylovState, optional
        Where an earlier call with the same arguments was after one of its
        products (as ``on_product`` received it): the method goes on from there
        and ends as that call would have.
    on_product : callable, optional
        Called with the :class:`KrylovState` after each product, e.g. to save it
        (a product can cost a pass over the data).

    Examples
    --------
    >>> M = np.diag(np.arange(100.0, 0.0, -1.0))
    >>> pairs = leading_eigenpairs(lambda V: M @ V, 100, 3)
    >>> pairs.values.round(8).tolist(), bool(pairs.residuals.max() < 1e-9)
    ([100.0, 99.0, 98.0], True)
    """
    block = _block_size(size, count, oversample)
    depth = max(_LEAST_DEPTH, min(depth, size // block))
    report = on_product or (lambda _: None)
    state = _started(apply, size, block, seed, start, report) if state is None else state
    converged = True
    while True:
        before = state.products
        state = _krylov(apply, state, block, depth, report)
        per_cycle = state.products - before
        basis, images = np.hstack(state.blocks), np.hstack(state.images)
        # The blocks live on in basis and images alone: one copy of the n x K arrays held.
        state = dataclasses.replace(state, blocks=[], images=[])
        ritz = _rayleigh_ritz(basis, images, tol)
        U, MU = _restart_block(basis, images, ritz, block)
        del images
        residuals, worst = _relative_residuals(U, MU, ritz, count)
        cycles = state.cycles + 1
        # The whole space at once: then Rayleigh-Ritz is exact.
        if worst <= ritz.target or basis.shape[1] >= size:
            break
        stalled = _stalled_cycles(worst, state)
        if stalled >= _PATIENCE or cycles >= max_cycles:
            basis = U if cycles >= max_cycles and stalled < _PATIENCE else basis
            break
        history = state.history + (worst,)
        limit = budget() if callable(budget) else budget
        if limit is not None and _past_budget(history, ritz.target, state.products, per_cycle,
                                              limit):
            converged = False
            break
        state = _restarted(state, U, MU, worst, stalled, cycles, history)
    return Eigenpairs(ritz.values[:count], U[:, :count], residuals, basis, ritz.basis_trace,
                      state.products, passes=state.passes, converged=converged)


def _block_size(size: int, count: int, oversample: int | None) -> int:
    """b = count plus the extra vectors (default max(10, count // 2)), at most ``size``."""
    if oversample is None:
        oversample = max(_OVERSAMPLE_LEAST, count // _OVERSAMPLE_PER)
    return min(size, count + oversample)


def _started(apply: Operator, size: int, block: int, seed: int, start,
             report: Callable[[KrylovState], None]) -> KrylovState:
    """The first block, orthonormal and seeded, with its image (one product)."""
    basis = _orthonormal_start(size, block, seed, start)
    state = KrylovState([basis], [apply(basis)], products=block, passes=1)
    report(state)
    return state


@dataclass(frozen=True)
class _RitzPairs:
    """Rayleigh-Ritz on a Krylov basis B: the eigenpairs (theta, Y) of H = B^T M B, largest
    first, and what the residuals are judged against."""

    values: np.ndarray  # theta, descending
    vectors: np.ndarray  # Y: the Ritz vectors are B Y
    basis_trace: float  # trace(H)
    scale: float  # |theta_1|, the largest Ritz value (at least the smallest float)
    target: float  # the relative residual to reach: tol, or the products' rounding floor


def _rayleigh_ritz(basis: np.ndarray, images: np.ndarray, tol: float) -> _RitzPairs:
    """The Ritz pairs of M on ``basis``, given its ``images`` M B."""
    H = basis.T @ images
    # M is symmetric, so H = B^T M B would be too but for the rounding of the
    # products: its asymmetry is the floor the residuals can reach.
    floor = np.abs(H - H.T).max()
    theta, Y = linalg.eigh(0.5 * (H + H.T))
    theta, Y = theta[::-1], Y[:, ::-1]
    scale = max(abs(theta[0]), np.finfo(float).tiny)
    return _RitzPairs(theta, Y, float(np.trace(H)), scale, max(tol, floor / scale))


def _restart_block(basis: np.ndarray, images: np.ndarray, ritz: _RitzPairs,
                   block: int) -> tuple[np.ndarray, np.ndarray]:
    """The best :data:`_RESTART_BLOCKS` b Ritz vectors U = B Y and their images M U = (M B) Y,
    known without a product: a thick restart starts the next cycle from them."""
    keep = min(_RESTART_BLOCKS * block, ritz.values.size)
    return basis @ ritz.vectors[:, :keep], images @ ritz.vectors[:, :keep]


def _relative_residuals(U: np.ndarray, MU: np.ndarray, ritz: _RitzPairs,
                        count: int) -> tuple[np.ndarray, float]:
    """``|M u - theta u|`` of the ``count`` leading Ritz pairs, and the worst of them over
    the largest Ritz value."""
    theta = ritz.values[:count]
    residuals = np.linalg.norm(MU[:, :count] - U[:, :count] * theta, axis=0)
    return residuals, residuals.max(initial=0.0) / ritz.scale


def _stalled_cycles(worst: float, state: KrylovState) -> int:
    """The cycles in a row that took less than a tenth off the least worst residual so far:
    past the rounding floor of the products the residual stops falling."""
    return state.stalled + 1 if worst > _STALL_FALL * state.best else 0


def _restarted(state: KrylovState, U: np.ndarray, MU: np.ndarray, worst: float, stalled: int,
               cycles: int, history: tuple) -> KrylovState:
    """The next cycle's state: the restart block and its images, and the cycle's record."""
    return KrylovState([U], [MU], best=min(state.best, worst), stalled=stalled,
                       products=state.products, passes=state.passes, cycles=cycles,
                       history=history)


def _past_budget(history: tuple, target: float, products: int, per_cycle: int,
                 budget: float) -> bool:
    """Whether finishing would apply M to more than ``budget`` columns in all.

    The rest is predicted from the residuals' fall per cycle, the better of the
    last cycle's and the mean since the first (a solver that is converging
    superlinearly, or has just reached its rounding floor, is not stopped).
    """
    if products >= budget:
        return True
    if len(history) < 2:
        return products + per_cycle > budget
    last = history[-1] / history[-2] if history[-2] > 0 else 0.0
    mean = (history[-1] / history[0]) ** (1.0 / (len(history) - 1)) if history[0] > 0 else 0.0
    rate = min(last, mean)
    if rate <= 0.0 or history[-1] <= target:
        return False
    if rate >= 1.0:
        return True
    remaining = np.log(target / history[-1]) / np.log(rate)
    return products + remaining * per_cycle > budget


@dataclass
class KrylovState:
    """Where :func:`leading_eigenpairs` is between two products: enough to go on from there.

    ``blocks`` are the orthonormal blocks of the cycle's Krylov basis (the
    restart block first) and ``images`` their products with M; ``best`` the
    least worst relative residual of the cycles so far and ``stalled`` the
    cycles since it last fell by a tenth; ``products`` counts the columns M was
    applied to, ``passes`` the calls of the operator, ``cycles`` the
    Rayleigh-Ritz steps made, ``history`` the worst relative residual of each (what a
    ``budget`` predicts from; checkpoints, whose solves have no budget, do not keep it).
    """

    blocks: list
    images: list
    best: float = np.inf
    stalled: int = 0
    products: int = 0
    passes: int = 0
    cycles: int = 0
    history: tuple = ()


def _orthonormal_start(size: int, block: int, seed: int, start) -> np.ndarray:
    Q = np.random.default_rng(seed).standard_normal((size, block))
    if start is not None and start.size:
        Q[:, : start.shape[1]] = start[:, :block]
    return np.linalg.qr(Q)[0]


def _krylov(apply: Operator, state: KrylovState, block: int, depth: int,
            report: Callable[[KrylovState], None]) -> KrylovState:
    """``state``'s basis extended to ``depth`` blocks of Krylov directions (or until none is
    left), each grown from the image of the block before (of the restart block: its first
    ``block`` columns), ``report`` called after each product."""
    while len(state.blocks) < depth:
        grow = state.images[0][:, :block] if len(state.blocks) == 1 else state.images[-1]
        B = np.hstack(state.blocks)
        new = grow
        for _ in range(2):  # twice is enough (Giraud et al., 2005)
            new = new - B @ (B.T @ new)
        Qn, R = np.linalg.qr(new)
        # A direction left with a tiny part of its image's norm is rounding noise in
        # the span already: dropped, or it would spoil the basis's orthogonality.
        scale = np.linalg.norm(grow, axis=0).max(initial=0.0)
        Qn = Qn[:, np.abs(np.diagonal(R)) > _NEW_DIRECTION * scale]
        if not Qn.shape[1] or B.shape[1] + Qn.shape[1] > B.shape[0]:
            break
        Qn, _ = np.linalg.qr(Qn - B @ (B.T @ Qn))
        del B
        image = apply(Qn)
        state = dataclasses.replace(state, blocks=state.blocks + [Qn],
                                    images=state.images + [image],
                                    products=state.products + Qn.shape[1],
                                    passes=state.passes + 1)
        report(state)
    return state


def estimate_trace(apply: Operator, pairs: Eigenpairs, *, probes: int = 64,
                   seed: int = 1) -> tuple[float, float]:
    """trace(M) and its standard error: exact on the Krylov basis, sampled on the rest.

    trace(M) = trace(B^T M B) + trace((I - BB^T) M (I - BB^T)); the second
    term is a Hutchinson estimate with ``probes`` seeded Rademacher vectors,
    projected off B (Meyer et al., "Hutch++", 2021, with the Krylov basis as
    the low-rank part). Its standard error is that of the probe mean.

    Examples
    --------
    >>> M = np.diag(np.linspace(1.0, 0.0, 400) ** 4)
    >>> pairs = leading_eigenpairs(lambda V: M @ V, 400, 5)
    >>> estimate, error = estimate_trace(lambda V: M @ V, pairs)
    >>> bool(abs(estimate - np.trace(M)) < 4 * error + 1e-12)
    True
    """
    size, basis = pairs.basis.shape[0], pairs.basis
    if basis.shape[1] >= size:
        return pairs.basis_trace, 0.0
    omega = np.random.default_rng(seed).choice([-1.0, 1.0], size=(size, probes))
    omega -= basis @ (basis.T @ omega)
    samples = np.einsum("ij,ij->j", omega, apply(omega))
    return (pairs.basis_trace + float(samples.mean()),
            float(samples.std(ddof=1) / np.sqrt(probes)))
