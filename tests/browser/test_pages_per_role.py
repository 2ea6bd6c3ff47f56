"""In the browser, per role: no page offers an action its viewer cannot take; a lead manages members on the
team page; Delete asks first; the list reads on a 390 px screen. Screenshots go to /tmp/shots/role-*.png."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from portal.demo import PEOPLE, seed_demo_organisation
from portal.models import AuditEvent, Membership, Team, User
from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORDS = {person.username: person.password for person in PEOPLE}
SHOTS = Path("/tmp/shots")

# alice's running job and stopped notebook in Vision, as each demo person sees them.
ROLES = {
    "alice": ("owner", {"stop", "delete"}, {"resume", "delete"}),
    "carol": ("teammate", set(), set()),
    "lena": ("lead", {"stop", "delete"}, {"resume", "delete"}),
    "fiona": ("finance", set(), set()),
    "oscar": ("operator", {"stop", "delete"}, {"resume", "delete"}),
    "bob": ("outsider", None, None),
}


@pytest.fixture
def demo(live_server: object, quiet_cluster_loops: None) -> dict[str, Workspace]:
    # Rows staged by hand: the session's worker (if a stack test started it) must not act on them.
    seed_demo_organisation()
    offering = install_offerings()["h100-80gb-hbm3"]
    vision = Team.objects.get(slug="vision")
    alice = User.objects.get(username="alice")
    common = {"team": vision, "owner": alice, "offering": offering, "gpu_count": 1, "cpu_millis": 1000,
              "memory_mib": 1024, "max_runtime_seconds": 8 * 3600, "gpu_equivalents": Decimal(1)}  # fmt: skip
    running = Workspace.objects.create(
        name="resnet-train", kind="job", image="nvcr.io/nvidia/pytorch:25.05-py3", command=["python", "train.py"],
        state=Workspace.State.RUNNING, node_name="gpu-h100-0", started_at=timezone.now() - timedelta(hours=2),
        **common,
    )  # fmt: skip
    stopped = Workspace.objects.create(
        name="vision-nb", kind="notebook", image="quay.io/jupyter/scipy-notebook:x",
        priority=Workspace.Priority.INTERACTIVE, state=Workspace.State.STOPPED, **common,
    )  # fmt: skip
    return {"running": running, "stopped": stopped}


def verbs_in(page: Page, selector: str) -> set[str]:
    return set(page.locator(f"{selector} [data-verb]").evaluate_all("els => els.map(e => e.dataset.verb)"))


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"role-{name}.png"), full_page=True)


@pytest.mark.parametrize("username", sorted(ROLES))
def test_no_page_offers_an_action_its_viewer_cannot_take(
    page: Page, live_server, demo: dict[str, Workspace], username: str
) -> None:
    role, on_running, on_stopped = ROLES[username]
    running, stopped = demo["running"], demo["stopped"]
    log_in(page, live_server.url, username, PASSWORDS[username])
    page.goto(f"{live_server.url}/workspaces/")
    if on_running is None:
        expect(page.locator("#workspaces tbody")).to_contain_text("No workspaces yet.")
        expect(page.locator("#new-workspace")).to_be_visible()  # bob is in Language: he may request
        assert page.request.get(f"{live_server.url}/workspaces/{running.pk}/").status == 404
        shot(page, f"{role}-list")
        return
    expect(page.locator(f"tr[data-id='{running.pk}']")).to_contain_text("left")  # when it ends
    assert verbs_in(page, f"tr[data-id='{running.pk}']") == on_running
    assert verbs_in(page, f"tr[data-id='{stopped.pk}']") == on_stopped
    expect(page.locator("#new-workspace")).to_have_count(0 if role == "finance" else 1)
    page.wait_for_timeout(2300)  # one refresh of the rows by the page's script: still the same offers
    assert verbs_in(page, f"tr[data-id='{running.pk}']") == on_running
    shot(page, f"{role}-list")

    page.goto(f"{live_server.url}/workspaces/{running.pk}/")
    expect(page.locator("#ends")).to_contain_text("left")
    buttons = {v for v in ("stop", "resume", "extend", "delete") if page.locator(f"#{v}").count()}
    assert buttons == (on_running | {"extend"} if on_running else set())
    shot(page, f"{role}-detail")


def test_a_lead_manages_members_on_the_team_page(page: Page, live_server, demo: dict[str, Workspace]) -> None:
    vision = Team.objects.get(slug="vision")
    log_in(page, live_server.url, "lena", PASSWORDS["lena"])
    page.goto(f"{live_server.url}/teams/{vision.pk}/")
    page.fill("#id_add_username", "nobody-here")
    page.click("#add-member button[type=submit]")
    expect(page.locator(".messages .error")).to_contain_text("No active user named 'nobody-here'.")
    page.fill("#id_add_username", "bob")
    page.click("#add-member button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Added bob to Vision as member.")
    bob_row = page.locator("#members tr[data-user=bob]")
    bob_row.locator("select[name=role]").select_option("lead")
    bob_row.locator(".member-role button").click()
    expect(page.locator(".messages")).to_contain_text("bob is now a lead of Vision.")
    expect(page.locator("#members tr[data-user=bob] .role")).to_have_text("Lead")
    shot(page, "lead-members")
    page.locator("#members tr[data-user=bob] .member-remove button").click()
    expect(page.locator(".messages")).to_contain_text("Removed bob from Vision.")
    expect(page.locator("#members tr[data-user=bob]")).to_have_count(0)
    assert list(AuditEvent.objects.filter(team=vision).order_by("id").values_list("action", flat=True)) == [
        "membership.add", "membership.role", "membership.remove",
    ]  # fmt: skip
    assert not Membership.objects.filter(team=vision, user__username="bob").exists()


def test_members_see_the_team_page_without_controls(page: Page, live_server, demo: dict[str, Workspace]) -> None:
    vision = Team.objects.get(slug="vision")
    log_in(page, live_server.url, "alice", PASSWORDS["alice"])
    page.goto(f"{live_server.url}/teams/{vision.pk}/")
    expect(page.locator("#members")).to_contain_text("lena")
    expect(page.locator("#add-member, .member-remove, .member-role")).to_have_count(0)
    shot(page, "member-team")


def test_delete_asks_before_it_deletes(page: Page, live_server, demo: dict[str, Workspace]) -> None:
    stopped = demo["stopped"]
    log_in(page, live_server.url, "alice", PASSWORDS["alice"])
    page.goto(f"{live_server.url}/workspaces/{stopped.pk}/")
    page.click("#delete")
    expect(page.locator("#confirm-delete")).to_contain_text("Delete vision-nb?")
    shot(page, "owner-delete-confirmation")
    stopped.refresh_from_db()
    assert stopped.state == Workspace.State.STOPPED  # asking changed nothing
    page.click("#cancel-delete")
    expect(page.locator("#confirm-delete")).to_have_count(0)
    page.click("#delete")
    page.click("#confirm-delete-button")
    expect(page.locator("#state")).to_have_text("deleted")
    stopped.refresh_from_db()
    assert stopped.state == Workspace.State.DELETED


def test_the_list_reads_on_a_390_px_screen(browser: Browser, live_server, demo: dict[str, Workspace]) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2)
    page = context.new_page()
    try:
        log_in(page, live_server.url, "lena", PASSWORDS["lena"])
        page.goto(f"{live_server.url}/workspaces/")
        row = page.locator(f"tr[data-id='{demo['running'].pk}']")
        expect(row).to_contain_text("resnet-train")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing scrolls sideways
        box = row.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        stop = row.locator("[data-verb=stop]")
        expect(stop).to_be_visible()
        stop_box = stop.bounding_box()
        assert stop_box is not None and stop_box["x"] + stop_box["width"] <= 390
        shot(page, "lead-list-390px")
    finally:
        context.close()


def test_error_pages_keep_the_layout(page: Page, live_server, demo: dict[str, Workspace]) -> None:
    log_in(page, live_server.url, "fiona", PASSWORDS["fiona"])
    response = page.goto(f"{live_server.url}/no-such-page/")
    assert response is not None and response.status == 404
    expect(page.locator("#main-nav")).to_be_visible()
    expect(page.locator("#error-page a.button")).to_have_attribute("href", "/")
    shot(page, "finance-404")


@pytest.mark.parametrize("username", sorted(ROLES))
def test_the_apis_browser_page_offers_no_change(
    page: Page, live_server, demo: dict[str, Workspace], username: str
) -> None:
    """DRF's page offered DELETE on a workspace to whoever could read it, and on a 404 to anybody; now no API
    page offers a change, and extra actions are links only where they answer GET."""
    role, on_running, _ = ROLES[username]
    running = demo["running"]
    vision = Team.objects.get(slug="vision")
    log_in(page, live_server.url, username, PASSWORDS[username])
    forms = ("#deleteModal", "form.button-form", "#post-object-form", "#put-object-form", "#post-generic-content-form",
             "#put-generic-content-form")  # fmt: skip
    for path in (f"/api/v1/workspaces/{running.pk}/", "/api/v1/workspaces/", f"/api/v1/teams/{vision.pk}/policy/"):
        response = page.goto(f"{live_server.url}{path}", wait_until="domcontentloaded")
        assert response is not None and response.headers["content-type"].startswith("text/html")
        expect(page.locator(".response-info")).to_be_visible()
        expect(page.locator(", ".join(forms))).to_have_count(0)
        for verb in ("DELETE", "OPTIONS", "POST", "PUT", "PATCH"):
            expect(page.get_by_role("button", name=verb, exact=True)).to_have_count(0)
    page.goto(f"{live_server.url}/api/v1/workspaces/{running.pk}/")
    actions = page.locator("#extra-actions-menu + .dropdown-menu a")
    if on_running is None:  # bob is outside Vision: a 404, with nothing to act on
        expect(page.locator(".response-info")).to_contain_text("404")
        expect(actions).to_have_count(0)
    else:
        expect(page.locator(".response-info")).to_contain_text("resnet-train")
        assert {text.strip() for text in actions.all_text_contents()} == {"Logs", "Activity", "Cluster events"}
    shot(page, f"{role}-api-workspace")
