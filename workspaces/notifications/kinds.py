"""The events people are notified about, and the pure classifier that recognises them in the timeline.

Every state change and note is a ``WorkspaceEvent`` (``workspaces/transitions.py``); a notification is one of
those events that matters to a person. Recognising them here, from the event alone, keeps the loops that
write events unaware of notifications. Three kinds are not workspace events, and the classifier never returns
them: ``budget``, a threshold of a team's monthly budget crossed (``portal.billing.models.BudgetAlert``), and
``ops_critical`` / ``ops_warning``, an operators' or leads' alert fired or resolved
(``portal.alerts.models.OpsAlertNotice``).
"""

from __future__ import annotations

from typing import Any, Protocol

from django.db import models


class Kind(models.TextChoices):
    STARTED = "started", "Started"
    IDLE_WARNING = "idle_warning", "Idle warning"
    RECLAIMED = "reclaimed", "Reclaimed (idle)"
    PREEMPTION_NOTICE = "preemption_notice", "Preemption notice"
    PREEMPTED = "preempted", "Preempted"
    RUNTIME_WARNING = "runtime_warning", "Near the runtime limit"
    FAILED = "failed", "Failed"
    POSSIBLY_STUCK = "possibly_stuck", "Possibly stuck"
    BUDGET = "budget", "Team budget"  # a BudgetAlert, not a workspace event (delivery.deliver_budget_alert)
    # An operators' or leads' alert (portal.alerts OpsAlertNotice; delivery.deliver_ops_alert), by severity.
    OPS_CRITICAL = "ops_critical", "Operations alert: critical"
    OPS_WARNING = "ops_warning", "Operations alert: warning"


# Email is on by default for everything that asks the person to act or tells them work stopped; a start is
# seen on the page anyway and would be the noisiest mail. A team budget's thresholds are on too. Of the
# operations alerts only the critical ones (work stops or guarantees are broken) mail by default; warnings
# (contention, idle GPUs, long waits) are on the alerts page and in the portal's list.
DEFAULT_EMAIL_KINDS: tuple[str, ...] = tuple(k.value for k in Kind if k not in (Kind.STARTED, Kind.OPS_WARNING))
DEFAULT_WEBHOOK_KINDS: tuple[str, ...] = DEFAULT_EMAIL_KINDS

# Kinds a team's leads hear about as well as the owner: a stuck job holds the team's GPUs.
LEADS_TOO: frozenset[str] = frozenset({Kind.POSSIBLY_STUCK})

# A budget alert goes to the team's leads at every threshold, and from this one on to all its members.
BUDGET_MEMBERS_FROM = 100

OPS_KINDS: frozenset[str] = frozenset({Kind.OPS_CRITICAL, Kind.OPS_WARNING})


def ops_kind(severity: str) -> Kind:
    """The notification kind of an operations alert of ``severity`` (its Prometheus rule's label)."""
    return Kind.OPS_CRITICAL if severity == "critical" else Kind.OPS_WARNING


# Notes carry what they are in details["event"] (scheduling/loops/idle.py, cycle.py, runtime_warning.py).
_NOTE_KINDS = {
    "idle_warning": Kind.IDLE_WARNING,
    "preemption_notice": Kind.PREEMPTION_NOTICE,
    "possibly_stuck": Kind.POSSIBLY_STUCK,
    "runtime_warning": Kind.RUNTIME_WARNING,
}
_STATE_KINDS = {"reclaimed": Kind.RECLAIMED, "preempted": Kind.PREEMPTED, "failed": Kind.FAILED}


class EventLike(Protocol):
    """What the classifier reads of a ``WorkspaceEvent``."""

    from_state: str
    to_state: str
    details: Any


def classify(event: EventLike) -> Kind | None:
    """The notification kind of ``event``, or None when nobody needs to hear about it."""
    details = event.details if isinstance(event.details, dict) else {}
    noted = details.get("event")
    if isinstance(noted, str) and noted in _NOTE_KINDS:
        return _NOTE_KINDS[noted]
    if event.from_state == event.to_state:
        return None  # any other note: a reason changed, an extension, a keep-alive
    if event.to_state == "running":
        return Kind.STARTED
    return _STATE_KINDS.get(event.to_state)


def valid_kinds(values: Any) -> bool:
    """Whether ``values`` is a list of known kinds (what a preference stores)."""
    return isinstance(values, list) and all(isinstance(v, str) and v in Kind.values for v in values)
