"""BLAS threads inside the block functions: Dask threads x BLAS threads <= cores."""

from __future__ import annotations

import os
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest
from threadpoolctl import ThreadpoolController

from kpca_dask import KernelPCA, _parallel
from kpca_dask._parallel import SharedBlasLimit


def _blas_threads() -> int:
    return max(c.num_threads for c in ThreadpoolController().select(user_api="blas")
               .lib_controllers)


pytestmark = pytest.mark.skipif(
    not ThreadpoolController().select(user_api="blas").lib_controllers or _blas_threads() < 2,
    reason="needs a BLAS library that threadpoolctl can limit, running more than one thread")


def _eventually(condition, seconds=5.0) -> bool:
    # OpenBLAS may report a raised thread count set by another thread a moment late.
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _recording_kernel(seen: list):
    def linear(A, B):
        seen.append((_parallel._BLAS_LIMIT.active, _parallel.task_blas_threads()))
        return A @ B.T
    return linear


def test_lazy_transform_on_threads_caps_blas_inside_each_block():
    """A lazy transform computed by the user on the threaded scheduler runs every block
    inside the shared limit of cores // Dask threads BLAS threads, lifted afterwards."""
    X = np.random.default_rng(0).normal(size=(400, 3))
    seen: list = []
    model = KernelPCA(2, kernel=_recording_kernel(seen), n_landmarks=20, landmarks="uniform",
                      random_state=0).fit(X)
    seen.clear()
    before = _blas_threads()
    Y = model.transform(da.from_array(X, chunks=50))
    with dask.config.set(scheduler="threads", num_workers=2):
        Y.compute()
    assert len(seen) == 8
    assert all(active >= 1 for active, _ in seen)
    assert {threads for _, threads in seen} == {max(1, (os.cpu_count() or 1) // 2)}
    assert _parallel._BLAS_LIMIT.active == 0
    assert _eventually(lambda: _blas_threads() == before)


def test_shared_limit_holds_until_the_last_block_leaves():
    """Two overlapping blocks: the first to leave does not lift the limit under the other;
    the last to leave restores the threads there were before the first entered."""
    limit = SharedBlasLimit()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with limit(1):
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second():
        a_in.wait(10)
        with limit(1):
            b_in.set()
            a_out.wait(10)
            seen["after the first left"] = limit.active

    before = _blas_threads()
    workers = [threading.Thread(target=first), threading.Thread(target=second)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert seen["after the first left"] == 1
    assert limit.active == 0
    assert _eventually(lambda: _blas_threads() == before)


def test_main_thread_blocks_keep_every_core():
    """A block function called in the main thread (synchronous scheduler) sets no limit."""
    assert _parallel.task_blas_threads() is None
