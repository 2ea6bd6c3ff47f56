"""The billing role matrix: every page, export and endpoint, per persona."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.billing import actions
from portal.billing.ledger import RunningPod, record_pods, zone
from portal.billing.models import ClosedMonth
from portal.billing.periods import month_of
from tests import factories
from tests.conftest import Org, api_client_for
from workspaces.models import GpuOffering

PERSONAS = ("member", "lead", "beta_lead", "finance", "operator", "outsider", "anonymous")
FINANCE_READERS = {"finance", "operator"}


@pytest.fixture
def used(billing_org: Org, offerings: dict[str, GpuOffering]) -> Org:
    """This month: alice (alpha) and lena (alpha lead) each held an H100 for an hour; bert (beta) too."""
    now = timezone.now()
    pods = []
    for team, user in ((billing_org.alpha, billing_org.member), (billing_org.alpha, billing_org.lead),
                       (billing_org.beta, billing_org.beta_lead)):  # fmt: skip
        ws = factories.make_workspace(team, user, offerings["h100-80gb-hbm3"], state="running")
        pods.append(RunningPod(f"uid-{ws.pk}", f"ws-{ws.pk}", ws.pk))
    start = now - timedelta(hours=1)
    if month_of(start, zone()) != month_of(now, zone()):
        pytest.skip("the first hour of a month: the figures below are for an hour inside this month")
    record_pods(start, pods)
    record_pods(now, pods)
    actions.set_budget(billing_org.finance, billing_org.alpha, amount="100", unit="money", policy="block_batch")
    return billing_org


def page_client(user: object) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(
    "path",
    [
        "/chargeback/",
        "/chargeback/rates/",
        "/chargeback/budgets/",
        "/chargeback/export/csv/",
        "/chargeback/export/xlsx/",
        "/chargeback/export/pdf/",
    ],
)
def test_finance_pages_and_exports(used: Org, persona: str, path: str) -> None:
    response = page_client(used.persona(persona)).get(path)
    if persona == "anonymous":
        assert response.status_code == 302 and "/login/" in response["Location"]
    elif persona in FINANCE_READERS:
        assert response.status_code == 200
        if "export" in path:
            assert response["Content-Disposition"].startswith('attachment; filename="chargeback-')
    else:
        assert response.status_code == 404


# What each persona sees of alpha's cost page: None (404), "own" or "all".
TEAM_SCOPE = {"member": "own", "lead": "all", "beta_lead": None, "finance": "all", "operator": "all", "outsider": None}


@pytest.mark.parametrize("persona", PERSONAS)
def test_team_cost_page(used: Org, persona: str) -> None:
    response = page_client(used.persona(persona)).get(f"/teams/{used.alpha.pk}/costs/")
    if persona == "anonymous":
        assert response.status_code == 302
        return
    scope = TEAM_SCOPE[persona]
    if scope is None:
        assert response.status_code == 404
        return
    assert response.status_code == 200
    text = response.content.decode()
    table = text[text.index('id="member-costs"') :].split("</table>")[0]
    assert ("Alice" in table) is (persona in ("member", "lead", "finance", "operator"))
    assert ("Lena" in table) is (scope == "all")


@pytest.mark.parametrize("persona", PERSONAS)
def test_team_costs_api(used: Org, persona: str) -> None:
    response = api_client_for(used.persona(persona)).get(f"/api/v1/teams/{used.alpha.pk}/costs/")
    if persona == "anonymous":
        assert response.status_code == 401
        return
    scope = TEAM_SCOPE[persona]
    if scope is None:
        assert response.status_code == 404
        return
    body = response.json()
    assert body["totals"]["cost"] == "8.00"  # the team's totals, whoever asks
    assert {line["key"] for line in body["members"]} == ({"alice"} if scope == "own" else {"alice", "lena"})
    assert body["budget"]["amount"] == "100.00"


@pytest.mark.parametrize("persona", PERSONAS)
def test_chargeback_api(used: Org, persona: str) -> None:
    response = api_client_for(used.persona(persona)).get("/api/v1/chargeback/?group=team")
    expected = 401 if persona == "anonymous" else 200 if persona in FINANCE_READERS else 403
    assert response.status_code == expected
    if expected == 200:
        assert {line["key"]: line["cost"] for line in response.json()["lines"]} == {"alpha": "8.00", "beta": "4.00"}


@pytest.mark.parametrize("persona", PERSONAS)
def test_price_and_budget_changes(used: Org, persona: str) -> None:
    client = api_client_for(used.persona(persona))
    price = client.post("/api/v1/prices/", {"gpu_model": "L40S", "hourly_price": "1.10"}, format="json")
    budget = client.put(f"/api/v1/teams/{used.alpha.pk}/budget/", {"amount": "200", "unit": "money",
                                                                    "policy": "warn"}, format="json")  # fmt: skip
    close = client.post("/api/v1/chargeback/close/", {"month": "2026-01"}, format="json")
    if persona == "anonymous":
        assert (price.status_code, budget.status_code, close.status_code) == (401, 401, 401)
    elif persona in FINANCE_READERS:
        assert (price.status_code, budget.status_code) == (201, 200)
        assert close.status_code == (201 if persona == "finance" else 403)
    else:
        assert price.status_code == 403
        assert budget.status_code == (403 if TEAM_SCOPE[persona] else 404)
        assert close.status_code == 403


def test_bad_input_gets_a_reason(used: Org) -> None:
    client = api_client_for(used.finance)
    response = client.get("/api/v1/chargeback/?month=2026-13")
    assert response.status_code == 400 and "not a month" in response.json()["detail"]
    assert client.get("/api/v1/chargeback/?group=planet").status_code == 400
    page = page_client(used.finance).get("/chargeback/?month=never")
    assert page.status_code == 200 and "not a month like 2026-03" in page.content.decode()
    bad_price = client.post("/api/v1/prices/", {"gpu_model": "L40S", "hourly_price": "-3"}, format="json")
    assert bad_price.status_code == 400 and bad_price.json()["errors"]["hourly_price"]


@pytest.mark.parametrize("persona", PERSONAS)
def test_closing_a_month_from_the_page(used: Org, persona: str) -> None:
    response = page_client(used.persona(persona)).post("/chargeback/close/", {"month": "2026-01"})
    closed = ClosedMonth.objects.filter(period="2026-01-01").exists()
    if persona == "anonymous":
        assert response.status_code == 302 and "/login/" in response["Location"]
    elif persona == "finance":
        assert response.status_code == 302 and response["Location"].endswith("?month=2026-01")
    else:
        assert response.status_code == 404
    assert closed is (persona == "finance")


@pytest.mark.parametrize("persona", PERSONAS)
def test_reading_prices_and_budgets(used: Org, persona: str) -> None:
    client = api_client_for(used.persona(persona))
    prices = client.get("/api/v1/prices/")
    budgets = client.get("/api/v1/budgets/")
    team_budget = client.get(f"/api/v1/teams/{used.alpha.pk}/budget/")
    if persona == "anonymous":
        assert (prices.status_code, budgets.status_code, team_budget.status_code) == (401, 401, 401)
        return
    assert prices.status_code == (200 if persona in FINANCE_READERS else 403)
    assert budgets.status_code == 200  # the budgets of the teams the caller sees
    expected = {"alpha"} if persona in ("member", "lead", "finance", "operator") else set()
    assert {row["team"] for row in budgets.json()["results"]} == expected
    assert team_budget.status_code == (200 if TEAM_SCOPE[persona] else 404)


@pytest.mark.parametrize("persona", PERSONAS)
def test_withdrawing_a_scheduled_price_and_removing_a_budget(used: Org, persona: str) -> None:
    later = actions.set_price(
        used.finance, gpu_model="L40S", hourly_price="2", effective_from=timezone.now() + timedelta(days=2)
    )
    client = api_client_for(used.persona(persona))
    withdraw = client.delete(f"/api/v1/prices/{later.pk}/")
    remove = client.delete(f"/api/v1/teams/{used.alpha.pk}/budget/")
    if persona == "anonymous":
        assert (withdraw.status_code, remove.status_code) == (401, 401)
    elif persona in FINANCE_READERS:
        assert (withdraw.status_code, remove.status_code) == (204, 204)
    else:
        assert withdraw.status_code == 403
        assert remove.status_code == (403 if TEAM_SCOPE[persona] else 404)
