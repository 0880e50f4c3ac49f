"""Saving and loading :class:`~kpca_dask.ExtendedKernelEOF` models as Zarr groups (no pickle).

An extended EOF is its stages and its space-time maps, so its file is a group
that holds each stage's model file as a subgroup, written and checked by that
stage's own format (:mod:`kpca_dask.storage.model_files` for a landmark stage,
:mod:`kpca_dask.storage.exact_files` for the Gram way's), beside the maps
(``format_version`` 1 of "kpca-dask-model", ``estimator = "ExtendedKernelEOF"``)::

    extended.zarr/
      kernel_stage/     the kernel PCA of the embedded rows (a model file)
      linear_stage/     the linear EOFs the field was reduced to (with n_pca_modes)
      components        (k, L, ...)  the space-time maps, NaN off a field's mask
      rotated_components (r, L, ...) a rotated model's rotated maps (the kernel stage
                                   holds the rotation)
      attributes (JSON): format, format_version, kpca_dask_version, estimator,
                         params, unsaved_params, checksums, and fitted: solver,
                         preprocessing (the delay embedding's step, tau and L:
                         kpca_dask.io.preprocessing), n_features_in, rotated
                         (whether the file holds rotated_components), components and
                         rotated_components (their dims,
                         coordinates, name and attributes for a field)

The group is written in a hidden staging directory and put in place whole
(:func:`kpca_dask.io.atomic.staged_output`); the maps carry a crc32c checksum
per chunk and a digest, the attributes a digest, all checked on loading.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
import xarray as xr
import zarr
from sklearn.utils.validation import check_is_fitted

from ..checkpoints.file_checks import damaged
from ..eof.extended_model import ExtendedFit
from ..errors import InvalidParameterError, about
from ..io import PathOrURL, open_group
from ..io.atomic import INCOMPLETE, WRITE_STATE_ATTR, staged_output
from ..io.checksums import (
    CHECKSUMS_ATTRIBUTE,
    checksummed_codecs,
    digest,
    read_checked,
)
from ..io.preprocessing import (
    DelayEmbedding,
    EOFReduction,
    steps_attribute,
    steps_from_attribute,
)
from ..model.eof_parameters import EXTENDED_CONSTRAINTS
from ..model.parameters import check_params
from .file_headers import check_header, header_attributes, with_checksums
from .layout_files import labelled, labels_attribute
from .model_files import check_written

__all__ = ["save_extended", "load_extended", "ESTIMATOR"]

ESTIMATOR = "ExtendedKernelEOF"
FORMAT_VERSION = 1
STAGES = ("kernel_stage", "linear_stage")


def save_extended(estimator, path: PathOrURL, *, overwrite: bool = False,
                  storage_options: dict | None = None) -> str:
    """Write a fitted ExtendedKernelEOF, its stages included, to a Zarr group at ``path``;
    returns the path. Nothing is left at ``path`` if a stage cannot be saved."""
    check_is_fitted(estimator)
    maps = estimator.components()  # on the field for a field's fit: its labels are kept
    values = _values(maps)
    rotated = estimator.model_.rotated_maps
    fitted = {"solver": estimator.solver_,
              "preprocessing": steps_attribute(estimator.model_.preprocessing.steps),
              "delay": list(estimator.delay_),  # what kpca-dask before the steps reads
              "n_features_in": int(estimator.n_features_in_),
              "components": labels_attribute(maps), "stages": {}, "rotated": rotated is not None,
              "rotated_components": None if rotated is None else labels_attribute(rotated)}
    attrs = header_attributes(estimator, ESTIMATOR, FORMAT_VERSION, fitted)
    with staged_output(path, overwrite, storage_options) as target:
        group = zarr.open_group(target.url, mode="w-", zarr_format=3,
                                attributes={**attrs, WRITE_STATE_ATTR: INCOMPLETE},
                                **target.zarr_kwargs())
        arrays = {"components": values}
        if rotated is not None:
            arrays["rotated_components"] = _values(rotated)
        for name, value in arrays.items():
            group.create_array(name, data=value, compressors=checksummed_codecs())
        for name, stage in zip(STAGES, (estimator.kpca_, estimator.pca_)):
            if stage is not None:
                stage.save(f"{target.url}/{name}", storage_options=storage_options)
                # The stage's own attributes' digest binds it to this file.
                fitted["stages"][name] = group[name].attrs[CHECKSUMS_ATTRIBUTE]["attributes"]
        group.attrs.update(with_checksums(attrs, {name: digest(value)
                                                  for name, value in arrays.items()}))
    return os.fspath(path)


def _values(maps) -> np.ndarray:
    return np.asarray(maps.values if isinstance(maps, xr.DataArray) else maps, np.float64)


def _check_stages(group: zarr.Group, fitted: dict, estimator) -> None:
    """The stages the file holds are those it was written with: the kernel stage, the linear
    one exactly when ``n_pca_modes`` is set, each with the attributes it was written with."""
    wanted = {"kernel_stage"} | ({"linear_stage"} if estimator.n_pca_modes else set())
    recorded = fitted.get("stages")
    if not isinstance(recorded, dict) or set(recorded) != wanted or (
            set(STAGES) & set(group.group_keys())) != wanted:
        raise damaged(f"its stages are not {sorted(wanted)}, as its parameters ask")
    for name in wanted:
        digest_of_stage = group[name].attrs.get(CHECKSUMS_ATTRIBUTE, {}).get("attributes")
        if digest_of_stage != recorded[name]:
            raise damaged(f"the stage {name!r} is not the one this file was written with "
                          "(the digest of its attributes differs)")


def load_extended(path: PathOrURL, estimator_class: type, *,
                  storage_options: dict | None = None, load_stage: Callable):
    """Read a model written by :func:`save_extended`, its stages by ``load_stage``
    (:func:`kpca_dask.load`, which reads each by its own loader).

    Raises
    ------
    ModelFormatError
        Not such a model, a damaged array or attribute, or a stage that fails
        its own checks; the message names the file and what is wrong.
    """
    where = os.fspath(path)
    with about(where):
        group = open_group(path, storage_options=storage_options)
        attrs = group.attrs.asdict()
        check_header(attrs, ESTIMATOR, FORMAT_VERSION, f"{ESTIMATOR}.save")
        if "components" not in group.array_keys() or "kernel_stage" not in group.group_keys():
            raise damaged("components or kernel_stage missing")
        names = [name for name in ("components", "rotated_components")
                 if name in group.array_keys()]
        arrays = {name: read_checked(group, name) for name in names}
        check_written(attrs, arrays)
        values = arrays["components"]
        fitted = attrs["fitted"]
        try:
            estimator = estimator_class(**attrs.get("params", {}))
            check_params(estimator.get_params(deep=False), constraints=EXTENDED_CONSTRAINTS,
                         estimator=ESTIMATOR)
            components = labelled(values, fitted["components"])
            rotated = None
            if fitted.get("rotated", False):
                rotated = labelled(arrays["rotated_components"],
                                    fitted.get("rotated_components"))
            step = _delay_embedding(fitted, estimator)
            embedding = step.embedding
        except InvalidParameterError as exc:
            raise damaged(f"a parameter is invalid: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise damaged(f"its attributes are not those a fit writes ({exc})") from None
        _check_stages(group, fitted, estimator)
    kernel, linear = (load_stage(f"{where}/{name}", storage_options=storage_options)
                      if name in group.group_keys() else None for name in STAGES)
    if kernel.n_components_ != values.shape[0] or values.shape[1] != embedding:
        with about(where):
            raise damaged(f"components of shape {values.shape} do not fit the kernel stage's "
                          f"{kernel.n_components_} modes and {embedding} lagged copies")
    held = kernel.model_.rotation
    if (rotated is None) != (held is None) or (rotated is not None and np.shape(rotated) != (
            (held.n_components,) + np.shape(components)[1:])):
        with about(where):
            raise damaged("its rotated components do not fit the kernel stage's rotation")
    # The fitted model a fit makes (ExtendedKernelEOF.fit), from the file.
    estimator.model_ = ExtendedFit(kernel, linear, components, fitted["solver"], step,
                                   int(fitted["n_features_in"]), rotated)
    return estimator


def _delay_embedding(fitted: dict, estimator) -> DelayEmbedding:
    """The lagged copies the file's steps hold (after the reduction to ``n_pca_modes``
    linear EOF scores, if set), as the estimator's parameters say them; a file written
    before the steps were recorded holds ``delay``, ``[tau, embedding]``, alone."""
    wanted = (DelayEmbedding(estimator.tau, estimator.embedding),)
    if estimator.n_pca_modes is not None:
        wanted = (EOFReduction(estimator.n_pca_modes),) + wanted
    if "preprocessing" in fitted:
        steps = steps_from_attribute(fitted["preprocessing"], {})
    else:
        steps = wanted[:-1] + (DelayEmbedding(*(int(value) for value in fitted["delay"])),)
    if steps != wanted:
        raise ValueError(f"its preprocessing {list(steps)} is not its parameters' "
                         f"{list(wanted)}")
    return steps[-1]
