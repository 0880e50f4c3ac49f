"""Tables on object storage: Parquet, CSV and .npy read from s3:// URLs.

An S3-compatible server (moto's server mode) runs as a subprocess on 127.0.0.1,
reached through s3fs as AWS or any S3 store would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

s3fs = pytest.importorskip("s3fs")
pytest.importorskip("moto.server")
pytest.importorskip("pyarrow")

import dask  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from _s3 import S3_CREDENTIALS  # noqa: E402

from kpca_dask import KernelPCA  # noqa: E402
from kpca_dask.errors import InvalidInputError  # noqa: E402
from kpca_dask.io import open_array  # noqa: E402

pytestmark = pytest.mark.slow

BUCKET = "tables"
N, P = 900, 4
NAMES = [f"f{i}" for i in range(P)]
PARAMS = {"n_components": 3, "gamma": 0.3, "n_landmarks": 50, "landmarks": "uniform",
          "random_state": 0}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(rng.normal(size=(N, P)), columns=NAMES)
    frame.insert(0, "id", np.arange(N, dtype=np.int64) + 1000)
    return frame


@pytest.fixture(scope="module")
def storage_options(s3_endpoint, table):
    """A bucket holding the table as Parquet (row groups of 100), CSV and .npy."""
    s3fs.S3FileSystem.clear_instance_cache()
    options = {"key": S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
               "secret": S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
               "client_kwargs": {"endpoint_url": s3_endpoint}}
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir(BUCKET)
    with fs.open(f"{BUCKET}/t.parquet", "wb") as f:
        table.to_parquet(f, row_group_size=100, index=False)
    with fs.open(f"{BUCKET}/t.csv", "wb") as f:
        f.write(table.to_csv(index=False, float_format="%.17g").encode())
    with fs.open(f"{BUCKET}/t.npy", "wb") as f:
        np.save(f, np.ascontiguousarray(table[NAMES].to_numpy()))
    with fs.open(f"{BUCKET}/t.h5", "wb") as f:
        f.write(b"not read")
    return options


def _reference(table):
    return KernelPCA(**PARAMS).fit(table[NAMES].to_numpy())


@pytest.mark.parametrize("name, options", [("t.parquet", {"columns": NAMES, "block_rows": 200}),
                                           ("t.csv", {"columns": NAMES, "block_rows": 200}),
                                           ("t.npy", {"block_rows": 200})])
def test_fit_from_a_url_equals_the_numpy_fit(name, options, storage_options, table):
    """Parquet, CSV and .npy at an s3:// URL fit as the numpy array of the same rows."""
    X = open_array(f"s3://{BUCKET}/{name}", storage_options=storage_options, **options)
    assert X.shape == (N, P) and X.numblocks[0] > 1
    with dask.config.set(scheduler="threads"):
        fitted = KernelPCA(**PARAMS).fit(X)
    np.testing.assert_allclose(fitted.eigenvalues_, _reference(table).eigenvalues_, rtol=1e-10)


def test_parquet_filters_on_a_url(storage_options, table):
    """filters= keeps the rows that pass them, read from the URL in file order."""
    X = open_array(f"s3://{BUCKET}/t.parquet", storage_options=storage_options,
                   columns=NAMES, filters=[("id", ">=", 1500)])
    np.testing.assert_array_equal(X.compute(scheduler="threads"),
                                  table[NAMES].to_numpy()[500:])


def test_dask_frame_from_a_url_in_and_out(storage_options, table):
    """read_parquet(s3://...) -> fit -> transform: a lazy frame on the same index."""
    frame = dd.read_parquet(f"s3://{BUCKET}/t.parquet", storage_options=storage_options,
                            index="id", split_row_groups=True)
    with dask.config.set(scheduler="threads"):
        kpca = KernelPCA(**PARAMS).fit(frame)
        Y = kpca.transform(frame).compute()
    np.testing.assert_array_equal(Y.index, table["id"])
    np.testing.assert_allclose(kpca.eigenvalues_, _reference(table).eigenvalues_, rtol=1e-10)


def test_hdf5_from_a_url_is_refused_with_the_reason(storage_options):
    """HDF5 is read from local paths only; the error says why and what to do."""
    with pytest.raises(InvalidInputError, match="local paths only.*to_zarr"):
        open_array(f"s3://{BUCKET}/t.h5", storage_options=storage_options)


def test_url_without_credentials_is_a_clear_error(storage_options, s3_endpoint, monkeypatch):
    """A URL read with no credentials at all names the options and variables to set."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    s3fs.S3FileSystem.clear_instance_cache()
    with pytest.raises(InvalidInputError, match="could not be read.*AWS_ACCESS_KEY_ID"):
        open_array(f"s3://{BUCKET}/t.parquet",
                   storage_options={"client_kwargs": {"endpoint_url": s3_endpoint}})


def test_command_line_fits_a_parquet_url(storage_options, s3_endpoint, table, tmp_path):
    """`kpca-dask fit s3://.../t.parquet --columns ...` takes credentials and endpoint from
    the environment, as for Zarr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASK_", "AWS_"))}
    env.update({**S3_CREDENTIALS, "AWS_ENDPOINT_URL_S3": s3_endpoint})
    result = subprocess.run(
        [sys.executable, "-m", "kpca_dask", "fit", f"s3://{BUCKET}/t.parquet", "--columns",
         ",".join(NAMES), "--model", str(tmp_path / "m.zarr"), "--n-components", "3",
         "--gamma", "0.3", "--n-landmarks", "50", "--landmarks", "uniform", "--seed", "0",
         "--scheduler", "threads"],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    import kpca_dask

    loaded = kpca_dask.load(tmp_path / "m.zarr")
    np.testing.assert_allclose(loaded.eigenvalues_, _reference(table).eigenvalues_, rtol=1e-10)
    # The rows held are named by the table's URL (no credentials), in the file and by info.
    [source] = loaded.row_provenance_["sources"]
    assert source["description"].startswith(f"s3://{BUCKET}/t.parquet (a table of {N} rows")
    info = subprocess.run([sys.executable, "-m", "kpca_dask", "info", str(tmp_path / "m.zarr")],
                          env=env, capture_output=True, text=True, timeout=300, check=True)
    assert f"rows 0:{N} of s3://{BUCKET}/t.parquet" in info.stdout, info.stdout
    assert S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"] not in json.dumps(loaded.row_provenance_)
