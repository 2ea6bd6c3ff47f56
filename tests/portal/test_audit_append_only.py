"""The audit log is append-only for everyone: through the ORM's normal paths, the admin and the API."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.models import AppendOnly, AuditEvent, User
from tests.factories import make_team, make_user


@pytest.fixture
def event(db) -> AuditEvent:
    team = make_team()
    return AuditEvent.record(actor=make_user(), action="quota.set", target=team, team=team, after={"x": 1})


def test_it_refuses_to_change_or_delete_an_event_through_the_orm(event: AuditEvent) -> None:
    event.action = "forged"
    with pytest.raises(AppendOnly):
        event.save()
    with pytest.raises(AppendOnly):
        event.delete()
    with pytest.raises(AppendOnly):
        AuditEvent.objects.filter(pk=event.pk).update(action="forged")
    with pytest.raises(AppendOnly):
        AuditEvent.objects.all().delete()
    event.refresh_from_db()
    assert event.action == "quota.set"


def test_deleting_the_actor_keeps_the_event(event: AuditEvent) -> None:
    assert event.actor is not None
    event.actor.delete()
    event.refresh_from_db()
    assert event.actor is None and event.action == "quota.set"


def test_a_superuser_cannot_change_or_delete_events_in_the_admin(event: AuditEvent, client: Client) -> None:
    admin = User.objects.create_superuser("root", "root@example.org", "pw-for-root")
    client.force_login(admin)
    base = f"/admin/portal/auditevent/{event.pk}"
    assert client.get(f"{base}/delete/").status_code == 403
    assert client.post(f"{base}/delete/", {"post": "yes"}).status_code == 403
    changelist = client.get("/admin/portal/auditevent/")
    assert changelist.status_code == 200
    assert b"delete_selected" not in changelist.content
    page = client.get(f"{base}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert AuditEvent.objects.filter(pk=event.pk, action="quota.set").exists()
