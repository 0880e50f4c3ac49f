"""The iterative way's budget set by rates measured on this machine (engine/solve/handover.py):
the dense way's time in columns at the products' own rate, never more than the fixed cap."""

from __future__ import annotations

import time

import numpy as np
import pytest
from test_flat_spectrum import _SMALL_DENSE_RANK, _blobs, _counted, _solved

from kpca_dask.engine.solve import handover
from kpca_dask.engine.solve.handover import TimedBudget, dense_seconds


def _slow(V: np.ndarray) -> np.ndarray:
    time.sleep(0.05)
    return V


def test_a_budget_is_the_dense_time_at_the_measured_rate_of_the_products():
    """Products of 4 columns at 50 ms or more: a dense way of 1 ms is worth under a tenth
    of a column, one of 1000 s more than the cap, which then holds."""
    cheap = TimedBudget(_slow, seconds=lambda: 1e-3, most=1000.0)
    expensive = TimedBudget(_slow, seconds=lambda: 1e3, most=1000.0)
    assert cheap() == expensive() == 1000.0  # no product yet: the cap
    for budget in (cheap, expensive):
        budget.apply(np.ones((5, 4)))
    assert cheap() < 0.1 and expensive() == 1000.0


def test_a_budget_asks_for_the_dense_time_only_when_called():
    """A solve that converges in its first cycle never measures the dense way's rate."""
    asked = []
    budget = TimedBudget(_slow, seconds=lambda: asked.append(1) or 1.0, most=10.0)
    budget.apply(np.ones((5, 2)))
    assert not asked
    budget()
    assert asked == [1]


def test_the_dense_rate_is_measured_once_and_scales_as_r_cubed():
    dense_seconds(10)
    measured = list(handover._rate)
    assert dense_seconds(2000) == pytest.approx(8.0 * dense_seconds(1000))
    assert handover._rate == measured and 0.0 < measured[0] < 1e-6  # seconds per r^3


def test_the_solver_stops_at_the_timed_budget_and_runs_on_under_the_cap():
    """A clustered spectrum (eigenvalues 1 - 1e-4 k), where the residuals fall slowly: with
    the dense way free the solver stops after its first cycle, unconverged; with it dear,
    the cap alone bounds it, and it goes on past the first cycle."""
    from kpca_dask.engine.solve.eigensolver import leading_eigenpairs

    M = np.diag(1.0 - 1e-4 * np.arange(400))
    runs = {}
    for name, seconds in (("free", 0.0), ("dear", 1e9)):
        budget = TimedBudget(lambda V: M @ V, seconds=lambda s=seconds: s, most=2000.0)
        runs[name] = leading_eigenpairs(budget.apply, 400, 10, budget=budget)
    first_cycle = 12 * 20
    assert not runs["free"].converged and runs["free"].products <= first_cycle
    assert runs["dear"].products > first_cycle


@pytest.mark.slow
def test_a_narrow_kernel_hands_over_after_one_cycle_when_the_dense_way_is_cheaper(
        monkeypatch):
    """gamma = 1 at r = 500 (above the crossover the test sets), the dense way's time taken
    as 0: the iterative way stops after its first cycle and the dense way gives the model."""
    m = _SMALL_DENSE_RANK + 100
    monkeypatch.setattr("kpca_dask.engine.solve.nystrom.DENSE_RANK", _SMALL_DENSE_RANK)
    monkeypatch.setattr("kpca_dask.engine.solve.nystrom.dense_seconds", lambda rank: 0.0)
    X, Z = _blobs(4 * m, m, np.float32)
    calls = _counted(monkeypatch)
    auto = _solved(X, Z, 1.0, dtype=np.float32)
    assert auto.method == "dense after iterative" and not calls[0].converged
    assert calls[0].products <= 12 * 20
    assert auto.solution.residuals.max() <= 1e-12 * auto.solution.eigenvalues[0]
