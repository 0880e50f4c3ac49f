"""The matrix-free solver's row panels are persisted only when they fit (docs/design.md §13).

Locally, with the threaded scheduler: "auto" persists the panels when they take at
most PERSIST_SHARE of the memory the tasks may use, and otherwise leaves them to be
read again inside each pair task. Persisting panels that do not fit would hold the
whole of the rows in memory; the cluster tests see it as workers past their limit,
these see it at once.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from kpca_dask.engine.exact.matrix_free import (
    PERSIST_SHARE,
    ROWS_KEY,
    PanelReader,
    kernel_products,
    row_panels,
)


@pytest.fixture
def stored_rows(tmp_path):
    """4000 x 8 float64 rows in a Zarr store, and the same rows in memory."""
    X = np.random.default_rng(0).normal(size=(4000, 8))
    zarr.create_array(str(tmp_path / "X.zarr"), data=X, chunks=(500, 8))
    return da.from_zarr(str(tmp_path / "X.zarr")), X


def _panels(rows: da.Array, memory_bytes: int, mode: str | None = None):
    settings = {"scheduler": "threads", "num_workers": 2, "kpca-dask.memory-limit": memory_bytes}
    if mode is not None:
        settings[ROWS_KEY] = mode
    with dask.config.set(settings):
        return row_panels(rows, "rbf", {"gamma": 0.1}, np.float64)


def test_panels_past_their_share_of_memory_are_read_again(stored_rows):
    """One word short of PERSIST_SHARE: not persisted, each pair task reads its panels
    from the store; the products are those of the persisted panels."""
    rows, X = stored_rows
    limit = int(X.nbytes / PERSIST_SHARE)
    panels = _panels(rows, limit - 8)
    assert not panels.held
    assert all(isinstance(source, PanelReader) for source in panels.sources())
    held = _panels(rows, limit)
    assert held.held  # at their share exactly, they fit
    V = np.random.default_rng(1).normal(size=(len(X), 3))
    with dask.config.set(scheduler="threads", num_workers=2):
        read, kept = kernel_products(panels, V), kernel_products(held, V)
    np.testing.assert_allclose(read, kept, rtol=0, atol=1e-12 * np.abs(kept).max())


def test_read_and_persist_are_obeyed_whatever_the_memory(stored_rows):
    rows, X = stored_rows
    assert not _panels(rows, 2**40, "read").held
    assert _panels(rows, 2**20, "persist").held
