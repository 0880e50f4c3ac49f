"""The scikit-learn compatible estimator: Nyström kernel PCA over dask arrays.

A thin face over the fitted model: parameters in, a
:class:`~kpca_dask.model.fitted.FittedModel` out (``model_``), made by
:mod:`kpca_dask.model.fitting`; the fitted attributes are read-only views of
it; growing (:mod:`kpca_dask.model.growing`) and the outputs
(:mod:`kpca_dask.model.outputs`) are mixed in.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Literal

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin

from ..io.frames import frame_feature_names
from ..model.field_inputs import fit_rows
from ..model.fitted import FittedModel, fitted_attribute
from ..model.fitting import fit_model
from ..model.growing import GrowingMixin
from ..model.inputs import as_fit_input
from ..model.outputs import OutputsMixin
from ..model.parameters import check_params
from ..model.patterns import PatternsMixin
from ..model.precomputed import PRECOMPUTED, fit_precomputed
from ..storage.model_files import SavingMixin

__all__ = ["KernelPCA"]

_read_feature_names = fitted_attribute("feature_names_in_").fget


class KernelPCA(GrowingMixin, OutputsMixin, PatternsMixin, SavingMixin,
                ClassNamePrefixFeaturesOutMixin, BaseEstimator):
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
    alpha : float, default=1.0
        Ridge penalty of the pre-image map (``fit_inverse_transform=True`` only).
    sample_dim : str or None, default=None
        The sample dimension of a DataArray (None: its first); the others are
        stacked lazily into features, positions NaN at every sample (a mask)
        dropped and given back as NaN (:mod:`kpca_dask.io.fields`).
    weights : DataArray, 1-D array or None, default=None
        Multiply the features before the kernel: a DataArray over feature
        dimensions (e.g. ``np.sqrt(np.cos(np.deg2rad(X.lat)))``), or one
        weight per feature of an array; finite and >= 0.

    Attributes
    ----------
    model_ : FittedModel
        The fitted model as one immutable object
        (:class:`~kpca_dask.model.fitted.FittedModel`): every fit,
        :meth:`partial_fit`, :meth:`set_n_components` and
        :func:`kpca_dask.merge` makes a new one. The attributes below are
        read-only views of it.
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
        ``x_hat(y) = k(y, preimage_centres_) @ preimage_coefficients_``.
    feature_layout_ : FeatureLayout
        A field's (or weighted) fit: dimensions, coordinates, mask, weights
        (:class:`~kpca_dask.io.fields.FeatureLayout`); later inputs must match.
    feature_weights_, feature_kept_ : ndarray of shape (``n_features_in_``,)
        The weights and the flat field positions of the features (if any).

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
        max_landmarks: int | None = None,
        dtype: Literal["float64", "float32"] = "float64",
        rcond: float | None = None,
        random_state: int | np.random.Generator | None = None,
        fit_inverse_transform: bool = False,
        alpha: float = 1.0,
        sample_dim: str | None = None,
        weights=None,
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
        params = self.get_params(deep=False)
        check_params(params)
        names = frame_feature_names(X)  # before the pass: mixed-type names raise now
        precomputed = params["kernel"] == PRECOMPUTED
        fit = fit_precomputed if precomputed else fit_model
        # Stored column chunks are kept: a kernel matrix's (only the landmarks' are
        # read) and the points' (the kernels sum over them, docs/design.md §12).
        X, layout = fit_rows(X, params["sample_dim"], params["weights"], precomputed=precomputed)
        model = fit(params, as_fit_input(X), feature_names=names, checkpoint=checkpoint,
                    started=started)
        model = model.replace(layout=layout)
        self.model_ = model  # only now, with every step done, does the estimator change
        return self

    def fit_transform(self, X, y=None, **fit_params):
        """Fit, then project the training rows (a second, lazy pass for dask input).

        With ``fit_inverse_transform=True`` the fit makes one more pass for the
        pre-image map.
        """
        return self.fit(X, **fit_params).transform(X)

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
    feature_layout_ = fitted_attribute("feature_layout_")
    feature_weights_ = fitted_attribute("feature_weights_")
    feature_kept_ = fitted_attribute("feature_kept_")

    def __sklearn_is_fitted__(self) -> bool:
        return self.__dict__.get("model_") is not None

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

