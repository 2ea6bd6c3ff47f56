"""Injected faults: fail or delay API calls of a kind, as set through `POST /_sim/faults`.

A fault matches resource calls (verb, resource, namespace) and non-resource calls alike: for those the
resource is the path (`/version`, `/api`, `/apis/batch/v1`, `/healthz`) and the verb the HTTP method in
lower case, as RBAC names them, so the default `resource="*"` covers every path but `/_sim/`. It lasts
for `count` calls, or, with `duration_s`, for every matching call until that many simulated seconds
have passed (an outage; advance the clock to end it early).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from scheduling.simcluster.clock import SimClock

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Gone",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class Fault:
    verb: str = "*"  # get, list, watch, create, update, patch, delete, deletecollection, or *
    resource: str = "*"  # plural, optionally with a subresource (pods/log), a non-resource path, or *
    namespace: str = "*"
    count: int = 1
    status: int = 0  # 0: delay only
    delay_s: float = 0.0
    message: str = ""
    duration_s: float = 0.0  # simulated seconds; 0: `count` calls instead
    until: datetime | None = field(default=None, init=False)

    def matches(self, verb: str, resource: str, namespace: str) -> bool:
        return self.verb in ("*", verb) and self.resource in ("*", resource) and self.namespace in ("*", namespace)

    @property
    def reason(self) -> str:
        return REASONS.get(self.status, "InternalError")

    @property
    def text(self) -> str:
        return self.message or f"injected fault: {self.reason}"

    def describe(self) -> dict[str, Any]:
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        shown["until"] = self.until.isoformat() if self.until else None
        return shown


def _spec_fields() -> set[str]:
    return {f.name for f in fields(Fault) if f.init}


def _validate(fault: Fault) -> None:
    if fault.count < 1:
        raise ValueError("count must be at least 1")
    if fault.duration_s < 0:
        raise ValueError("duration_s must not be negative")
    if fault.status and not 400 <= fault.status <= 599:
        raise ValueError("status must be an HTTP error code")


class Faults:
    def __init__(self, clock: SimClock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: list[Fault] = []

    def add(self, spec: dict[str, Any]) -> Fault:
        unknown = set(spec) - _spec_fields()
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
        fault = Fault(**spec)
        _validate(fault)
        if fault.duration_s:
            fault.until = self._clock.now() + timedelta(seconds=fault.duration_s)
        with self._lock:
            self._pending.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    def take(self, verb: str, resource: str, namespace: str) -> Fault | None:
        """The first pending fault for this call, consuming one of its count unless it is timed."""
        with self._lock:
            self._expire()
            for fault in self._pending:
                if fault.matches(verb, resource, namespace):
                    if fault.until is None:
                        fault.count -= 1
                        if fault.count == 0:
                            self._pending.remove(fault)
                    return fault
        return None

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            self._expire()
            return [f.describe() for f in self._pending]

    def _expire(self) -> None:
        now = self._clock.now()
        self._pending = [f for f in self._pending if f.until is None or f.until > now]
