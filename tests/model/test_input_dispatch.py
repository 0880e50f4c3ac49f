"""One input dispatch: only kpca_dask/model/inputs.py looks at what kind of input it was given.

Every other module of the model, the estimators and the storage takes the dask
arrays (and the :class:`~kpca_dask.model.inputs.Rows` of outputs' labels) that
inputs.py gives, so a new kind of input is added in one place. Below it, io/
reads data through one dispatch of its own, :func:`kpca_dask.io.open_array`
(io/zarr_io.py), and the reader of each kind that needs one (frames, sparse
matrices and files); the other io modules take what those give. Read with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kpca_dask"
SCANNED = ("model", "eof", "exact", "checkpoints", "estimators", "storage", "io")
#: The modules that convert inputs by their kind: the estimators' dispatch (several fields,
#: a list or a Dataset, handed by inputs.py to io/preprocessing/field_sets.py whole, and one
#: sample of a field given without its sample dimension, io/preprocessing/field_inputs.py),
#: the readers' dispatch (open_array), and the readers of frames and of sparse matrices and
#: files, each of which tells its own kind apart.
DISPATCH = {"model/inputs.py", "io/preprocessing/field_sets.py",
            "io/preprocessing/field_inputs.py", "io/zarr_io.py", "io/frames.py",
            "io/sparse_files.py",
            # a field or rows, embedded along the samples before KernelPCA's dispatch sees
            # them (a field's lagged copies keep its labels), and the rotated scores of such
            # embedded samples given back in the input's kind: to be folded into inputs.py
            "estimators/extended.py", "eof/extended_rotation.py"}
#: Functions that tell one kind of input from another.
KIND_CALLS = {"is_xarray", "is_frame", "is_dask_frame", "issparse", "is_sparse",
              "is_sparse_source", "held_in_memory", "is_dask_collection"}
#: Classes whose isinstance checks tell kinds of input apart.
KIND_CLASSES = {"PathLike", "Array", "ndarray", "spmatrix", "DataFrame", "DataArray", "Group",
                "Dataset"}
#: Attributes whose presence, asked by hasattr or getattr with a default, tells kinds of
#: input apart by duck typing: paths, frames, labelled arrays, dask collections, sparse data.
KIND_ATTRIBUTES = {"__fspath__", "columns", "dtypes", "npartitions", "dims", "coords",
                   "chunks", "__dask_graph__", "compute", "toarray", "tocsr", "nnz",
                   "__array__", "to_numpy", "store"}
#: isinstance checks on values that are not inputs: a parameter shown in an error message,
#: fitted statistics, what is read back from a model's own files, and outputs being written
#: (Zarr, Parquet, fields put back); a field's weights (a parameter), the latitude they are
#: computed from, and its values, which
#: open_array has made a DataArray already, in memory or dask; an HDF5 file's own nodes.
NOT_INPUTS = {("model/parameters.py", "ndarray"), ("model/checks.py", "ndarray"),
              ("checkpoints/file_checks.py", "ndarray"), ("checkpoints/file_checks.py", "Array"),
              ("checkpoints/checkpoint_files.py", "ndarray"),
              ("checkpoints/statistics_files.py", "Group"), ("io/zarr_out.py", "Array"),
              ("io/zarr_out.py", "DataArray"), ("io/parquet_out.py", "DataFrame"),
              ("io/preprocessing/fields.py", "Array"), ("io/preprocessing/fields.py", "DataArray"),
              ("io/preprocessing/latitude.py", "DataArray"),
              ("io/array_files.py", "Dataset"),
              # fitted state and outputs of the Hilbert and extended EOF: the training
              # scores (lazy or held) computed for a file or given in the fit's kind, and the
              # space-time maps (a DataArray for a field) written to a file, with their
              # labels (as a rotated MCA's components)
              ("eof/hilbert_model.py", "Array"), ("storage/hilbert_files.py", "Array"),
              ("storage/extended_files.py", "DataArray"), ("storage/layout_files.py", "DataArray"),
              # transform's output scaled or rotated in its own kind (a DataArray, a frame)
              ("eof/scalings.py", "columns"), ("eof/scalings.py", "dims"),
              ("eof/rotation.py", "dims"),
              ("eof/rotation.py", "columns"),
              # a saved exact model's arrays, digested panel by panel when lazy
              ("storage/exact_files.py", "Array")}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _kind_checks(path: Path, relative: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        called = _name(node.func)
        if called in KIND_CALLS:
            found.append(f"{relative}:{node.lineno} calls {called}")
        elif (called in ("hasattr", "getattr") and len(node.args) == 2 + (called == "getattr")
              and isinstance(node.args[1], ast.Constant)
              and node.args[1].value in KIND_ATTRIBUTES):
            if (relative, node.args[1].value) not in NOT_INPUTS:
                found.append(f"{relative}:{node.lineno} {called}(..., {node.args[1].value!r})")
        elif called == "isinstance" and len(node.args) == 2:
            classes = node.args[1]
            names = {_name(c) for c in (classes.elts if isinstance(classes, ast.Tuple)
                                        else [classes])}
            for cls in sorted(names & KIND_CLASSES):
                if (relative, cls) not in NOT_INPUTS:
                    found.append(f"{relative}:{node.lineno} isinstance(..., {cls})")
    return found


MODULES = sorted(str(p.relative_to(PACKAGE)) for part in SCANNED
                 for p in (PACKAGE / part).rglob("*.py"))


@pytest.mark.parametrize("relative", [m for m in MODULES if m not in DISPATCH])
def test_only_the_dispatch_looks_at_kinds_of_input(relative):
    """No module of model/, eof/, exact/, checkpoints/, estimators/, storage/ or io/ but the
    dispatches tells kinds of input apart (xarray, frames, sparse, paths, Zarr groups, dask or
    numpy arrays), by isinstance or by duck typing (hasattr): each takes what model/inputs.py,
    or below it io.open_array, gives."""
    found = _kind_checks(PACKAGE / relative, relative)
    assert not found, "kinds of input told apart outside the dispatches: " + "; ".join(found)


@pytest.mark.parametrize("relative", sorted(DISPATCH))
def test_the_dispatch_is_where_kinds_are_told_apart(relative):
    """The rule above reads real checks: each dispatch module makes some."""
    assert _kind_checks(PACKAGE / relative, relative)
