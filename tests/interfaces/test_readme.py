"""The docs as a newcomer meets them: the README's quick start and command-line blocks and
docs/getting-started.md's examples run as written, in order, in an empty directory, and the
README's lists are complete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _pages import run_blocks  # a fresh process per page, imports done; `server`: conftest

from kpca_dask.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
GETTING_STARTED = (ROOT / "docs" / "getting-started.md").read_text()
#: The sections whose blocks a newcomer runs (installing and ``make`` are left out).
README_RUNS = ("Quick start", "Command line")
GETTING_STARTED_RUNS = ("A first fit in Python", "The same from a shell")


def _section(text: str, title: str) -> str:
    return re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M).group(1)


def _blocks(text: str, titles: tuple[str, ...]) -> list[tuple[str, str]]:
    """The python and bash blocks of the sections ``titles``, in the document's order."""
    return [(language, code) for title in titles
            for language, code in re.findall(r"^```(python|bash)\n(.*?)^```",
                                             _section(text, title), re.S | re.M)]


def _run_blocks(server, directory: Path, blocks: list[tuple[str, str]]) -> None:
    """Each block in turn, in ``directory``: a python block as a script (a namespace of its
    own), a bash block as ``bash -e`` runs it."""
    returncode, output = run_blocks(server, blocks, directory, one_session=False,
                                    timeout=600)
    assert returncode == 0, output


def test_readme_blocks_run_as_written_in_an_empty_directory(tmp_path, server):
    """The README's quick start (points, then a table) and command-line blocks run unchanged,
    in order, in one empty folder: each makes its own data, none writes a name another
    wrote, and each writes the stores it names (the table's embedding keeps its ids)."""
    import pandas as pd

    work = tmp_path / "work"
    work.mkdir()
    _run_blocks(server, work, _blocks(README, README_RUNS))
    for store in ("shells.zarr", "embedding.zarr", "model.zarr", "table.parquet",
                  "embedding.parquet", "data.zarr", "kpca.zarr", "components.zarr"):
        assert (work / store).exists(), store
    embedding = pd.read_parquet(work / "embedding.parquet")
    assert embedding.columns.tolist() == ["id", "kernelpca0", "kernelpca1"]
    assert sorted(embedding["id"]) == list(range(50_000))


@pytest.mark.slow
def test_getting_started_runs_as_written_in_an_empty_directory(tmp_path, server):
    """docs/getting-started.md's examples, Python and shell, run unchanged, in order, in one
    empty folder, each making the data it reads."""
    work = tmp_path / "work"
    work.mkdir()
    _run_blocks(server, work, _blocks(GETTING_STARTED, GETTING_STARTED_RUNS))
    for store in ("points.zarr", "embedding.zarr", "model.zarr", "data.zarr", "kpca.zarr",
                  "components.zarr"):
        assert (work / store).exists(), store


@pytest.mark.parametrize("text, titles", [(README, README_RUNS),
                                          (GETTING_STARTED, GETTING_STARTED_RUNS)],
                         ids=["README", "getting-started"])
def test_the_runs_take_every_example(text, titles):
    """The sections run above hold two or more blocks, python and bash both: a renamed
    section cannot leave its examples unrun."""
    languages = [language for language, _ in _blocks(text, titles)]
    assert len(languages) >= 2 and {"python", "bash"} <= set(languages)


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
