"""Model files and checkpoints are checked as they are read: checksums, digests, consistency."""

from __future__ import annotations

import shutil

import dask.array as da
import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import KernelPCA, cli
from kpca_dask.errors import ModelFormatError
from kpca_dask.io.checksums import has_checksum


def _data(n=150, p=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, p))


@pytest.fixture(scope="module")
def model():
    return KernelPCA(n_components=3, n_landmarks=25, landmarks="uniform", gamma=0.3,
                     fit_inverse_transform=True, random_state=0).fit(_data())


def _arrays(group: zarr.Group):
    for _, array in group.arrays():
        yield array
    for _, child in group.groups():
        yield from _arrays(child)


def _chunk_file(path, name):
    return next(f for f in sorted((path / name / "c").rglob("*")) if f.is_file())


def test_every_model_array_carries_a_crc32c_checksum(model, tmp_path):
    """Each array of a saved model is stored with the crc32c codec."""
    group = zarr.open_group(model.save(tmp_path / "model.zarr"), mode="r")
    arrays = list(_arrays(group))
    assert len(arrays) == 14 and all(has_checksum(array) for array in arrays)


def test_every_checkpoint_array_carries_a_crc32c_checksum(tmp_path):
    """Each array of a checkpoint, its running total's included, carries a crc32c checksum."""
    path = tmp_path / "fit.ckpt"
    X = da.from_array(_data(160), chunks=(10, 3))
    KernelPCA(n_components=2, n_landmarks=20, landmarks="uniform", random_state=0).fit(
        X, checkpoint=str(path))
    arrays = list(_arrays(zarr.open_group(str(path), mode="r")))
    assert len(arrays) == 7 and all(has_checksum(array) for array in arrays)


def test_flipped_byte_is_named_by_file_and_array(model, tmp_path):
    """A byte flipped in a stored chunk is a ModelFormatError naming the file and the array."""
    path = tmp_path / "model.zarr"
    model.save(path)
    chunk = _chunk_file(path, "projection")
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 1
    chunk.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match=rf"{path}: the array 'projection' is damaged: "
                                               "a stored chunk fails its crc32c checksum"):
        kpca_dask.load(path)


def test_deleted_chunk_is_found_by_the_digest(model, tmp_path):
    """A deleted chunk file, which Zarr reads as zeros, is refused by the array's digest."""
    path = tmp_path / "model.zarr"
    model.save(path)
    _chunk_file(path, "offset").unlink()
    with pytest.raises(ModelFormatError, match="'offset' differs from the array that was "
                                               "written"):
        kpca_dask.load(path)


def _as_version_two(path):
    """Rewrite the file as format version 2 wrote it: no crc32c codec, no digests."""
    group = zarr.open_group(str(path), mode="r+")
    for name, array in list(group.arrays()):
        group.create_array(name, data=array[...], overwrite=True)
    attrs = group.attrs.asdict()
    del attrs["checksums"]
    group.attrs.put({**attrs, "format_version": 2})


def test_version_two_file_without_checksums_still_loads(model, tmp_path):
    """A file written before checksums loads and transforms bitwise as the model does."""
    path = tmp_path / "model.zarr"
    model.save(path)
    _as_version_two(path)
    assert not any(has_checksum(a) for a in _arrays(zarr.open_group(str(path), mode="r")))
    X = _data(20, seed=1)
    np.testing.assert_array_equal(kpca_dask.load(path).transform(X), model.transform(X))


def test_version_two_file_is_still_checked_for_consistency(model, tmp_path):
    """Without digests, an array that disagrees with the others is still refused, named."""
    path = tmp_path / "model.zarr"
    model.save(path)
    _as_version_two(path)
    group = zarr.open_group(str(path), mode="r+")
    group.create_array("preimage_coefficients", data=np.zeros((25, 2)), overwrite=True)
    with pytest.raises(ModelFormatError, match=r"'preimage_coefficients' has shape \(25, 2\), "
                                               r"but the other arrays .* need \(25, 3\)"):
        kpca_dask.load(path)


def test_version_three_file_without_checksums_is_refused(model, tmp_path):
    """Removing the digests of a current file does not make it an old, unchecked one."""
    path = tmp_path / "model.zarr"
    model.save(path)
    group = zarr.open_group(str(path), mode="r+")
    group.attrs.put({k: v for k, v in group.attrs.asdict().items() if k != "checksums"})
    with pytest.raises(ModelFormatError, match="its attribute 'checksums' is missing"):
        kpca_dask.load(path)


def test_invalid_parameter_goes_through_the_fit_checks(model, tmp_path):
    """An edited parameter is refused by the same check fit makes, as a ModelFormatError."""
    path = tmp_path / "model.zarr"
    model.save(path)
    _as_version_two(path)
    group = zarr.open_group(str(path), mode="r+")
    attrs = group.attrs.asdict()
    attrs["params"]["n_components"] = "3"
    group.attrs.put(attrs)
    with pytest.raises(ModelFormatError, match="a parameter is invalid: n_components must be "
                                               "None, an int >= 1"):
        kpca_dask.load(path)


def test_merge_refuses_a_model_damaged_in_memory(model):
    """merge checks its inputs as a loaded model is checked, naming the damaged one."""
    other = KernelPCA(n_components=3, gamma=0.3, landmarks=model.landmarks_).fit(_data(seed=3))
    other.statistics_.gram[0, 1] = np.nan
    with pytest.raises(ModelFormatError, match="model 1: the model is damaged: the array "
                                               "'statistics_gram' holds 1 NaN"):
        kpca_dask.merge([model, other])


def test_partial_fit_refuses_edited_eigenvalues(model):
    """partial_fit checks the model it adds to: negated eigenvalues are refused."""
    edited = KernelPCA(n_components=3, gamma=0.3, landmarks=model.landmarks_).fit(_data())
    edited.eigenvalues_[:] = -edited.eigenvalues_  # the arrays, not the attributes, can change
    with pytest.raises(ModelFormatError, match="'eigenvalues' holds negative values"):
        edited.partial_fit(_data(10, seed=4))


def test_resumed_fit_refuses_a_running_total_of_other_rows(tmp_path):
    """A checkpoint whose total counts other rows than its finished segments hold is refused."""
    path = tmp_path / "fit.ckpt"
    X = da.from_array(_data(160), chunks=(10, 3))
    params = dict(n_components=2, n_landmarks=20, landmarks="uniform", random_state=0)
    KernelPCA(**params).fit(X, checkpoint=str(path))
    group = zarr.open_group(str(path), mode="r+")
    state = group[group.attrs["kpca_dask_checkpoint"]["state"]]
    finished = state["finished"][...]
    finished[1] = False  # as if the second segment had not been added
    state.create_array("finished", data=finished, overwrite=True)
    with pytest.raises(ModelFormatError, match=rf"{path}'?: the array 'finished' differs from "
                                               "the array that was written"):
        KernelPCA(**params).fit(X, checkpoint=str(path))
    # Without digests, as format version 3 wrote checkpoints, the rows are counted.
    state.attrs.put({k: v for k, v in state.attrs.asdict().items() if k != "checksums"})
    meta = group.attrs["kpca_dask_checkpoint"]
    group.attrs["kpca_dask_checkpoint"] = {**{k: v for k, v in meta.items() if k != "checksums"},
                                           "format_version": 3}
    with pytest.raises(ModelFormatError, match="the running total counts 160 rows, but its "
                                               "finished segments hold 80"):
        KernelPCA(**params).fit(X, checkpoint=str(path))


def test_command_line_reports_a_damaged_model_in_one_line(model, tmp_path, capsys):
    """`kpca-dask info` on a damaged model exits with status 2 and one error line (the
    command's entry point in this process; test_cli.py runs it as a process of its own)."""
    path = tmp_path / "model.zarr"
    model.save(path)
    shutil.rmtree(path / "landmarks" / "c")
    assert cli.main(["info", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{path}: the array 'landmarks'" in lines[0], lines


def test_an_attribute_added_by_a_user_is_not_damage(model, tmp_path):
    """A note a user adds to the model's group is left out of the digest: the model loads."""
    path = tmp_path / "model.zarr"
    model.save(path)
    zarr.open_group(str(path), mode="r+").attrs["note"] = "production model, 2026-11"
    X = _data(20, seed=1)
    np.testing.assert_array_equal(kpca_dask.load(path).transform(X), model.transform(X))


def test_checkpoint_written_before_checksums_resumes(tmp_path):
    """A checkpoint of format version 3, without crc32c codecs or digests, resumes as before."""
    path = tmp_path / "fit.ckpt"
    X = da.from_array(_data(160), chunks=(10, 3))
    params = dict(n_components=2, n_landmarks=20, landmarks="uniform", random_state=0)
    first = KernelPCA(**params).fit(X, checkpoint=str(path))
    group = zarr.open_group(str(path), mode="r+")
    meta = group.attrs["kpca_dask_checkpoint"]
    for node in (group, group[meta["state"]]):
        for name, array in list(node.arrays()):
            node.create_array(name, data=array[...], overwrite=True)
        node.attrs.put({k: v for k, v in node.attrs.asdict().items() if k != "checksums"})
    group.attrs["kpca_dask_checkpoint"] = {**{k: v for k, v in meta.items() if k != "checksums"},
                                           "format_version": 3}
    assert not any(has_checksum(array) for array in _arrays(group))
    again = KernelPCA(**params).fit(X, checkpoint=str(path))
    np.testing.assert_array_equal(again.eigenvalues_, first.eigenvalues_)
