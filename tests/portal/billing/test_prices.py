"""Rate card edits: who, what, never back-dated, audited; withdrawn only before they apply."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from portal.billing import actions
from portal.billing.models import RateCardEntry
from portal.models import AuditEvent
from tests.conftest import Org


def test_finance_and_operators_set_prices_with_an_audit_event(org: Org) -> None:
    entry = actions.set_price(org.finance, gpu_model="H100-80GB-HBM3", hourly_price="3.50")
    actions.set_price(org.operator, gpu_model="A100-SXM4-80GB", shape="mig-1g.10gb", hourly_price="0.45")
    assert entry.hourly_price == Decimal("3.50") and entry.effective_from <= timezone.now()
    assert AuditEvent.objects.filter(action="billing.set_price").count() == 2
    for user in (org.lead, org.member, org.outsider):
        with pytest.raises(PermissionDenied):
            actions.set_price(user, gpu_model="H100-80GB-HBM3", hourly_price="1")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"gpu_model": "RTX-9999"}, "gpu_model"),
        ({"shape": "mig-9g.99gb"}, "shape"),
        ({"shape": "sliced"}, "shape"),
        ({"shape": "shared-1"}, "shape"),
        ({"hourly_price": "-1"}, "hourly_price"),
        ({"hourly_price": "NaN"}, "hourly_price"),
        ({"hourly_price": "1.0000001"}, "hourly_price"),
        ({"hourly_price": "lots"}, "hourly_price"),
        ({"effective_from": timezone.now() - timedelta(days=1)}, "effective_from"),
        ({"note": "two\nlines"}, "note"),
    ],
)
def test_bad_prices_are_refused_with_a_reason(org: Org, fields: dict[str, object], field: str) -> None:
    values: dict[str, object] = {"gpu_model": "A100-SXM4-80GB", "hourly_price": "2.80"} | fields
    with pytest.raises(ValidationError) as caught:
        actions.set_price(org.finance, **values)  # type: ignore[arg-type]
    assert field in caught.value.message_dict
    assert not RateCardEntry.objects.exists()


def test_a_future_price_can_be_withdrawn_one_in_effect_cannot(org: Org) -> None:
    now_price = actions.set_price(org.finance, gpu_model="L40S", hourly_price="1.20")
    later = actions.set_price(org.finance, gpu_model="L40S", hourly_price="1.50",
                              effective_from=timezone.now() + timedelta(days=3))  # fmt: skip
    with pytest.raises(ValidationError, match="in effect"):
        actions.withdraw_price(org.finance, now_price.pk)
    actions.withdraw_price(org.finance, later.pk)
    assert list(RateCardEntry.objects.all()) == [now_price]
