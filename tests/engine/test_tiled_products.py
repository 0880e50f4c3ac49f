"""Products of tiled matrices on the workers, a task per worker and step (engine.tiles.products)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import Client

from kpca_dask.engine.tiles.products import tiled_matrix

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
