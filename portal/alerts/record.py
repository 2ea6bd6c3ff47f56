"""The beat task's work: read the figures, step every alert's state, keep the new states and make a notice
for each firing started or ended.

One check at a time (a single-flight lock: a second concurrent check does nothing), the rows locked for the
transaction, and each notice unique per alert, firing and change: a retried or overlapping check never makes
a second notice for the same firing, so nobody is told twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from portal.alerts import conditions, kinds, readings, states
from portal.alerts.models import OpsAlert, OpsAlertNotice
from portal.metrics.rules import Thresholds
from scheduling.loops.locks import single_flight

LOCK = "portal.alerts.check"
# A notice whose delivery has not happened after a while is enqueued again, for an hour.
REDELIVER_AFTER, REDELIVER_WITHIN = timedelta(minutes=5), timedelta(hours=1)


def _state(row: OpsAlert) -> states.AlertState:
    return states.AlertState(
        row.key,
        row.kind,
        row.team_id,
        row.pending_since,
        row.firing_since,
        row.resolved_at,
        row.value,
        row.message,
        dict(row.data),
    )


def check(now: datetime) -> list[int] | None:
    """The ids of the notices this check made; None when another check was running."""
    t = Thresholds.from_settings(settings)
    rules = kinds.rules_by_kind(t)
    with single_flight(LOCK, expire_seconds=int(settings.CELERY_TASK_TIME_LIMIT)) as mine:
        if not mine:
            return None
        with transaction.atomic():
            rows = {row.key: row for row in OpsAlert.objects.select_for_update()}
            previous = {key: _state(row) for key, row in rows.items()}
            api = previous.get(conditions.API_KEY)
            found = conditions.observe(readings.read(now), t, now, api.data if api is not None else None)
            evaluation = states.evaluate(found, previous, rules, now)
            for key, state in evaluation.states.items():
                rows[key] = _save(rows.get(key), state, rules[state.kind].severity, now)
            return [pk for notice in evaluation.notices if (pk := _notice(rows[notice.key], notice, now)) is not None]


def _save(row: OpsAlert | None, state: states.AlertState, severity: str, now: datetime) -> OpsAlert:
    fields = {
        "kind": state.kind,
        "severity": severity,
        "team_id": state.team_id,
        "pending_since": state.pending_since,
        "firing_since": state.firing_since,
        "resolved_at": state.resolved_at,
        "value": state.value,
        "message": state.message[:500],
        "data": dict(state.data),
        "checked_at": now,
    }
    if row is None:
        return OpsAlert.objects.create(key=state.key, **fields)
    for name, value in fields.items():
        setattr(row, name, value)
    row.save(update_fields=list(fields))
    return row


def _notice(alert: OpsAlert, notice: states.Notice, now: datetime) -> int | None:
    try:
        with transaction.atomic():
            made = OpsAlertNotice.objects.create(
                alert=alert,
                change=notice.change,
                episode=notice.episode,
                at=now,
                value=notice.value,
                message=notice.message[:500],
            )
    except IntegrityError:
        return None  # made by an earlier run of this check
    return made.pk


def undelivered(now: datetime) -> list[int]:
    """Recent notices no delivery task finished with (a check that died between its commit and enqueueing,
    a lost message): delivery is idempotent, so enqueueing one again is safe."""
    rows = OpsAlertNotice.objects.filter(
        delivered_at__isnull=True, at__gte=now - REDELIVER_WITHIN, at__lt=now - REDELIVER_AFTER
    )
    return list(rows.order_by("id").values_list("id", flat=True))
