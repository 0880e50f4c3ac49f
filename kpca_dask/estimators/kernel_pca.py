"""The scikit-learn compatible estimator: Nyström kernel PCA over dask arrays.

A thin face over the fitted model: parameters in, a
:class:`~kpca_dask.model.fitted.FittedModel` out (``model_``), made by
:mod:`kpca_dask.model.fitting`; the fitted attributes are read-only views of
it. Every public method is written here, with its documentation, and calls
the function of :mod:`kpca_dask.model` that does the work on the fitted
model: growing (:mod:`kpca_dask.model.growing`), the outputs
(:mod:`kpca_dask.model.outputs`), the patterns (:mod:`kpca_dask.eof.patterns`),
and saving (:mod:`kpca_dask.storage.model_files`).
"""

from __future__ import annotations

import os
import time
from functools import partial
from typing import Callable, Literal

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..eof.patterns import check_kind, patterns_of
from ..eof.scalings import check_scaling, scaled_scores
from ..errors import NotInvertibleError
from ..io.frames import check_feature_names
from ..model.fitted import FittedModel, fitted_attribute
from ..model.fitting import fit_model, solved
from ..model.growing import (
    batch_of,
    partial_fitted,
    require_statistics,
    warn_of_parameters_set_since,
)
from ..model.inputs import embedding_input, first_batch, fit_input, method_input
from ..model.kernel_matrices import training_eigenvectors
from ..model.keywords import explains_keywords
from ..model.outputs import (
    check_invertible,
    embedding,
    preimages,
    reconstruction_errors,
    transformed,
)
from ..model.parameters import CONSTRAINTS, check_params
from ..model.precomputed import PRECOMPUTED, fit_precomputed
from ..model.provenance import recorded_rows, with_rows
from ..validation import check_n_features
from . import gram_way
from .base import FittedModelEstimator

__all__ = ["KernelPCA"]

_read_feature_names = fitted_attribute("feature_names_in_").fget


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, FittedModelEstimator):
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
        ``"precomputed"``: ``fit`` takes the n x n kernel matrix of the training
        points (numpy, dask or Zarr; only its landmark columns and its diagonal
        are read), ``transform`` the (n_new, n) kernel of new points against
        them; landmarks are uniform column indices (``"uniform"``, and the
        default ``"kmeans"``, which needs points) or given as a 1-D array of
        ints (see :mod:`kpca_dask.model.precomputed`).
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
        rows, is below ``tol``, or m reaches its cap (``max_landmarks``, or the
        most landmarks whose 2.2 m^2 float64 words fit in memory); the path is
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
    max_landmarks : int or None, default=None
        The largest m ``n_landmarks="auto"`` tries. None: as many as fit in the
        memory the fit may use (a worker's ``memory_limit`` on a cluster, this
        machine's available memory otherwise); an int is capped there too.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the kernel blocks and of every output (float32 input
        gives float32 outputs either way); statistics are always summed in
        float64.
    rcond : float, default=None
        A landmark whose residual variance given the landmarks kept before it is
        at most ``rcond`` times the largest k(z, z) is left out (pivoted
        Cholesky, docs/design.md §11); ``landmark_rank_`` counts those kept.
        None: 1e-10 for float64 blocks, 1e-3 for float32.
    random_state : int, numpy Generator or None, default=None
        Seeds landmark selection. The same seed gives the same model for any
        chunking, scheduler and number of workers.
    fit_inverse_transform : bool, default=False
        Also learn the pre-image map used by :meth:`inverse_transform`: kernel
        ridge regression from embeddings back to input space, with the
        landmarks' embeddings as centres (docs/design.md §6). Costs one more pass over
        the training data after the fit (not saved in a ``checkpoint``: an
        interrupted fit redoes it).
    alpha : float or "auto", default=1.0
        Ridge penalty of the pre-image map (``fit_inverse_transform=True``
        only), a ridge regression with the training mean as its unpenalised
        intercept. ``"auto"`` chooses it by generalised cross-validation from
        the pre-image pass's sums, without another pass (recommended;
        ``inverse_alpha_`` and ``inverse_alpha_score_`` report the choice);
        0 is least squares. The default is scikit-learn's.
    sample_dim : str or None, default=None
        The sample dimension of a DataArray; the others are stacked lazily into
        features, positions NaN at every sample (a mask) dropped and given back
        as NaN (:mod:`kpca_dask.io.preprocessing.fields`). None: the first of two dimensions,
        or among more the one named ``time`` (else the fit asks for it); the one
        used is ``sample_dim_``.
    weights : DataArray, "coslat", 1-D array or None, default=None
        Multiply the features before the kernel: a DataArray over feature
        dimensions, ``"coslat"`` for √cos(latitude) of the field's latitude
        coordinate (xeofs' ``use_coslat=True``;
        :func:`kpca_dask.io.preprocessing.latitude.field_coslat_weights`), or one weight per
        feature of an array; finite and >= 0.
    solver : {"auto", "gram", "nystrom"}, default="auto"
        ``"nystrom"``: landmarks, memory O(chunk m + m^2). ``"gram"``: exact, by
        the n x n kernel matrix in one read (wide data: few time steps, many grid
        points); the model is an :class:`ExactKernelPCA`'s, so ``partial_fit``,
        ``merge``, ``set_n_components`` and pre-images are refused. ``"auto"``:
        the Gram way for wide data whose n x n work fits and costs no more than
        the landmark pass (n <= 2 ``n_landmarks``), with a kernel of inner
        products or squared distances and no pre-image map or landmark points or
        search asked for; else landmarks (docs/design.md §19).

    Attributes
    ----------
    solver_ : {"gram", "nystrom"}
        The way the fit took (see ``solver``). A Gram-way model holds an
        :class:`~kpca_dask.exact.exact_model.ExactFit` and has the attributes
        of an :class:`ExactKernelPCA`; the landmark ones below are absent.
    model_ : FittedModel
        The fitted model as one immutable object
        (:class:`~kpca_dask.model.fitted.FittedModel`): every fit,
        :meth:`partial_fit`, :meth:`set_n_components` and
        :func:`kpca_dask.merge` makes a new one. The attributes below are
        read-only views of it.
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of the centred (Nyström) Gram matrix, descending; the same
        scale as ``sklearn.decomposition.KernelPCA.eigenvalues_``.
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        When every training row is a landmark (``n_landmarks >= n_samples``;
        absent otherwise): the unit eigenvectors of the centred n x n kernel
        matrix in training-row order, scikit-learn's ``eigenvectors_`` up to
        each column's sign (which follows this model's embedding). Computed
        from the landmarks on first access; the components with eigenvalue 0
        get unit vectors orthogonal to the others.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``eigenvalues_`` divided by the total variance in the kernel's feature
        space (a share of ``total_variance_``; the rotated modes of
        :func:`kpca_dask.rotate` report theirs in the same space). :meth:`spectrum`
        gives it with the other variances as an ``xr.Dataset`` over ``mode``.
    explained_variance_ : ndarray of shape (n_components,)
        ``eigenvalues_ / (n_samples_fit_ - 1)``, the variance of each score (eofs'
        ``eigenvalues``); :meth:`north_errors` gives their sampling errors.
    total_variance_ : float
        The total ``explained_variance_ratio_`` is a share of, on the scale of
        ``explained_variance_`` (eofs' ``totalAnomalyVariance``). Exact when every
        training row is a landmark; with fewer landmarks it is the Nyström
        estimate (below the exact total by about ``trace_error_``, so the ratios
        are a little larger than the exact shares), except for the linear
        kernel, whose pass knows the exact total (``centred_trace_``):
        ``total_variance_kind_`` says which (``"exact"`` or ``"nystrom-estimate"``).
    sample_dim_ : str or None
        The sample dimension of a field's fit (None for arrays).
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
        Landmarks kept by the factorisation of K_mm (the dimension of the
        Nyström features; see ``rcond``).
    gamma_ : float or None
        The resolved gamma (None for kernels without one).
    kernel_params_ : dict
        Every resolved kernel parameter.
    trace_error_ : float
        Relative trace error of the Nyström approximation,
        ``(trace K - trace K_nys) / trace K``, from the same pass.
    trace_error_std_ : float
        Standard error of ``trace_error_`` and of ``explained_variance_ratio_``'s
        denominator: 0 when trace(M) is computed exactly, positive when m is so
        large beside n that it is estimated (docs/design.md §11).
    centred_trace_ : float
        trace(J K J) of the training rows, exactly: for the linear kernel the
        pass adds up the rows, so ``t - |sum x|^2 / n`` is known with any number
        of landmarks, and ``explained_variance_ratio_`` is a share of it (the
        weighted field's total variance times n - 1, as xeofs divides by).
        Absent for other kernels.
    eigenvalue_residuals_ : ndarray of shape (``n_components_``,)
        The solve's certificate: ``|M v_j - lambda_j v_j|`` for each component of
        the whitened covariance M; an eigenvalue is within residual^2 / gap of
        the exact one. None for models saved before it was recorded.
    projection_ : ndarray of shape (``n_landmarks_``, ``n_components_``)
        P = W V_q: y(x) = P^T k_m(x) - ``offset_``.
    offset_ : ndarray of shape (``n_components_``,)
    n_features_in_ : int
    n_samples_fit_ : int
    statistics_ : PassStatistics
        The pass statistics n, s, G, t and the reference row r (float64,
        docs/design.md §7): everything :meth:`partial_fit`, :meth:`set_n_components`
        and :func:`kpca_dask.merge` need; None from a format-version-1 file. On a
        cluster, ``gram`` is a dask array the workers hold (docs/design.md §11).
    row_provenance_ : dict
        Which rows the statistics hold, per source (a fingerprint, a description,
        row ranges): :meth:`partial_fit` and :func:`kpca_dask.merge` refuse rows
        counted already (:mod:`kpca_dask.model.provenance`).
    fit_seconds_ : float
        Wall time of the last fit, plus that of every later :meth:`partial_fit`.
    fit_settings_ : FitSettings
        The parameters the model was solved with (``n_components`` as asked,
        ``remove_zero_eig``, ``dtype``, and ``rcond`` resolved): what outputs,
        :meth:`partial_fit` and :func:`kpca_dask.merge` use. Parameters set
        after a fit change no output until the next fit, as in scikit-learn;
        :meth:`set_n_components` changes ``n_components`` of the fitted model.
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
        ``x_hat(y) = k(y, preimage_centres_) @ preimage_coefficients_
        + preimage_intercept_``.
    preimage_intercept_ : ndarray of shape (``n_features_in_``,)
        The pre-image map's unpenalised intercept, x_bar - B^T g_bar: with it a
        reconstruction holds the training mean (absent from maps saved before it).
    inverse_alpha_ : float
        The ridge penalty of the pre-image map: ``alpha``, or the value
        ``alpha="auto"`` chose (``fit_inverse_transform=True`` only).
    inverse_alpha_score_ : float
        The generalised cross-validation score of ``inverse_alpha_``,
        n RSS / (n - df)^2 / n_features: an estimate of the mean squared error
        of one reconstructed value of a new row, in the units of the weighted
        features (docs/design.md §6). Absent where it is not finite.
    feature_layout_ : FeatureLayout
        A field's (or weighted) fit: dimensions, coordinates, mask, weights
        (:class:`~kpca_dask.io.preprocessing.fields.FeatureLayout`); later inputs must match.
    feature_weights_, feature_kept_ : ndarray of shape (``n_features_in_``,)
        The weights and the flat field positions of the features (if any).
    rotation_ : Rotation
        The varimax or promax rotation the model holds: that of a
        :func:`kpca_dask.rotate` result's estimator (``rotate(kpca, X).estimator``,
        a copy: ``kpca`` is not changed), saved with the model and back from
        :func:`kpca_dask.load` (absent otherwise, dropped by a refit or re-solve); its
        parts are ``rotation_method_``, ``rotation_power_``, ``rotation_matrix_``,
        ``rotation_correlation_``, ``rotation_order_``, ``rotation_signs_``,
        ``rotation_explained_variance_``, ``rotation_total_variance_`` and
        ``rotation_loadings_`` (see :class:`~kpca_dask.engine.orthomax.Rotation`;
        its variances are of the weighted features, the rotated modes'
        ``field_variance_``, not kernel-space ones).

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

    _model_file = ("..storage.model_files", "save_model")  # its model files
    _parameter_constraints = CONSTRAINTS

    @explains_keywords
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
        max_landmarks: int | None = None,
        dtype: Literal["float64", "float32"] = "float64",
        rcond: float | None = None,
        random_state: int | np.random.Generator | None = None,
        fit_inverse_transform: bool = False,
        alpha: float | Literal["auto"] = 1.0,
        sample_dim: str | None = None,
        weights=None,
        solver: Literal["auto", "gram", "nystrom"] = "auto",
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
        self.sample_dim = sample_dim
        self.weights = weights
        self.solver = solver

    # -- fit ---------------------------------------------------------------

    @explains_keywords
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
            :mod:`kpca_dask.checkpoints.fit_checkpoint`. The Gram way keeps none.

        Returns
        -------
        self : KernelPCA
        """
        return self._fit(X, checkpoint=checkpoint)

    def _fit(self, X, *, checkpoint=None, growing: bool = False) -> "KernelPCA":
        """:meth:`fit`; ``growing``: the first batch of :meth:`partial_fit`, by landmarks."""
        started = time.perf_counter()
        self._check_params()
        params = self.get_params(deep=False)
        precomputed = params["kernel"] == PRECOMPUTED
        fit = fit_precomputed if precomputed else fit_model
        # Stored column chunks are kept: a kernel matrix's (only the landmarks' are
        # read) and the points' (the kernels sum over them, docs/design.md §12).
        given = fit_input(X, sample_dim=params["sample_dim"], weights=params["weights"],
                          precomputed=precomputed)
        if not growing and gram_way.chosen_solver(params, given) == "gram":  # exact: n x n
            self.model_ = gram_way.exact_fit(params, X)
            return self
        model = fit(params, given.data, feature_names=given.feature_names,
                    checkpoint=checkpoint, started=started)
        model = model.replace(layout=given.layout)
        self.model_ = model  # only now, with every step done, does the estimator change
        return self

    def fit_transform(self, X, y=None, **fit_params):
        """Fit, then project the training rows (a second, lazy pass for dask input).

        With ``fit_inverse_transform=True`` the fit makes one more pass for the
        pre-image map.
        """
        self.fit(X, **fit_params)
        if gram_way.is_gram_model(self):  # the scores the fit holds, A_q Lambda_q^(1/2)
            return gram_way.in_fit_dtype(self, X, gram_way.exact_view(self)._fitted_scores(X))
        return self.transform(X)

    # -- growing: more rows, another number of components (kpca_dask.model.growing) --

    def partial_fit(self, X, y=None, *, rows: tuple[int, int] | None = None) -> "KernelPCA":
        """Add a batch of rows to the model: for data that grow or arrive in batches.

        The first call on an unfitted model is :meth:`fit` on the batch: it
        chooses the landmarks from it (with the configured strategy, or takes
        the explicit points) and resolves ``gamma`` from it. Every later call
        keeps the landmarks, the kernel parameters and the settings of the fit
        (``fit_settings_``: n_components, remove_zero_eig, dtype, rcond), adds
        the batch's pass statistics to the model's (one pass over the batch)
        and solves the small m x m problem again. A parameter set since the
        fit takes effect at the next :meth:`fit`, as in scikit-learn; one that
        this call would have used is named in a
        :class:`~kpca_dask.errors.ParametersChangedWarning`. After any sequence
        of batches the model equals a :meth:`fit` on their concatenation with
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
            The model has counted some of these rows already: rows of a
            stored array or URL it holds, or ``rows=`` it holds.

        Warns
        -----
        RepeatedRowsWarning
            An in-memory batch (numpy, pandas, scipy.sparse) given whole
            again: its rows count once more, as in scikit-learn.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import KernelPCA
        >>> X, kpca = np.random.default_rng(0).normal(size=(600, 3)), KernelPCA(
        ...     n_components=2, gamma=0.5, n_landmarks=50, random_state=0)
        >>> for batch in np.array_split(X, 3):
        ...     kpca = kpca.partial_fit(batch)
        >>> kpca.n_samples_fit_
        600
        >>> refit = KernelPCA(n_components=2, gamma=kpca.gamma_, landmarks=kpca.landmarks_).fit(X)
        >>> bool(np.allclose(kpca.eigenvalues_, refit.eigenvalues_, rtol=1e-10))
        True
        """
        started = time.perf_counter()
        gram_way.refuse(self, "add rows (partial_fit)")
        if getattr(self, "model_", None) is None:  # the first batch: a fit on it
            gram_way.refuse_growing(self.solver)
            batch, provenance = first_batch(X, rows)
            self._fit(batch, growing=True)
            if provenance is not None:  # a field's samples are chosen with X.isel
                self.model_ = self.model_.replace(row_provenance=provenance)
            return self
        check_feature_names(self, X, reset=False)
        batch = batch_of(self.model_, X, rows)
        statistics = require_statistics(self, "add rows to")
        check_n_features(batch.rows, self.model_.n_features, type(self).__name__)
        # Refused before the pass: rows counted already would be weighted twice, unless
        # they are an in-memory batch given whole again (scikit-learn's partial_fit).
        provenance = with_rows(recorded_rows(self), batch.source, batch.start, batch.stop,
                               repeatable=batch.repeatable)
        warn_of_parameters_set_since(self.model_.settings, self.get_params(deep=False))
        model = partial_fitted(self.model_, batch.rows, statistics, provenance, started=started)
        self.model_ = model  # only now, with every step done, does the estimator change
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
        >>> import numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> kpca = kpca_dask.KernelPCA(n_components=2, gamma=0.5, n_landmarks=50, random_state=0)
        >>> kpca.fit(X).set_n_components(0.9).n_components_
        22
        >>> kpca.transform(X).shape
        (300, 22)
        """
        check_params({"n_components": n_components})
        gram_way.refuse(self, "re-solve for another n_components without reading the data")
        statistics = require_statistics(self, "re-solve")
        self.model_ = solved(self.model_, statistics, n_components=n_components)
        self.n_components = n_components
        return self

    # -- outputs: read the fitted model only (kpca_dask.model.outputs) -------

    def transform(self, X, *, pcscaling: int = 0):
        """Project rows onto the principal components: y(x) = P^T k_m(x) - c.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_samples, n_features). A field (or several) with the fit's
            weights and mask, or one sample of it without the sample dimension
            (a DataArray over the ``mode`` dimension comes back).
        pcscaling : {0, 1, 2}, default=0
            eofs' scalings of the scores: 0 as they are, 1 divided by
            ``sqrt(explained_variance_)`` (unit variance over the fit's rows),
            2 multiplied by it.

        Returns
        -------
        Y : ndarray, dask array or xarray.DataArray of shape (n_samples, ``n_components_``)
            A lazy dask array (same row chunks) for dask or Zarr input, numpy
            for in-memory input; for a DataArray, a lazy DataArray ``scores``
            with dims (sample dim, "mode"), the modes numbered 1..q (xeofs'
            convention), the sample coordinates and the kernel parameters in
            ``attrs``.
        """
        check_is_fitted(self)
        if gram_way.is_gram_model(self):
            return gram_way.in_fit_dtype(
                self, X, gram_way.exact_view(self).transform(X, pcscaling=pcscaling))
        pcscaling = check_scaling(pcscaling, "pcscaling")
        rows = method_input(self, self.model_.layout, X)
        return scaled_scores(transformed(self.model_, rows, columns=self.get_feature_names_out(),
                                         name=type(self).__name__),
                             self.explained_variance_, pcscaling)

    def inverse_transform(self, Y, *, n_components: int | None = None):
        """Map embeddings back to input space: the pre-images x_hat(y) (docs/design.md §6).

        Needs a model fitted with ``fit_inverse_transform=True``. As in
        scikit-learn, x_hat is a kernel ridge regression from embeddings to
        rows, so it is an approximate pre-image, smoothed by ``alpha``; unlike
        scikit-learn's it has the training mean as an unpenalised intercept, so
        a reconstruction is the field with its mean for every kernel (for a
        linear kernel and ``alpha=0``, the EOF truncation x_bar + sum_k y_k
        eof_k: eofs' ``reconstructedField(k)`` plus the mean).
        ``alpha="auto"`` chooses the ridge (``inverse_alpha_``).

        Parameters
        ----------
        Y : array-like, dask array or xarray.DataArray of shape (n_samples, ``n_components_``)
            Embeddings, e.g. from :meth:`transform`. A DataArray needs a
            ``mode`` dimension.
        n_components : int, optional
            Reconstruct from the leading ``n_components`` components only (the
            others set to 0: the projection onto the leading subspace), as eofs'
            ``reconstructedField(neofs)``. Default: every component.

        Returns
        -------
        X_hat : ndarray, dask array or xarray.DataArray of shape (n_samples, ``n_features_in_``)
            A lazy dask array for dask input, numpy for in-memory input; for a
            DataArray, a DataArray with its sample coordinates and a
            ``feature`` dimension, or for a model fitted on a field the field
            itself (its feature dimensions and coordinates, NaN on the mask,
            named as the input variable with its ``units`` and ``long_name``;
            a list or Dataset for several fields). Weighted features are divided
            by their weights (NaN where a weight is 0), so pre-images are in the
            units of the input.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import KernelPCA
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> kpca = KernelPCA(n_components=3, gamma=0.1, n_landmarks=100, random_state=0,
        ...                  fit_inverse_transform=True, alpha="auto").fit(X + 5.0)
        >>> X_hat = kpca.inverse_transform(kpca.transform(X + 5.0))
        >>> X_hat.shape, bool(np.mean((X_hat - X - 5.0) ** 2) < 0.1 * np.mean(X ** 2))
        ((300, 3), True)
        >>> bool(0 < kpca.inverse_alpha_ < 1)  # chosen by generalised cross-validation
        True
        """
        check_is_fitted(self)
        gram_way.refuse(self, "inverse_transform: fit_inverse_transform=True needs landmarks",
                        NotInvertibleError)
        check_invertible(self.model_)
        return preimages(self.model_, embedding_input(Y), n_components=n_components)

    def reconstruction_error(self, X):
        """Squared distance in feature space from each row to the principal subspace.

        ``e(x) = |phi(x) - phi_bar|^2 - sum_{j<=q} y_j(x)^2`` in the Nyström
        feature space (docs/design.md §6; Hoffmann 2007): large for rows unlike the
        training data, a novelty score. Every model can compute it; no pass
        beyond the fit's is needed.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_samples, n_features), as for :meth:`transform`.

        Returns
        -------
        errors : ndarray, dask array or xarray.DataArray of shape (n_samples,)
            Lazy for dask or Zarr input, numpy for in-memory input, a
            DataArray with the sample coordinates for a DataArray.

        Examples
        --------
        >>> import numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(300, 2))
        >>> kpca = kpca_dask.KernelPCA(n_components=5, gamma=0.5, n_landmarks=100,
        ...                            random_state=0).fit(X)
        >>> errors = kpca.reconstruction_error(np.array([[0.0, 0.0], [6.0, 6.0]]))
        >>> bool(errors[0] < errors[1])
        True
        """
        check_is_fitted(self)
        if gram_way.is_gram_model(self):
            return gram_way.exact_view(self).reconstruction_error(X)
        rows = method_input(self, self.model_.layout, X)
        return reconstruction_errors(self.model_, rows, name=type(self).__name__)

    def score_samples(self, X):
        """Minus :meth:`reconstruction_error`: higher means more like the training data.

        scikit-learn's outlier-detection convention (as in
        ``IsolationForest.score_samples``); same input and output types as
        :meth:`reconstruction_error`.
        """
        check_is_fitted(self)
        if gram_way.is_gram_model(self):
            return gram_way.exact_view(self).score_samples(X)
        rows = method_input(self, self.model_.layout, X)
        return -reconstruction_errors(self.model_, rows, name=type(self).__name__,
                                      series_name="score_samples")

    def patterns(self, X, kind: Literal["covariance", "correlation", "eof"] = "covariance", *,
                 pcscaling: int | None = None, eofscaling: int | None = None):
        """Map of each component over the features: covariance or correlation with its score.

        ``"covariance"``: cov(y_j / sd(y_j), x), the covariance of each feature
        of the unweighted input with the score of component j scaled to unit
        variance over the rows of ``X``, in the units of the input (eofs'
        ``eofsAsCovariance(pcscaling=1)``); ``"correlation"``: corr(y_j, x)
        (eofs' ``eofsAsCorrelation``); ``"eof"``: cov(y_j, w x) / ``explained_variance_``,
        over the weighted features, eofs' ``eofs()`` (the unit EOF for a linear
        kernel, the regression of the weighted field on the component for any).
        ddof = 1. Computed lazily, in one pass over ``X``.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            The data the maps are taken over, usually the training data.
        kind : {"covariance", "correlation", "eof"}, default="covariance"
        pcscaling : {0, 1, 2}, optional
            For ``"covariance"``, the score's scaling as in eofs'
            ``eofsAsCovariance(pcscaling)``: 0 the score itself, 1 (default)
            unit variance, 2 multiplied by ``sqrt(explained_variance_)``.
        eofscaling : {0, 1, 2}, optional
            For ``"eof"``, eofs' ``eofs(eofscaling)``: 0 (default) unit EOFs,
            1 divided by ``sqrt(explained_variance_)``, 2 multiplied by it.

        Returns
        -------
        patterns : ndarray or dask array of shape (``n_components_``, n_features), or DataArray
            For a field, a DataArray (``mode`` numbered 1..q, then the feature
            dims; lazy for a dask-backed field, computed for one in memory) with
            the fit's coordinates and NaN on the mask (a list or a Dataset of
            them for several fields), named ``covariance_maps``
            (in the field's ``units`` for ``pcscaling=1``), ``correlation_maps``
            (no units) or ``components`` (``"eof"``); for arrays, numpy for
            in-memory input and a lazy dask array for dask or stored input.
            A feature or score of zero variance gives NaN.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import KernelPCA
        >>> X = np.random.default_rng(0).normal(size=(200, 3)) * [3.0, 1.0, 0.1]
        >>> kpca = KernelPCA(n_components=2, kernel="linear", n_landmarks=200).fit(X)
        >>> np.round(np.abs(kpca.patterns(X, kind="correlation")[0]), 2)
        array([1.  , 0.01, 0.09])
        """
        check_is_fitted(self)
        if gram_way.is_gram_model(self):
            return gram_way.exact_view(self).patterns(X, kind, pcscaling=pcscaling,
                                                      eofscaling=eofscaling)
        check_kind(kind, pcscaling, eofscaling)
        model = self.model_
        rows = method_input(self, model.layout, X, weighted=False)
        return patterns_of(rows, kind, layout=model.layout,
                           embedding=partial(embedding, model, name=type(self).__name__),
                           variances=self.explained_variance_, pcscaling=pcscaling,
                           eofscaling=eofscaling)

    def save(self, path, *, overwrite: bool = False, storage_options: dict | None = None) -> str:
        """As the base's ``save``; a Gram-way model is written as its :class:`ExactKernelPCA`."""
        owner = gram_way.exact_view(self) if gram_way.is_gram_model(self) else super()
        return owner.save(path, overwrite=overwrite, storage_options=storage_options)

    @property
    def solver_(self) -> str:
        """The way the fit took: ``"gram"`` or ``"nystrom"`` (see ``solver``)."""
        check_is_fitted(self)
        return "gram" if gram_way.is_gram_model(self) else "nystrom"

    __getattr__ = gram_way.forwarded  # a Gram-way model's attributes: the exact model's

    #: The base's, named here so that the Attributes section's entry links to it.
    sample_dim_ = FittedModelEstimator.sample_dim_

    #: The fitted model (:class:`~kpca_dask.model.fitted.FittedModel`); absent before a fit.
    model_: FittedModel

    # -- fitted attributes: read-only views of model_ (FittedModel; see Attributes) --

    kernel_ = fitted_attribute("kernel_")
    kernel_params_ = fitted_attribute("kernel_params_")
    gamma_ = fitted_attribute("gamma_")
    landmarks_ = fitted_attribute("landmarks_")
    landmark_indices_ = fitted_attribute("landmark_indices_")
    n_landmarks_ = fitted_attribute("n_landmarks_")
    landmark_rank_ = fitted_attribute("landmark_rank_")
    landmark_path_ = fitted_attribute("landmark_path_")
    projection_ = fitted_attribute("projection_")
    offset_ = fitted_attribute("offset_")
    eigenvalues_ = fitted_attribute("eigenvalues_")
    explained_variance_ratio_ = fitted_attribute("explained_variance_ratio_")
    trace_error_ = fitted_attribute("trace_error_")
    trace_error_std_ = fitted_attribute("trace_error_std_")
    centred_trace_ = fitted_attribute("centred_trace_")
    eigenvalue_residuals_ = fitted_attribute("eigenvalue_residuals_")
    n_components_ = fitted_attribute("n_components_")
    n_features_in_ = fitted_attribute("n_features_in_")
    n_samples_fit_ = fitted_attribute("n_samples_fit_")
    statistics_ = fitted_attribute("statistics_")
    row_provenance_ = fitted_attribute("row_provenance_")
    fit_seconds_ = fitted_attribute("fit_seconds_")
    fit_settings_ = fitted_attribute("fit_settings_")
    novelty_weights_ = fitted_attribute("novelty_weights_")
    novelty_mean_norm2_ = fitted_attribute("novelty_mean_norm2_")
    preimage_centres_ = fitted_attribute("preimage_centres_")
    preimage_coefficients_ = fitted_attribute("preimage_coefficients_")
    preimage_intercept_ = fitted_attribute("preimage_intercept_")
    inverse_alpha_ = fitted_attribute("inverse_alpha_")
    inverse_alpha_score_ = fitted_attribute("inverse_alpha_score_")
    feature_layout_ = fitted_attribute("feature_layout_")
    feature_weights_ = fitted_attribute("feature_weights_")
    feature_kept_ = fitted_attribute("feature_kept_")
    rotation_ = fitted_attribute("rotation_")
    # the parts of rotation_, as a model file holds them
    rotation_method_ = fitted_attribute("rotation_method_")
    rotation_power_ = fitted_attribute("rotation_power_")
    rotation_matrix_ = fitted_attribute("rotation_matrix_")
    rotation_correlation_ = fitted_attribute("rotation_correlation_")
    rotation_order_ = fitted_attribute("rotation_order_")
    rotation_signs_ = fitted_attribute("rotation_signs_")
    rotation_explained_variance_ = fitted_attribute("rotation_explained_variance_")
    rotation_total_variance_ = fitted_attribute("rotation_total_variance_")
    rotation_loadings_ = fitted_attribute("rotation_loadings_")

    @property
    def total_variance_kind_(self) -> str:
        """``"exact"`` when every training row is a landmark (the Nyström fit is exact
        kernel PCA) or the pass knows the exact total (``centred_trace_``, the linear
        kernel), else ``"nystrom-estimate"``: what ``total_variance_`` is."""
        check_is_fitted(self)
        exact = (self.n_landmarks_ >= self.n_samples_fit_ and self.trace_error_std_ == 0
                 ) or hasattr(self, "centred_trace_")
        return "exact" if exact else "nystrom-estimate"

    @property
    def feature_names_in_(self) -> np.ndarray:
        """The column names of a table fit (absent for arrays), as scikit-learn keeps them."""
        return _read_feature_names(self)

    @feature_names_in_.setter
    def feature_names_in_(self, names) -> None:
        self.model_ = self.model_.replace(feature_names=np.asarray(names, dtype=object))

    @feature_names_in_.deleter
    def feature_names_in_(self) -> None:
        self.model_ = self.model_.replace(feature_names=None)

    @property
    def eigenvectors_(self) -> np.ndarray:
        """A_q, the unit eigenvectors of the centred kernel matrix, (n_samples,
        ``n_components_``) in training-row order: present when every training row is a landmark
        (see Attributes)."""
        check_is_fitted(self)
        cached = getattr(self, "_eigenvectors", None)
        if cached is None or cached[0] is not self.model_:  # computed once per model
            cached = (self.model_, training_eigenvectors(self.model_))
            self._eigenvectors = cached
        if cached[1] is None:
            raise AttributeError(
                f"This {type(self).__name__} has no 'eigenvectors_': they are those of the "
                "n x n kernel matrix, which the model holds only when every training row is a "
                "landmark. Fit with n_landmarks >= n_samples (exact kernel PCA), or use "
                "ExactKernelPCA.")
        return cached[1]

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # float32 in, float32 out (and a float32 model gives float32 for any input).
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = True
        # A kernel matrix: cross-validation splits its columns with its rows.
        tags.input_tags.pairwise = self.kernel == PRECOMPUTED
        return tags

