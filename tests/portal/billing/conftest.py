"""Billing test data: the demo catalogue's offerings, a rate card, and workspaces of the org's teams."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from portal.billing.models import RateCardEntry
from tests.catalogue import install_offerings
from tests.conftest import Org
from workspaces.models import GpuOffering

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def offerings(db: None) -> dict[str, GpuOffering]:
    return install_offerings()


@pytest.fixture
def prices(db: None) -> None:
    """Per-GPU prices from well before T0: every shape's price follows from them."""
    since = datetime(2025, 1, 1, tzinfo=UTC)
    for model, price in (("H100-80GB-HBM3", "4.00"), ("A100-SXM4-80GB", "2.80"), ("L40S", "1.20")):
        RateCardEntry.objects.create(gpu_model=model, hourly_price=Decimal(price), effective_from=since)


@pytest.fixture
def billing_org(org: Org, offerings: dict[str, GpuOffering], prices: None) -> Org:
    return org
