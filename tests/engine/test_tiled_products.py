"""Products of tiled matrices and triangular solves by tiles on the workers
(engine.tiles.products, engine.tiles.triangular)."""

from __future__ import annotations

import time
from functools import partial
from types import SimpleNamespace

import dask.array as da
import numpy as np
import pytest
from dask.utils import key_split
from distributed import Client, futures_of
from scipy import linalg

from kpca_dask.engine.tiles.products import tiled_matrix
from kpca_dask.engine.tiles.solve import TiledFactor, TiledOperator
from kpca_dask.engine.tiles.triangular import solve_lower

pytestmark = pytest.mark.slow


@pytest.fixture
def client(process_cluster):
    with Client(process_cluster) as client:
        yield client


def _persisted(client, A: np.ndarray, tile: int) -> da.Array:
    return client.persist(da.from_array(A, chunks=tile))


def test_products_equal_numpy_and_take_a_task_per_worker(client):
    """Lower, transposed lower and whole products with a centring,
    on tiles whose last row and column are narrower, equal numpy's; each step is at most
    one task per worker."""
    rng = np.random.default_rng(0)
    m, tile = 23, 7
    L = np.tril(rng.normal(size=(m, m)))
    B = rng.normal(size=(m, m))
    G = B @ B.T
    s, n = rng.normal(size=m), 5
    V = rng.normal(size=(m, 3))
    lower, whole = tiled_matrix(_persisted(client, L, tile), client), tiled_matrix(
        _persisted(client, G, tile), client)

    def chain():
        U = lower.product(lower.split(V), lower=True, transposed=True)
        return lower.product(whole.product(U, column_sums=s, n_samples=n),
                             lower=True)

    expected = L @ ((G - np.outer(s, s) / n) @ (L.T @ V))
    np.testing.assert_allclose(lower.run(chain), expected, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(lower.run(lambda: lower.product(lower.split(V), lower=True)),
                               L @ V, rtol=1e-12, atol=1e-12)
    workers = len(client.scheduler_info()["workers"])
    assert len(lower.product(lower.split(V), lower=True)) <= workers
    assert len(whole.groups) <= workers


def test_solves_by_tiles_equal_scipys_a_diagonal_task_and_a_task_per_worker_a_step(client):
    """L^-1 V and L^-T V by tiles (the last row and column narrower), from one part or from
    a product's partial results, equal scipy's triangular solves; each of the T steps is
    the diagonal tile's solve, and the running sums take at most a task per worker a
    step."""
    rng = np.random.default_rng(1)
    m, tile = 23, 7
    L = np.tril(rng.normal(size=(m, m))) + 6 * np.eye(m)
    V = rng.normal(size=(m, 3))
    lower = tiled_matrix(_persisted(client, L, tile), client)
    for transposed in (False, True):
        expected = linalg.solve_triangular(L, V, lower=True, trans=int(transposed))
        np.testing.assert_allclose(
            lower.run(partial(solve_lower, lower, lower.split(V), transposed=transposed)),
            expected, rtol=1e-12, atol=1e-12)
        halves = [{i: part / 2 for i, part in lower.split(V)[0].items()}] * 2
        np.testing.assert_allclose(
            lower.run(partial(solve_lower, lower, halves, transposed=transposed)),
            expected, rtol=1e-12, atol=1e-12)
    blocks = solve_lower(lower, lower.split(V))
    graph = dict(blocks[-1].__dask_graph__())
    steps, workers = -(-m // tile), len(client.scheduler_info()["workers"])
    assert len(blocks) == steps
    assert sum(key_split(key) == "solved_block" for key in graph) == steps
    assert sum(key_split(key) == "added_products" for key in graph) <= workers * (steps - 1)


def test_the_operator_inverts_its_factor_and_lets_the_factors_tiles_go(client):
    """M V = L^-1 (G - s s^T / n) L^-T V by solves, then by L^-1's tiles once the operator
    is inverted (where M is formed): the same to rounding, and L's tiles are let go, so
    that the workers hold G and L^-1 only."""
    rng = np.random.default_rng(2)
    m, tile = 23, 7
    B = rng.normal(size=(m, m + 5))
    K, G = B @ B.T + np.eye(m), B[:, :9] @ B[:, :9].T
    s, n = rng.normal(size=m), 4
    V = rng.normal(size=(m, 2))
    L = np.linalg.cholesky(K)
    expected = linalg.solve_triangular(
        L, (G - np.outer(s, s) / n) @ linalg.solve_triangular(L, V, lower=True, trans=1),
        lower=True)
    lower = _persisted(client, L, tile)
    factor = TiledFactor(lower, 0.0, m, tiled_matrix(lower, client))
    keys = {future.key for future in futures_of(lower)}
    operator = TiledOperator(_persisted(client, G, tile), SimpleNamespace(
        column_sums=s, n_samples=n), factor, client)
    np.testing.assert_allclose(operator(V), expected, rtol=1e-10, atol=1e-10)
    del factor, lower
    X = operator.inverted()
    np.testing.assert_allclose(X.compute(), np.linalg.inv(L), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(operator(V), expected, rtol=1e-10, atol=1e-10)

    def held(dask_scheduler):  # a key let go may stay known, released, for X's recipe
        return [key for key in keys
                if key in dask_scheduler.tasks and dask_scheduler.tasks[key].state == "memory"]

    deadline = time.monotonic() + 10
    while client.run_on_scheduler(held) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not client.run_on_scheduler(held)
