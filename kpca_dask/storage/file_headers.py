"""What every model file's attributes begin with, written and checked in one place.

A model file names its format, its version, the kpca-dask that wrote it and the
estimator it holds; its ``params`` and ``fitted`` attributes follow, and its
``checksums`` (each array's digest, and the attributes') are taken over all of
them (:mod:`kpca_dask.io.checksums`). The exact, Hilbert and extended EOF files
write and check it here; KernelPCA's file (:mod:`kpca_dask.storage.model_files`)
writes the same header and also reads its older versions.
"""

from __future__ import annotations

from typing import Any, Mapping

from .._version import __version__
from ..errors import ModelFormatError
from ..io.checksums import CHECKSUMS_ATTRIBUTE, attributes_digest
from .model_files import FORMAT_NAME, saved_params

__all__ = ["FORMAT_NAME", "header_attributes", "with_checksums", "check_header",
           "layout_entries"]

def header_attributes(estimator: Any, name: str, version: int, fitted: dict) -> dict:
    """The attributes of a model file of ``estimator`` (class ``name``, format ``version``):
    the header, its parameters (those a file can hold, and the names of those it cannot)
    and ``fitted``.

    Examples
    --------
    >>> from kpca_dask import ExactKernelPCA
    >>> attrs = header_attributes(ExactKernelPCA(2), "ExactKernelPCA", 3, {})
    >>> attrs["format"], attrs["estimator"], attrs["params"]["n_components"]
    ('kpca-dask-model', 'ExactKernelPCA', 2)
    """
    params, unsaved = saved_params(estimator)
    return {"format": FORMAT_NAME, "format_version": version,
            "kpca_dask_version": __version__, "estimator": name, "params": params,
            "unsaved_params": unsaved, "fitted": fitted}


def with_checksums(attrs: dict, digests: Mapping[str, str]) -> dict:
    """``attrs`` with their ``checksums`` attribute: the arrays' ``digests`` and the digest of
    every attribute written."""
    return {**attrs, CHECKSUMS_ATTRIBUTE: {
        "arrays": dict(digests), "attributes": attributes_digest(attrs),
        "attribute_names": sorted(attrs)}}


def check_header(attrs: Mapping, name: str, version: int, saved_by: str) -> None:
    """Raise ModelFormatError unless ``attrs`` are those of a ``name`` model of format
    ``version``; ``saved_by`` says how such a model is written.

    Examples
    --------
    >>> check_header({"format": FORMAT_NAME, "estimator": "KernelPCA"}, "HilbertKernelEOF", 1,
    ...              "HilbertKernelEOF.save")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: holds no HilbertKernelEOF model: save one with ...
    """
    if attrs.get("estimator") != name or attrs.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"holds no {name} model: save one with {saved_by}.")
    if attrs.get("format_version") != version:
        raise ModelFormatError(
            f"written in model format version {attrs.get('format_version')!r}; this "
            f"kpca-dask {__version__} reads {name} models of version {version}. Install a "
            "matching kpca-dask version.")


def layout_entries(layout, fitted: dict, arrays: dict) -> None:
    """Add a field's layout to ``fitted`` (``feature_layout_``) and its kept positions and
    weights to ``arrays``, as every model file holds them."""
    from .layout_files import layout_attribute

    fitted["feature_layout_"] = None
    if layout is None:
        return
    fitted["feature_layout_"] = layout_attribute(layout)
    arrays.update({f"feature_{name}": value for name, value in
                   (("kept", layout.kept), ("weights", layout.weights)) if value is not None})
