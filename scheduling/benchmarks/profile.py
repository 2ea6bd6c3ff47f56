"""Where a full-stack benchmark's time went: CPU seconds per process over the run, and the Celery worker's
busy time per task (from its log)."""

from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from scheduling.benchmarks import stack as benchstack

MACHINE = "whole machine (every process, not only ours)"
_TASK_DONE = re.compile(r"Task (\S+)\[[0-9a-f-]+\] succeeded in ([0-9.]+)s")


@dataclass
class Profile:
    """Where the time went: CPU seconds per process over the run, and the worker's busy time per task."""

    elapsed_s: float = 0.0
    cpu_s: dict[str, float] = field(default_factory=dict)
    task_s: dict[str, float] = field(default_factory=dict)
    task_count: dict[str, int] = field(default_factory=dict)
    cores: int = 1


class CpuMeter:
    """CPU seconds of the worker (and the scheduler), the simulated cluster, PostgreSQL, Redis, this process and
    the machine."""

    def __init__(self, worker_pid: int, sim_pid: int, scheduler_pid: int | None = None) -> None:
        self.worker_pid, self.sim_pid, self.scheduler_pid = worker_pid, sim_pid, scheduler_pid
        self.start = self._sample()
        self.started = time.monotonic()

    def _sample(self) -> dict[str, float]:
        own = _own_cpu()
        sample = {"worker (Celery, beat and pool)": benchstack.cpu_seconds(self.worker_pid)}
        if self.scheduler_pid:
            sample["scheduler (Celery, one pool process)"] = benchstack.cpu_seconds(self.scheduler_pid)
        return sample | {
            "simulated cluster": benchstack.cpu_seconds(self.sim_pid),
            "PostgreSQL (every database)": benchstack.cpu_seconds_by_name("postgres"),
            "Redis": benchstack.cpu_seconds_by_name("redis-server"),
            "benchmark (creating workspaces, polling)": own,
            MACHINE: _machine_busy(),
        }

    def stop(self) -> tuple[float, dict[str, float]]:
        end = self._sample()
        return time.monotonic() - self.started, {k: end[k] - self.start[k] for k in end}


def _own_cpu() -> float:
    times = os.times()
    return float(times.user + times.system)


def _machine_busy() -> float:
    """Non-idle CPU seconds of the whole machine since boot (all cores), from /proc/stat."""
    try:
        line = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return 0.0
    values = [int(v) for v in line[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / benchstack.CLOCK_TICKS


def task_times(*logs: Path) -> tuple[dict[str, float], dict[str, int]]:
    """Busy seconds and runs per task name, from the workers' log lines ``Task X[id] succeeded in Ys``."""
    busy: dict[str, float] = defaultdict(float)
    runs: dict[str, int] = defaultdict(int)
    for log in logs:
        if log.exists():
            for match in _TASK_DONE.finditer(log.read_text(errors="replace")):
                busy[match[1]] += float(match[2])
                runs[match[1]] += 1
    return dict(busy), dict(runs)
