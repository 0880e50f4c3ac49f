"""Extended kernel EOF: kernel PCA of time-delay embedded rows, modes that are space-time patterns.

xeofs' ``ExtendedEOF`` (multichannel singular spectrum analysis) for any kernel,
by composition: the rows of the field (or of its leading linear EOF scores, with
``n_pca_modes``) are delay-embedded lazily (:mod:`kpca_dask.io.preprocessing.delay_embedding`)
and fitted by a :class:`~kpca_dask.KernelPCA`, or for a wide field by the Gram way of
an :class:`~kpca_dask.ExactKernelPCA` (docs/design.md §19); the components are the EOF
maps of that fit over the embedded rows, mapped back through the linear EOFs when the
field was reduced first, as xeofs maps them (docs/design.md §17).
"""

from __future__ import annotations

import numbers
import time
from typing import Callable, Literal

import dask
import numpy as np
import xarray as xr
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..eof.extended_model import ExtendedFit
from ..eof.extended_rotation import (
    PCA_MODE_DIM,
    flat_space_time,
    scaled_space_time,
    space_time_maps,
)
from ..errors import InvalidInputError, InvalidParameterError
from ..exact.exact_fitting import dense_fits
from ..io.preprocessing import DelayEmbedding
from ..io.preprocessing.fields import resolved_sample_dim
from ..io.preprocessing.latitude import is_coslat
from ..model.eof_parameters import EXTENDED_CONSTRAINTS
from ..model.keywords import explains_keywords
from .base import FittedModelEstimator, model_view
from .exact import ExactKernelPCA
from .kernel_pca import KernelPCA

__all__ = ["ExtendedKernelEOF"]


#: The parameters both stages take as they are.
_SHARED = ("n_landmarks", "tol", "max_landmarks", "dtype", "rcond", "random_state")


class ExtendedKernelEOF(ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                        FittedModelEstimator):
    """Extended (time-lagged) kernel EOF: kernel PCA of delay-embedded samples.

    Each sample t becomes the embedded row ``[x_t, x_{t+tau}, ..., x_{t+(L-1)tau}]``
    (L = ``embedding``), as in xeofs' ``ExtendedEOF``: the last ``(L-1) tau``
    samples have no complete row and are dropped; the embedded samples keep the
    labels of the first ``n - (L-1) tau``. The lagged copies are dask slices of
    the input joined along the features: no copy of the field is made, and the
    L-times wider rows exist only block by block in the fit's pass. Kernel PCA
    of these rows (a :class:`~kpca_dask.KernelPCA`, ``kpca_``) gives modes that
    are space-time patterns. With a linear kernel and every embedded sample a
    landmark (``n_landmarks`` >= n, ``landmarks="uniform"``) it is xeofs'
    ``ExtendedEOF``, to rounding (docs/design.md §17).

    Parameters
    ----------
    n_components : int or float in (0, 1)
        Number of modes k (as :class:`~kpca_dask.KernelPCA`'s ``n_components``).
    tau : int, default=1
        Delay between the lagged copies, in samples.
    embedding : int, default=2
        Number of lagged copies L (1: no embedding, a kernel EOF). At least 2
        embedded samples must remain: ``(embedding - 1) * tau <= n_samples - 2``.
    n_pca_modes : int or None, default=None
        First reduce the field to the scores of its ``n_pca_modes`` leading
        linear EOFs (a linear :class:`~kpca_dask.KernelPCA`, ``pca_``, fitted on
        every sample, with uniform landmarks: exact when they span the field's
        rows, e.g. ``n_landmarks >= n_samples``) and embed those, as xeofs does:
        rows of L * n_pca_modes values instead of L * n_features. The weights
        apply to this stage; the components are mapped back to the field
        through the linear EOFs. At most ``min(n_samples, n_features)``.
    kernel : str or callable, default="linear"
        The kernel of the embedded rows, as :class:`~kpca_dask.KernelPCA`'s:
        ``"linear"`` (the default, as :class:`~kpca_dask.HilbertKernelEOF`'s and
        xeofs' ``ExtendedEOF``) is the extended EOF; ``"rbf"`` and the others
        the extended kernel EOF.
    gamma, degree, coef0, kernel_params, n_landmarks, landmarks, tol, \
max_landmarks, dtype, rcond, random_state
        Those of :class:`~kpca_dask.KernelPCA`, for the kernel PCA of the
        embedded rows (gamma's rules see those rows). Explicit ``landmarks``
        are embedded rows, shape (m, L * n_features), or (m, L * n_pca_modes).
    sample_dim : str or None, default=None
        The sample dimension of a DataArray (as :class:`~kpca_dask.KernelPCA`).
    weights : DataArray, "coslat", 1-D array or None, default=None
        Feature weights of the field (as :class:`~kpca_dask.KernelPCA`), the
        same for every lag.
    solver : {"auto", "gram", "nystrom"}, default="auto"
        How the stage that reads the field (the linear stage with
        ``n_pca_modes``, else the kernel stage) is fitted. ``"gram"``: exactly,
        by the n x n Gram matrix of its rows (an
        :class:`~kpca_dask.ExactKernelPCA`, dense solver; docs/design.md §19),
        in memory O(n^2) whatever the number of features, refused when that
        does not fit. ``"nystrom"``: by landmarks (a
        :class:`~kpca_dask.KernelPCA`). ``"auto"``: the Gram way when the
        stage's rows are at least as wide as they are many and its n x n
        matrices fit the memory available (a field of many grid points), else
        landmarks. ``solver_`` says which was taken; the landmark parameters
        apply to the stages fitted by landmarks.

    Attributes
    ----------
    model_ : ExtendedFit
        Everything the fit learnt, one immutable object
        (:class:`~kpca_dask.eof.extended_model.ExtendedFit`): its stages, maps,
        delay and way; the attributes below are views of it, and ``save`` writes
        it (its stages as model files of their own inside one Zarr group,
        :mod:`kpca_dask.storage.extended_files`).
    kpca_ : KernelPCA or ExactKernelPCA
        The kernel PCA of the embedded rows (or embedded linear EOF scores): its
        ``transform``, ``patterns``, ``save`` and :func:`kpca_dask.rotate` take
        embedded input, e.g. ``kpca_dask.io.preprocessing.delay_embedding.lagged_field``. An
        :class:`~kpca_dask.ExactKernelPCA` when the embedded field took the Gram way.
    pca_ : KernelPCA, ExactKernelPCA or None
        The linear EOF stage (``n_pca_modes`` only): an
        :class:`~kpca_dask.ExactKernelPCA` when it took the Gram way.
    solver_ : {"gram", "nystrom"}
        The way the stage that reads the field was fitted (see ``solver``).
    components_ : ndarray of shape (``n_components_``, embedding, ``n_features_in_``)
        The space-time EOF of each mode: cov(y_j, w x_emb) / ``explained_variance_``
        over the embedded rows, the unit EOFs for a linear kernel (xeofs'
        ``components()``), the regression of the lagged field on the mode for any
        kernel; with ``n_pca_modes``, those over the embedded scores times the
        linear EOFs. Over the features fitted (a field's positions off its mask,
        in the field's order), as :class:`~kpca_dask.HilbertKernelEOF`'s
        ``components_``; :meth:`components` lays them on the field.
    lags_ : ndarray of shape (embedding,)
        The lag of each copy in samples: 0, tau, ..., (L-1) tau.
    delay_ : (int, int)
        The ``(tau, embedding)`` of the fit, which :meth:`transform` embeds with.
    eigenvalues_, explained_variance_ratio_, n_components_, gamma_, kernel_params_, \
trace_error_
        Those of ``kpca_``. ``explained_variance_`` is ``eigenvalues_ /
        (n_samples_fit_ - 1)`` (xeofs' ``explained_variance()``);
        ``explained_variance_ratio_`` is a share of the variance of the embedded
        rows, with ``n_pca_modes`` of the embedded scores (as xeofs).
    n_samples_fit_ : int
        Embedded samples fitted, ``n_samples - (embedding - 1) * tau``.
    n_features_in_ : int
        Features of one sample of the input, before embedding (a field's
        positions off its mask).
    fit_seconds_ : float
        Wall time of the fit, the components' pass included.

    See Also
    --------
    KernelPCA : the kernel PCA each fit is made of.
    xeofs.single.ExtendedEOF : the linear method.

    References
    ----------
    .. [1] Weare and Nasstrom, "Examples of extended empirical orthogonal function
       analyses", Monthly Weather Review 110 (1982).
    .. [2] Broomhead and King, "Extracting qualitative dynamics from experimental
       data", Physica D 20 (1986).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import ExtendedKernelEOF
    >>> t = np.arange(200)
    >>> X = np.sin(0.3 * t[:, None] - np.arange(6)) + 0.1 * np.random.default_rng(0).normal(
    ...     size=(200, 6))
    >>> eeof = ExtendedKernelEOF(2, tau=2, embedding=4, kernel="linear", n_landmarks=200)
    >>> scores = eeof.fit_transform(X)
    >>> scores.shape, eeof.components_.shape, eeof.lags_.tolist()
    ((194, 2), (2, 4, 6), [0, 2, 4, 6])
    >>> eeof.components().shape  # a DataArray (mode, embedding, ...) for a field
    (2, 4, 6)
    >>> round(float(eeof.explained_variance_ratio_.sum()), 2)  # a wave: one pair of modes
    0.98
    """

    #: Its model files (:mod:`kpca_dask.storage.extended_files`).
    _model_file = ("..storage.extended_files", "save_extended")
    _parameter_constraints = EXTENDED_CONSTRAINTS

    @explains_keywords
    def __init__(
        self,
        n_components: int | float,
        *,
        tau: int = 1,
        embedding: int = 2,
        n_pca_modes: int | None = None,
        kernel: str | Callable = "linear",
        gamma: float | Literal["median", "scale"] | None = None,
        degree: float = 3,
        coef0: float = 1.0,
        kernel_params: dict | None = None,
        n_landmarks: int | Literal["auto"] = 1000,
        landmarks: str | Callable | np.ndarray = "kmeans",
        tol: float = 1e-2,
        max_landmarks: int | None = None,
        dtype: Literal["float64", "float32"] = "float64",
        rcond: float | None = None,
        random_state: int | np.random.Generator | None = None,
        sample_dim: str | None = None,
        weights=None,
        solver: Literal["auto", "gram", "nystrom"] = "auto",
    ):
        self.n_components = n_components
        self.tau = tau
        self.embedding = embedding
        self.n_pca_modes = n_pca_modes
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.tol = tol
        self.max_landmarks = max_landmarks
        self.dtype = dtype
        self.rcond = rcond
        self.random_state = random_state
        self.sample_dim = sample_dim
        self.weights = weights
        self.solver = solver

    @explains_keywords
    def fit(self, X, y=None) -> "ExtendedKernelEOF":
        """Embed ``X`` lazily, fit the kernel PCA of its embedded rows, and the components.

        Reads ``X`` in the passes of each stage's fit (the linear stage's with
        ``n_pca_modes``, then the kernel stage's), then once more for
        the components (:meth:`components`).

        Parameters
        ----------
        X : ndarray, dask array of shape (n_samples, n_features), or xarray.DataArray
            A field: one sample dimension and any feature dimensions.
        y : ignored

        Returns
        -------
        self : ExtendedKernelEOF
        """
        started = time.perf_counter()
        self._check_params()
        step = DelayEmbedding(self.tau, self.embedding)
        embedding = step.embedding
        sample_dim, n_samples, n_features = _shape(X, self.sample_dim)
        kept = step.n_samples(n_samples)
        pca = None
        data = X.data if sample_dim is not None else X  # what a memory budget asks about
        if self.n_pca_modes is not None:
            _check_pca_modes(self.n_pca_modes, n_samples, n_features)
            gram = self._gram_way(n_samples, n_features, data)
            pca = self._stage(gram, self.n_pca_modes, sample_dim, self.weights,
                              kernel="linear", landmarks="uniform").fit(X)
            # A field's masked positions are not features: held to the ones fitted.
            _check_pca_modes(self.n_pca_modes, n_samples, pca.n_features_in_)
        else:
            gram = self._gram_way(kept, embedding * n_features, data)
        embedded = _embedded(X, pca, sample_dim, step)
        weights = self.weights if pca is None else None
        if weights is not None and sample_dim is None and not is_coslat(weights):
            # one weight per column, every lag
            weights = np.tile(np.asarray(weights, dtype=np.float64).ravel(), embedding)
        kpca = self._stage(gram and pca is None, self.n_components, sample_dim, weights,
                           kernel=self.kernel, gamma=self.gamma, degree=self.degree,
                           coef0=self.coef0, kernel_params=self.kernel_params,
                           landmarks=self.landmarks).fit(embedded)
        components = _components(kpca, pca, embedded, X, embedding)
        # a field's features are its positions off the mask, as KernelPCA counts them
        n_features = _features_per_lag(kpca, embedding) if pca is None else pca.n_features_in_
        # Only now, with every step done, does the estimator change.
        self.model_ = ExtendedFit(kpca, pca, components, "gram" if gram else "nystrom", step,
                                  int(n_features))
        self.fit_seconds_ = time.perf_counter() - started
        return self

    def transform(self, X):
        """The scores of ``X``'s embedded samples: the kernel PCA embedding of its lagged rows.

        ``X`` is embedded as the training data were (through ``pca_`` first with
        ``n_pca_modes``), so its last ``(embedding - 1) * tau`` samples are
        dropped: for the training data these are the training scores, xeofs'
        ``scores()`` without its NaN-padded end; for a new series (another
        period, a model run, at least ``(embedding - 1) * tau + 2`` samples) the
        projection of its lagged rows onto the fitted modes. Not scaled (xeofs'
        ``normalized=False``, eofs' ``pcscaling=0``).

        Parameters
        ----------
        X : ndarray, dask array or xarray.DataArray
            As for :meth:`fit`: the same features (a field on the same grid).

        Returns
        -------
        scores : ndarray, dask array or DataArray
            Of shape (n_samples - (embedding - 1) * tau, ``n_components_``):
            numpy for in-memory input, lazy for dask input; for a field a
            DataArray ``scores`` with dims (sample dim, ``mode`` 1..k) and the
            first samples' coordinates.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import ExtendedKernelEOF
        >>> X = np.random.default_rng(0).normal(size=(100, 3))
        >>> eeof = ExtendedKernelEOF(2, tau=5, embedding=3, kernel="rbf", gamma=0.1,
        ...                          n_landmarks=50, random_state=0).fit(X)
        >>> eeof.transform(X).shape, eeof.transform(X[:40]).shape  # 10 samples dropped
        ((90, 2), (30, 2))
        """
        scores = self.kpca_.transform(self.embedded(X))
        lazy = dask.is_dask_collection(X.data if isinstance(X, xr.DataArray) else X)
        # The Gram way's stage (ExactKernelPCA) may give numpy where a landmark stage is lazy.
        return scores if lazy or not dask.is_dask_collection(scores) else scores.compute()

    def components(self, normalized: bool = True):
        """The space-time maps (xeofs' ``components``): for a field's fit a DataArray
        ``components`` with dims (``mode`` 1..k, ``embedding``, the field's feature dims),
        ``embedding`` the lags 0, tau, ..., (L-1) tau, NaN on the field's mask; else
        ``components_``. ``normalized=False``: each mode's times its singular value
        √``eigenvalues_`` (xeofs' ``normalized=False``).

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> field = xr.DataArray(np.random.default_rng(0).normal(size=(40, 3)),
        ...                      dims=("time", "x"))
        >>> ExtendedKernelEOF(2, tau=2, embedding=3).fit(field).components().dims
        ('mode', 'embedding', 'x')
        """
        check_is_fitted(self)
        return scaled_space_time(self.model_.maps, self.eigenvalues_, normalized)

    @property
    def components_(self) -> np.ndarray:
        """The space-time maps over the features fitted (``n_components_``, embedding,
        ``n_features_in_``): :meth:`components` without the field's layout."""
        check_is_fitted(self)
        return flat_space_time(self.model_.maps)

    def embedded(self, X):
        """The delay-embedded samples of ``X`` that the kernel stage ``kpca_`` reads, lazily.

        ``X`` embedded as the training data were (through ``pca_`` first with
        ``n_pca_modes``): the lagged copies side by side, the last
        ``(embedding - 1) * tau`` samples dropped; a field with an
        ``embedding`` dimension, or rows. :meth:`transform` is
        ``kpca_.transform(embedded(X))``; :func:`kpca_dask.bootstrap` resamples
        these samples.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(50, 3))
        >>> ExtendedKernelEOF(2, tau=2, embedding=3).fit(X).embedded(X).shape
        (46, 9)
        """
        check_is_fitted(self)
        step = self.model_.delay_embedding
        sample_dim, n_samples, _ = _shape(X, self.sample_dim_)
        step.n_samples(n_samples)  # refuses a record too short for the lagged copies
        return _embedded(X, self.pca_, sample_dim, step)

    def _gram_way(self, n: int, p: int, data) -> bool:
        """Whether the stage with ``n`` rows of ``p`` features takes the Gram way (see
        ``solver``)."""
        if self.solver == "auto":
            return p >= n and dense_fits(n, data)
        return self.solver == "gram"

    def _stage(self, gram: bool, n_components, sample_dim, weights, *, landmarks, **kernel):
        """One stage's estimator: exact by the Gram matrix (the dense solver, which refuses
        n x n matrices beyond memory with their size) or by landmarks."""
        if gram:
            return ExactKernelPCA(n_components, **kernel, sample_dim=sample_dim,
                                  weights=weights, eigen_solver="dense")
        return KernelPCA(n_components, **kernel, landmarks=landmarks, sample_dim=sample_dim,
                         weights=weights, solver="nystrom",
                         **{name: getattr(self, name) for name in _SHARED})

    @property
    def eigenvalues_(self) -> np.ndarray:
        """Eigenvalues of the centred kernel matrix of the embedded rows (``kpca_``'s)."""
        return self.kpca_.eigenvalues_

    @property
    def explained_variance_ratio_(self) -> np.ndarray:
        """Each mode's share of the embedded rows' variance in feature space (``kpca_``'s)."""
        return self.kpca_.explained_variance_ratio_

    @property
    def total_variance_kind_(self) -> str:
        """``"exact"`` or ``"nystrom-estimate"``: what ``total_variance_`` is (``kpca_``'s)."""
        return self.kpca_.total_variance_kind_

    @property
    def n_samples_fit_(self) -> int:
        """Embedded samples fitted: ``n_samples - (embedding - 1) * tau``."""
        return self.kpca_.n_samples_fit_

    @property
    def n_components_(self) -> int:
        """The number of modes kept (``kpca_``'s)."""
        return self.kpca_.n_components_

    @property
    def gamma_(self):
        """The kernel's resolved gamma on the embedded rows (``kpca_``'s; None for a kernel
        without one)."""
        check_is_fitted(self)
        return self.kpca_.kernel_params_.get("gamma")

    @property
    def kernel_params_(self) -> dict:
        """Every resolved kernel parameter (``kpca_``'s)."""
        return self.kpca_.kernel_params_

    @property
    def trace_error_(self) -> float:
        """The Nyström trace error of the kernel stage (``kpca_``'s; 0 for the Gram way,
        which is exact)."""
        check_is_fitted(self)
        return getattr(self.kpca_, "trace_error_", 0.0)

    @property
    def _n_features_out(self) -> int:
        return self.n_components_

    # -- views of the fitted model -------------------------------------------------------

    kpca_ = model_view("kernel_stage", "The kernel PCA of the embedded samples.")
    pca_ = model_view("linear_stage", "The linear EOF stage of ``n_pca_modes``, or None.")
    solver_ = model_view("solver", "The way the stage that read the field was fitted.")
    delay_ = model_view("delay", "The ``(tau, embedding)`` of the fit.")
    lags_ = model_view("lags", "The lag of each copy in samples: 0, tau, ..., (L-1) tau.")
    n_features_in_ = model_view("n_features", "Features of one sample before embedding.")



def _shape(X, sample_dim: str | None) -> tuple[str | None, int, int]:
    """The sample dimension (None for arrays), the number of samples and of features
    (positions, before any mask) of the input."""
    if isinstance(X, xr.DataArray):
        if X.ndim < 2:
            raise InvalidInputError(
                f"The DataArray has dims {X.dims}; an extended EOF needs a series: a sample "
                "dimension and at least one feature dimension.")
        dim, _ = resolved_sample_dim(X.dims, sample_dim)
        return dim, int(X.sizes[dim]), int(np.prod([X.sizes[d] for d in X.dims if d != dim]))
    if isinstance(X, (xr.Dataset, dict)) or (
            isinstance(X, (list, tuple)) and any(isinstance(x, xr.DataArray) for x in X)):
        raise InvalidInputError(
            f"X is {type(X).__name__} of several fields; ExtendedKernelEOF takes one field: a "
            "2-D numpy or dask array (n_samples, n_features) or a DataArray.")
    if sample_dim is not None:
        raise InvalidParameterError(
            f"sample_dim={sample_dim!r} names a dimension of a DataArray, but X is "
            f"{type(X).__name__}; pass a DataArray or leave sample_dim=None.")
    if not hasattr(X, "ndim"):
        X = np.asarray(X)
    if X.ndim != 2:
        raise InvalidInputError(
            f"X has shape {X.shape}; a 2-D array (n_samples, n_features) is needed, or a "
            "DataArray for a field with several feature dimensions.")
    return None, int(X.shape[0]), int(X.shape[1])


def _features_per_lag(kpca, embedding: int) -> int:
    """The features of one lagged copy of the kernel stage's embedded rows: the same
    positions in every copy, or a clear error. A position NaN at every sample of one copy
    but not of another (NaN at the start of the record only, say) is masked in one lag and
    kept in another, and the space-time maps would have no common grid."""
    layout = kpca.model_.layout
    if layout is None or layout.kept is None:
        return kpca.n_features_in_ // embedding
    per_lag = layout.n_positions // embedding
    kept = [set((layout.kept[layout.kept // per_lag == lag] % per_lag).tolist())
            for lag in range(embedding)]
    if any(positions != kept[0] for positions in kept[1:]):
        differ = sorted(set.union(*kept) - set.intersection(*kept))
        raise InvalidInputError(
            f"{len(differ)} position(s) of the field (the first: "
            f"{layout.describe(int(differ[0])).split(', ', 1)[-1]}) are NaN at every sample "
            "of some lagged copies "
            "but not of others (NaN over the start or the end of the record only): the "
            "space-time maps need the same grid at every lag. Fill them, or drop the samples "
            "or the positions first.")
    return len(kept[0])


def _check_pca_modes(n_pca_modes, n_samples: int, n_features: int) -> None:
    most = min(n_samples, n_features)
    if (isinstance(n_pca_modes, bool) or not isinstance(n_pca_modes, numbers.Integral)
            or not 1 <= n_pca_modes <= most):
        raise InvalidParameterError(
            f"n_pca_modes={n_pca_modes!r} must be an int from 1 to min(n_samples, n_features) "
            f"= {most} (the field has {n_samples} samples and {n_features} features), or None "
            "to embed the field itself.")


def _embedded(X, pca: KernelPCA | ExactKernelPCA | None, sample_dim: str | None,
              step: DelayEmbedding):
    """The lazily embedded rows of ``X`` (a field: a DataArray with an ``embedding``
    dimension), through the linear EOF scores of ``pca`` if there is one."""
    source = X
    if pca is not None:
        source = pca.transform(X)  # (n, n_pca_modes), lazy for dask input
        if sample_dim is not None:
            source = source.rename(mode=PCA_MODE_DIM)
    return step.rows(source) if sample_dim is None else step.field(source, sample_dim)


def _components(kpca, pca, embedded, X, embedding: int):
    """The space-time EOFs: the kernel stage's EOF maps over the embedded rows, mapped
    back through the linear EOFs (xeofs: its PCA components times the EEOFs)."""
    maps = kpca.patterns(embedded, kind="eof")
    linear = None if pca is None else pca.patterns(X, kind="eof")
    maps, linear = dask.compute(maps, linear)  # one graph: the passes share their reads
    return space_time_maps(maps, linear, embedding)
