"""Saving and loading fitted models as Zarr groups: arrays plus JSON, never pickle.

Layout of a saved :class:`~kpca_dask.KernelPCA` (format version 3)::

    model.zarr/
      landmarks                 (m, p)  float64   the landmark points Z (float32 when the data are)
      projection                (m, q)  float64   P = W V_q
      offset                    (q,)    float64   c = V_q^T mu
      eigenvalues               (q,)    float64
      explained_variance_ratio  (q,)    float64
      landmark_indices          (m,)    int64     only when the landmarks are rows of X
      statistics_gram, statistics_column_sums, statistics_reference
                                          float64   the pass statistics G, s, r (docs/design.md §7)
      novelty_weights           (m,)    float64   v = W mu, for reconstruction_error
      preimage_centres          (m, q)  float64   } the pre-image map, only when fitted
      preimage_coefficients     (m, p)  float64   } with fit_inverse_transform=True
      attributes (JSON):
        format = "kpca-dask-model", format_version = 3, kpca_dask_version
        checksums       digests of every array and of the other attributes
        statistics      n and t of the pass statistics (kpca_dask.checkpoints.statistics_files)
        estimator = "KernelPCA"
        params          every constructor parameter that JSON can hold
        unsaved_params  the names of those it cannot (e.g. a numpy Generator seed)
        fitted          the scalar fitted attributes, by their names:
                        kernel_, kernel_params_, gamma_, n_samples_fit_,
                        n_features_in_, trace_error_, landmark_rank_, fit_seconds_,
                        feature_names_in_ (a list of strings, for a table fit) ...

Loading reads numbers and strings only, so it never executes code. Arrays are
stored losslessly, so a loaded model transforms bitwise identically.

A model file is checked as it is read (docs/design.md §10): every chunk
carries a crc32c checksum, every array and the attributes a digest
(:mod:`kpca_dask.io.checksums`), the stored constructor parameters must pass
the checks a fit makes (:func:`kpca_dask.model.parameters.check_params`), and
the model as a whole must be one a fit could have made
(:mod:`kpca_dask.model.checks`). A file that fails is
refused with a :class:`~kpca_dask.errors.ModelFormatError` naming the array
or attribute. Attributes a user adds to the group later are not the model's
and are left out of the digest.

Version 2 files (before checksums) load as version 3 files do, without the
checksums, still checked as a whole. Version 1 files (before the statistics,
novelty weights and pre-image map were kept) still load: they transform as
before, but cannot take more rows, be merged or be re-solved (``statistics_``
is None), and cannot inverse_transform or score.
"""

from __future__ import annotations

import dataclasses
import json
import os

import dask
import numpy as np
from sklearn.base import BaseEstimator

from .._json import jsonable
from .._parallel import compute_held, distributed_client
from .._version import __version__
from ..checkpoints.file_checks import damaged
from ..checkpoints.statistics_files import (
    STATISTICS_ATTRIBUTE,
    STATISTICS_PREFIX,
    file_digest,
    read_statistics,
    statistics_arrays,
    statistics_attributes,
)
from ..engine.solve.on_cluster import is_held
from ..errors import InvalidParameterError, ModelFormatError, about
from ..io import WRITE_STATE_ATTR, PathOrURL, open_group, write_group
from ..io.checksums import (
    CHECKSUMS_ATTRIBUTE,
    attributes_digest,
    check_digests,
    digest,
    read_checked,
    recorded_digests,
)
from ..model.checks import check_fitted_estimator
from ..model.held_statistics import GRAM_NAME, live_statistics, saved_gram
from ..model.parameters import check_params
from .model_entries import REQUIRED_ARRAYS, file_entries, model_from_entries, required_attributes

__all__ = ["check_written", "save_model", "load_model", "stored_estimator",
           "saved_params", "FORMAT_VERSION"]

FORMAT_NAME = "kpca-dask-model"
FORMAT_VERSION = 3
#: Versions this module reads: version 1 has no statistics, novelty weights or pre-image map;
#: version 2 no checksums.
READABLE_VERSIONS = (1, 2, 3)
#: The first version whose files always carry checksums.
CHECKSUMMED_VERSION = 3


def save_model(model: BaseEstimator, path: PathOrURL, *, overwrite: bool = False,
               storage_options: dict | None = None) -> str:
    """Write a fitted model to a Zarr group at ``path``, atomically.

    Parameters
    ----------
    model : KernelPCA
        A fitted estimator with a named (not callable) kernel.
    path : str or path-like
        Local path or fsspec URL of the group to create.
    overwrite : bool, default=False
        Replace an existing ``path``; otherwise raise
        :class:`~kpca_dask.errors.OutputExistsError`.
    storage_options : dict, optional
        Passed to fsspec for URLs.

    Returns
    -------
    str
        The path of the model group written.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> model = KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X)
    >>> path = save_model(model, tempfile.mkdtemp() + "/model.zarr")
    >>> load_model(path, KernelPCA).n_components_
    2
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)
    if callable(model.kernel_):
        raise InvalidParameterError(
            f"A model with a callable kernel ({getattr(model.kernel_, '__name__', model.kernel_)})"
            " cannot be saved: a model file holds data only, never code. Use a named kernel "
            "(e.g. kernel='rbf') to save the model.")
    params, unsaved = saved_params(model)
    arrays, fitted = file_entries(model.model_)
    stats = live_statistics(model.model_, "save")
    digests = {}
    if is_held(stats):
        # G stays on the cluster: the workers write it, and its digest is taken there.
        gram, digests[GRAM_NAME] = saved_gram(stats.gram)
        arrays.update(statistics_arrays(dataclasses.replace(stats, gram=np.zeros((0, 0)))))
        arrays[GRAM_NAME] = gram
    elif stats is not None:
        arrays.update(statistics_arrays(stats))
    attrs = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "kpca_dask_version": __version__,
        "estimator": type(model).__name__,
        "params": params,
        "unsaved_params": unsaved,
        "fitted": fitted,
    }
    if stats is not None:
        attrs[STATISTICS_ATTRIBUTE] = statistics_attributes(stats)
    json.dumps(attrs)  # fail here, before anything is written, if something slipped through
    attrs[CHECKSUMS_ATTRIBUTE] = {
        "arrays": {name: digests.get(name) or digest(value) for name, value in arrays.items()},
        "attributes": attributes_digest(attrs),
        # Only these: an attribute a user adds to the group later is theirs, not the model's.
        "attribute_names": sorted(attrs),
    }
    written = write_group(arrays, path, attrs=attrs, overwrite=overwrite,
                          storage_options=storage_options)
    if is_held(stats) and storage_options is None:
        # Where G can be read again once the cluster that holds it is gone.
        model.model_ = model.model_.replace(statistics=stats, statistics_file=written)
    return written


def saved_params(estimator: BaseEstimator) -> tuple[dict, list[str]]:
    """The constructor parameters a model file holds (those JSON can hold) and the names of
    the others (e.g. a numpy Generator seed).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import KernelPCA
    >>> params, unsaved = saved_params(KernelPCA(random_state=np.random.default_rng(0)))
    >>> params["n_landmarks"], unsaved
    (1000, ['random_state'])
    """
    params, unsaved = {}, []
    for name, value in estimator.get_params(deep=False).items():
        try:
            params[name] = jsonable(value)
        except TypeError:
            unsaved.append(name)
    return params, unsaved


def load_model(path: PathOrURL, estimator_class: type, *,
               storage_options: dict | None = None) -> BaseEstimator:
    """Read a model written by :func:`save_model` (or ``KernelPCA.save``).

    Only arrays and JSON are read; nothing is executed. ``estimator_class``
    is the class to rebuild (:class:`~kpca_dask.KernelPCA`); it is passed in
    rather than imported so that the estimator can import this module.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ModelFormatError
        Not a kpca-dask model, an unknown format version, a missing part, a
        chunk that fails its checksum, an array or attribute changed since it
        was written, or a model no fit could have made (arrays whose shapes
        disagree, non-finite values, invalid parameters); the message names
        the array or attribute.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> path = KernelPCA(n_components=2, n_landmarks=20).fit(X).save(tempfile.mkdtemp() + "/m")
    >>> load_model(path, KernelPCA).kernel_
    'rbf'
    """
    where = os.fspath(path)
    with about(where):
        return _load(path, where, estimator_class, storage_options)


def stored_estimator(path: PathOrURL, *, storage_options: dict | None = None) -> str | None:
    """The estimator a model file says it holds (its ``estimator`` attribute), or None when
    ``path`` holds no readable group (:func:`load_model` then says what is wrong).

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> path = KernelPCA(n_components=2, n_landmarks=20).fit(X).save(tempfile.mkdtemp() + "/m")
    >>> stored_estimator(path)
    'KernelPCA'
    """
    try:
        group = open_group(path, storage_options=storage_options)
    except (FileNotFoundError, ValueError):
        return None
    return group.attrs.get("estimator")


def _load(path: PathOrURL, where: str, estimator_class: type,
          storage_options: dict | None) -> BaseEstimator:
    try:
        group = open_group(path, storage_options=storage_options)
    except FileNotFoundError:
        raise FileNotFoundError(f"No model at {where}: check the path.") from None
    except ValueError as exc:  # an array, not a group; or an unfinished write
        reason = exc.args[0] if exc.args else exc  # without the path it names: about does
        raise ModelFormatError(f"not a kpca-dask model: {reason}") from None
    attrs = group.attrs.asdict()
    if attrs.get("format") != FORMAT_NAME:
        raise ModelFormatError(
            f"a Zarr group but not a kpca-dask model (no format={FORMAT_NAME!r} "
            "attribute). Save models with KernelPCA.save or `kpca-dask fit`.")
    version = attrs.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise ModelFormatError(
            f"written in model format version {version!r} (by kpca-dask "
            f"{attrs.get('kpca_dask_version', '?')}); this kpca-dask {__version__} reads format "
            f"versions {', '.join(map(str, READABLE_VERSIONS))}. Install a matching kpca-dask "
            "version.")
    if attrs.get("estimator") != estimator_class.__name__:
        raise ModelFormatError(f"holds a {attrs.get('estimator')!r} model; only "
                               f"{estimator_class.__name__} models can be loaded.")
    stored = set(group.array_keys())
    missing = [name for name in REQUIRED_ARRAYS if name not in stored]
    fitted = attrs.get("fitted", {})
    if not isinstance(fitted, dict):
        raise damaged(f"the attribute 'fitted' must be a mapping; got {fitted!r}")
    missing += [f"attribute {name}" for name in required_attributes(version)
                if name not in fitted]
    if missing:
        raise ModelFormatError(f"the model is damaged: {', '.join(missing)} "
                               "missing. Fit and save it again.")
    arrays = {name: read_checked(group, name) for name in sorted(stored)
              if not name.startswith(STATISTICS_PREFIX)}
    # On a cluster G stays in the file until the workers read it (docs/design.md §11).
    lazy = distributed_client() is not None and GRAM_NAME in stored
    stats = read_statistics(group, attrs, lazy_gram=lazy)
    model = _rebuild(estimator_class, attrs, arrays, stats)
    check_fitted_estimator(model)
    # Last, so that a value no fit could make is named by what is wrong with it.
    digests = {}
    if stats is not None:
        arrays.update(statistics_arrays(dataclasses.replace(stats, gram=np.zeros((0, 0)))))
        if lazy:
            # Taken by a worker, reading the file a row panel at a time.
            digests[GRAM_NAME] = compute_held(dask.delayed(file_digest, pure=False)(
                group[GRAM_NAME]))
            arrays[GRAM_NAME] = stats.gram
            model.model_ = model.model_.replace(statistics_file=where)
        else:
            arrays[GRAM_NAME] = stats.gram
    _check_recorded_digests(attrs, arrays, version, digests)
    return model


def _check_recorded_digests(attrs: dict, arrays: dict, version: int,
                            taken: dict | None = None) -> None:
    """Compare the arrays and attributes with the digests taken when they were written."""
    if CHECKSUMS_ATTRIBUTE not in attrs and version < CHECKSUMMED_VERSION:
        return  # written before digests were kept
    check_written(attrs, arrays, taken)


def check_written(attrs: dict, arrays: dict, taken: dict | None = None) -> None:
    """Raise ModelFormatError unless a model file's ``arrays`` (None for those whose digest is
    in ``taken``) and attributes are those written: their digests, recorded in its
    ``checksums`` attribute, match. Every model file is written with them (KernelPCA's since
    format version 2)."""
    if CHECKSUMS_ATTRIBUTE not in attrs:
        raise ModelFormatError(
            f"the model is damaged: its attribute {CHECKSUMS_ATTRIBUTE!r} is missing (every "
            "model file is written with it), so nothing in it can be trusted. Copy the file "
            "again from its source, or fit and save it again.")
    check_digests(arrays, recorded_digests(attrs), taken=taken)
    recorded = attrs[CHECKSUMS_ATTRIBUTE]
    names = recorded.get("attribute_names")
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        names = [key for key in attrs if key not in (CHECKSUMS_ATTRIBUTE, WRITE_STATE_ATTR)]
    written = {name: attrs[name] for name in names if name in attrs}
    if attributes_digest(written) != recorded.get("attributes"):
        raise ModelFormatError(
            "the model's attributes differ from those that were written (their digest does not "
            "match): the file was edited. Copy the file again from its source, or fit and save "
            "it again.")


def _rebuild(estimator_class: type, attrs: dict, arrays: dict, stats) -> BaseEstimator:
    for key in ("params", "fitted"):
        if not isinstance(attrs.get(key, {}), dict):
            raise damaged(f"the attribute {key!r} must be a mapping; got {attrs[key]!r}")
    if not isinstance(attrs.get("unsaved_params", []), list):
        raise damaged("the attribute 'unsaved_params' must be a list of parameter names")
    params = attrs.get("params", {})
    try:
        # The table fit checks them with: a name the estimator does not take, or a
        # value it refuses, is an edited or damaged file, named before it is used.
        check_params(params)
    except InvalidParameterError as exc:
        raise damaged(f"a parameter is invalid: {exc}") from None
    model = estimator_class(**params)
    model.model_ = model_from_entries(arrays, attrs["fitted"], stats, params)
    if "landmarks" in attrs.get("unsaved_params", []) and model.model_.landmark_indices is None:
        # Explicit landmark points were passed to the constructor: they are landmarks_.
        model.set_params(landmarks=model.model_.landmarks)
    return model
