"""G, K_mm and its factor as tiles over the workers, on LocalClusters with memory limits.

Workers of 1.25 GiB (a room of 60 % of it less a worker's code: 318 MiB) hold
m = 1500 in one worker (2.2 m^2 words are 38 MiB); the tiled way is forced
with dask's configuration key, and the automatic choice is checked against
the same limit at an m where one worker would not do. Each fit must complete
with no worker paused or restarted and every worker within the model of
docs/design.md §14 (its growth over its own baseline, plus its code, within
60 % of its limit), the client growing by little, and equal the single-process
fit (threaded scheduler, this process) to 1e-8. A K_mm of low rank takes one
process's pivoted factor, and one of higher rank (repeated landmarks) the documented
jitter. A worker killed during the
tiled factorisation: tests/faults/test_fault_sweep.py.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import dask
import dask.array as da
import numpy as np
import pytest
from _clusters import assert_within_model, load_library, process_client, resident_bytes
from dask.utils import key_split
from distributed import Client, futures_of, get_task_stream

from kpca_dask import KernelPCA, load
from kpca_dask.diagnostics import MemoryWatch, watch_workers
from kpca_dask.engine.solve.landmark_memory import SOLVE_KEY, landmark_solve_mode
from kpca_dask.engine.tiles.product_way import PRODUCTS_KEY, product_way
from kpca_dask.engine.tiles.rows_pass import panel_loads
from kpca_dask.errors import InvalidParameterError

pytestmark = pytest.mark.slow

WORKER_LIMIT = int(1.25 * 2**30)
CLIENT_GROWTH_LIMIT = 0.25 * 2**30
PARAMS = dict(n_components=5, gamma=0.5, random_state=0)


def _data(n: int = 3000) -> da.Array:
    """Anisotropic Gaussian rows: well separated leading eigenvalues."""
    X = np.random.default_rng(0).normal(size=(n, 8)) * np.linspace(1.0, 0.3, 8)
    return da.from_array(X, chunks=(1000, 8))


def _single_process(X=None, **params) -> KernelPCA:
    with dask.config.set(scheduler="threads"):
        return KernelPCA(**{**PARAMS, **params}).fit(_data() if X is None else X)




def _baselines(client: Client) -> dict:
    client.run(load_library)
    return client.run(resident_bytes)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with process_client(memory_limit=WORKER_LIMIT,
                        local_directory=str(tmp_path_factory.mktemp("workers"))) as client:
        client.kpca_dask_baselines = _baselines(client)
        yield client


def _watched(client: Client, fit, client_growth: float = CLIENT_GROWTH_LIMIT):
    """``fit()`` with the workers and this process watched; asserts the model held."""
    pids = client.run(os.getpid)
    with watch_workers(client) as workers:
        here = MemoryWatch()
        result = fit()
        here.stop()
    assert {w: v.pid for w, v in workers.items()} == pids, "a worker was restarted"
    for address, watched in workers.items():
        assert not watched.paused, f"worker {address} paused"
    assert_within_model("the fit", workers, client.kpca_dask_baselines)
    assert here.above_start <= client_growth, (
        f"the client grew by {here.above_start / 2**20:.0f} MiB")
    return result


def _assert_same(model: KernelPCA, reference: KernelPCA, rtol: float = 1e-8) -> None:
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=rtol, atol=0)
    for name in ("projection_", "offset_"):
        expected = getattr(reference, name)
        np.testing.assert_allclose(getattr(model, name), expected, rtol=0,
                                   atol=rtol * np.abs(expected).max())


def _leading(model: KernelPCA, q: int):
    """The first q eigenvalues and columns of ``model``'s projection: the pairs whose
    vectors are well defined (trailing ones of nearly equal small eigenvalues are not)."""
    return SimpleNamespace(eigenvalues_=model.eigenvalues_[:q],
                           projection_=model.projection_[:, :q], offset_=model.offset_[:q])


@pytest.fixture(scope="module")
def tiled(client):
    with dask.config.set({SOLVE_KEY: "tiles"}):
        return _watched(client, lambda: KernelPCA(**PARAMS, n_landmarks=1500).fit(_data()))


def test_a_tiled_fit_equals_the_single_process_fit_within_the_workers_limits(tiled):
    """m = 1500 as 3 x 3 tiles: no pause, no restart, the single-process model to 1e-8."""
    assert tiled.statistics_.gram.numblocks == (3, 3)
    reference = _single_process(n_landmarks=1500)
    _assert_same(tiled, reference)
    # The trace is estimated on the tiled way: within a few of its standard errors.
    np.testing.assert_allclose(tiled.trace_error_, reference.trace_error_,
                               atol=5 * tiled.trace_error_std_ + 1e-12)


def test_g_is_held_where_the_memory_model_places_its_tile_rows(tiled, client):
    """The tiled fit's G: each worker holds whole tile rows of the lower tiles, the bytes
    of each worker as panel_loads models them for this cluster (2 one-thread workers)."""
    G = tiled.statistics_.gram
    t, m = G.chunks[0][0], G.shape[0]
    holders = client.who_has(futures_of(G))
    sizes = G.chunks[0]
    held: dict[str, float] = {}
    for i, row in enumerate(G.__dask_keys__()):
        owners = {sorted(holders[key])[0] for key in row[:i + 1]}  # its lower tiles
        assert len(owners) == 1, f"tile row {i} is split over {owners}"
        (owner,) = owners
        held[owner] = held.get(owner, 0) + 8 * sizes[i] * sum(sizes[:i + 1])
    modelled = panel_loads(m, t, len(client.nthreads()), 1)
    assert sorted(held.values()) == pytest.approx(sorted(modelled.values()))


def test_a_fit_on_one_worker_keeps_the_m_by_m_work_out_of_the_client(tmp_path):
    """m = 2500 on one worker ('auto'): the client grows by less than 1.5 m x m arrays
    (75 MB; solving here, it held G and 2.2 more: 160 MB), and the model is the
    single-process one.

    Its own cluster: workers that ran the tiled fit keep up to 150 MiB more that the
    allocator does not give back, which would count as this fit's growth.
    """
    m = 2500
    with process_client(memory_limit=WORKER_LIMIT, local_directory=str(tmp_path)) as fresh:
        fresh.kpca_dask_baselines = _baselines(fresh)
        model = _watched(fresh, lambda: KernelPCA(**PARAMS, n_landmarks=m).fit(_data()),
                         client_growth=1.5 * 8 * m * m)
    assert model.statistics_.gram.numblocks == (1, 1)
    _assert_same(model, _single_process(n_landmarks=m))


def test_the_choice_of_tiles_follows_the_workers_limit(client):
    """'auto' keeps one worker while 2.2 m^2 words fit 3/4 of its room, 60 % of its limit
    less its code (768 - 450 MiB here: m <= 3769), and takes tiles past it."""
    X = _data()
    assert landmark_solve_mode(X, 3700) == "worker"
    assert landmark_solve_mode(X, 3800) == "tiles"
    with dask.config.set({SOLVE_KEY: "tiles"}):
        assert landmark_solve_mode(X, 1500) == "tiles"


def test_a_tiled_model_grows_and_is_saved_by_the_workers(client, tmp_path):
    """More rows add tile by tile (m = 400); the workers write the tiles, and the file loads
    with the same G."""
    X = _data()
    with dask.config.set({SOLVE_KEY: "tiles"}):
        grown = KernelPCA(**PARAMS, n_landmarks=400).fit(X[:2000])
        landmarks = grown.landmarks_
        grown.partial_fit(X[2000:])
        assert grown.statistics_.gram.numblocks == (3, 3)
        path = grown.save(str(tmp_path / "model.zarr"))
    _assert_same(grown, _single_process(X, landmarks=landmarks), rtol=1e-7)
    np.testing.assert_array_equal(load(path).statistics_.gram, grown.statistics_.gram.compute())


def _task_names(client: Client, fit):
    """``fit()``'s result and the names of the tasks the workers ran for it."""
    with get_task_stream(client) as stream:
        result = fit()
    return result, {key_split(task["key"]) for task in stream.data}


def test_the_products_solve_with_the_factor_and_form_no_inverse(client):
    """q components on a K_mm of full rank, the products by solves: triangular solves with
    the tiled factor (their diagonal steps ran), and no tile of L^-1 is made (m^3 / 3 flops
    more); the single-process model to 1e-8."""
    with dask.config.set({SOLVE_KEY: "tiles", PRODUCTS_KEY: "solves"}):
        model, names = _task_names(client, lambda: KernelPCA(**PARAMS, n_landmarks=400).fit(
            _data()))
    assert model.statistics_.gram.numblocks == (3, 3)
    assert model.landmark_rank_ == 400
    assert {"solved_block", "added_products", "diagonal_factor"} <= names
    assert not {"diagonal_inverse", "below_diagonal_inverse"} & names
    _assert_same(model, _single_process(n_landmarks=400))


def test_many_short_solve_steps_take_the_inverse_by_default(client):
    """m = 400 in three tiles on two workers: L^-1 costs milliseconds against the solves'
    six steps a product (the model of product_way), so it is formed and no solve steps
    run; the same model as by solves, to 1e-8; a way dask's key does not know is refused
    with the ways it knows."""
    assert product_way(400, 3, 2, 2) == "inverse"
    with dask.config.set({SOLVE_KEY: "tiles"}):
        model, names = _task_names(client, lambda: KernelPCA(**PARAMS, n_landmarks=400).fit(
            _data()))
    assert model.statistics_.gram.numblocks == (3, 3)
    assert "below_diagonal_inverse" in names
    assert not {"solved_block", "added_products"} & names
    _assert_same(model, _single_process(n_landmarks=400))
    with dask.config.set({SOLVE_KEY: "tiles", PRODUCTS_KEY: "by hand"}):
        with pytest.raises(InvalidParameterError, match="'auto', 'solves', 'inverse'"):
            KernelPCA(**PARAMS, n_landmarks=400).fit(_data())


def test_a_fraction_of_the_variance_takes_the_exact_trace_on_tiles(client):
    """n_components=0.1 on tiles: as many components, and the same model, as in one
    process, the exact trace by L^-1's tiles; n_components=None (every eigenpair) is
    refused with the way out, K_mm keeping more landmarks than the factor by columns
    takes."""
    with dask.config.set({SOLVE_KEY: "tiles"}):
        model, names = _task_names(client, lambda: KernelPCA(
            **{**PARAMS, "n_components": 0.1}, n_landmarks=400).fit(_data()))
    assert "below_diagonal_inverse" in names
    with dask.config.set({SOLVE_KEY: "tiles"}):
        with pytest.raises(InvalidParameterError, match="asks for every eigenpair"):
            model.set_n_components(None)
    reference = _single_process(n_components=0.1, n_landmarks=400)
    assert model.n_components_ == reference.n_components_
    _assert_same(model, reference)
    np.testing.assert_allclose(model.explained_variance_ratio_,
                               reference.explained_variance_ratio_, rtol=1e-8)


def test_a_linear_fit_on_tiles_has_the_exact_total(client):
    """The tiled pass adds up the rows for the linear kernel, as the row pass does: the
    centred trace equals numpy's sum of squared deviations of rows of mean 100 to 1e-10."""
    X = _data() + 100.0
    with dask.config.set({SOLVE_KEY: "tiles"}):
        model = KernelPCA(3, kernel="linear", n_landmarks=100, random_state=0,
                          solver="nystrom").fit(X)
    values = X.compute()
    expected = float(((values - values.mean(axis=0)) ** 2).sum())
    assert model.total_variance_kind_ == "exact"
    np.testing.assert_allclose(model.centred_trace_, expected, rtol=1e-10)


def test_tiles_refuse_data_chunked_along_the_features_with_the_fix(client):
    """The tiles' block function takes whole rows: feature chunks are refused, naming the
    rechunk and the one-worker way, before the pass."""
    X = _data().rechunk((1000, 4))
    with dask.config.set({SOLVE_KEY: "tiles"}), pytest.raises(
            InvalidParameterError, match=r"2 chunks along its features.*rechunk"):
        KernelPCA(**PARAMS, n_landmarks=100).fit(X)


def test_a_landmark_matrix_of_low_rank_takes_one_process_pivoted_factor(client):
    """A smooth kernel on 400 landmarks (K_mm of rank about 30 at rcond 1e-3): the factor
    is one process's pivoted one, made by columns, the problem G's kept block gathered from
    the tiles; the single-process model to 1e-10, within the workers' limits."""
    params = {**PARAMS, "gamma": 0.005, "rcond": 1e-3, "n_landmarks": 400}
    with dask.config.set({SOLVE_KEY: "tiles"}):
        model = _watched(client, lambda: KernelPCA(**params).fit(_data()))
    reference = _single_process(**params)
    assert model.statistics_.gram.numblocks == (3, 3)
    assert model.landmark_rank_ == reference.landmark_rank_ <= 400 // 8
    _assert_same(model, reference, rtol=1e-10)
    # Every eigenpair is an r x r problem here: served, as in one process.
    with dask.config.set({SOLVE_KEY: "tiles"}):
        model.set_n_components(None)
    reference.set_n_components(None)
    assert model.n_components_ == reference.n_components_ > params["n_components"]
    largest = reference.eigenvalues_[0]
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=0,
                               atol=1e-10 * largest)
    _assert_same(_leading(model, params["n_components"]),
                 _leading(reference, params["n_components"]), rtol=1e-10)


def test_a_rank_deficient_landmark_matrix_takes_the_jitter(client):
    """100 landmarks repeated: K_mm has rank 300 of 400, more than the factor by columns
    keeps (m / 8). The tiled factor of K_mm + tau I gives the single-process (pivoted)
    model's eigenvalues and embeddings, up to sign."""
    X = _data()
    Z = np.vstack([X[:300].compute(), X[:100].compute()])
    with dask.config.set(scheduler="threads"):
        reference = KernelPCA(**PARAMS, landmarks=Z).fit(X)
    assert reference.landmark_rank_ == 300
    with dask.config.set({SOLVE_KEY: "tiles"}):
        model = KernelPCA(**PARAMS, landmarks=Z).fit(X)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-8)
    rows = X[:500].compute()
    Y, expected = model.transform(rows), reference.transform(rows)
    signs = np.sign(np.sum(Y * expected, axis=0))
    np.testing.assert_allclose(Y * signs, expected, atol=1e-8 * np.abs(expected).max())
