"""The fields of a model file: which part of a fitted model each array and attribute holds.

A model file (:mod:`kpca_dask.storage.model_files`) writes a
:class:`~kpca_dask.model.fitted.FittedModel` field by field, as the arrays of
:data:`MODEL_ARRAYS` and the JSON attributes of :data:`MODEL_ATTRIBUTES`,
under the names of the estimator's fitted attributes (an array drops the
trailing "_"). Reading takes exactly these names back: a name no model file
holds is refused, so a file cannot set anything else on an estimator.

Some attributes are derived from others (:data:`DERIVED_ATTRIBUTES`): they are
written for readers of the file, and checked against what they derive from
when it is read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._json import jsonable
from ..blocks.statistics import PassStatistics
from ..engine.solve import NoveltyTerms, NystromSolution
from ..errors import InvalidParameterError, ModelFormatError
from ..io.fields import FeatureLayout
from ..model.checks import damaged
from ..model.fitted import (
    FITTED_ATTRIBUTES,
    OPTIONAL_ATTRIBUTES,
    FitSettings,
    FittedModel,
    Preimage,
)
from ..model.parameters import check_params
from .layout_files import layout_attribute, layout_from_attribute

__all__ = ["MODEL_ARRAYS", "MODEL_ATTRIBUTES", "DERIVED_ATTRIBUTES", "WRITTEN_AS_NULL",
           "stored_fields", "model_from_fields"]

#: The arrays of a model file; each holds the fitted attribute of its name plus "_".
MODEL_ARRAYS = ("landmarks", "landmark_indices", "projection", "offset", "eigenvalues",
                "explained_variance_ratio", "eigenvalue_residuals", "novelty_weights",
                "preimage_centres", "preimage_coefficients", "feature_weights", "feature_kept")
#: The fitted attributes a model file holds as JSON, in the ``fitted`` attribute.
MODEL_ATTRIBUTES = ("kernel_", "kernel_params_", "gamma_", "n_landmarks_", "landmark_rank_",
                    "n_components_", "trace_error_", "trace_error_std_", "n_features_in_",
                    "n_samples_fit_",
                    "novelty_mean_norm2_", "landmark_path_", "fit_seconds_", "row_provenance_",
                    "feature_names_in_", "fit_settings_", "feature_layout_")
#: Attributes that follow from other fields, and how (from the other fields read).
DERIVED_ATTRIBUTES = ("gamma_", "n_components_", "n_landmarks_")
#: Arrays a model may lack, written then as a JSON null attribute of their name.
WRITTEN_AS_NULL = ("landmark_indices_",)


def stored_fields(model: FittedModel) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and the JSON-ready fitted attributes that a model file holds for ``model``.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> kpca = KernelPCA(n_components=2, n_landmarks=10, landmarks="kmeans", random_state=0)
    >>> arrays, attributes = stored_fields(kpca.fit(np.eye(12)).model_)
    >>> sorted(arrays)[:3], attributes["landmark_indices_"], attributes["n_components_"]
    (['eigenvalue_residuals', 'eigenvalues', 'explained_variance_ratio'], None, 2)
    """
    arrays, attributes = {}, {}
    for name in MODEL_ARRAYS:
        value = FITTED_ATTRIBUTES[f"{name}_"](model)
        if value is not None:
            arrays[name] = np.asarray(value)
        elif f"{name}_" in WRITTEN_AS_NULL:
            attributes[f"{name}_"] = None
    for name in MODEL_ATTRIBUTES:
        value = FITTED_ATTRIBUTES[name](model)
        if value is None and name in OPTIONAL_ATTRIBUTES:
            continue
        if name == "feature_names_in_":  # strings, as scikit-learn keeps them
            attributes[name] = [str(feature) for feature in value]
            continue
        if name == "fit_settings_":
            value = dataclasses.asdict(value)
        if name == "feature_layout_":  # its arrays are feature_weights and feature_kept
            value = layout_attribute(value)
        try:
            attributes[name] = jsonable(value)
        except TypeError:
            raise InvalidParameterError(
                f"The fitted attribute {name} of type {type(value).__name__} cannot be "
                "stored in a model file.") from None
    return arrays, attributes


def model_from_fields(arrays: dict[str, np.ndarray], attributes: dict[str, Any],
                      statistics: PassStatistics | None, shown: str,
                      params: dict | None = None) -> FittedModel:
    """The fitted model a file's arrays and attributes hold; a name no file holds is refused.

    Values are taken as they are stored: :func:`kpca_dask.model.checks.check_model`
    then holds them to what a fit could make. A file written before the fitted
    settings were recorded takes them from the saved estimator ``params``.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(np.eye(12)).model_
    >>> arrays, attributes = stored_fields(model)
    >>> model_from_fields(arrays, attributes, model.statistics, "model.zarr").n_components
    2
    """
    _refuse_unknown_names(arrays, attributes, shown)
    novelty = _pair(arrays, attributes, "novelty_weights", "novelty_mean_norm2_",
                    "the novelty terms", shown)
    preimage = _pair(arrays, arrays, "preimage_centres", "preimage_coefficients",
                     "the pre-image map", shown)
    names = attributes.get("feature_names_in_")
    model = FittedModel(
        kernel=attributes["kernel_"], kernel_params=attributes["kernel_params_"],
        landmarks=arrays["landmarks"], landmark_indices=arrays.get("landmark_indices"),
        landmark_rank=attributes["landmark_rank_"],
        solution=NystromSolution(arrays["projection"], arrays["offset"], arrays["eigenvalues"],
                                 arrays["explained_variance_ratio"], attributes["trace_error_"],
                                 residuals=arrays.get("eigenvalue_residuals"),
                                 # absent from files written before the iterative solve
                                 trace_error_std=attributes.get("trace_error_std_", 0.0)),
        n_features=attributes["n_features_in_"], n_samples=attributes["n_samples_fit_"],
        statistics=statistics, novelty=None if novelty is None else NoveltyTerms(*novelty),
        settings=_settings(attributes.get("fit_settings_"), params or {}, shown),
        preimage=None if preimage is None else Preimage(*preimage),
        feature_names=None if names is None else _feature_names(names, shown),
        landmark_path=attributes.get("landmark_path_"),
        row_provenance=attributes.get("row_provenance_"),
        fit_seconds=attributes["fit_seconds_"],
        layout=_layout(attributes.get("feature_layout_"), arrays, shown))
    _check_derived(model, attributes, shown)
    return model


def _refuse_unknown_names(arrays: dict, attributes: dict, shown: str) -> None:
    for name in attributes:
        if name not in MODEL_ATTRIBUTES and name not in WRITTEN_AS_NULL:
            raise ModelFormatError(
                f"The model at {shown} has an invalid attribute name {name!r}: no model file "
                "holds it. Fit and save the model again.")
    for name in WRITTEN_AS_NULL:
        if attributes.get(name, None) is not None:
            raise damaged(shown, f"the attribute {name} is {attributes[name]!r}; a model file "
                                 "holds it only as null, for a model without that array")
    for name in arrays:
        if name not in MODEL_ARRAYS:
            raise ModelFormatError(f"The model at {shown} holds an array {name!r} that no model "
                                   "file has. Fit and save the model again.")
        if f"{name}_" in attributes:
            raise ModelFormatError(f"The model at {shown} is damaged: {name!r} is stored both "
                                   "as an array and as an attribute.")


def _pair(first_source: dict, second_source: dict, first: str, second: str, what: str,
          shown: str) -> tuple | None:
    """Two fields stored together, or neither; one without the other is damage."""
    present = (first in first_source, second in second_source)
    if present == (False, False):
        return None
    if present != (True, True):
        raise damaged(shown, f"{what} are incomplete: {first} and {second.rstrip('_')} are "
                             "stored together")
    return first_source[first], second_source[second]


def _settings(stored, params: dict, shown: str) -> FitSettings:
    if stored is None:  # written before the settings were recorded: the saved parameters
        defaults = {"n_components": None, "remove_zero_eig": False, "dtype": "float64",
                    "rcond": None}
        return FitSettings.from_params({**defaults, **params})
    names = [field.name for field in dataclasses.fields(FitSettings)]
    if not (isinstance(stored, dict) and sorted(stored) == sorted(names)):
        raise damaged(shown, f"fit_settings_ must be a mapping of {names}; got {stored!r}")
    try:
        check_params({name: stored[name] for name in names})
    except InvalidParameterError as exc:
        raise damaged(shown, f"fit_settings_ is invalid: {exc}") from None
    return FitSettings(**stored)


def _layout(stored, arrays: dict, shown: str) -> FeatureLayout | None:
    if stored is None:
        for name in ("feature_weights", "feature_kept"):
            if name in arrays:
                raise damaged(shown, f"the array {name!r} is stored without the attribute "
                                     "feature_layout_ it belongs to")
        return None
    try:
        return layout_from_attribute(stored, arrays.get("feature_kept"),
                                     arrays.get("feature_weights"))
    except (KeyError, TypeError, ValueError) as exc:
        raise damaged(shown, f"feature_layout_ is invalid ({exc})") from None


def _feature_names(names, shown: str) -> np.ndarray:
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        raise damaged(shown, f"feature_names_in_ must be a list of column names; got {names!r}")
    return np.asarray(names, dtype=object)


def _check_derived(model: FittedModel, attributes: dict, shown: str) -> None:
    """Attributes written beside what they follow from must agree with it."""
    projection = model.solution.projection
    derived = {
        "gamma_": (model.kernel_params.get("gamma")
                   if isinstance(model.kernel_params, dict) else None),
        "n_components_": projection.shape[1] if np.ndim(projection) == 2 else None,
        "n_landmarks_": np.shape(model.landmarks)[0],
    }
    for name in DERIVED_ATTRIBUTES:
        if name not in attributes:  # absent from files of format version 1
            continue
        stored, expected = attributes[name], derived[name]
        if not (type(stored) is type(expected) and stored == expected):
            raise damaged(shown, f"the attribute {name} is {stored!r}, but the arrays and "
                                 f"kernel parameters stored make it {expected!r}")
