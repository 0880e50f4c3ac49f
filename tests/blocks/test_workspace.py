"""A chain of the pass keeps its kernel block buffers from one task to the next."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from kpca_dask.blocks.statistics import merge_running, pass_block_rows, statistics_of_block
from kpca_dask.blocks.workspace import BlockWorkspace

GAMMA = {"gamma": 0.5}


def _chain(blocks, landmarks, dtype, running=None):
    reference = np.zeros(len(landmarks))
    offset = 0
    for block in blocks:
        running = statistics_of_block(running, block, offset, landmarks, "rbf", GAMMA, dtype,
                                      reference)
        offset += len(block)
    return running


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_next_task_of_a_chain_writes_into_the_same_buffers(rng, dtype):
    landmarks = rng.normal(size=(6, 3))
    running = _chain([rng.normal(size=(40, 3))], landmarks, dtype)
    buffer, scratch = running.workspace.arrays(40, 6, dtype)
    running = _chain([rng.normal(size=(40, 3)), rng.normal(size=(25, 3))], landmarks, dtype,
                     running)
    again, scratch_again = running.workspace.arrays(40, 6, dtype)
    assert np.shares_memory(again, buffer)
    assert (scratch is None) == (dtype == np.float64)
    assert scratch_again is scratch


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reused_buffers_give_the_sums_of_fresh_ones(rng, dtype):
    """Whatever a buffer held from the last block is overwritten before it is read."""
    landmarks = rng.normal(size=(6, 3))
    blocks = [rng.normal(size=(rows, 3)) for rows in (40, 25, 40)]
    kept = _chain(blocks, landmarks, dtype)
    fresh = None
    for offset, block in zip((0, 40, 65), blocks):
        fresh = statistics_of_block(fresh, block, offset, landmarks, "rbf", GAMMA, dtype,
                                    np.zeros(6), keep_buffers=False)  # as on a cluster
    np.testing.assert_array_equal(np.tril(kept.gram), np.tril(fresh.gram))
    np.testing.assert_array_equal(kept.column_sums, fresh.column_sums)


def test_a_block_is_made_in_the_held_buffer(rng):
    landmarks = rng.normal(size=(6, 3))
    running = _chain([rng.normal(size=(40, 3))], landmarks, np.float64)
    buffer, _ = running.workspace.arrays(40, 6, np.float64)
    buffer[...] = np.nan
    _chain([rng.normal(size=(40, 3))], landmarks, np.float64, running)
    assert np.isfinite(buffer).all()  # the second block's kernel rows were written there


def test_on_a_cluster_the_buffers_go_with_the_task(rng):
    running = statistics_of_block(None, rng.normal(size=(40, 3)), 0, rng.normal(size=(6, 3)),
                                  "rbf", GAMMA, np.float32, np.zeros(6), keep_buffers=False)
    assert running.workspace is None


def test_a_pickled_chain_leaves_its_workspace_behind(rng):
    running = _chain([rng.normal(size=(40, 3))], rng.normal(size=(6, 3)), np.float32)
    assert running.workspace is not None
    moved = pickle.loads(pickle.dumps(running))
    assert moved.workspace is None
    np.testing.assert_array_equal(moved.gram, running.gram)
    assert running.workspace is not None  # the sender's chain is unchanged


def test_merged_and_finished_chains_free_their_workspaces(rng):
    landmarks = rng.normal(size=(6, 3))
    first, second = (_chain([rng.normal(size=(30, 3))], landmarks, np.float64)
                     for _ in range(2))
    merged = merge_running(first, second)
    assert first.workspace is None and second.workspace is None
    merged.workspace = BlockWorkspace()
    merged.finished()
    assert merged.workspace is None


def test_a_larger_block_or_another_m_gets_new_buffers():
    workspace = BlockWorkspace()
    small, _ = workspace.arrays(10, 4, np.float64)
    larger, _ = workspace.arrays(20, 4, np.float64)
    assert larger.shape == (20, 4) and not np.shares_memory(small, larger)
    _, scratch = workspace.arrays(10, 4, np.float32)
    _, kept = workspace.arrays(30, 4, np.float32)  # more rows, same m: the product is kept
    assert kept is scratch
    assert workspace.arrays(3, 4, np.float32)[1] is None  # fewer rows than m: no product
    other_m, _ = workspace.arrays(20, 5, np.float64)
    assert other_m.shape == (20, 5)
    as_float32, scratch = workspace.arrays(20, 5, np.float32)
    assert as_float32.dtype == np.float32 and scratch.shape == (5, 5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float64_kernel_blocks_stay_cache_sized(rng, dtype):
    """float64 blocks go straight into G by one syrk, so a task cuts its rows into blocks of
    at most 8 MiB at m <= 1024 (pass_block_rows); float32 blocks (a scratch added into G
    per block) keep the task's whole share. The sums are the same either way."""
    m, n = 1000, 5000
    landmarks, x = rng.normal(size=(m, 3)), rng.normal(size=(n, 3))
    running = _chain([x], landmarks, dtype)
    held_rows = running.workspace._buffer.shape[0]
    if dtype == np.float64:
        assert pass_block_rows(m, dtype) == 1048 and held_rows == 1000  # five equal blocks
    else:
        assert held_rows == n
    K = np.exp(-GAMMA["gamma"] * ((x[:, None, :] - landmarks[None]) ** 2).sum(axis=2))
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(np.tril(running.gram), np.tril(K.T @ K), rtol=rtol,
                               atol=rtol * n)
    np.testing.assert_allclose(running.column_sums, K.sum(axis=0), rtol=rtol)
