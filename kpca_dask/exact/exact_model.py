"""An exact kernel PCA model held by blocks of its training rows (docs/design.md §13).

What :class:`~kpca_dask.ExactKernelPCA` keeps after a matrix-free fit (or
reads from a model file): the training rows, the eigenvalues and
eigenvectors, and three small terms of the centring. With S = A_q
Lambda_q^{-1/2} (a zero column for a zero eigenvalue) and k = K 1, a new
point projects as

    y(x) = S^T k~(x) = sum_i k(x, x_i) S_i - (k(x)^T 1 / n) (1^T S) - (k^T S / n - g 1^T S),

g = 1^T k / n^2 the mean of K: one pass over the training rows' panels for a
block of new points (:func:`~kpca_dask.engine.exact.matrix_free.cross_kernel`),
O(n p) work per point, lazily. The same pass gives the reconstruction
error (docs/design.md §6)::

    e(x) = |phi(x) - phi_bar|^2 - |y(x)|^2,   |phi(x) - phi_bar|^2 = k(x, x) - 2 k(x)^T 1 / n + g.

:class:`ExactFit` is everything an exact fit learns, in one immutable object
(``ExactKernelPCA.model_``), as :class:`~kpca_dask.model.fitted.FittedModel`
is KernelPCA's: a fit, :func:`kpca_dask.rotate` and the loader each make a new
one, and the estimator's fitted attributes (``eigenvalues_``, ``X_fit_``, ...)
are read-only views of it (:func:`exact_attribute`). Both fitted models offer
``layout``, ``rotation`` and ``replace``, which the shared features (rotation,
scalings, patterns, model files, the command line) read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from .._memory import memory_budget
from .._parallel import computed
from ..blocks.kernels import kernel_diagonal
from ..engine.exact.gram import gram_hold_bytes, panel_bytes
from ..engine.exact.matrix_free import RowPanels, cross_kernel, panel_rows
from ..engine.exact.runs import chained_runs, panel_terms, run_rows
from ..io.labelled import label_embedding, label_rows
from ..io.preprocessing import Preprocessing
from ..model.inputs import lazy_or_none, lazy_rows, method_input
from ..model.outputs import one_sample_of
from ..validation import check_n_features

__all__ = ["ExactModel", "ExactFit", "EXACT_ATTRIBUTES", "exact_attribute", "scaled_vectors",
           "applied"]


@dataclass(frozen=True)
class ExactModel:
    """The state an exact model transforms with, every n-sized part a dask array.

    ``panels`` are the training rows (by panels) with their kernel;
    ``eigenvectors`` A_q (n x q); ``weights`` S = A_q Lambda_q^{-1/2};
    ``sums`` 1^T S, ``offset`` k^T S / n - g 1^T S (q each); ``grand_mean`` g.
    """

    panels: RowPanels
    eigenvalues: np.ndarray
    eigenvectors: da.Array
    weights: da.Array
    sums: np.ndarray
    offset: np.ndarray
    grand_mean: float

    @property
    def n_samples(self) -> int:
        return self.panels.rows.shape[0]

    @classmethod
    def from_fit(cls, panels: RowPanels, eigenvalues: np.ndarray, eigenvectors: np.ndarray,
                 row_sums: np.ndarray) -> "ExactModel":
        """The model of eigenpairs found in memory, k = ``row_sums``: the centring terms are
        computed here, once (docs/design.md §13)."""
        n = eigenvectors.shape[0]
        S = scaled_vectors(eigenvectors, eigenvalues)
        sums = S.sum(axis=0)
        grand_mean = float(row_sums.sum()) / n**2
        chunks = (panels.rows.chunks[0], (S.shape[1],))
        return cls(panels, eigenvalues, da.from_array(eigenvectors, chunks=chunks),
                   da.from_array(S, chunks=chunks), sums, row_sums @ S / n - grand_mean * sums,
                   grand_mean)

    @classmethod
    def of_dense_fit(cls, fit: "ExactFit") -> "ExactModel":
        """The model of a dense fit's rows (numpy or lazy) by panels, with its centring
        terms: what a model file holds, and what a loaded model transforms with.

        Examples
        --------
        >>> from kpca_dask import ExactKernelPCA
        >>> X = np.random.default_rng(0).normal(size=(30, 3))
        >>> kpca = ExactKernelPCA(2, kernel="rbf", gamma=0.5).fit(X)
        >>> Y = ExactModel.of_dense_fit(kpca.model_).transform(da.from_array(X[:5], chunks=2))
        >>> bool(np.allclose(Y.compute(), kpca.transform(X[:5])))
        True
        """
        X = fit.rows
        n, p = X.shape
        rows = panel_rows(n, p, 8, memory_budget(lazy_or_none(X)))
        panels = RowPanels(lazy_rows(X).rechunk({0: rows, 1: -1}), fit.kernel,
                           fit.kernel_params, np.dtype(np.float64), held=False)
        A = np.asarray(fit.eigenvectors)
        S = scaled_vectors(A, fit.eigenvalues)
        sums, grand_mean = S.sum(axis=0), float(fit.grand_mean)
        chunks = (panels.rows.chunks[0], (A.shape[1],))
        return cls(panels, np.asarray(fit.eigenvalues), da.from_array(A, chunks),
                   da.from_array(S, chunks), sums, fit.column_means @ S - grand_mean * sums,
                   grand_mean)

    def _terms(self, X: da.Array, *, diagonal: bool = False) -> da.Array:
        """[k(X, X_train) S, k(X, X_train) 1] of rows ``X``, lazily, chunked like their rows
        (with ``diagonal``, k(x, x) as one more column): a task per (block of X, panel) when
        the panels are held where the tasks run, else run by run
        (:mod:`kpca_dask.engine.exact.runs`), each run's float64 rows within what a Gram
        pass holds, the panels read inside its task, k(x, x) from the run read there."""
        if not self.panels.held:
            rows = run_rows(X, min(gram_hold_bytes(X), panel_bytes(X)), itemsize=8)
            return chained_runs(X, rows, _run_terms,
                                self.weights.shape[1] + 1 + diagonal, (self, diagonal))
        terms = cross_kernel(X, self.panels, self.weights)
        if not diagonal:
            return terms
        X = X.rechunk({1: -1})
        own = X.map_blocks(diagonal_of_rows, kernel=self.panels.kernel,
                           params=self.panels.params, chunks=(X.chunks[0], (1,)),
                           dtype=np.float64, meta=np.empty((0, 0), np.float64))
        return da.concatenate([terms, own], axis=1).rechunk({1: -1})

    def transform(self, X: da.Array) -> da.Array:
        """The embedding of the rows ``X`` (dask, any row chunks), lazily, chunked like them."""
        q = self.eigenvalues.size
        return self._terms(X).map_blocks(
            embedded_terms, n=self.n_samples, sums=self.sums, offset=self.offset,
            chunks=(X.chunks[0], (q,)), dtype=np.float64, meta=np.empty((0, 0), np.float64))

    def reconstruction_error(self, X: da.Array) -> da.Array:
        """Squared feature-space distance of each row of ``X`` to the principal subspace."""
        return self._terms(X, diagonal=True).map_blocks(
            errors_of_terms, n=self.n_samples, sums=self.sums, offset=self.offset,
            grand_mean=self.grand_mean, drop_axis=1, dtype=np.float64,
            meta=np.empty((0,), np.float64))


@dataclass(frozen=True, eq=False)
class ExactFit:
    """Everything an exact fit learns: ``ExactKernelPCA.model_``, never changed once made.

    ``rows`` are the training rows (``X_fit_``; None for a kernel matrix, which
    is decomposed in place and not kept) and ``lazy`` whether they stay lazy;
    ``column_means`` and ``grand_mean`` the centring terms of a dense fit;
    ``by_panels`` the model that transforms by panels of the training rows (a
    matrix-free fit or a loaded model, None for a dense fit); ``residuals`` and
    ``n_products`` the matrix-free solve's certificate and count of products;
    ``layout`` the field's layout and ``rotation`` a rotation of the leading
    modes (:func:`kpca_dask.rotate`), None when there is none. ``training_key``
    names the lazy training rows as the model's methods see them (the dask name
    of their weighted rows), so that a method given the training data again
    takes their known embedding instead of a second n x n product (None: the
    rows are in memory, or the model was loaded).

    Examples
    --------
    >>> fit = ExactFit("rbf", {"gamma": 0.5}, np.array([2.0, 1.0]), np.eye(3)[:, :2],
    ...                np.array([0.6, 0.3]), "dense", n_samples=3, n_features=2)
    >>> fit.n_components, fit.replace(rotation="r").rotation, fit.rotation is None
    (2, 'r', True)
    """

    kernel: Any
    kernel_params: dict
    eigenvalues: np.ndarray
    eigenvectors: Any
    explained_variance_ratio: np.ndarray
    eigen_solver: str
    n_samples: int
    n_features: int
    rows: Any = None
    lazy: bool = False
    column_means: np.ndarray | None = None
    grand_mean: float | None = None
    by_panels: ExactModel | None = None
    residuals: np.ndarray | None = None
    n_products: int | None = None
    layout: Any = None
    rotation: Any = None
    training_key: str | None = None

    @property
    def n_components(self) -> int:
        return int(self.eigenvalues.size)

    @property
    def preprocessing(self) -> Preprocessing:
        """The field read by its layout, with no step after it."""
        return Preprocessing(self.layout)

    def replace(self, **changes: Any) -> "ExactFit":
        """A copy with ``changes`` (field names) made: the model itself stays as it is."""
        return dataclasses.replace(self, **changes)


#: Each fitted attribute of ExactKernelPCA and the :class:`ExactFit` field it reads.
EXACT_ATTRIBUTES = {
    "kernel_": "kernel", "kernel_params_": "kernel_params", "eigenvalues_": "eigenvalues",
    "eigenvectors_": "eigenvectors", "explained_variance_ratio_": "explained_variance_ratio",
    "n_components_": "n_components", "eigen_solver_": "eigen_solver",
    "eigenvalue_residuals_": "residuals", "n_products_": "n_products", "X_fit_": "rows",
    "n_samples_fit_": "n_samples", "n_features_in_": "n_features",
    "feature_layout_": "layout", "rotation_": "rotation"}

#: Attributes that are absent (``hasattr`` is False) when the fit learnt no such part, as
#: scikit-learn leaves out what only some fits learn.
_OPTIONAL = frozenset({"eigenvalue_residuals_", "n_products_", "X_fit_", "feature_layout_",
                       "rotation_"})


def exact_attribute(name: str) -> property:
    """A read-only property ``name`` of an estimator whose fitted state is ``self.model_``
    (an :class:`ExactFit`); unfitted, or for a part the fit did not learn, reading it raises
    AttributeError, so ``hasattr`` and scikit-learn's checks see it as absent.

    Examples
    --------
    >>> class Fitted:
    ...     model_ = None
    ...     n_products_ = exact_attribute("n_products_")
    >>> hasattr(Fitted(), "n_products_")
    False
    """
    field = EXACT_ATTRIBUTES[name]

    def getter(self):
        model = getattr(self, "model_", None)
        if model is None:
            raise AttributeError(f"This {type(self).__name__} is not fitted yet, so it has no "
                                 f"attribute {name!r}; call fit first.")
        value = getattr(model, field)
        if value is None and name in _OPTIONAL:
            raise AttributeError(f"This {type(self).__name__} has no {name!r}: its fit did "
                                 "not learn that part of the model.")
        return value

    getter.__name__ = name
    return property(getter, doc=f"Read from ``model_.{field}`` (:class:`ExactFit`).")


def scaled_vectors(eigenvectors: np.ndarray, eigenvalues: np.ndarray) -> np.ndarray:
    """S = A Lambda^{-1/2}, with a zero column for each zero eigenvalue.

    Examples
    --------
    >>> scaled_vectors(np.ones((2, 2)), np.array([4.0, 0.0])).tolist()
    [[0.5, 0.0], [0.5, 0.0]]
    """
    scale = np.zeros_like(eigenvalues)
    positive = eigenvalues > 0
    scale[positive] = 1.0 / np.sqrt(eigenvalues[positive])
    return eigenvectors * scale


def _run_terms(state: tuple, rows: da.Array) -> np.ndarray:
    """A task of :meth:`ExactModel._terms`: one run's terms, the panels read in turn."""
    model, diagonal = state
    return panel_terms(model.panels, model.weights, rows, diagonal)


def embedded_terms(terms: np.ndarray, n: int, sums: np.ndarray, offset: np.ndarray
                   ) -> np.ndarray:
    """A block of :meth:`ExactModel.transform`: y = k S - (k 1 / n) 1^T S - offset."""
    return terms[:, :-1] - np.outer(terms[:, -1] / n, sums) - offset


def errors_of_terms(terms: np.ndarray, n: int, sums: np.ndarray, offset: np.ndarray,
                    grand_mean: float) -> np.ndarray:
    """A block of :meth:`ExactModel.reconstruction_error`: ``terms`` with k(x, x) last."""
    Y = embedded_terms(terms[:, :-1], n, sums, offset)
    return (terms[:, -1] - 2.0 * terms[:, -2] / n + grand_mean
            - np.einsum("ij,ij->i", Y, Y))


def diagonal_of_rows(x: np.ndarray, kernel, params: dict) -> np.ndarray:
    """k(x, x) of each row of a block, float64, as a column."""
    return np.asarray(kernel_diagonal(np.asarray(x), kernel, **params), dtype=np.float64
                      )[:, None]


def applied(model: ExactModel, estimator, X, method: str, attrs: dict | None = None):
    """``model``'s ``transform`` or ``reconstruction_error`` of any input to ``estimator``:
    lazy for lazy input (dask, Zarr, a path), numpy for input in memory, and for a DataArray
    labelled like it (``attrs`` on an embedding)."""
    layout = estimator.model_.layout
    rows = method_input(estimator, layout, X)
    check_n_features(rows.data, model.panels.rows.shape[1], type(estimator).__name__)
    result = getattr(model, method)(rows.data)
    if not rows.is_lazy:
        result = computed(result)
    if rows.like is None:
        return result
    if method == "transform":
        return one_sample_of(label_embedding(result, rows.like, attrs or {}), rows)
    return one_sample_of(label_rows(result, rows.like, name=method), rows)
