"""A fitted model is fixed at fit: parameters set afterwards change no output until the next
fit (scikit-learn's contract), and a float32 model or float32 input gives float32 outputs."""

from __future__ import annotations

import copy
import warnings

import dask.array as da
import numpy as np
import pytest

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import ParametersChangedWarning

X = np.random.default_rng(0).normal(size=(300, 4))
NEW_ROWS = np.random.default_rng(1).normal(size=(100, 4))

#: Every constructor parameter, and a valid value other than the one fitted below.
CHANGES = {
    "n_components": 5, "kernel": "laplacian", "gamma": 0.9, "degree": 5, "coef0": 0.3,
    "kernel_params": {"gamma": 2.0}, "remove_zero_eig": True, "n_landmarks": 7,
    "landmarks": "uniform", "tol": 0.5, "max_landmarks": 9, "dtype": "float32",
    "rcond": 0.1, "random_state": 5, "fit_inverse_transform": False, "alpha": 100.0,
    "sample_dim": "time", "weights": np.array([1.0, 2.0, 0.5, 3.0]), "solver": "gram",
}


def _fitted() -> KernelPCA:
    return KernelPCA(n_components=3, gamma=0.2, n_landmarks=60, landmarks="kmeans",
                     random_state=0, fit_inverse_transform=True, alpha=0.1).fit(X)


def _outputs(model: KernelPCA) -> dict[str, np.ndarray]:
    embedding = model.transform(X)
    return {"transform": embedding, "inverse_transform": model.inverse_transform(embedding),
            "score_samples": model.score_samples(X),
            "reconstruction_error": model.reconstruction_error(X),
            "lazy transform": model.transform(da.from_array(X, chunks=100)).compute()}


def test_every_parameter_is_covered():
    assert set(CHANGES) == set(KernelPCA().get_params())


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_parameter_set_after_fit_changes_no_output(name):
    """Each parameter in turn: every output is bit for bit what it was."""
    model = _fitted()
    before = _outputs(model)
    model.set_params(**{name: CHANGES[name]})
    after = _outputs(model)
    for output in before:
        assert after[output].dtype == before[output].dtype, output
        np.testing.assert_array_equal(after[output], before[output], err_msg=output)


def test_every_parameter_set_after_fit_changes_no_update_merge_or_re_solve(tmp_path):
    """All parameters changed at once: partial_fit (which warns, naming the ones it would
    have used), merge, set_n_components and a saved and loaded copy give what the
    unchanged model gives."""
    unchanged, changed = _fitted(), _fitted()
    changed.set_params(**CHANGES)
    with pytest.warns(ParametersChangedWarning) as caught:
        changed.partial_fit(NEW_ROWS)
    message = str(caught[0].message)
    for name in ("n_components=5", "remove_zero_eig=True", "dtype='float32'", "rcond=0.1"):
        assert name in message
    unchanged.partial_fit(NEW_ROWS)
    np.testing.assert_array_equal(changed.eigenvalues_, unchanged.eigenvalues_)
    np.testing.assert_array_equal(changed.transform(X), unchanged.transform(X))
    assert changed.fit_settings_ == unchanged.fit_settings_

    shard_params = dict(n_components=3, gamma=unchanged.gamma_, landmarks=unchanged.landmarks_)
    shard = KernelPCA(**shard_params).fit(NEW_ROWS[:50] + 3.0)
    merged_unchanged = kpca_dask.merge([unchanged, shard])
    merged_changed = kpca_dask.merge([changed, shard])
    np.testing.assert_array_equal(merged_changed.eigenvalues_, merged_unchanged.eigenvalues_)

    loaded = kpca_dask.load(changed.save(tmp_path / "model.zarr"))
    assert loaded.fit_settings_ == unchanged.fit_settings_
    np.testing.assert_array_equal(loaded.transform(X), unchanged.transform(X))

    # set_n_components is the one call that changes n_components of a fitted model.
    changed.set_n_components(4)
    unchanged.set_n_components(4)
    assert changed.n_components == 4 and changed.fit_settings_.n_components == 4
    np.testing.assert_array_equal(changed.eigenvalues_, unchanged.eigenvalues_)


def test_partial_fit_with_unchanged_parameters_does_not_warn():
    model = _fitted()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParametersChangedWarning)
        model.partial_fit(NEW_ROWS)


@pytest.mark.parametrize("model_dtype, input_dtype, expected", [
    ("float32", np.float64, np.float32),
    ("float32", np.float32, np.float32),
    ("float64", np.float32, np.float32),
    ("float64", np.float64, np.float64),
])
@pytest.mark.parametrize("lazy", [False, True])
def test_outputs_are_float32_when_the_model_or_the_input_is(model_dtype, input_dtype,
                                                             expected, lazy):
    """Every output (embedding, scores, errors, pre-images) is float32 when the model or the
    input is, in memory and lazily (the blocks' dtype too, not only the graph's meta)."""
    model = KernelPCA(n_components=3, gamma=0.2, n_landmarks=60, random_state=0,
                      dtype=model_dtype, fit_inverse_transform=True).fit(X)
    data = X.astype(input_dtype)
    data = da.from_array(data, chunks=100) if lazy else data
    embedding = model.transform(data)
    outputs = [embedding, model.score_samples(data), model.reconstruction_error(data),
               model.inverse_transform(embedding)]
    for output in outputs:
        assert isinstance(output, da.Array) == lazy
        assert output.dtype == expected
        if lazy:
            assert output.compute().dtype == expected  # the graph's blocks, not just its meta


def test_a_float32_model_stays_float32_after_a_deepcopy_and_set_params():
    """A copied float32 model keeps its fitted dtype when dtype is set after the fit."""
    model = KernelPCA(n_components=2, gamma=0.2, n_landmarks=30, random_state=0,
                      dtype="float32").fit(X)
    copied = copy.deepcopy(model).set_params(dtype="float64")
    assert copied.transform(X).dtype == np.float32
