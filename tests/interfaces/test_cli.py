"""The kpca-dask command line: end to end in real subprocesses (the console script, and the
errors of a program), the rest in-process through :func:`kpca_dask.cli.main`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import cli
from kpca_dask.io import open_array

CONSOLE_SCRIPT = Path(sys.executable).with_name("kpca-dask")


def run(*args, cwd, env=None, script=False):
    """Run ``kpca-dask ARGS`` (the console script, or ``python -m kpca_dask``)."""
    command = [str(CONSOLE_SCRIPT)] if script else [sys.executable, "-m", "kpca_dask"]
    full_env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    full_env.update(env or {})
    return subprocess.run(command + [str(a) for a in args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300)


def assert_user_error(result, match):
    """Exit status 2 and a single ``kpca-dask...: error: ...`` line, no traceback."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kpca-dask") and ": error: " in lines[0]
    assert match in lines[0]
    assert "Traceback" not in result.stderr


LOCAL_CLUSTER = ["--workers", "2", "--threads-per-worker", "1", "--memory-limit", "1GiB"]


@pytest.mark.slow
@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="console script not installed")
def test_generate_fit_transform_info(tmp_path, capsys, monkeypatch):
    """generate -> fit -> transform -> info end to end: the fit by the console script on a
    LocalCluster, info by ``python -m kpca_dask``; generate and transform (on threads, the
    default) through the same entry point in this process, each process start being 3-5 s
    of imports."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    done = main("generate", "circles", "--n-samples", 6000, "--chunk-rows", 500,
                "--out", "data.zarr", "--seed", 3, "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "wrote data.zarr: 6000 x 2 float64, 12 chunk(s)" in done.stdout

    done = run("fit", "data.zarr", "--model", "model.zarr", "--n-components", 4,
               "--gamma", 0.5, "--n-landmarks", 200, "--seed", 1, "--progress",
               *LOCAL_CLUSTER, cwd=tmp_path, script=True)
    assert done.returncode == 0, done.stderr
    assert "Dask: 2 worker(s), 2 thread(s)" in done.stderr and "dashboard http" in done.stderr
    assert "100% Completed" in done.stderr
    assert "trace error" in done.stdout

    done = main("transform", "model.zarr", "data.zarr", "--out", "embedding.zarr",
                capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "Dask:" not in done.stderr  # no cluster was asked for
    assert "Completed" not in done.stderr and "[#" not in done.stderr  # stderr is no terminal
    assert "wrote embedding.zarr: 6000 x 4" in done.stdout

    # The command line did what the library does.
    model = kpca_dask.load(tmp_path / "model.zarr")
    data = open_array(tmp_path / "data.zarr")
    assert data.chunks[0] == (500,) * 12
    expected = model.transform(data).compute()
    written = zarr.open_array(str(tmp_path / "embedding.zarr"), mode="r")
    assert written.chunks == (500, 4)
    np.testing.assert_array_equal(written[:], expected)
    same = kpca_dask.KernelPCA(n_components=4, gamma=0.5, n_landmarks=200,
                               random_state=1).fit(data)
    np.testing.assert_allclose(model.eigenvalues_, same.eigenvalues_, rtol=1e-10)

    done = run("info", "model.zarr", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for text in ("rbf(gamma=0.5)", "m = 200 (kmeans)", "n = 6000 rows x 2 features",
                 "trace error", "fit time", "eigenvalues", "components   4"):
        assert text in done.stdout
    # info --json in this process: the subprocess path was taken by the line above.
    summary = json.loads(main("info", tmp_path / "model.zarr", "--json", capsys=capsys).stdout)
    assert summary["n_samples_fit"] == 6000 and summary["n_components"] == 4
    np.testing.assert_array_equal(summary["eigenvalues"], model.eigenvalues_)


def main(*args, capsys):
    """``kpca-dask ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        status = cli.main([str(a) for a in args])
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, status, out, err)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A small data set and a model made through the command line, for the error cases."""
    path = tmp_path_factory.mktemp("cli")
    data, model = path / "data.zarr", path / "model.zarr"
    assert cli.main(["generate", "blobs", "--n-samples", "400", "--n-features", "3",
                     "--chunk-rows", "100", "--out", str(data), "--scheduler", "threads"]) == 0
    assert cli.main(["fit", str(data), "--model", str(model), "--n-components", "2",
                     "--n-landmarks", "50", "--scheduler", "threads"]) == 0
    return path


def test_overwrite_refused_without_flag(workdir, tmp_path, capsys):
    """An existing output is refused, and replaced with --overwrite."""
    data, model = workdir / "data.zarr", workdir / "model.zarr"
    before = (model / "zarr.json").read_bytes()
    done = main("fit", data, "--model", model, "--n-components", 3, "--scheduler", "threads",
                capsys=capsys)
    assert_user_error(done, "model.zarr: the output exists already")
    assert (model / "zarr.json").read_bytes() == before
    done = main("generate", "blobs", "--n-samples", 10, "--out", data, capsys=capsys)
    assert_user_error(done, "data.zarr: the output exists already")
    for _ in range(2):
        done = main("transform", model, data, "--out", tmp_path / "y.zarr", "--overwrite",
                    "--scheduler", "threads", capsys=capsys)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("args, message", [
    (["fit", "missing.zarr", "--model", "new.zarr"], "No Zarr store at missing.zarr"),
    (["transform", "missing.zarr", "data.zarr", "--out", "new.zarr"], "No model at missing.zarr"),
    (["transform", "data.zarr", "data.zarr", "--out", "new.zarr"], "not a kpca-dask model"),
    (["fit", "data.zarr", "--model", "new.zarr", "--gamma", "-1"], "gamma must be a positive"),
    (["fit", "data.zarr", "--model", "new.zarr", "--landmarks", "bogus"],
     "Unknown landmarks strategy 'bogus'"),
    (["fit", "data.zarr", "--model", "new.zarr", "--n-components", "1.5"],
     "n_components must be None"),
    (["fit", "data.zarr", "--model", "new.zarr", "--n-components", "two"],
     "argument --n-components"),
    (["generate", "spirals", "--n-samples", "10", "--out", "new.zarr"], "invalid choice"),
    (["fit", "data.zarr", "--model", "new.zarr", "--scheduler", "tls://127.0.0.1:1"],
     "needs TLS, but no TLS credentials are configured"),
])
def test_user_errors_are_one_line(workdir, capsys, monkeypatch, args, message):
    """A user mistake prints one error line, exits 2, and writes nothing."""
    monkeypatch.chdir(workdir)
    before = sorted(p.name for p in workdir.iterdir())
    local = [] if "--scheduler" in args else ["--scheduler", "threads"]
    assert_user_error(main(*args, *local, capsys=capsys), message)
    assert sorted(p.name for p in workdir.iterdir()) == before


def test_inverse_transform_and_score_round_trip(workdir, tmp_path, capsys):
    """fit --fit-inverse-transform, transform, inverse-transform and score write what the
    library computes; info says whether a model can invert."""
    data, model = workdir / "data.zarr", tmp_path / "model.zarr"
    local = ["--scheduler", "threads"]
    done = main("fit", data, "--model", model, "--n-components", 2, "--n-landmarks", 50,
                "--fit-inverse-transform", "--alpha", 0.1, *local, capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "inverse      yes" in main("info", model, capsys=capsys).stdout
    assert "inverse      no" in main("info", workdir / "model.zarr", capsys=capsys).stdout
    embedding, back, errors = (tmp_path / name for name in ("y.zarr", "x.zarr", "e.zarr"))
    assert main("transform", model, data, "--out", embedding, *local,
                capsys=capsys).returncode == 0
    done = main("inverse-transform", model, embedding, "--out", back, *local, capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and "400 x 3" in done.stdout
    done = main("score", model, data, "--out", errors, *local, capsys=capsys)
    assert done.returncode == 0, done.stderr

    fitted = kpca_dask.load(model)
    X = open_array(data).compute()
    np.testing.assert_allclose(zarr.open_array(str(back), mode="r")[:],
                               fitted.inverse_transform(fitted.transform(X)), rtol=1e-12)
    np.testing.assert_allclose(zarr.open_array(str(errors), mode="r")[:],
                               fitted.reconstruction_error(X), rtol=1e-12)


def test_inverse_transform_without_the_map_writes_nothing(workdir, tmp_path, capsys):
    """A model fitted without the pre-image map: one error line naming the option, no output."""
    done = main("transform", workdir / "model.zarr", workdir / "data.zarr", "--out",
                tmp_path / "y.zarr", "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0
    done = main("inverse-transform", workdir / "model.zarr", tmp_path / "y.zarr", "--out",
                tmp_path / "x.zarr", "--scheduler", "threads", capsys=capsys)
    assert_user_error(done, "fit_inverse_transform=True")
    assert not (tmp_path / "x.zarr").exists()


def test_damaged_model(workdir, tmp_path, capsys):
    """A model with a missing array is reported as damaged, in one line."""
    shutil.copytree(workdir / "model.zarr", tmp_path / "model.zarr")
    shutil.rmtree(tmp_path / "model.zarr" / "projection")
    assert_user_error(main("info", tmp_path / "model.zarr", capsys=capsys),
                      "damaged: projection missing")


@pytest.mark.slow
def test_errors_in_a_subprocess_have_no_traceback(workdir):
    """Run as a program, a scheduler that does not answer gives one line and exit status 2."""
    done = run("transform", "model.zarr", "data.zarr", "--out", "never.zarr",
               env={"DASK_SCHEDULER_ADDRESS": "tcp://127.0.0.1:9",
                    # fail fast: nothing listens on port 9
                    "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"}, cwd=workdir)
    assert_user_error(done, "cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert not (workdir / "never.zarr").exists()


def test_fit_defaults_are_the_librarys():
    """`fit` without options builds the estimator KernelPCA() is: every parameter the
    command line has an option for defaults to KernelPCA's default."""
    from kpca_dask.cli.commands import fit_params

    args = cli.build_parser().parse_args(["fit", "data.zarr", "--model", "model.zarr"])
    params = fit_params(args)
    defaults = kpca_dask.KernelPCA().get_params(deep=False)
    # no option (--method nystrom is the landmark way: KernelPCA(solver="nystrom"))
    assert set(defaults) - set(params) == {"max_landmarks", "rcond", "solver"}
    assert params == {name: defaults[name] for name in params}


def test_scheduler_local_starts_a_local_cluster_whatever_the_environment(monkeypatch):
    """`--scheduler local` is a local cluster even where $DASK_SCHEDULER_ADDRESS names
    another scheduler (here one that does not answer)."""
    from kpca_dask.dask_client import get_client

    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:9")
    with get_client("local", n_workers=1, threads_per_worker=1, processes=False) as client:
        assert client.cluster is not None and len(client.scheduler_info()["workers"]) == 1


def test_version_and_help(capsys):
    """--version names the package version; every subcommand has --help."""
    assert main("--version", capsys=capsys).stdout.strip() == f"kpca-dask {kpca_dask.__version__}"
    for command in ("generate", "fit", "transform", "inverse-transform", "score", "info"):
        done = main(command, "--help", capsys=capsys)
        assert done.returncode == 0 and "usage: kpca-dask " + command in done.stdout


def test_fit_with_checkpoint_and_automatic_landmarks(workdir, tmp_path, capsys):
    """`--checkpoint` saves the pass and `--n-landmarks auto` records its growth path;
    running the same command again resumes from the checkpoint to the same model."""
    args = ["fit", workdir / "data.zarr", "--n-components", "10", "--seed", "0",
            "--n-landmarks", "auto", "--tol", "0.05", "--checkpoint", tmp_path / "fit.ckpt",
            "--scheduler", "threads"]
    first = main(*args, "--model", tmp_path / "first.zarr", capsys=capsys)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "fit.ckpt").is_dir()
    again = main(*args, "--model", tmp_path / "again.zarr", capsys=capsys)
    assert again.returncode == 0, again.stderr
    a, b = kpca_dask.load(tmp_path / "first.zarr"), kpca_dask.load(tmp_path / "again.zarr")
    np.testing.assert_allclose(b.eigenvalues_, a.eigenvalues_, rtol=1e-10)
    assert a.n_landmarks == "auto" and a.trace_error_ < 0.1
    assert b.landmark_path_ == a.landmark_path_ and len(a.landmark_path_) >= 1


def test_a_local_run_computes_on_threads(workdir, tmp_path, capsys, monkeypatch):
    """Without --scheduler, $DASK_SCHEDULER_ADDRESS or a local-cluster option, a command
    computes in its own process on threads: no cluster is described, and --progress shows
    dask's own bar; the model equals the library's."""
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    done = main("fit", workdir / "data.zarr", "--model", tmp_path / "m.zarr", "--n-components",
                2, "--n-landmarks", 50, "--seed", 0, "--progress", capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "Dask:" not in done.stderr and "[####" in done.stderr
    same = kpca_dask.KernelPCA(n_components=2, n_landmarks=50, random_state=0).fit(
        open_array(workdir / "data.zarr"))
    np.testing.assert_allclose(kpca_dask.load(tmp_path / "m.zarr").eigenvalues_,
                               same.eigenvalues_, rtol=1e-10)


@pytest.mark.parametrize("options, environment, expected", [
    ([], None, "threads"),
    (["--scheduler", "synchronous"], None, "synchronous"),
    (["--workers", "2"], None, "local"),
    (["--memory-limit", "1GiB"], None, "local"),
    (["--scheduler", "local"], "tcp://10.0.0.5:8786", "local"),
    ([], "tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"),
    (["--scheduler", "tcp://10.0.0.9:8786"], "tcp://10.0.0.5:8786", "tcp://10.0.0.9:8786"),
])
def test_where_a_command_computes(options, environment, expected, monkeypatch):
    """Threads unless a cluster is asked for: an address (option, then environment), or a
    local cluster (--scheduler local, or an option that shapes one)."""
    from kpca_dask.cli.compute import scheduler_of

    if environment is None:
        monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", environment)
    args = cli.build_parser().parse_args(["fit", "d.zarr", "--model", "m.zarr", *options])
    assert scheduler_of(args) == expected


@pytest.mark.slow
def test_a_fit_with_the_progress_bar_keeps_g_on_the_cluster_under_its_own_key(tmp_path):
    """Through the progress bar's wrapper of the client's get, the pass's sums are persisted
    by the client itself: G stays on a worker as a future (a wrapped dask.persist computed it,
    brought it here and sent it back under the key that computed it, which distributed
    warned of as a changed run_spec: the warning fixture fails any such warning)."""
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, futures_of

    from kpca_dask.cli.compute import ProgressGet

    X = da.random.default_rng(0).standard_normal((20_000, 3), chunks=(5_000, 3))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        with dask.config.set(scheduler=ProgressGet(client)):
            model = kpca_dask.KernelPCA(n_components=2, gamma=1.0, n_landmarks=100,
                                        random_state=0).fit(X)
        assert [future.status for future in futures_of(model.statistics_.gram)] == ["finished"]
        reference = kpca_dask.KernelPCA(n_components=2, gamma=1.0, n_landmarks=100,
                                        random_state=0).fit(X)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-12)


@pytest.mark.slow
def test_progress_bar_scheduler_is_recognised_as_the_client():
    """With --progress the command line computes through a wrapper of the client's get;
    checkpointed fits and the BLAS cap still see the distributed client behind it."""
    import dask
    import dask.array as da
    from distributed import Client, LocalCluster

    from kpca_dask._parallel import blas_threads_for, distributed_client
    from kpca_dask.cli.compute import ProgressGet

    X = da.zeros((10, 2), chunks=5)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        with dask.config.set(scheduler=ProgressGet(client)):
            assert distributed_client(X) is client
            assert blas_threads_for(X) is None
        with dask.config.set(scheduler="threads"):
            assert distributed_client(X) is None
