"""Every public path within a worker's modelled memory, on data larger than a worker.

Two worker processes with a real ``memory_limit`` run, on the same cluster and
the same rows (a Zarr array on disk, and the same rows as a dask DataFrame
whose partition lengths are unknown): fit with each landmark method, the
default fit (median gamma, k-means landmarks) with the pre-image map, median
gamma and automatic m; transform to Zarr and to Parquet with a key column;
score_samples; reconstruction_error; inverse_transform to Zarr; partial_fit on
halves and merge; set_n_components; the command line's fit and transform. For
each path it asserts that no worker paused or was restarted (worker logs,
process ids, and the worker's status sampled every 20 ms), that each worker's
modelled peak (its code, :data:`kpca_dask._memory.WORKER_CODE_BYTES`, plus
what it grew by at its exact peak over its own baseline, measured at the start: a worker's
resident size moves with the page cache, its growth does not) stayed within
60 % of its limit (docs/design.md §14), that this process (the client) grew by
at most 0.5 GiB, and that the results equal the fit on the threaded scheduler.

The default suite's data are small: 0.15 GB (17 chunks of 8 MiB) on workers of 1.25 GiB.
``KPCA_DASK_BUDGET_BYTES``, ``KPCA_DASK_BUDGET_FEATURES`` and
``KPCA_DASK_BUDGET_WORKER`` set the data's size, its features and each worker's
limit (2e9, 32 and 1.25GiB: the figures of docs/guide/memory.md). Run alone with
``pytest -m budget -s``: ``-s`` prints a table per path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import dask
import dask.array as da
import numpy as np
import pytest
from _clusters import assert_within_model, load_library, process_client, resident_bytes
from dask.utils import parse_bytes
from distributed import Client

from kpca_dask import KernelPCA, load, merge, transform_table, write_table
from kpca_dask._memory import WORKER_CODE_BYTES
from kpca_dask.diagnostics import MemoryWatch, watch_workers
from kpca_dask.io import open_array, write_array

pytestmark = [pytest.mark.slow, pytest.mark.budget]

N_FEATURES = int(os.environ.get("KPCA_DASK_BUDGET_FEATURES", 256))
ROWS_PER_CHUNK = 2**21 // N_FEATURES  # 8 MiB float32 chunks
CHUNK_BYTES = ROWS_PER_CHUNK * N_FEATURES * 4
N_LANDMARKS = 200
#: What a worker may hold in results during a fit's pass: four chunks (one in each of
#: its chains and one or two in transfer), its chain's m x m sums and the shared
#: landmarks; never chunks read ahead of the chains (measured at 88 MiB and more when
#: the reads were tasks of their own). The sums and landmarks are counted on their own:
#: a worker holding four partitions of the table and its sums (32.3 MiB) once failed a
#: budget of four chunks only.
PASS_HELD = 4 * CHUNK_BYTES + 8 * N_LANDMARKS**2 + 8 * N_LANDMARKS * N_FEATURES
DATA_BYTES = int(float(os.environ.get("KPCA_DASK_BUDGET_BYTES", 1.5e8)))
#: Each worker's memory_limit: 60 % of it less a worker's code (450 MiB) is the room its
#: tasks are modelled in, 318 MiB at 1.25 GiB.
WORKER_LIMIT = parse_bytes(os.environ.get("KPCA_DASK_BUDGET_WORKER", "1.25 GiB"))
CLIENT_GROWTH_LIMIT = 0.5 * 2**30
N_ROWS = DATA_BYTES // (4 * N_FEATURES) // ROWS_PER_CHUNK * ROWS_PER_CHUNK
PARAMS = dict(n_components=5, kernel="rbf", gamma=1 / N_FEATURES, n_landmarks=N_LANDMARKS,
              landmarks="uniform", dtype="float32", random_state=0)

FIGURES: list[tuple] = []


# -- what is watched ---------------------------------------------------------



class _Budget:
    """Runs each path under watch and asserts it stayed within the model."""

    def __init__(self, client: Client):
        self.client = client
        self.pids = client.run(os.getpid)
        # Each worker's own baseline, once its code is loaded: the figure its growth is
        # measured from (the page cache moves it, not the growth).
        self.baselines = client.run(resident_bytes)

    def run(self, name: str, path, *args, held_at_most: int | None = None, **kwargs):
        """``path(*args, **kwargs)`` under watch; ``held_at_most``: the most bytes of task
        results (chunks read ahead, partial sums) a worker may hold meanwhile."""
        log_lengths = {w: len(lines) for w, lines in self.client.get_worker_logs().items()}
        with watch_workers(self.client) as workers:
            client = MemoryWatch()
            started = time.perf_counter()
            result = path(*args, **kwargs)
            seconds = time.perf_counter() - started
            client.stop()
        growth = max(w.peak - self.baselines[a] for a, w in workers.items())
        FIGURES.append((name, seconds, min(self.baselines.values()) / 2**30,
                        max(w.peak for w in workers.values()) / 2**30, growth / 2**30,
                        (WORKER_CODE_BYTES + growth) / WORKER_LIMIT,
                        client.above_start / 2**30))
        self.check(name, workers, log_lengths, client)
        most = max(w.most_held for w in workers.values())
        assert held_at_most is None or most <= held_at_most, (
            f"{name}: a worker held {most / 2**20:.0f} MiB of results (chunks read ahead of "
            f"the pass?), more than {held_at_most / 2**20:.0f} MiB")
        return result

    def check(self, name, workers, log_lengths, client):
        assert {w: v.pid for w, v in workers.items()} == self.pids, (
            f"{name}: a worker was restarted")
        logs = self.client.get_worker_logs()
        for address, watched in workers.items():
            new = [line for _, line in logs[address][log_lengths.get(address, 0):]]
            assert not watched.paused and not any("Pausing worker" in line for line in new), (
                f"{name}: worker {address} paused")
        assert_within_model(name, workers, self.baselines)
        assert client.above_start <= CLIENT_GROWTH_LIMIT, (
            f"{name}: the client grew by {client.above_start / 2**30:.2f} GiB")


# -- the data and the cluster ------------------------------------------------

def _chunk(i: int) -> np.ndarray:
    """Row chunk i: two clusters and noise, fixed by i."""
    rng = np.random.default_rng(i)
    centre = np.where(np.arange(ROWS_PER_CHUNK)[:, None] % 2 == 0, 0.5, -0.5)
    return (centre + rng.standard_normal((ROWS_PER_CHUNK, N_FEATURES))).astype(np.float32)


def _lazy_data() -> da.Array:
    n_chunks = N_ROWS // ROWS_PER_CHUNK
    blocks = [da.from_delayed(dask.delayed(_chunk, pure=True)(i), (ROWS_PER_CHUNK, N_FEATURES),
                              np.float32) for i in range(n_chunks)]
    return da.concatenate(blocks, axis=0)


def _frame_partition(i: int, path: str):
    """Partition i of the table: rows of the Zarr store, 0 to 2 chunks' worth, an id column."""
    import pandas as pd
    import zarr

    array = zarr.open_array(path, mode="r")
    start, stop = i * ROWS_PER_CHUNK, min((i + 1) * ROWS_PER_CHUNK, array.shape[0])
    frame = pd.DataFrame(array[start:stop], columns=[f"f{j}" for j in range(N_FEATURES)])
    frame.insert(0, "id", np.arange(start, stop, dtype=np.int64))
    return frame


def _frame(path: str):
    """The data as a dask DataFrame built with from_map: its partition lengths are unknown."""
    import dask.dataframe as dd

    return dd.from_map(_frame_partition, range(N_ROWS // ROWS_PER_CHUNK), path=path,
                       enforce_metadata=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("budget") / "data.zarr")
    with dask.config.set(scheduler="threads"):
        write_array(_lazy_data(), path)
    return path


@pytest.fixture(scope="module")
def budget(tmp_path_factory, data):
    # Compiled here first, the kernels are loaded from numba's disk cache by the
    # workers: compiling in each worker leaves LLVM's memory there (~100 MiB).
    load_library()
    with process_client(memory_limit=WORKER_LIMIT,
                        local_directory=str(tmp_path_factory.mktemp("workers"))) as client:
        client.run(load_library)
        yield _Budget(client)
    if FIGURES:
        print(f"\nworkers 2 x {WORKER_LIMIT / 2**30:.2f} GiB, data {DATA_BYTES / 2**30:.2f} GiB "
              f"({N_ROWS} x {N_FEATURES} float32)")
        print("| path | seconds | worker baseline (GiB) | worker peak (GiB) | growth (GiB) | "
              "modelled peak (of limit) | client growth (GiB) |")
        print("|---|---|---|---|---|---|---|")
        for name, seconds, base, peak, growth, share, client in FIGURES:
            print(f"| {name} | {seconds:.1f} | {base:.2f} | {peak:.2f} | {growth:.2f} | "
                  f"{share:.0%} | {client:.2f} |")


def _threaded_fit(data: str, **params) -> KernelPCA:
    """The fit of ``params`` on the threaded scheduler, in this process: what each path on
    the cluster must equal."""
    with dask.config.set(scheduler="threads"):
        return KernelPCA(**params).fit(open_array(data))


@pytest.fixture(scope="module")
def reference(data):
    return _threaded_fit(data, **PARAMS)


@pytest.fixture(scope="module")
def fitted(budget, data):
    return budget.run("fit, uniform landmarks (Zarr)", KernelPCA(**PARAMS).fit, open_array(data),
                      held_at_most=PASS_HELD)


# -- the paths -----------------------------------------------------------------

def test_fit_equals_the_threaded_fit(fitted, reference):
    np.testing.assert_allclose(fitted.eigenvalues_, reference.eigenvalues_, rtol=1e-8)


def test_fit_of_a_frame_of_unknown_lengths(budget, data, fitted):
    """The frame's row counts are counted per partition: no task is handed the table."""
    frame = _frame(data)
    model = budget.run("fit, dask DataFrame of unknown lengths",
                       KernelPCA(**PARAMS).fit, frame.drop(columns="id"), held_at_most=PASS_HELD)
    np.testing.assert_allclose(model.eigenvalues_, fitted.eigenvalues_, rtol=1e-8)


@pytest.mark.parametrize("landmarks", ["kmeans", "rpcholesky"])
def test_fit_with_each_landmark_method(budget, data, landmarks):
    params = {**PARAMS, "landmarks": landmarks}
    model = budget.run(f"fit, {landmarks} landmarks", KernelPCA(**params).fit, open_array(data))
    np.testing.assert_allclose(model.eigenvalues_, _threaded_fit(data, **params).eigenvalues_,
                               rtol=1e-8)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fit_with_median_gamma_and_automatic_m(budget, data):
    params = {**PARAMS, "gamma": "median", "n_landmarks": "auto", "max_landmarks": 400}
    model = budget.run("fit, median gamma, automatic m", KernelPCA(**params).fit,
                       open_array(data))
    threaded = _threaded_fit(data, **params)
    assert (model.gamma_, model.n_landmarks_) == (threaded.gamma_, threaded.n_landmarks_)
    np.testing.assert_allclose(model.eigenvalues_, threaded.eigenvalues_, rtol=1e-8)


def test_the_default_fit_with_the_pre_image_map(budget, data):
    """The defaults (median gamma, k-means landmarks, float64 blocks) with the pre-image
    map's second pass, m = 500: the heaviest fit a new user makes."""
    params = dict(n_components=5, n_landmarks=500, fit_inverse_transform=True, random_state=0)
    model = budget.run("default fit with the pre-image map (m = 500)",
                       KernelPCA(**params).fit, open_array(data))
    threaded = _threaded_fit(data, **params)
    np.testing.assert_allclose(model.eigenvalues_, threaded.eigenvalues_, rtol=1e-8)


def test_transform_to_zarr(budget, data, fitted, reference, tmp_path):
    out = str(tmp_path / "embedding.zarr")
    budget.run("transform to Zarr", write_array, fitted.transform(open_array(data)), out)
    rows = slice(0, 1000)
    np.testing.assert_allclose(open_array(out)[rows].compute(),
                               reference.transform(open_array(data)[rows]).compute(),
                               rtol=1e-5, atol=1e-5)


def test_transform_of_the_frame_to_parquet_with_a_key(budget, data, fitted, tmp_path):
    import pandas as pd

    out = str(tmp_path / "embedding.parquet")
    # The model was fitted on the Zarr array, without names: scikit-learn's warning that the
    # frame's columns are taken by position is what a user sees too.
    with pytest.warns(UserWarning, match="fitted without feature names"):
        table = transform_table(fitted, _frame(data), keep_columns=["id"])
    budget.run("transform, frame to Parquet with an id", write_table, table, out)
    written = pd.read_parquet(out).sort_values("id")
    assert len(written) == N_ROWS and (written["id"].to_numpy() == np.arange(N_ROWS)).all()
    head = written.iloc[:1000]
    np.testing.assert_allclose(head[fitted.get_feature_names_out()].to_numpy(),
                               fitted.transform(open_array(data)[:1000]).compute(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["score_samples", "reconstruction_error"])
def test_scores(budget, data, fitted, reference, method):
    scores = budget.run(method, lambda: getattr(fitted, method)(open_array(data)).compute())
    assert scores.shape == (N_ROWS,)
    np.testing.assert_allclose(scores[:1000], getattr(reference, method)(
        open_array(data)[:1000]).compute(), rtol=1e-4)


def test_inverse_transform_to_zarr(budget, data, tmp_path):
    model = budget.run("fit with the pre-image map", KernelPCA(
        **{**PARAMS, "fit_inverse_transform": True}).fit, open_array(data))
    out = str(tmp_path / "preimages.zarr")
    Y = model.transform(open_array(data))
    budget.run("inverse_transform to Zarr", write_array, model.inverse_transform(Y), out)
    assert open_array(out).shape == (N_ROWS, N_FEATURES)
    with dask.config.set(scheduler="threads"):
        expected = model.inverse_transform(model.transform(open_array(data)[:1000])).compute()
    np.testing.assert_allclose(open_array(out)[:1000].compute(), expected, rtol=1e-6,
                               atol=1e-6)


def test_partial_fit_on_halves_merge_and_set_n_components(budget, data, fitted):
    """Halves of the store (rows recorded), merged and grown: each equals the one fit."""
    half = N_ROWS // 2 // ROWS_PER_CHUNK * ROWS_PER_CHUNK
    params = {**PARAMS, "landmarks": fitted.landmarks_,
              "n_landmarks": fitted.landmarks_.shape[0], "gamma": fitted.gamma_}
    first = budget.run("partial_fit, first half", KernelPCA(**params).partial_fit, data,
                       rows=(0, half))
    other = budget.run("partial_fit, second half", KernelPCA(**params).partial_fit, data,
                       rows=(half, N_ROWS))
    merged = budget.run("merge", merge, [first, other])
    grown = budget.run("partial_fit, second half added", first.partial_fit, data,
                       rows=(half, N_ROWS))
    np.testing.assert_allclose(merged.eigenvalues_, fitted.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(grown.eigenvalues_, fitted.eigenvalues_, rtol=1e-8)
    budget.run("set_n_components", merged.set_n_components, 8)
    assert merged.eigenvalues_.shape == (8,)


def test_command_line_fit_and_transform(budget, data, fitted, tmp_path):
    """The CLI, a subprocess of its own, on this cluster through --scheduler."""
    address = budget.client.scheduler.address
    common = ["--scheduler", address, "--no-progress"]
    model, out = str(tmp_path / "model.zarr"), str(tmp_path / "cli-embedding.zarr")
    fit = [sys.executable, "-m", "kpca_dask", "fit", data, "--model", model, "--n-components",
           "5", "--gamma", str(PARAMS["gamma"]), "--n-landmarks", str(N_LANDMARKS), "--landmarks",
           "uniform", "--dtype", "float32", "--seed", "0", *common]
    transform = [sys.executable, "-m", "kpca_dask", "transform", model, data, "--out", out,
                 *common]
    for name, command in (("CLI fit", fit), ("CLI transform", transform)):
        budget.run(name, subprocess.run, command, check=True, capture_output=True, timeout=600)
    np.testing.assert_allclose(load(model).eigenvalues_, fitted.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(open_array(out)[:1000].compute(),
                               fitted.transform(open_array(data)[:1000]).compute(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method, y_rows", [("mca", ROWS_PER_CHUNK),
                                            ("cca", 3 * ROWS_PER_CHUNK // 2)])
def test_coupled_fit_of_two_fields(budget, data, method, y_rows):
    """Kernel MCA or CCA of the data (X) and every other feature of it (Y), Y stored in row
    chunks of its own: the pass reads blocks of whole chunks of both and holds them, its
    chain's cross sums (and CCA's m x m sums) and both fields' landmarks, never chunks read
    ahead of the chains."""
    from kpca_dask import KernelCCA, KernelMCA

    estimator = {"mca": KernelMCA(3, n_landmarks=N_LANDMARKS, landmarks="uniform",
                                  dtype="float32", random_state=0),
                 "cca": KernelCCA(3, n_landmarks=N_LANDMARKS, landmarks="uniform",
                                  n_pca_modes=20, dtype="float32", random_state=0)}[method]

    # Y in a store of its own, as two fields come: every other feature of the data.
    y_path = data.replace("data.zarr", f"every-other-{y_rows}.zarr")
    if not os.path.exists(y_path):
        with dask.config.set(scheduler="threads"):
            write_array(open_array(data)[:, ::2].rechunk({0: y_rows}), y_path)

    def fields():
        return open_array(data), open_array(y_path)

    # The pass's blocks are whole chunks of both fields: 24 576 rows for Y's 12 288.
    rows = int(np.lcm(ROWS_PER_CHUNK, y_rows))
    sums = 8 * N_LANDMARKS**2 * (3 if method == "cca" else 1)
    held = (4 * rows * (N_FEATURES + N_FEATURES // 2) * 4 + sums
            + 8 * N_LANDMARKS * N_FEATURES * 2)
    model = budget.run(f"coupled fit ({method}), Y in blocks of {y_rows} rows",
                       estimator.fit, *fields(), held_at_most=held)
    with dask.config.set(scheduler="threads"):
        threaded = type(estimator)(**estimator.get_params()).fit(*fields())
    np.testing.assert_allclose(model.singular_values_, threaded.singular_values_, rtol=1e-6)
