"""Zarr input and the model output on object storage, through fsspec and s3fs.

An S3-compatible server (moto's server mode) runs as a subprocess on 127.0.0.1;
the library and the fit job's command reach it with the same s3fs code as they
would AWS or any S3 store, only the endpoint differs: ``storage_options`` for
the library, the ``AWS_ENDPOINT_URL_S3`` variable of the kpca-dask-s3 Secret
for the job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest

s3fs = pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
from _deploy import KUSTOMIZE, OPERATOR, load_one, only_container, option  # noqa: E402
from _s3 import S3_CREDENTIALS  # noqa: E402

import kpca_dask  # noqa: E402
from kpca_dask.io import open_array, write_array  # noqa: E402

pytestmark = pytest.mark.slow

JOB_TIMEOUT_S = 180


def _job_args() -> list[str]:
    """The DaskJob's `kpca-dask fit` command line, s3:// URLs and all."""
    return only_container(load_one(OPERATOR / "daskjob.yaml")["spec"]["job"]["spec"])["args"]


def _bucket_and_urls() -> tuple[str, str, str]:
    args = _job_args()
    data_url, model_url = args[2], option(args, "--model")
    assert data_url.startswith("s3://") and model_url.startswith("s3://")
    bucket = data_url.removeprefix("s3://").split("/", 1)[0]
    return bucket, data_url, model_url


@pytest.fixture
def storage_options(s3_endpoint):
    """An empty bucket named as in the manifests, and the options that reach it."""
    request = urllib.request.Request(f"{s3_endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(request, timeout=10).close()
    # Listings cached by an earlier test's filesystem object would describe the old bucket.
    s3fs.S3FileSystem.clear_instance_cache()
    options = {"key": S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
               "secret": S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
               "client_kwargs": {"endpoint_url": s3_endpoint}}
    bucket, _, _ = _bucket_and_urls()
    s3fs.S3FileSystem(**options).mkdir(bucket)
    return options


def _data() -> da.Array:
    # Few rows keep the job's m x m problem small: m = min(--n-landmarks, rows).
    return da.random.default_rng(0).standard_normal((400, 5), chunks=(100, 5))


def test_library_fits_from_and_saves_to_object_storage(storage_options):
    """open_array(s3://...) -> fit -> save(s3://...) -> load gives the model of a local fit."""
    _, data_url, model_url = _bucket_and_urls()
    write_array(_data(), data_url, storage_options=storage_options)
    X = open_array(data_url, storage_options=storage_options)
    params = dict(n_components=4, gamma=0.2, n_landmarks=300, random_state=0)
    with dask.config.set(scheduler="threads"):
        model = kpca_dask.KernelPCA(**params).fit(X)
        model.save(model_url, storage_options=storage_options)
        local = kpca_dask.KernelPCA(**params).fit(_data())

    fs = s3fs.S3FileSystem(**storage_options)
    assert fs.exists(model_url.removeprefix("s3://") + "/zarr.json")
    loaded = kpca_dask.load(model_url, storage_options=storage_options)
    np.testing.assert_allclose(loaded.eigenvalues_, local.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(loaded.transform(_data()[:50].compute()),
                               local.transform(_data()[:50].compute()), rtol=1e-10, atol=1e-12)


def test_fit_job_command_reads_and_writes_object_storage(storage_options, s3_endpoint):
    """The DaskJob's `kpca-dask fit s3://... --model s3://...` runs with the Secret's variables."""
    _, data_url, model_url = _bucket_and_urls()
    write_array(_data(), data_url, storage_options=storage_options)

    # The variables the kpca-dask-s3 Secret gives the pods, here pointing at the loopback server.
    secret_keys = set(load_one(KUSTOMIZE / "s3-secret.template.yaml")["stringData"])
    s3_env = {**S3_CREDENTIALS, "AWS_ENDPOINT_URL_S3": s3_endpoint}
    assert secret_keys <= s3_env.keys()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASK_", "AWS_"))}
    env.update(s3_env)

    # Only the scheduler changes: a local cluster whose worker processes inherit the variables.
    args = _job_args()
    at = args.index("--scheduler")
    args = args[:at] + args[at + 2:] + ["--workers", "1", "--threads-per-worker", "2"]
    program = Path(sys.executable).parent / args[0]
    result = subprocess.run([str(program), *args[1:]], env=env, capture_output=True, text=True,
                            timeout=JOB_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stdout + result.stderr

    loaded = kpca_dask.load(model_url, storage_options=storage_options)
    assert loaded.n_components_ == int(option(args, "--n-components"))
    with dask.config.set(scheduler="threads"):
        local = kpca_dask.KernelPCA(**loaded.get_params()).fit(_data())
    np.testing.assert_allclose(loaded.eigenvalues_, local.eigenvalues_, rtol=1e-10)


_S3_WRITER = r"""
import json, sys, time
from pathlib import Path
import dask, dask.array as da, numpy as np
from kpca_dask.errors import KPCAError
from kpca_dask.io import write_array

url, me, barrier = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
options = json.loads(sys.argv[4])
X = da.full((4000, 5), float(me), chunks=(100, 5))
(barrier / f"ready-{me}").touch()
while len(list(barrier.glob("ready-*"))) < 2:
    time.sleep(0.001)
try:
    with dask.config.set(scheduler="threads", num_workers=2):
        write_array(X, url, storage_options=options)
    print("ok")
except KPCAError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def test_two_processes_writing_one_url_never_mix(storage_options, tmp_path):
    """Two processes write one s3:// output at once (released together by a file barrier):
    at most one writes; the output is that one's complete array or nothing, never chunks of
    both; a writer that stood back was told why."""
    import json

    bucket, _, _ = _bucket_and_urls()
    url = f"s3://{bucket}/race/embedding.zarr"
    (tmp_path / "barrier").mkdir()
    writers = [subprocess.Popen([sys.executable, "-c", _S3_WRITER, url, str(me),
                                 str(tmp_path / "barrier"), json.dumps(storage_options)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for me in (1, 2)]
    reports = []
    for writer in writers:
        stdout, stderr = writer.communicate(timeout=300)
        assert writer.returncode == 0, stderr
        reports.append(stdout.strip())
    refused = (f"ConcurrentWriteError: {url}: another process is writing", "OutputExistsError:")
    assert all(r == "ok" or r.startswith(refused) for r in reports), reports
    assert reports.count("ok") <= 1
    fs = s3fs.S3FileSystem(**storage_options)
    if "ok" in reports:
        values = np.asarray(open_array(url, storage_options=storage_options))
        assert values.shape == (4000, 5)
        np.testing.assert_array_equal(values, 1.0 + reports.index("ok"))
        assert not any(".kpca-dask-writers" in p for p in fs.find(url))
    else:
        assert not fs.exists(url)
