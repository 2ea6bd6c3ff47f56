"""Injected faults: fail or delay the next N API calls of a kind, as set through `POST /_sim/faults`."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

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
    resource: str = "*"  # plural, optionally with a subresource (pods/log), or *
    namespace: str = "*"
    count: int = 1
    status: int = 0  # 0: delay only
    delay_s: float = 0.0
    message: str = ""

    def matches(self, verb: str, resource: str, namespace: str) -> bool:
        return self.verb in ("*", verb) and self.resource in ("*", resource) and self.namespace in ("*", namespace)

    @property
    def reason(self) -> str:
        return REASONS.get(self.status, "InternalError")

    @property
    def text(self) -> str:
        return self.message or f"injected fault: {self.reason}"


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Fault] = []

    def add(self, spec: dict[str, Any]) -> Fault:
        allowed = Fault.__dataclass_fields__
        unknown = set(spec) - set(allowed)
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(sorted(unknown))}")
        fault = Fault(**spec)
        if fault.count < 1:
            raise ValueError("count must be at least 1")
        if fault.status and not 400 <= fault.status <= 599:
            raise ValueError("status must be an HTTP error code")
        with self._lock:
            self._pending.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    def take(self, verb: str, resource: str, namespace: str) -> Fault | None:
        """The first pending fault for this call, consuming one of its count."""
        with self._lock:
            for fault in self._pending:
                if fault.matches(verb, resource, namespace):
                    fault.count -= 1
                    if fault.count == 0:
                        self._pending.remove(fault)
                    return fault
        return None

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(vars(f)) for f in self._pending]
