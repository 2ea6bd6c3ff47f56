"""Simulated time: real time scaled by a speed factor, plus manual jumps.

Every controller reads this clock, so a demo can run hours of notebook life in minutes and a test can
jump past a start delay or a job's deadline without sleeping.

The workloads may run faster still than the clock (``workload_speed``): a job's simulated duration, the
activity profiles and the notebook kernels' activity play that many times faster, while every timestamp
the API shows stays on the clock. A benchmark runs a week of workloads in minutes against a portal whose own
clock is real time (it compares Jupyter's timestamps with its own, as on a real cluster) and whose policy
minutes are shortened to match.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class SimClock:
    def __init__(self, *, speed: float = 1.0, start: datetime | None = None, workload_speed: float = 1.0) -> None:
        if speed <= 0 or workload_speed <= 0:
            raise ValueError("speed must be positive")
        self._lock = threading.Lock()
        self._speed = speed
        self.workload_speed = workload_speed
        # Anchor pair: simulated time `_sim_anchor` corresponds to the monotonic real instant `_real_anchor`.
        self._sim_anchor = start or datetime.now(UTC)
        self._real_anchor = time.monotonic()

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> datetime:
        with self._lock:
            return self._now_locked()

    def _now_locked(self) -> datetime:
        elapsed = (time.monotonic() - self._real_anchor) * self._speed
        return self._sim_anchor + timedelta(seconds=elapsed)

    def advance(self, seconds: float) -> datetime:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._sim_anchor = self._now_locked() + timedelta(seconds=seconds)
            self._real_anchor = time.monotonic()
            return self._sim_anchor

    def set_speed(self, speed: float) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        with self._lock:
            # Re-anchor so that time already elapsed keeps the old rate.
            self._sim_anchor = self._now_locked()
            self._real_anchor = time.monotonic()
            self._speed = speed

    def workload_start(self, started: datetime, now: datetime) -> datetime:
        """Where a workload started at ``started`` would have started for its profile to be where it is
        ``now`` (its elapsed time stretched by ``workload_speed``)."""
        return now - (now - started) * self.workload_speed

    def from_workload(self, moment: datetime, now: datetime) -> datetime:
        """A moment on a timeline stretched by :meth:`workload_start`, back on the clock."""
        return now - (now - moment) / self.workload_speed

    def real_seconds(self, sim_seconds: float) -> float:
        """How long to wait in real time for `sim_seconds` of simulated time to pass."""
        return sim_seconds / self._speed


def rfc3339(moment: datetime) -> str:
    """Kubernetes `Time`: second precision, UTC, `Z` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(moment: datetime) -> str:
    """Kubernetes `MicroTime`, used by events.k8s.io `eventTime` and leases."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
