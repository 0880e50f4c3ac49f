"""numpy input is wrapped in row blocks without a copy, named by its values."""

from __future__ import annotations

import numpy as np

from kpca_dask import KernelPCA
from kpca_dask.validation import as_dask_array


def test_numpy_input_is_wrapped_without_a_copy(rng):
    X = rng.normal(size=(45, 3))
    Xd, is_lazy = as_dask_array(X, block_rows=20)
    assert not is_lazy
    assert Xd.chunks == ((20, 20, 5), (3,))
    graph = dict(Xd.__dask_graph__())
    blocks = [graph[(Xd.name, i, 0)] for i in range(3)]
    values = [getattr(block, "value", block) for block in blocks]  # a task-spec data node
    assert all(np.shares_memory(v, X) for v in values)
    np.testing.assert_array_equal(Xd.compute(), X)


def test_the_name_follows_the_values(rng):
    X = rng.normal(size=(30, 2))
    assert as_dask_array(X)[0].name == as_dask_array(X.copy())[0].name
    Y = X.copy()
    Y[7, 1] += 1e-12
    assert as_dask_array(Y)[0].name != as_dask_array(X)[0].name


def test_fit_on_numpy_leaves_the_input_untouched_and_equals_the_dask_fit(rng):
    import dask.array as da

    X = rng.normal(size=(300, 4))
    before = X.copy()
    a = KernelPCA(3, n_landmarks=50, random_state=0).fit(X)
    b = KernelPCA(3, n_landmarks=50, random_state=0).fit(da.from_array(X, chunks=70))
    np.testing.assert_array_equal(X, before)
    np.testing.assert_allclose(a.eigenvalues_, b.eigenvalues_, rtol=1e-10)
