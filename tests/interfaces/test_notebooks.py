"""The example notebooks run top to bottom, at a small size, without a cell error.

Each notebook is copied to a temporary folder and executed there, with
``KPCA_NOTEBOOK_SMALL=1``, by a kernel of this very interpreter (so of the
environment the tests run in). The notebooks of one test process share one
kernel: before each, the names the previous one defined are deleted and the
working folder is the notebook's, as a fresh kernel's would be; what stays is what a
kernel caches whatever its cells say (imported modules, the forkserver of
distributed's worker processes), a few seconds a notebook. A notebook that sets
environment variables for its workers runs in a kernel of its own. The committed
notebooks are never modified.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[2]
NOTEBOOK_FOLDER = REPOSITORY / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_FOLDER.glob("*.ipynb"))
DATA = Path(os.environ.get("KPCA_DASK_DATA", REPOSITORY.parent / "shared" / "data"))
MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
CELL_TIMEOUT_S = 600


def _kernel_manager(folder: Path) -> KernelManager:
    # A kernel spec named "python3" that launches this interpreter: the notebooks then
    # run in the test environment whatever kernels are installed for the user.
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (kpca-dask tests)",
        "language": "python",
    }))
    specs = KernelSpecManager(kernel_dirs=[str(folder / "kernels")])
    return KernelManager(kernel_name="python3", kernel_spec_manager=specs)


def _needs_mnist(path: Path) -> bool:
    return "mnist" in path.name or "denoising" in path.name


def _needs_s3_server(path: Path) -> bool:
    # The tables notebook starts moto's S3-compatible server, found beside this interpreter.
    return "object_storage" in path.name


def test_every_notebook_is_found():
    """The seven example notebooks are where the tests look for them."""
    names = [path.name for path in NOTEBOOKS]
    assert len(names) == 7, names
    assert any("two_shells" in n for n in names) and any("circles" in n for n in names)
    assert any("mnist" in n for n in names) and any("denoising" in n for n in names)
    assert any("tables_on_object_storage" in n for n in names)
    assert any("kernel_eof" in n for n in names)
    assert any("beyond_linear_eof" in n for n in names)


def _started_kernel(folder: Path) -> KernelManager:
    """A kernel started in ``folder`` with the notebooks' environment (small sizes, the
    data folder)."""
    manager = _kernel_manager(folder / "jupyter")
    manager.start_kernel(cwd=str(folder), env={**os.environ, "KPCA_NOTEBOOK_SMALL": "1",
                                               "KPCA_DASK_DATA": str(DATA)})
    return manager


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One kernel for the notebooks of this test process, shut down after the last."""
    manager = _started_kernel(tmp_path_factory.mktemp("kernel"))
    try:
        yield manager
    finally:
        manager.shutdown_kernel(now=True)


#: The names a fresh kernel's namespace holds, kept when the namespace is emptied.
KERNEL_NAMES = ("In", "Out", "get_ipython", "exit", "quit", "open")


def _fresh_start(folder: Path) -> nbformat.NotebookNode:
    """A first cell that gives the next notebook what a fresh kernel would: the notebook's
    folder as the working folder and no name the previous notebook defined. (Not IPython's
    ``%reset``, which also resets ``__main__``'s own attributes, after which distributed's
    worker processes no longer start.)"""
    return nbformat.v4.new_code_cell(
        f"__import__('os').chdir({str(folder)!r})\n"
        "for _name in [_n for _n in globals() if not _n.startswith('_')\n"
        f"              and _n not in {KERNEL_NAMES!r}]:\n"
        "    del globals()[_name]")


def _sets_the_environment(notebook: nbformat.NotebookNode) -> bool:
    """Whether a cell writes ``os.environ``. Worker processes forked from a kernel's
    forkserver have the environment of the moment it started, the first cluster's: such a
    notebook (the S3 credentials of the tables notebook) runs in a kernel of its own, where
    its cluster is the first."""
    return any(re.search(r"os\.(putenv\(|environ(\.(update|setdefault)\(|\[[^]]+\]\s*=))",
                         cell.source)
               for cell in notebook.cells if cell.cell_type == "code")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs_without_error(path, tmp_path, kernel):
    """A notebook executes every cell at the small size; any cell error fails the test."""
    if _needs_mnist(path) and not all((DATA / "mnist" / f).is_file() for f in MNIST_FILES):
        pytest.skip(f"MNIST files not found in {DATA / 'mnist'}; set KPCA_DASK_DATA.")
    if _needs_s3_server(path) and not (Path(sys.executable).parent / "moto_server").exists():
        pytest.skip("moto_server is not installed beside this interpreter "
                    "(pip install 'kpca-dask[deploy]'); the notebook starts it as its S3 server.")
    copy = tmp_path / path.name
    shutil.copyfile(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    notebook.cells.insert(0, _fresh_start(tmp_path))
    own = _started_kernel(tmp_path) if _sets_the_environment(notebook) else None
    try:
        client = nbclient.NotebookClient(notebook, km=kernel if own is None else own,
                                         timeout=CELL_TIMEOUT_S)
        client.execute()  # raises CellExecutionError, naming the cell, on any error
    finally:
        if own is not None:
            own.shutdown_kernel(now=True)

    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.output_type == "error"]
    assert not errors
    images = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
    assert images, "the notebook drew no figure"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_committed_notebook_holds_executed_outputs(path):
    """The committed copy was executed top to bottom: every code cell ran, in order,
    without error."""
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), counts
    outputs = [output for cell in code for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.output_type == "error"]
    assert any("image/png" in output.get("data", {}) for output in outputs)
    assert path.stat().st_size < 2_000_000
