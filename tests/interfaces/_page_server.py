"""Runs docs pages as a reader does, each in a fresh process, without paying for the imports
each time: started once, this server imports the libraries every page uses, then forks one
child per page. The child is a new interpreter's state as far as a page can tell (its own
namespace, working folder, environment and output), with numpy, dask, xarray, scikit-learn
and kpca-dask already imported, as a reader's notebook would have them after its first cell.

A shell block runs line by line, as ``bash -e`` would: a plain ``kpca-dask ...`` line (no
pipe, redirection, variable or glob) by the command's own entry point,
``kpca_dask.cli.main``, in the child (the arguments and the code are the console script's,
without its 3 s of imports), any other line by bash. A block that changes the shell's state
(``cd``, ``export``, a variable) runs in one bash, as written. The command started as a
process of its own is tested end to end in test_cli.py.

The benchmarks' tiny runs use it too: a job with ``"script"`` and ``"argv"`` runs that script
as ``python script argv...`` would.

Protocol, one JSON object per line (tests/interfaces/_pages.py): the test writes ``{"blocks",
"cwd", "env", "log", "one_session"}`` or ``{"script", "argv", "cwd", "env", "log", "errors"}``;
the server answers ``{"pid"}`` at once, then ``{"returncode"}`` when the page is done. Python
and bash are run in order and the first failure stops the page, python blocks share one
namespace (pasted into one interpreter) or each has its own (run as scripts).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import subprocess
import sys
import time
import traceback

# What the pages import; nothing here computes, so no thread pool exists yet when forking.
import dask
import dask.array  # noqa: F401
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401
import numpy  # noqa: E402,F401
import pandas  # noqa: E402,F401
import sklearn.decomposition  # noqa: E402,F401
import xarray  # noqa: E402,F401
import zarr  # noqa: E402,F401

import kpca_dask.cli.commands  # noqa: E402,F401
import kpca_dask.estimators.exact  # noqa: E402,F401
import kpca_dask.estimators.kernel_pca  # noqa: E402,F401
from kpca_dask.cli import main as command_main  # noqa: E402

#: A shell line that is one plain command: no operator, redirection, variable, glob or quote
#: that bash would read differently from shlex.
_PLAIN = re.compile(r"^kpca-dask(\s+[\w.,:=/@%+-]+)*$")


#: A line that changes the shell's own state, which later lines would read: such a block
#: runs in one bash, as written.
_SHELL_STATE = re.compile(r"^(cd|export|source|\.|set|unset|alias|for|while|if|case|function)\b"
                          r"|^\w+=|\$")


def _commands(code: str) -> list[str] | None:
    """The block's commands, one per line (a backslash continues a line, a quoted string may
    span lines), or None when a line changes the shell's state."""
    commands, pending = [], ""
    for line in re.sub(r"\\\n", " ", code).splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        if words:
            commands.append(pending.strip())
        pending = ""
    if pending or any(_SHELL_STATE.search(command) for command in commands):
        return None
    return commands


def _run_command(command: str) -> int:
    """A plain ``kpca-dask`` line by the command's entry point, any other line by bash."""
    plain = " ".join(command.split("#")[0].split())
    if not _PLAIN.match(plain):
        return subprocess.run(["bash", "-e", "-c", command]).returncode
    sys.stdout.flush()
    try:
        return command_main(shlex.split(plain)[1:]) or 0
    except SystemExit as exit_:  # argparse's own exits
        return exit_.code or 0


def _run_page(blocks: list[tuple[str, str]], one_session: bool) -> int:
    namespace = {"__name__": "__main__"}
    for number, (language, code) in enumerate(blocks):
        start = time.perf_counter()
        if language == "python":
            if not one_session:  # each block a script of its own
                namespace = {"__name__": "__main__"}
            try:
                exec(compile(code, f"<block {number}>", "exec"), namespace)
            except BaseException:
                traceback.print_exc()
                print(f"FAILED block {number} (python):\n{code}", flush=True)
                return 1
        else:
            commands = _commands(code)
            if commands is None:
                failed = subprocess.run(["bash", "-e", "-c", code]).returncode != 0
            else:
                failed = any(_run_command(command) != 0 for command in commands)
            if failed:
                print(f"FAILED block {number} (bash):\n{code}", flush=True)
                return 1
        print(f"block {number} ({language}): {time.perf_counter() - start:.1f} s", flush=True)
    return 0


def _run_script(script: str, argv: list[str]) -> int:
    """A script run as ``python script argv...``: its exit status."""
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            return 1
        return code or 0
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _child(job: dict) -> None:
    """In the forked child: the page's folder, environment and output, then its blocks."""
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    dask.config.refresh()  # what the page's environment says (DASK_*), not the server's
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(os.open(job["errors"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            if "errors" in job else log, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the server's requests are not the page's
    os.setsid()  # the test kills the page's whole session (local clusters included)
    code = 1
    try:
        if "script" in job:
            code = _run_script(job["script"], job["argv"])
        else:
            code = _run_page([tuple(block) for block in json.load(open(job["blocks"]))],
                             job.get("one_session", True))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(job)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
