"""Two real processes writing the same output or model path at once.

The outcome must be one writer's complete output, never a mixture: without
overwrite the second writer gets OutputExistsError; with overwrite both
succeed and the last one's output stays. A barrier via files holds each
writer's last block until both have written the rest, so that the writes
really overlap.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.io import open_array, write_array

_ARRAY_WRITER = r"""
import sys, time
from pathlib import Path
import dask, dask.array as da, numpy as np
from kpca_dask.errors import KPCAError
from kpca_dask.io import write_array

out, me, barrier, overwrite = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "1"

def block(x, block_info=None):
    if block_info[0]["chunk-location"][0] == 39:  # the last block waits for the other writer
        (barrier / f"ready-{me}").touch()
        deadline = time.monotonic() + 60
        while len(list(barrier.glob("ready-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    return np.full(x.shape, float(me))

X = da.zeros((4000, 5), chunks=(100, 5)).map_blocks(block, dtype=float)
try:
    with dask.config.set(scheduler="threads", num_workers=2):
        write_array(X, out, overwrite=overwrite)
    print("ok")
except KPCAError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""

_MODEL_WRITER = r"""
import sys, time
from pathlib import Path
import numpy as np
from kpca_dask import KernelPCA
from kpca_dask.errors import KPCAError

out, me, barrier, overwrite = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "1"
X = np.random.default_rng(me).normal(size=(300, 4))
model = KernelPCA(3, gamma=0.5, n_landmarks=40, random_state=me).fit(X)
(barrier / f"ready-{me}").touch()
while len(list(barrier.glob("ready-*"))) < 2:
    time.sleep(0.001)
try:
    model.save(out, overwrite=overwrite)
    print("ok")
except KPCAError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def _race(script: str, out, barrier, overwrite: bool) -> list[str]:
    """Run two writers of ``out`` at once; their one-line reports, writer 1 first."""
    barrier.mkdir()
    writers = [subprocess.Popen([sys.executable, "-c", script, str(out), str(me), str(barrier),
                                 "1" if overwrite else "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for me in (1, 2)]
    reports = []
    for writer in writers:
        stdout, stderr = writer.communicate(timeout=300)
        assert writer.returncode == 0, stderr
        reports.append(stdout.strip())
    return reports


def _leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("overwrite", [False, True])
def test_two_processes_writing_one_output(tmp_path, overwrite):
    """Two processes write an array to one path at once: the path holds one writer's
    complete output (every value that writer's); without overwrite the other is told
    with OutputExistsError, with overwrite (an old output there) both succeed."""
    out = tmp_path / "embedding.zarr"
    if overwrite:
        write_array(np.zeros((3, 5)), out)
    reports = _race(_ARRAY_WRITER, out, tmp_path / "barrier", overwrite)
    if overwrite:
        assert reports == ["ok", "ok"]
    else:
        assert sorted(reports)[0] == "OutputExistsError: " + (
            f"{out}: the output appeared while it was being written (another writer "
            "finished first); the new output was discarded.")
        assert sorted(reports)[1] == "ok"
    values = np.asarray(open_array(out))
    assert values.shape == (4000, 5)
    assert np.unique(values).size == 1 and values[0, 0] in (1.0, 2.0)
    if not overwrite:
        assert values[0, 0] == 1.0 + reports.index("ok")
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_two_processes_saving_one_model(tmp_path, overwrite):
    """Two processes save different models to one path at once: the file loads as one of
    them, every array of that one; the other writer succeeded or got OutputExistsError."""
    out = tmp_path / "model.zarr"
    if overwrite:
        KernelPCA(2, n_landmarks=5).fit(np.eye(6)).save(out)
    reports = _race(_MODEL_WRITER, out, tmp_path / "barrier", overwrite)
    assert "ok" in reports
    assert all(r == "ok" or r.startswith("OutputExistsError") for r in reports), reports
    loaded = kpca_dask.load(out)
    candidates = [KernelPCA(3, gamma=0.5, n_landmarks=40, random_state=me).fit(
        np.random.default_rng(me).normal(size=(300, 4))) for me in (1, 2)]
    matches = [all(np.array_equal(getattr(loaded, name), getattr(model, name))
                   for name in ("landmarks_", "projection_", "offset_", "eigenvalues_"))
               for model in candidates]
    assert sum(matches) == 1
    assert _leftovers(tmp_path) == []


def test_two_updates_of_one_model_lose_no_rows(tmp_path):
    """Two `kpca-dask update` processes add disjoint rows to one model at once: every update
    that reports success is in the final model (none silently dropped by the other's
    write); one that lost the race exits 2 with ConcurrentWriteError."""
    import zarr

    X = np.random.default_rng(0).normal(size=(9000, 4))
    zarr.create_array(str(tmp_path / "data.zarr"), data=X, chunks=(500, 4))
    KernelPCA(2, gamma=0.5, n_landmarks=30, random_state=0).partial_fit(
        str(tmp_path / "data.zarr"), rows=(0, 1000)).save(tmp_path / "model.zarr")
    ranges = ["1000:5000", "5000:9000"]
    updates = [subprocess.Popen([sys.executable, "-m", "kpca_dask", "update", "model.zarr",
                                 "data.zarr", "--rows", rows, "--scheduler", "threads"],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for rows in ranges]
    outcomes = [(update.wait(timeout=300), update.stderr.read()) for update in updates]
    succeeded = [rows for rows, (status, _) in zip(ranges, outcomes) if status == 0]
    for status, stderr in outcomes:
        assert status == 0 or "was changed by another process" in stderr, stderr
    model = kpca_dask.load(tmp_path / "model.zarr")
    [source] = model.row_provenance_["sources"]
    expected = {(): [[0, 1000]], ("1000:5000",): [[0, 5000]],
                ("5000:9000",): [[0, 1000], [5000, 9000]], tuple(ranges): [[0, 9000]]}
    assert source["rows"] == expected[tuple(succeeded)], outcomes
    assert model.n_samples_fit_ == 1000 + 4000 * len(succeeded)
    assert _leftovers(tmp_path) == []


def test_a_model_read_while_another_update_swaps_it_in_is_a_concurrent_write(tmp_path):
    """A model read half from one save and half from the next (an update that swapped its
    result in meanwhile) is reported as a concurrent write, so the update can be run again;
    the same mixture with the first save's root metadata is damage, as it is."""
    import shutil

    from kpca_dask.errors import ConcurrentWriteError, ModelFormatError
    from kpca_dask.io.replacing import read_unchanged, version_of

    X = np.random.default_rng(0).normal(size=(400, 4))
    first, second = tmp_path / "first.zarr", tmp_path / "second.zarr"
    model = KernelPCA(2, gamma=0.5, n_landmarks=30, random_state=0).fit(X[:200])
    model.save(first)
    model.partial_fit(X[200:]).save(second)
    version = version_of(first)
    mixed = tmp_path / "model.zarr"
    shutil.copytree(first, mixed)
    shutil.rmtree(mixed / "statistics_gram")
    shutil.copytree(second / "statistics_gram", mixed / "statistics_gram")
    with pytest.raises(ModelFormatError, match="statistics_gram"):
        read_unchanged(kpca_dask.load, mixed, version)
    shutil.copy(second / "zarr.json", mixed / "zarr.json")
    with pytest.raises(ConcurrentWriteError, match="was changed by another process"):
        read_unchanged(kpca_dask.load, mixed, version)
