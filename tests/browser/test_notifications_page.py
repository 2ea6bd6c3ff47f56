"""The notifications page in headless Chromium: the unread badge in the top bar, the list, Mark all read."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import PASSWORD, make_workspace
from workspaces.models import WorkspaceEvent
from workspaces.notifications import delivery
from workspaces.notifications.models import Notification
from workspaces.transitions import note

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_notification_shows_with_the_badge_and_can_be_marked_read(
    page: Page, live_server, org: Org, quiet_cluster_loops: None
) -> None:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    workspace = make_workspace(org.alpha, org.member, offering, name="seg-tests", state="running")
    note(workspace, "Idle warning. GPU below 5 % for 60 min.", source="idle", details={"event": "idle_warning"})
    delivery.deliver(WorkspaceEvent.objects.filter(workspace=workspace).latest("id").pk)
    notification = Notification.objects.get(recipient=org.member)

    log_in(page, live_server.url, org.member.username, PASSWORD)
    expect(page.locator("#unread-count")).to_have_text("1")
    page.click("#notifications-link")

    row = page.locator(f"#notifications tr[data-id='{notification.pk}']")
    expect(row).to_have_class("notification unread")
    expect(row).to_contain_text("seg-tests is idle and will be reclaimed")
    expect(row.locator("a")).to_have_attribute("href", f"/workspaces/{workspace.pk}/")
    page.click("#mark-all-read button")

    expect(page.locator(".messages")).to_contain_text("Marked 1 notification read.")
    expect(page.locator("#unread-count")).to_have_count(0)
    expect(row).to_have_class("notification")
    notification.refresh_from_db()
    assert notification.read_at is not None
    row.locator("a").click()
    expect(page).to_have_url(f"{live_server.url}/workspaces/{workspace.pk}/")


def test_someone_else_sees_none_of_it(page: Page, live_server, org: Org, quiet_cluster_loops: None) -> None:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    workspace = make_workspace(org.alpha, org.member, offering, state="running")
    note(workspace, "Idle warning.", source="idle", details={"event": "idle_warning"})
    delivery.deliver(WorkspaceEvent.objects.filter(workspace=workspace).latest("id").pk)

    log_in(page, live_server.url, org.outsider.username, PASSWORD)
    expect(page.locator("#notifications-link")).to_be_visible()
    expect(page.locator("#unread-count")).to_have_count(0)
    page.click("#notifications-link")
    expect(page.locator("#no-notifications")).to_be_visible()
