"""What the benchmarks share: a peak-memory sampler and where their tables go."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

#: Tables and cached references (git-ignored).
RESULTS = Path(__file__).resolve().parent / "results"


class PeakMemory:
    """Samples this process's resident memory on a thread until :meth:`stop`.

    ``start_gib`` is the memory when sampling began, ``peak_gib`` the largest
    sampled, ``above_start_gib`` their difference: what the measured code held
    beyond what was there before (imports, data), whatever the set-up peaked at.
    """

    def __init__(self, every: float = 0.05):
        import psutil

        self._process = psutil.Process()
        self._start = self._peak = self._process.memory_info().rss
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(every,), daemon=True)
        self._thread.start()

    def _sample(self, every: float) -> None:
        while not self._done.wait(every):
            self._peak = max(self._peak, self._process.memory_info().rss)

    def stop(self) -> PeakMemory:
        self._done.set()
        self._thread.join()
        self._peak = max(self._peak, self._process.memory_info().rss)
        return self

    @property
    def start_gib(self) -> float:
        return self._start / 2**30

    @property
    def peak_gib(self) -> float:
        return self._peak / 2**30

    @property
    def above_start_gib(self) -> float:
        return (self._peak - self._start) / 2**30


def write_results(name: str, text: str, argv: list[str] | None) -> Path:
    """Write a benchmark's table to ``bench/results/<name>.md``, headed by its command."""
    RESULTS.mkdir(exist_ok=True)
    command = f"python bench/{name}.py " + " ".join(argv if argv is not None else sys.argv[1:])
    path = RESULTS / f"{name}.md"
    path.write_text(f"`{command.strip()}`\n\n{text}\n")
    return path
