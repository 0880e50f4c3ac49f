"""Damaged model files and checkpoints are refused with a kpca_dask error, never believed.

Every array and every attribute of a saved model (with the pre-image map and
the statistics) and of a fit checkpoint is damaged in the ways files get
damaged or edited: an array one row short, a chunk file cut short, NaN
values, a byte flipped inside a stored chunk, another dtype, an edited value,
a chunk file deleted; an attribute removed, given another type, NaN, or
another value. Arrays are rewritten through Zarr (so their chunk checksums
are valid) and chunk files changed on disk; attributes through Zarr.

A damaged model must raise a :class:`~kpca_dask.errors.KPCAError` when it is
loaded or first used (transform, inverse_transform, score_samples,
set_n_components, partial_fit, save and load again): never a numpy or scipy
traceback, never a non-finite output. A damaged checkpoint must be refused
with one by the fit that resumes it (a resumed fit that runs is compared
with the undamaged one, so a damage that went unnoticed fails loudly).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import KPCAError

N, P, M, Q = 120, 3, 20, 3

MODEL_ARRAYS = (
    "landmarks", "landmark_indices", "projection", "offset", "eigenvalues",
    "explained_variance_ratio", "eigenvalue_residuals", "novelty_weights", "preimage_centres",
    "preimage_coefficients", "preimage_intercept", "statistics_gram", "statistics_column_sums",
    "statistics_reference",
)
MODEL_ATTRIBUTES = (
    "format", "format_version", "kpca_dask_version", "estimator", "unsaved_params", "checksums",
    "params.alpha", "params.coef0", "params.degree", "params.dtype", "params.fit_inverse_transform",
    "params.gamma", "params.kernel", "params.kernel_params", "params.landmarks",
    "params.max_landmarks", "params.n_components", "params.n_landmarks", "params.random_state",
    "params.rcond", "params.remove_zero_eig", "params.tol", "params.sample_dim", "params.weights",
    "params.solver",
    "fitted.kernel_", "fitted.kernel_params_", "fitted.gamma_", "fitted.n_landmarks_",
    "fitted.landmark_rank_", "fitted.n_components_", "fitted.trace_error_",
    "fitted.trace_error_std_",
    "fitted.n_features_in_", "fitted.n_samples_fit_", "fitted.novelty_mean_norm2_",
    "fitted.landmark_path_", "fitted.fit_seconds_", "fitted.row_provenance_",
    "fitted.fit_settings_", "fitted.inverse_alpha_", "fitted.inverse_alpha_score_",
    "statistics.n_samples", "statistics.diagonal_sum", "statistics.n_nonfinite",
    "statistics.first_nonfinite_row",
)
#: STATE stands for the group of the checkpoint's current running total.
CHECKPOINT_ARRAYS = (
    "landmarks", "landmark_indices", "reference", "STATE/statistics_gram",
    "STATE/statistics_column_sums", "STATE/statistics_reference", "STATE/finished",
)
CHECKPOINT_ATTRIBUTES = tuple(f"kpca_dask_checkpoint.{key}" for key in (
    "format", "format_version", "identity", "segment_blocks", "n_segments",
    "landmarks_written", "state", "kernel_params", "landmark_path", "checksums")) + tuple(
    f"STATE:{key}" for key in ("statistics.n_samples", "statistics.diagonal_sum",
                               "statistics.n_nonfinite", "statistics.first_nonfinite_row",
                               "checksums"))
ARRAY_DAMAGES = ("one row short", "chunk file cut short", "NaN", "byte flipped in a chunk",
                 "another dtype", "value edited", "chunk file deleted")
ATTRIBUTE_DAMAGES = ("removed", "another type", "NaN", "value edited")

MODEL_PARAMS = dict(n_components=Q, n_landmarks=M, landmarks="uniform", gamma=0.3,
                    fit_inverse_transform=True, alpha=0.1, random_state=0)
#: 16 row blocks: two checkpoint segments of 8.
CHECKPOINT_PARAMS = dict(n_components=Q, n_landmarks=M, landmarks="uniform", random_state=0)


def _data(n=N, seed=0):
    return np.random.default_rng(seed).normal(size=(n, P))


def _checkpoint_data():
    return da.from_array(_data(160, seed=1), chunks=(10, P))


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "model.zarr"
    KernelPCA(**MODEL_PARAMS).fit(_data()).save(path)
    return path


@pytest.fixture(scope="module")
def clean_outcome(saved_model, tmp_path_factory) -> dict[str, np.ndarray]:
    """What each use (in turn, as model_outcome makes them) returns on the undamaged model."""
    copy = tmp_path_factory.mktemp("clean") / "model.zarr"
    shutil.copytree(saved_model, copy)
    return {step: output for step, _, output in model_outcome(copy)}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[Path, KernelPCA]:
    path = tmp_path_factory.mktemp("damage") / "fit.ckpt"
    model = KernelPCA(**CHECKPOINT_PARAMS).fit(_checkpoint_data(), checkpoint=str(path))
    return path, model


# -- damaging ----------------------------------------------------------------------


def _state(path: Path) -> str:
    return zarr.open_group(str(path), mode="r").attrs["kpca_dask_checkpoint"]["state"]


def _damage_array(path: Path, name: str, damage: str) -> None:
    group = zarr.open_group(str(path), mode="r+")
    *parents, leaf = name.split("/")
    for parent in parents:
        group = group[parent]
    array = group[leaf]
    chunk_files = sorted(f for f in (path / name / "c").rglob("*") if f.is_file())
    if damage in ("chunk file cut short", "byte flipped in a chunk", "chunk file deleted"):
        chunk = chunk_files[0]
        data = bytearray(chunk.read_bytes())
        if damage == "chunk file cut short":
            chunk.write_bytes(bytes(data[:len(data) // 2]))
        elif damage == "byte flipped in a chunk":
            data[len(data) // 2] ^= 0x10
            chunk.write_bytes(bytes(data))
        else:
            chunk.unlink()
        return
    value = array[...]
    if damage == "one row short":
        value = value[:-1]
    elif damage == "NaN":
        value = np.full(value.shape, np.nan)
    elif damage == "another dtype":
        value = value.astype(np.float32 if value.dtype == np.float64 else np.float64)
    elif damage == "value edited":
        value = value.copy()
        value.flat[0] = (value.flat[0] + 1) if value.dtype.kind in "iu" else (
            not value.flat[0] if value.dtype == np.bool_ else value.flat[0] * 1.5 + 0.25)
    group.create_array(leaf, data=value, compressors=array.compressors, overwrite=True)


def _edited(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return -value - 1
    if isinstance(value, str):
        return value + "-edited"
    if value is None:
        return -1
    if isinstance(value, dict):
        return {} if value else {"edited": 1}
    return [] if value else ["edited"]


def _damage_attribute(path: Path, name: str, damage: str) -> None:
    group = zarr.open_group(str(path), mode="r+")
    if name.startswith("STATE:"):
        group, name = group[_state(path)], name[len("STATE:"):]
    attrs = group.attrs.asdict()
    *parents, key = name.split(".")
    holder = attrs
    for parent in parents:
        holder = holder[parent]
    if damage == "removed":
        del holder[key]
    elif damage == "another type":
        holder[key] = 7 if isinstance(holder[key], str) else str(holder[key])
    elif damage == "NaN":
        holder[key] = math.nan
    else:
        holder[key] = _edited(holder[key])
    group.attrs.put(attrs)


def _damaged_copy(source: Path, tmp_path: Path, kind: str, name: str, damage: str) -> Path:
    path = tmp_path / source.name
    shutil.copytree(source, path)
    if name.startswith("STATE/"):
        name = name.replace("STATE", _state(path), 1)
    (_damage_array if kind == "array" else _damage_attribute)(path, name, damage)
    return path


# -- using -------------------------------------------------------------------------


def _rows():
    return _data(15, seed=2)


#: Every use of a loaded model, as (step, function of the model and its path).
USES = (
    ("transform", lambda model, path: model.transform(_rows())),
    ("inverse_transform", lambda model, path: model.inverse_transform(np.full((4, Q), 0.1))),
    ("score_samples", lambda model, path: model.score_samples(_rows())),
    ("set_n_components", lambda model, path: model.set_n_components(2).transform(_rows())),
    ("partial_fit", lambda model, path: model.partial_fit(_rows()).transform(_rows())),
    ("save", lambda model, path: kpca_dask.load(model.save(path.with_name("again.zarr"))
                                                ).transform(_rows())),
)


def model_outcome(path: Path) -> list[tuple[str, BaseException | None, np.ndarray | None]]:
    """Load the model at ``path`` and use it every way in turn, on the one loaded model:
    (step, kpca_dask error or None, output or None) each.

    Any other exception propagates; every output must be finite.
    """
    try:
        model = kpca_dask.load(path)
    except KPCAError as exc:
        return [("load", exc, None)]
    steps = []
    for step, use in USES:
        try:
            result = np.asarray(use(model, path))
        except KPCAError as exc:
            steps.append((step, exc, None))
            continue
        assert np.isfinite(result).all(), f"{step} returned non-finite values"
        steps.append((step, None, result))
    return steps


def first_use_outcome(path: Path) -> dict[str, BaseException | None]:
    """Each use of the model at ``path`` as the first after loading it: the kpca_dask error
    that load or that use raised, or None when both worked.

    Any other exception propagates; every output must be finite.
    """
    outcome = {}
    for step, use in USES:
        try:
            model = kpca_dask.load(path)
        except KPCAError as exc:
            return {"load": exc}
        try:
            result = np.asarray(use(model, path))
        except KPCAError as exc:
            outcome[step] = exc
            continue
        assert np.isfinite(result).all(), f"{step} returned non-finite values"
        outcome[step] = None
    return outcome


def checkpoint_outcome(path: Path, clean: KernelPCA) -> BaseException | None:
    """Resume the fit from ``path``: its kpca_dask error, or None if it equals ``clean``."""
    try:
        resumed = KernelPCA(**CHECKPOINT_PARAMS).fit(_checkpoint_data(), checkpoint=str(path))
    except KPCAError as exc:
        return exc
    np.testing.assert_allclose(resumed.eigenvalues_, clean.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(resumed.landmarks_, clean.landmarks_, rtol=0)
    assert resumed.trace_error_ == pytest.approx(clean.trace_error_, rel=1e-10)
    assert resumed.gamma_ == clean.gamma_
    return None


# -- the tests ---------------------------------------------------------------------


def test_every_array_and_attribute_is_damaged(saved_model, checkpoint):
    """The lists damaged below name every array and attribute a model and a checkpoint store."""
    group = zarr.open_group(str(saved_model), mode="r")
    attrs = group.attrs.asdict()
    stored = {key for key in attrs if key not in ("params", "fitted", "statistics",
                                                  "kpca_dask_write")}
    stored |= {f"{part}.{key}" for part in ("params", "fitted", "statistics")
               for key in attrs[part]}
    assert set(group.array_keys()) == set(MODEL_ARRAYS)
    assert stored == set(MODEL_ATTRIBUTES)
    path, _ = checkpoint
    group = zarr.open_group(str(path), mode="r")
    state = group[_state(path)]
    arrays = set(group.array_keys()) | {f"STATE/{name}" for name in state.array_keys()}
    assert arrays == set(CHECKPOINT_ARRAYS)
    meta = group.attrs["kpca_dask_checkpoint"]
    assert {f"kpca_dask_checkpoint.{key}" for key in meta} | {
        f"STATE:statistics.{key}" for key in state.attrs["statistics"]} | {
        "STATE:checksums"} == set(CHECKPOINT_ATTRIBUTES)


def test_undamaged_copies_work(saved_model, checkpoint, tmp_path):
    """The copies the damages start from load, work and resume without an error."""
    copy = tmp_path / "model.zarr"
    shutil.copytree(saved_model, copy)
    assert all(error is None for _, error, _ in model_outcome(copy))
    path, clean = checkpoint
    shutil.copytree(path, tmp_path / "fit.ckpt")
    assert checkpoint_outcome(tmp_path / "fit.ckpt", clean) is None


@pytest.mark.parametrize("damage", ARRAY_DAMAGES)
@pytest.mark.parametrize("name", MODEL_ARRAYS)
def test_damaged_model_array_is_refused(saved_model, tmp_path, name, damage):
    """A damaged array of a model file gives a kpca_dask error at load or, if it loads, at
    its first use, whichever use comes first."""
    path = _damaged_copy(saved_model, tmp_path, "array", name, damage)
    unnoticed = [step for step, error in first_use_outcome(path).items() if error is None]
    assert not unnoticed, f"{damage} of {name!r} went unnoticed by load and by {unnoticed}"


@pytest.mark.parametrize("damage", ATTRIBUTE_DAMAGES)
@pytest.mark.parametrize("name", MODEL_ATTRIBUTES)
def test_damaged_model_attribute_is_refused(saved_model, tmp_path, name, damage):
    """A damaged attribute of a model file gives a kpca_dask error at load or, if it loads,
    at its first use, whichever use comes first."""
    path = _damaged_copy(saved_model, tmp_path, "attribute", name, damage)
    unnoticed = [step for step, error in first_use_outcome(path).items() if error is None]
    assert not unnoticed, f"{damage} of {name!r} went unnoticed by load and by {unnoticed}"


@pytest.mark.parametrize("damage", ATTRIBUTE_DAMAGES)
@pytest.mark.parametrize("name", MODEL_ATTRIBUTES)
def test_damaged_attribute_of_a_file_without_digests_works_or_is_refused(
        saved_model, clean_outcome, tmp_path, name, damage):
    """Without digests (a file written before them) an edited attribute is caught by the
    checks of what a fit could make, or is harmless: every use raises a kpca_dask error or
    returns what it returns on the undamaged file (so never a non-finite output)."""
    path = _damaged_copy(saved_model, tmp_path, "attribute", name, damage)
    group = zarr.open_group(str(path), mode="r+")
    attrs = {k: v for k, v in group.attrs.asdict().items() if k != "checksums"}
    group.attrs.put({**attrs, "format_version": 2} if name != "format_version" else attrs)
    for step, error, output in model_outcome(path):
        if error is None:
            # An edit that went unnoticed must change nothing a use returns.
            np.testing.assert_allclose(output, clean_outcome[step], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{damage} of {name!r} changed {step}")


@pytest.mark.parametrize(("part", "name", "damage"), [
    *(("array", name, damage) for name in CHECKPOINT_ARRAYS for damage in ARRAY_DAMAGES),
    *(("attribute", name, damage)
      for name in CHECKPOINT_ATTRIBUTES for damage in ATTRIBUTE_DAMAGES)])
def test_damaged_checkpoint_is_refused(checkpoint, tmp_path, part, name, damage):
    """A damaged array or attribute of a checkpoint is refused by the fit that resumes it."""
    path, clean = checkpoint
    damaged = _damaged_copy(path, tmp_path, part, name, damage)
    assert checkpoint_outcome(damaged, clean) is not None, f"{damage} of {name!r} went unnoticed"
