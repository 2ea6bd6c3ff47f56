"""The notification pages and API: each person sees and marks only their own; bad settings change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client, RequestFactory

from tests.catalogue import install_offerings
from tests.conftest import Org, api_client_for
from tests.factories import PASSWORD, make_workspace
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.notifications.context_processors import unread_notifications
from workspaces.notifications.kinds import DEFAULT_EMAIL_KINDS, OPS_KINDS
from workspaces.notifications.models import Notification, NotificationPreference
from workspaces.transitions import note


@pytest.fixture
def notebook(org: Org) -> Workspace:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    return make_workspace(org.alpha, org.member, offering, name="seg-tests", state="running")


def notify(user: Any, workspace: Workspace, text: str) -> Notification:
    note(workspace, text, source="idle", details={"event": "idle_warning"})
    event = WorkspaceEvent.objects.filter(workspace=workspace).latest("id")
    return Notification.objects.create(recipient=user, workspace=workspace, event=event, kind="idle_warning", text=text)


def signed_in(user: Any) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_the_list_shows_only_my_notifications_newest_first_with_the_badge(org: Org, notebook: Workspace) -> None:
    older = notify(org.member, notebook, "alice's first")
    newer = notify(org.member, notebook, "alice's second")
    notify(org.lead, notebook, "for lena only")

    response = signed_in(org.member).get("/notifications/")

    assert response.status_code == 200
    html = response.content.decode()
    assert html.index("alice&#x27;s second") < html.index("alice&#x27;s first")
    assert "for lena only" not in html
    assert f'data-id="{newer.pk}"' in html and f'data-id="{older.pk}"' in html
    assert 'id="unread-count" aria-label="2 unread">2<' in html
    assert f'href="/workspaces/{notebook.pk}/"' in html


def test_the_badge_costs_one_query(org: Org, notebook: Workspace, django_assert_num_queries: Any) -> None:
    notify(org.member, notebook, "one")
    notify(org.lead, notebook, "not mine")
    request = RequestFactory().get("/")
    request.user = org.member
    count = unread_notifications(request)["unread_notifications"]
    with django_assert_num_queries(1):
        assert count() == 1
    request.user = AnonymousUser()
    assert unread_notifications(request) == {}


def test_mark_all_read_marks_only_mine(org: Org, notebook: Workspace) -> None:
    mine = notify(org.member, notebook, "mine")
    theirs = notify(org.lead, notebook, "theirs")

    response = signed_in(org.member).post("/notifications/read/")

    assert response.status_code == 302
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.read_at is not None
    assert theirs.read_at is None


def test_mark_all_read_wants_a_post(org: Org) -> None:
    assert signed_in(org.member).get("/notifications/read/").status_code == 405


@pytest.mark.parametrize("path", ["/notifications/", "/notifications/settings/"])
def test_the_pages_want_a_signed_in_person(path: str, org: Org) -> None:
    response = Client().get(path)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert Client().post("/notifications/read/").status_code == 302


def test_the_api_lists_only_my_notifications(org: Org, notebook: Workspace) -> None:
    mine = notify(org.member, notebook, "mine")
    notify(org.lead, notebook, "theirs")

    for who in ("member", "operator", "outsider"):
        response = api_client_for(getattr(org, who)).get("/api/v1/notifications/")
        assert response.status_code == 200
        ids = [row["id"] for row in response.json()["results"]]
        assert ids == ([mine.pk] if who == "member" else [])
    body = api_client_for(org.member).get("/api/v1/notifications/").json()["results"][0]
    assert body["workspace"] == notebook.pk and body["workspace_name"] == "seg-tests"
    assert body["kind"] == "idle_warning" and body["read_at"] is None
    assert api_client_for(None).get("/api/v1/notifications/").status_code == 401


def test_the_api_marks_given_ids_and_ignores_other_peoples(org: Org, notebook: Workspace) -> None:
    first, second = notify(org.member, notebook, "one"), notify(org.member, notebook, "two")
    theirs = notify(org.lead, notebook, "theirs")

    response = api_client_for(org.member).post(
        "/api/v1/notifications/read/", {"ids": [first.pk, theirs.pk]}, format="json"
    )

    assert response.status_code == 200 and response.json() == {"marked": 1}
    for n in (first, second, theirs):
        n.refresh_from_db()
    assert first.read_at is not None and second.read_at is None and theirs.read_at is None
    unread = api_client_for(org.member).get("/api/v1/notifications/?unread=1").json()["results"]
    assert [row["id"] for row in unread] == [second.pk]
    # Without ids: all of mine.
    assert api_client_for(org.member).post("/api/v1/notifications/read/", {}, format="json").json() == {"marked": 1}
    # Someone else cannot mark mine.
    assert api_client_for(org.lead).post("/api/v1/notifications/read/", {"ids": [second.pk]}, format="json").json() == {
        "marked": 0
    }


@pytest.mark.parametrize("ids", ["nope", ["x"], [0], [-1], [2**64], {"a": 1}])
def test_bad_ids_are_refused_with_400(org: Org, notebook: Workspace, ids: Any) -> None:
    mine = notify(org.member, notebook, "one")
    response = api_client_for(org.member).post("/api/v1/notifications/read/", {"ids": ids}, format="json")
    assert response.status_code == 400
    mine.refresh_from_db()
    assert mine.read_at is None


def test_settings_show_the_defaults_and_save_choices(org: Org) -> None:
    client = signed_in(org.member)
    html = client.get("/notifications/settings/").content.decode()
    for kind in set(DEFAULT_EMAIL_KINDS) - OPS_KINDS:  # operations alerts: offered to operators and leads
        assert f'name="email_kinds" value="{kind}"' in html
    assert 'value="started" id="id_email_kinds_0"' in html  # unchecked: off by default
    response = client.post(
        "/notifications/settings/",
        {
            "email_kinds": ["failed"],
            "webhook_url": "https://hooks.slack.com/services/T/B/X",
            "webhook_kinds": ["failed"],
        },
    )
    assert response.status_code == 302
    preference = NotificationPreference.objects.get(user=org.member)
    assert preference.email_kinds == ["failed"]
    assert preference.webhook_url == "https://hooks.slack.com/services/T/B/X"
    assert preference.webhook_kinds == ["failed"]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"webhook_url": "javascript:alert(1)", "webhook_kinds": ["failed"]}, "webhook_url"),
        ({"webhook_url": "ftp://example.org/hook", "webhook_kinds": ["failed"]}, "webhook_url"),
        ({"webhook_url": "https://exa mple.org/hook"}, "webhook_url"),
        ({"webhook_url": "https://example.org/\x07hook"}, "webhook_url"),
        ({"webhook_url": "", "webhook_kinds": ["failed"]}, "webhook_url"),
        ({"email_kinds": ["not-a-kind"]}, "email_kinds"),
        ({"webhook_url": "https://example.org/" + "a" * 600}, "webhook_url"),
    ],
)
def test_bad_settings_answer_400_with_the_field_and_change_nothing(org: Org, data: dict[str, Any], field: str) -> None:
    NotificationPreference.objects.create(user=org.member, email_kinds=["failed"])
    response = signed_in(org.member).post("/notifications/settings/", data)
    assert response.status_code == 400
    assert f'data-field="{field}"' in response.content.decode()
    preference = NotificationPreference.objects.get(user=org.member)
    assert (preference.email_kinds, preference.webhook_url) == (["failed"], "")


def test_settings_are_per_person(org: Org) -> None:
    signed_in(org.lead).post("/notifications/settings/", {"email_kinds": []})
    assert NotificationPreference.objects.get(user=org.lead).email_kinds == []
    assert not NotificationPreference.objects.filter(user=org.member).exists()
