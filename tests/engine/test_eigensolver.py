"""The block Krylov eigensolver against LAPACK's dense eigendecomposition on hard spectra."""

from __future__ import annotations

import numpy as np
import pytest

from kpca_dask.engine.solve.eigensolver import estimate_trace, leading_eigenpairs


def _operator(values, seed=0):
    """A dense symmetric matrix with the given eigenvalues in a random basis."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(values.size, values.size)))
    M = (Q * values) @ Q.T
    return 0.5 * (M + M.T)


SPECTRA = {
    # 1 / j: the slow decay of a wide rbf or a laplacian kernel
    "slow decay": 1.0 / np.arange(1, 601),
    # tight groups: ten pairs of eigenvalues 1e-7 apart, then a tail
    "clustered": np.concatenate([np.repeat(np.linspace(2.0, 1.0, 10), 2)
                                 + np.tile([0.0, 1e-7], 10), 0.5 / np.arange(1, 581)]),
    # fast decay to the rounding floor
    "geometric": np.geomspace(1.0, 1e-16, 600),
}


@pytest.mark.parametrize("name", list(SPECTRA))
def test_leading_eigenpairs_equal_the_dense_ones_with_small_residuals(name):
    values = SPECTRA[name]
    M = _operator(values)
    q = 10
    pairs = leading_eigenpairs(lambda V: M @ V, M.shape[0], q)
    exact_values, exact_vectors = np.linalg.eigh(M)
    exact_values, exact_vectors = exact_values[::-1][:q], exact_vectors[:, ::-1][:, :q]
    np.testing.assert_allclose(pairs.values, exact_values, rtol=1e-10)
    # The certificate: the stored residuals are the true ones, and small.
    true = np.linalg.norm(M @ pairs.vectors - pairs.vectors * pairs.values, axis=0)
    np.testing.assert_allclose(pairs.residuals, true, rtol=1e-3, atol=1e-15)
    assert pairs.residuals.max() <= 1e-11 * values.max()
    # The leading subspace (within a cluster only the span is defined).
    np.testing.assert_allclose(np.linalg.svd(exact_vectors.T @ pairs.vectors)[1], 1.0,
                               atol=1e-9)


def test_the_result_is_reproducible_with_its_seed():
    M = _operator(SPECTRA["slow decay"])
    a = leading_eigenpairs(lambda V: M @ V, 600, 5, seed=3)
    b = leading_eigenpairs(lambda V: M @ V, 600, 5, seed=3)
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.vectors, b.vectors)


def test_a_rank_deficient_operator_gives_zero_eigenvalues_without_breaking_down():
    values = np.concatenate([np.arange(5.0, 0.0, -1.0), np.zeros(195)])
    M = _operator(values)
    pairs = leading_eigenpairs(lambda V: M @ V, 200, 8)
    np.testing.assert_allclose(pairs.values[:5], [5, 4, 3, 2, 1], rtol=1e-12)
    np.testing.assert_allclose(pairs.values[5:], 0.0, atol=1e-12)


def test_a_small_operator_is_solved_exactly_on_its_whole_space():
    M = _operator(np.arange(12.0, 0.0, -1.0))
    pairs = leading_eigenpairs(lambda V: M @ V, 12, 4)
    np.testing.assert_allclose(pairs.values, [12, 11, 10, 9], rtol=1e-12)
    assert estimate_trace(lambda V: M @ V, pairs) == (pytest.approx(78.0), 0.0)


@pytest.mark.parametrize("name", list(SPECTRA))
def test_the_trace_estimate_is_within_its_standard_error(name):
    M = _operator(SPECTRA[name])
    pairs = leading_eigenpairs(lambda V: M @ V, M.shape[0], 10)
    estimate, error = estimate_trace(lambda V: M @ V, pairs)
    assert abs(estimate - np.trace(M)) <= 4 * error + 1e-12 * np.trace(M)
    assert error <= 0.05 * np.trace(M)


def _diagonal(values):
    """M = diag(values) as an operator: a Krylov method started from a random block sees
    any orthogonal basis of it alike, and its products cost O(size) a column."""
    return lambda V: values[:, None] * V


def test_an_exactly_flat_spectrum_is_solved_in_one_block_of_products():
    """M = c I: every vector is an eigenvector, so the first block's residuals are rounding
    and the solver stops after applying M to that block alone."""
    pairs = leading_eigenpairs(_diagonal(np.full(600, 3.0)), 600, 10, budget=300)
    assert pairs.converged and pairs.products == 20
    np.testing.assert_allclose(pairs.values, 3.0, rtol=1e-14)
    assert pairs.residuals.max() <= 1e-14


def test_a_nearly_flat_spectrum_stops_unconverged_within_the_budget():
    """600 eigenvalues within 1e-6 of each other (a narrow kernel): after a cycle of
    products the residuals are far from the tolerance, another cycle would pass the budget
    (the dense way's cost, r / 2 columns), and the solver stops within it."""
    flat = _diagonal(1.0 + 1e-6 * np.linspace(1.0, 0.0, 600))
    pairs = leading_eigenpairs(flat, 600, 10, budget=300)
    assert not pairs.converged
    assert pairs.products <= 300
    assert pairs.residuals.max() > 1e3 * 1e-12  # far from the tolerance when it stopped


@pytest.mark.parametrize("name", list(SPECTRA))
def test_a_budget_leaves_the_spectra_that_converge_as_they_were(name):
    """With the dense way's budget (r / 2 columns), decaying and clustered spectra that
    converge within the first cycle of products do so as without one: the same products,
    the same pairs."""
    apply = _diagonal(SPECTRA[name])
    free = leading_eigenpairs(apply, 600, 10)
    budgeted = leading_eigenpairs(apply, 600, 10, budget=300)
    assert budgeted.converged and budgeted.products == free.products
    np.testing.assert_array_equal(budgeted.values, free.values)
class _Stop(Exception):
    pass


@pytest.mark.parametrize("stop_after", [1, 2, 4, 5, 9])
def test_going_on_from_a_reported_state_ends_as_an_uninterrupted_run(stop_after):
    """A run stopped after any product (the first, mid-cycle, at a cycle's end, just after
    a restart, in a later cycle) and resumed from the state it reported gives the
    uninterrupted result bitwise, with as many passes in all."""
    M = _operator(SPECTRA["slow decay"])
    # Small blocks and cycles of 4 products, so that the run restarts several times.
    options = dict(oversample=2, depth=4)
    whole = leading_eigenpairs(lambda V: M @ V, M.shape[0], 10, **options)
    reported = []

    def report(state):
        reported.append(state)
        if len(reported) == stop_after:
            raise _Stop

    with pytest.raises(_Stop):
        leading_eigenpairs(lambda V: M @ V, M.shape[0], 10, on_product=report, **options)
    resumed = leading_eigenpairs(lambda V: M @ V, M.shape[0], 10, state=reported[-1],
                                 **options)
    np.testing.assert_array_equal(resumed.values, whole.values)
    np.testing.assert_array_equal(resumed.vectors, whole.vectors)
    assert (resumed.products, resumed.passes) == (whole.products, whole.passes)
    assert whole.passes > 9
