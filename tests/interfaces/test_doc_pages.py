"""Every page under docs/ runs as a reader meets it: its Python blocks, and its shell blocks
that call ``kpca-dask``, in the page's order, in an empty directory, in one Python session
(a subprocess) per page, as a reader pastes them into one interpreter, on the threaded
scheduler, with this checkout's package first on the path.

Each page runs in a fresh process forked from a server that has imported the libraries the
pages use (``_page_server.py``), and its plain ``kpca-dask`` commands run through the
command's entry point in that process.

A page makes the data it reads, or opens a file an installed package ships (eofs' example
fields). A block that cannot run on one machine (a remote scheduler's address, an object
store) carries the comment ``<!-- not run: why -->`` on the line before it; the test skips
those and prints them with their reasons, and they stay few. Shell blocks of other commands
(installing, ``make``, the benchmarks and the test suite) are the project's own commands,
not examples, and are not run here: the benchmarks are tested in test_benchmarks.py.
README.md and docs/getting-started.md are run by test_readme.py.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _pages import environment, run_blocks  # the README's runner; `server`: conftest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: Run by test_readme.py, with the stores they write checked.
RUN_ELSEWHERE = {"getting-started.md"}
PAGES = sorted(path for path in [*DOCS.glob("*.md"), *DOCS.glob("guide/*.md")]
               if path.name not in RUN_ELSEWHERE or path.parent != DOCS)
#: The most blocks of all pages together that may carry ``not run``.
MOST_NOT_RUN = 4

#: A fenced block with its info string (a language, or a directive such as
#: ``{kpca-dask-cli}``), and the ``not run`` comment on the line before it, if any.
_FENCE = re.compile(r"^(?:<!--\s*not run:(?P<why>[^\n]*?)-->\n)?"
                    r"```(?P<language>[^\n`]*)\n(?P<code>.*?)^```", re.S | re.M)


def _blocks(text: str) -> list[tuple[str, str, str | None]]:
    """``(language, code, why not run or None)`` for each fenced block of ``text``."""
    return [(m["language"], m["code"], None if m["why"] is None else m["why"].strip())
            for m in _FENCE.finditer(text)]


def _runs(language: str, code: str) -> bool:
    """A Python block, or a shell block whose commands are ``kpca-dask`` (with the
    environment it reads): the examples a reader types."""
    if language == "python":
        return True
    if language != "bash":
        return False
    lines = [line.split("#")[0].strip() for line in code.splitlines()]
    commands = [line for line in lines if line and not line.startswith("--")]
    return any(line.startswith("kpca-dask") for line in commands)




def _page_id(path: Path) -> str:
    return str(path.relative_to(DOCS))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_runs_as_written_in_an_empty_directory(page, tmp_path, server):
    """The page's examples run unchanged, in order, in one empty folder and one session."""
    blocks = [(language, code) for language, code, why in _blocks(page.read_text())
              if why is None and _runs(language, code)]
    if not blocks:
        return
    work = tmp_path / "work"
    work.mkdir()
    start = time.perf_counter()
    returncode, output = run_blocks(server, blocks, work)
    print(f"{_page_id(page)}: {time.perf_counter() - start:.1f} s")
    print(*(f"  {line}" for line in output.splitlines() if line.startswith("block ")), sep="\n")
    assert returncode == 0, f"{_page_id(page)}:\n{output}"


def test_blocks_not_run_say_why_and_stay_few():
    """Each ``not run`` comment gives its reason and stands before a block that would
    otherwise run; all pages together hold at most MOST_NOT_RUN of them. The list is
    printed (``pytest -s``)."""
    skipped = []
    for page in PAGES:
        text = page.read_text()
        marks = re.findall(r"<!--\s*not run\b", text)
        blocks = [(language, code, why) for language, code, why in _blocks(text)
                  if why is not None]
        assert len(marks) == len(blocks), (
            f"{_page_id(page)}: a `<!-- not run: why -->` comment must stand on the line "
            "just before a fenced block")
        for language, code, why in blocks:
            assert why, f"{_page_id(page)}: a `not run` comment without its reason"
            assert _runs(language, code), (
                f"{_page_id(page)}: `not run` before a block the test would not run anyway")
            skipped.append(f"{_page_id(page)}: {why}")
    print("blocks not run:", *skipped, sep="\n  ")
    assert len(skipped) <= MOST_NOT_RUN, skipped


def test_every_page_is_taken():
    """The pages run here and in test_readme.py are all the Markdown pages under docs/."""
    every = {*DOCS.glob("*.md"), *DOCS.glob("guide/*.md")}
    assert every == set(PAGES) | {DOCS / name for name in RUN_ELSEWHERE}
    assert any(_runs(language, code) for page in PAGES
               for language, code, _ in _blocks(page.read_text()))


@pytest.mark.parametrize("blocks", [
    [("python", "x = 1"), ("python", "raise SystemExit(x)")],
    [("python", "x = 1"), ("python", "assert x == 2")],
    [("bash", "kpca-dask info no-such-model.zarr")],
    [("bash", "kpca-dask fit --no-such-option")],
    [("bash", "true\nfalse\nkpca-dask --help")],
    [("bash", "X=1\ntest $X = 2")],
], ids=["exit", "assert", "command-error", "usage-error", "bash-line", "shell-state"])
def test_the_runner_fails_a_page_that_fails(blocks, tmp_path, server):
    """A failing python block, kpca-dask command (run in-process or not) or bash line fails
    its page: the runner cannot pass a page that would fail for a reader."""
    work = tmp_path / "work"
    work.mkdir()
    returncode, output = run_blocks(server, blocks, work)
    assert returncode != 0, output
    assert "FAILED block" in output, output


def test_the_runner_shares_a_namespace_and_runs_commands(tmp_path, server):
    """Blocks share one namespace, and a plain kpca-dask line writes what it names."""
    work = tmp_path / "work"
    work.mkdir()
    returncode, output = run_blocks(server, [
        ("python", "n = 300"),
        ("bash", "kpca-dask generate blobs --n-samples 300 --out d.zarr --seed 0"),
        ("python", "import zarr; assert zarr.open_array('d.zarr').shape[0] == n"),
    ], work)
    assert returncode == 0, output


def _starts_a_cluster(node: ast.AST) -> bool:
    """Whether running ``node`` calls ``LocalCluster`` (or ``distributed.LocalCluster``); a
    function or class it defines runs nothing."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(isinstance(call, ast.Call) and "LocalCluster" in (
        getattr(call.func, "id", None), getattr(call.func, "attr", None))
        for call in ast.walk(node))


def _is_main_guard(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"')


def _unguarded_clusters(code: str) -> list[str]:
    """The top-level statements of ``code`` that start a ``LocalCluster`` outside an
    ``if __name__ == "__main__":`` block."""
    return [ast.unparse(node).splitlines()[0] for node in ast.parse(code).body
            if _starts_a_cluster(node) and not _is_main_guard(node)]


@pytest.mark.parametrize("code, unguarded", [
    ("from distributed import LocalCluster\ncluster = LocalCluster()", 1),
    ("with LocalCluster() as c:\n    pass", 1),
    ("if __name__ == '__main__':\n    cluster = LocalCluster()", 0),
    ("import distributed\nc = distributed.LocalCluster()", 1),
    ("def main():\n    return LocalCluster()", 0),
    ("x = 1", 0),
])
def test_the_guard_check_finds_a_cluster_started_at_the_top_level(code, unguarded):
    assert len(_unguarded_clusters(code)) == unguarded


def test_a_cluster_starts_under_the_main_guard():
    """Where a page starts a ``LocalCluster``, it does so under ``if __name__ ==
    "__main__":``. Pasted into a script and run with ``python page.py``, the cluster's worker
    processes start by importing the script (Python's default *spawn* start method): a
    cluster started at its top level would start clusters of their own and never return."""
    pages = [*PAGES, DOCS / "getting-started.md", ROOT / "README.md"]
    unguarded = [(page.name, line) for page in pages
                 for language, code, _ in _blocks(page.read_text()) if language == "python"
                 for line in _unguarded_clusters(code)]
    assert not unguarded


@pytest.mark.slow
def test_a_page_that_starts_a_cluster_runs_as_a_script(tmp_path):
    """The guide's cluster page, its Python blocks copied into ``page.py`` and run as a
    reader runs a script: ``python page.py`` in a fresh interpreter, with distributed's
    default start method (spawn), returns."""
    page = DOCS / "guide" / "clusters-and-kubernetes.md"
    script = tmp_path / "page.py"
    script.write_text("\n".join(code for language, code, why in _blocks(page.read_text())
                                if language == "python" and why is None))
    assert "LocalCluster(" in script.read_text()
    env = environment(tmp_path / "work")
    for name in ("DASK_SCHEDULER_ADDRESS", "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"):
        env.pop(name, None)  # as a reader's shell has them: no scheduler, spawned workers
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "data.zarr").is_dir()
