"""pandas and dask DataFrames in and out of KernelPCA: equal to numpy, lazy, named."""

from __future__ import annotations

import warnings

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _counting import CountComputes

from kpca_dask import KernelPCA
from kpca_dask.errors import InvalidInputError, NonFiniteInputError, NonNumericInputError
from kpca_dask.io.frames import frame_to_array

N, P = 1200, 4
NAMES = [f"f{i}" for i in range(P)]


def _params(**extra):
    return {"n_components": 3, "gamma": 0.3, "n_landmarks": 60, "landmarks": "uniform",
            "random_state": 0, **extra}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """A table with four float features, an int64 id and a string label."""
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(rng.normal(size=(N, P)), columns=NAMES)
    frame["id"] = np.arange(N, dtype=np.int64) * 10
    frame["label"] = np.where(rng.random(N) < 0.5, "a", "b")
    return frame


@pytest.fixture(scope="module")
def parquet(tmp_path_factory, table) -> str:
    """The table as a Parquet file with row groups of 150 rows (8 of them)."""
    path = tmp_path_factory.mktemp("tables") / "table.parquet"
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path,
                   row_group_size=150)
    return str(path)


def _features(parquet):
    return dd.read_parquet(parquet, split_row_groups=True)[NAMES]


def test_pandas_fit_equals_numpy_fit(table):
    """A pandas DataFrame fits as its values do, to 1e-10."""
    on_frame = KernelPCA(**_params()).fit(table[NAMES])
    on_array = KernelPCA(**_params()).fit(table[NAMES].to_numpy())
    np.testing.assert_allclose(on_frame.eigenvalues_, on_array.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(on_frame.transform(table[NAMES]),
                               on_array.transform(table[NAMES].to_numpy()), atol=1e-10)


def test_parquet_frame_fit_equals_numpy_fit(parquet, table):
    """A dask DataFrame read from Parquet fits as the numpy array of its values, to 1e-10."""
    on_frame = KernelPCA(**_params()).fit(_features(parquet))
    on_array = KernelPCA(**_params()).fit(table[NAMES].to_numpy())
    np.testing.assert_allclose(on_frame.eigenvalues_, on_array.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(on_frame.transform(_features(parquet)).compute().to_numpy(),
                               on_array.transform(table[NAMES].to_numpy()), atol=1e-10)


def test_parquet_lengths_come_from_metadata(parquet):
    """The row counts of a Parquet-backed frame's blocks are read from its statistics:
    nothing is computed."""
    with CountComputes() as counted:
        X = frame_to_array(_features(parquet))
    assert X.chunks[0] == (150,) * 8
    assert counted.computes == 0


def test_csv_lengths_are_computed_without_values(tmp_path, table):
    """A CSV-backed frame has no row counts in metadata: one compute returns only them."""
    table[NAMES].to_csv(tmp_path / "t.csv", index=False)
    frame = dd.read_csv(tmp_path / "t.csv", blocksize=20_000)
    with CountComputes() as counted:
        X = frame_to_array(frame)
    assert counted.computes == 1
    assert sum(X.chunks[0]) == N and len(X.chunks[0]) == frame.npartitions > 1


def _numbered_partition(i: int) -> pd.DataFrame:
    return pd.DataFrame({"a": np.arange(10 + i % 7, dtype=float)})


@pytest.mark.parametrize("n_partitions", [1, 33, 1100])
def test_unknown_lengths_are_counted_partition_by_partition(n_partitions):
    """No task of the count takes more than one partition (a task that took them all
    held the whole table in one place); the counts are right through every level of
    the tree that gathers them."""
    from dask.core import get_dependencies

    from kpca_dask.io.frames import Partitions

    parts = Partitions.of(dd.from_map(_numbered_partition, range(n_partitions)))
    counting = parts.counted_lengths()
    graph, partitions = dict(counting.__dask_graph__()), set(parts.keys)
    most = max(len(get_dependencies(graph, key) & partitions)
               for key in graph if key not in partitions)
    assert most == 1
    assert parts.lengths() == tuple(10 + i % 7 for i in range(n_partitions))


def test_fit_of_parquet_frame_reads_each_partition_once(parquet, table):
    """With given landmarks, the fit is one compute that reads each row group once: inside
    the one task that adds its statistics (no read is a task of its own)."""
    landmarks = table[NAMES].to_numpy()[::20]
    with CountComputes() as counted:
        KernelPCA(**_params(landmarks=landmarks, n_landmarks=len(landmarks))).fit(
            _features(parquet))
    assert counted.computes == 1
    names = [str(key[0] if isinstance(key, tuple) else key) for key in counted.tasks]
    assert not [name for name in names if "parquet" in name]
    adds = {key: n for key, n in counted.tasks.items()
            if str(key).startswith("statistics_of_block")}
    assert len(adds) == 8 and set(adds.values()) == {1}, adds


def test_transform_of_dask_frame_is_lazy_and_keeps_the_index(parquet, table):
    """transform of a dask DataFrame computes nothing and returns a dask DataFrame with
    the input's index and divisions and the columns of get_feature_names_out()."""
    kpca = KernelPCA(**_params()).fit(table[NAMES])
    frame = dd.read_parquet(parquet, split_row_groups=True, index="id")[NAMES]
    with CountComputes() as counted:
        Y = kpca.transform(frame)
    assert counted.computes == 0
    assert isinstance(Y, dd.DataFrame)
    assert list(Y.columns) == list(kpca.get_feature_names_out())
    assert Y.divisions == frame.divisions and Y.npartitions == 8
    result = Y.compute()
    np.testing.assert_array_equal(result.index, table["id"])
    np.testing.assert_allclose(result.to_numpy(), kpca.transform(table[NAMES]), atol=1e-12)


def test_scores_of_dask_frame_are_lazy_series(parquet, table):
    """reconstruction_error and score_samples of a dask DataFrame are lazy Series on its
    index."""
    kpca = KernelPCA(**_params()).fit(table[NAMES])
    frame = dd.read_parquet(parquet, split_row_groups=True, index="id")[NAMES]
    with CountComputes() as counted:
        errors = kpca.reconstruction_error(frame)
        scores = kpca.score_samples(frame)
    assert counted.computes == 0
    assert isinstance(errors, dd.Series) and errors.divisions == frame.divisions
    assert scores.name == "score_samples"
    expected = kpca.reconstruction_error(table[NAMES])
    np.testing.assert_allclose(errors.compute().to_numpy(), expected, atol=1e-12)
    np.testing.assert_array_equal(scores.compute().index, table["id"])


def test_scores_of_pandas_frame_are_series_on_its_index(table):
    """reconstruction_error of a pandas DataFrame is a pandas Series on its index."""
    frame = table.set_index("id")[NAMES]
    kpca = KernelPCA(**_params()).fit(frame)
    errors = kpca.reconstruction_error(frame)
    assert isinstance(errors, pd.Series) and errors.index.equals(frame.index)


def test_pandas_transform_follows_set_output(table):
    """transform of a pandas frame gives numpy by default, and a frame on the same index
    with set_output(transform="pandas"), as in scikit-learn."""
    frame = table.set_index("id")[NAMES]
    kpca = KernelPCA(**_params()).fit(frame)
    assert isinstance(kpca.transform(frame), np.ndarray)
    Y = kpca.set_output(transform="pandas").transform(frame)
    assert isinstance(Y, pd.DataFrame) and Y.index.equals(frame.index)
    assert list(Y.columns) == ["kernelpca0", "kernelpca1", "kernelpca2"]


def test_inverse_transform_takes_a_frame_of_components(parquet, table):
    """inverse_transform of a dask DataFrame of components is a lazy frame of the fitted
    feature names, equal to that of the numpy components."""
    kpca = KernelPCA(**_params(fit_inverse_transform=True, alpha=1e-2)).fit(table[NAMES])
    Y = kpca.transform(_features(parquet))
    X_hat = kpca.inverse_transform(Y)
    assert isinstance(X_hat, dd.DataFrame) and list(X_hat.columns) == NAMES
    expected = kpca.inverse_transform(kpca.transform(table[NAMES]))
    np.testing.assert_allclose(X_hat.compute().to_numpy(), expected, atol=1e-10)


def test_feature_names_are_set_from_a_frame(parquet):
    """feature_names_in_ and n_features_in_ come from the columns of a dask DataFrame."""
    kpca = KernelPCA(**_params()).fit(_features(parquet))
    assert kpca.feature_names_in_.tolist() == NAMES and kpca.n_features_in_ == P


def test_refit_on_an_array_drops_the_feature_names(table):
    """A refit on an array without names removes feature_names_in_, as in scikit-learn."""
    kpca = KernelPCA(**_params()).fit(table[NAMES])
    kpca.fit(table[NAMES].to_numpy())
    assert not hasattr(kpca, "feature_names_in_")


def test_columns_in_another_order_are_refused(parquet, table):
    """Columns in another order than at fit raise scikit-learn's error, not wrong numbers."""
    kpca = KernelPCA(**_params()).fit(table[NAMES])
    with pytest.raises(InvalidInputError, match="must be in the same order as they were in fit"):
        kpca.transform(dd.read_parquet(parquet)[NAMES[::-1]])


def test_other_feature_names_are_refused(table):
    """Columns with other names than at fit raise, naming them."""
    kpca = KernelPCA(**_params()).fit(table[NAMES])
    other = table[NAMES].rename(columns={"f0": "g0"})
    with pytest.raises(InvalidInputError, match="Feature names unseen at fit time:\n- g0"):
        kpca.reconstruction_error(other)


def test_array_after_frame_warns_as_scikit_learn(table):
    """Fitted with names, transformed without: scikit-learn's warning."""
    kpca = KernelPCA(**_params()).fit(table[NAMES])
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        kpca.transform(table[NAMES].to_numpy())


def test_frame_after_array_warns_as_scikit_learn(table):
    """Fitted without names, transformed with: scikit-learn's warning."""
    kpca = KernelPCA(**_params()).fit(table[NAMES].to_numpy())
    with pytest.warns(UserWarning, match="X has feature names, but KernelPCA was fitted without"):
        kpca.transform(table[NAMES])


def test_same_names_do_not_warn(table):
    """The fit's columns in the fit's order: no warning."""
    kpca = KernelPCA(**_params()).fit(table[NAMES])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kpca.transform(table[NAMES])


def test_non_numeric_columns_are_named(parquet):
    """A frame with a string column is refused by name, saying how to choose columns: the
    float ones, the integer key left out and named."""
    with pytest.raises(NonNumericInputError, match=r"non-numeric column\(s\) 'label' .*"
                                                   r"X\[\['f0', 'f1', 'f2', 'f3'\]\].*"
                                                   r"integer column\(s\) \['id'\] are left "
                                                   r"out as likely keys"):
        KernelPCA(**_params()).fit(dd.read_parquet(parquet))


def test_nan_in_a_dask_frame_names_column_and_partition(tmp_path, table):
    """A NaN in a Parquet column is reported with the column and the partition holding it."""
    bad = table[NAMES].copy()
    bad.loc[700, "f2"] = np.nan  # row group 4 of 150-row groups
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pandas(bad, preserve_index=False), path, row_group_size=150)
    landmarks = table[NAMES].to_numpy()[:10]
    with pytest.raises(NonFiniteInputError, match=r"column 'f2' .* partition 4 \(row 100"):
        KernelPCA(**_params(landmarks=landmarks, n_landmarks=10)).fit(
            dd.read_parquet(path, split_row_groups=True))


def test_inf_in_a_pandas_frame_names_column_and_row(table):
    """An infinite value in a pandas frame is reported with its column and index label."""
    bad = table.set_index("id")[NAMES].copy()
    bad.iloc[3, 1] = np.inf
    with pytest.raises(NonFiniteInputError, match=r"column 'f1' .* row 30"):
        KernelPCA(**_params()).fit(bad)


def test_dask_frame_fit_on_process_cluster(process_cluster, parquet, table):
    """On a LocalCluster of worker processes the Parquet frame fits as numpy, to 1e-10."""
    from distributed import Client

    with Client(process_cluster):
        on_frame = KernelPCA(**_params()).fit(_features(parquet))
        Y = on_frame.transform(_features(parquet)).compute()
    on_array = KernelPCA(**_params()).fit(table[NAMES].to_numpy())
    np.testing.assert_allclose(on_frame.eigenvalues_, on_array.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(Y.to_numpy(), on_array.transform(table[NAMES].to_numpy()),
                               atol=1e-10)


def test_feature_names_survive_save_and_load(tmp_path, table):
    """A model file keeps feature_names_in_; the loaded model checks them as the fitted one."""
    import kpca_dask

    path = KernelPCA(**_params()).fit(table[NAMES]).save(tmp_path / "model.zarr")
    loaded = kpca_dask.load(path)
    assert loaded.feature_names_in_.dtype == object
    assert loaded.feature_names_in_.tolist() == NAMES
    with pytest.raises(InvalidInputError, match="same order"):
        loaded.transform(table[NAMES[::-1]])


def test_info_shows_the_feature_names(tmp_path, table, capsys):
    """`kpca-dask info` prints the feature names of a table fit, and lists them in --json."""
    import json

    from kpca_dask import cli

    KernelPCA(**_params()).fit(table[NAMES]).save(tmp_path / "model.zarr")
    assert cli.main(["info", str(tmp_path / "model.zarr")]) in (0, None)
    assert "features     f0, f1, f2, f3" in capsys.readouterr().out
    cli.main(["info", str(tmp_path / "model.zarr"), "--json"])
    assert json.loads(capsys.readouterr().out)["feature_names_in"] == NAMES


def test_partial_fit_takes_frames_and_checks_their_names(table):
    """partial_fit of pandas batches equals a fit on their concatenation with the same
    landmarks and gamma; a batch with the columns in another order is refused."""
    first, second = table[NAMES].iloc[:600], table[NAMES].iloc[600:]
    kpca = KernelPCA(**_params()).partial_fit(first).partial_fit(second)
    refit = KernelPCA(**_params(landmarks=kpca.landmarks_, n_landmarks=kpca.n_landmarks_)).fit(
        table[NAMES])
    np.testing.assert_allclose(kpca.eigenvalues_, refit.eigenvalues_, rtol=1e-10)
    assert kpca.feature_names_in_.tolist() == NAMES
    with pytest.raises(InvalidInputError, match="same order"):
        kpca.partial_fit(second[NAMES[::-1]])


def test_fit_transform_of_a_dask_frame_is_a_dask_frame(parquet, table):
    """fit_transform of a dask DataFrame returns a lazy dask DataFrame of the components: the
    numpy fit's embedding, in columns named by get_feature_names_out."""
    kpca = KernelPCA(**_params())
    Y = kpca.fit_transform(_features(parquet))
    assert isinstance(Y, dd.DataFrame) and Y.npartitions == 8
    assert list(Y.columns) == list(kpca.get_feature_names_out())
    expected = KernelPCA(**_params()).fit_transform(table[NAMES].to_numpy())
    np.testing.assert_allclose(Y.compute().to_numpy(), expected, atol=1e-10)


def test_transform_table_of_a_csv_frame_computes_nothing(tmp_path, table):
    """transform_table of a frame whose row counts are unknown (CSV) counts no rows: the
    output is lazy and equal to the numpy transform, ids beside it."""
    from kpca_dask import transform_table

    kpca = KernelPCA(**_params()).fit(table[NAMES])
    table[NAMES + ["id"]].to_csv(tmp_path / "t.csv", index=False)
    frame = dd.read_csv(tmp_path / "t.csv", blocksize=20_000)
    with CountComputes() as counted:
        out = transform_table(kpca, frame, keep_columns=["id"])
    assert counted.computes == 0
    result = out.compute()
    np.testing.assert_array_equal(result["id"], table["id"])
    np.testing.assert_allclose(result[kpca.get_feature_names_out()].to_numpy(),
                               kpca.transform(table[NAMES].to_numpy()), atol=1e-12)


def test_array_of_unknown_row_counts_transforms_but_does_not_fit(table):
    """A dask array with unknown block lengths transforms lazily; a fit asks for the lengths."""
    import dask.array as da

    kpca = KernelPCA(**_params()).fit(table[NAMES].to_numpy())
    X = da.from_array(table[NAMES].to_numpy(), chunks=(300, P))
    unknown = X[da.isfinite(X[:, 0])]  # a boolean mask: dask no longer knows the lengths
    assert np.isnan(unknown.chunks[0]).all()
    np.testing.assert_allclose(kpca.transform(unknown).compute(), kpca.transform(X).compute(),
                               atol=1e-12)
    with pytest.raises(InvalidInputError, match="unknown chunk sizes"):
        KernelPCA(**_params()).fit(unknown)
