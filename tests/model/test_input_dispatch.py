"""One input dispatch: only kpca_dask/model/inputs.py looks at what kind of input it was given.

Every other module of the model, the estimators and the storage takes the dask
arrays (and the :class:`~kpca_dask.model.inputs.Rows` of outputs' labels) that
inputs.py gives, so a new kind of input is added in one place. Read with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kpca_dask"
SCANNED = ("model", "estimators", "storage")
#: The modules that convert inputs by their kind (several fields: a list or a Dataset, which
#: inputs.py hands to multiple_fields.py whole).
DISPATCH = {"model/inputs.py", "model/multiple_fields.py"}
#: Functions that tell one kind of input from another.
KIND_CALLS = {"is_xarray", "is_frame", "is_dask_frame", "issparse", "is_sparse",
              "held_in_memory", "is_dask_collection"}
#: Classes whose isinstance checks tell kinds of input apart.
KIND_CLASSES = {"PathLike", "Array", "ndarray", "spmatrix", "DataFrame", "DataArray", "Group"}
#: isinstance checks on values that are not inputs: a parameter shown in an error message,
#: fitted statistics, and what is read back from a model's own files.
NOT_INPUTS = {("model/parameters.py", "ndarray"), ("model/checks.py", "ndarray"),
              ("model/checks.py", "Array"), ("model/checkpoint_files.py", "ndarray"),
              ("model/statistics_files.py", "Group")}


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
    """No module of model/, estimators/ or storage/ but inputs.py tells kinds of input apart
    (xarray, frames, sparse, paths, dask or numpy arrays): it takes what inputs.py gives."""
    found = _kind_checks(PACKAGE / relative, relative)
    assert not found, "kinds of input told apart outside model/inputs.py: " + "; ".join(found)


def test_the_dispatch_is_where_kinds_are_told_apart():
    """The rule above reads real checks: the dispatch module itself makes some."""
    assert _kind_checks(PACKAGE / "model/inputs.py", "model/inputs.py")
