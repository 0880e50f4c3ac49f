"""KernelPCA(solver=...): the Gram way for wide data, chosen or asked for (docs/design.md §19).

The Gram way is the exact kernel PCA: equal to the dense reference (``ExactKernelPCA``,
and numpy's eigendecomposition of the centred kernel matrix) to 1e-10, and to the landmark
way with every sample a landmark. ``"auto"`` takes it for wide data that fit, with a kernel of
inner products or squared distances, and landmarks for everything that needs them; what a
Gram-way model cannot do is refused by name, and a refused fit leaves the estimator as it was.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy import sparse

import kpca_dask
from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import (
    InsufficientMemoryError,
    InvalidParameterError,
    NoStatisticsError,
    NotInvertibleError,
)

N, P, Q = 40, 120, 4
KERNELS = [("linear", {}), ("rbf", {"gamma": 0.004}), ("polynomial", {"gamma": 0.01}),
           ("cosine", {})]


@pytest.fixture(scope="module")
def wide() -> np.ndarray:
    rng = np.random.default_rng(3)
    modes = rng.normal(size=(3, P))
    return rng.normal(size=(N, 3)) * [3.0, 2.0, 1.0] @ modes + 0.3 * rng.normal(size=(N, P))


def _reference(X: np.ndarray, kernel: str, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """The leading eigenvalues of the centred kernel matrix and the scores, by numpy."""
    from sklearn.metrics.pairwise import pairwise_kernels

    K = pairwise_kernels(X, metric=kernel, **params)
    J = np.eye(len(X)) - 1.0 / len(X)
    lam, A = np.linalg.eigh(J @ K @ J)
    lam, A = lam[::-1][:Q], A[:, ::-1][:, :Q]
    return lam, A * np.sqrt(lam)


@pytest.mark.parametrize("kernel, params", KERNELS)
def test_the_gram_way_equals_the_dense_reference(wide, kernel, params):
    kpca = KernelPCA(Q, kernel=kernel, **params).fit(wide)
    assert kpca.solver_ == "gram"
    exact = ExactKernelPCA(Q, kernel=kernel, **params).fit(wide)
    lam, scores = _reference(wide, kernel, params)
    np.testing.assert_allclose(kpca.eigenvalues_, lam, rtol=1e-10)
    np.testing.assert_allclose(kpca.eigenvalues_, exact.eigenvalues_, rtol=1e-12)
    Y = kpca.transform(wide)
    np.testing.assert_allclose(np.abs(Y), np.abs(scores), atol=1e-10 * np.abs(scores).max())
    np.testing.assert_allclose(kpca.explained_variance_ratio_, exact.explained_variance_ratio_,
                               rtol=1e-12)
    assert kpca.total_variance_kind_ == "exact"


@pytest.mark.parametrize("kernel, params", KERNELS[:2])
def test_the_gram_way_equals_every_sample_a_landmark(wide, kernel, params):
    gram = KernelPCA(Q, kernel=kernel, **params, solver="gram").fit(wide)
    landmarks = KernelPCA(Q, kernel=kernel, **params, landmarks=wide, solver="nystrom").fit(wide)
    assert landmarks.solver_ == "nystrom" and landmarks.n_landmarks_ == N
    np.testing.assert_allclose(gram.eigenvalues_, landmarks.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(gram.transform(wide[:5]), landmarks.transform(wide[:5]),
                               atol=1e-8 * np.sqrt(gram.eigenvalues_[0]))


def test_auto_takes_landmarks_where_they_are_needed_or_better(wide):
    def way(X, **params):
        return KernelPCA(2, **params).fit(X).solver_

    assert way(wide) == "gram"
    assert way(da.from_array(wide, chunks=(10, 60))) == "gram"
    assert way(wide[:, :N]) == "gram"  # as many samples as features: still wide
    assert way(wide[:, :N - 1]) == "nystrom"  # fewer features than samples
    assert way(np.vstack([wide] * 4)) == "nystrom"  # more samples than features
    assert way(wide, kernel="laplacian") == "nystrom"  # no function of the Gram matrix
    assert way(wide, fit_inverse_transform=True) == "nystrom"  # a pre-image map
    assert way(wide, n_landmarks="auto") == "nystrom"  # a landmark search asked for
    assert way(wide, landmarks=wide[:10]) == "nystrom"  # landmarks given
    assert way(wide, n_landmarks=N // 2) == "gram"  # n^2 p / 2 = n m p: no dearer
    assert way(wide, n_landmarks=N // 2 - 1) == "nystrom"  # fewer landmarks: cheaper
    assert way(wide, solver="nystrom") == "nystrom"
    assert way(sparse.csr_matrix(wide)) == "nystrom"  # sparse rows keep landmarks
    assert way(pd.DataFrame(wide)) == "nystrom"  # a table keeps its names and frames
    assert way(wide, kernel="sigmoid") == "nystrom"  # not positive semi-definite
    with dask.config.set({"kpca-dask.memory-limit": "30 KiB"}):  # n x n beyond the memory
        assert way(da.from_array(wide, chunks=(10, 60)), n_landmarks=10,
                   landmarks="uniform") == "nystrom"
    assert KernelPCA(2).partial_fit(wide).solver_ == "nystrom"  # growing: landmark sums


@pytest.mark.parametrize("params, refused", [
    ({"fit_inverse_transform": True}, "pre-image"),
    ({"landmarks": "given"}, "landmarks given"),
])
def test_gram_refuses_what_it_cannot_do_and_keeps_the_estimator(wide, params, refused):
    if params.get("landmarks") == "given":
        params = {"landmarks": wide[:10]}
    kpca = KernelPCA(2, solver="gram", **params)
    with pytest.raises(InvalidParameterError, match=refused):
        kpca.fit(wide)
    assert not hasattr(kpca, "model_")
    with dask.config.set({"kpca-dask.memory-limit": "30 KiB"}):
        with pytest.raises(InsufficientMemoryError, match='solver="nystrom"'):
            KernelPCA(2, solver="gram").fit(da.from_array(wide, chunks=(10, 60)))
    with pytest.raises(InvalidParameterError, match="solver must be one of"):
        KernelPCA(2, solver="dense").fit(wide)
    with pytest.raises(InvalidParameterError, match="partial_fit"):
        KernelPCA(2, solver="gram").partial_fit(wide)
    with pytest.raises(InvalidParameterError, match="a table"):
        KernelPCA(2, solver="gram").fit(pd.DataFrame(wide))


def test_scores_as_the_landmark_way_gives_them(wide):
    """fit_transform is the fit's own scores, float32 kept for float32 rows or dtype, lazy
    for lazy rows."""
    kpca = KernelPCA(Q)
    Y = kpca.fit_transform(wide)
    np.testing.assert_allclose(Y, kpca.transform(wide), atol=1e-10 * np.abs(Y).max())
    assert Y.dtype == np.float64
    assert KernelPCA(Q).fit(wide.astype(np.float32)).transform(wide).dtype == np.float64
    single = KernelPCA(Q).fit(wide.astype(np.float32))
    assert single.transform(wide.astype(np.float32)).dtype == np.float32
    assert KernelPCA(Q, dtype="float32").fit_transform(wide).dtype == np.float32
    lazy = da.from_array(wide, chunks=(10, 60))
    scores = KernelPCA(Q).fit_transform(lazy)
    assert isinstance(scores, da.Array) and scores.chunks[0] == lazy.chunks[0]
    np.testing.assert_allclose(scores.compute(), Y, atol=1e-10 * np.abs(Y).max())


def test_a_gram_model_refuses_the_landmark_ways_by_name(wide):
    kpca = KernelPCA(Q).fit(wide)
    before = kpca.model_
    for call, words in [(lambda: kpca.partial_fit(wide), "add rows"),
                        (lambda: kpca.set_n_components(2), "re-solve")]:
        with pytest.raises(InvalidParameterError, match=words):
            call()
    with pytest.raises(NotInvertibleError, match="inverse_transform"):
        kpca.inverse_transform(np.zeros((1, Q)))
    with pytest.raises(NoStatisticsError, match="Gram way"):
        kpca_dask.merge([kpca, kpca])
    with pytest.raises(AttributeError, match="no landmarks_"):
        kpca.landmarks_  # noqa: B018 - the read is what is tested
    assert not hasattr(kpca, "statistics_") and not hasattr(kpca, "unknown_")
    assert kpca.model_ is before and kpca.n_components_ == Q


def test_a_field_by_the_gram_way(tmp_path, wide):
    """A weighted DataArray field stored in Zarr: labelled lazy scores, maps, a rotation, the
    bootstrap and a model file, each as the ExactKernelPCA of the same parameters gives."""
    values = wide.reshape(N, 10, 12).astype(np.float32)
    field = xr.DataArray(values, dims=("time", "lat", "lon"), name="t2m",
                         coords={"time": np.arange(N), "lat": np.linspace(-45, 45, 10),
                                 "lon": np.arange(12) * 30.0})
    field.chunk({"time": 10}).to_dataset().to_zarr(tmp_path / "field.zarr")
    X = xr.open_dataset(tmp_path / "field.zarr", engine="zarr", chunks={})["t2m"]
    params = {"kernel": "rbf", "weights": "coslat"}
    kpca = KernelPCA(Q, **params).fit(X)
    exact = ExactKernelPCA(Q, **params).fit(X)
    assert kpca.solver_ == "gram" and kpca.sample_dim_ == "time"
    scores = kpca.transform(X)
    assert scores.dims == ("time", "mode") and list(scores["mode"]) == [1, 2, 3, 4]
    np.testing.assert_allclose(scores.values, exact.transform(X).values, atol=1e-12)
    maps = kpca.patterns(X, kind="eof")
    assert maps.dims == ("mode", "lat", "lon")
    np.testing.assert_allclose(maps.values, exact.patterns(X, kind="eof").values, atol=1e-12)
    rotated = kpca_dask.rotate(kpca, X, n_components=3)
    np.testing.assert_allclose(rotated.explained_variance_ratio_,
                               kpca_dask.rotate(exact, X, n_components=3).explained_variance_ratio_,
                               rtol=1e-10)
    replicates = kpca_dask.bootstrap(kpca, X, 4, seed=0)
    reference = kpca_dask.bootstrap(exact, X, 4, seed=0)
    np.testing.assert_allclose(replicates["explained_variance"].values,
                               reference["explained_variance"].values, rtol=1e-10)
    loaded = kpca_dask.load(kpca.save(tmp_path / "model.zarr"))
    assert type(loaded) is ExactKernelPCA  # the exact model it holds, as its file says
    np.testing.assert_allclose(loaded.transform(X[:5]).values, kpca.transform(X[:5]).values,
                               atol=1e-12)
