"""Tables out of the command line: Parquet outputs, key columns kept, output dtypes,
the overwrite and atomicity rules; run in-process on the threaded scheduler."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import zarr

import kpca_dask
from kpca_dask import cli
from kpca_dask.errors import InvalidInputError
from kpca_dask.io import open_array

pytest.importorskip("pyarrow")

N, P = 700, 3
NAMES = ["a", "b", "c"]
LOCAL = ["--scheduler", "threads"]


@pytest.fixture
def table(tmp_path):
    """A Parquet table (row groups of 100) with an int64 id and a text label."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(rng.normal(size=(N, P)), columns=NAMES)
    frame.insert(0, "id", rng.permutation(N).astype(np.int64) + 10_000)
    frame["label"] = "row"
    frame.to_parquet(tmp_path / "t.parquet", row_group_size=100, index=False)
    return frame


def run(*args, capsys):
    status = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def _fit(tmp_path, capsys, *extra):
    status, _, err = run("fit", tmp_path / "t.parquet", "--columns", ",".join(NAMES),
                         "--model", tmp_path / "m.zarr", "--n-components", 2, "--gamma", 0.5,
                         "--n-landmarks", 40, "--landmarks", "uniform", *extra, *LOCAL,
                         capsys=capsys)
    assert status == 0, err
    return kpca_dask.load(tmp_path / "m.zarr")


def test_transform_writes_parquet_with_the_ids(tmp_path, table, capsys):
    """transform --keep-columns id --out emb.parquet: the ids beside the components, row for
    row, equal to the model's transform of the same rows."""
    model = _fit(tmp_path, capsys)
    status, out, err = run("transform", tmp_path / "m.zarr", tmp_path / "t.parquet",
                           "--columns", ",".join(NAMES), "--keep-columns", "id",
                           "--out", tmp_path / "emb.parquet", *LOCAL, capsys=capsys)
    assert status == 0, err
    assert "Parquet float64" in out
    written = pd.read_parquet(tmp_path / "emb.parquet")
    assert list(written.columns) == ["id", "kernelpca0", "kernelpca1"]
    np.testing.assert_array_equal(written["id"], table["id"])
    np.testing.assert_allclose(written[["kernelpca0", "kernelpca1"]].to_numpy(),
                               model.transform(table[NAMES].to_numpy()), atol=1e-10)


def test_float32_model_writes_float32(tmp_path, table, capsys):
    """A float32 model writes float32 embeddings, to Parquet and to Zarr; --out-dtype
    float64 asks for float64."""
    _fit(tmp_path, capsys, "--dtype", "float32")
    for out, extra, expected in [("e32.parquet", [], np.float32),
                                 ("e64.parquet", ["--out-dtype", "float64"], np.float64)]:
        status, _, err = run("transform", tmp_path / "m.zarr", tmp_path / "t.parquet",
                             "--columns", ",".join(NAMES), "--out", tmp_path / out, *extra,
                             *LOCAL, capsys=capsys)
        assert status == 0, err
        assert (pd.read_parquet(tmp_path / out).dtypes == expected).all()
    status, _, err = run("transform", tmp_path / "m.zarr", tmp_path / "t.parquet",
                         "--columns", ",".join(NAMES), "--out", tmp_path / "e.zarr", *LOCAL,
                         capsys=capsys)
    assert status == 0, err
    assert open_array(tmp_path / "e.zarr").dtype == np.float32


def test_score_and_inverse_transform_write_parquet(tmp_path, table, capsys):
    """score writes a reconstruction_error column beside the ids; inverse-transform takes a
    Parquet embedding (its component columns found by name) and writes the features."""
    model = _fit(tmp_path, capsys, "--fit-inverse-transform")
    status, _, err = run("score", tmp_path / "m.zarr", tmp_path / "t.parquet", "--columns",
                         ",".join(NAMES), "--keep-columns", "id", "--out",
                         tmp_path / "s.parquet", *LOCAL, capsys=capsys)
    assert status == 0, err
    scores = pd.read_parquet(tmp_path / "s.parquet")
    assert list(scores.columns) == ["id", "reconstruction_error"]
    np.testing.assert_allclose(scores["reconstruction_error"],
                               model.reconstruction_error(table[NAMES].to_numpy()), atol=1e-10)
    run("transform", tmp_path / "m.zarr", tmp_path / "t.parquet", "--columns", ",".join(NAMES),
        "--keep-columns", "id", "--out", tmp_path / "emb.parquet", *LOCAL, capsys=capsys)
    status, _, err = run("inverse-transform", tmp_path / "m.zarr", tmp_path / "emb.parquet",
                         "--keep-columns", "id", "--out", tmp_path / "x.parquet", *LOCAL,
                         capsys=capsys)
    assert status == 0, err
    back = pd.read_parquet(tmp_path / "x.parquet")
    assert list(back.columns) == ["id", *NAMES]  # the names the model was fitted with
    np.testing.assert_allclose(
        back[NAMES].to_numpy(),
        model.inverse_transform(model.transform(table[NAMES].to_numpy())), atol=1e-10)


def test_existing_parquet_output_needs_overwrite(tmp_path, table, capsys):
    """An existing output is refused without --overwrite and left as it was; with it, it is
    replaced."""
    _fit(tmp_path, capsys)
    (tmp_path / "emb.parquet").mkdir()
    (tmp_path / "emb.parquet" / "mine.txt").write_text("keep me")
    args = ["transform", tmp_path / "m.zarr", tmp_path / "t.parquet", "--columns",
            ",".join(NAMES), "--out", tmp_path / "emb.parquet", *LOCAL]
    status, _, err = run(*args, capsys=capsys)
    assert status == 2 and "exists already" in err and "--overwrite" in err
    assert (tmp_path / "emb.parquet" / "mine.txt").read_text() == "keep me"
    status, _, err = run(*args, "--overwrite", capsys=capsys)
    assert status == 0, err
    assert len(pd.read_parquet(tmp_path / "emb.parquet")) == N


def test_failed_parquet_write_leaves_nothing(tmp_path, table, capsys):
    """A NaN met half-way through the pass stops the write: no output, no hidden sibling."""
    _fit(tmp_path, capsys)
    bad = table.copy()
    bad.loc[650, "b"] = np.nan
    bad.to_parquet(tmp_path / "bad.parquet", row_group_size=100, index=False)
    status, _, err = run("transform", tmp_path / "m.zarr", tmp_path / "bad.parquet",
                         "--columns", ",".join(NAMES), "--out", tmp_path / "emb.parquet",
                         *LOCAL, capsys=capsys)
    assert status == 2 and "column 'b'" in err and "partition 0 (row 650 of it)" in err
    assert not any(p.name.startswith((".emb", "emb")) for p in tmp_path.iterdir())


def test_keep_columns_needs_a_table_in_and_parquet_out(tmp_path, table, capsys):
    """--keep-columns with a Zarr output is refused before anything is written."""
    _fit(tmp_path, capsys)
    status, _, err = run("transform", tmp_path / "m.zarr", tmp_path / "t.parquet",
                         "--columns", ",".join(NAMES), "--keep-columns", "id", "--out",
                         tmp_path / "emb.zarr", *LOCAL, capsys=capsys)
    assert status == 2 and "needs a Parquet output" in err
    assert not (tmp_path / "emb.zarr").exists()


def test_zarr_input_to_parquet_output(tmp_path, table, capsys):
    """A Zarr input can be written as Parquet (--out-format parquet), one row per row."""
    model = _fit(tmp_path, capsys)
    z = zarr.create_array(tmp_path / "x.zarr", shape=(N, P), chunks=(200, P), dtype="f8")
    z[:] = table[NAMES].to_numpy()
    status, _, err = run("transform", tmp_path / "m.zarr", tmp_path / "x.zarr", "--out",
                         tmp_path / "emb", "--out-format", "parquet", *LOCAL, capsys=capsys)
    assert status == 0, err
    np.testing.assert_allclose(pd.read_parquet(tmp_path / "emb").to_numpy(),
                               model.transform(table[NAMES].to_numpy()), atol=1e-10)


def test_incomplete_parquet_output_is_refused(tmp_path, table):
    """A Parquet dataset holding the writer's incomplete-marker is refused by our readers."""
    from kpca_dask.io.parquet_out import INCOMPLETE_MARKER

    (tmp_path / "half.parquet").mkdir()
    table[NAMES].iloc[:100].to_parquet(tmp_path / "half.parquet" / "part.0.parquet")
    (tmp_path / "half.parquet" / INCOMPLETE_MARKER).write_bytes(b"")
    with pytest.raises(InvalidInputError, match="incomplete kpca-dask output"):
        open_array(tmp_path / "half.parquet")


def test_fit_from_a_table_keeps_its_column_names(tmp_path, table, capsys):
    """fit of a Parquet table saves its column names; transform then reads those columns
    without --columns, and refuses them in another order."""
    model = _fit(tmp_path, capsys)
    assert model.feature_names_in_.tolist() == NAMES
    status, out, _ = run("info", tmp_path / "m.zarr", capsys=capsys)
    assert "features     a, b, c" in out
    status, _, err = run("transform", tmp_path / "m.zarr", tmp_path / "t.parquet",
                         "--keep-columns", "id", "--out", tmp_path / "emb.parquet", *LOCAL,
                         capsys=capsys)
    assert status == 0, err
    assert list(pd.read_parquet(tmp_path / "emb.parquet").columns) == [
        "id", "kernelpca0", "kernelpca1"]
    status, _, err = run("transform", tmp_path / "m.zarr", tmp_path / "t.parquet",
                         "--columns", "c,b,a", "--out", tmp_path / "e.zarr", *LOCAL,
                         capsys=capsys)
    assert status == 2 and "same order as they were in fit" in err
