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


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _run_in(directory: Path, code: str) -> None:
    script = directory / "quick_start.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, script.name], cwd=directory, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def _section(text: str, title: str) -> str:
    return re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M).group(1)


@pytest.mark.slow
def test_quick_start_runs_as_is_in_an_empty_directory(tmp_path):
    """The README's first Python block, copied unchanged, runs in an empty folder
    (it makes its own data) and writes the stores it names."""
    _run_in(tmp_path, _python_blocks(README)[0])
    for store in ("shells.zarr", "embedding.zarr", "model.zarr"):
        assert (tmp_path / store).is_dir(), store


@pytest.mark.slow
def test_table_quick_start_runs_as_is_in_an_empty_directory(tmp_path):
    """The README's second Python block (the table path) runs unchanged in an empty
    folder and writes a Parquet embedding that keeps the table's ids, row for row."""
    import pandas as pd

    _run_in(tmp_path, _python_blocks(README)[1])
    embedding = pd.read_parquet(tmp_path / "embedding.parquet")
    assert embedding.columns.tolist() == ["id", "kernelpca0", "kernelpca1"]
    assert sorted(embedding["id"]) == list(range(50_000))


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
