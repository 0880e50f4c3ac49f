"""distributed's warnings, from every process of every cluster a test starts, as test failures.

distributed logs what it finds wrong with a graph or a worker's memory (a key
submitted twice with different recipes, a large graph, unmanaged memory, lost or
scattered data, a paused or restarted worker) as WARNING records, in whichever
process noticed: the client, the scheduler, a nanny or a worker. Those records
are bugs in our graphs or our memory model (docs/design.md §14), so the suite
treats them as failures.

This file is both halves of that:

- a distributed *preload* (``dask_setup``): the test session names it in
  distributed's ``preload`` settings for clients, schedulers, nannies and
  workers through environment variables, so every such object, in this process
  or in a worker or command-line subprocess, loads it and has its process write
  distributed's WARNING records (and worse) to a file of its own in the folder
  ``$KPCA_DASK_TEST_LOGS``;
- :class:`LogFolder`, which the test fixture reads: what was written to that
  folder while one test ran.
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

#: Environment variable naming the folder of the per-process record files.
FOLDER_VARIABLE = "KPCA_DASK_TEST_LOGS"

#: The loggers whose records count: distributed's, and the asyncio/tornado loops it runs on.
LOGGERS = ("distributed",)

_MARK = "_kpca_dask_test_handler"

#: The preload that distributed's settings name: the text of a module that runs this file.
#: As a file path, distributed would copy this file into each worker's folder and log an
#: error when an older copy of it is there.
PRELOAD = (f"import runpy; dask_setup = runpy.run_path({str(Path(__file__).resolve())!r})"
           "['dask_setup']")

#: The distributed objects that load it (their sections of distributed's configuration).
PRELOADED = ("client", "scheduler", "nanny", "worker")


class _RecordWriter(logging.Handler):
    """Appends each record as one JSON line to this process's file (flushed at once)."""

    def __init__(self, folder: str):
        super().__init__(level=logging.WARNING)
        self.path = os.path.join(folder, f"{os.getpid()}.jsonl")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = json.dumps({"pid": os.getpid(), "logger": record.name,
                               "level": record.levelname, "message": record.getMessage()})
            with open(self.path, "a", encoding="utf-8") as file:
                file.write(line + "\n")
        except Exception:  # noqa: BLE001 - a log handler must never raise
            self.handleError(record)


def install() -> None:
    """Write this process's distributed records to the folder, once per process.

    distributed's logging settings give some of its loggers (``distributed.client``)
    handlers of their own and stop them from propagating: each such logger gets the
    writer too, as does the top one that the others propagate to.
    """
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        return
    handler = _RecordWriter(folder)
    setattr(handler, _MARK, True)
    for name in _loggers():
        logger = logging.getLogger(name)
        if not any(getattr(existing, _MARK, False) for existing in logger.handlers):
            logger.addHandler(handler)
    if not getattr(warnings.showwarning, _MARK, False):
        warnings.showwarning = _also_written(warnings.showwarning, handler)


def _also_written(showwarning, handler: _RecordWriter):
    """``showwarning`` that also writes distributed's Python warnings (a large graph, say)
    as records of the logger ``py.warnings``. In the test process pytest shows warnings
    its own way; pyproject.toml makes the ones that matter errors there."""

    def shown(message, category, filename, lineno, file=None, line=None):
        if "distributed" in Path(filename).parts:
            handler.emit(logging.LogRecord("py.warnings", logging.WARNING, filename, lineno,
                                           f"{category.__name__}: {message}", None, None))
        showwarning(message, category, filename, lineno, file, line)

    setattr(shown, _MARK, True)
    return shown


def _loggers() -> list[str]:
    """The top loggers, and those below them that do not propagate to them."""
    names = list(LOGGERS)
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if (isinstance(logger, logging.Logger) and not logger.propagate
                and any(name.startswith(top + ".") for top in LOGGERS)):
            names.append(name)
    return names


def dask_setup(_obj) -> None:
    """distributed's preload hook: called for a client, scheduler, nanny or worker."""
    install()


def preload_environment(folder: str) -> dict[str, str]:
    """Environment variables that make every distributed object started later load this file.

    Subprocesses (the command line, notebooks' kernels) also log distributed's records
    from WARNING up only: the INFO line of each preload would otherwise join the stderr
    that the command-line tests read.
    """
    return {FOLDER_VARIABLE: folder, "DASK_LOGGING__DISTRIBUTED": "warning",
            **{f"DASK_DISTRIBUTED__{part.upper()}__PRELOAD": json.dumps([PRELOAD])
               for part in PRELOADED}}


@dataclass(frozen=True)
class Record:
    """One WARNING (or worse) record of distributed, and the process that wrote it."""

    pid: int
    logger: str
    level: str
    message: str

    def __str__(self) -> str:
        first_line = self.message.splitlines()[0] if self.message else ""
        return f"[pid {self.pid}] {self.logger} {self.level}: {first_line[:300]}"


class LogFolder:
    """The record files of every process, and what was added to them since :meth:`mark`."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self._offsets: dict[Path, int] = {}

    def mark(self) -> None:
        """Remember how far every file has been read: later records are new."""
        self._offsets = {path: path.stat().st_size for path in self.folder.glob("*.jsonl")}

    def new_records(self) -> list[Record]:
        """The records written since :meth:`mark`, in each process's order."""
        records = []
        for path in sorted(self.folder.glob("*.jsonl")):
            with open(path, encoding="utf-8") as file:
                file.seek(self._offsets.get(path, 0))
                text = file.read()
            # A line being written as we read is left for the next read.
            complete = text[:text.rfind("\n") + 1]
            records.extend(Record(**json.loads(line)) for line in complete.splitlines() if line)
        return records


#: :attr:`Allowed.tests` of the tests that make faults on purpose: those marked ``faults``.
FAULT_TESTS = "faults"


@dataclass(frozen=True)
class Allowed:
    """A warning some tests provoke on purpose: which tests, which message, and why."""

    tests: str  # a regular expression matched against the test's node id, or FAULT_TESTS
    message: str  # a regular expression searched in the record's message
    reason: str

    def covers(self, item, record: Record) -> bool:
        """Whether the test ``item`` (a pytest item) may log ``record``."""
        chosen = (item.get_closest_marker("faults") is not None if self.tests == FAULT_TESTS
                  else re.search(self.tests, item.nodeid))
        return bool(chosen and re.search(self.message, record.message))
