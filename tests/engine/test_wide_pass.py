"""Data chunked along the features: the same model as whole rows, one chunk at a time."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from dask.array.core import PerformanceWarning

from kpca_dask import KernelPCA
from kpca_dask.engine.passes.nystrom import pass_statistics
from kpca_dask.errors import InsufficientMemoryError, NonFiniteInputError
from kpca_dask.io import open_array

KERNELS = [
    ("rbf", {"gamma": 0.02}),
    ("laplacian", {"gamma": 0.01}),
    ("polynomial", {"gamma": 0.05, "degree": 3, "coef0": 1.0}),
    ("linear", {}),
    ("cosine", {}),
    ("matern", {"gamma": 0.02, "kernel_params": {"nu": 1.5}}),
    ("matern", {"gamma": 0.02, "kernel_params": {"nu": 2.5}}),
]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(400, 30)) + np.linspace(0.0, 3.0, 30)


def _fitted(X, **params):
    settings = {"n_components": 5, "n_landmarks": 40, "random_state": 0, **params}
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)  # never a rechunk
        return KernelPCA(**settings).fit(X)


def _close(got, expected, rtol=1e-10):
    got, expected = np.asarray(got), np.asarray(expected)
    np.testing.assert_allclose(got, expected, rtol=0, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize(("kernel", "params"), KERNELS)
def test_feature_chunks_fit_and_transform_as_whole_rows(data, kernel, params):
    """Eigenvalues, embeddings and novelty scores equal the row-chunked fit's to 1e-10."""
    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, (7, 13, 10)))
    whole, wide = _fitted(rows, kernel=kernel, **params), _fitted(split, kernel=kernel, **params)
    _close(wide.eigenvalues_, whole.eigenvalues_)
    _close(wide.transform(split).compute(), whole.transform(rows).compute())
    _close(wide.reconstruction_error(split).compute(), whole.reconstruction_error(rows).compute())


def test_rough_matern_on_feature_chunks(data):
    """Matérn nu = 0.7 agrees to 1e-7: near d = 0 it moves like d^1.4, so the rounding of
    a landmark's squared distance to itself (~1e-15, summed in another order) shows."""
    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, (7, 13, 10)))
    settings = {"kernel": "matern", "gamma": 0.02, "kernel_params": {"nu": 0.7}}
    whole, wide = _fitted(rows, **settings), _fitted(split, **settings)
    _close(wide.transform(split).compute(), whole.transform(rows).compute(), rtol=1e-7)


@pytest.mark.parametrize("landmarks", ["kmeans", "rpcholesky", "given"])
def test_every_landmark_method_on_feature_chunks(data, landmarks):
    """k-means, pivoted Cholesky and given landmarks give the row-chunked model."""
    chosen = data[::10] if landmarks == "given" else landmarks
    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, 8))
    whole, wide = _fitted(rows, landmarks=chosen), _fitted(split, landmarks=chosen)
    _close(wide.transform(split).compute(), whole.transform(rows).compute())


def test_median_gamma_and_automatic_m_on_feature_chunks(data):
    """gamma="median" and n_landmarks="auto" choose what they choose on whole rows."""
    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, 8))
    settings = {"gamma": "median", "n_landmarks": "auto", "max_landmarks": 60, "tol": 1e-3}
    whole, wide = _fitted(rows, **settings), _fitted(split, **settings)
    assert wide.gamma_ == pytest.approx(whole.gamma_, rel=1e-12)
    assert wide.n_landmarks_ == whole.n_landmarks_
    _close(wide.transform(split).compute(), whole.transform(rows).compute())


def test_partial_fit_and_merge_on_feature_chunks(data):
    """More rows and a merge of models fitted on feature chunks match whole rows."""
    import kpca_dask

    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, 8))
    whole = _fitted(rows[:200]).partial_fit(rows[200:])
    wide = _fitted(split[:200]).partial_fit(split[200:])
    _close(wide.eigenvalues_, whole.eigenvalues_)
    _close(wide.transform(split).compute(), whole.transform(rows).compute())
    given = {"landmarks": data[::10]}
    merged = kpca_dask.merge([_fitted(split[:250], **given), _fitted(split[250:], **given)])
    _close(merged.eigenvalues_, _fitted(rows, **given).eigenvalues_)


def test_feature_chunked_zarr_store(tmp_path, data):
    """A Zarr store chunked along the features fits as stored, to the in-memory model."""
    path = tmp_path / "x.zarr"
    zarr.create_array(path, data=data, chunks=(100, 10))
    X = open_array(path)
    assert X.numblocks == (4, 3)
    _close(_fitted(X).transform(X).compute(), _fitted(data).transform(data))


def test_each_chunk_is_read_inside_the_task_that_uses_it():
    """The pass's graph has no task that only reads a chunk: reads cannot run ahead."""
    X = da.random.default_rng(0).standard_normal((400, 100), chunks=(100, 25))
    graph = dict(pass_statistics(X, np.ones((5, 100)), "rbf", {"gamma": 0.01}).__dask_graph__())
    assert not [key for key in graph if str(key).startswith("('standard_normal")]
    assert pass_statistics(X, np.ones((5, 100)), "rbf", {"gamma": 0.01}).compute().n_samples == 400


def _most_chunks_held(compute, chunk_bytes: int) -> int:
    """The most results of at least ``chunk_bytes`` that dask's cache held at once."""
    from dask.diagnostics import CacheProfiler

    with CacheProfiler(metric=lambda value: getattr(value, "nbytes", 0)) as profiler:
        compute()
    events = sorted([(r.cache_time, 1) for r in profiler.results if r.metric >= chunk_bytes]
                    + [(r.free_time, -1) for r in profiler.results if r.metric >= chunk_bytes])
    held = most = 0
    for _, step in events:
        held += step
        most = max(most, held)
    return most


@pytest.mark.parametrize("kernel", ["rbf", "linear"])  # linear: terms and moments in one task
def test_chunks_made_from_a_shared_factor_are_used_as_they_are_made(kernel):
    """A user's ``L @ F + noise``: when a row block of L is done, dask's threaded scheduler
    (last ready, first run) made every product of that row block before the first was used,
    a row of chunks held at once (2 GiB at p = 10^6). Each chunk is now made inside the
    task that uses it, in the landmarks' read, the pass and the transform."""
    rng = da.random.default_rng(0)
    L = rng.standard_normal((400, 3), chunks=(100, 3))
    F = rng.standard_normal((3, 2000), chunks=(3, 100))
    X = L @ F + rng.standard_normal((400, 2000), chunks=(100, 100))
    chunk_bytes = 100 * 100 * 8
    assert _most_chunks_held(lambda: X.sum(axis=1).compute(scheduler="threads"),
                             chunk_bytes) >= 10  # dask's own way, for contrast
    with dask.config.set(scheduler="threads"):
        kpca = KernelPCA(n_components=3, n_landmarks=20, landmarks="uniform", kernel=kernel,
                         gamma=1e-3, random_state=0)
        assert _most_chunks_held(lambda: kpca.fit(X), chunk_bytes) <= 4
        assert _most_chunks_held(lambda: kpca.transform(X).compute(), chunk_bytes) <= 4
    whole = KernelPCA(n_components=3, n_landmarks=20, landmarks="uniform", kernel=kernel,
                      gamma=1e-3, random_state=0).fit(X.compute())
    _close(kpca.eigenvalues_, whole.eigenvalues_)


def test_nonfinite_value_is_named_by_row(data):
    """A NaN in one feature chunk is reported with its global row, as for whole rows."""
    bad = data.copy()
    bad[257, 20] = np.nan
    with pytest.raises(NonFiniteInputError, match="row 257"):
        KernelPCA(n_landmarks=20, landmarks=data[:20]).fit(da.from_array(bad, chunks=(100, 8)))


def test_callable_kernel_reads_whole_rows_with_a_warning(data):
    """A callable kernel is no sum over features: the rows are made whole, and it says so."""
    def dot(A, B):
        return A @ B.T

    split = da.from_array(data, chunks=(100, 8))
    with pytest.warns(PerformanceWarning, match="callable kernel"):
        wide = KernelPCA(n_components=3, kernel=dot, n_landmarks=20, random_state=0).fit(split)
    whole = KernelPCA(n_components=3, kernel=dot, n_landmarks=20, random_state=0).fit(data)
    _close(wide.eigenvalues_, whole.eigenvalues_)


def test_float32_feature_chunks_close_to_float64(data):
    """dtype="float32" on feature chunks stays within float32 rounding of the float64 fit."""
    split = da.from_array(data.astype(np.float32), chunks=(100, 8))
    single = _fitted(split, dtype="float32", gamma=0.02)
    double = _fitted(da.from_array(data, chunks=(100, 30)), gamma=0.02)
    np.testing.assert_allclose(single.eigenvalues_, double.eigenvalues_, rtol=1e-3)


def test_feature_chunks_on_a_process_cluster(process_cluster, data):
    """On a cluster the landmark panels are shared tasks; the model is the local one."""
    from distributed import Client

    split = da.from_array(data, chunks=(100, 8))
    local = _fitted(split).transform(data)
    with Client(process_cluster, set_as_default=False) as client:
        with dask.config.set(scheduler=client.get):
            model = _fitted(split)
            remote = model.transform(split).compute()
    _close(remote, local)


def test_scale_gamma_of_feature_chunks(data):
    """gamma="scale" of data chunked along the features, its sample reduced by chunks,
    equals the whole-row fit's."""
    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, 8))
    settings = {"gamma": "scale", "landmarks": data[::10]}
    assert _fitted(split, **settings).gamma_ == pytest.approx(
        _fitted(rows, **settings).gamma_, rel=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_median_gamma_summed_over_chunks(data, kernel):
    """gamma="median" of data chunked along the features, its sample never read whole,
    equals the whole-row fit's."""
    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, 8))
    settings = {"kernel": kernel, "gamma": "median", "landmarks": data[::10]}
    assert _fitted(split, **settings).gamma_ == pytest.approx(
        _fitted(rows, **settings).gamma_, rel=1e-12)


def test_median_gamma_names_a_nonfinite_sampled_row(data):
    """A NaN in a row sampled for the median is reported with its row."""
    bad = data.copy()
    bad[:, 3] = np.nan
    with pytest.raises(NonFiniteInputError, match="row 0, found while estimating gamma"):
        KernelPCA(gamma="median", landmarks=data[:20]).fit(da.from_array(bad, chunks=(100, 8)))


def test_kmeans_sample_beyond_memory_is_refused(data):
    """k-means's sample of 20 m wide rows over a quarter of the memory is one clear error."""
    split = da.from_array(data, chunks=(100, 8))
    with dask.config.set({"kpca-dask.memory-limit": 300_000}):
        with pytest.raises(InsufficientMemoryError, match='landmarks="uniform"'):
            KernelPCA(n_landmarks=40, landmarks="kmeans").fit(split)


def test_preimages_of_feature_chunks(data):
    """fit_inverse_transform on feature chunks learns the whole-row map, to 1e-10."""
    rows = da.from_array(data, chunks=(100, 30))
    split = da.from_array(data, chunks=(100, 8))
    settings = {"fit_inverse_transform": True, "alpha": 1e-3}
    whole, wide = _fitted(rows, **settings), _fitted(split, **settings)
    Y = whole.transform(data)
    _close(wide.inverse_transform(Y), whole.inverse_transform(Y))


def test_wide_preimages_come_in_column_chunks():
    """Pre-images of rows wider than a block's bytes (4 MiB here) are made by column chunks."""
    wide_data = np.random.default_rng(5).normal(size=(200, 4000))
    model = _fitted(da.from_array(wide_data, chunks=(100, 1000)), n_landmarks=20,
                    fit_inverse_transform=True, alpha=1e-3)
    Y = da.from_array(model.transform(wide_data), chunks=200)
    with dask.config.set({"kpca-dask.memory-limit": 2**20}):
        X_hat = model.inverse_transform(Y)
    assert X_hat.numblocks[1] == 2
    _close(X_hat.compute(), model.inverse_transform(Y.compute()))


def test_pass_over_some_row_blocks_after_a_split(data):
    """A pass over row blocks 1:3 of X (as a checkpoint's segment asks) whose blocks are split
    by bytes counts the rows of those blocks, as the whole-row pass does."""
    from kpca_dask.engine.passes.nystrom import PassPlan

    landmarks = data[::20]
    plan = PassPlan(chains=1, blas_threads=1, local_threads=1, block_bytes=8 * 22 * 30)
    wide = pass_statistics(da.from_array(data, chunks=(100, 8)), landmarks, "rbf",
                           {"gamma": 0.02}, blocks=slice(1, 3), plan=plan).compute()
    whole = pass_statistics(da.from_array(data[100:300], chunks=(100, 30)), landmarks, "rbf",
                            {"gamma": 0.02}, plan=plan).compute()
    assert wide.n_samples == 200
    _close(wide.gram, whole.gram)


def test_split_slice_follows_the_split():
    """Rows of 402 float64 terms in 30-row blocks: 100 rows become 4 blocks, and a pass over
    row blocks 1:3 of X covers their 3 blocks."""
    from kpca_dask.engine.passes.wide import split_parts, split_slice

    parts = split_parts((100, 10, 50), 402, 8 * 402 * 30)
    assert parts == [4, 1, 2] and split_slice(parts, slice(1, 3)) == slice(4, 7)


def test_checkpointed_fit_of_feature_chunks(tmp_path, data):
    """A checkpointed fit of feature chunks gives the row-chunked model."""
    kpca = KernelPCA(n_components=5, n_landmarks=40, random_state=0)
    kpca.fit(da.from_array(data, chunks=(100, 8)), checkpoint=tmp_path / "ck.zarr")
    _close(kpca.eigenvalues_, _fitted(da.from_array(data, chunks=(100, 30))).eigenvalues_)
