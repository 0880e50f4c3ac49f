"""The entries of a model file (its arrays and JSON values), derived from the declarations
of the fitted model.

A model file (:mod:`kpca_dask.storage.model_files`) writes a
:class:`~kpca_dask.model.fitted.FittedModel` entry by entry, as each of its fields
declares (:class:`~kpca_dask.model.fitted.Stored`): the arrays of
:data:`MODEL_ARRAYS` and the JSON attributes of :data:`MODEL_ATTRIBUTES`, under
the names of the estimator's fitted attributes (an array drops the trailing
"_"). Reading takes exactly these names back: a name no model file holds is
refused, so a file cannot set anything else on an estimator.

Some attributes are derived from others (:data:`DERIVED_ATTRIBUTES`): they are
written for readers of the file, and checked against what they derive from
when it is read. A value that is not plain JSON names an encoding, kept here
(:data:`ENCODINGS`).

Messages name no file: the loader names it once (:func:`kpca_dask.errors.about`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from .._json import jsonable
from ..blocks.statistics import PassStatistics
from ..checkpoints.file_checks import damaged
from ..errors import InvalidParameterError, ModelFormatError
from ..io.preprocessing.fields import FeatureLayout
from ..model.fitted import Declared, Derived, FitSettings, FittedModel, Stored, declared
from ..model.parameters import check_params
from .layout_files import layout_attribute, layout_from_attribute

__all__ = ["MODEL_ARRAYS", "MODEL_ATTRIBUTES", "DERIVED_ATTRIBUTES", "WRITTEN_AS_NULL",
           "REQUIRED_ARRAYS", "ENCODINGS", "required_attributes", "file_entries",
           "model_from_entries"]


def _stored(cls: type) -> tuple[Declared, ...]:
    """The declared values of ``cls`` that a model file holds."""
    return tuple(each for each in declared(cls) if each.declaration.place)


_STORED = _stored(FittedModel)
#: The arrays of a model file; each holds the fitted attribute of its name plus "_".
MODEL_ARRAYS = tuple(each.declaration.file_name for each in _STORED
                     if each.declaration.place == "array")
#: The fitted attributes a model file holds as JSON, in the ``fitted`` attribute.
MODEL_ATTRIBUTES = tuple(each.declaration.file_name for each in _STORED
                         if each.declaration.place == "json")
#: Attributes that follow from other fields (properties of the model).
DERIVED_ATTRIBUTES = tuple(each.declaration.attribute for each in _STORED
                           if isinstance(getattr(FittedModel, each.path[0], None), Derived))
#: Arrays a model may lack, written then as a JSON null attribute of their name.
WRITTEN_AS_NULL = tuple(each.declaration.attribute for each in _STORED
                        if each.declaration.absent == "null")
#: The arrays every model file holds.
REQUIRED_ARRAYS = tuple(each.declaration.file_name for each in _STORED
                        if each.declaration.place == "array" and each.declaration.since == 1)


def required_attributes(version: int) -> tuple[str, ...]:
    """The fitted attributes every model file of format ``version`` holds.

    Examples
    --------
    >>> set(required_attributes(2)) - set(required_attributes(1))
    {'novelty_mean_norm2_'}
    """
    return tuple(each.declaration.file_name for each in _STORED
                 if each.declaration.place == "json" and each.declaration.since is not None
                 and each.declaration.since <= version)


def _feature_names(names, parts: dict, params: dict) -> np.ndarray | None:
    if names is None:
        return None
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        raise damaged(f"feature_names_in_ must be a list of column names; got {names!r}")
    return np.asarray(names, dtype=object)


def _settings(stored, parts: dict, params: dict) -> FitSettings:
    if stored is None:  # written before the settings were recorded: the saved parameters
        defaults = {"n_components": None, "remove_zero_eig": False, "dtype": "float64",
                    "rcond": None}
        return FitSettings.from_params({**defaults, **params})
    names = [each.name for each in dataclasses.fields(FitSettings)]
    if not (isinstance(stored, dict) and sorted(stored) == sorted(names)):
        raise damaged(f"fit_settings_ must be a mapping of {names}; got {stored!r}")
    try:
        check_params({name: stored[name] for name in names})
    except InvalidParameterError as exc:
        raise damaged(f"fit_settings_ is invalid: {exc}") from None
    return FitSettings(**stored)


def _layout(stored, parts: dict, params: dict) -> FeatureLayout | None:
    if stored is None:
        for name, value in parts.items():
            if value is not None:
                raise damaged(f"the array 'feature_{name}' is stored without the attribute "
                              "feature_layout_ it belongs to")
        return None
    try:
        return layout_from_attribute(stored, parts.get("kept"), parts.get("weights"))
    except (KeyError, TypeError, ValueError) as exc:
        raise damaged(f"feature_layout_ is invalid ({exc})") from None


#: Each encoding of a JSON value: how it is written, and how it is read back from the JSON
#: (None when absent), the arrays of its parts (by field name) and the saved parameters.
ENCODINGS: dict[str, tuple[Callable[[Any], Any], Callable[[Any, dict, dict], Any]]] = {
    "names": (lambda names: [str(name) for name in names], _feature_names),
    "settings": (dataclasses.asdict, _settings),
    "layout": (layout_attribute, _layout),
}


def file_entries(model: FittedModel) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and the JSON-ready fitted attributes that a model file holds for ``model``.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> kpca = KernelPCA(n_components=2, n_landmarks=10, landmarks="kmeans", random_state=0,
    ...                  solver="nystrom")
    >>> arrays, attributes = file_entries(kpca.fit(np.eye(12)).model_)
    >>> sorted(arrays)[:3], attributes["landmark_indices_"], attributes["n_components_"]
    (['eigenvalue_residuals', 'eigenvalues', 'explained_variance_ratio'], None, 2)
    """
    arrays, attributes = {}, {}
    for each in _stored(type(model)):
        declaration, value = each.declaration, each.read(model)
        name = declaration.file_name
        if declaration.place == "array":
            if value is not None:
                arrays[name] = np.asarray(value)
            elif declaration.absent == "null":
                attributes[declaration.attribute] = None
            continue
        if value is None and declaration.absent == "omitted":
            continue
        if declaration.encoding:
            value = ENCODINGS[declaration.encoding][0](value)
        try:
            attributes[name] = jsonable(value)
        except TypeError:
            raise InvalidParameterError(
                f"The fitted attribute {name} of type {type(value).__name__} cannot be "
                "stored in a model file.") from None
    return arrays, attributes


def model_from_entries(arrays: dict[str, np.ndarray], attributes: dict[str, Any],
                       statistics: PassStatistics | None, params: dict | None = None,
                       cls: type = FittedModel) -> FittedModel:
    """The fitted model a file's arrays and attributes hold; a name no file holds is refused.

    Values are taken as they are stored: :func:`kpca_dask.model.checks.check_fitted_estimator`
    then holds them to what a fit could make. A file written before the fitted
    settings were recorded takes them from the saved estimator ``params``.
    ``cls`` is the model class whose declarations are read.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0,
    ...                   solver="nystrom").fit(np.eye(12)).model_
    >>> arrays, attributes = file_entries(model)
    >>> model_from_entries(arrays, attributes, model.statistics).n_components
    2
    """
    stored = _stored(cls)
    _refuse_unknown_names(arrays, attributes, stored)
    values = {"statistics": statistics}
    for each in dataclasses.fields(cls):
        declaration = each.metadata["stored"]
        if declaration.place or declaration.parts:
            _read(declaration, each.name, arrays, attributes, params or {}, values)
    model = cls(**values)
    _check_derived(model, attributes, stored)
    return model


def _read(declaration: Stored, name: str, arrays: dict, attributes: dict, params: dict,
          into: dict) -> None:
    """Put the value ``declaration`` keeps into ``into[name]``; leave it out (the field's
    default) when a file of any version may lack it and this one does."""
    parts: dict = {}
    for part_name, part in declaration.parts:
        _read(part, part_name, arrays, attributes, params, parts)
    if declaration.place:
        source = arrays if declaration.place == "array" else attributes
        present = declaration.file_name in source
        value = source.get(declaration.file_name)
        if declaration.encoding:
            into[name] = ENCODINGS[declaration.encoding][1](value, parts, params)
        elif present or declaration.absent:
            into[name] = value
        return
    # A value rebuilt from its parts: all of those it needs, or (when optional) none. An
    # optional value needs the parts its class has no default for (a part added later
    # has one); a required value those every file version holds.
    needed = [part for part_name, part in declaration.parts
              if (declaration.absent == "omitted" and not _has_default(declaration.build,
                                                                       part_name))
              or not (part.absent == "omitted" or part.since is None)]
    present = [part for part in needed if _in_file(part, arrays, attributes)]
    if not present and declaration.absent == "omitted":
        into[name] = None
    elif len(present) != len(needed):
        raise damaged(f"{declaration.what} are incomplete: "
                      f"{' and '.join(part.file_name.rstrip('_') for part in needed)} are "
                      "stored together")
    else:
        into[name] = declaration.build(**parts)


def _has_default(cls: type | None, name: str) -> bool:
    """Whether the dataclass ``cls`` has a default for its field ``name``."""
    fields = {each.name: each for each in dataclasses.fields(cls)} if cls is not None else {}
    return name in fields and (fields[name].default is not dataclasses.MISSING
                               or fields[name].default_factory is not dataclasses.MISSING)


def _in_file(declaration: Stored, arrays: dict, attributes: dict) -> bool:
    """Whether the file's ``arrays`` or ``attributes`` hold the value ``declaration`` keeps."""
    source = arrays if declaration.place == "array" else attributes
    return declaration.file_name in source


def _refuse_unknown_names(arrays: dict, attributes: dict, stored: tuple[Declared, ...]) -> None:
    names = {each.declaration.place: set() for each in stored}
    for each in stored:
        names[each.declaration.place].add(each.declaration.file_name)
    nulls = [each.declaration.attribute for each in stored if each.declaration.absent == "null"]
    for name in attributes:
        if name not in names["json"] and name not in nulls:
            raise ModelFormatError(
                f"the model has an invalid attribute name {name!r}: no model file holds it. "
                "Fit and save the model again.")
    for name in nulls:
        if attributes.get(name, None) is not None:
            raise damaged(f"the attribute {name} is {attributes[name]!r}; a model file "
                          "holds it only as null, for a model without that array")
    for name in arrays:
        if name not in names["array"]:
            raise ModelFormatError(f"the model holds an array {name!r} that no model file "
                                   "has. Fit and save the model again.")
        if f"{name}_" in attributes:
            raise damaged(f"{name!r} is stored both as an array and as an attribute")


def _check_derived(model: FittedModel, attributes: dict, stored: tuple[Declared, ...]) -> None:
    """Attributes written beside what they follow from must agree with it."""
    for each in stored:
        name = each.declaration.attribute
        if not isinstance(getattr(type(model), each.path[0], None), Derived) or (
                name not in attributes):
            continue  # absent from files of format version 1
        try:
            expected = each.read(model)
        except (AttributeError, TypeError, IndexError, ValueError):
            expected = None  # what it follows from is malformed: refused for that
        stored = attributes[name]
        if not (type(stored) is type(expected) and stored == expected):
            raise damaged(f"the attribute {name} is {stored!r}, but the arrays and "
                          f"kernel parameters stored make it {expected!r}")
