"""The matrix-free solve's checkpoint: stopped after any product, it goes on to the same model."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

from kpca_dask import ExactKernelPCA
from kpca_dask.checkpoints.exact_checkpoint import SolveCheckpoint
from kpca_dask.engine.solve.eigensolver import leading_eigenpairs
from kpca_dask.errors import CheckpointMismatchError, ModelFormatError
from kpca_dask.exact.exact_fitting import fit_matrix_free
from kpca_dask.model.inputs import in_memory_fit_input

PARAMS = dict(n_components=4, gamma=0.05, eigen_solver="matrix-free")


class _Killed(Exception):
    """Stands for the process dying between two products."""


def _stop_after(count: int):
    seen = []

    def on_product(state):
        seen.append(state)
        if len(seen) == count:
            raise _Killed

    return on_product


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(300, 5))


def _fit(X, checkpoint, on_product=None):
    """The model-level fit (whose ``on_product`` a test can stop), as the estimator runs it."""
    params = ExactKernelPCA(**PARAMS).get_params()
    given = in_memory_fit_input(X, sample_dim=None, weights=None)
    return fit_matrix_free(given, params, checkpoint=checkpoint, on_product=on_product)


@pytest.mark.parametrize("stop_after", [1, 4, 5, 9])
def test_the_file_keeps_the_state_across_restarts(tmp_path, stop_after):
    """Saved after every product and read back, the state (a first block, a cycle's last
    product, the product after a restart, a later cycle) goes on to the uninterrupted result
    bitwise, and a restart leaves one cycle's group on disk."""
    values = 1.0 / np.arange(1, 301)
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(300, 300)))
    M = (Q * values) @ Q.T
    options = dict(oversample=2, depth=4)  # cycles of 4 products: several restarts
    whole = leading_eigenpairs(lambda V: M @ V, 300, 6, **options)
    path, identity = tmp_path / "solve.zarr", {"data": {"shape": [300, 300]}}
    saved = SolveCheckpoint.open(path, identity)
    stop = _stop_after(stop_after)

    def save(state):
        saved.save(state, np.ones(300), 1.0)
        stop(state)

    with pytest.raises(_Killed):
        leading_eigenpairs(lambda V: M @ V, 300, 6, on_product=save, **options)
    reopened = SolveCheckpoint.open(path, identity)
    assert len([name for name in zarr.open_group(path).group_keys()
                if name.startswith("cycle-")]) == 1
    resumed = leading_eigenpairs(lambda V: M @ V, 300, 6, state=reopened.state, **options)
    np.testing.assert_array_equal(resumed.vectors, whole.vectors)
    assert resumed.passes == whole.passes > 9
    np.testing.assert_array_equal(reopened.known[0], np.ones(300))


def test_a_fit_stopped_between_products_goes_on_from_its_checkpoint(tmp_path, X):
    """Killed after 5 products, the fit goes on with only the products left, and its model
    equals the uninterrupted one."""
    whole = ExactKernelPCA(**PARAMS).fit(X)
    path = tmp_path / "fit.ckpt"
    with pytest.raises(_Killed):
        _fit(X, path, _stop_after(5))
    made = []
    resumed = _fit(X, path, made.append)
    assert len(made) == whole.n_products_ - 5
    assert resumed.n_products == whole.n_products_
    np.testing.assert_allclose(resumed.model.eigenvalues, whole.eigenvalues_, rtol=1e-12)
    model = ExactKernelPCA(**PARAMS).fit(X, checkpoint=path)  # finished: no product left
    np.testing.assert_allclose(model.transform(X[:5]), whole.transform(X[:5]), atol=1e-12)


def test_a_checkpoint_of_another_fit_is_refused(tmp_path, X):
    path = tmp_path / "fit.ckpt"
    with pytest.raises(_Killed):
        _fit(X, path, _stop_after(2))
    with pytest.raises(CheckpointMismatchError, match=r"gamma is 0\.05 in the checkpoint but "
                                                      r"0\.1 now"):
        ExactKernelPCA(**{**PARAMS, "gamma": 0.1}).fit(X, checkpoint=path)


def test_a_damaged_checkpoint_is_refused_naming_the_array(tmp_path, X):
    """A block rewritten since it was saved fails its digest."""
    path = tmp_path / "fit.ckpt"
    with pytest.raises(_Killed):
        _fit(X, path, _stop_after(3))
    block = zarr.open_group(path)["cycle-000000/image-001"]
    block[0, 0] = block[0, 0] + 1.0
    with pytest.raises(ModelFormatError, match=r"fit\.ckpt: the array "
                                               r"'cycle-000000/image-001' differs"):
        ExactKernelPCA(**PARAMS).fit(X, checkpoint=path)


def test_a_group_that_is_not_a_checkpoint_is_refused(tmp_path, X):
    path = tmp_path / "other.zarr"
    zarr.open_group(path, mode="w").create_array("x", data=np.ones(3))
    with pytest.raises(CheckpointMismatchError, match="not a kpca-dask checkpoint"):
        ExactKernelPCA(**PARAMS).fit(X, checkpoint=path)
