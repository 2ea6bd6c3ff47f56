"""A person's first minute: log in, see my team, see the menu my roles give me."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from portal.demo import PEOPLE, seed_demo_organisation
from tests.browser_fixtures import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORDS = {person.username: person.password for person in PEOPLE}

MENUS = {
    "alice": ["home", "workspaces", "queue", "teams", "api"],
    "lena": ["home", "workspaces", "queue", "teams", "alerts", "api"],
    "fiona": ["home", "teams", "chargeback", "api"],
    "oscar": ["home", "workspaces", "queue", "teams", "chargeback", "cluster", "alerts", "api", "admin"],
}


@pytest.fixture
def demo(live_server: object) -> None:
    seed_demo_organisation()


def test_it_lets_alice_log_in_and_see_her_team(page: Page, live_server, demo: None) -> None:
    log_in(page, live_server.url, "alice", PASSWORDS["alice"])
    expect(page.locator("h1")).to_have_text("Welcome, Alice Archer")
    rows = page.locator("#my-teams tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Vision")
    expect(rows.first).to_contain_text("RES-4100")
    page.click("#my-teams a")
    expect(page.locator("#members")).to_contain_text("lena")


def test_it_shows_an_error_for_a_wrong_password(page: Page, live_server, demo: None) -> None:
    log_in(page, live_server.url, "alice", "not-her-password")
    expect(page.locator("[role=alert]")).to_contain_text("Please enter a correct username and password")
    expect(page).to_have_url(f"{live_server.url}/login/")
    expect(page.locator("#main-nav")).to_have_count(0)


@pytest.mark.parametrize("username", sorted(MENUS))
def test_it_shows_each_role_its_menu(page: Page, live_server, demo: None, username: str) -> None:
    log_in(page, live_server.url, username, PASSWORDS[username])
    expect(page.locator("#main-nav")).to_be_visible()
    keys = page.locator("#main-nav a").evaluate_all("links => links.map(a => a.dataset.nav)")
    assert keys == MENUS[username]
    for link in page.locator("#main-nav a").all():
        href = link.get_attribute("href")
        assert href is not None
        response = page.request.get(f"{live_server.url}{href}")
        assert response.status == 200, f"{username}: menu link {href} answered {response.status}"


def test_it_logs_out(page: Page, live_server, demo: None) -> None:
    log_in(page, live_server.url, "bob", PASSWORDS["bob"])
    page.click("text=Log out")
    expect(page).to_have_url(f"{live_server.url}/login/")
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(f"{live_server.url}/login/?next=/")


def test_it_renders_the_interactive_api_docs(page: Page, live_server, demo: None) -> None:
    log_in(page, live_server.url, "alice", PASSWORDS["alice"])
    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .opblock-summary-path", has_text="/api/v1/teams/").first).to_be_visible()
    # Every asset came from the portal itself: nothing was fetched from another origin.
    resources = page.evaluate("performance.getEntriesByType('resource').map(r => r.name)")
    assert resources
    assert all(url.startswith(live_server.url) for url in resources), resources
