"""Checkpointed fits: interrupted for real (SIGKILL of the client or the scheduler),
resumed, and compared with an uninterrupted fit; checkpoints of other fits refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

from kpca_dask import KernelPCA
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.checkpoints.fit_checkpoint import MAX_SEGMENTS
from kpca_dask.errors import CheckpointMismatchError, ModelFormatError, NonFiniteInputError

TESTS = Path(__file__).resolve().parent
BLOCK_ROWS = 400
N_BLOCKS = 100
N_LANDMARKS = 150
PARAMS = {"n_components": 8, "n_landmarks": N_LANDMARKS, "random_state": 0}
_calls = {"blocks": 0}
_calls_lock = threading.Lock()


def slow_rbf(A, B, gamma=0.5):
    """rbf that sleeps per data block when $KPCA_TEST_BLOCK_DELAY is set, so a fit
    in another process can be killed half-way; counts the data blocks it sees."""
    if A.shape[0] == BLOCK_ROWS:
        with _calls_lock:
            _calls["blocks"] += 1
        time.sleep(float(os.environ.get("KPCA_TEST_BLOCK_DELAY", "0")))
    return pairwise_kernel(A, B, "rbf", gamma=gamma)


@pytest.fixture
def data_path(tmp_path) -> str:
    """A Zarr array of N_BLOCKS row blocks on disk, readable by other processes."""
    X = np.random.default_rng(3).normal(size=(BLOCK_ROWS * N_BLOCKS, 5))
    path = str(tmp_path / "X.zarr")
    zarr.create_array(path, data=X, chunks=(BLOCK_ROWS, 5))
    return path


def _state(checkpoint: str):
    """(finished segments, number of segments) of the checkpoint's current state."""
    meta = zarr.open_group(checkpoint, mode="r").attrs["kpca_dask_checkpoint"]
    if meta["state"] is None:
        return 0, meta["n_segments"]
    finished = zarr.open_group(checkpoint, mode="r")[meta["state"]]["finished"][:]
    return int(finished.sum()), meta["n_segments"]


def _wait_for_progress(checkpoint: str, process, timeout=120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the fit ended before it could be interrupted"
        try:
            if _state(checkpoint)[0] >= 1:
                return
        except (FileNotFoundError, KeyError, json.JSONDecodeError):
            pass  # not created yet, or its metadata read while the fit writes it
        time.sleep(0.05)
    raise AssertionError("no segment was saved in time")


def _fit_script(data_path, checkpoint, scheduler_file=None) -> str:
    connect = (f"from distributed import Client; client = Client(scheduler_file="
               f"{scheduler_file!r}, timeout=20)" if scheduler_file else "")
    return textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        import dask.array as da
        from kpca_dask import KernelPCA
        from test_checkpoints import PARAMS, slow_rbf
        {connect}
        KernelPCA(kernel=slow_rbf, **PARAMS).fit(da.from_zarr({data_path!r}),
                                                  checkpoint={checkpoint!r})
    """)


def _finished_blocks(checkpoint: str) -> int:
    group = zarr.open_group(checkpoint, mode="r")
    meta = group.attrs["kpca_dask_checkpoint"]
    finished = group[meta["state"]]["finished"][:]
    size = meta["segment_blocks"]
    sizes = [min(size, N_BLOCKS - i * size) for i in range(meta["n_segments"])]
    return int(np.dot(finished, sizes))


def _resume_and_compare(data_path, checkpoint):
    finished_before, n_segments = _state(checkpoint)
    assert 0 < finished_before < n_segments
    blocks_saved = _finished_blocks(checkpoint)
    X = da.from_zarr(data_path)
    _calls["blocks"] = 0
    resumed = KernelPCA(kernel=slow_rbf, **PARAMS).fit(X, checkpoint=checkpoint)
    blocks_in_resume = _calls["blocks"]
    uninterrupted = KernelPCA(kernel=slow_rbf, **PARAMS).fit(X)
    np.testing.assert_allclose(resumed.eigenvalues_, uninterrupted.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(resumed.projection_, uninterrupted.projection_, rtol=1e-7,
                               atol=1e-9)
    assert blocks_in_resume == N_BLOCKS - blocks_saved  # no finished block is redone
    assert _state(checkpoint)[0] == n_segments


@pytest.mark.faults
@pytest.mark.slow
def test_client_killed_mid_fit_resumes_to_the_same_model(data_path, tmp_path):
    """A fit in a subprocess is SIGKILLed once some segments are saved; fitting again
    with the checkpoint computes only the unfinished blocks and gives the
    eigenvalues of an uninterrupted fit to 1e-10."""
    checkpoint = str(tmp_path / "fit.ckpt")
    env = {**os.environ, "KPCA_TEST_BLOCK_DELAY": "0.1"}
    process = subprocess.Popen([sys.executable, "-c", _fit_script(data_path, checkpoint)],
                               env=env)
    try:
        _wait_for_progress(checkpoint, process)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    _resume_and_compare(data_path, checkpoint)


@pytest.mark.faults
@pytest.mark.slow
def test_scheduler_killed_mid_fit_resumes_to_the_same_model(data_path, tmp_path):
    """With a `dask scheduler` and `dask worker` in their own processes, the scheduler
    is SIGKILLed mid-fit: the client's fit fails (it does not hang), and the checkpoint
    then resumes to the eigenvalues of an uninterrupted fit."""
    checkpoint = str(tmp_path / "fit.ckpt")
    scheduler_file = str(tmp_path / "scheduler.json")
    env = {**os.environ, "KPCA_TEST_BLOCK_DELAY": "0.1",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    bin_dir = Path(sys.executable).parent
    started = []
    try:
        scheduler = subprocess.Popen(
            [str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--scheduler-file", scheduler_file],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(scheduler)
        deadline = time.monotonic() + 60
        while not Path(scheduler_file).exists():
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        started.append(subprocess.Popen(
            [str(bin_dir / "dask"), "worker", "--scheduler-file", scheduler_file,
             "--nthreads", "1", "--nworkers", "2", "--no-dashboard", "--death-timeout", "10",
             "--host", "127.0.0.1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))  # its nannies and workers share its process group
        client = subprocess.Popen(
            [sys.executable, "-c", _fit_script(data_path, checkpoint, scheduler_file)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(client)
        _wait_for_progress(checkpoint, client)
        scheduler.send_signal(signal.SIGKILL)
        scheduler.wait()
        try:
            _, stderr = client.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the client hung after the scheduler died")
        assert client.returncode != 0
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
        workers = started[1] if len(started) > 1 else None
        if workers is not None:
            try:
                os.killpg(workers.pid, signal.SIGKILL)  # nannies and worker processes
            except ProcessLookupError:
                pass
    _resume_and_compare(data_path, checkpoint)


def test_finished_checkpoint_refits_without_a_pass(data_path, tmp_path):
    """A completed checkpoint holds the whole pass: fitting again reads no data block,
    and a different n_components (not part of the identity) is allowed."""
    checkpoint = str(tmp_path / "fit.ckpt")
    X = da.from_zarr(data_path)
    first = KernelPCA(kernel=slow_rbf, **PARAMS).fit(X, checkpoint=checkpoint)
    _calls["blocks"] = 0
    again = KernelPCA(kernel=slow_rbf, **{**PARAMS, "n_components": 3}).fit(
        X, checkpoint=checkpoint)
    assert _calls["blocks"] == 0
    # Same statistics; q = 3 and q = 5 leading eigenpairs differ only in rounding.
    np.testing.assert_allclose(again.eigenvalues_, first.eigenvalues_[:3], rtol=1e-13)


def test_checkpoint_storage_does_not_grow_with_blocks(tmp_path):
    """The checkpoint keeps one m x m running total, not one per block or segment:
    a pass of 400 blocks leaves one state group with one Gram matrix."""
    X = da.from_array(np.random.default_rng(0).normal(size=(4000, 3)), chunks=(10, 3))
    checkpoint = tmp_path / "fit.ckpt"
    KernelPCA(n_components=2, n_landmarks=40, random_state=0).fit(X, checkpoint=checkpoint)
    group = zarr.open_group(str(checkpoint), mode="r")
    states = [name for name in group.group_keys() if name.startswith("state-")]
    assert len(states) == 1
    assert group[states[0]]["statistics_gram"].shape == (40, 40)
    assert group.attrs["kpca_dask_checkpoint"]["n_segments"] <= MAX_SEGMENTS


@pytest.mark.parametrize(("change", "match"), [
    ({"gamma": 0.3}, r"kernel_params\.gamma is 0\.5 .* but 0\.3"),
    ({"dtype": "float32"}, r"dtype is \"float64\" .* but \"float32\""),
    ({"n_landmarks": 60}, r"landmarks\.n_landmarks is 50 .* but 60"),
    ({"random_state": 1}, r"landmarks\.random_state is 0 .* but 1"),
    ({"kernel": "laplacian"}, r"kernel is \"rbf\" .* but \"laplacian\""),
])
def test_checkpoint_of_other_parameters_is_refused(tmp_path, change, match):
    """Resuming with other kernel, gamma, dtype or landmarks raises
    CheckpointMismatchError naming what differs."""
    X = np.random.default_rng(0).normal(size=(500, 3))
    checkpoint = tmp_path / "fit.ckpt"
    params = {"n_components": 2, "n_landmarks": 50, "random_state": 0, "gamma": 0.5}
    KernelPCA(**params).fit(X, checkpoint=checkpoint)
    with pytest.raises(CheckpointMismatchError, match=match):
        KernelPCA(**{**params, **change}).fit(X, checkpoint=checkpoint)


@pytest.mark.parametrize(("other", "match"), [
    (lambda X: X + 1.0, r"data\.name"),
    (lambda X: X[:-100], r"data\.shape is \[1000, 3\] .* but \[900, 3\]"),
    (lambda X: X.rechunk((300, 3)), r"data\.row_chunks_sha256"),
    (lambda X: X.astype(np.float32), r"data\.dtype is \"float64\" .* but \"float32\""),
])
def test_checkpoint_of_other_data_is_refused(tmp_path, other, match):
    """Other values, rows, chunking or dtype of the data are refused by name."""
    X = da.from_array(np.random.default_rng(0).normal(size=(1000, 3)), chunks=(250, 3))
    checkpoint = tmp_path / "fit.ckpt"
    KernelPCA(n_components=2, n_landmarks=50, random_state=0).fit(X, checkpoint=checkpoint)
    with pytest.raises(CheckpointMismatchError, match=match):
        KernelPCA(n_components=2, n_landmarks=50, random_state=0).fit(
            other(X), checkpoint=checkpoint)


def test_a_path_that_is_not_a_checkpoint_is_refused_untouched(tmp_path, data_path):
    """Pointing checkpoint= at other data raises and leaves that data as it was."""
    before = sorted(p.name for p in Path(data_path).iterdir())
    with pytest.raises(CheckpointMismatchError, match="is not a kpca-dask checkpoint"):
        KernelPCA(n_components=2, n_landmarks=50).fit(
            np.random.default_rng(0).normal(size=(100, 2)), checkpoint=data_path)
    assert sorted(p.name for p in Path(data_path).iterdir()) == before


def test_unknown_checkpoint_version_is_refused(tmp_path):
    """A checkpoint from a future format version raises ModelFormatError."""
    X = np.random.default_rng(0).normal(size=(300, 3))
    checkpoint = tmp_path / "fit.ckpt"
    KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(X, checkpoint=checkpoint)
    group = zarr.open_group(str(checkpoint), mode="r+")
    group.attrs["kpca_dask_checkpoint"] = {**group.attrs["kpca_dask_checkpoint"],
                                           "format_version": 99}
    with pytest.raises(ModelFormatError, match="format version 99"):
        KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(X, checkpoint=checkpoint)


def test_bad_data_leave_no_checkpoint(tmp_path):
    """A pass that finds NaN raises NonFiniteInputError and removes the checkpoint it
    created, which could never be resumed once the data are fixed."""
    X = np.random.default_rng(0).normal(size=(1000, 3))
    X[700, 1] = np.nan
    Xd = da.from_array(X, chunks=(100, 3))
    checkpoint = tmp_path / "fit.ckpt"
    with pytest.raises(NonFiniteInputError, match="row 700"):
        KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(
            Xd, checkpoint=checkpoint)
    assert not checkpoint.exists()


def test_checkpointed_fit_on_a_process_cluster_matches(tmp_path):
    """On a distributed LocalCluster (futures, saved as each segment completes) the
    checkpointed fit equals the plain one."""
    from distributed import Client, LocalCluster

    X = da.from_array(np.random.default_rng(0).normal(size=(4000, 3)), chunks=(200, 3))
    plain = KernelPCA(n_components=4, n_landmarks=100, random_state=0).fit(X)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        saved = KernelPCA(n_components=4, n_landmarks=100, random_state=0).fit(
            X, checkpoint=tmp_path / "fit.ckpt")
    np.testing.assert_allclose(saved.eigenvalues_, plain.eigenvalues_, rtol=1e-10)
    assert _state(str(tmp_path / "fit.ckpt")) == (3, 3)


def _fails_in_the_pass(block, checkpoint, fail_block, block_info=None):
    """Raise on row block ``fail_block`` once the checkpoint holds landmarks (the pass
    has begun) while the file ``<checkpoint>.fail`` exists; otherwise the block."""
    if (block_info[0]["chunk-location"][0] == fail_block
            and Path(checkpoint, "landmarks").exists() and Path(checkpoint + ".fail").exists()):
        raise RuntimeError("block failed")
    return block


def test_unseeded_median_gamma_resumes_with_the_stored_gamma(tmp_path):
    """With gamma="median" and random_state=None a fit that died half-way resumes: the
    identity records the rule, and the resumed model uses the gamma and landmarks the
    first try drew, giving the model a plain fit with them gives."""
    import dask

    checkpoint = str(tmp_path / "fit.ckpt")
    base = da.from_array(np.random.default_rng(0).normal(size=(4000, 3)), chunks=(100, 3))
    X = base.map_blocks(_fails_in_the_pass, checkpoint=checkpoint, fail_block=39,
                        dtype=base.dtype)
    params = {"n_components": 3, "n_landmarks": 60, "gamma": "median", "landmarks": "uniform"}
    Path(checkpoint + ".fail").touch()
    with dask.config.set(num_workers=2), pytest.raises(RuntimeError, match="block failed"):
        KernelPCA(**params).fit(X, checkpoint=checkpoint)
    finished, n_segments = _state(checkpoint)
    assert 0 < finished < n_segments
    stored_gamma = zarr.open_group(checkpoint, mode="r").attrs[
        "kpca_dask_checkpoint"]["kernel_params"]["gamma"]
    Path(checkpoint + ".fail").unlink()
    resumed = KernelPCA(**params).fit(X, checkpoint=checkpoint)
    assert resumed.gamma_ == stored_gamma
    plain = KernelPCA(n_components=3, n_landmarks=60, gamma=resumed.gamma_,
                      landmarks=resumed.landmarks_).fit(base)
    np.testing.assert_allclose(resumed.eigenvalues_, plain.eigenvalues_, rtol=1e-10)


def test_gamma_rule_is_part_of_the_identity(tmp_path):
    """A checkpoint of gamma="median" is refused to a fit with a numeric gamma, by name."""
    X = np.random.default_rng(0).normal(size=(500, 3))
    params = {"n_components": 2, "n_landmarks": 30, "random_state": 0}
    KernelPCA(gamma="median", **params).fit(X, checkpoint=tmp_path / "fit.ckpt")
    with pytest.raises(CheckpointMismatchError, match=r'kernel_params\.gamma is "median"'):
        KernelPCA(gamma=0.5, **params).fit(X, checkpoint=tmp_path / "fit.ckpt")


def test_resumed_automatic_fit_keeps_its_landmark_path(tmp_path):
    """n_landmarks="auto" stores its growth path; a fit from the finished checkpoint
    reports the same landmark_path_."""
    X = np.random.default_rng(0).normal(size=(1500, 3))
    params = {"n_components": 2, "n_landmarks": "auto", "tol": 0.05, "gamma": 0.5,
              "landmarks": "uniform", "random_state": 0}
    first = KernelPCA(**params).fit(X, checkpoint=tmp_path / "fit.ckpt")
    again = KernelPCA(**params).fit(X, checkpoint=tmp_path / "fit.ckpt")
    assert first.landmark_path_ and again.landmark_path_ == first.landmark_path_


@pytest.fixture
def two_stores(tmp_path):
    """Two directories each holding a different X.zarr of the same shape."""
    dirs = []
    for seed in (1, 2):
        directory = tmp_path / f"d{seed}"
        directory.mkdir()
        zarr.create_array(str(directory / "X.zarr"), chunks=(100, 3),
                          data=np.random.default_rng(seed).normal(size=(400, 3)))
        dirs.append(directory)
    return dirs


def test_relative_zarr_path_from_another_directory_is_refused(two_stores, tmp_path,
                                                              monkeypatch):
    """"X.zarr" typed in two working directories is two stores: the second is refused."""
    params = {"n_components": 2, "n_landmarks": 30, "random_state": 0}
    checkpoint = tmp_path / "fit.ckpt"
    monkeypatch.chdir(two_stores[0])
    KernelPCA(**params).fit("X.zarr", checkpoint=checkpoint)
    monkeypatch.chdir(two_stores[1])
    with pytest.raises(CheckpointMismatchError, match=r"data\.zarr"):
        KernelPCA(**params).fit("X.zarr", checkpoint=checkpoint)


@pytest.mark.parametrize("spelling", ["absolute", "dotted", "symlink", "from_zarr"])
def test_one_zarr_store_spelled_another_way_resumes(two_stores, tmp_path, monkeypatch,
                                                    spelling):
    """The same store reached by an absolute path, a path with "..", a symlink or
    da.from_zarr resumes the checkpoint made through a relative path."""
    params = {"n_components": 2, "n_landmarks": 30, "random_state": 0}
    checkpoint = tmp_path / "fit.ckpt"
    store = two_stores[0] / "X.zarr"
    monkeypatch.chdir(two_stores[0])
    first = KernelPCA(**params).fit("X.zarr", checkpoint=checkpoint)
    (tmp_path / "link").symlink_to(two_stores[0])
    other = {"absolute": str(store), "dotted": str(tmp_path / "d2" / ".." / "d1" / "X.zarr"),
             "symlink": str(tmp_path / "link" / "X.zarr"),
             "from_zarr": da.from_zarr(str(store))}[spelling]
    again = KernelPCA(**params).fit(other, checkpoint=checkpoint)
    np.testing.assert_array_equal(again.eigenvalues_, first.eigenvalues_)


def _scaled_rbf(A, B, gamma=1.0, scale=1.0):
    return scale * pairwise_kernel(A, B, "rbf", gamma=gamma)


def test_partial_kernels_differ_by_their_arguments(tmp_path):
    """functools.partial kernels with other arguments are other kernels: refused."""
    import functools

    X = np.random.default_rng(0).normal(size=(300, 3))
    params = {"n_components": 2, "n_landmarks": 30, "random_state": 0}
    KernelPCA(kernel=functools.partial(_scaled_rbf, scale=1.0), **params).fit(
        X, checkpoint=tmp_path / "fit.ckpt")
    with pytest.raises(CheckpointMismatchError, match=r"kernel\.keywords\.scale is 1\.0"):
        KernelPCA(kernel=functools.partial(_scaled_rbf, scale=2.0), **params).fit(
            X, checkpoint=tmp_path / "fit.ckpt")


def test_unrecordable_kernel_parameter_is_refused(tmp_path):
    """A kernel parameter with no exact JSON form is refused before anything is written."""
    from kpca_dask.errors import InvalidParameterError

    X = np.random.default_rng(0).normal(size=(300, 3))
    with pytest.raises(InvalidParameterError, match="cannot be recorded in a checkpoint"):
        KernelPCA(kernel=_scaled_rbf, kernel_params={"scale": object()}, n_landmarks=30).fit(
            X, checkpoint=tmp_path / "fit.ckpt")
    assert not (tmp_path / "fit.ckpt").exists()
