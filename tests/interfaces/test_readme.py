"""The README as a newcomer meets it: its quick start runs as is, its lists are complete."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kpca_dask.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _first_python_block(text: str) -> str:
    return re.search(r"^```python\n(.*?)^```", text, re.S | re.M).group(1)


def _section(text: str, title: str) -> str:
    return re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M).group(1)


@pytest.mark.slow
def test_quick_start_runs_as_is_in_an_empty_directory(tmp_path):
    """The README's first Python block, copied unchanged, runs in an empty folder
    (it makes its own data) and writes the stores it names."""
    script = tmp_path / "quick_start.py"
    script.write_text(_first_python_block(README))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    for store in ("shells.zarr", "embedding.zarr", "model.zarr"):
        assert (tmp_path / store).is_dir(), store


def test_command_line_section_names_every_subcommand():
    """Each subcommand of `kpca-dask` has a row in the README's command-line table."""
    section = _section(README, "Command line")
    parser = build_parser()
    subcommands = next(a for a in parser._actions if hasattr(a, "choices") and a.choices)
    missing = [name for name in subcommands.choices if f"| `{name}` |" not in section]
    assert not missing, f"not in the README's command-line table: {missing}"


def test_readme_stays_short():
    """The README stays a newcomer's page: at most 250 lines."""
    assert len(README.splitlines()) <= 250
