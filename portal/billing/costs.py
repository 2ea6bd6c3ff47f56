"""The figures researchers see: the hourly price of a shape, what a workspace has cost so far, and a
person's month. Each is one query, for any number of rows."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import ExpressionWrapper, F, FloatField, Sum, Value
from django.db.models.functions import Cast, Least

from portal.billing import periods
from portal.billing.ledger import rate_card, zone
from portal.billing.models import UsageInterval
from portal.billing.rates import shape_key
from portal.billing.report import cents
from portal.billing.sql import Seconds


def unit_prices(offerings: Iterable[Any], at: datetime) -> dict[str, Decimal | None]:
    """Per offering slug, the price of one unit (GPU, slice, share) for an hour; None without a price."""
    card = rate_card()
    return {
        o.slug: card.unit_price(o.gpu_model, shape_key(o.kind, o.mig_profile, o.replicas), o.gpu_equivalents, at)
        for o in offerings
        if o.gpu_model
    }


def _money(upto: datetime | None = None) -> Any:
    seen = F("last_seen_at") if upto is None else Least(F("last_seen_at"), Value(upto))
    seconds = Seconds(seen, F("started_at"))
    return Sum(ExpressionWrapper(seconds * Cast("rate", FloatField()), output_field=FloatField()))


def workspace_costs(workspace_ids: Iterable[int], upto: datetime | None = None) -> dict[int, Decimal]:
    """What each workspace has cost so far (every run, up to the ledger's last sighting of its pods), or as of
    ``upto`` where given."""
    rows = UsageInterval.objects.filter(workspace_id__in=list(workspace_ids))
    if upto is not None:
        rows = rows.filter(started_at__lt=upto)
    money = rows.values("workspace_id").annotate(money=_money(upto))
    return {r["workspace_id"]: cents((r["money"] or 0) / 3600) for r in money}


def month_total(user_id: int, now: datetime) -> Decimal:
    """What a person's workspaces have been charged this month, in every team."""
    rows = UsageInterval.objects.filter(user_id=user_id, period=periods.month_of(now, zone()))
    return cents((rows.aggregate(money=_money())["money"] or 0) / 3600)


def hourly_rate(workspace_id: int) -> Decimal | None:
    """What a running workspace costs per hour now: the rates of its open intervals."""
    total = UsageInterval.objects.filter(workspace_id=workspace_id, ended_at=None).aggregate(rate=Sum("rate"))
    return None if total["rate"] is None else Decimal(total["rate"]).quantize(Decimal("0.0001"))
