"""The documentation site: ``sphinx-build -W`` in a subprocess, as ``make docs`` runs it.

One build (about half a minute, notebooks rendered from their stored outputs,
never executed) is shared by the tests of this module.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpca_dask.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """Build the site with warnings as errors into a temporary folder."""
    pytest.importorskip("sphinx", reason="the docs extra (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "html")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    return result, out / "html"


def test_site_builds_without_warnings(built_site):
    """Every page, docstring and cross-reference is accepted: no warning at all."""
    result, html = built_site
    assert result.returncode == 0, result.stdout + result.stderr
    assert (html / "index.html").is_file()


def test_api_reference_covers_every_module(built_site):
    """Each public module of the package has a generated API page."""
    _, html = built_site
    package = ROOT / "kpca_dask"
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if any(part.startswith("_") for part in parts):
            continue
        name = ".".join(("kpca_dask",) + parts)
        assert (html / "generated" / f"{name}.html").is_file(), name


def test_cli_reference_lists_every_subcommand(built_site):
    """The command-line page shows the help of each subcommand of the parser."""
    _, html = built_site
    page = (html / "cli.html").read_text()
    parser = build_parser()
    subcommands = next(a for a in parser._actions if hasattr(a, "choices") and a.choices)
    for name, sub in subcommands.choices.items():
        assert f"kpca-dask {name}" in page, name
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert option in page, (name, option)


def test_every_notebook_is_rendered_with_its_outputs(built_site):
    """Each notebook of notebooks/ becomes a page with the images stored in it."""
    _, html = built_site
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for notebook in notebooks:
        page = html / "notebooks" / f"{notebook.stem}.html"
        assert page.is_file(), notebook.name
        if '"image/png"' in notebook.read_text():
            assert "<img" in page.read_text(), notebook.name
