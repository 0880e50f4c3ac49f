"""Exact kernel PCA (docs/design.md §1): the reference the Nyström estimator is tested against.

The dense solver holds the n x n Gram matrix (O(n^2) memory, O(n^3) time); the
matrix-free one (docs/design.md §13) finds the leading eigenpairs from
products with the centred kernel matrix, one pass over the rows each, in
memory O(n q) and tiles.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Literal

import dask.array as da
import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..blocks.signs import fix_signs
from ..engine.solve.components import ZERO_EIGENVALUE_RTOL, check_spectrum, n_components_for
from ..eof.patterns import check_kind, patterns_of
from ..eof.scalings import check_scaling, scaled_scores
from ..errors import InvalidParameterError, NotInvertibleError
from ..exact.exact_embedding import (
    embedding,
    reconstruction_errors,
    training_embedding,
    transform_rows,
)
from ..exact.exact_fitting import chosen_solver, exact_kernel, fit_matrix_free
from ..exact.exact_model import ExactFit, applied, exact_attribute
from ..io.labelled import label_embedding, label_rows
from ..io.preprocessing.field_inputs import weighted_rows
from ..model.inputs import in_memory_fit_input, in_memory_input, labels_of, method_input
from ..model.kernel_matrices import (
    centre_in_place,
    kernel_matrix_buffer,
    points_gram,
    symmetrise_in_place,
)
from ..model.keywords import explains_keywords
from ..model.outputs import one_sample_of
from ..model.parameters import EXACT_CONSTRAINTS
from ..model.precomputed import PRECOMPUTED
from .base import FittedModelEstimator

__all__ = ["ExactKernelPCA"]


class ExactKernelPCA(TransformerMixin, FittedModelEstimator):
    """Exact kernel PCA: the leading eigenpairs of the centred Gram matrix.

    The dense solver builds the full n x n kernel matrix K in float64, centres
    it as K~ = J K J with J = I - 11^T / n, and eigendecomposes it
    (docs/design.md §1): memory O(n^2), time O(n^3). The matrix-free solver
    (docs/design.md §13) never forms K: it finds the leading q eigenpairs of
    J K J by a block Krylov method whose every product is one pass over pairs
    of row panels on Dask, each kernel tile made once and dropped, and
    certifies each eigenpair by its residual. Use :class:`~kpca_dask.KernelPCA`
    (Nyström) when an approximation will do.

    Parameters
    ----------
    n_components : int, float in (0, 1) or None, default=None
        Number of components. A float eta keeps the smallest q whose
        cumulative explained-variance ratio reaches eta; None keeps every
        eigenvalue above the numerical zero. An int above that number keeps
        the extra components with eigenvalue 0 (zero embedding columns) and
        warns, as scikit-learn does.
    kernel : str or callable, default="rbf"
        A kernel name of :mod:`kpca_dask.blocks.kernels` (``"rbf"``, ``"laplacian"``,
        ``"polynomial"``, ``"linear"``, ``"sigmoid"``, ``"cosine"``,
        ``"matern"`` or an alias), a callable ``k(A, B, **kernel_params)``
        returning the ``len(A) x len(B)`` block, or ``"precomputed"``: then
        :meth:`fit` takes the n x n kernel matrix of the training points and
        :meth:`transform` the (n_new, n) kernel matrix of new points against
        them, as in scikit-learn.
    gamma : float, {"median", "scale"} or None, default=None
        Kernel coefficient of rbf, laplacian, matern, polynomial and sigmoid;
        None means ``1 / n_features``; a rule is resolved as
        :class:`~kpca_dask.KernelPCA` resolves it, from a sample of the rows
        drawn with seed 0.
    degree : int, default=3
        Degree of the polynomial kernel, a whole number >= 1.
    coef0 : float, default=1.0
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict or None, default=None
        Further kernel parameters (``{"nu": 2.5}`` for Matérn), or the keyword
        arguments of a callable kernel. Never modified.
    remove_zero_eig : bool, default=False
        Drop the components with eigenvalue 0 that an int ``n_components``
        would keep (scikit-learn's parameter of the same name).
    sample_dim : str or None, default=None
        For a DataArray: the dimension of the samples (None: the first of two,
        or among more the one named ``time``; the one used is ``sample_dim_``);
        the others are stacked into features, a fixed mask dropped, as for
        :class:`~kpca_dask.KernelPCA`.
    weights : DataArray, "coslat", 1-D array or None, default=None
        Multiplies the features before the kernel (see
        :class:`~kpca_dask.KernelPCA`).
    eigen_solver : {"auto", "dense", "matrix-free"}, default="auto"
        "dense" eigendecomposes the Gram matrix; "matrix-free" finds an int
        ``n_components`` leading eigenpairs from products with J K J, one pass
        over the rows each (docs/design.md §13), in memory O(n q) beside
        kernel tiles; "auto" is dense while its n x n matrices fit the memory
        available (:func:`~kpca_dask.exact.exact_fitting.dense_fits`), and
        matrix-free beyond.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the matrix-free solver's kernel tiles (their products are
        summed in float64). The dense solver works in float64 whatever this is.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (``n_components_``,)
        Eigenvalues of the centred Gram matrix J K J, descending.
    eigenvectors_ : ndarray or dask array of shape (n_samples, ``n_components_``)
        The matching unit eigenvectors A_q, each with its largest-magnitude
        entry positive: a dask array chunked like the row panels for the
        matrix-free solver (and for a loaded model).
    explained_variance_ratio_ : ndarray of shape (``n_components_``,)
        Each eigenvalue over the sum of the positive ones (for the matrix-free
        solver over trace(J K J), the sum of them all: the same for a positive
        semi-definite kernel).
    explained_variance_, total_variance_
        As :class:`~kpca_dask.KernelPCA`'s (eofs' ``eigenvalues`` and
        ``totalAnomalyVariance``); :meth:`north_errors` and :meth:`spectrum` as
        well. ``total_variance_`` is exact here (``total_variance_kind_`` is
        ``"exact"``).
    n_components_ : int
        Number of components kept.
    eigen_solver_ : str
        The solver that ran: "dense" or "matrix-free".
    eigenvalue_residuals_ : ndarray of shape (``n_components_``,)
        The matrix-free solve's certificate: ``|J K J v_j - lambda_j v_j|`` for
        each component; an eigenvalue is within residual^2 / gap of the exact
        one, an eigenvector within residual / gap. Absent for the dense solver.
    n_products_ : int
        Products with J K J the matrix-free solve made (passes over the rows),
        in all (with those of a checkpoint it went on from). Absent for the
        dense solver.
    kernel_ : str or callable
        The kernel used, aliases resolved.
    kernel_params_ : dict
        The kernel parameters used, defaults resolved.
    X_fit_ : ndarray or dask array of shape (n_samples, ``n_features_in_``)
        The training data (float64; CSR for sparse input), needed by
        :meth:`transform`. Lazy input (dask, Zarr, xarray) stays lazy: the
        Gram matrix is summed over its feature chunks in one read (T-mode,
        docs/design.md §12), and :meth:`transform` of lazy rows is lazy too, run
        by run (these rows read once per run of new rows). For the
        matrix-free solver, a dask array cut into row panels, which
        :meth:`transform` reads one panel per task.
        Absent for ``kernel="precomputed"``, whose matrix is decomposed in
        place in one n x n buffer and not kept.
    n_samples_fit_ : int
        Number of training points.
    n_features_in_ : int
        Number of features seen in :meth:`fit` (the positions kept, for a field).
    feature_layout_ : FeatureLayout
        The field's dimensions, mask and weights, for a DataArray or weighted
        fit (:class:`~kpca_dask.io.preprocessing.fields.FeatureLayout`); absent otherwise.
    rotation_ : Rotation
        The rotation the model holds: that of a :func:`kpca_dask.rotate` result's
        estimator (a copy; the estimator rotated is not changed); absent otherwise.
    model_ : ExactFit
        Everything the fit learnt, in one immutable object
        (:class:`~kpca_dask.exact.exact_model.ExactFit`): the attributes above
        are read-only views of it, and a refit replaces it whole.

    See Also
    --------
    kpca_dask.KernelPCA : Nyström kernel PCA for data of any size.
    sklearn.decomposition.KernelPCA : The same exact method in scikit-learn.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> kpca = ExactKernelPCA(n_components=2, kernel="rbf", gamma=0.5)
    >>> kpca.fit_transform(X).shape
    (50, 2)
    >>> kpca.transform(X[:5]).shape
    (5, 2)
    >>> free = ExactKernelPCA(n_components=2, gamma=0.5, eigen_solver="matrix-free").fit(X)
    >>> bool(np.allclose(free.eigenvalues_, kpca.eigenvalues_, rtol=1e-9))
    True
    """

    #: Its model files (:mod:`kpca_dask.storage.exact_files`).
    _model_file = ("..storage.exact_files", "save_exact")
    _parameter_constraints = EXACT_CONSTRAINTS

    @explains_keywords
    def __init__(
        self,
        n_components: int | float | None = None,
        *,
        kernel: str | Callable = "rbf",
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        kernel_params: dict | None = None,
        remove_zero_eig: bool = False,
        sample_dim: str | None = None,
        weights=None,
        eigen_solver: str = "auto",
        dtype: str = "float64",
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.remove_zero_eig = remove_zero_eig
        self.sample_dim = sample_dim
        self.weights = weights
        self.eigen_solver = eigen_solver
        self.dtype = dtype

    @explains_keywords
    def fit(self, X: ArrayLike, y: None = None, *, checkpoint=None) -> ExactKernelPCA:
        """The leading eigenpairs of the centred Gram matrix of ``X``.

        Parameters
        ----------
        X : array-like, scipy.sparse matrix, dask array, Zarr array or path, or DataArray
            Shape (n_samples, n_features). Lazy input is never held whole:
            the n x n kernel matrix is summed over its feature chunks in one
            read (memory: the matrix and one column panel), and refused with
            :class:`~kpca_dask.errors.InsufficientMemoryError` when it does
            not fit. With ``kernel="precomputed"``, the kernel matrix of
            shape (n_samples, n_samples).
        y : ignored
        checkpoint : str or path-like, optional
            A Zarr group (local path or fsspec URL) where the matrix-free solver
            saves its state after every product; a later fit with the same data
            and parameters goes on from there (:mod:`kpca_dask.checkpoints.exact_checkpoint`).
            The dense solver, which makes no products, does not use it.

        Returns
        -------
        self : ExactKernelPCA

        Raises
        ------
        NotPositiveSemidefiniteError
            The centred kernel matrix has a significantly negative eigenvalue
            among those ``n_components`` selects, as scikit-learn refuses it.
        """
        # Every parameter by KernelPCA's rules (one table), "precomputed" allowed.
        self._check_params()
        # A field's rows stay lazy (the Gram matrix is summed over their feature chunks,
        # docs/design.md §12); small in-memory input is held as float64.
        data = X
        given = in_memory_fit_input(X, sample_dim=self.sample_dim, weights=self.weights,
                                    precomputed=self.kernel == PRECOMPUTED)
        layout = given.layout
        solver = chosen_solver(self.eigen_solver, given, self.kernel, self.n_components)
        if solver == "matrix-free":
            fitted = fit_matrix_free(given, self.get_params(deep=False), checkpoint=checkpoint)
            self.model_ = fitted.fitted(layout)
            self.model_ = self.model_.replace(training_key=self._rows_key(data))
            return self
        if self.kernel == PRECOMPUTED:
            # One float64 n x n buffer, filled block by block from numpy, dask or Zarr,
            # then symmetrised, centred and decomposed in place (no second n x n).
            kernel, params, K = PRECOMPUTED, {}, kernel_matrix_buffer(given)
            X, lazy = None, False
        else:
            kernel, params = exact_kernel(self.get_params(deep=False), given.data)
            X, lazy, K = points_gram(given.data, given.is_lazy, kernel, params)
            if not lazy and X is data:  # the caller's own array: changing it after the fit
                X = X.copy()            # must change no transform (scikit-learn's copy_X)
        n = K.shape[0]
        symmetrise_in_place(K)
        column_means, grand_mean = centre_in_place(K)
        # K is symmetric: its transpose is the Fortran-ordered array LAPACK works in, so
        # eigh overwrites K itself instead of copying it.
        lam, A = linalg.eigh(K.T, overwrite_a=True, check_finite=False)
        del K
        lam, A = lam[::-1], A[:, ::-1]
        check_spectrum(lam, self.n_components, stacklevel=3)  # scikit-learn's refusal
        n_positive = int(np.sum(lam > ZERO_EIGENVALUE_RTOL * max(lam[0], 0.0)))
        total = float(np.sum(lam[lam > 0]))
        q = n_components_for(self.n_components, lam, n_positive, total,
                             bool(self.remove_zero_eig), lam.size)
        A = A[:, :q]
        # Past n_positive the eigenvalues are 0 (or rounding noise, or negative ones
        # too small to refuse): 0 exactly, as scikit-learn sets them.
        lam = np.where(np.arange(lam.size) < n_positive, lam, 0.0)

        # Only now, with every step done, does the estimator change state: one new model.
        eigenvalues = lam[:q].copy()
        self.model_ = ExactFit(
            kernel=kernel, kernel_params=params, eigenvalues=eigenvalues,
            eigenvectors=A * fix_signs(A),
            explained_variance_ratio=eigenvalues / total if total > 0 else np.zeros(q),
            eigen_solver="dense", n_samples=n, n_features=n if X is None else X.shape[1],
            rows=X, lazy=lazy, column_means=column_means, grand_mean=grand_mean, layout=layout)
        if lazy:
            self.model_ = self.model_.replace(training_key=self._rows_key(data))
        return self

    def fit_transform(self, X: ArrayLike, y: None = None) -> np.ndarray:
        """Components of the training points: Y = A_q Lambda_q^{1/2}.

        Returns
        -------
        Y : ndarray of shape (n_samples, ``n_components_``)
        """
        self.fit(X)
        return self._fitted_scores(X)

    def _fitted_scores(self, X):
        """The scores of the rows ``X`` just fitted, A_q Lambda_q^{1/2}, labelled like them:
        no product (``KernelPCA``'s Gram way answers its ``fit_transform`` with them too)."""
        if self.eigen_solver_ == "dense" and self.model_.training_key is not None:
            return self.transform(X)  # the known lazy training rows: the same, lazy
        Y = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
        if self.eigen_solver_ == "matrix-free" and not self._lazy_input(X):
            Y = np.asarray(Y)  # A_q is in this process's memory: nothing is read
        like = labels_of(self._layout(), X, precomputed=self.kernel_ == PRECOMPUTED)
        return Y if like is None else label_embedding(Y, like, self._output_attrs())

    def transform(self, X: ArrayLike, *, pcscaling: int = 0) -> np.ndarray:
        """Project new points: y(x) = Lambda_q^{-1/2} A_q^T k~_n(x), k~ the centred kernel vector.

        Parameters
        ----------
        X : array-like or scipy.sparse matrix of shape (n_samples, ``n_features_in_``)
            With ``kernel="precomputed"``, the kernel values of the new points
            against the training points, shape (n_samples, n_samples_fit).
        pcscaling : {0, 1, 2}, default=0
            eofs' scalings of the scores, as in :meth:`KernelPCA.transform
            <kpca_dask.KernelPCA.transform>`.

        Returns
        -------
        Y : ndarray of shape (n_samples, ``n_components_``)
            Components with eigenvalue 0 give zero columns.
        """
        check_is_fitted(self)
        pcscaling = check_scaling(pcscaling, "pcscaling")
        if self.model_.by_panels is not None:
            Y = applied(self.model_.by_panels, self, X, "transform", self._output_attrs())
            return scaled_scores(Y, self.explained_variance_, pcscaling)
        rows = self._input_rows(X)
        known = (self.model_.training_key is not None
                 and self._rows_key(X) == self.model_.training_key)
        if known:  # lazy rows, so lazy scores: known already, cut as the rows are
            Y = da.from_array(training_embedding(self.model_), chunks=(rows.data.chunks[0], -1))
        else:
            Y = transform_rows(self.model_, rows.data)
        Y = scaled_scores(Y, self.explained_variance_, pcscaling)
        return Y if rows.like is None else one_sample_of(
            label_embedding(Y, rows.like, self._output_attrs()), rows)

    def _rows_key(self, X) -> str | None:
        """The dask name of ``X``'s weighted rows as :meth:`patterns`, :func:`kpca_dask.rotate`
        and :meth:`transform` make them: equal for the same lazy data, given again."""
        rows = method_input(self, self._layout(), X, weighted=False)
        return weighted_rows(rows.data, self._layout()).name if rows.is_lazy else None

    def reconstruction_error(self, X: ArrayLike) -> np.ndarray:
        """Squared feature-space distance to the principal subspace (docs/design.md §6).

        ``e(x) = |phi(x) - phi_bar|^2 - sum_{j<=q} y_j(x)^2``, with
        ``|phi(x) - phi_bar|^2 = k(x, x) - (2/n) sum_i k(x, x_i) + mean(K)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, ``n_features_in_``)

        Returns
        -------
        errors : ndarray of shape (n_samples,)
            Lazy (a dask array) for lazy rows when the training rows are lazy, or the
            model is matrix-free or loaded.

        Examples
        --------
        >>> X = np.random.default_rng(0).normal(size=(50, 2))
        >>> kpca = ExactKernelPCA(n_components=None, kernel="linear").fit(X)
        >>> bool(np.allclose(kpca.reconstruction_error(X[:3]), 0.0))
        True
        """
        check_is_fitted(self)
        if self.kernel_ == PRECOMPUTED:
            raise InvalidParameterError(
                'reconstruction_error needs k(x, x) of each new point, which kernel="precomputed" '
                "does not give; fit with the kernel itself (a name or a callable) instead.")
        if self.model_.by_panels is not None:
            return applied(self.model_.by_panels, self, X, "reconstruction_error")
        rows = self._input_rows(X)
        like = rows.like
        errors = reconstruction_errors(self.model_, rows.data)
        return errors if like is None else label_rows(errors, like, name="reconstruction_error")

    def inverse_transform(self, Y: ArrayLike):
        """Not available: exact kernel PCA learns no map back to the input space.

        Raises
        ------
        NotInvertibleError
            Always; :class:`~kpca_dask.KernelPCA` with ``fit_inverse_transform=True``
            learns the pre-image map (docs/design.md §6: a ridge regression with the
            training mean as its intercept, ``alpha="auto"`` choosing its ridge), and
            with ``n_landmarks`` equal to the number of rows its embedding is this one.

        Examples
        --------
        >>> X = np.random.default_rng(0).normal(size=(20, 2))
        >>> ExactKernelPCA(n_components=2).fit(X).inverse_transform(X)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        kpca_dask.errors.NotInvertibleError: ExactKernelPCA has no pre-image map...
        """
        check_is_fitted(self)
        raise NotInvertibleError(
            "ExactKernelPCA has no pre-image map, so it cannot inverse_transform. Fit "
            "KernelPCA(..., fit_inverse_transform=True) instead (with n_landmarks equal to the "
            "number of rows its embedding is the exact one; fewer approximate it).")

    def score_samples(self, X: ArrayLike) -> np.ndarray:
        """Minus :meth:`reconstruction_error` (higher: more like the training data)."""
        return -self.reconstruction_error(X)

    def patterns(self, X, kind: Literal["covariance", "correlation", "eof"] = "covariance", *,
                 pcscaling: int | None = None, eofscaling: int | None = None):
        """Map of each component over the features: covariance or correlation with its score.

        As :meth:`KernelPCA.patterns <kpca_dask.KernelPCA.patterns>`, which says
        what each ``kind`` and scaling is (eofs' ``eofsAsCovariance(pcscaling)``,
        ``eofsAsCorrelation`` and ``eofs(eofscaling)``), over the rows of ``X``
        (array-like, dask array, DataArray or Zarr path/URL), lazily and in one
        pass; a DataArray on the fit's field for a model fitted on one.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(200, 3)) * [3.0, 1.0, 0.1]
        >>> kpca = ExactKernelPCA(n_components=2, kernel="linear").fit(X)
        >>> np.round(np.abs(kpca.patterns(X, kind="correlation")[0]), 2)
        array([1.  , 0.01, 0.09])
        """
        check_is_fitted(self)
        check_kind(kind, pcscaling, eofscaling)
        rows = method_input(self, self._layout(), X, weighted=False)
        return patterns_of(rows, kind, layout=self._layout(),
                           embedding=partial(embedding, self.model_),
                           variances=self.explained_variance_, pcscaling=pcscaling,
                           eofscaling=eofscaling)

    # -- the fitted layout of the features (kpca_dask.model.inputs) ----------

    def _output_attrs(self) -> dict:
        kernel = self.kernel_ if isinstance(self.kernel_, str) else "callable"
        return {"kernel": kernel, **self.kernel_params_}

    def _layout(self):
        """The fitted layout of the features, or None."""
        return self.model_.layout

    def _lazy_input(self, X) -> bool:
        """Whether ``X`` is lazy input (dask, Zarr, a path, a dask-backed DataArray)."""
        return method_input(self, self._layout(), X).is_lazy

    def _input_rows(self, X):
        """``X`` as rows of the fitted features, held in memory unless the training rows are
        lazy, and the DataArray outputs are labelled like."""
        return in_memory_input(self._layout(), X, keep_lazy=self.model_.lazy,
                               precomputed=self.kernel_ == PRECOMPUTED)

    #: The fitted model (:class:`~kpca_dask.exact.exact_model.ExactFit`); absent before a fit.
    model_: ExactFit

    # -- fitted attributes: read-only views of model_ (ExactFit; see Attributes) --

    kernel_ = exact_attribute("kernel_")
    kernel_params_ = exact_attribute("kernel_params_")
    eigenvalues_ = exact_attribute("eigenvalues_")
    eigenvectors_ = exact_attribute("eigenvectors_")
    explained_variance_ratio_ = exact_attribute("explained_variance_ratio_")
    n_components_ = exact_attribute("n_components_")
    eigen_solver_ = exact_attribute("eigen_solver_")
    eigenvalue_residuals_ = exact_attribute("eigenvalue_residuals_")
    n_products_ = exact_attribute("n_products_")
    X_fit_ = exact_attribute("X_fit_")
    n_samples_fit_ = exact_attribute("n_samples_fit_")
    n_features_in_ = exact_attribute("n_features_in_")
    feature_layout_ = exact_attribute("feature_layout_")
    rotation_ = exact_attribute("rotation_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.kernel == PRECOMPUTED
        return tags
