"""The small problem's two ways (dense and iterative) give the same model, certified."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.passes.nystrom import compute_pass
from kpca_dask.engine.solve.nystrom import DENSE_RANK, solve_small_problem

CASES = {
    # fast decay, well-conditioned K_mm
    "rbf": ("rbf", {"gamma": 0.05}, "normal"),
    # slow decay: the laplacian kernel's spectrum falls like a power of j
    "laplacian": ("laplacian", {"gamma": 0.5}, "normal"),
    # clustered: isotropic data in 12 dimensions, a wide rbf -> 12 near-equal
    # leading eigenvalues (the linear part of the kernel)
    "clustered": ("rbf", {"gamma": 1e-3}, "sphere"),
}


def _data(kind, n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    if kind == "sphere":
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


def _embedding(problem, X, Z, kernel, params):
    s = problem.solution
    return pairwise_kernel(X, Z, kernel, **params) @ s.projection - s.offset


@pytest.mark.parametrize("case", list(CASES))
def test_dense_and_iterative_ways_give_the_same_model(case):
    kernel, params, kind = CASES[case]
    X = _data(kind, 3000, 12)
    Z = X[:: 3000 // 1000][:1000]  # 1000 landmarks
    stats = compute_pass(da.from_array(X, chunks=500), Z, kernel, params)
    dense = solve_small_problem(stats, Z, kernel, params, 1e-10, 10, method="dense")
    iterative = solve_small_problem(stats, Z, kernel, params, 1e-10, 10, method="iterative")
    assert (dense.method, iterative.method) == ("dense", "iterative")
    a, b = dense.solution, iterative.solution
    np.testing.assert_allclose(b.eigenvalues, a.eigenvalues, rtol=1e-8)
    # trace(M): exact on the dense way; on the iterative way exact or estimated
    # (n is small here beside m), within its standard error; an exact one through
    # K_kk^{-1}, whose condition reaches 1e10 here, to 1e-6.
    t = stats.diagonal_sum
    trace_a, trace_b = a.eigenvalues[0] / a.explained_variance_ratio[0], (
        b.eigenvalues[0] / b.explained_variance_ratio[0])
    assert abs(trace_b - trace_a) <= 4 * b.trace_error_std * t + 1e-6 * trace_a
    assert abs(b.trace_error - a.trace_error) <= 4 * b.trace_error_std + 1e-8
    assert b.trace_error_std * t <= 5e-3 * trace_a
    new = _data(kind, 200, 12, seed=1)
    ya, yb = _embedding(dense, new, Z, kernel, params), _embedding(iterative, new, Z, kernel,
                                                                     params)
    scale = np.abs(ya).max(axis=0)
    # The same signs (fixed deterministically), the same columns to 1e-8.
    np.testing.assert_allclose(yb / scale, ya / scale, atol=1e-8)
    # The certificate: at the products' rounding floor, which a K_mm of condition
    # 1e10 (the clustered case's wide rbf) raises to a few 1e-9.
    assert b.residuals.max() <= 1e-8 * b.eigenvalues[0]
    np.testing.assert_allclose(iterative.novelty.mean_weights, dense.novelty.mean_weights,
                               rtol=1e-10, atol=1e-12)


def test_a_fraction_of_variance_gets_the_same_components_both_ways():
    kernel, params, _ = CASES["laplacian"]
    X = _data("normal", 2000, 12)
    Z = X[:600]
    stats = compute_pass(da.from_array(X, chunks=500), Z, kernel, params)
    dense = solve_small_problem(stats, Z, kernel, params, 1e-10, 0.05, method="dense").solution
    iterative = solve_small_problem(stats, Z, kernel, params, 1e-10, 0.05,
                                    method="iterative").solution
    assert dense.eigenvalues.size == iterative.eigenvalues.size > 1
    np.testing.assert_allclose(iterative.eigenvalues, dense.eigenvalues, rtol=1e-8)


@pytest.mark.parametrize("method", ["dense", "iterative"])
def test_every_point_a_landmark_is_exact_kernel_pca(method):
    """m = n: the eigenvalues of the centred kernel matrix J K J, to 1e-10."""
    X = _data("normal", 400, 5)
    params = {"gamma": 0.2}
    stats = compute_pass(da.from_array(X, chunks=100), X, "rbf", params)
    solution = solve_small_problem(stats, X, "rbf", params, 1e-12, 8, method=method).solution
    K = pairwise_kernel(X, X, "rbf", **params)
    J = np.eye(400) - 1.0 / 400
    exact = np.linalg.eigvalsh(J @ K @ J)[::-1][:8]
    np.testing.assert_allclose(solution.eigenvalues, exact, rtol=1e-10)
    embedding = K @ solution.projection - solution.offset
    values, vectors = np.linalg.eigh(J @ K @ J)
    expected = vectors[:, ::-1][:, :8] * np.sqrt(values[::-1][:8])
    signs = np.sign(np.sum(embedding * expected, axis=0))
    np.testing.assert_allclose(embedding, expected * signs, atol=1e-9)


def test_above_the_crossover_auto_takes_the_iterative_way_and_not_for_every_component():
    """Past DENSE_RANK features (1600 landmarks, all kept) "auto" solves 5 components the
    iterative way, and every component (n_components=None) the dense way."""
    kernel, params, _ = CASES["rbf"]
    X = _data("normal", DENSE_RANK + 300, 6)
    Z = X[: DENSE_RANK + 100]
    stats = compute_pass(da.from_array(X, chunks=600), Z, kernel, {"gamma": 0.5})
    auto = solve_small_problem(stats, Z, kernel, {"gamma": 0.5}, 1e-10, 5)
    assert auto.landmark_rank == DENSE_RANK + 100  # the data: every landmark kept
    assert auto.method == "iterative"
    everything = solve_small_problem(stats, Z, kernel, {"gamma": 0.5}, 1e-10, None)
    assert everything.method == "dense"


def test_the_trace_error_is_never_negative_when_rounding_takes_the_difference_below_zero():
    """t - trace(K_nys) is at least 0, but its computed value carries the features' rounding
    (about eps / rcond of t): a difference rounded below zero reads as 0, one above it is
    kept as it is."""
    from kpca_dask.blocks.statistics import PassStatistics
    from kpca_dask.engine.solve.nystrom import Spectrum, solution_of

    mean_feature = np.array([1.0, 0.0])
    n = 10
    spectrum = Spectrum(values=np.array([2.0, 1.0]), columns=np.eye(2), vectors=np.eye(2),
                        residuals=np.zeros(2), trace=3.0, trace_std=0.0)
    # trace(K_nys) = trace(M) + n |mu|^2 = 3 + 10 = 13
    for t, expected in [(13.0 - 1e-9, 0.0), (26.0, 0.5)]:
        stats = PassStatistics(n, np.zeros(2), np.zeros((2, 2)), t, 0, -1, np.zeros(2))
        error = solution_of(stats, spectrum, mean_feature, 2, False).trace_error
        assert error == expected
