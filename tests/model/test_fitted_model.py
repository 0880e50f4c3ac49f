"""The fitted model is one immutable object that every way of making a model replaces whole."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import ModelFormatError
from kpca_dask.model.fitted import FITTED_ATTRIBUTES, FittedModel
from kpca_dask.storage.model_entries import MODEL_ARRAYS, MODEL_ATTRIBUTES


def _data(n=200, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 3))


def _fitted(**extra):
    return KernelPCA(n_components=3, gamma=0.3, n_landmarks=30, random_state=0,
                     **extra).fit(_data())


def test_fitted_model_is_frozen():
    """A FittedModel's fields cannot be reassigned."""
    model = _fitted().model_
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.n_samples = 3


def test_fitted_attributes_are_read_only_views():
    """The estimator's fitted attributes read the model and cannot be set one by one."""
    kpca = _fitted()
    assert kpca.eigenvalues_ is kpca.model_.solution.eigenvalues
    with pytest.raises(AttributeError):
        kpca.projection_ = np.zeros((30, 3))


def test_unfitted_estimator_has_no_fitted_attributes():
    """Before a fit every fitted attribute is absent, as scikit-learn expects."""
    kpca = KernelPCA()
    assert not any(hasattr(kpca, name) for name in FITTED_ATTRIBUTES)


def test_every_way_of_making_a_model_replaces_it_whole():
    """partial_fit, set_n_components and merge leave the earlier model object as it was."""
    kpca = _fitted()
    first = kpca.model_
    kpca.partial_fit(_data(50, seed=1))
    assert kpca.model_ is not first and first.n_samples == 200
    grown = kpca.model_
    kpca.set_n_components(2)
    assert grown.n_components == 3 and kpca.model_.n_components == 2
    shards = [_fitted(), KernelPCA(n_components=3, gamma=0.3,
                                   landmarks=first.landmarks).fit(_data(40, seed=2))]
    before = [shard.model_ for shard in shards]
    merged = kpca_dask.merge(shards)
    assert merged.n_samples_fit_ == 240
    assert all(shard.model_ is model for shard, model in zip(shards, before))
    assert [model.n_samples for model in before] == [200, 40]


def test_refit_without_the_map_drops_it():
    """A refit learns the whole model again: a pre-image map of an earlier fit does not stay."""
    kpca = _fitted(fit_inverse_transform=True)
    assert hasattr(kpca, "preimage_coefficients_")
    kpca.set_params(fit_inverse_transform=False).fit(_data())
    assert not hasattr(kpca, "preimage_coefficients_")


def test_model_file_fields_are_fitted_attributes():
    """Every array and attribute of a model file is one of the estimator's fitted attributes."""
    assert {f"{name}_" for name in MODEL_ARRAYS} <= set(FITTED_ATTRIBUTES)
    assert set(MODEL_ATTRIBUTES) <= set(FITTED_ATTRIBUTES)
    assert {field.name for field in dataclasses.fields(FittedModel)} >= {
        "kernel", "landmarks", "solution", "statistics", "novelty", "preimage"}


def test_derived_attribute_that_disagrees_is_refused(tmp_path):
    """n_components_ written beside the projection must agree with its shape."""
    path = _fitted().save(tmp_path / "model.zarr")
    group = zarr.open_group(path, mode="r+")
    attrs = group.attrs.asdict()
    attrs["fitted"]["n_components_"] = 2
    del attrs["checksums"]
    group.attrs.put({**attrs, "format_version": 2})
    with pytest.raises(ModelFormatError, match="n_components_ is 2, but the arrays and kernel "
                                               "parameters stored make it 3"):
        kpca_dask.load(path)


def test_every_fitted_attribute_is_declared_in_the_class_body():
    """Each fitted attribute of the model is a property written in KernelPCA's class body
    (found by a reader and an IDE), none made by a loop at import."""
    import inspect

    from kpca_dask.estimators import kernel_pca as estimator
    from kpca_dask.model.fitted import FITTED_ATTRIBUTES

    source = inspect.getsource(estimator.KernelPCA)
    for name in FITTED_ATTRIBUTES:
        assert isinstance(inspect.getattr_static(estimator.KernelPCA, name), property), name
        assert f"    {name} = fitted_attribute(" in source or f"def {name}(" in source, name
