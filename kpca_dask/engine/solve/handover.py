"""When the iterative way hands the small problem to the dense one: by rates measured here.

The iterative way (:mod:`kpca_dask.engine.solve.eigensolver`) is given the dense
way's cost as a budget of columns M may be applied to (docs/design.md §11):
past it, on a flat or clustered spectrum, the dense way finishes. How many
columns the dense way costs depends on the machine: the products read m x m
arrays from memory for a few columns at a time, the dense way is mostly
matrix-matrix work that uses every core. A fixed share of r set on one
thread (:data:`kpca_dask.engine.solve.nystrom.DENSE_SOLVE_COLUMNS`, 0.5 r) was three
times the dense way's cost on two cores of an Intel Xeon: at r = 10 000 the
iterative way ran about 157 s (4805 columns at about 30 ms each, with its
orthogonalisations) where the dense way takes about 57 s.

:class:`TimedBudget` turns the dense way's time into columns at the rate the
iterative way is measured to go, cycle by cycle: the dense way's time is
:func:`dense_seconds`, its cost per r^3 measured once in the process on a
matrix of :data:`RATE_ORDER` (about half a second) and scaled by r^3. Per
r^3 the dense way is slower on small matrices (0.067 ns at r = 2000 against
0.052 ns at 5000 on that Xeon), so the scaled time is an upper bound, and the
iterative way is given at most about the dense way's time.

Which way a solve takes may then depend on the machine and its load; both
give the leading pairs to the solver's tolerance (residuals at most 1e-12 of
the largest eigenvalue). The dense way forms M, 1.25 r^2 words beside G and
the factor, and is taken only when those fit in what the process may still
take.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

__all__ = ["RATE_ORDER", "TimedBudget", "dense_seconds"]

#: The order of the matrix the dense way's rate is measured on.
RATE_ORDER = 2000

#: Leading pairs the measured dense way finds, as a fit's q would.
_RATE_PAIRS = 10

#: Seconds per r^3 of the dense way, measured once in this process.
_rate: list[float] = []


def dense_seconds(rank: int) -> float:
    """The dense way's time for the leading pairs of an r x r problem: its rate per r^3 on
    this machine (measured at the first call, about half a second) times r^3.

    Examples
    --------
    >>> 0.0 < dense_seconds(100) < dense_seconds(200)
    True
    """
    if not _rate:
        _rate.append(_measured_rate(RATE_ORDER))
    return _rate[0] * float(rank) ** 3


def _measured_rate(r: int) -> float:
    """Seconds per r^3 of the dense way's steps (sygst, then the leading pairs by eigh) on
    an r x r problem, the better of two."""
    rng = np.random.default_rng(0)
    best = np.inf
    for _ in range(2):
        S = np.asfortranarray(rng.standard_normal((r, r)))
        S += S.T
        L = np.asfortranarray(np.eye(r) + np.tril(rng.standard_normal((r, r)), -1) / r)
        started = time.perf_counter()
        M, _ = lapack.dsygst(S, L, itype=1, lower=1, overwrite_a=1)
        linalg.eigh(M, lower=True, subset_by_index=[r - _RATE_PAIRS, r - 1], overwrite_a=True,
                    check_finite=False)
        best = min(best, time.perf_counter() - started)
    return best / r**3


class TimedBudget:
    """The dense way's time in columns of products at the iterative way's measured rate.

    Apply M through :meth:`apply` (it counts the columns); calling the budget
    gives the columns the iterative way may use in all: ``seconds()`` (the
    dense way's time, asked for at the first call only: a solve that converges
    in its first cycle never asks, nor measures the dense way's rate) times the
    columns so far over the time since the budget was made, which counts the
    solver's own work between products too; never more than ``most`` columns.

    Examples
    --------
    >>> budget = TimedBudget(lambda V: 2.0 * V, seconds=lambda: 1.0, most=100.0)
    >>> budget.apply(np.ones((3, 4))).shape, budget.columns
    ((3, 4), 4)
    >>> 0.0 < budget() <= 100.0
    True
    """

    def __init__(self, apply: Callable[[np.ndarray], np.ndarray], *,
                 seconds: Callable[[], float], most: float):
        self._apply, self._seconds, self.most = apply, seconds, most
        self.columns = 0
        self.started = time.perf_counter()

    def apply(self, V: np.ndarray) -> np.ndarray:
        self.columns += V.shape[1]
        return self._apply(V)

    def __call__(self) -> float:
        elapsed = time.perf_counter() - self.started
        if self.columns == 0 or elapsed <= 0.0:
            return self.most
        return min(self.most, self._seconds() * self.columns / elapsed)
