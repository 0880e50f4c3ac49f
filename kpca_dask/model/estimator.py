"""The scikit-learn compatible estimator: Nyström kernel PCA over dask arrays."""

from __future__ import annotations

import copy
import numbers
import os
import time
from typing import Callable, Literal

import dask
import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._parallel import capped_blas
from ..blocks.kernels import canonical_kernel_name
from ..blocks.row_pair_kernels import block_kernel
from ..blocks.statistics import PassStatistics, combine_statistics
from ..engine.bandwidth import gamma_sample_size, resolve_gamma
from ..engine.passes import pass_statistics, project, raise_if_nonfinite
from ..engine.reconstruction import (
    NoveltyTerms,
    embed_landmarks,
    novelty_terms,
    preimage_basis,
    preimage_statistics,
    reconstruct,
    reconstruction_error,
    solve_preimage,
)
from ..engine.sampling import (
    RowSampler,
    as_generator,
    independent_generators,
    sample_indices,
)
from ..engine.solve import (
    NystromSolution,
    landmark_basis,
    landmark_kernel_matrix,
    reference_row,
    solve,
)
from ..errors import (
    InvalidInputError,
    InvalidParameterError,
    NonFiniteInputError,
    NotInvertibleError,
)
from ..io.frames import (
    Partitions,
    check_feature_names,
    frame_feature_names,
    frame_to_array,
    frame_to_numpy,
    is_dask_frame,
    is_frame,
    select_columns,
    table_input,
)
from ..io.labelled import frame_like, label_embedding, label_rows, series_like
from ..landmarks.auto import grow_landmarks, planned_samples
from ..landmarks.strategies import planned_sample, select_landmarks
from ..validation import as_dask_array, check_n_features
from .checkpoints import FitCheckpoint
from .fingerprints import fit_identity
from .model_files import save_model
from .parameters import check_params, rcond_for, resolve_kernel_params
from .provenance import recorded_rows, source_of, with_rows
from .updates import require_statistics

__all__ = ["KernelPCA"]


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel PCA by Nyström landmarks, in one pass over data of any size.

    The data are read once, block by block: each block's kernel values against
    m landmarks are reduced to m x m statistics, and the eigenproblem is solved
    on the client in O(m^3). Memory is O(block x m + m^2) whatever the number
    of rows n. With ``n_landmarks >= n`` every row is a landmark and the result
    is exact kernel PCA (that of ``sklearn.decomposition.KernelPCA``).

    Parameters
    ----------
    n_components : int, float in (0, 1) or None, default=None
        Number of components q. A float eta keeps the smallest q whose
        cumulative explained-variance ratio reaches eta. None keeps every
        component with a positive eigenvalue. An int above the number of
        positive eigenvalues keeps that many components (at most n_samples),
        the extra ones with eigenvalue 0 and zero columns in the embedding,
        and warns with :class:`~kpca_dask.errors.ZeroEigenvalueWarning`; as
        in scikit-learn.
    kernel : {"rbf", "gaussian", "laplacian", "polynomial", "poly", "linear", \
"sigmoid", "cosine", "matern"} or callable, default="rbf"
        A callable ``k(A, B, **kernel_params)`` must return the
        ``(len(A), len(B))`` kernel block and be picklable for distributed runs.
        A callable written for scikit-learn, ``k(x, y) -> float`` on two 1-D
        rows, also works: it is called pair by pair within each block, n x m
        Python calls per pass, with a :class:`~kpca_dask.errors.SlowKernelWarning`.
    gamma : float, {"median", "scale"} or None, default=None
        Kernel coefficient of rbf, laplacian, polynomial, sigmoid and matern.
        None means ``1 / n_features``. ``"median"`` is the median heuristic
        on a seeded sample of 1000 rows: gamma = 2 / h with h the median
        squared pairwise distance, i.e. ``k(x, x') = exp(-|x - x'|^2 / c^2)`` with
        ``c^2 = h / 2`` (for laplacian h is the median L1 distance); rbf, matern
        and laplacian only. ``"scale"`` is ``1 / (n_features * X.var())``
        estimated on 10 000 sampled rows (scikit-learn's SVC uses all of X).
        See :mod:`kpca_dask.engine.bandwidth`. The value used is ``gamma_``.
        For matern the length scale is ``1 / sqrt(2 * gamma)``.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Independent term of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Further kernel parameters (``nu`` for matern, default 1.5), or the
        keyword arguments of a callable kernel. Never modified.
    remove_zero_eig : bool, default=False
        Drop the components with eigenvalue 0 that an int ``n_components``
        would keep, so ``n_components_`` may be smaller than asked (as
        scikit-learn's parameter of the same name).
    n_landmarks : int or "auto", default=1000
        Number of landmarks m. Cost is O(n m^2); accuracy grows with m, and
        ``trace_error_`` says whether m is large enough. ``"auto"`` doubles m
        from 128 until the trace error, estimated on 2000 held-out sampled
        rows, is below ``tol``, or m reaches ``max_landmarks``; the path is
        ``landmark_path_`` (see :mod:`kpca_dask.landmarks.auto`).
    landmarks : {"uniform", "kmeans", "rpcholesky"}, callable or array-like of shape \
(n_landmarks, n_features), default="kmeans"
        How landmarks are chosen: a registered strategy name (see
        :mod:`kpca_dask.landmarks`), a strategy function, or the points.
        ``"kmeans"`` (centroids of a sample of 20 m rows) gave the smallest
        top-eigenvalue errors per landmark on MNIST, about those of uniform
        rows with 3 m landmarks (README, "Landmarks and accuracy");
        ``"uniform"`` is the cheapest; ``"rpcholesky"`` minimises the trace
        error where the kernel matrix is close to low rank.
    tol : float, default=1e-2
        Target relative trace error for ``n_landmarks="auto"``.
    max_landmarks : int, default=4096
        The largest m ``n_landmarks="auto"`` tries.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the kernel blocks; statistics are always summed in float64.
    rcond : float, default=None
        Eigenvalues of K_mm at or below ``rcond`` times the largest are dropped,
        not inverted. None: 1e-10 for float64 blocks, 1e-5 for float32.
    random_state : int, numpy Generator or None, default=None
        Seeds landmark selection. The same seed gives the same model for any
        chunking, scheduler and number of workers.
    fit_inverse_transform : bool, default=False
        Also learn the pre-image map used by :meth:`inverse_transform`: kernel
        ridge regression from embeddings back to input space, with the
        landmarks' embeddings as centres (docs/design.md §6). Costs one more pass over
        the training data after the fit (not saved in a ``checkpoint``: an
        interrupted fit redoes it).
    alpha : float, default=1.0
        Ridge penalty of the pre-image map (``fit_inverse_transform=True`` only).

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of the centred (Nyström) Gram matrix, descending; the same
        scale as ``sklearn.decomposition.KernelPCA.eigenvalues_``.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``eigenvalues_`` divided by the total variance of the features.
    n_components_ : int
        The number of components q kept.
    landmarks_ : ndarray of shape (``n_landmarks_``, ``n_features_in_``)
    landmark_indices_ : ndarray of shape (``n_landmarks_``,) or None
        Global row indices of the landmarks, None when they are not data rows
        (k-means centroids, explicit points).
    n_landmarks_ : int
        Landmarks used: ``min(n_landmarks, n_samples)`` for the row strategies,
        fewer for ``"rpcholesky"`` when the kernel matrix's rank runs out.
    landmark_path_ : list of (int, float) or None
        For ``n_landmarks="auto"``: each number of landmarks tried and its
        estimated trace error, in order. None for an int ``n_landmarks``.
    landmark_rank_ : int
        Eigenvalues of K_mm kept (the dimension of the Nyström features).
    gamma_ : float or None
        The resolved gamma (None for kernels without one).
    kernel_params_ : dict
        Every resolved kernel parameter.
    trace_error_ : float
        Relative trace error of the Nyström approximation,
        ``(trace K - trace K_nys) / trace K``, from the same pass.
    projection_ : ndarray of shape (``n_landmarks_``, ``n_components_``)
        P = W V_q: y(x) = P^T k_m(x) - ``offset_``.
    offset_ : ndarray of shape (``n_components_``,)
    n_features_in_ : int
    n_samples_fit_ : int
    statistics_ : PassStatistics
        The pass statistics n, s, G, t and the reference row r (float64,
        docs/design.md §7): everything :meth:`partial_fit`, :meth:`set_n_components`
        and :func:`kpca_dask.merge` need. None for a model loaded from a
        format-version-1 file.
    row_provenance_ : dict
        Which rows the statistics hold: per source (a fingerprint, a
        description, row ranges), so that :meth:`partial_fit` and
        :func:`kpca_dask.merge` refuse rows counted already. Absent from
        models saved before it was recorded. See
        :mod:`kpca_dask.model.provenance`.
    fit_seconds_ : float
        Wall time of the last fit, plus that of every later
        :meth:`partial_fit`.
    novelty_weights_ : ndarray of shape (``n_landmarks_``,)
        v = W mu, the mean feature's weights on the landmarks, used by
        :meth:`reconstruction_error`.
    novelty_mean_norm2_ : float
        ``|mu|^2``, the squared norm of the mean feature.
    preimage_centres_ : ndarray of shape (``n_landmarks_``, ``n_components_``)
        The landmarks' embeddings, centres of the pre-image map
        (``fit_inverse_transform=True`` only).
    preimage_coefficients_ : ndarray of shape (``n_landmarks_``, ``n_features_in_``)
        Dual coefficients W_Y B of the pre-image map:
        ``x_hat(y) = k(y, preimage_centres_) @ preimage_coefficients_``.

    See Also
    --------
    ExactKernelPCA : the exact method on the full Gram matrix, for small n.
    sklearn.decomposition.KernelPCA : exact kernel PCA in scikit-learn.

    References
    ----------
    .. [1] Schölkopf, Smola and Müller, "Nonlinear component analysis as a kernel
       eigenvalue problem", Neural Computation 10 (1998).
    .. [2] Williams and Seeger, "Using the Nyström method to speed up kernel
       machines", NIPS 13 (2001).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(500, 3))
    >>> kpca = KernelPCA(n_components=2, gamma=0.5, n_landmarks=100, random_state=0)
    >>> kpca.fit_transform(X).shape
    (500, 2)
    >>> bool(kpca.trace_error_ < 0.05)
    True
    """

    def __init__(
        self,
        n_components: int | float | None = None,
        *,
        kernel: str | Callable = "rbf",
        gamma: float | Literal["median", "scale"] | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        kernel_params: dict | None = None,
        remove_zero_eig: bool = False,
        n_landmarks: int | Literal["auto"] = 1000,
        landmarks: str | Callable | np.ndarray = "kmeans",
        tol: float = 1e-2,
        max_landmarks: int = 4096,
        dtype: Literal["float64", "float32"] = "float64",
        rcond: float | None = None,
        random_state: int | np.random.Generator | None = None,
        fit_inverse_transform: bool = False,
        alpha: float = 1.0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.remove_zero_eig = remove_zero_eig
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.tol = tol
        self.max_landmarks = max_landmarks
        self.dtype = dtype
        self.rcond = rcond
        self.random_state = random_state
        self.fit_inverse_transform = fit_inverse_transform
        self.alpha = alpha

    # -- fit ---------------------------------------------------------------

    def fit(self, X, y=None, *, checkpoint: str | os.PathLike | None = None) -> "KernelPCA":
        """Fit the model with one pass over ``X``.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_samples, n_features); see :func:`kpca_dask.io.open_array`
            for labelled and stored input.
        y : ignored
        checkpoint : str or path-like, default=None
            A Zarr group where the pass saves its finished part as it goes.
            If the fit is interrupted (client or scheduler killed), the same
            call resumes from it and recomputes no finished segment. A
            checkpoint of other data or parameters is refused with
            :class:`~kpca_dask.errors.CheckpointMismatchError`. See
            :mod:`kpca_dask.model.checkpoints`.

        Returns
        -------
        self : KernelPCA
        """
        started = time.perf_counter()
        check_params(self.get_params(deep=False))
        names = frame_feature_names(X)  # before the pass: mixed-type names raise now
        table = X
        X = _as_fit_input(X)
        kernel = block_kernel(canonical_kernel_name(self.kernel), X.shape[1], self.kernel_params)
        rng = as_generator(self.random_state)
        # Child streams, so the landmarks drawn from rng do not depend on whether
        # gamma or m are estimated from the data.
        bandwidth_rng, validation_rng = independent_generators(rng, 2)
        given = {"degree": self.degree, "coef0": self.coef0, "kernel_params": self.kernel_params}
        rule = self.gamma if isinstance(self.gamma, str) else None
        saved = None if checkpoint is None else FitCheckpoint.open(checkpoint, fit_identity(
            X, kernel, resolve_kernel_params(kernel, X.shape[1], gamma=None if rule else
                                             self.gamma, **given),
            gamma=rule, dtype=self.dtype, landmarks=self.landmarks,
            n_landmarks=self.n_landmarks, random_state=self.random_state, tol=self.tol,
            max_landmarks=self.max_landmarks))
        # Resuming: the gamma, landmarks and growth path of the first try, which
        # an unseeded sample could not reproduce.
        resuming = saved is not None and saved.landmarks is not None
        rcond = rcond_for(self.rcond, self.dtype)
        if resuming:
            gamma = saved.gamma
            params = resolve_kernel_params(kernel, X.shape[1], gamma=gamma, **given)
            chosen, path = saved.landmarks, saved.landmark_path
        else:
            # The samples for gamma, the landmarks and the automatic m, read in one go.
            sampler = RowSampler.reading_ahead(X, self._planned_samples(
                X, kernel, rng, bandwidth_rng, validation_rng))
            gamma = resolve_gamma(self.gamma, X, kernel, rng=bandwidth_rng, sampler=sampler)
            params = resolve_kernel_params(kernel, X.shape[1], gamma=gamma, **given)
            chosen, path = self._choose_landmarks(X, kernel, params, rng, validation_rng,
                                                  rcond, sampler)
            if saved is not None:
                saved.landmark_path = path  # stored with the landmarks
        _raise_if_landmarks_nonfinite(chosen.points, chosen.indices)
        kmm = landmark_kernel_matrix(chosen.points, kernel, params)
        basis = landmark_basis(kmm, rcond)
        reference = reference_row(chosen.points, kernel, params, kmm)
        stats = self._pass_statistics(X, chosen, kernel, params, reference, saved)
        raise_if_nonfinite(stats)
        solution = solve(stats, basis, self.n_components, bool(self.remove_zero_eig))
        preimage = (self._fit_preimage(X, chosen.points, kernel, params, solution, rcond)
                    if self.fit_inverse_transform else None)

        # Only now, with every step done, does the estimator change state.
        self._set_fitted(kernel, params, chosen, basis.W.shape[1], solution, X)
        check_feature_names(self, table if names is not None else X, reset=True)
        self.statistics_ = stats
        self.row_provenance_ = with_rows(None, source_of(X), 0, X.shape[0])
        self._set_reconstruction(novelty_terms(stats, basis), preimage)
        self.landmark_path_ = path
        self.fit_seconds_ = time.perf_counter() - started
        return self

    def _planned_samples(self, X, kernel, rng, bandwidth_rng, validation_rng):
        """The row samples gamma and the landmarks will draw, from copies of their generators."""
        n = X.shape[0]
        samples = [sample_indices(n, gamma_sample_size(self.gamma, kernel),
                                  copy.deepcopy(bandwidth_rng))]
        if self.n_landmarks == "auto":
            return samples + planned_samples(n, self.landmarks, rng=rng,
                                             validation_rng=validation_rng,
                                             max_landmarks=self.max_landmarks)
        return samples + [planned_sample(n, self.n_landmarks, self.landmarks, rng)]

    def _choose_landmarks(self, X, kernel, params, rng, validation_rng, rcond, sampler):
        """The landmarks, and the growth path when m is chosen automatically."""
        if self.n_landmarks == "auto":
            return grow_landmarks(
                X, self.landmarks, rng=rng, validation_rng=validation_rng, kernel=kernel,
                params=params, tol=self.tol, max_landmarks=self.max_landmarks, rcond=rcond,
                sampler=sampler)
        chosen = select_landmarks(X, self.n_landmarks, self.landmarks, rng=rng, kernel=kernel,
                                  params=params, sampler=sampler)
        return chosen, None

    def _pass_statistics(self, X, chosen, kernel, params, reference, saved):
        """The one pass over X: checkpointed when asked, else a single compute."""
        dtype = np.dtype(self.dtype)
        if saved is not None:
            return saved.run_pass(X, chosen, kernel, params, dtype, reference)
        stats = pass_statistics(X, chosen.points, kernel, params, dtype, reference=reference)
        with capped_blas(X):
            (stats,) = dask.compute(stats)
        return stats

    def _fit_preimage(self, X, landmarks, kernel, params, solution, rcond):
        """The pre-image map (docs/design.md §6): one more pass, over the training rows."""
        dtype = np.dtype(self.dtype)
        centres = embed_landmarks(landmarks, solution.projection, solution.offset, kernel,
                                  params, dtype)
        centre_basis = preimage_basis(centres, kernel, params, rcond)
        stats = preimage_statistics(X, landmarks, solution.projection, solution.offset,
                                    kernel, params, dtype, centres, centre_basis)
        with capped_blas(X):
            (stats,) = dask.compute(stats)
        return centres, solve_preimage(stats, centre_basis, self.alpha)

    def _set_reconstruction(self, terms, preimage) -> None:
        self.novelty_weights_ = terms.mean_weights
        self.novelty_mean_norm2_ = terms.mean_norm2
        if preimage is None:
            for name in ("preimage_centres_", "preimage_coefficients_"):
                self.__dict__.pop(name, None)  # a refit without the map drops the old one
        else:
            self.preimage_centres_, self.preimage_coefficients_ = preimage

    def _set_fitted(self, kernel, params, chosen, rank, solution: NystromSolution, X):
        self.kernel_ = kernel
        self.kernel_params_ = params
        self.gamma_ = params.get("gamma")
        self.landmarks_ = chosen.points
        self.landmark_indices_ = chosen.indices
        self.n_landmarks_ = chosen.points.shape[0]
        self.landmark_rank_ = rank
        self._set_solution(solution)
        self.n_features_in_ = X.shape[1]
        self.n_samples_fit_ = X.shape[0]

    def _set_solution(self, solution: NystromSolution):
        self.projection_ = solution.projection
        self.offset_ = solution.offset
        self.eigenvalues_ = solution.eigenvalues
        self.explained_variance_ratio_ = solution.explained_variance_ratio
        self.n_components_ = solution.projection.shape[1]
        self.trace_error_ = solution.trace_error

    # -- growing fits (docs/design.md §7) -----------------------------------------

    def partial_fit(self, X, y=None, *, rows: tuple[int, int] | None = None) -> "KernelPCA":
        """Add a batch of rows to the model: for data that grow or arrive in batches.

        The first call on an unfitted model is :meth:`fit` on the batch: it
        chooses the landmarks from it (with the configured strategy, or takes
        the explicit points) and resolves ``gamma`` from it. Every later call
        keeps landmarks and kernel parameters, adds the batch's pass
        statistics to the model's (one pass over the batch) and solves the
        small m x m problem again. After any sequence of batches the model
        equals a :meth:`fit` on their concatenation with
        ``landmarks=landmarks_`` and ``gamma=gamma_`` (to rounding, ~1e-12);
        it can transform and be saved after every call. A fitted or loaded
        model (format version 2) takes more rows the same way.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_batch, ``n_features_in_``); any input :meth:`fit` takes.
        y : ignored
        rows : (int, int), optional
            Add only rows ``start:stop`` of ``X``: the way to add the new rows
            of a stored array that grows, so that the model records which
            rows of it it holds (``row_provenance_``, see
            :mod:`kpca_dask.model.provenance`). Default: every row of ``X``.

        Returns
        -------
        self : KernelPCA

        Raises
        ------
        InvalidInputError
            The batch has another number of features than the model.
        NoStatisticsError
            The model keeps no statistics (loaded from a version-1 file).
        OverlappingRowsError
            The model has counted some of these rows already (the same
            in-memory batch again, or rows of a stored array it holds).

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(600, 3))
        >>> kpca = KernelPCA(n_components=2, gamma=0.5, n_landmarks=50, random_state=0)
        >>> for batch in np.array_split(X, 3):
        ...     kpca = kpca.partial_fit(batch)
        >>> kpca.n_samples_fit_
        600
        >>> refit = KernelPCA(n_components=2, gamma=kpca.gamma_, landmarks=kpca.landmarks_).fit(X)
        >>> bool(np.allclose(kpca.eigenvalues_, refit.eigenvalues_, rtol=1e-10))
        True
        """
        started = time.perf_counter()
        if hasattr(self, "statistics_"):
            check_feature_names(self, X, reset=False)
        table = X
        X = _as_fit_input(X, min_samples=1)
        source = source_of(X)  # of the whole input, before the rows are selected
        start, stop = _row_range(rows, X.shape[0])
        whole = (start, stop) == (0, X.shape[0])
        X = X if whole else X[start:stop]
        if not hasattr(self, "statistics_"):
            self.fit(table if whole else X)  # a whole table keeps its feature names
            self.row_provenance_ = with_rows(None, source, start, stop)
            return self
        total = require_statistics(self, "add rows to")
        check_n_features(X, self.n_features_in_, type(self).__name__)
        # Refused before the pass: rows counted already would be weighted twice.
        provenance = with_rows(recorded_rows(self), source, start, stop)
        batch = pass_statistics(X, self.landmarks_, self.kernel_, self.kernel_params_,
                                np.dtype(self.dtype), reference=total.reference)
        with capped_blas(X):
            (batch,) = dask.compute(batch)
        raise_if_nonfinite(batch)
        self._take_statistics(combine_statistics(total, batch), self.n_components)
        self.row_provenance_ = provenance
        self.fit_seconds_ += time.perf_counter() - started
        return self

    def set_n_components(self, n_components: int | float | None) -> "KernelPCA":
        """Re-solve the fitted model for another ``n_components``, without reading the data.

        The stored pass statistics (:attr:`statistics_`) hold everything the
        small problem needs, so another number of components costs O(m^3),
        not a pass: the result equals a fresh fit with the same landmarks and
        ``n_components`` (to 1e-12). ``n_components`` is set as well, so the
        parameters and the fitted state agree, as after a fit. The name
        follows scikit-learn's ``set_params``/``set_output``: a setter that
        returns ``self``; unlike ``set_params(n_components=...)``, which by
        scikit-learn's contract only takes effect at the next fit, it changes
        the fitted model now.

        Parameters
        ----------
        n_components : int, float in (0, 1) or None
            As in the constructor: a number of components, a fraction of the
            variance to explain, or None for every positive eigenvalue.

        Returns
        -------
        self : KernelPCA

        Raises
        ------
        NoStatisticsError
            The model keeps no statistics (loaded from a version-1 file).

        Warns
        -----
        ZeroEigenvalueWarning
            An int ``n_components`` above the number of positive eigenvalues:
            the extra components have eigenvalue 0 (dropped with
            ``remove_zero_eig=True``), as in :meth:`fit`.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> kpca = KernelPCA(n_components=2, gamma=0.5, n_landmarks=50, random_state=0).fit(X)
        >>> kpca.set_n_components(0.9).n_components_
        22
        >>> kpca.transform(X).shape
        (300, 22)
        """
        check_params({"n_components": n_components})
        self._take_statistics(require_statistics(self, "re-solve"), n_components)
        self.n_components = n_components
        return self

    def _take_statistics(self, stats: PassStatistics, n_components) -> None:
        """Solve the small problem for ``stats`` and take on the result (landmarks kept)."""
        Z = np.asarray(self.landmarks_)
        # The same K_mm and basis as the fit computed, so a re-solve repeats it exactly.
        kmm = landmark_kernel_matrix(Z, self.kernel_, self.kernel_params_)
        rcond = rcond_for(self.rcond, self.dtype)
        basis = landmark_basis(kmm, rcond)
        solution = solve(stats, basis, n_components, bool(self.remove_zero_eig))
        self._set_solution(solution)
        self.landmark_rank_ = basis.W.shape[1]
        self.statistics_ = stats
        self.n_samples_fit_ = int(stats.n_samples)
        # The novelty terms follow the statistics; a pre-image map was learnt by a
        # pass over the rows of the old solution and cannot follow without another.
        self._set_reconstruction(novelty_terms(stats, basis), None)

    # -- transform ---------------------------------------------------------

    def transform(self, X):
        """Project rows onto the principal components: y(x) = P^T k_m(x) - c.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_samples, n_features).

        Returns
        -------
        Y : ndarray, dask array or xarray.DataArray of shape (n_samples, ``n_components_``)
            A lazy dask array (same row chunks) for dask or Zarr input, numpy
            for in-memory input; for a DataArray, a DataArray with dims
            (sample dim, "component"), the sample coordinates and the kernel
            parameters in ``attrs``.
        """
        check_is_fitted(self)
        X, frame = table_input(self, X)
        X = _open_input(X)
        if _is_xarray(X):
            attrs = {"kernel": self.kernel_, **self.kernel_params_,
                     "n_landmarks": self.n_landmarks_}
            return label_embedding(self.transform(X.data), X, attrs)
        X, is_lazy = _as_rows(X, frame)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        Y = project(X, self.landmarks_, self.projection_, self.offset_, self.kernel_,
                    self.kernel_params_, np.dtype(self.dtype))
        if is_lazy:
            return Y if frame is None else frame_like(Y, frame, self.get_feature_names_out())
        with capped_blas(Y):
            return Y.compute()

    def inverse_transform(self, Y):
        """Map embeddings back to input space: the pre-images x_hat(y) (docs/design.md §6).

        Needs a model fitted with ``fit_inverse_transform=True``. As in
        scikit-learn, x_hat is a kernel ridge regression from embeddings to
        rows, so it is an approximate pre-image, smoothed by ``alpha``.

        Parameters
        ----------
        Y : array-like, dask array or xarray.DataArray of shape (n_samples, ``n_components_``)
            Embeddings, e.g. from :meth:`transform`. A DataArray needs a
            ``component`` dimension.

        Returns
        -------
        X_hat : ndarray, dask array or xarray.DataArray of shape (n_samples, ``n_features_in_``)
            A lazy dask array for dask input, numpy for in-memory input; for a
            DataArray, a DataArray with its sample coordinates and a
            ``feature`` dimension.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> kpca = KernelPCA(n_components=3, gamma=0.1, n_landmarks=100, random_state=0,
        ...                  fit_inverse_transform=True, alpha=1e-2).fit(X)
        >>> X_hat = kpca.inverse_transform(kpca.transform(X))
        >>> X_hat.shape, bool(np.mean((X_hat - X) ** 2) < 0.1 * np.mean(X ** 2))
        ((300, 3), True)
        """
        check_is_fitted(self)
        if not hasattr(self, "preimage_coefficients_"):
            raise NotInvertibleError(
                "This model has no pre-image map, so it cannot inverse_transform: it was fitted "
                "without fit_inverse_transform=True, or re-solved, updated or merged since (the "
                "map is learnt by a pass over the training rows). Fit it with "
                "KernelPCA(..., fit_inverse_transform=True) (one more pass over the data).")
        if _is_xarray(Y):
            return self._inverse_data_array(Y)
        frame = None
        if is_dask_frame(Y):
            frame = Partitions.of(select_columns(Y, what="The embedding"))
            Y = frame_to_array(frame, lengths=False, what="The embedding")
        elif is_frame(Y):
            frame, Y = Y, frame_to_numpy(Y, what="The embedding")
        Y, is_lazy = _as_rows(Y, frame, what="The embedding")
        if Y.shape[1] != self.n_components_:
            raise InvalidInputError(
                f"The embedding has {Y.shape[1]} column(s), but this model has "
                f"{self.n_components_} components; pass the output of transform (shape "
                f"(n_samples, {self.n_components_})).")
        X_hat = reconstruct(Y, self.preimage_centres_, self.preimage_coefficients_,
                            self.kernel_, self.kernel_params_)
        if frame is not None:
            names = getattr(self, "feature_names_in_", None)
            names = list(names) if names is not None else [
                f"x{i}" for i in range(self.n_features_in_)]
            return frame_like(X_hat if is_lazy else _computed(X_hat), frame, names)
        if is_lazy:
            return X_hat
        with capped_blas(X_hat):
            return X_hat.compute()

    def _inverse_data_array(self, Y):
        if "component" not in Y.dims or Y.ndim != 2:
            raise InvalidInputError(
                f"A DataArray embedding needs dims (sample, 'component'); got {Y.dims}. "
                "Pass the output of transform, or rename its component dimension.")
        Y = Y.transpose(..., "component")
        return label_rows(self.inverse_transform(Y.data), Y, name="reconstruction",
                          column_dim="feature")

    def reconstruction_error(self, X):
        """Squared distance in feature space from each row to the principal subspace.

        ``e(x) = |phi(x) - phi_bar|^2 - sum_{j<=q} y_j(x)^2`` in the Nyström
        feature space (docs/design.md §6; Hoffmann 2007): large for rows unlike the
        training data, a novelty score. Every model can compute it; no pass
        beyond the fit's is needed.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_samples, n_features).

        Returns
        -------
        errors : ndarray, dask array or xarray.DataArray of shape (n_samples,)
            Lazy for dask or Zarr input, numpy for in-memory input, a
            DataArray with the sample coordinates for a DataArray.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(300, 2))
        >>> kpca = KernelPCA(n_components=5, gamma=0.5, n_landmarks=100, random_state=0).fit(X)
        >>> errors = kpca.reconstruction_error(np.array([[0.0, 0.0], [6.0, 6.0]]))
        >>> bool(errors[0] < errors[1])
        True
        """
        check_is_fitted(self)
        if not hasattr(self, "novelty_weights_"):
            raise NotInvertibleError(
                "This model was saved by an older kpca-dask without the mean feature that "
                "reconstruction_error needs; fit it again.")
        X, frame = table_input(self, X)
        X = _open_input(X)
        if _is_xarray(X):
            return label_rows(self.reconstruction_error(X.data), X, name="reconstruction_error")
        X, is_lazy = _as_rows(X, frame)
        check_n_features(X, self.n_features_in_, type(self).__name__)
        errors = reconstruction_error(
            X, self.landmarks_, self.projection_, self.offset_,
            NoveltyTerms(np.asarray(self.novelty_weights_), float(self.novelty_mean_norm2_)),
            self.kernel_, self.kernel_params_, np.dtype(self.dtype))
        if frame is not None:
            return series_like(errors if is_lazy else _computed(errors), frame,
                               "reconstruction_error")
        if is_lazy:
            return errors
        return _computed(errors)

    def score_samples(self, X):
        """Minus :meth:`reconstruction_error`: higher means more like the training data.

        scikit-learn's outlier-detection convention (as in
        ``IsolationForest.score_samples``); same input and output types as
        :meth:`reconstruction_error`.
        """
        scores = -self.reconstruction_error(X)
        return scores.rename("score_samples") if is_frame(X) else scores

    def save(self, path, *, overwrite: bool = False, storage_options: dict | None = None) -> str:
        """Save the fitted model as a Zarr group (arrays + JSON attributes, no pickle).

        See :func:`kpca_dask.model.model_files.save_model`; read it back with
        :func:`kpca_dask.load`.

        Examples
        --------
        >>> import tempfile, numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(100, 3))
        >>> kpca = KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X)
        >>> path = kpca.save(tempfile.mkdtemp() + "/model.zarr")
        >>> bool((kpca_dask.load(path).transform(X) == kpca.transform(X)).all())
        True
        """
        return save_model(self, path, overwrite=overwrite, storage_options=storage_options)

    def fit_transform(self, X, y=None, **fit_params):
        """Fit, then project the training rows (a second, lazy pass for dask input).

        With ``fit_inverse_transform=True`` the fit makes one more pass for the
        pre-image map.
        """
        return self.fit(X, **fit_params).transform(X)

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        tags.input_tags.sparse = True
        return tags


def _is_xarray(X) -> bool:
    return type(X).__module__.split(".")[0] == "xarray"


def _computed(Y):
    with capped_blas(Y):
        return Y.compute()


def _as_rows(X, frame, what: str = "X"):
    """``X`` as a lazy float array and ``is_lazy``; a dask frame's blocks may have
    unknown lengths, which a lazy projection does not need."""
    if isinstance(frame, Partitions):
        return X, True
    return as_dask_array(X, what=what, min_samples=1)


def _open_input(X):
    """Zarr paths and xarray objects go through kpca_dask.io; anything else is unchanged."""
    if isinstance(X, (str, os.PathLike)) or _is_xarray(X):
        from ..io import open_array

        return open_array(X)
    return X


def _as_fit_input(X, min_samples: int = 2):
    """The training data as a validated dask array with one chunk of features."""
    if is_dask_frame(X):
        X = frame_to_array(X, lengths=True)  # row counts from metadata where kept
    elif is_frame(X):
        X = frame_to_numpy(X)
    X = _open_input(X)
    X, _ = as_dask_array(X.data if _is_xarray(X) else X, min_samples=min_samples)
    return X


def _row_range(rows, n: int) -> tuple[int, int]:
    """``rows`` as a checked (start, stop) of an input of ``n`` rows; None means every row."""
    if rows is None:
        return 0, n
    valid = (isinstance(rows, (tuple, list)) and len(rows) == 2
             and all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in rows))
    if not valid or not 0 <= rows[0] < rows[1] <= n:
        raise InvalidParameterError(
            f"rows must be (start, stop) with 0 <= start < stop <= {n} (the rows of X); "
            f"got {rows!r}.")
    return int(rows[0]), int(rows[1])


def _raise_if_landmarks_nonfinite(points: np.ndarray, indices) -> None:
    bad = ~np.isfinite(points).all(axis=1)
    if bad.any():
        where = (f"row {int(indices[np.flatnonzero(bad)[0]])} of X" if indices is not None
                 else f"landmark {int(np.flatnonzero(bad)[0])}")
        raise NonFiniteInputError(
            f"A landmark contains NaN or infinite values ({where}). Remove or impute "
            "non-finite values in X (or in the landmarks you passed) first.")
