"""The fitted model as one immutable object, and the estimator attributes that read it.

A :class:`FittedModel` holds everything a fit learns (docs/design.md §2–§7):
the landmarks, the kernel and its resolved parameters, the solution of the
small problem, the pass statistics that growing models add to, the novelty
terms, the optional pre-image map and the feature names. A fit
(:mod:`kpca_dask.model.fitting`), :meth:`~kpca_dask.KernelPCA.partial_fit`,
:func:`kpca_dask.merge` and :meth:`~kpca_dask.KernelPCA.set_n_components`
(:mod:`kpca_dask.model.growing`) and :func:`kpca_dask.load` each make a new
one; transform and the rest only read it (:mod:`kpca_dask.model.outputs`); the
model file writes and reads it field by field (:mod:`kpca_dask.storage.model_entries`).

Each field declares, in its metadata (:class:`Stored`), the estimator's
scikit-learn attribute that reads it (``eigenvalues_``, ``landmarks_``, ...,
read-only views of the model, :data:`FITTED_ATTRIBUTES`) and how a model file
keeps it; the file's schema, reader, writer and checks are derived from these
declarations (:data:`DECLARED`), so adding a field touches this module alone.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..blocks.statistics import PassStatistics
from ..engine.orthomax import Rotation
from ..engine.solve.nystrom import NoveltyTerms, NystromSolution
from ..io.preprocessing import Preprocessing
from ..io.preprocessing.fields import FeatureLayout
from .parameters import rcond_for

__all__ = ["FittedModel", "FitSettings", "Preimage", "Stored", "stored", "Derived", "Declared",
           "DECLARED", "declared", "FITTED_ATTRIBUTES", "OPTIONAL_ATTRIBUTES", "fitted_attribute"]


@dataclass(frozen=True)
class Stored:
    """Which estimator attribute reads one fitted value, and how a model file keeps it.

    Each field of :class:`FittedModel` carries one in its metadata (``stored``), and
    so do the fields of the values it nests (the solution, the novelty terms, the
    pre-image map, the feature layout) in ``parts``. The estimator's fitted
    attributes (:data:`FITTED_ATTRIBUTES`), the writer and reader of model files
    (:mod:`kpca_dask.storage.model_entries`) and the checks of a loaded model
    (:mod:`kpca_dask.model.checks`) are all derived from these declarations, the
    single declaration of the model file's schema, so a new field is declared here
    once.

    Examples
    --------
    >>> Stored("offset_", "array", shape=("q",)).file_name
    'offset'
    """

    #: The estimator's fitted attribute that reads the value; None for a value read
    #: only through its parts (the solution) or not at all.
    attribute: str | None
    #: Where a model file keeps it: "array" (the attribute's name without its "_"),
    #: "json" (a JSON value in the file's ``fitted`` attribute), or "" (not there).
    place: str = ""
    #: An array's shape, in the model's sizes: m landmarks, p features, q components,
    #: w the width of a landmark (p, or m + 1 for a precomputed kernel).
    shape: tuple[str, ...] = ()
    #: An array's dtype: "f" float64, "i" int64, "x" float64 or float32 (points in input space).
    kind: str = "f"
    #: A JSON number's rule: "count" (an integer >= 1), "real" (finite), "nonnegative".
    check: str = ""
    #: Whether a model may lack the value, and what a file holds then: "" (never lacks
    #: it), "omitted" (the estimator attribute is absent and nothing is written) or
    #: "null" (an array written as a JSON null of the attribute's name). Whether older
    #: files may lack a value every model has is ``since``, a property of files.
    absent: str = ""
    #: The first file format version that always holds it; None: files may lack it, and
    #: then the field's default (or, with an ``encoding``, what the encoding makes) applies.
    since: int | None = 1
    #: The name of the storage layer's encoding of a JSON value that is not plain JSON.
    encoding: str = ""
    #: The declarations of the value's own fields, by field name.
    parts: tuple[tuple[str, "Stored"], ...] = ()
    #: The class rebuilt from ``parts`` when the value itself is not written.
    build: type | None = None
    #: What the parts are, for a message about a file that holds only some of them.
    what: str = ""

    @property
    def file_name(self) -> str:
        """The name of the array or JSON attribute that holds the value in a model file."""
        return self.attribute[:-1] if self.place == "array" else self.attribute


def stored(attribute: str | None, place: str = "", **declaration: Any) -> dict:
    """The metadata of a dataclass field kept as ``Stored(attribute, place, ...)``."""
    parts = declaration.pop("parts", {})
    return {"stored": Stored(attribute, place, parts=tuple(parts.items()), **declaration)}


class Derived(property):
    """A property of the model read as a fitted attribute and written beside the fields it
    follows from, for readers of the file (a file's copy is checked against them).

    Examples
    --------
    >>> FittedModel.n_components.declaration.attribute
    'n_components_'
    """

    declaration: Stored

    @classmethod
    def of(cls, attribute: str, check: str = "") -> Callable[[Callable], "Derived"]:
        def make(fget: Callable) -> "Derived":
            made = cls(fget, doc=fget.__doc__)
            made.declaration = Stored(attribute, "json", check=check)
            return made
        return make


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
    """The pre-image map x_hat(y) = k(y, centres) @ coefficients + intercept (docs/design.md
    §6), with the ridge penalty it was solved with and that penalty's generalised
    cross-validation score. Maps saved before the intercept have none (and no alpha or
    score): they give what they gave then."""

    centres: np.ndarray  # the landmarks' embeddings, (m, q)
    coefficients: np.ndarray  # dual coefficients W_Y B, (m, p)
    intercept: np.ndarray | None = None  # x_bar - B^T g_bar, (p,)
    alpha: float | None = None  # the ridge penalty, given or chosen by alpha="auto"
    score: float | None = None  # its GCV score, per value (None where not finite)


def _array(attribute: str, *shape: str, **declaration: Any) -> Stored:
    return Stored(attribute, "array", shape=shape, **declaration)


def _json(attribute: str, **declaration: Any) -> Stored:
    return Stored(attribute, "json", **declaration)


#: The solution's fields (kpca_dask.engine.solve.nystrom.NystromSolution, which knows no files).
_SOLUTION = {"projection": _array("projection_", "m", "q"), "offset": _array("offset_", "q"),
             "eigenvalues": _array("eigenvalues_", "q"),
             "explained_variance_ratio": _array("explained_variance_ratio_", "q"),
             "trace_error": _json("trace_error_", check="real"),
             # absent from files written before the iterative solve
             "residuals": _array("eigenvalue_residuals_", "q", absent="omitted", since=None),
             "trace_error_std": _json("trace_error_std_", check="nonnegative", since=None),
             # the linear kernel's exact total (absent for other kernels and older files)
             "centred_trace": _json("centred_trace_", check="nonnegative", absent="omitted",
                                    since=None)}
#: The novelty terms' fields (kpca_dask.engine.solve.nystrom.NoveltyTerms); files of format
#: version 1 have none.
_NOVELTY = {"mean_weights": _array("novelty_weights_", "m", absent="omitted", since=2),
            "mean_norm2": _json("novelty_mean_norm2_", check="nonnegative", absent="omitted",
                                since=2)}
_PREIMAGE = {"centres": _array("preimage_centres_", "m", "q", absent="omitted", since=None),
             "coefficients": _array("preimage_coefficients_", "m", "p", absent="omitted",
                                    since=None),
             # absent from maps saved before the intercept (Preimage's defaults then)
             "intercept": _array("preimage_intercept_", "p", absent="omitted", since=None),
             "alpha": _json("inverse_alpha_", check="nonnegative", absent="omitted", since=None),
             "score": _json("inverse_alpha_score_", check="nonnegative", absent="omitted",
                            since=None)}
#: A rotation of the leading r modes (kpca_dask.rotate), r x r matrices and r x p loadings.
_ROTATION = {"method": _json("rotation_method_", absent="omitted", since=None),
             "power": _json("rotation_power_", absent="omitted", since=None),
             "matrix": _array("rotation_matrix_", "r", "r", absent="omitted", since=None),
             "correlation": _array("rotation_correlation_", "r", "r", absent="omitted", since=None),
             "order": _array("rotation_order_", "r", kind="i", absent="omitted", since=None),
             "signs": _array("rotation_signs_", "r", absent="omitted", since=None),
             "explained_variance": _array("rotation_explained_variance_", "r", absent="omitted",
                                          since=None),
             "total_variance": _json("rotation_total_variance_", check="nonnegative",
                                     absent="omitted", since=None),
             "loadings": _array("rotation_loadings_", "r", "p", absent="omitted", since=None)}
#: A field's kept positions and weights, arrays beside the layout's JSON.
_LAYOUT = {"weights": _array("feature_weights_", "p", absent="omitted", since=None),
           "kept": _array("feature_kept_", "p", kind="i", absent="omitted", since=None)}


@dataclass(frozen=True)
class FittedModel:
    """Everything a fit learns; see the estimator's Attributes for each field's meaning.

    Each field declares, in its metadata, the fitted attribute that shows it and
    how a model file keeps it (:class:`Stored`).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import KernelPCA
    >>> kpca = KernelPCA(n_components=2, gamma=0.5, n_landmarks=20, random_state=0)
    >>> model = kpca.fit(np.random.default_rng(0).normal(size=(100, 3))).model_
    >>> model.landmarks.shape, model.n_components, model.kernel_params
    ((20, 3), 2, {'gamma': 0.5})
    """

    # the canonical name of a built-in kernel, or the callable
    kernel: str | Callable = field(metadata=stored("kernel_", "json"))
    # every resolved kernel parameter
    kernel_params: dict = field(metadata=stored("kernel_params_", "json"))
    landmarks: np.ndarray = field(  # Z, (m, p)
        metadata=stored("landmarks_", "array", shape=("m", "w"), kind="x"))
    landmark_indices: np.ndarray | None = field(  # global rows of Z, None when not data rows
        metadata=stored("landmark_indices_", "array", shape=("m",), kind="i", absent="null",
                        since=None))
    landmark_rank: int = field(  # landmark directions kept by the factorisation of K_mm
        metadata=stored("landmark_rank_", "json", check="count"))
    solution: NystromSolution = field(  # P, c, eigenvalues, ratios, trace error
        metadata=stored(None, parts=_SOLUTION, build=NystromSolution, what="the solution"))
    n_features: int = field(metadata=stored("n_features_in_", "json", check="count"))
    n_samples: int = field(metadata=stored("n_samples_fit_", "json", check="count"))
    # None for a model file of format version 1; files keep it in their own layout
    # (kpca_dask.checkpoints.statistics_files)
    statistics: PassStatistics | None = field(metadata=stored("statistics_"))
    novelty: NoveltyTerms | None = field(  # None for a model file of format version 1
        metadata=stored(None, parts=_NOVELTY, build=NoveltyTerms, absent="omitted",
                        what="the novelty terms"))
    # the parameters it was solved with; outputs read only these. Files written before
    # they were recorded take them from the saved parameters.
    settings: FitSettings = field(
        metadata=stored("fit_settings_", "json", encoding="settings", since=None))
    preimage: Preimage | None = field(  # only with fit_inverse_transform=True
        default=None, metadata=stored(None, parts=_PREIMAGE, build=Preimage, absent="omitted",
                                      what="the pre-image map"))
    feature_names: np.ndarray | None = field(  # the column names of a table fit
        default=None, metadata=stored("feature_names_in_", "json", encoding="names",
                                      absent="omitted", since=None))
    landmark_path: list | None = field(  # m tried and its trace error, for n_landmarks="auto"
        default=None, metadata=stored("landmark_path_", "json", since=None))
    row_provenance: dict | None = field(  # the rows counted (kpca_dask.model.provenance)
        default=None, metadata=stored("row_provenance_", "json", since=None))
    fit_seconds: float = field(
        default=0.0, metadata=stored("fit_seconds_", "json", check="nonnegative"))
    # a field's dims, mask and weights (kpca_dask.io.preprocessing.fields)
    layout: FeatureLayout | None = field(
        default=None, metadata=stored("feature_layout_", "json", encoding="layout",
                                      absent="omitted", since=None, parts=_LAYOUT))
    # varimax or promax rotation of the leading modes (kpca_dask.rotate); dropped by a re-solve
    rotation: Rotation | None = field(
        default=None, metadata=stored("rotation_", parts=_ROTATION, build=Rotation,
                                      absent="omitted", what="the rotation"))
    # The model file the workers last wrote G into, for statistics held on a cluster
    # (kpca_dask.model.held_statistics): read from there once the cluster is gone.
    statistics_file: str | None = field(default=None, metadata=stored(None))

    @Derived.of("n_components_", check="count")
    def n_components(self) -> int:
        return int(np.shape(self.solution.projection)[-1])

    @Derived.of("n_landmarks_", check="count")
    def n_landmarks(self) -> int:
        return int(np.shape(self.landmarks)[0])

    @Derived.of("gamma_")
    def gamma(self) -> float | None:
        return self.kernel_params.get("gamma")

    @property
    def preprocessing(self) -> Preprocessing:
        """The field read by its layout, with no step after it."""
        return Preprocessing(self.layout)

    def replace(self, **changes: Any) -> "FittedModel":
        """A copy with ``changes``: the model itself never changes."""
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Declared:
    """One declared value of a model: its declaration and how to read it from a model."""

    declaration: Stored
    read: Callable[[FittedModel], Any]
    #: The field names from the model down to the value (one for a derived property).
    path: tuple[str, ...]


def _reader(path: tuple[str, ...]) -> Callable[[Any], Any]:
    def read(model):
        for name in path:
            if model is None:
                return None
            model = getattr(model, name)
        return model
    return read


def _walk(cls: type, path: tuple[str, ...] = ()) -> list[Declared]:
    found = []
    for each in dataclasses.fields(cls):
        declaration = each.metadata["stored"]
        found += _flatten(declaration, path + (each.name,))
    return found


def _flatten(declaration: Stored, path: tuple[str, ...]) -> list[Declared]:
    found = [Declared(declaration, _reader(path), path)]
    for name, part in declaration.parts:
        found += _flatten(part, path + (name,))
    return found


@functools.cache
def declared(cls: type) -> tuple[Declared, ...]:
    """Every declared value of a model class: fields first (each followed by its parts),
    then the derived properties. A missing declaration is a KeyError here, at import.

    Examples
    --------
    >>> [each.path for each in declared(FittedModel) if each.declaration.attribute == "offset_"]
    [('solution', 'offset')]
    """
    return tuple(_walk(cls) + [
        Declared(value.declaration, _reader((name,)), (name,))
        for name in dir(cls) if isinstance(value := getattr(cls, name, None), Derived)])


#: Every declared value of a :class:`FittedModel`.
DECLARED: tuple[Declared, ...] = declared(FittedModel)

#: Each fitted attribute of the estimator and how it is read from the model.
FITTED_ATTRIBUTES: dict[str, Callable[[FittedModel], Any]] = {
    each.declaration.attribute: each.read for each in DECLARED if each.declaration.attribute}

#: Attributes that are absent (``hasattr`` is False), not None, when the model has no such part:
#: scikit-learn's habit for what only some fits learn.
OPTIONAL_ATTRIBUTES = frozenset(each.declaration.attribute for each in DECLARED
                                if each.declaration.absent == "omitted"
                                and each.declaration.attribute)


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
        model = getattr(self, "model_", None)
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
