"""The commands for growing models: resolve, update, merge, info and the user errors run
in-process through :func:`kpca_dask.cli.main`; an update killed half-way, in a real
subprocess."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import KernelPCA, cli

P, M = 4, 30


def run(*args, cwd, capsys):
    """``kpca-dask ARGS`` in this process, in ``cwd``, as a finished subprocess is seen."""
    return subprocess.CompletedProcess(args, *main(*args, cwd=cwd, capsys=capsys))


def main(*args, cwd, capsys):
    """``kpca-dask ARGS`` in this process: (exit status, stdout, stderr)."""
    before = os.getcwd()
    os.chdir(cwd)
    try:
        status = cli.main([str(a) for a in args])
    finally:
        os.chdir(before)
    out, err = capsys.readouterr()
    return status, out, err


def assert_user_error(done, match):
    """Exit status 2 and one ``kpca-dask: error: ...`` line, no traceback."""
    status, _, err = done
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and match in lines[0], err


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store of 1100 rows whose first 1000 were fitted: the last 100 were appended since."""
    where = tmp_path_factory.mktemp("grow")
    X = np.random.default_rng(0).normal(size=(1100, P))
    zarr.create_array(str(where / "data.zarr"), data=X, chunks=(250, P))
    model = KernelPCA(n_components=3, gamma=0.3, n_landmarks=M, random_state=0).fit(X[:1000])
    model.save(where / "model.zarr")
    return where, X, model


def test_info_shows_another_n_components_without_changing_the_model(store, capsys):
    """`info --n-components 0.9` prints the re-solved choice; the file keeps its own."""
    where, X, model = store
    status, out, err = main("info", "model.zarr", "--n-components", 0.9, "--json", cwd=where,
                            capsys=capsys)
    assert status == 0, err
    summary = json.loads(out)
    expected = KernelPCA(n_components=0.9, gamma=0.3, landmarks=model.landmarks_).fit(X[:1000])
    assert summary["n_components"] == expected.n_components_ > 3
    assert summary["re_solved_for"] == 0.9 and summary["statistics_kept"]
    assert kpca_dask.load(where / "model.zarr").n_components_ == 3


def test_resolve_writes_the_re_solved_model(store, capsys):
    """`resolve --n-components all --out NEW` writes what set_n_components(None) gives."""
    where, X, model = store
    done = run("resolve", "model.zarr", "--n-components", "all", "--out", "all.zarr", cwd=where,
               capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "wrote all.zarr: re-solved for n_components=all" in done.stdout
    resolved = kpca_dask.load(where / "all.zarr")
    expected = kpca_dask.load(where / "model.zarr").set_n_components(None)
    np.testing.assert_array_equal(resolved.projection_, expected.projection_)
    assert resolved.n_components is None


def test_update_adds_the_appended_rows(store, tmp_path, capsys):
    """`update MODEL DATA --rows 1000:` equals a fit on all 1100 rows with the same landmarks."""
    where, X, model = store
    done = run("update", where / "model.zarr", where / "data.zarr", "--rows", "1000:",
               "--out", "updated.zarr", "--scheduler", "threads", cwd=tmp_path, capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "added rows 1000:1100" in done.stdout and "1100 rows seen in all" in done.stdout
    updated = kpca_dask.load(tmp_path / "updated.zarr")
    refit = KernelPCA(n_components=3, gamma=0.3, landmarks=model.landmarks_).fit(X)
    np.testing.assert_allclose(updated.eigenvalues_, refit.eigenvalues_, rtol=1e-10)
    assert updated.n_samples_fit_ == 1100


def test_update_refuses_an_empty_row_range(store, capsys):
    """A --rows range that selects nothing is a one-line user error."""
    where, _, _ = store
    done = main("update", "model.zarr", "data.zarr", "--rows", "1100:", "--scheduler", "threads",
                cwd=where, capsys=capsys)
    assert_user_error(done, "--rows 1100:None selects no rows of data.zarr, which has 1100")


def test_merge_round_trip(store, tmp_path, capsys):
    """`merge` of two shards writes what kpca_dask.merge gives."""
    where, X, model = store
    shard = KernelPCA(n_components=3, gamma=0.3, landmarks=model.landmarks_).fit(X[1000:])
    shard.save(tmp_path / "shard.zarr")
    done = run("merge", where / "model.zarr", "shard.zarr", "--out", "merged.zarr",
               cwd=tmp_path, capsys=capsys)
    assert done.returncode == 0, done.stderr
    merged = kpca_dask.load(tmp_path / "merged.zarr")
    np.testing.assert_array_equal(merged.eigenvalues_,
                                  kpca_dask.merge([model, shard]).eigenvalues_)


def test_merge_refuses_another_gamma(store, tmp_path, capsys):
    """Shards fitted with another gamma are refused, named by their paths; nothing written."""
    where, X, model = store
    for name, gamma in (("shard.zarr", 0.3), ("other.zarr", 0.2)):
        KernelPCA(n_components=3, gamma=gamma, landmarks=model.landmarks_).fit(
            X[1000:]).save(tmp_path / name)
    done = main("merge", "shard.zarr", "other.zarr", "--out", "bad.zarr", cwd=tmp_path,
                capsys=capsys)
    assert_user_error(done, "other.zarr cannot be merged with shard.zarr: kernel parameter "
                            "gamma is 0.3 in one model but 0.2 in the other")
    assert not (tmp_path / "bad.zarr").exists()


def test_update_of_a_version_one_file_is_refused(store, tmp_path, capsys):
    """A version-1 model file: info says it keeps no statistics, update refuses it."""
    where, _, model = store
    model.save(tmp_path / "v1.zarr")
    group = zarr.open_group(str(tmp_path / "v1.zarr"), mode="r+")
    for name in [n for n in group.array_keys() if n.startswith("statistics_")]:
        del group[name]
    attrs = group.attrs.asdict()
    del attrs["statistics"]
    attrs.pop("checksums")  # files of that version had no digests
    group.attrs.put({**attrs, "format_version": 1})
    assert "no statistics kept" in main("info", "v1.zarr", cwd=tmp_path, capsys=capsys)[1]
    done = main("update", "v1.zarr", where / "data.zarr", "--scheduler", "threads",
                cwd=tmp_path, capsys=capsys)
    assert_user_error(done, "Cannot add rows to this model: it keeps no pass statistics")


@pytest.mark.faults
def test_update_killed_half_way_leaves_the_model_intact(tmp_path):
    """SIGKILL while `update` computes: the model file is the old one, and loads."""
    X = np.random.default_rng(1).normal(size=(200_000, P))
    zarr.create_array(str(tmp_path / "big.zarr"), data=X, chunks=(10_000, P))
    model = KernelPCA(n_components=3, gamma=0.3, n_landmarks=300, random_state=0).fit(X[:2000])
    model.save(tmp_path / "model.zarr")
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    process = subprocess.Popen(
        [sys.executable, "-m", "kpca_dask", "update", "model.zarr", "big.zarr", "--scheduler",
         "threads", "--progress"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    seen, deadline = b"", time.monotonic() + 120
    try:
        # The progress bar appears once the pass has started: kill it then.
        while b"% Completed" not in seen and time.monotonic() < deadline:
            if select.select([process.stderr], [], [], 1.0)[0]:
                chunk = os.read(process.stderr.fileno(), 4096)
                if not chunk:
                    break
                seen += chunk
        assert b"% Completed" in seen and b"100% Completed" not in seen, seen
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL
    loaded = kpca_dask.load(tmp_path / "model.zarr")
    assert loaded.n_samples_fit_ == 2000
    np.testing.assert_array_equal(loaded.statistics_.gram, model.statistics_.gram)
    np.testing.assert_array_equal(loaded.projection_, model.projection_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.zarr", "model.zarr"]
