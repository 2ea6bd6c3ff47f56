"""Signing in through a real OpenID provider, in headless Chromium: the whole code flow, claims to teams,
logout at the provider, and the refusals a forged or stale token gets."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from portal.demo import PEOPLE, seed_demo_organisation
from portal.models import Membership, OrgRole, User
from tests.browser_fixtures import log_in
from tests.oidc.conftest import PROVIDER_NAME, USERS, OpenIdProvider

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(live_server: object) -> None:
    seed_demo_organisation()


def sign_in_at_provider(page: Page, base_url: str, login: str) -> None:
    page.goto(f"{base_url}/login/")
    page.click("#sso-login")
    # Now at the provider (another origin): its own sign-in form.
    expect(page.locator("#op-login")).to_be_visible()
    assert not page.url.startswith(base_url)
    page.fill("#op-login", login)
    page.fill("#op-password", USERS[login]["password"])
    page.click("#op-submit")


def test_the_login_page_offers_the_provider_beside_the_password_form(page: Page, live_server, sso_on, demo) -> None:
    page.goto(f"{live_server.url}/login/")
    expect(page.locator("#sso-login")).to_have_text(f"Sign in with {PROVIDER_NAME}")
    expect(page.locator("#id_username")).to_be_visible()
    expect(page.locator("#id_password")).to_be_visible()


def test_the_login_page_is_unchanged_without_sso(page: Page, live_server, demo) -> None:
    page.goto(f"{live_server.url}/login/")
    expect(page.locator("#id_username")).to_be_visible()
    expect(page.locator("#sso-login")).to_have_count(0)
    assert page.request.get(f"{live_server.url}/oidc/authenticate/").status == 404


def test_a_lead_signs_in_and_lands_with_her_teams(page: Page, live_server, sso_on, demo) -> None:
    sign_in_at_provider(page, live_server.url, "lena-sso")
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator("h1")).to_have_text("Welcome, Lena Single")
    expect(page.locator(".who")).to_have_text("lena.sso")
    rows = page.locator("#my-teams tbody tr")
    expect(rows).to_have_count(2)  # gpu-nosuchteam-member names no team: ignored
    expect(rows.filter(has_text="Vision")).to_contain_text("Lead")
    expect(rows.filter(has_text="Language")).to_contain_text("Member")
    # A lead sees the lead's controls on her team's page; a member's team shows her none.
    rows.filter(has_text="Vision").locator("a").click()
    expect(page.locator("#add-member")).to_be_visible()
    page.goto(f"{live_server.url}/")
    rows.filter(has_text="Language").locator("a").click()
    expect(page.locator("#members")).to_be_visible()
    expect(page.locator("#add-member")).to_have_count(0)
    user = User.objects.get(username="lena.sso")
    assert user.sso_identity.subject == "lena-sso"
    assert not user.has_usable_password()
    assert set(user.memberships.values_list("team__slug", "role", "managed_by_sso")) == {
        ("vision", "lead", True),
        ("language", "member", True),
    }


def test_finance_by_group_sees_chargeback(page: Page, live_server, sso_on, demo) -> None:
    sign_in_at_provider(page, live_server.url, "fred-sso")
    expect(page.locator("#main-nav a[data-nav=chargeback]")).to_be_visible()
    assert OrgRole.objects.filter(user__username="fred.sso", role="finance", managed_by_sso=True).exists()


def test_someone_in_no_group_gets_no_team(page: Page, live_server, sso_on, demo) -> None:
    sign_in_at_provider(page, live_server.url, "nora-sso")
    expect(page.locator("h1")).to_have_text("Welcome, Nora")
    expect(page.locator("main")).to_contain_text("You are not in any team yet")
    expect(page.locator("#my-teams")).to_have_count(0)
    page.goto(f"{live_server.url}/workspaces/new/")
    expect(page.locator("main")).to_contain_text("You are in no team, so you cannot request a workspace")
    assert not Membership.objects.filter(user__username="nora.sso").exists()


def test_logout_ends_the_portal_session_and_the_providers(page: Page, live_server, sso_on, demo) -> None:
    sign_in_at_provider(page, live_server.url, "max-sso")
    expect(page.locator("#main-nav")).to_be_visible()
    page.click("text=Log out")
    # The provider's end-session page (RP-initiated logout, with the ID token as hint).
    expect(page.locator("#op-logout-yes")).to_be_visible()
    page.goto(f"{live_server.url}/")  # the portal's session is already gone
    expect(page).to_have_url(f"{live_server.url}/login/?next=/")
    page.go_back()
    page.click("#op-logout-yes")
    expect(page).to_have_url(f"{live_server.url}/login/")
    # Signed out at the provider too: signing in asks for the password again.
    page.click("#sso-login")
    expect(page.locator("#op-login")).to_be_visible()


def test_local_accounts_still_log_in_with_a_password(page: Page, live_server, sso_on, demo) -> None:
    alice = next(person for person in PEOPLE if person.username == "alice")
    log_in(page, live_server.url, "alice", alice.password)
    expect(page.locator("h1")).to_have_text("Welcome, Alice Archer")
    page.click("text=Log out")
    expect(page).to_have_url(f"{live_server.url}/login/")  # no provider logout for a local session


def test_a_provider_user_cannot_take_a_local_accounts_name(page: Page, live_server, sso_on, demo) -> None:
    sign_in_at_provider(page, live_server.url, "alice-sso")
    expect(page).to_have_url(f"{live_server.url}/login/")
    expect(page.locator(".messages .sso-error")).to_contain_text("already has another account named 'alice'")
    expect(page.locator("#main-nav")).to_have_count(0)
    assert not User.objects.get(username="alice").memberships.filter(role="lead").exists()


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("wrong-audience", "was issued for another application, not this portal (wrong audience)"),
        ("expired", "sign-in token has expired"),
        ("bad-signature", "has an invalid signature"),
    ],
)
def test_it_refuses_a_bad_id_token_with_a_clear_message(
    page: Page, live_server, sso_on: OpenIdProvider, demo, mode: str, message: str
) -> None:
    sso_on.next_id_token(mode)
    sign_in_at_provider(page, live_server.url, "max-sso")
    expect(page).to_have_url(f"{live_server.url}/login/")
    expect(page.locator(".messages .sso-error")).to_contain_text(message)
    expect(page.locator("#sso-login")).to_be_visible()
    expect(page.locator("#main-nav")).to_have_count(0)
    assert not User.objects.filter(username="max.sso").exists()
    # The same person, with a sound token, then gets in.
    page.click("#sso-login")
    expect(page.locator("#main-nav")).to_be_visible()
    assert User.objects.get(username="max.sso").memberships.get().role == "member"
