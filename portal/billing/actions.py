"""Changes finance and operators make to billing: prices and budgets; each one transaction with an audit event."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal.billing import access
from portal.billing.models import Budget, RateCardEntry
from portal.billing.rates import MODEL_PRICE
from portal.models import AuditEvent, Team
from scheduling.engine import gpus

MAX_HOURLY_PRICE = Decimal(100_000)
_SHAPE = re.compile(r"\A(?:whole|mig-(?P<profile>[0-9]+g\.[0-9]+gb(?:\+me)?)|shared-(?P<replicas>[0-9]{1,2}))\Z")


def _snapshot(entry: RateCardEntry) -> dict[str, Any]:
    return {
        "gpu_model": entry.gpu_model,
        "shape": entry.shape,
        "hourly_price": str(entry.hourly_price),
        "effective_from": entry.effective_from.isoformat(),
        "note": entry.note,
    }


def _check_shape(model: gpus.GpuModel, shape: str) -> None:
    if shape == MODEL_PRICE:
        return
    match = _SHAPE.fullmatch(shape)
    if match is None:
        raise ValidationError(
            {"shape": "A shape is empty (the per-GPU price), whole, mig-<profile> (mig-1g.10gb) or shared-<replicas>."}
        )
    if match["profile"] and match["profile"] not in {p.name for p in model.mig_profiles}:
        names = ", ".join(p.name for p in model.mig_profiles) or "none"
        raise ValidationError({"shape": f"{model.key} has no MIG profile {match['profile']} (it has: {names})."})
    if match["replicas"] and not 2 <= int(match["replicas"]) <= 64:
        raise ValidationError({"shape": "A time-sliced share is one of 2 to 64 replicas."})


def _price(value: Any) -> Decimal:
    try:
        price = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise ValidationError({"hourly_price": f"{value!r} is not a price, e.g. 2.50."}) from None
    if not price.is_finite() or price < 0 or price > MAX_HOURLY_PRICE:
        raise ValidationError({"hourly_price": f"A price per hour is between 0 and {MAX_HOURLY_PRICE}."})
    if price.as_tuple().exponent < -6:  # type: ignore[operator]
        raise ValidationError({"hourly_price": "At most six decimal places."})
    return price


def set_price(
    actor: Any,
    *,
    gpu_model: str,
    hourly_price: Any,
    shape: str = MODEL_PRICE,
    effective_from: datetime | None = None,
    note: str = "",
) -> RateCardEntry:
    """A new price from ``effective_from`` (now when not given). Prices are never back-dated: figures
    already billed stay as billed, and a correction of a closed month is an adjustment."""
    if not access.can_set_prices(actor):
        raise PermissionDenied("Only finance and operators can set prices.")
    try:
        model = gpus.get_model(gpu_model)
    except gpus.UnknownGpuModel:
        raise ValidationError({"gpu_model": f"{gpu_model!r} is not a GPU model in the catalogue."}) from None
    _check_shape(model, shape)
    price = _price(hourly_price)
    now = timezone.now()
    starts = effective_from or now
    if starts < now - timedelta(minutes=1):
        raise ValidationError({"effective_from": "A price applies from now or later; past usage keeps its price."})
    if len(note) > 200 or any(ord(c) < 32 for c in note):
        raise ValidationError({"note": "A note is one line of at most 200 characters."})
    with transaction.atomic():
        if RateCardEntry.objects.filter(gpu_model=model.key, shape=shape, effective_from=starts).exists():
            raise ValidationError({"effective_from": "A price for this shape already starts at that instant."})
        entry = RateCardEntry.objects.create(
            gpu_model=model.key,
            shape=shape,
            hourly_price=price,
            effective_from=max(starts, now),
            note=note,
            created_by=actor,
        )
        AuditEvent.record(actor=actor, action="billing.set_price", target=entry, after=_snapshot(entry))
    return entry


def withdraw_price(actor: Any, entry_id: int) -> None:
    """Remove a price that has not taken effect yet (one in effect has priced usage: it stays)."""
    if not access.can_set_prices(actor):
        raise PermissionDenied("Only finance and operators can change prices.")
    with transaction.atomic():
        entry = RateCardEntry.objects.select_for_update().filter(pk=entry_id).first()
        if entry is None:
            raise ValidationError({"entry": "No such price."})
        if entry.effective_from <= timezone.now():
            raise ValidationError({"entry": "This price is in effect and has priced usage; set a new one instead."})
        AuditEvent.record(actor=actor, action="billing.withdraw_price", target=entry, before=_snapshot(entry))
        entry.delete()


def _budget_snapshot(budget: Budget) -> dict[str, Any]:
    return {"team": budget.team.slug, "amount": str(budget.amount), "unit": budget.unit, "policy": budget.policy}


def set_budget(actor: Any, team: Team, *, amount: Any, unit: str, policy: str) -> Budget:
    """Set or change ``team``'s monthly budget (finance and operators)."""
    if not access.can_set_budgets(actor):
        raise PermissionDenied("Only finance and operators can set budgets.")
    errors = {}
    try:
        value = Decimal(str(amount).strip())
    except (InvalidOperation, ValueError):
        value = Decimal(-1)
    if not value.is_finite() or value <= 0 or value >= Decimal("1e12") or value != value.quantize(Decimal("0.01")):
        errors["amount"] = "A budget is a positive amount with at most two decimal places, e.g. 1500 or 1500.50."
    if unit not in Budget.Unit.values:
        errors["unit"] = f"The unit is one of: {', '.join(Budget.Unit.values)}."
    if policy not in Budget.Policy.values:
        errors["policy"] = f"The policy is one of: {', '.join(Budget.Policy.values)}."
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        current = Budget.objects.select_for_update().filter(team=team).first()
        before = _budget_snapshot(current) if current else None
        budget, _ = Budget.objects.update_or_create(
            team=team, defaults={"amount": value, "unit": unit, "policy": policy, "updated_by": actor}
        )
        AuditEvent.record(
            actor=actor, action="billing.set_budget", target=budget, team=team, before=before,
            after=_budget_snapshot(budget),
        )  # fmt: skip
    return budget


def remove_budget(actor: Any, team: Team) -> None:
    if not access.can_set_budgets(actor):
        raise PermissionDenied("Only finance and operators can remove budgets.")
    with transaction.atomic():
        budget = Budget.objects.select_for_update().filter(team=team).first()
        if budget is None:
            raise ValidationError({"team": f"{team.name} has no budget."})
        AuditEvent.record(
            actor=actor, action="billing.remove_budget", target=budget, team=team, before=_budget_snapshot(budget)
        )
        budget.delete()
