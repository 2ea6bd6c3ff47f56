"""The alert check on the database: figures read through the metrics' functions, states kept across checks,
each firing and resolution recorded once (retries, concurrent checks), told to the right people once."""

from __future__ import annotations

import threading
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.utils import timezone

from portal.alerts import readings, record
from portal.alerts.models import OpsAlert, OpsAlertNotice
from portal.billing.models import CapacityInterval
from portal.metrics import gauges
from portal.models import Membership
from portal.tasks import check_alerts
from scheduling.models import KubeApiErrorCount, LoopStat
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import GpuOffering, Workspace, WorkspaceEvent
from workspaces.notifications import delivery
from workspaces.notifications.kinds import Kind
from workspaces.notifications.models import Delivery, Notification

H100 = "H100-80GB-HBM3"


@pytest.fixture(autouse=True)
def _mail(settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.METRICS_EVENT_SETTLE_SECONDS = 0


@pytest.fixture
def h100(org: Org) -> GpuOffering:
    return install_offerings()["h100-80gb-hbm3"]


@pytest.fixture
def emails(org: Org) -> Org:
    for user in (org.member, org.lead, org.beta_lead, org.outsider, org.operator, org.finance):
        user.email = f"{user.username}@example.org"
        user.save(update_fields=["email"])
    return org


def queued(org: Org, offering: GpuOffering, since: datetime, **fields: Any) -> Workspace:
    workspace = make_workspace(org, offering, **fields)
    Workspace.objects.filter(pk=workspace.pk).update(created_at=since)
    event = WorkspaceEvent.objects.create(workspace=workspace, from_state="", to_state="queued", reason="x")
    WorkspaceEvent.objects.filter(pk=event.pk).update(at=since)
    return workspace


def stalled_since(at: datetime) -> None:
    LoopStat.objects.update_or_create(loop="scheduling_cycle", defaults={"last_finished_at": at})
    LoopStat.objects.update_or_create(loop="reconcile", defaults={"last_finished_at": at + timedelta(days=1)})


def notices(key: str) -> list[str]:
    return list(OpsAlertNotice.objects.filter(alert__key=key).order_by("id").values_list("change", flat=True))


def test_within_quota_waits_per_team_agree_with_the_gauge(org: Org, h100: GpuOffering) -> None:
    now = timezone.now()
    set_quota(org.alpha, H100, 2)
    set_quota(org.beta, H100, 1)
    make_workspace(org, h100, name="running", state="running")
    queued(org, h100, now - timedelta(minutes=30), name="fits")  # 1 held + 1 <= 2
    queued(org, h100, now - timedelta(minutes=50), name="too-big", gpu_count=2, gpu_equivalents=2)
    queued(org, h100, now - timedelta(minutes=40), name="beta-fits", team=org.beta)
    queue = gauges.queue(now)
    per_team = queue.within
    assert set(per_team) == {(H100, org.alpha.pk), (H100, org.beta.pk)}
    assert per_team[(H100, org.alpha.pk)].requests == 1
    assert 30 * 60 <= per_team[(H100, org.alpha.pk)].oldest_seconds < 31 * 60
    within = queue.within_per_model()
    assert within[H100].requests == sum(w.requests for w in per_team.values())
    assert within[H100].oldest_seconds == max(w.oldest_seconds for w in per_team.values())


def test_admission_waits_of_the_last_hour_only(org: Org, h100: GpuOffering) -> None:
    now = timezone.now()
    old = queued(org, h100, now - timedelta(hours=3), name="old")
    event = WorkspaceEvent.objects.create(workspace=old, from_state="queued", to_state="admitted", reason="x")
    WorkspaceEvent.objects.filter(pk=event.pk).update(at=now - timedelta(hours=2))  # waited 1 h, 2 h ago
    recent = queued(org, h100, now - timedelta(minutes=50), name="recent")
    event = WorkspaceEvent.objects.create(workspace=recent, from_state="queued", to_state="admitted", reason="x")
    WorkspaceEvent.objects.filter(pk=event.pk).update(at=now - timedelta(minutes=10))  # waited 40 min
    buckets, count = readings.admission_waits(now)[H100]
    assert count == 1
    assert buckets[8] == 0 and buckets[9] == 1  # above 1800 s, within 3600 s


def test_a_stalled_loop_fires_after_its_minute_and_resolves_once(org: Org) -> None:
    t0 = timezone.now()
    stalled_since(t0 - timedelta(minutes=6))
    key = "loop_stalled:scheduling_cycle"
    assert record.check(t0) == []
    alert = OpsAlert.objects.get(key=key)
    assert alert.pending_since == t0 and not alert.firing and alert.severity == "critical"
    assert record.check(t0 + timedelta(seconds=30)) == []
    made = record.check(t0 + timedelta(seconds=61))
    assert made is not None and len(made) == 1 and notices(key) == ["fired"]
    assert record.check(t0 + timedelta(seconds=61)) == []  # the same check again (a retry) tells nothing
    assert record.check(t0 + timedelta(minutes=3)) == []
    stalled_since(t0 + timedelta(minutes=3))  # the worker is back
    resolved = record.check(t0 + timedelta(minutes=4))
    assert resolved is not None and len(resolved) == 1 and notices(key) == ["fired", "resolved"]
    notice = OpsAlertNotice.objects.get(pk=resolved[0])
    assert notice.episode == t0 + timedelta(seconds=61) and "ago" in notice.message
    assert notices("loop_stalled:reconcile") == []


def test_contention_and_api_failures_from_the_tables(org: Org, h100: GpuOffering) -> None:
    t0 = timezone.now()
    CapacityInterval.objects.create(
        gpu_model=H100, gpus=1, rate=Decimal(2), started_at=t0, last_seen_at=t0, period=date(2026, 12, 1)
    )
    queued(org, h100, t0, name="a", gpu_count=2, gpu_equivalents=2)
    KubeApiErrorCount.objects.create(status="503", count=100)
    KubeApiErrorCount.objects.create(status="409", count=1000)  # conflicts are answers, not failures
    for minute in range(31):
        KubeApiErrorCount.objects.filter(status="503").update(count=100 + 6 * minute)  # 6 a minute
        record.check(t0 + timedelta(minutes=minute))
    api = OpsAlert.objects.get(key="kube_api_errors")
    assert api.firing and api.value == pytest.approx(6.0)
    assert api.firing_since == t0 + timedelta(minutes=6)  # a rate from minute 1, held 5 minutes
    contention = OpsAlert.objects.get(key=f"contention:{H100}")
    assert contention.firing and contention.firing_since == t0 + timedelta(minutes=30)
    assert contention.severity == "warning" and "2 GPU-equivalents" in contention.message


def test_two_checks_at_once_record_one_notice(org: Org, transactional_db: None, quiet_cluster_loops: None) -> None:
    t0 = timezone.now()
    stalled_since(t0 - timedelta(minutes=10))
    record.check(t0)
    results: list[list[int] | None] = []
    start = threading.Barrier(2)

    def run() -> None:
        try:
            start.wait()
            results.append(record.check(t0 + timedelta(minutes=2)))
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(len(r or []) for r in results) == [0, 1]
    assert notices("loop_stalled:scheduling_cycle") == ["fired"]


def test_a_notice_is_made_once_even_if_a_check_records_it_again(org: Org) -> None:
    t0 = timezone.now()
    stalled_since(t0 - timedelta(minutes=10))
    record.check(t0)
    record.check(t0 + timedelta(minutes=2))
    alert = OpsAlert.objects.get(key="loop_stalled:scheduling_cycle")
    # A retried check that lost its own state write but meets the notice row: it does not make another.
    from portal.alerts.states import FIRED, Notice

    again = Notice(alert.key, FIRED, alert.firing_since, alert.value, alert.message)  # type: ignore[arg-type]
    assert record._notice(alert, again, t0 + timedelta(minutes=2)) is None
    assert notices(alert.key) == ["fired"]


def test_the_task_enqueues_delivery_and_operators_are_told_once(
    emails: Org, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    import workspaces.tasks  # noqa: F401 (registers the delivery task)

    stalled_since(timezone.now() - timedelta(hours=1))
    OpsAlert.objects.create(
        key="loop_stalled:scheduling_cycle",
        kind="loop_stalled",
        severity="critical",
        pending_since=timezone.now() - timedelta(minutes=5),
        checked_at=timezone.now(),
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert check_alerts() == 1
    rows = Notification.objects.filter(ops_notice__isnull=False)
    assert [(n.recipient, n.kind, n.email_status) for n in rows] == [(emails.operator, Kind.OPS_CRITICAL, "sent")]
    assert "Critical: Control loop stalled. The scheduling_cycle loop's last successful pass" in rows[0].text
    assert mail.outbox[0].subject == "[GPU portal] Critical: Control loop stalled"
    notice = OpsAlertNotice.objects.get()
    assert notice.delivered_at is not None
    delivery.deliver_ops_alert(notice.pk)  # redelivered: no second row, no second mail
    assert rows.count() == 1 and len(mail.outbox) == 1
    assert record.undelivered(timezone.now() + timedelta(minutes=10)) == []


def _notice(org: Org, kind: str, severity: str, team: Any = None) -> OpsAlertNotice:
    now = timezone.now()
    alert = OpsAlert.objects.create(
        key=f"{kind}:x:{team.pk if team else ''}", kind=kind, severity=severity, team=team, firing_since=now,
        checked_at=now, message="Something is wrong.",
    )  # fmt: skip
    return OpsAlertNotice.objects.create(alert=alert, change="fired", episode=now, at=now, message=alert.message)


def test_a_team_alert_reaches_its_leads_and_the_operators_only(emails: Org) -> None:
    notice = _notice(emails, "within_quota", "critical", emails.alpha)
    outcome = delivery.deliver_ops_alert(notice.pk)
    told = set(Notification.objects.filter(ops_notice=notice).values_list("recipient__username", flat=True))
    assert told == {"lena", "oscar"}  # not alice (member), bert (beta's lead), fiona, charlie
    assert outcome.notifications == 2 and {m.to[0] for m in mail.outbox} == {"lena@example.org", "oscar@example.org"}
    row = Notification.objects.get(ops_notice=notice, recipient=emails.lead)
    assert row.team == emails.alpha and row.link_path == "/alerts/" and row.subject_name == "Alpha"
    assert row.text.startswith("Critical: Waiting within quota (Alpha). Something is wrong.")


def test_a_team_idle_warning_reaches_its_leads_without_mail_by_default(emails: Org) -> None:
    notice = _notice(emails, "idle_team", "warning", emails.beta)
    delivery.deliver_ops_alert(notice.pk)
    rows = Notification.objects.filter(ops_notice=notice)
    assert [(n.recipient.username, n.kind, n.email_status) for n in rows] == [("bert", Kind.OPS_WARNING, Delivery.OFF)]
    assert mail.outbox == []


def test_an_inactive_operator_or_a_former_lead_hears_nothing(emails: Org) -> None:
    emails.operator.is_active = False
    emails.operator.save(update_fields=["is_active"])
    Membership.objects.filter(team=emails.alpha, user=emails.lead).update(role=Membership.Role.MEMBER)
    notice = _notice(emails, "within_quota", "critical", emails.alpha)
    assert delivery.deliver_ops_alert(notice.pk).notifications == 0
