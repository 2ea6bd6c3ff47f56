"""Plain values the gauges answer with, importable without the models (the alerts' pure conditions and the
notification messages read them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Waiting:
    requests: int
    oldest_seconds: float
