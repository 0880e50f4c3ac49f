"""A benchmark's fresh interpreters: ``python ARGS`` in a process of its own.

A benchmark measures each way in a new interpreter, so that its time and peak memory are
its own. That is what :func:`run_python` and :func:`start_python` do, with
``sys.executable``.

The test suite's tiny runs (tests/interfaces/test_benchmarks.py) set
``KPCA_DASK_BENCH_PRELOADED=1``: the script then runs in a process forked from one that
has already imported the libraries, and a new interpreter's 3-5 s of imports would be most
of a tiny run's time. There, this module forks, when it is imported (before the script
computes anything: with a thread running it does not), a copy of the process that forks the
children in turn: each starts with the libraries imported, as the script did, and ends by
``os._exit`` (no atexit handler runs: the scripts close what they open). A child that would
import other code (a ``--before`` checkout, or a ``python -c``) still gets a new
interpreter. Only the tiny runs take this way; the tables come from new interpreters.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path

PRELOADED = os.environ.get("KPCA_DASK_BENCH_PRELOADED") == "1"
_LARGEST_JOB = 1 << 20  # bytes of one job's JSON (its arguments and environment)


def _run_as_python(args: list[str]) -> int:
    """``python ARGS`` in this process (``-X`` options, then ``-m module`` or a script): its
    exit status."""
    while args[0] == "-X":
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


def _child(job: dict, stdout: int, stderr: int) -> None:
    """In a forked child: the job's folder, environment and output (the caller's own open
    files, passed over the socket), then its ``python ARGS``; ends the process."""
    for fd, given in ((1, stdout), (2, stderr)):
        os.dup2(given, fd)
        os.close(given)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    if "dask" in sys.modules:
        import dask

        dask.config.refresh()  # what the child's environment says (DASK_*)
    # This copy was forked while the benchmark's helpers were being imported: the child
    # imports them afresh, as a new interpreter would.
    here = Path(__file__).resolve().parent
    for name, module in list(sys.modules.items()):
        if Path(getattr(module, "__file__", None) or "/").resolve().parent == here:
            del sys.modules[name]
    code = _run_as_python(job["args"])
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed by the script, as an interpreter allows
            pass
    os._exit(code)


def _serve(channel: socket.socket) -> None:
    """The forking copy: one job at a time; answers the child's pid, then its exit status.
    A child stays a zombie (its pid the caller's to read) until the next job or the end."""
    ended = None
    while True:
        message, fds, _, _ = socket.recv_fds(channel, _LARGEST_JOB, 2)
        if ended is not None:
            os.waitpid(ended, 0)
            ended = None
        if not message:  # the script ended: its end of the socket closed
            os._exit(0)
        pid = os.fork()
        if pid == 0:
            try:
                channel.close()
                _child(json.loads(message), *fds)
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(1)  # never back into this loop, whatever failed
        for fd in fds:
            os.close(fd)
        channel.send(json.dumps({"pid": pid}).encode())
        status = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        code = status.si_status if status.si_code == os.CLD_EXITED else -status.si_status
        channel.send(json.dumps({"returncode": code}).encode())
        ended = pid


def _forking_copy() -> socket.socket | None:
    """The socket to the forking copy, forked now; None unless under the tiny runs and
    before any thread started."""
    if not PRELOADED or threading.active_count() > 1:
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        try:
            ours.close()
            _serve(theirs)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(1)
    theirs.close()
    return ours


_CHANNEL = _forking_copy()


def _answer(block: bool) -> dict | None:
    """The forking copy's next answer, or None when ``block`` is False and none came."""
    if not block and not select.select([_CHANNEL], [], [], 0)[0]:
        return None
    message = _CHANNEL.recv(_LARGEST_JOB)
    if not message:
        raise RuntimeError("the process that forks the benchmark's children ended")
    return json.loads(message)


class Forked:
    """A child of the forking copy, as much of :class:`subprocess.Popen` as the benchmarks
    use: ``pid``, ``returncode``, ``poll()``, ``wait()`` and ``kill()``."""

    outstanding = False  # one child at a time: the answers come in order

    def __init__(self, args: list[str], env: dict, cwd: str, stdout: int, stderr: int):
        job = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
        socket.send_fds(_CHANNEL, [job], [stdout, stderr])
        self.pid = _answer(block=True)["pid"]
        self.returncode: int | None = None
        Forked.outstanding = True

    def poll(self) -> int | None:
        """The exit status, or None while the child runs."""
        if self.returncode is None:
            answer = _answer(block=False)
            if answer is not None:
                self.returncode, Forked.outstanding = answer["returncode"], False
        return self.returncode

    def wait(self) -> int:
        """The exit status, once the child has ended."""
        if self.returncode is None:
            self.returncode, Forked.outstanding = _answer(block=True)["returncode"], False
        return self.returncode

    def kill(self) -> None:
        """End the child (SIGKILL)."""
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


#: ``python ARGS`` that a fork can stand for: ``-X`` options, then a module or a script.
_FORKABLE = re.compile(r"^((-X \S+ )*)(-m \S+|[^-]\S*)( |$)")


def _forks(args: list[str], env: dict) -> bool:
    """Whether ``python ARGS`` with ``env`` can be a fork: there is a forking copy with no
    other child outstanding, ARGS run a module or a script, and the package a new
    interpreter would import (PYTHONPATH's first folder) is the one imported here."""
    package = sys.modules.get("kpca_dask")
    first = env.get("PYTHONPATH", "").split(os.pathsep)[0]
    return (_CHANNEL is not None and not Forked.outstanding and package is not None
            and bool(first) and bool(_FORKABLE.match(" ".join(args)))
            and Path(first).resolve() == Path(package.__file__).resolve().parents[1])


def start_python(args: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
                 stdout, stderr):
    """Start ``python ARGS`` (in ``cwd``) with its output to the open files ``stdout`` and
    ``stderr``: a :class:`subprocess.Popen`, or under the tiny runs a :class:`Forked` child."""
    env = {key: value for key, value in (os.environ if env is None else env).items()
           if key != "KPCA_DASK_BENCH_PRELOADED"}  # a child forks no copy of its own
    if _forks(args, env):
        return Forked(args, env, str(cwd or os.getcwd()), stdout.fileno(), stderr.fileno())
    return subprocess.Popen([sys.executable, *args], env=env, cwd=cwd, stdout=stdout,
                            stderr=stderr, text=True)


def run_python(args: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
               check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` (in ``cwd``) to its end: its exit status and output, as text
    (``check``: raise :class:`subprocess.CalledProcessError` on a non-zero status). The
    child is killed if this process is interrupted meanwhile."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = start_python(args, env=env, cwd=cwd, stdout=out, stderr=err)
        try:
            child.wait()
        except BaseException:
            child.kill()
            child.wait()
            raise
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess([sys.executable, *args], child.returncode,
                                           out.read(), err.read())
    if check:
        done.check_returncode()
    return done
