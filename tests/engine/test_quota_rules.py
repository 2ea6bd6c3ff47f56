"""The quota rules said once in the engine, in admission units and in stored Decimals alike."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling.engine.quota import Kind, QuotaConfig, QuotaError, TeamQuota, ceiling, over_cap, validate


def test_the_ceiling_adds_the_borrowing_limit_only_for_work_that_may_borrow() -> None:
    assert ceiling(4000, 2000, may_borrow=True) == 6000
    assert ceiling(4000, 2000, may_borrow=False) == 4000
    assert ceiling(Decimal("1.5"), Decimal("0.25"), may_borrow=True) == Decimal("1.75")
    assert TeamQuota(4000, 2000).limit(Kind.BATCH) == 6000
    assert TeamQuota(4000, 2000).limit(Kind.INTERACTIVE) == 4000


def test_a_department_may_not_be_guaranteed_more_than_its_cap() -> None:
    assert over_cap(Decimal(9), Decimal(8))
    assert not over_cap(Decimal(8), Decimal(8))
    assert not over_cap(Decimal(100), None)


def test_validate_uses_the_same_cap_rule() -> None:
    config = QuotaConfig(
        quotas={("a", "H100"): TeamQuota(5000), ("b", "H100"): TeamQuota(4000)},
        departments={"a": "research", "b": "research"},
        caps={("research", "H100"): 8000},
    )
    with pytest.raises(QuotaError, match="more than its cap of 8"):
        validate(config)
