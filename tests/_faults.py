"""Killing a worker at a chosen task, from the scheduler itself: no polling, no sleeps.

:class:`KillAtTask` is a scheduler plugin of the test's own ``LocalCluster``
(whose scheduler runs in the test process). It counts the tasks whose key
name starts with a prefix as they reach a state ("memory": finished;
"processing": sent to a worker) and, at the k-th, SIGKILLs the worker process
that finished or runs it: the same moment in every run, whatever the
machine's speed, as an OOM-killed pod or a lost node would be.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass, field

from dask.utils import key_split
from distributed.diagnostics.plugin import SchedulerPlugin

__all__ = ["KillPoint", "KillAtTask", "killing", "killed_holding"]


@dataclass(frozen=True)
class KillPoint:
    """Where a run is interrupted: the ``count``-th task named ``prefix`` reaching ``state``."""

    name: str  # "early", "midway", "final"
    prefix: str
    count: int = 1
    state: str = "memory"  # "memory" (the task finished) or "processing" (it was started)


@dataclass
class KillAtTask(SchedulerPlugin):
    """SIGKILL the worker of the ``point``'s task (its process id as it registered)."""

    scheduler: object
    point: KillPoint
    seen: int = 0
    killed: str | None = None
    fired: threading.Event = field(default_factory=threading.Event)
    removed: threading.Event = field(default_factory=threading.Event)
    name: str = "kpca-dask-test-kill"

    def remove_worker(self, scheduler, worker, **kwargs):
        if worker == self.killed:
            self.removed.set()

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs):
        if self.killed is not None or finish != self.point.state:
            return
        if not key_split(key).startswith(self.point.prefix):
            return
        self.seen += 1
        if self.seen < self.point.count:
            return
        task = self.scheduler.tasks[key]
        worker = (task.processing_on if finish == "processing"
                  else next(iter(task.who_has), None))
        if worker is None:
            return
        self.killed = worker.address
        os.kill(worker.pid, signal.SIGKILL)
        self.fired.set()


class killing:
    """Context: the cluster's worker at ``point`` is killed while the block runs.

    ``cluster`` is a ``LocalCluster`` (its scheduler in this process) and
    ``client`` its client. It starts once at least two workers are running; on exit
    the plugin is removed once the scheduler has removed the killed worker. Its
    nanny starts a new one meanwhile, which joins the cluster whenever it is ready,
    during the next run or not, as a replacement pod would.
    """

    def __init__(self, cluster, client, point: KillPoint):
        self.cluster, self.client, self.point = cluster, client, point
        client.wait_for_workers(2, timeout=120)
        self.plugin = KillAtTask(cluster.scheduler, point)

    def __enter__(self) -> KillAtTask:
        self.cluster.scheduler.add_plugin(self.plugin, name=self.plugin.name)
        return self.plugin

    def __exit__(self, *exc) -> None:
        if self.plugin.killed is not None:
            assert self.plugin.removed.wait(120), "the killed worker was never removed"
        self.cluster.scheduler.remove_plugin(name=self.plugin.name)


class killed_holding(killing):
    """Context: the worker holding ``future``'s result is SIGKILLed on entry, and the cluster
    has its workers again on exit (the lost result is recomputed by whatever needs it)."""

    def __init__(self, cluster, client, future):
        super().__init__(cluster, client, KillPoint("holding", key_split(future.key)))
        self.future = future

    def __enter__(self) -> KillAtTask:
        plugin = super().__enter__()
        (holder,) = self.client.who_has([self.future])[self.future.key]
        plugin.killed = holder
        os.kill(self.cluster.scheduler.workers[holder].pid, signal.SIGKILL)
        plugin.fired.set()
        return plugin
