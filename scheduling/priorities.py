"""Priority classes: how urgent a workspace is, as the portal decides and as Kubernetes sees it.

Notebooks are interactive: they only run within guarantee and are never preempted. Training jobs
default to ``normal``; ``batch`` jobs are the first to give capacity back. The portal installs one
Kubernetes PriorityClass per level so that kube-scheduler orders pods the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from scheduling.kube.manifests import make_priority_class
from workspaces.models import Workspace

Priority = Workspace.Priority


@dataclass(frozen=True)
class Level:
    value: int  # Kubernetes priority: user classes stay far below the system-* classes (> 2e9)
    description: str


LEVELS = {
    Priority.INTERACTIVE: Level(100_000, "Interactive notebooks: within guarantee, never preempted."),
    Priority.HIGH: Level(50_000, "High-priority training jobs."),
    Priority.NORMAL: Level(10_000, "Training jobs."),
    Priority.BATCH: Level(1_000, "Batch jobs: may borrow idle capacity and are preempted first."),
}


def class_name(priority: str) -> str:
    return f"gpu-portal-{priority}"


# By plain value: the scheduling cycle asks for every active workspace, and building the enum member each
# time was a third of a second per cycle with 6,000 workspaces.
_VALUES = {str(p.value): level.value for p, level in LEVELS.items()}


def value(priority: str) -> int:
    try:
        return _VALUES[priority]
    except KeyError:
        raise ValueError(f"{priority!r} is not a priority") from None


@cache
def priority_class_objects() -> tuple[Any, ...]:
    """The PriorityClass objects the portal installs (idempotently) before it creates pods. Built once: they
    are fixed, and building the client models for every workspace provisioned was 3.5% of a busy worker."""
    return tuple(make_priority_class(class_name(p), level.value, level.description) for p, level in LEVELS.items())
