"""The documentation site: ``sphinx-build -W`` in a subprocess, as ``make docs`` runs it but
for the builder.

One build (notebooks rendered from their stored outputs, never executed) is shared by the
tests of this module. It reads every page and docstring and resolves every
cross-reference, as the HTML build does, with Sphinx's ``dummy`` builder, which writes no
page: the writing is the same theme's for every page, and takes 40 % of the build (29 of
73 s on 2 cores); ``make docs`` writes the HTML, and is what finds a problem of the theme,
its templates or settings, or of the HTML writer. What a page holds is read from the doctrees
the build leaves.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from kpca_dask.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """Read and resolve the site with warnings as errors: the result and its doctrees."""
    pytest.importorskip("sphinx", reason="the docs extra (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("docs")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "dummy",
         "-d", str(out / "doctrees"), str(DOCS), str(out / "dummy")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    return result, out / "doctrees"


def _page(doctrees: Path, name: str):
    """The doctree of the page ``name`` (its path under docs/, without the suffix)."""
    return pickle.loads((doctrees / f"{name}.doctree").read_bytes())


def test_every_page_is_read_and_resolved_without_warnings(built_site):
    """Every page, docstring and cross-reference is accepted: no warning at all."""
    result, doctrees = built_site
    assert result.returncode == 0, result.stdout + result.stderr
    assert (doctrees / "index.doctree").is_file()


def test_api_reference_covers_every_module(built_site):
    """Each public module of the package has a generated API page."""
    _, doctrees = built_site
    package = ROOT / "kpca_dask"
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if any(part.startswith("_") for part in parts):
            continue
        name = ".".join(("kpca_dask",) + parts)
        assert (doctrees / "generated" / f"{name}.doctree").is_file(), name


def test_cli_reference_lists_every_subcommand(built_site):
    """The command-line page shows the help of each subcommand of the parser."""
    _, doctrees = built_site
    page = _page(doctrees, "cli").astext()
    parser = build_parser()
    subcommands = next(a for a in parser._actions if hasattr(a, "choices") and a.choices)
    for name, sub in subcommands.choices.items():
        assert f"kpca-dask {name}" in page, name
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert option in page, (name, option)


def test_every_notebook_becomes_a_page_with_its_images(built_site):
    """Each notebook of notebooks/ becomes a page with every image stored in it, written
    where the page finds it."""
    from docutils import nodes

    _, doctrees = built_site
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for notebook in notebooks:
        assert (doctrees / "notebooks" / f"{notebook.stem}.doctree").is_file(), notebook.name
        images = [image for image in
                  _page(doctrees, f"notebooks/{notebook.stem}").findall(nodes.image)
                  if image["uri"].endswith(".png")]
        stored = sum("image/png" in output.get("data", {})
                     for cell in json.loads(notebook.read_text())["cells"]
                     for output in cell.get("outputs", []))
        assert len(images) == stored, notebook.name
        for image in images:  # the image's path is relative to the docs' folder
            assert (DOCS / image["uri"]).resolve().is_file(), (notebook.name, image["uri"])
