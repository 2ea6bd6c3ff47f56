"""Budget alerts as notifications: a team budget's threshold crossed (portal.billing BudgetAlert) reaches the
team's leads (at 100 % its members too) in the portal, by email through a real SMTP server (aiosmtpd on
loopback) and by webhook through a local HTTP receiver, once, with the figures and a link to the team's costs."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

import workspaces.tasks  # noqa: F401 (registers the task)
from portal.billing.models import Budget, BudgetAlert
from portal.celery import app
from portal.models import Team, User
from portal.tasks import DELIVER_BUDGET_ALERT
from tests.catalogue import install_offerings
from tests.conftest import Org, api_client_for
from tests.factories import PASSWORD, make_workspace
from tests.workspaces import test_notifications_delivery as delivery_tests
from tests.workspaces.test_notifications_delivery import Inbox, Receiver, free_port, hook_url
from workspaces.models import WorkspaceEvent
from workspaces.notifications import delivery
from workspaces.notifications.kinds import DEFAULT_EMAIL_KINDS, DEFAULT_WEBHOOK_KINDS, Kind
from workspaces.notifications.models import Delivery, Notification, NotificationPreference
from workspaces.transitions import note

# The delivery tests' real SMTP server (aiosmtpd) and webhook receiver, as fixtures of this module too.
smtp_server = delivery_tests.smtp_server
mail_to_smtp = delivery_tests.mail_to_smtp
webhook = delivery_tests.webhook

DECEMBER = date(2026, 12, 1)
TWENTY_DAYS_IN = datetime(2026, 12, 21, tzinfo=UTC)  # 20 of December's 31 days gone


@pytest.fixture(autouse=True)
def _euro_in_utc(settings: Any) -> None:
    settings.BILLING_CURRENCY = "EUR"
    settings.TIME_ZONE = "UTC"


@pytest.fixture
def emails(org: Org) -> Org:
    for user in (org.member, org.lead, org.beta_lead, org.outsider, org.operator, org.finance):
        user.email = f"{user.username}@example.org"
        user.save(update_fields=["email"])
    return org


def alert(
    team: Team,
    threshold: int,
    *,
    spent: str = "812.4000",
    amount: str = "1000.00",
    unit: str = Budget.Unit.MONEY,
    at: datetime = TWENTY_DAYS_IN,
) -> BudgetAlert:
    return BudgetAlert.objects.create(
        team=team, period=DECEMBER, threshold=threshold, at=at, spent=Decimal(spent), amount=Decimal(amount), unit=unit
    )


def told(budget_alert: BudgetAlert) -> set[int]:
    return set(Notification.objects.filter(budget_alert=budget_alert).values_list("recipient", flat=True))


def signed_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


@pytest.mark.parametrize("threshold", [50, 80])
def test_below_100_only_the_team_leads_hear(emails: Org, mail_to_smtp: Inbox, threshold: int) -> None:
    crossed = alert(emails.alpha, threshold)

    outcome = delivery.deliver_budget_alert(crossed.pk)

    assert outcome.as_dict() == {"notifications": 1, "sent": 1, "failed": 0, "retry": False}
    assert told(crossed) == {emails.lead.pk}
    assert [m.rcpt_tos for m in mail_to_smtp.messages] == [["lena@example.org"]]
    notification = Notification.objects.get(budget_alert=crossed)
    assert (notification.kind, notification.workspace, notification.event) == (Kind.BUDGET, None, None)


def test_at_100_every_member_hears_too(emails: Org, mail_to_smtp: Inbox) -> None:
    Budget.objects.create(team=emails.alpha, amount=Decimal("1000.00"), policy=Budget.Policy.BLOCK_BATCH)
    crossed = alert(emails.alpha, 100, spent="1003.5000")

    outcome = delivery.deliver_budget_alert(crossed.pk)

    assert (outcome.notifications, outcome.sent) == (2, 2)
    assert told(crossed) == {emails.member.pk, emails.lead.pk}  # not beta's lead, nobody outside the team
    assert sorted(m.rcpt_tos[0] for m in mail_to_smtp.messages) == ["alice@example.org", "lena@example.org"]


def test_people_who_cannot_sign_in_are_not_told(emails: Org) -> None:
    User.objects.filter(pk=emails.lead.pk).update(is_active=False)
    crossed = alert(emails.alpha, 100)
    delivery.deliver_budget_alert(crossed.pk)
    assert told(crossed) == {emails.member.pk}


def test_email_webhook_and_row_are_made_once_under_a_repeated_delivery(
    emails: Org, mail_to_smtp: Inbox, webhook: Receiver
) -> None:
    NotificationPreference.objects.create(user=emails.lead, webhook_url=hook_url(webhook))
    crossed = alert(emails.alpha, 80)

    first = delivery.deliver_budget_alert(crossed.pk)
    again = delivery.deliver_budget_alert(crossed.pk)

    assert (first.sent, first.failed) == (2, 0)
    assert (again.notifications, again.sent, again.failed, again.retry) == (1, 0, 0, False)
    notification = Notification.objects.get(budget_alert=crossed)
    assert (notification.email_status, notification.webhook_status) == (Delivery.SENT, Delivery.SENT)
    assert (notification.email_attempts, notification.webhook_attempts) == (1, 1)
    assert len(mail_to_smtp.messages) == 1
    costs = f"https://gpu.example.org/teams/{emails.alpha.pk}/costs/"
    [text] = mail_to_smtp.texts()
    assert "Subject: [GPU portal] Alpha: Team budget at 80 %" in text
    assert "Alpha has used 80 % of its budget for December 2026: 812.40 EUR of 1,000.00 EUR." in text
    assert f"See the team's costs: {costs}" in text
    assert "https://gpu.example.org/notifications/settings/" in text
    assert [p["json"] for p in webhook.received] == [{"text": f"{notification.text} {costs}"}]


def test_the_text_has_the_figures_and_the_month_end_forecast(org: Org) -> None:
    crossed = alert(org.alpha, 80)
    delivery.deliver_budget_alert(crossed.pk)
    # 812.40 EUR in 20 of 31 days: 812.40 / 20 x 31 = 1,259.22 EUR at the month's end.
    assert Notification.objects.get(budget_alert=crossed).text == (
        "Alpha has used 80 % of its budget for December 2026: 812.40 EUR of 1,000.00 EUR. "
        "At this month's rate it ends at 1,259.22 EUR."
    )


def test_gpu_hours_in_the_month_first_hour_have_no_forecast(org: Org) -> None:
    crossed = alert(
        org.alpha,
        50,
        spent="155.2500",
        amount="310.50",
        unit=Budget.Unit.GPU_HOURS,
        at=datetime(2026, 12, 1, 0, 30, tzinfo=UTC),
    )
    delivery.deliver_budget_alert(crossed.pk)
    assert Notification.objects.get(budget_alert=crossed).text == (
        "Alpha has used 50 % of its budget for December 2026: 155.25 GPU-h of 310.50 GPU-h."
    )


@pytest.mark.parametrize(
    ("policy", "says"),
    [
        (Budget.Policy.WARN, "Requests are not refused."),
        (
            Budget.Policy.BLOCK_BATCH,
            "New training jobs are refused until next month or until finance raises the budget.",
        ),
        (Budget.Policy.BLOCK_ALL, "New requests are refused until next month or until finance raises the budget."),
    ],
)
def test_at_100_the_text_says_what_the_policy_does(org: Org, policy: str, says: str) -> None:
    Budget.objects.create(team=org.alpha, amount=Decimal("1000.00"), policy=policy)
    crossed = alert(org.alpha, 100, spent="1000.0000")
    delivery.deliver_budget_alert(crossed.pk)
    for notification in Notification.objects.filter(budget_alert=crossed):
        assert notification.text == (
            "Alpha has used 100 % of its budget for December 2026: 1,000.00 EUR of 1,000.00 EUR. "
            f"At this month's rate it ends at 1,550.00 EUR. {says}"
        )


def test_below_100_the_policy_is_not_mentioned(org: Org) -> None:
    Budget.objects.create(team=org.alpha, amount=Decimal("1000.00"), policy=Budget.Policy.BLOCK_ALL)
    crossed = alert(org.alpha, 80)
    delivery.deliver_budget_alert(crossed.pk)
    assert "refused" not in Notification.objects.get(budget_alert=crossed).text


def test_budget_alerts_are_on_by_default_and_follow_the_settings(emails: Org, mail_to_smtp: Inbox) -> None:
    assert Kind.BUDGET in DEFAULT_EMAIL_KINDS and Kind.BUDGET in DEFAULT_WEBHOOK_KINDS
    NotificationPreference.objects.create(user=emails.member, email_kinds=["failed"])
    crossed = alert(emails.alpha, 100)

    delivery.deliver_budget_alert(crossed.pk)

    statuses = dict(Notification.objects.filter(budget_alert=crossed).values_list("recipient", "email_status"))
    assert statuses == {emails.member.pk: Delivery.OFF, emails.lead.pk: Delivery.SENT}  # in her portal all the same
    assert [m.rcpt_tos for m in mail_to_smtp.messages] == [["lena@example.org"]]


def test_the_settings_page_offers_the_budget_kind_ticked(org: Org) -> None:
    html = signed_in(org.lead).get("/notifications/settings/").content.decode()
    for field in ("email_kinds", "webhook_kinds"):
        assert f'name="{field}" value="budget"' in html
    assert "Team budget" in html


def test_an_alert_gone_with_its_team_is_nothing_to_do(org: Org) -> None:
    alert_id = alert(org.alpha, 50).pk
    BudgetAlert.objects.filter(pk=alert_id).delete()
    assert delivery.deliver_budget_alert(alert_id).notifications == 0


def test_a_notification_is_of_an_event_or_of_a_budget_alert_never_both_or_neither(org: Org) -> None:
    workspace = make_workspace(org.alpha, org.member, install_offerings()["a100-sxm4-80gb-1g-10gb"], state="running")
    note(workspace, "Idle warning.", source="idle", details={"event": "idle_warning"})
    event = WorkspaceEvent.objects.filter(workspace=workspace).latest("id")
    crossed = alert(org.alpha, 50)
    for of in ({"event": event, "workspace": workspace, "budget_alert": crossed}, {}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Notification.objects.create(recipient=org.lead, kind=Kind.BUDGET, text="x", **of)
    Notification.objects.create(recipient=org.lead, budget_alert=crossed, kind=Kind.BUDGET, text="x")
    with pytest.raises(IntegrityError), transaction.atomic():
        Notification.objects.create(recipient=org.lead, budget_alert=crossed, kind=Kind.BUDGET, text="again")


def test_the_task_retries_a_failed_email_a_bounded_number_of_times(org: Org, settings: Any) -> None:
    org.lead.email = "lena@example.org"
    org.lead.save(update_fields=["email"])
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2  # nobody there
    settings.NOTIFY_MAX_ATTEMPTS = 2
    crossed = alert(org.alpha, 50)

    # By the name billing enqueues; apply() runs it here, its retries at once.
    result = app.tasks[DELIVER_BUDGET_ALERT].apply(args=(crossed.pk,))

    assert result.successful()
    assert result.get() == {"notifications": 1, "sent": 0, "failed": 1, "retry": False}  # the last attempt
    notification = Notification.objects.get(budget_alert=crossed)
    assert (notification.email_status, notification.email_attempts) == (Delivery.FAILED, 2)


def test_the_list_page_shows_a_budget_notification_linking_to_the_team_costs(org: Org) -> None:
    crossed = alert(org.alpha, 100)
    delivery.deliver_budget_alert(crossed.pk)
    mine = Notification.objects.get(budget_alert=crossed, recipient=org.member)

    client = signed_in(org.member)
    response = client.get("/notifications/")

    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-id="{mine.pk}" data-kind="budget"' in html
    assert "<td>Team budget</td>" in html
    assert f'<a href="/teams/{org.alpha.pk}/costs/">Alpha</a>' in html
    assert "Alpha has used 100 % of its budget for December 2026" in html
    assert client.get(f"/teams/{org.alpha.pk}/costs/").status_code == 200  # a member may follow it


def test_the_api_gives_a_budget_notification_no_workspace_and_a_link(org: Org) -> None:
    crossed = alert(org.alpha, 80)
    delivery.deliver_budget_alert(crossed.pk)

    [body] = api_client_for(org.lead).get("/api/v1/notifications/").json()["results"]

    assert body["kind"] == "budget"
    assert body["workspace"] is None and body["workspace_name"] is None
    assert body["team"] == org.alpha.pk and body["team_name"] == "Alpha"
    assert body["link"] == f"http://testserver/teams/{org.alpha.pk}/costs/"
    assert body["text"].startswith("Alpha has used 80 % of its budget")
    assert api_client_for(org.member).get("/api/v1/notifications/").json()["results"] == []  # not at 80 %


def test_the_api_links_workspace_notifications_to_their_workspace(org: Org) -> None:
    workspace = make_workspace(org.alpha, org.member, install_offerings()["a100-sxm4-80gb-1g-10gb"], name="seg-tests")
    note(workspace, "Possibly stuck.", source="idle", details={"event": "possibly_stuck"})
    delivery.deliver(WorkspaceEvent.objects.filter(workspace=workspace).latest("id").pk)

    [body] = api_client_for(org.member).get("/api/v1/notifications/").json()["results"]

    assert (body["workspace"], body["workspace_name"]) == (workspace.pk, "seg-tests")
    assert (body["team"], body["team_name"]) == (org.alpha.pk, "Alpha")
    assert body["link"] == f"http://testserver/workspaces/{workspace.pk}/"


def test_an_outsider_sees_none_of_it(org: Org) -> None:
    for threshold in (50, 80, 100):
        delivery.deliver_budget_alert(alert(org.alpha, threshold).pk)
    assert Notification.objects.filter(recipient=org.outsider).count() == 0
    html = signed_in(org.outsider).get("/notifications/").content.decode()
    assert 'id="no-notifications"' in html and 'data-kind="budget"' not in html and "has used" not in html
    for who in (org.outsider, org.operator, org.finance, org.beta_lead):
        assert api_client_for(who).get("/api/v1/notifications/").json()["results"] == []


def test_the_list_page_and_the_api_cost_the_same_queries_however_many_rows(org: Org) -> None:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    client, api = signed_in(org.lead), api_client_for(org.lead)

    def add_both(threshold: int) -> None:
        workspace = make_workspace(org.alpha, org.lead, offering, state="running")
        note(workspace, "Idle warning.", source="idle", details={"event": "idle_warning"})
        delivery.deliver(WorkspaceEvent.objects.filter(workspace=workspace).latest("id").pk)
        delivery.deliver_budget_alert(alert(org.alpha, threshold).pk)

    def queries(path: str, via: Any) -> int:
        via.get(path)  # once before counting: a first request may touch the session or the token
        with CaptureQueriesContext(connection) as captured:
            assert via.get(path).status_code == 200
        return len(captured)

    add_both(50)
    page, listed = queries("/notifications/", client), queries("/api/v1/notifications/", api)
    add_both(80)
    add_both(100)
    assert queries("/notifications/", client) == page
    assert queries("/api/v1/notifications/", api) == listed
    assert len(api.get("/api/v1/notifications/").json()["results"]) == 6
