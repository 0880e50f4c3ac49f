"""A benchmark's fresh interpreters: ``python ARGS`` in a process of its own.

A benchmark measures each way in a new interpreter, so that its time and peak memory are
its own. That is what :func:`run_python` and :func:`start_python` do, with
``sys.executable``.

The test suite's tiny runs (tests/interfaces/test_benchmarks.py) set
``KPCA_DASK_BENCH_PRELOADED=1``: the script then runs in a process forked from one that
has already imported the libraries, and a new interpreter's 3-5 s of imports would be most
of a tiny run's time. There, this module forks, when it is imported (before the script
computes anything, so no thread pool exists yet), a copy of the process that forks the
children in turn: each starts with the libraries imported, as the script did. A child asked
to import another checkout of the package (a ``--before`` comparison) still gets a new
interpreter. Only the tiny runs take this way; the tables come from new interpreters.
"""

from __future__ import annotations

import json
import os
import runpy
import select
import socket
import subprocess
import sys
import traceback
from pathlib import Path

PRELOADED = os.environ.get("KPCA_DASK_BENCH_PRELOADED") == "1"


def _run_as_python(args: list[str]) -> int:
    """``python ARGS`` in this process (``-X`` options skipped, ``-m module`` or a script):
    its exit status."""
    while args and args[0] == "-X":
        if args[1] == "faulthandler":
            import faulthandler

            faulthandler.enable()
        args = args[2:]
    try:
        if args[0] == "-m":
            sys.argv = ["-m", *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(args)
            sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
            runpy.run_path(args[0], run_name="__main__")
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
            return 1
        return exit_.code or 0
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _child(job: dict) -> None:
    """In a forked child: the job's environment and output files, then its ``python ARGS``."""
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    if "dask" in sys.modules:
        import dask

        dask.config.refresh()  # what the child's environment says (DASK_*)
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    sys.stdout, sys.stderr = (open(fd, "w", closefd=False) for fd in (1, 2))
    # This copy was forked while the benchmark's helpers were being imported: the child
    # imports them afresh, as a new interpreter would.
    here = Path(__file__).resolve().parent
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").resolve().parent == here:
            del sys.modules[name]
    code = _run_as_python(job["args"])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _serve(channel: socket.socket) -> None:
    """The forking copy: one job at a time, answering the child's pid, then its status."""
    stream = channel.makefile("rw")
    for line in stream:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                channel.close()
                _child(job)  # ends the process
            finally:
                os._exit(1)  # never back into this loop, whatever failed
        stream.write(json.dumps({"pid": pid}) + "\n")
        stream.flush()
        _, status = os.waitpid(pid, 0)
        stream.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        stream.flush()
    os._exit(0)


def _forking_copy() -> socket.socket | None:
    if not PRELOADED:
        return None
    ours, theirs = socket.socketpair()
    if os.fork() == 0:
        try:
            ours.close()
            _serve(theirs)  # ends the process when the script's end closes the socket
        finally:
            os._exit(1)
    theirs.close()
    return ours


class _Lines:
    """JSON lines read from the forking copy's socket without a buffer that select cannot
    see: ``ready()`` says whether a whole line is there."""

    def __init__(self, channel: socket.socket):
        self.channel, self.pending = channel, b""

    def _receive(self) -> None:
        received = self.channel.recv(4096)
        if not received:
            raise RuntimeError("the process that forks the benchmark's children ended")
        self.pending += received

    def ready(self) -> bool:
        while b"\n" not in self.pending and select.select([self.channel], [], [], 0)[0]:
            self._receive()
        return b"\n" in self.pending

    def read(self) -> dict:
        while b"\n" not in self.pending:
            self._receive()
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)


_CHANNEL = _forking_copy()
_LINES = _Lines(_CHANNEL) if _CHANNEL is not None else None


class Forked:
    """A child of the forking copy, as much of :class:`subprocess.Popen` as the benchmarks
    use: ``pid``, ``poll()``, ``wait()`` and ``returncode``."""

    def __init__(self, args: list[str], env: dict, cwd: str, stdout: str, stderr: str):
        env = {key: value for key, value in env.items() if key != "KPCA_DASK_BENCH_PRELOADED"}
        _CHANNEL.sendall((json.dumps({"args": args, "env": env, "cwd": cwd, "stdout": stdout,
                                      "stderr": stderr}) + "\n").encode())
        self.pid = _LINES.read()["pid"]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and _LINES.ready():
            self.returncode = _LINES.read()["returncode"]
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = _LINES.read()["returncode"]
        return self.returncode


def _forks(args: list[str], env: dict) -> bool:
    """Whether ``python ARGS`` with ``env`` can be forked: a forking copy exists and the
    package the child would import is the one imported here."""
    if _CHANNEL is None:
        return False
    package = sys.modules.get("kpca_dask")
    first = env.get("PYTHONPATH", "").split(os.pathsep)[0]
    return package is None or not first or (
        Path(first).resolve() == Path(package.__file__).resolve().parents[1])


def start_python(args: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
                 stdout, stderr):
    """Start ``python ARGS`` (in ``cwd``) with its output to the open files ``stdout`` and
    ``stderr``: a :class:`subprocess.Popen`, or under the tiny runs a :class:`Forked` child."""
    env = dict(os.environ if env is None else env)
    if _forks(args, env):
        # The files by this process's descriptors, which the child opens again.
        return Forked(args, env, str(cwd or os.getcwd()),
                      f"/proc/{os.getpid()}/fd/{stdout.fileno()}",
                      f"/proc/{os.getpid()}/fd/{stderr.fileno()}")
    return subprocess.Popen([sys.executable, *args], env=env, cwd=cwd, stdout=stdout,
                            stderr=stderr, text=True)


def run_python(args: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
               check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` (in ``cwd``) to its end: its exit status and output, as text
    (``check``: raise :class:`subprocess.CalledProcessError` on a non-zero status)."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = start_python(args, env=env, cwd=cwd, stdout=out, stderr=err)
        child.wait()
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess([sys.executable, *args], child.returncode,
                                           out.read(), err.read())
    if check:
        done.check_returncode()
    return done
