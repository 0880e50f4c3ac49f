"""The matrix-free exact solver on a LocalCluster of worker processes.

The row panels are persisted on the workers; each product is one graph over
pairs of panels. Workers killed between two products lose the panels they
held, which the scheduler recomputes from the graph, and the fit ends with
the undisturbed model. The bytes the workers send each other in a product stay
within the cost model of docs/design.md §13.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import dask
import dask.array as da
import numpy as np
import pytest

from kpca_dask import ExactKernelPCA
from kpca_dask.engine.exact.matrix_free import kernel_products, product_traffic, row_panels
from kpca_dask.exact.exact_fitting import fit_matrix_free
from kpca_dask.model.inputs import in_memory_fit_input
from tests._clusters import process_client

pytestmark = pytest.mark.slow

PARAMS = dict(n_components=5, gamma=0.1, eigen_solver="matrix-free")


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(1200, 4))


@pytest.fixture(scope="module")
def reference(X):
    with dask.config.set(scheduler="threads"):
        return ExactKernelPCA(**PARAMS).fit(X)


@pytest.fixture(scope="module")
def client():
    # A long transition log, so that the whole fit can be read back from it.
    with dask.config.set({"distributed.admin.low-level-log-length": 200_000}), \
            process_client(n_workers=2) as client:
        yield client


def _reached_memory_twice(dask_scheduler) -> list[str]:
    reached = Counter(str(entry[0]) for entry in dask_scheduler.transition_log
                      if entry[2] == "memory")
    return [key for key, count in reached.items() if count > 1]


def _clear_transition_log(dask_scheduler) -> None:
    dask_scheduler.transition_log.clear()


def test_a_cluster_fit_equals_the_threaded_one(client, X, reference):
    """Panels persisted on the workers, products on the cluster: the threaded model, to 1e-10."""
    model = ExactKernelPCA(**PARAMS).fit(X)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(model.transform(X[:9]), reference.transform(X[:9]), atol=1e-10)


def _workers_replaced(client, gone: str, count: int, timeout: float = 60.0) -> None:
    """Wait until the scheduler has dropped the worker ``gone`` and ``count`` workers (its
    nanny's replacement among them) are up again."""
    deadline = time.monotonic() + timeout
    while True:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        if gone not in workers and len(workers) == count:
            return
        assert time.monotonic() < deadline, f"{gone} was not replaced within {timeout} s"
        time.sleep(0.01)


@pytest.mark.faults
def test_workers_killed_between_products_cost_only_their_panels(client, X, reference):
    """After the second product each worker holding the persisted panels is sent SIGKILL in
    turn (the next once the first is replaced), so that no copy of a panel is left: the
    panels are recomputed from the graph, and the fit ends with the undisturbed eigenpairs."""
    client.run_on_scheduler(_clear_transition_log)
    killed = []

    def kill_after_second(state):
        if state.passes != 2:
            return
        for _ in range(2):
            pids = client.run(os.getpid)
            held = {address: sum(str(key).startswith(("('array-", "('rechunk-"))
                                 for key in keys)
                    for address, keys in client.has_what().items()}
            victim = max(held, key=held.get)
            assert held[victim], "no worker holds a panel"
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(victim)
            _workers_replaced(client, victim, 2)

    given = in_memory_fit_input(X, sample_dim=None, weights=None)
    fitted = fit_matrix_free(given, ExactKernelPCA(**PARAMS).get_params(),
                             on_product=kill_after_second)
    assert len(set(killed)) == 2
    recomputed = client.run_on_scheduler(_reached_memory_twice)
    assert any(fitted.model.panels.rows.name in key for key in recomputed), recomputed[:5]
    np.testing.assert_allclose(fitted.model.eigenvalues, reference.eigenvalues_, rtol=1e-10)
    assert fitted.n_products == reference.n_products_


def test_the_traffic_of_a_product_stays_within_the_cost_model(client, X):
    """Bytes sent between workers in one product <= pairs x (two panels, two blocks of V,
    two parts of K V), the bound docs/design.md §13 carries to larger clusters."""
    V = np.random.default_rng(1).normal(size=(X.shape[0], 12))
    panels = row_panels(da.from_array(X), "rbf", {"gamma": 0.1}, np.float64)
    assert panels.held
    kernel_products(panels, V)  # the panels on the workers, and the code warm

    def sent(dask_worker):
        return dask_worker.transfer_outgoing_bytes_total

    before = sum(client.run(sent).values())
    kernel_products(panels, V)
    measured = sum(client.run(sent).values()) - before
    model = product_traffic(X.shape[0], X.shape[1], V.shape[1], len(panels.bounds))
    assert 0 < measured <= model["pairs"] * model["per_pair"]
