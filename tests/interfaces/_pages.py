"""Running the docs' examples as a reader does: the environment they run in (this checkout's
package first on the path, ``kpca-dask`` and ``python`` the commands of this interpreter, the
threaded scheduler) and a server that forks a fresh interpreter for each page or script
(``_page_server.py``), so that a run costs its own work rather than the imports again."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("_page_server.py")


def environment(directory: Path) -> dict:
    """This checkout's package first on the path, ``kpca-dask`` and ``python`` the commands
    of this interpreter, and the threaded scheduler (a local cluster's start is tested in
    test_cli.py)."""
    bin_dir = directory.parent / f"{directory.name}-bin"
    bin_dir.mkdir()
    for name, arguments in (("kpca-dask", "-m kpca_dask "), ("python", "")):
        command = bin_dir / name
        command.write_text(f'#!/bin/sh\nexec "{sys.executable}" {arguments}"$@"\n')
        command.chmod(command.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "DASK_SCHEDULER_ADDRESS": "threads"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


@contextlib.contextmanager
def page_server(folder: Path):
    """The server, started in ``folder`` (which must not exist yet)."""
    folder.mkdir()
    with subprocess.Popen([sys.executable, str(SERVER)], cwd=folder,
                          env=environment(folder), stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as server:
        yield server
        server.stdin.close()


def run_blocks(server: subprocess.Popen, blocks: list[tuple[str, str]], work: Path, *,
               one_session: bool = True, timeout: float = 300) -> tuple[int, str]:
    """Run ``blocks`` in order in a fresh process forked by ``server``, in ``work``: the
    exit status and the output. With ``one_session`` the python blocks share one namespace,
    as pasted into one interpreter; without, each starts from an empty one, as a script. Past
    ``timeout`` the page's whole session is killed, worker processes of a local cluster
    included."""
    blocks_file = work.parent / f"{work.name}-blocks.json"
    blocks_file.write_text(json.dumps(blocks))
    return _run(server, {"blocks": str(blocks_file), "one_session": one_session,
                         "env": environment(work)}, work, timeout)


def run_script(server: subprocess.Popen, script: Path, argv: list[str], work: Path,
               env: dict, timeout: float = 600) -> tuple[int, str, str]:
    """Run ``python script argv...`` in a fresh process forked by ``server``, in ``work``
    with the environment ``env``: the exit status, its standard output and its errors."""
    work.mkdir(exist_ok=True)
    errors = work.parent / f"{work.name}-errors.txt"
    returncode, output = _run(server, {"script": str(script), "argv": argv, "env": env,
                                       "errors": str(errors)}, work, timeout)
    return returncode, output, errors.read_text()


def _run(server: subprocess.Popen, job: dict, work: Path, timeout: float) -> tuple[int, str]:
    log = work.parent / f"{work.name}-output.txt"
    server.stdin.write(json.dumps({**job, "cwd": str(work), "log": str(log)}) + "\n")
    server.stdin.flush()
    pid = json.loads(server.stdout.readline())["pid"]
    ready, _, _ = select.select([server.stdout], [], [], timeout)
    if not ready:
        os.killpg(pid, signal.SIGKILL)
    reply = server.stdout.readline()
    output = log.read_text()
    if not ready:
        return -1, f"{output}\n(killed after {timeout} s)"
    return json.loads(reply)["returncode"], output
