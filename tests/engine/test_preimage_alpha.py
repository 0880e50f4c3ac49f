"""The pre-image map's ridge and intercept (docs/design.md §6): its generalised cross-validation
score from the pass's sums equals the hat matrix's, alpha="auto" minimises it, and on eofs'
SST example "auto" reconstructs unseen winters at least as well as the best of a grid."""

from __future__ import annotations

import dask
import numpy as np
import pytest

from kpca_dask import KernelPCA
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.preimages.reconstruction import preimage_basis

N, P = 200, 5


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2 * np.pi, N)
    curve = np.column_stack([np.cos(t), np.sin(t), np.cos(2 * t), t / 3, np.sin(3 * t)])
    return 10.0 + curve + 0.1 * rng.normal(size=(N, P))  # a mean far from 0


def _fitted(X, alpha):
    return KernelPCA(n_components=4, gamma=0.3, n_landmarks=40, random_state=0,
                     fit_inverse_transform=True, alpha=alpha).fit(X)


def _features(kpca, Y):
    """g(y) = W_Y^T k(y, Y_Z) of the fitted map, in memory."""
    centres = kpca.preimage_centres_
    basis = preimage_basis(centres, kpca.kernel_, kpca.kernel_params_, kpca.fit_settings_.rcond)
    return pairwise_kernel(np.asarray(Y), centres, kpca.kernel_, **kpca.kernel_params_) @ basis


def _hat_matrix_gcv(G, X, alpha):
    """GCV per value from the n x n hat matrix of ridge regression with an intercept."""
    n = len(G)
    Gc = G - G.mean(axis=0)
    hat = np.full((n, n), 1.0 / n) + Gc @ np.linalg.solve(Gc.T @ Gc + alpha * np.eye(G.shape[1]),
                                                         Gc.T)
    rss = np.sum((X - hat @ X) ** 2)
    return n * rss / (n - np.trace(hat)) ** 2 / X.shape[1]


@pytest.mark.parametrize("alpha", [1e-4, 1e-2, 1.0])
def test_gcv_score_equals_the_hat_matrix(data, alpha):
    """inverse_alpha_score_, from the pass's sums, is n RSS / (n - df)^2 / p of the hat matrix
    of the same regression on n = 200 rows, to 1e-8."""
    kpca = _fitted(data, alpha)
    G = _features(kpca, kpca.transform(data))
    assert kpca.inverse_alpha_ == alpha
    assert kpca.inverse_alpha_score_ == pytest.approx(_hat_matrix_gcv(G, data, alpha), rel=1e-8)


@pytest.mark.parametrize("alpha", [1e-3, 1.0])
def test_preimages_are_ridge_regression_with_an_intercept(data, alpha):
    """x_hat(y) = x_bar + B^T (g(y) - g_bar), B the ridge solution on the centred training
    features and rows, to 1e-8; the training rows' pre-images keep their mean exactly."""
    kpca = _fitted(data, alpha)
    Y = kpca.transform(data)
    G = _features(kpca, Y)
    Gc, Xc = G - G.mean(axis=0), data - data.mean(axis=0)
    B = np.linalg.solve(Gc.T @ Gc + alpha * np.eye(G.shape[1]), Gc.T @ Xc)
    Y_new = kpca.transform(data[:20] + 0.05)
    expected = data.mean(axis=0) + (_features(kpca, Y_new) - G.mean(axis=0)) @ B
    np.testing.assert_allclose(kpca.inverse_transform(Y_new), expected, rtol=1e-8)
    np.testing.assert_allclose(kpca.inverse_transform(Y).mean(axis=0), data.mean(axis=0),
                               rtol=1e-10)


def test_auto_alpha_minimises_the_hat_matrix_gcv(data):
    """alpha="auto" lands on the least hat-matrix GCV of a fine grid (to 1e-6), and reports
    that score."""
    kpca = _fitted(data, "auto")
    G = _features(kpca, kpca.transform(data))
    grid = 10.0 ** np.linspace(-10, 2, 241)
    best = min(_hat_matrix_gcv(G, data, alpha) for alpha in grid)
    chosen = _hat_matrix_gcv(G, data, kpca.inverse_alpha_)
    assert chosen <= best * (1 + 1e-6)
    assert kpca.inverse_alpha_score_ == pytest.approx(chosen, rel=1e-8)


def test_auto_alpha_survives_save_and_load(data, tmp_path):
    """The chosen alpha, its score and the intercept are saved and loaded with the model."""
    import kpca_dask

    kpca = _fitted(data, "auto")
    loaded = kpca_dask.load(kpca.save(tmp_path / "model.zarr"))
    assert (loaded.inverse_alpha_, loaded.inverse_alpha_score_) == (
        kpca.inverse_alpha_, kpca.inverse_alpha_score_)
    np.testing.assert_array_equal(loaded.preimage_intercept_, kpca.preimage_intercept_)
    assert loaded.alpha == "auto"


# -- eofs' SST example ------------------------------------------------------------------------

GRID = [10.0**e for e in range(-6, 1)]


def _cross_validated_rmse(field, weights, alphas, folds=10):
    """RMSE of the reconstructions of winters left out of the fit (folds of every tenth
    winter), from 6 rbf modes, for each alpha; and the alphas "auto" chose."""
    squares, chosen, count = dict.fromkeys(alphas, 0.0), [], 0
    winters = np.arange(field.sizes["time"])
    for fold in range(folds):
        left_out = winters[fold::folds]
        train = field.isel(time=np.setdiff1d(winters, left_out))
        test = field.isel(time=left_out)
        for alpha in alphas:
            model = KernelPCA(n_components=6, kernel="rbf", weights=weights,
                              fit_inverse_transform=True, alpha=alpha,
                              random_state=0).fit(train)
            rebuilt = model.inverse_transform(model.transform(test))
            squares[alpha] += float(np.nansum((rebuilt.values - test.values) ** 2))
            if alpha == "auto":
                chosen.append(model.inverse_alpha_)
        count += int(np.isfinite(test.values).sum())
    return {alpha: np.sqrt(total / count) for alpha, total in squares.items()}, chosen


@pytest.mark.slow
def test_auto_alpha_on_sst_reconstructs_unseen_winters_as_well_as_the_best_grid_value():
    """On eofs' SST anomalies (sqrt(cos lat) weights, an rbf kernel, 6 modes), alpha="auto"
    reconstructs winters the fit has not seen (10-fold cross-validation) with an RMSE at most
    that of the best of alpha = 1e-6 ... 1; the default alpha=1.0 is far worse."""
    pytest.importorskip("eofs")
    from _eof_data import sqrt_coslat, sst

    field = sst()
    with dask.config.set(scheduler="synchronous"):  # 80 small fits: no thread pool per task
        rmse, chosen = _cross_validated_rmse(field, sqrt_coslat(field), [*GRID, "auto"])
    best = min(rmse[alpha] for alpha in GRID)
    assert rmse["auto"] <= best
    assert rmse[1.0] > 1.5 * rmse["auto"]
    assert all(1e-8 < alpha < 1e-2 for alpha in chosen)
