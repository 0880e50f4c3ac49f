"""Hilbert (complex) kernel EOF: one complex mode, with amplitude and phase, per propagating
signal, for data of any size (docs/design.md §16, §19).

Two ways to the same modes. For wide data (a field: more grid points than
time steps) the Gram way is exact: the field's n x n Gram matrix in one read
of the data, the analytic signal's Hermitian Gram matrix from it
(:mod:`kpca_dask.engine.hilbert.complex_gram`), the centred eigenproblem, and one
more read for the maps. Otherwise the Nyström way: the analytic signal of
each feature along the samples (:mod:`kpca_dask.io.preprocessing.analytic_signal`),
complex landmark features and their Hermitian problem
(:mod:`kpca_dask.engine.hilbert.complex_solve`) with a Hermitian kernel
(:mod:`kpca_dask.blocks.complex_kernels`). With a linear kernel and every
sample a landmark (or the Gram way) it is xeofs' ``HilbertEOF``; with the
``rbf`` kernel, ROCK-PCA (Bueso, Piles and Camps-Valls 2020), whose rotation
is ``kpca_dask.rotate`` (:mod:`kpca_dask.eof.hilbert_rotation`).
"""

from __future__ import annotations

import warnings

import dask
import numpy as np
from dask.utils import format_bytes
from sklearn.utils.validation import check_is_fitted

from .._memory import memory_budget
from .._parallel import capped_blas, computed
from ..blocks.complex_kernels import complex_kernel
from ..engine.exact.gram import inner_products
from ..engine.hilbert.complex_gram import (
    analytic_operator,
    gram_bytes,
    hermitian_gram,
    hermitian_kernel,
    map_coefficients,
    maps_of_rows,
    solve_gram,
)
from ..engine.hilbert.complex_landmarks import (
    complex_kernel_params,
    gram_pair_figures,
    landmark_indices,
    landmark_pair_figures,
)
from ..engine.hilbert.complex_solve import (
    ComplexMoments,
    ComplexSolution,
    complex_scores,
    moments_of,
    phase_turn,
    solve_moments,
)
from ..eof.hilbert_model import (
    GramState,
    HilbertFit,
    map_output,
    record_scores,
    sample_labels,
    score_output,
)
from ..errors import (
    InsufficientMemoryError,
    InvalidInputError,
    InvalidParameterError,
    ShortRecordWarning,
)
from ..io.preprocessing import AnalyticSignal
from ..io.preprocessing.analytic_signal import MIN_SAMPLES, analytic_rows
from ..model.eof_parameters import HILBERT_CONSTRAINTS
from ..model.inputs import fit_input, method_input
from ..model.keywords import explains_keywords
from .base import FittedModelEstimator, model_view

__all__ = ["HilbertKernelEOF"]


class HilbertKernelEOF(FittedModelEstimator):
    """Hilbert (complex) kernel EOF analysis by Nyström landmarks on Dask.

    A propagating signal, which real EOFs split into two modes in quadrature,
    is one complex mode here: each feature's analytic signal x + i H(x) along
    the samples is taken (Hilbert transform, optionally padded against edge
    effects), and kernel PCA of the complex rows gives complex scores and
    complex maps, read as amplitudes and phases.

    Parameters
    ----------
    n_components : int, default=2
        The number of modes q.
    kernel : {"linear", "rbf", "poly"}, default="linear"
        A Hermitian kernel on the complex rows (docs/design.md §16): ``linear``
        is the complex EOF (xeofs' ``HilbertEOF``), ``rbf`` ROCK-PCA's Gaussian.
    gamma : float, {"median", "scale"} or None, default=None
        The kernel's scale, from the analytic signal of at most 1000 landmarks
        spread over the record where not a number (docs/design.md §16).
        ``"median"``: 2 / h, h the median squared distance ‖z − w‖² of their
        pairs, the rule of :class:`KernelPCA`'s ``gamma="median"`` (a pair at the
        median distance has kernel e^{-2}; rbf only). ``"scale"``: 1 / their mean
        squared norm, scikit-learn's 1 / (n_features Var X) of the rows' real and
        imaginary parts, which are anomalies. None: 1 / h for ``rbf`` (half of
        ``"median"``, a pair at the median distance has kernel e^{-1}), the
        ``"scale"`` rule for ``poly``.
    degree : int, default=3
    coef0 : float, default=1.0
        The ``poly`` kernel's (γ⟨z, w⟩ + coef0)^degree.
    n_landmarks : int, default=1000
        The landmarks m of the Nyström way, at most the samples; every sample a
        landmark gives the exact complex kernel EOF.
    landmarks : "uniform" or array-like of int, default="uniform"
        Uniformly drawn samples, or the indices of the samples to use.
    random_state : int, Generator or None
        Seeds the uniform draw of landmarks.
    padding : {"exp", "none"}, default="exp"
        xeofs' padding of each record before the Hilbert transform.
    decay_factor : float, default=0.2
        The padding's e-folding length as a share of the record, in (0, 1].
    sample_dim : str, optional
        For a DataArray: its sample dimension (default as :class:`KernelPCA`).
    weights : DataArray, "coslat", 1-D array or None, default=None
        Weights of the features (as :class:`KernelPCA`'s), applied before the transform.
    rcond : float, optional
        Landmark eigenvalues below rcond times the largest are dropped.
    solver : {"auto", "gram", "nystrom"}, default="auto"
        ``"gram"``: the exact complex kernel EOF from the field's n x n Gram
        matrix, summed in one read of the data (no rechunk, no complex rows
        held; docs/design.md §19), landmarks unused; ``"nystrom"``: landmarks.
        ``"auto"`` takes the Gram way for wide data (at least as many features
        as samples) whose n x n work fits the memory available, else Nyström.

    Attributes
    ----------
    model_ : HilbertFit
        Everything the fit learnt, one immutable object
        (:class:`~kpca_dask.eof.hilbert_model.HilbertFit`); the attributes
        below are views of it, and ``save`` writes it.
    n_components_ : int
        The number of modes q.
    n_samples_fit_ : int
        The samples of the fit (also ``n_samples_``).
    n_features_in_ : int
        The (kept, weighted) features.
    solver_ : {"gram", "nystrom"}
        The way the fit took.
    n_landmarks_ : int
        The landmarks used (every sample for the Gram way).
    landmark_indices_ : ndarray of int64
        The samples that are landmarks.
    landmarks_ : ndarray of complex128 or None
        The landmarks' analytic signal, one row each (None for the Gram way,
        which holds no complex rows).
    gamma_ : float or None
    mean_ : ndarray of float64
        Each (weighted) feature's mean, the anomalies' origin.
    eigenvalues_ : ndarray of shape (q,)
        The centred Hermitian kernel matrix's eigenvalues, λ (n − 1).
    explained_variance_ : ndarray of shape (q,)
        The variance of each complex score (xeofs' ``explained_variance``).
    total_variance_ : float
        The variance in the kernel's feature space (xeofs' total variance for a
        linear kernel): the centred kernel's trace / (n - 1).
    total_variance_kind_ : {"exact", "nystrom-estimate"}
        Exact for the Gram way and with every sample a landmark.
    explained_variance_ratio_ : ndarray of shape (q,)
    field_total_variance_ : float
        Σ of the analytic signal's variances, which rotated maps explain shares of.
    components_ : ndarray of complex128, shape (q, p)
        The unit-norm complex maps (xeofs' ``components``, docs/design.md §16).
    rotation_ : Rotation or None
        The rotation the model holds: that of a :func:`kpca_dask.rotate` result's
        estimator (a copy; the estimator rotated is not changed), else None.

    See Also
    --------
    kpca_dask.rotate : varimax or promax of the complex modes (ROCK-PCA with ``rbf``).
    kpca_dask.KernelPCA : the real kernel EOF.

    References
    ----------
    Horel, J. D. (1984). Complex principal component analysis: theory and examples.
    J. Climate Appl. Meteor. 23, 1660-1673.
    Bueso, D., Piles, M. and Camps-Valls, G. (2020). Nonlinear PCA for spatio-temporal
    analysis of Earth observation data. IEEE TGRS 58(8), doi:10.1109/TGRS.2020.2969813.

    Examples
    --------
    >>> import numpy as np
    >>> t, x = np.arange(200)[:, None], np.arange(30)[None, :]
    >>> X = np.cos(0.3 * x - 0.2 * t)
    >>> model = HilbertKernelEOF(1, padding="none").fit(X)
    >>> bool(model.explained_variance_ratio_[0] > 0.95)
    True
    >>> model.spectrum()["explained_variance_ratio"].dims
    ('mode',)
    """

    #: Its model files (:mod:`kpca_dask.storage.hilbert_files`).
    _model_file = ("..storage.hilbert_files", "save_hilbert")
    _parameter_constraints = HILBERT_CONSTRAINTS

    @explains_keywords
    def __init__(self, n_components: int = 2, *, kernel: str = "linear",
                 gamma: float | None = None, degree: int = 3, coef0: float = 1.0,
                 n_landmarks: int = 1000, landmarks="uniform", random_state=None,
                 padding: str = "exp", decay_factor: float = 0.2,
                 sample_dim: str | None = None, weights=None, rcond: float | None = None,
                 solver: str = "auto"):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.random_state = random_state
        self.padding = padding
        self.decay_factor = decay_factor
        self.sample_dim = sample_dim
        self.weights = weights
        self.rcond = rcond
        self.solver = solver

    # -- fit -----------------------------------------------------------------------------

    @explains_keywords
    def fit(self, X, y=None) -> "HilbertKernelEOF":
        """Fit on ``X``: two reads of the data by the Gram way, three by the Nyström way.

        The Gram way (:attr:`solver_` ``"gram"``) reads the data once for their
        Gram matrix and the feature means, and once for the maps, in the chunks
        they are stored in (docs/design.md §19). The Nyström way reads them once
        for the landmarks and the feature means, once for the moments and once
        for the training scores, which the fitted model holds; the analytic
        signal needs each feature's whole record, so the data are rechunked to
        whole samples per feature chunk (an all-to-all shuffle) and back, on each
        read (docs/design.md §16).

        Parameters
        ----------
        X : array-like, dask array or xarray.DataArray of shape (n_samples, n_features)
            Or a field (time, lat, lon, ...) as :class:`~kpca_dask.KernelPCA` takes it.
        y : ignored

        Returns
        -------
        self : HilbertKernelEOF
        """
        self._check_params()
        given = fit_input(X, sample_dim=self.sample_dim, weights=self.weights)
        rows, layout = given.data, given.layout
        n, p = rows.shape
        q = int(self.n_components)
        if n < max(MIN_SAMPLES, q + 1):
            raise InvalidInputError(
                f"X has {n} samples; a Hilbert EOF of {q} modes needs at least "
                f"{max(MIN_SAMPLES, q + 1)}.")
        labels = method_input(self, layout, X)  # what the outputs are labelled like
        if self._chosen_solver(rows) == "gram":
            self._fit_gram(rows, q, layout, labels)
            return self
        Z = analytic_rows(rows, self.padding, self.decay_factor)
        indices = landmark_indices(n, self.n_landmarks, self.landmarks, self.n_components,
                                   self.random_state)
        with capped_blas(Z):  # the thread pool's blocks, one core each (docs/design.md §2)
            # The means in float64, as the analytic signal takes them (float32 input too).
            W, mean = dask.compute(Z[indices], rows.mean(axis=0, dtype=np.float64))
            params = self._kernel_params(*landmark_pair_figures(W))
            moments = ComplexMoments(*dask.compute(moments_of(Z, W, params))[0])
        solution = solve_moments(complex_kernel(W, W, **params), moments, q, self.rcond)
        # The training scores (n x q) are read now, so that the fitted model holds no graph
        # of the data (docs/design.md §16).
        scores = computed(complex_scores(Z, W, solution, params))
        self.model_ = self._model("nystrom", solution, W, indices, mean, params, layout,
                                  scores, labels)
        return self

    def _chosen_solver(self, rows) -> str:
        """"gram" or "nystrom", by :attr:`solver` (see the class), refusing a Gram way that
        does not fit."""
        n, p = rows.shape
        budget = memory_budget(rows)
        fits = gram_bytes(n) <= budget.free_bytes
        if self.solver == "nystrom" or (self.solver == "auto" and not (p >= n and fits)):
            return "nystrom"
        if not fits:
            raise InsufficientMemoryError(
                f'solver="gram" holds about {format_bytes(gram_bytes(n))} of n x n arrays for '
                f"{n} samples, more than {budget.describe()}. Use solver=\"nystrom\" "
                "(landmarks, memory O(m^2)).")
        return "gram"

    def _fit_gram(self, rows, q: int, layout, labels) -> None:
        """The exact fit from the field's Gram matrix (docs/design.md §19): one read for the
        Gram matrix and the means, one for the maps."""
        X, n = rows, rows.shape[0]  # lazy rows, as fit_input gives them
        A, column_sums = inner_products(X)
        train_sums, train_total = A.sum(axis=1), float(A.sum())
        H = hermitian_gram(A, self.padding, self.decay_factor)
        del A
        K, norms, params = hermitian_kernel(
            H, lambda H, norms: self._kernel_params(*gram_pair_figures(H, norms)))
        del H
        modes = solve_gram(K, q)
        del K
        C = map_coefficients(modes, analytic_operator(n, self.padding, self.decay_factor))
        scale = (n - 1) * np.sqrt(modes.explained_variance)
        loadings = computed(maps_of_rows(C, X)) / scale[:, None]
        turn = phase_turn(loadings)
        modes = modes.turned(turn)
        solution = ComplexSolution(modes.projection, modes.centre, modes.explained_variance,
                                   loadings * turn[:, None], modes.total_variance,
                                   float(norms.sum()) / (n - 1), n)
        self.model_ = self._model("gram", solution, None, np.arange(n), column_sums / n, params,
                                  layout, modes.scores, labels,
                                  GramState(X, train_sums, train_total, norms))

    def _check_params(self) -> None:
        super()._check_params()
        if self.gamma == "median" and self.kernel == "poly":
            raise InvalidParameterError(
                "gamma='median' sets the scale of a distance, which the 'poly' kernel does not "
                "use; it applies to 'rbf'. Pass a number or gamma='scale' instead.")
        if self.n_landmarks < self.n_components:
            raise InvalidParameterError(
                f"n_landmarks must be an int >= n_components; got {self.n_landmarks!r}.")

    def _kernel_params(self, distances, n_rows: int, mean_norm: float) -> dict:
        return complex_kernel_params(self.kernel, self.gamma, self.degree, self.coef0,
                                     distances, n_rows, mean_norm)

    def _model(self, solver, solution, W, indices, mean, params, layout, scores, labels,
               gram=None) -> HilbertFit:
        analytic = AnalyticSignal(self.padding, float(self.decay_factor),
                                  np.asarray(mean, dtype=np.float64))
        return HilbertFit(solver, solution, params, W, np.asarray(indices, dtype=np.int64),
                          analytic, layout, scores, sample_labels(labels.like),
                          labels.is_lazy, gram)

    # -- outputs -------------------------------------------------------------------------

    def transform(self, X):
        """Complex scores of the record ``X`` (n_samples, n_features), lazily for lazy input.

        The analytic signal of ``X`` is taken over its own sample axis (the
        Hilbert transform needs the whole record, as at fit), as anomalies from
        the fit's ``mean_``, then projected on the fitted modes; for the
        training data this gives :meth:`scores`. xeofs' ``HilbertEOF`` refuses
        new data; here a new record is read as a record of its own, so its edges
        carry the transform's edge effects as the training record's did, and a
        record shorter than the fit's carries them over more of its length: a
        :class:`~kpca_dask.errors.ShortRecordWarning` says so (on eofs' SST, the
        last 10 of 50 winters as a record of their own differed from the fit's
        scores for them by 29-65 % per mode, with or without padding). For
        samples of the training record use :meth:`scores`; to project a new
        period, transform a record at least as long as the fit's that contains it
        (the new samples with those before them) and keep the samples wanted.
        """
        check_is_fitted(self)
        scores, like, is_lazy = record_scores(self.model_, self, X)
        if scores.shape[0] < self.n_samples_fit_:
            warnings.warn(ShortRecordWarning(
                f"X is a record of {scores.shape[0]} samples, shorter than the fit's "
                f"{self.n_samples_fit_}: its analytic signal is its own, so its scores carry "
                "larger edge effects than the fit's (on eofs' SST, 10 of 50 winters "
                "differed from the fit's scores for them by 29-65 % per mode). For samples "
                "of the training record use scores(); for a new period, transform a record "
                "at least as long as the fit's that contains it and keep the samples "
                "wanted."), stacklevel=2)
        return score_output(self.model_, scores, like, is_lazy, "scores")

    def fit_transform(self, X, y=None):
        """Fit on ``X`` and return the training samples' complex scores (:meth:`scores`)."""
        return self.fit(X).scores()

    def scores(self, normalized: bool = False):
        """The complex scores of the training samples (xeofs' ``scores``); ``normalized``:
        each divided by its norm √(λ (n − 1)). Lazy for lazy input."""
        return self._training_output("scores", self._norms() if normalized else None)

    def scores_amplitude(self, normalized: bool = True):
        """The modulus of the scores (xeofs' ``scores_amplitude``: normalized by default)."""
        return self._training_output("scores_amplitude",
                                     self._norms() if normalized else None)

    def scores_phase(self):
        """The phase of each complex score, in (−π, π] (xeofs' ``scores_phase``)."""
        return self._training_output("scores_phase", None)

    def components(self, normalized: bool = True):
        """The complex maps (xeofs' ``components``): unit norm, or times √(λ (n − 1));
        on the field for a field's fit, else (q, n_features)."""
        check_is_fitted(self)
        maps = self.components_ if normalized else self.components_ * self._norms()[:, None]
        return map_output(self.model_, maps, "components")

    def components_amplitude(self, normalized: bool = True):
        """The modulus of the maps (xeofs' ``components_amplitude``)."""
        check_is_fitted(self)
        maps = self.components_ if normalized else self.components_ * self._norms()[:, None]
        return map_output(self.model_, maps, "components_amplitude")

    def components_phase(self):
        """The phase of each map entry, in (−π, π] (xeofs' ``components_phase``)."""
        check_is_fitted(self)
        return map_output(self.model_, self.components_, "components_phase")

    # -- views of the fitted model -------------------------------------------------------

    def _training_output(self, name: str, divisor):
        check_is_fitted(self)
        fit = self.model_
        return score_output(fit, fit.scores, fit.samples, fit.lazy, name, divisor=divisor)

    def _norms(self) -> np.ndarray:
        return np.sqrt(self.explained_variance_ * (self.n_samples_fit_ - 1))

    solver_ = model_view("solver", "The way the fit took.")
    solution_ = model_view("solution", "The complex modes solved.")
    kernel_params_ = model_view("kernel_params", "Every resolved kernel parameter.")
    gamma_ = property(lambda self: self.model_.kernel_params.get("gamma"),
                      doc="The kernel's resolved gamma (None for the linear kernel).")
    landmarks_ = model_view("landmarks", "The landmarks' analytic signal (None for the Gram way).")
    landmark_indices_ = model_view("landmark_indices", "The samples that are landmarks.")
    n_landmarks_ = property(lambda self: len(self.model_.landmark_indices),
                            doc="The landmarks used (every sample for the Gram way).")
    mean_ = model_view("analytic.mean", "Each feature's mean, the anomalies' origin.")
    layout_ = model_view("layout", "A field's layout, or None.")
    n_samples_fit_ = model_view("n_samples", "The samples fitted.")
    n_samples_ = model_view("n_samples", "The samples fitted (``n_samples_fit_``).")
    n_features_in_ = model_view("n_features", "The (kept, weighted) features.")
    n_components_ = property(lambda self: len(self.model_.solution.explained_variance),
                             doc="The number of modes q.")
    field_total_variance_ = model_view("solution.field_total_variance",
                                       "Σ of the analytic signal's variances.")
    components_ = model_view("solution.components", "The unit-norm complex maps (q, p).")
    rotation_ = model_view("rotation", "The rotation the model holds (a rotate result's), or None.")

    @property
    def eigenvalues_(self) -> np.ndarray:
        """The eigenvalues of the centred Hermitian kernel matrix: λ (n − 1)."""
        return self.model_.solution.explained_variance * (self.n_samples_fit_ - 1)

    @property
    def explained_variance_ratio_(self) -> np.ndarray:
        """Each mode's share of ``total_variance_``."""
        solution = self.model_.solution
        return solution.explained_variance / solution.total_variance

    @property
    def total_variance_kind_(self) -> str:
        """``"exact"`` (the Gram way, or every sample a landmark) or ``"nystrom-estimate"``."""
        exact = self.solver_ == "gram" or self.n_landmarks_ == self.n_samples_fit_
        return "exact" if exact else "nystrom-estimate"
