"""Every benchmark script runs to its table at a tiny size.

The benchmarks are not timed here (their figures come from full-size runs on a
quiet machine, docs/benchmarks.md); this only keeps them runnable as the code
under them moves. Each runs as ``python bench/script.py`` would, in a process forked from one
that has imported the libraries (tests/interfaces/_pages.py), its tables
written to a temporary folder (``KPCA_DASK_BENCH_RESULTS``), not over the real ones; the
fresh interpreters a script starts for each measurement are forked from it too
(``KPCA_DASK_BENCH_PRELOADED``, bench/_fresh.py).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest
from _clusters import process_client
from _pages import run_script  # `server`: tests/interfaces/conftest.py

REPOSITORY = Path(__file__).resolve().parents[2]
BENCH = REPOSITORY / "bench"
DATA = Path(os.environ.get("KPCA_DASK_DATA", REPOSITORY.parent / "shared" / "data"))
MOTO_SERVER = Path(sys.executable).parent / "moto_server"

#: The script, its arguments at a tiny size ({tmp} a scratch folder), and what it needs.
RUNS = {
    "bench_floor": (["--n-samples", "4000", "--n-landmarks", "50", "--repeats", "1",
                     "--schedulers", "threads", "--dtypes", "float64", "--landmarks",
                     "uniform"], None),
    "bench_vs_sklearn": (["--n-samples", "2000", "--n-landmarks", "50", "--repeats", "1"], None),
    "bench_sparse_memory": (["--n", "2000", "--p", "500", "--m", "20", "--block-rows", "500"],
                            None),
    "bench_scale": (["--sizes", "4000", "--n-landmarks", "20", "--chunk-rows", "1000",
                     "--workdir", "{tmp}"], None),
    "bench_update": (["--n-samples", "4000", "--n-landmarks", "50", "--chunk-rows", "1000",
                      "--repeats", "1"], None),
    "bench_sampling_read": (["--n", "4000", "--chunk-rows", "1000", "--n-landmarks", "20",
                             "--workdir", "{tmp}"], "moto"),
    "bench_tables": (["--rows", "4000", "--row-group", "1000", "--block-rows", "1000",
                      "--rows-per-file", "2000", "--landmarks", "50"], "moto"),
    "bench_accuracy": (["--n", "1000", "--m", "50", "--seeds", "0", "--methods", "uniform",
                        "--plot", "{tmp}/choosing-m.png"], "mnist"),
    "bench_novelty": (["--n-landmarks", "50", "--digits", "0", "--n-components", "5"], "mnist"),
    "bench_denoising": (["--subset", "300", "--n-landmarks", "50", "--components", "8",
                         "--gamma-factors", "1", "--alphas", "0.03", "--train-rows", "2000",
                         "--chunk-rows", "500"], "mnist"),
    "bench_large_m": (["--n", "2000", "--m", "200,1600", "--data", "blobs"], None),
    "bench_frame_memory": (["--n", "4000", "--rows-per-partition", "1000"], None),
    "bench_mnist": (["--n-landmarks", "50", "--n-components", "5", "--train-rows", "2000"],
                    "mnist"),
    "bench_wide": (["--n", "400", "--p", "2e3", "--m", "30", "--chunk-rows", "200",
                    "--chunk-columns", "1000", "--exact-n", "100", "--exact-p", "2e3",
                    "--data", "low-rank"], None),
    "bench_exact": (["--sizes", "1500", "--dense-check", "--dense-most", "2000"], None),
    "bench_fields": (["--sizes", "60x6x12", "--chunk", "20", "--methods",
                      "xeofs-linear,kpca-linear,kpca-default,kpca-hilbert,kpca-extended"], None),
    "bench_flat_spectrum": (["--n", "2000", "--m", "300"], None),
    "bench_syrk_rate": (["--m", "300", "--rows", "100,400", "--repeats", "1"], None),
    "bench_coupled": (["--n", "4000", "--m", "50", "--chunk-rows", "1000"], None),
    "bench_tile_products": (["--cases", "300:100", "--repeats", "1"], None),
    "bench_landmark_runs": (["--n", "3000", "--p", "8", "--m", "20", "--seeds", "0",
                             "--chunk-rows", "1000"], None),
}

#: Environment a run adds. bench_sampling_read writes its store with ``kpca-dask generate``
#: (set-up, not measured: its fits run on the threaded scheduler in processes of their
#: own); DASK_SCHEDULER_ADDRESS=threads, the CLI's documented alternative to a local
#: cluster, spares that command a cluster start of its own.
ENVIRONMENT = {"bench_sampling_read": {"DASK_SCHEDULER_ADDRESS": "threads"}}

#: Runs whose kpca-dask commands (generate, fit, transform) share one local cluster of one
#: worker process, started here and named by DASK_SCHEDULER_ADDRESS, instead of each
#: starting its own: still a distributed cluster, one start instead of three.
SHARED_CLUSTER = {"bench_scale"}


def test_every_benchmark_has_a_run():
    """A new script in bench/ gets a tiny run here."""
    assert {path.stem for path in BENCH.glob("bench_*.py")} == set(RUNS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_benchmark_runs_at_a_tiny_size(name, tmp_path, server):
    """The script exits 0 and prints its results (a Markdown table, or JSON lines)."""
    args, needs = RUNS[name]
    if needs == "moto" and not MOTO_SERVER.is_file():
        pytest.skip("needs moto_server beside this interpreter (pip install 'kpca-dask[deploy]')")
    if needs == "mnist" and not (DATA / "mnist").is_dir():
        pytest.skip(f"MNIST not found in {DATA / 'mnist'}; set KPCA_DASK_DATA")
    env = {**os.environ, "KPCA_DASK_BENCH_RESULTS": str(tmp_path / "results"),
           "KPCA_DASK_DATA": str(DATA), "PYTHONPATH": str(REPOSITORY),
           "KPCA_DASK_BENCH_PRELOADED": "1", **ENVIRONMENT.get(name, {})}
    with contextlib.ExitStack() as stack:
        if name in SHARED_CLUSTER:
            client = stack.enter_context(process_client(n_workers=1))
            env["DASK_SCHEDULER_ADDRESS"] = client.scheduler.address
        returncode, stdout, stderr = run_script(
            server, BENCH / f"{name}.py",
            [arg.replace("{tmp}", str(tmp_path)) for arg in args], tmp_path / "run", env)
    assert returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert "|---" in stdout or stdout.lstrip().startswith("{"), stdout[-3000:]


@pytest.mark.slow
def test_the_cluster_benchmark_runs_at_a_tiny_size(tmp_path, server):
    """bench_large_m.py --cluster: a LocalCluster of two workers, the tiled way forced."""
    env = {**os.environ, "KPCA_DASK_BENCH_RESULTS": str(tmp_path / "results"),
           "PYTHONPATH": str(REPOSITORY), "KPCA_DASK_BENCH_PRELOADED": "1"}
    returncode, stdout, stderr = run_script(
        server, BENCH / "bench_large_m.py",
        ["--cluster", "--n", "2000", "--m", "200", "--workers", "2", "--worker-memory", "1GiB",
         "--solve", "tiles", "--gamma", "1.0"], tmp_path / "run", env)
    assert returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert "| tiles 3² (67) |" in stdout, stdout[-3000:]
