"""ExactKernelPCA's solvers: which one a fit takes, and the matrix-free fit (docs/design.md §13).

``eigen_solver="dense"`` builds the n x n Gram matrix and eigendecomposes it
(docs/design.md §1); ``"matrix-free"`` finds the leading q eigenpairs of the
centred kernel matrix from products alone
(:class:`~kpca_dask.engine.exact.matrix_free.CentredKernel`, one pass over the rows
each) by the block Krylov method of docs/design.md §11, and certifies each by
its residual ``|J K J v - lambda v|``; ``"auto"`` takes the dense solver while its
matrices fit the memory available (:func:`dense_fits`). The matrix-free fit
can save the solver's state after every product (:mod:`kpca_dask.checkpoints.exact_checkpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._memory import memory_budget
from ..blocks.signs import fix_signs
from ..checkpoints.exact_checkpoint import SolveCheckpoint, solve_identity
from ..engine.exact.matrix_free import CentredKernel, RowPanels, row_panels
from ..engine.kernel_params import resolve_kernel
from ..engine.solve.components import ZERO_EIGENVALUE_RTOL, n_components_for
from ..engine.solve.eigensolver import KrylovState, leading_eigenpairs
from ..errors import InvalidInputError, InvalidParameterError
from ..model.inputs import FitInput, holds_sparse_rows, lazy_or_none, lazy_rows
from ..model.parameters import EIGEN_SOLVERS
from ..model.precomputed import PRECOMPUTED
from ..validation import is_integer
from .exact_model import ExactFit, ExactModel

__all__ = ["EIGEN_SOLVERS", "MATRIX_FREE_TOL", "DENSE_WORDS", "chosen_solver", "dense_fits",
           "exact_kernel", "fit_matrix_free", "MatrixFreeFit"]

#: The matrix-free solve stops when every residual is at most this fraction of lambda_1:
#: eigenvalues are then within (1e-10 lambda_1)^2 / gap of the exact ones.
MATRIX_FREE_TOL = 1e-10

#: The dense solver holds about this many n x n float64 matrices at once: the Gram
#: matrix, LAPACK's eigenvectors and its workspace.
DENSE_WORDS = 2.5


def dense_fits(n: int, X) -> bool:
    """Whether the dense solver's :data:`DENSE_WORDS` n^2 float64 words fit the memory
    available where ``X`` is computed.

    Examples
    --------
    >>> import dask
    >>> import dask.array as da
    >>> with dask.config.set({"kpca-dask.memory-limit": "1 GiB"}):
    ...     dense_fits(10_000, da.zeros((10_000, 3))), dense_fits(5_000, da.zeros((5_000, 3)))
    (False, True)
    """
    budget = memory_budget(lazy_or_none(X))
    return DENSE_WORDS * 8 * n * n <= budget.free_bytes


def chosen_solver(eigen_solver: str, given: FitInput, kernel, n_components) -> str:
    """"dense" or "matrix-free": what ``eigen_solver`` names, or for "auto" the dense solver
    while it fits (and for a precomputed kernel, or a number of components that is not an
    int, which only it can give), the matrix-free one beyond."""
    n = given.data.shape[0]
    if eigen_solver == "auto":
        if kernel == PRECOMPUTED or not is_integer(n_components) or dense_fits(n, given.data):
            return "dense"
        return "matrix-free"
    if eigen_solver == "matrix-free":
        _check_matrix_free(given, kernel, n_components)
    return eigen_solver


def _check_matrix_free(given: FitInput, kernel, n_components) -> None:
    if kernel == PRECOMPUTED:
        raise InvalidParameterError(
            'eigen_solver="matrix-free" makes the kernel\'s tiles from the rows, and '
            'kernel="precomputed" gives none; use eigen_solver="dense" for a kernel matrix.')
    if not is_integer(n_components):
        raise InvalidParameterError(
            f'eigen_solver="matrix-free" finds a given number of leading eigenpairs, so '
            f"n_components must be an int; got {n_components!r}. A fraction of the variance "
            'or every component (None) needs the whole spectrum: eigen_solver="dense".')
    if holds_sparse_rows(given.data):
        raise InvalidInputError(
            'eigen_solver="matrix-free" takes dense rows; X is scipy.sparse. Pass X.toarray() '
            '(or a dask array of dense blocks), or use eigen_solver="dense".')


def exact_kernel(params: dict, X) -> tuple:
    """``(kernel, kernel parameters)`` of an exact fit: aliases resolved, a scikit-learn
    row-pair callable wrapped, defaults filled in and a gamma rule ("median", "scale")
    resolved from a seeded sample of ``X``'s rows, by
    :func:`~kpca_dask.engine.kernel_params.resolve_kernel` (as every fit's kernel is)."""
    # Only a rule reads rows, and it reads them from dask rows.
    rows = lazy_rows(X) if isinstance(params["gamma"], str) else X
    kernel = resolve_kernel(params, rows, rng=np.random.default_rng(0))
    return kernel.function, kernel.params


@dataclass(frozen=True)
class MatrixFreeFit:
    """What a matrix-free fit found: the model, its eigenpairs' certificates and how many
    products (passes over the data) the solve took in all."""

    model: ExactModel
    ratios: np.ndarray
    residuals: np.ndarray
    n_products: int

    @property
    def n_components(self) -> int:
        return self.model.eigenvalues.size

    def fitted(self, layout=None) -> ExactFit:
        """The fitted model of :class:`~kpca_dask.ExactKernelPCA` (``model_``), ``layout``
        the field's."""
        model = self.model
        rows = model.panels.rows
        return ExactFit(model.panels.kernel, model.panels.params, model.eigenvalues.copy(),
                        model.eigenvectors, self.ratios, "matrix-free", rows.shape[0],
                        rows.shape[1], rows=rows, lazy=True, by_panels=model,
                        residuals=self.residuals, n_products=self.n_products, layout=layout)


def fit_matrix_free(given: FitInput, params: dict, *, checkpoint=None,
                    on_product: Callable[[KrylovState], None] | None = None) -> MatrixFreeFit:
    """The leading eigenpairs of the centred kernel matrix of ``given``'s rows, matrix-free.

    ``params`` are ExactKernelPCA's (``get_params``); ``checkpoint`` a path
    where the solver's state is saved after every product and from which a
    later fit with the same data and parameters goes on; ``on_product`` is
    called with the solver's state after every product.
    """
    _check_matrix_free(given, params["kernel"], params["n_components"])
    X = lazy_rows(given.data)
    kernel, kernel_params = exact_kernel(params, X)
    n = X.shape[0]
    count = min(int(params["n_components"]), n)
    saved = None
    if checkpoint is not None:
        saved = SolveCheckpoint.open(checkpoint, solve_identity(
            X, params, kernel, count, tol=MATRIX_FREE_TOL))
    panels = row_panels(X, kernel, kernel_params, params["dtype"])
    operator = CentredKernel(panels, *(saved.known if saved is not None else (None, None)))

    def report(state: KrylovState) -> None:
        if saved is not None:
            saved.save(state, operator.row_sums, operator.diagonal_sum)
        if on_product is not None:
            on_product(state)

    pairs = leading_eigenpairs(operator, n, count, tol=MATRIX_FREE_TOL,
                               state=None if saved is None else saved.state, on_product=report)
    values = pairs.values
    n_positive = int(np.sum(values > ZERO_EIGENVALUE_RTOL * max(values[0], 0.0)))
    total = operator.trace
    q = n_components_for(params["n_components"], values, n_positive, total,
                         bool(params["remove_zero_eig"]), n)
    lam = np.where(np.arange(values.size) < n_positive, values, 0.0)[:q]
    vectors = pairs.vectors[:, :q]
    vectors = vectors * fix_signs(vectors)
    kept = RowPanels(X.rechunk({0: panels.rows.chunks[0], 1: -1}), kernel, kernel_params,
                     panels.dtype, held=False)
    model = ExactModel.from_fit(kept, lam, vectors, operator.row_sums)
    ratios = lam / total if total > 0 else np.zeros(q)
    return MatrixFreeFit(model, ratios, pairs.residuals[:q].copy(), pairs.passes)
