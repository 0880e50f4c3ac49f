"""The fitted model as one immutable object, and the estimator attributes that read it.

A :class:`FittedModel` holds everything a fit learns (docs/design.md §2–§7):
the landmarks, the kernel and its resolved parameters, the solution of the
small problem, the pass statistics that growing models add to, the novelty
terms, the optional pre-image map and the feature names. A fit,
:meth:`~kpca_dask.KernelPCA.partial_fit`, :func:`kpca_dask.merge` and
:meth:`~kpca_dask.KernelPCA.set_n_components` each make a new one
(:mod:`kpca_dask.model.fitting`); transform and the rest only read it; the
model file writes and reads it field by field (:mod:`kpca_dask.storage.model_fields`).

The estimator's scikit-learn attributes (``eigenvalues_``, ``landmarks_``,
...) are read-only views of it, declared once in :data:`FITTED_ATTRIBUTES`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..blocks.statistics import PassStatistics
from ..engine.solve import NoveltyTerms, NystromSolution
from ..io.fields import FeatureLayout
from .parameters import rcond_for

__all__ = ["FittedModel", "FitSettings", "Preimage", "FITTED_ATTRIBUTES",
           "OPTIONAL_ATTRIBUTES", "fitted_attribute"]


@dataclass(frozen=True)
class FitSettings:
    """The parameters a model was solved with: what its outputs and re-solves use.

    Fixed at fit, as every fitted value is: ``set_params`` after a fit changes
    none of them (scikit-learn's contract: a parameter takes effect at the
    next fit). :meth:`~kpca_dask.KernelPCA.set_n_components` is the one call
    that changes ``n_components`` of a fitted model.

    Examples
    --------
    >>> FitSettings(n_components=0.9, remove_zero_eig=False, dtype="float32", rcond=1e-3)
    FitSettings(n_components=0.9, remove_zero_eig=False, dtype='float32', rcond=0.001)
    """

    n_components: int | float | None  # as asked: a re-solve with more rows asks it again
    remove_zero_eig: bool
    dtype: str  # the kernel blocks' precision, and that of every output
    rcond: float  # the landmark cut-off, resolved (docs/design.md §11)

    @classmethod
    def from_params(cls, params: dict) -> "FitSettings":
        """The settings of a fit with the estimator parameters ``params``."""
        return cls(n_components=params["n_components"],
                   remove_zero_eig=bool(params["remove_zero_eig"]), dtype=str(params["dtype"]),
                   rcond=float(rcond_for(params["rcond"], params["dtype"])))


@dataclass(frozen=True)
class Preimage:
    """The pre-image map x_hat(y) = k(y, centres) @ coefficients (docs/design.md §6)."""

    centres: np.ndarray  # the landmarks' embeddings, (m, q)
    coefficients: np.ndarray  # dual coefficients W_Y B, (m, p)


@dataclass(frozen=True)
class FittedModel:
    """Everything a fit learns; see the estimator's Attributes for each field's meaning.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import KernelPCA
    >>> kpca = KernelPCA(n_components=2, gamma=0.5, n_landmarks=20, random_state=0)
    >>> model = kpca.fit(np.random.default_rng(0).normal(size=(100, 3))).model_
    >>> model.landmarks.shape, model.n_components, model.kernel_params
    ((20, 3), 2, {'gamma': 0.5})
    """

    kernel: str | Callable  # the canonical name of a built-in kernel, or the callable
    kernel_params: dict  # every resolved kernel parameter
    landmarks: np.ndarray  # Z, (m, p)
    landmark_indices: np.ndarray | None  # global rows of Z, None when not data rows
    landmark_rank: int  # landmark directions kept by the factorisation of K_mm
    solution: NystromSolution  # P, c, eigenvalues, ratios, trace error
    n_features: int
    n_samples: int
    statistics: PassStatistics | None  # None for a model file of format version 1
    novelty: NoveltyTerms | None  # None for a model file of format version 1
    settings: FitSettings  # the parameters it was solved with; outputs read only these
    preimage: Preimage | None = None  # only with fit_inverse_transform=True
    feature_names: np.ndarray | None = None  # the column names of a table fit
    landmark_path: list | None = None  # m tried and its trace error, for n_landmarks="auto"
    row_provenance: dict | None = None  # the rows counted (kpca_dask.model.provenance)
    fit_seconds: float = 0.0
    layout: FeatureLayout | None = None  # a field's dims, mask and weights (kpca_dask.io.fields)
    # The model file the workers last wrote G into, for statistics held on a cluster
    # (kpca_dask.model.held_statistics): read from there once the cluster is gone.
    statistics_file: str | None = None

    @property
    def n_components(self) -> int:
        return int(np.shape(self.solution.projection)[-1])

    @property
    def n_landmarks(self) -> int:
        return int(np.shape(self.landmarks)[0])

    @property
    def gamma(self) -> float | None:
        return self.kernel_params.get("gamma")

    def replace(self, **changes: Any) -> "FittedModel":
        """A copy with ``changes``: the model itself never changes."""
        return dataclasses.replace(self, **changes)


def _novelty(field: str) -> Callable[[FittedModel], Any]:
    return lambda model: None if model.novelty is None else getattr(model.novelty, field)


def _preimage(field: str) -> Callable[[FittedModel], Any]:
    return lambda model: None if model.preimage is None else getattr(model.preimage, field)


def _solution(field: str) -> Callable[[FittedModel], Any]:
    return lambda model: getattr(model.solution, field)


#: Each fitted attribute of the estimator and how it is read from the model.
FITTED_ATTRIBUTES: dict[str, Callable[[FittedModel], Any]] = {
    "kernel_": lambda model: model.kernel,
    "kernel_params_": lambda model: model.kernel_params,
    "gamma_": lambda model: model.gamma,
    "landmarks_": lambda model: model.landmarks,
    "landmark_indices_": lambda model: model.landmark_indices,
    "n_landmarks_": lambda model: model.n_landmarks,
    "landmark_rank_": lambda model: model.landmark_rank,
    "landmark_path_": lambda model: model.landmark_path,
    "projection_": _solution("projection"),
    "offset_": _solution("offset"),
    "eigenvalues_": _solution("eigenvalues"),
    "explained_variance_ratio_": _solution("explained_variance_ratio"),
    "trace_error_": _solution("trace_error"),
    "trace_error_std_": _solution("trace_error_std"),
    "eigenvalue_residuals_": _solution("residuals"),
    "n_components_": lambda model: model.n_components,
    "n_features_in_": lambda model: model.n_features,
    "feature_names_in_": lambda model: model.feature_names,
    "n_samples_fit_": lambda model: model.n_samples,
    "statistics_": lambda model: model.statistics,
    "row_provenance_": lambda model: model.row_provenance,
    "fit_seconds_": lambda model: model.fit_seconds,
    "fit_settings_": lambda model: model.settings,
    "novelty_weights_": _novelty("mean_weights"),
    "novelty_mean_norm2_": _novelty("mean_norm2"),
    "preimage_centres_": _preimage("centres"),
    "preimage_coefficients_": _preimage("coefficients"),
    "feature_layout_": lambda model: model.layout,
    "feature_weights_": lambda model: None if model.layout is None else model.layout.weights,
    "feature_kept_": lambda model: None if model.layout is None else model.layout.kept,
}

#: Attributes that are absent (``hasattr`` is False), not None, when the model has no such part:
#: scikit-learn's habit for what only some fits learn.
OPTIONAL_ATTRIBUTES = frozenset({"feature_names_in_", "novelty_weights_", "novelty_mean_norm2_",
                                 "preimage_centres_", "preimage_coefficients_",
                                 "eigenvalue_residuals_", "feature_layout_",
                                 "feature_weights_", "feature_kept_"})


def fitted_attribute(name: str) -> property:
    """A read-only property ``name`` of an estimator whose fitted state is ``self.model_``.

    Unfitted, or for an optional part the model lacks, reading it raises
    AttributeError, so ``hasattr`` and scikit-learn's checks see it as absent.

    Examples
    --------
    >>> class Fitted:
    ...     model_ = None
    ...     trace_error_ = fitted_attribute("trace_error_")
    >>> hasattr(Fitted(), "trace_error_")
    False
    """
    read = FITTED_ATTRIBUTES[name]

    def getter(self):
        model = self.__dict__.get("model_")
        if model is None:
            raise AttributeError(f"This {type(self).__name__} is not fitted yet, so it has no "
                                 f"attribute {name!r}; call fit first.")
        value = read(model)
        if value is None and name in OPTIONAL_ATTRIBUTES:
            raise AttributeError(f"This {type(self).__name__} has no {name!r}: its fit did "
                                 "not learn that part of the model.")
        return value

    getter.__name__ = name
    return property(getter, doc="Read from ``model_`` (:class:`FittedModel`); see the class "
                                "docstring's Attributes.")
