"""Closing a month: its sums are stored as they stand, and every later report or export of the month is
made from them, so a closed month re-exports byte for byte. The ledger never changes a closed month's rows
afterwards (late usage is booked in the next open month, ``ledger._Pass.book``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal.billing import access, periods
from portal.billing.ledger import zone
from portal.billing.models import ClosedMonth, LedgerCursor
from portal.billing.sums import GROUPS, Sums, calendar_month, from_json, gather, to_json
from portal.models import AuditEvent


@dataclass(frozen=True)
class Stored:
    sums: Sums
    closed_at: datetime


def stored(start: datetime, end: datetime) -> Stored | None:
    """The stored sums when [start, end) is a closed month."""
    month = calendar_month(start, end)
    if month is None:
        return None
    row = ClosedMonth.objects.filter(period=month).only("data", "closed_at").first()
    return None if row is None else Stored(from_json(row.data), row.closed_at)


def close_month(actor: Any, month: date) -> ClosedMonth:
    """Freeze ``month``. Only finance closes months, and only months that have ended."""
    if not access.can_close_months(actor):
        raise PermissionDenied("Only finance can close a month.")
    month = month.replace(day=1)
    start, end = periods.month_bounds(month, zone())
    now = timezone.now()
    if end > now:
        raise ValidationError(
            {"month": f"{month:%B %Y} has not ended yet; it can be closed from {end:%Y-%m-%d %H:%M}."}
        )
    with transaction.atomic():
        # The ledger's passes hold these rows while they write: closing waits for a pass in flight, and the
        # next pass sees the month closed.
        for stream in ("pods", "capacity"):
            LedgerCursor.objects.get_or_create(stream=stream)
        list(LedgerCursor.objects.select_for_update().all())
        if ClosedMonth.objects.filter(period=month).exists():
            raise ValidationError({"month": f"{month:%B %Y} is already closed."})
        sums = gather(start, end, groups=GROUPS)
        closed = ClosedMonth.objects.create(period=month, closed_at=now, closed_by=actor, data=to_json(sums))
        AuditEvent.record(
            actor=actor,
            action="billing.close_month",
            target=closed,
            after={"month": month.isoformat(), "intervals_summed": len(sums.usage)},
        )
    return closed
