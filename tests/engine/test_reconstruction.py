"""Pre-images and the reconstruction error (docs/design.md §6): exact at m = n, independent of
chunking and scheduler, one more pass for the pre-image map."""

from __future__ import annotations

import collections
from functools import partial

import dask
import dask.array as da
import numpy as np
import pytest
from _counting import CountingRows
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.preprocessing import KernelCenterer

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.model.parameters import resolve_kernel_params

N, P = 120, 4

KERNELS = [
    ("rbf", {"gamma": 0.3}),
    ("laplacian", {"gamma": 0.2}),
    ("polynomial", {"gamma": 0.2, "degree": 2, "coef0": 1.0}),
    ("matern", {"gamma": 0.3, "kernel_params": {"nu": 1.5}}),
]


def _data(n=N, seed=0, scale=1.0):
    return scale * np.random.default_rng(seed).normal(size=(n, P))


def _pair_kernel(a, b, *, name, params):
    """scikit-learn calls a callable kernel on one pair of rows at a time."""
    return pairwise_kernel(a[None], b[None], name, **params)[0, 0]


def _sklearn_reference(kernel, extra, q, alpha, X):
    """scikit-learn's KernelPCA with the same kernel (a callable where it has no such name)."""
    if kernel in ("rbf", "polynomial", "linear"):
        sk_kernel = "poly" if kernel == "polynomial" else kernel
        params = {k: v for k, v in extra.items() if k != "kernel_params"}
    else:
        resolved = resolve_kernel_params(kernel, P, gamma=extra.get("gamma"), degree=3,
                                         coef0=1.0, kernel_params=extra.get("kernel_params"))
        sk_kernel, params = partial(_pair_kernel, name=kernel, params=resolved), {}
    return SklearnKernelPCA(n_components=q, kernel=sk_kernel, fit_inverse_transform=True,
                            alpha=alpha, eigen_solver="dense", **params).fit(X)


def _every_row_a_landmark(kernel, extra, q, n=N, **more):
    return KernelPCA(n_components=q, kernel=kernel, n_landmarks=n, landmarks="uniform",
                     random_state=0, **extra, **more)


def _relative(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _centred_kernel_ridge(reference, alpha, X, Y_new):
    """scikit-learn's pre-images with an unpenalised intercept: its KernelRidge from the
    fit's embeddings to the rows less their mean, on the embeddings' kernel centred by its
    KernelCenterer (the kernel and parameters of ``reference``, as its inverse_transform
    takes them), plus the mean."""
    params = ({} if callable(reference.kernel) else
              {"gamma": reference.gamma_, "degree": reference.degree, "coef0": reference.coef0})

    def kernel(A, B):
        return pairwise_kernels(A, B, metric=reference.kernel, filter_params=True, **params)

    Y_fit, mean = reference.X_transformed_fit_, X.mean(axis=0)
    centerer = KernelCenterer().fit(kernel(Y_fit, Y_fit))
    ridge = KernelRidge(alpha=alpha, kernel="precomputed").fit(
        centerer.transform(kernel(Y_fit, Y_fit)), X - mean)
    return mean + ridge.predict(centerer.transform(kernel(Y_new, Y_fit)))


@pytest.mark.parametrize("kernel, extra", KERNELS, ids=[k for k, _ in KERNELS])
@pytest.mark.parametrize("q, alpha", [(2, 1.0), (5, 0.1), (10, 1e-2)])
def test_preimage_equals_sklearn_with_every_row_a_landmark(kernel, extra, q, alpha):
    """With m = n, inverse_transform(transform(X_new)) is scikit-learn's kernel ridge
    regression with an intercept (centred kernel and rows) on scikit-learn's KernelPCA
    embeddings, to 1e-6 (Frobenius)."""
    # scikit-learn calls a callable kernel once per pair of rows: fewer rows keep it fast.
    n = N if kernel in ("rbf", "polynomial") else 60
    X, X_new = _data(n), _data(30, seed=1)
    reference = _sklearn_reference(kernel, extra, q, alpha, X)
    expected = _centred_kernel_ridge(reference, alpha, X, reference.transform(X_new))
    kpca = _every_row_a_landmark(kernel, extra, q, n=n, fit_inverse_transform=True,
                                 alpha=alpha).fit(X)
    assert _relative(kpca.inverse_transform(kpca.transform(X_new)), expected) < 1e-6


def test_preimage_of_centred_rows_differs_from_sklearn_by_the_intercept_alone():
    """scikit-learn's own inverse_transform has no intercept: of rows with mean 0 and a
    kernel whose features of the embeddings have mean 0 (linear), it is the same map; with
    the rows moved by a constant, kpca-dask's pre-images move by it and scikit-learn's do
    not."""
    X = _data()
    X -= X.mean(axis=0)
    for shift in (0.0, 5.0):
        reference = _sklearn_reference("linear", {}, 3, 1e-3, X + shift)
        kpca = _every_row_a_landmark("linear", {}, 3, fit_inverse_transform=True,
                                     alpha=1e-3).fit(X + shift)
        got = kpca.inverse_transform(kpca.transform(X + shift))
        expected = reference.inverse_transform(reference.transform(X + shift))
        assert _relative(got, expected + shift) < 1e-8


@pytest.mark.parametrize("kernel, extra", KERNELS + [("cosine", {}), ("linear", {})],
                         ids=[k for k, _ in KERNELS] + ["cosine", "linear"])
@pytest.mark.parametrize("q", [1, 3])
def test_reconstruction_error_equals_exact_with_every_row_a_landmark(kernel, extra, q):
    """With m = n, the error equals |phi(x) - phi_bar|^2 - |y|^2 of exact kernel PCA to 1e-8,
    for training and new rows."""
    X, X_new = _data(), _data(40, seed=1, scale=1.5)
    exact = ExactKernelPCA(n_components=q, kernel=kernel, **extra).fit(X)
    kpca = _every_row_a_landmark(kernel, extra, q).fit(X)
    for rows in (X, X_new):
        assert _relative(kpca.reconstruction_error(rows), exact.reconstruction_error(rows)) < 1e-8


def test_reconstruction_error_of_exact_kernel_pca_from_the_gram_matrix():
    """The exact reference is the feature-space distance computed from the full Gram matrix."""
    X = _data()
    exact = ExactKernelPCA(n_components=3, kernel="rbf", gamma=0.3).fit(X)
    K = pairwise_kernel(X, X, "rbf", gamma=0.3)
    distance = np.diag(K) - 2 * K.mean(axis=1) + K.mean()  # |phi(x_i) - phi_bar|^2
    Y = exact.eigenvectors_ * np.sqrt(exact.eigenvalues_)  # training components, exactly
    np.testing.assert_allclose(exact.reconstruction_error(X), distance - (Y**2).sum(axis=1),
                               rtol=1e-10, atol=1e-12)


def _fitted_for_chunking(X):
    return KernelPCA(n_components=3, gamma=0.3, n_landmarks=40, random_state=0,
                     fit_inverse_transform=True, alpha=0.1).fit(X)


@pytest.mark.parametrize("rows", [17, 60])
def test_preimage_map_does_not_depend_on_chunking(rows):
    """Pre-images and errors are the same to 1e-10 for any row chunking of the training data.

    (The dual coefficients themselves are not compared: along the near-null directions
    of k(Y_Z, Y_Z) they are ill-determined, while the pre-images they give are not.)
    """
    X = _data(300)
    one = _fitted_for_chunking(da.from_array(X, chunks=(300, P)))
    other = _fitted_for_chunking(da.from_array(X, chunks=(rows, P)))
    Y = one.transform(X)
    X_hat = one.inverse_transform(Y)
    assert np.abs(other.inverse_transform(Y) - X_hat).max() < 1e-10 * np.abs(X_hat).max()
    errors = [model.reconstruction_error(da.from_array(X, chunks=(rows, P))).compute()
              for model in (one, other)]
    np.testing.assert_allclose(errors[1], errors[0], rtol=1e-10)


@pytest.mark.slow
def test_preimage_map_same_on_a_process_cluster(process_cluster):
    """Threads and a distributed LocalCluster with processes give the same pre-images and
    errors to 1e-10."""
    from distributed import Client

    X = da.from_array(_data(300), chunks=(50, P))
    local = _fitted_for_chunking(X)
    with Client(process_cluster):
        remote = _fitted_for_chunking(X)
        X_hat = remote.inverse_transform(remote.transform(X)).compute()
        errors = remote.reconstruction_error(X).compute()
    expected = local.inverse_transform(local.transform(X)).compute()
    assert np.abs(X_hat - expected).max() < 1e-10 * np.abs(expected).max()
    np.testing.assert_allclose(errors, local.reconstruction_error(X).compute(), rtol=1e-10)


def test_fit_inverse_transform_costs_one_more_pass():
    """With given landmarks, fitting the pre-image map reads each chunk exactly twice."""
    source = CountingRows(_data(400))
    X = da.from_array(source, chunks=(50, -1), asarray=True, fancy=False)
    KernelPCA(3, landmarks=source.values[::10], n_landmarks=40,
              fit_inverse_transform=True).fit(X)
    assert source.reads == collections.Counter({start: 2 for start in range(0, 400, 50)})


def test_inverse_transform_and_errors_stay_lazy():
    """For dask input nothing is computed until asked: both return dask arrays."""
    model = _fitted_for_chunking(_data(300))
    X = da.from_array(_data(100, seed=2), chunks=(30, P))
    computed = []

    def counting_get(dsk, keys, **kwargs):
        computed.append(keys)
        return dask.get(dsk, keys, **kwargs)

    with dask.config.set(scheduler=counting_get):
        X_hat = model.inverse_transform(model.transform(X))
        errors = model.reconstruction_error(X)
        scores = model.score_samples(X)
    assert not computed
    assert isinstance(X_hat, da.Array) and X_hat.chunks == ((30, 30, 30, 10), (P,))
    assert isinstance(errors, da.Array) and errors.chunks == ((30, 30, 30, 10),)
    np.testing.assert_array_equal(scores.compute(), -errors.compute())


def test_denoising_reduces_the_error_of_noisy_rows():
    """Pre-images of noisy rows near a curve lie closer to the clean rows than the noisy ones."""
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2 * np.pi, 600)
    clean = np.column_stack([np.cos(t), np.sin(t)])
    noisy = clean + 0.15 * rng.normal(size=clean.shape)
    kpca = KernelPCA(n_components=3, gamma=2.0, n_landmarks=150, random_state=0,
                     fit_inverse_transform=True, alpha=1.0).fit(noisy)
    denoised = kpca.inverse_transform(kpca.transform(noisy))
    assert np.mean((denoised - clean) ** 2) < 0.7 * np.mean((noisy - clean) ** 2)


@pytest.mark.parametrize("kernel, extra", KERNELS + [("cosine", {}), ("linear", {})],
                         ids=[k for k, _ in KERNELS] + ["cosine", "linear"])
def test_reconstructions_hold_the_mean_for_every_kernel(kernel, extra):
    """The pre-images of the training rows have the training rows' mean, for every kernel (the
    map's intercept is the fit's mean), also for rows far from the origin."""
    X = 100.0 + _data()
    kpca = KernelPCA(n_components=3, kernel=kernel, n_landmarks=40, random_state=0,
                     fit_inverse_transform=True, alpha=0.1, **extra).fit(X)
    X_hat = kpca.inverse_transform(kpca.transform(X))
    np.testing.assert_allclose(X_hat.mean(axis=0), X.mean(axis=0), rtol=1e-10)


@pytest.mark.parametrize("alpha", [0.0, 1e-12])
def test_linear_reconstruction_is_eofs_reconstructed_field_plus_mean(alpha):
    """A linear fit of eofs' SST anomalies (sqrt(cos lat) weights, every winter a landmark)
    reconstructs from 6 and from 3 modes eofs' reconstructedField(k) plus the field's mean,
    in its units, NaN on land, to 1e-8 of the field's largest value."""
    pytest.importorskip("eofs")
    from _eof_data import sqrt_coslat, sst
    from eofs.xarray import Eof

    field = sst()
    solver = Eof(field, weights=sqrt_coslat(field).values[:, None])
    kpca = KernelPCA(n_components=6, kernel="linear", n_landmarks=50, landmarks="uniform",
                     weights=sqrt_coslat(field), fit_inverse_transform=True,
                     alpha=alpha).fit(field)
    for k in (6, 3):
        got = kpca.inverse_transform(kpca.transform(field), n_components=k)
        want = solver.reconstructedField(k) + field.mean("time")
        np.testing.assert_allclose(got.values, want.values, rtol=0, equal_nan=True,
                                   atol=1e-8 * np.nanmax(np.abs(want.values)))
