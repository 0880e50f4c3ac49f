"""The package's import graph: no circle, and imports only point down the layers.

The layers are those of docs/design.md §4 (face > model > engine > blocks, io), read
from the source with ``ast`` so that imports inside functions count too. Modules
stay short: at most 400 lines of code each, docstrings (of the module, classes
and functions), comment-only and blank lines not counted, and at most 900 lines
in all; a function's body at most 60 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kpca_dask"

#: Rank of each layer: a module may import only modules of the same or a lower rank.
LAYERS = {
    "errors": 0, "_json": 0, "_parallel": 0, "_memory": 0, "_version": 0, "validation": 0,
    "_compat": 0,
    "blocks": 1, "io": 1,
    "engine": 2,
    "landmarks": 3,
    "checkpoints": 4,
    "model": 5,
    "eof": 6, "exact": 6, "storage": 6, "coupled": 6,
    "estimators": 7,
    "": 8,  # the package itself: its public names
    "cli": 9, "demo": 9, "dask_client": 9, "datasets": 9, "diagnostics": 9, "__main__": 9,
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports, as names relative to the package."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if name == "":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            found.add(target)
            # ``from . import x`` may name a submodule
            for alias in node.names:
                candidate = ".".join(filter(None, [target, alias.name]))
                if _exists(candidate):
                    found.add(candidate)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""])
            for module in modules:
                if module == "kpca_dask" or module.startswith("kpca_dask."):
                    found.add(module[len("kpca_dask."):] if "." in module else "")
    found.discard(name)
    return {f for f in found if _exists(f)}


def _exists(name: str) -> bool:
    base = PACKAGE.joinpath(*name.split(".")) if name else PACKAGE
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _rank(name: str) -> int:
    top = name.split(".")[0]
    return LAYERS[top]


GRAPH = {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_every_module_has_a_layer():
    """A new top-level module or subpackage must be placed in a layer here."""
    assert {name.split(".")[0] for name in GRAPH} <= set(LAYERS)


#: The most modules and subpackages the engine keeps at its top level: its concerns (the
#: pass, the small problem, tiles, the exact and Hilbert ways, pre-images) are subpackages a
#: newcomer can name (docs/architecture.md).
ENGINE_TOP_LEVEL = 12


def test_engine_is_laid_out_by_concern():
    """engine/ holds at most a dozen modules and subpackages at its top level, and every
    subpackage has a docstring that says its concern."""
    engine = PACKAGE / "engine"
    entries = [p for p in engine.iterdir() if p.name != "__init__.py" and (
        p.suffix == ".py" or (p / "__init__.py").is_file())]
    assert len(entries) <= ENGINE_TOP_LEVEL, sorted(p.name for p in entries)
    for sub in engine.iterdir():
        if sub.is_dir() and sub.name != "__pycache__":
            init = sub / "__init__.py"
            assert init.is_file(), f"engine/{sub.name} is not a package"
            assert ast.get_docstring(ast.parse(init.read_text())), f"engine/{sub.name}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    """No module imports one of a higher layer (the CLI and demo sit on top)."""
    upward = sorted(t for t in GRAPH[module] if _rank(t) > _rank(module))
    assert not upward, f"{module or 'kpca_dask'} imports the higher layer(s) {upward}"


def test_no_import_circle():
    """The module import graph is acyclic (lazy imports inside functions included)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for target in GRAPH.get(node, ()):
            if state.get(target) == 1:
                cycle = stack[stack.index(target):] + [target]
                raise AssertionError("import circle: " + " -> ".join(c or "kpca_dask"
                                                                       for c in cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)


def test_no_circle_between_packages():
    """Drawn package by package (model, checkpoints, eof, exact, ...), the graph is acyclic
    too: packages of one layer import each other in one direction only."""
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        top = module.split(".")[0]
        packages.setdefault(top, set()).update(t.split(".")[0] for t in targets)
        packages[top].discard(top)
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for target in sorted(packages.get(node, ())):
            circle = path[path.index(target):] + [target] if state.get(target) == 1 else []
            assert not circle, "circle of packages: " + " -> ".join(c or "kpca_dask"
                                                                    for c in circle)
            if target not in state:
                visit(target, path + [target])
        state[node] = 2

    for top in sorted(packages):
        if top not in state:
            visit(top, [top])


# -- size and privacy: modules along their seams ------------------------------------

#: The most lines of code a module may have (docstrings, comment-only and blank lines not
#: counted), the most lines in all, and a function's body (its docstring not counted).
MODULE_CODE_LINES, MODULE_LINES, FUNCTION_LINES = 400, 900, 60
#: Functions allowed a longer body: the command line's parser is one long declaration.
LONG_FUNCTIONS = {"cli.parser.build_parser"}


def _functions(path: Path):
    """(qualified name, body lines without the docstring) of every function in ``path``."""
    module = _module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            has_doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                       and isinstance(first.value.value, str))
            start = first.end_lineno + 1 if has_doc and len(node.body) > 1 else node.lineno
            yield f"{module}.{node.name}", node.end_lineno - start + 1


def _code_lines(source: str) -> int:
    """Lines of ``source`` that hold code: not blank, not only a comment, not in a docstring
    (of the module, a class or a function)."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), start=1)
               if number not in docstrings and line.strip()
               and not line.strip().startswith("#"))


def test_code_lines_leave_out_docstrings_and_comments():
    """Docstrings, comment-only and blank lines are not counted as code; the rest is."""
    source = '''"""Module.

Docstring."""

# a comment
import os  # a comment after code


class A:
    """Class docstring."""

    def f(self):
        """Function
        docstring."""
        return os.sep
'''
    assert _code_lines(source) == 4


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: _module_name(p))
def test_module_and_function_sizes(path):
    """No module over 400 lines of code (docstrings, comment-only and blank lines not counted)
    nor over 900 lines in all, no function body over 60 (the CLI parser excepted)."""
    source = path.read_text()
    code, lines = _code_lines(source), len(source.splitlines())
    assert code <= MODULE_CODE_LINES, (
        f"{_module_name(path)} has {code} lines of code (docstrings not counted); split it")
    assert lines <= MODULE_LINES, f"{_module_name(path)} has {lines} lines in all; split it"
    long = [(name, n) for name, n in _functions(path)
            if n > FUNCTION_LINES and name not in LONG_FUNCTIONS]
    assert not long, f"functions over {FUNCTION_LINES} lines: {long}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: _module_name(p))
def test_no_private_name_crosses_modules(path):
    """A module imports only public names of another of the package (``_name`` stays home)."""
    private = sorted(
        alias.name for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").startswith("kpca_dask"))
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__"))
    assert not private, f"{_module_name(path)} imports private names {private}"
