"""The request form in the browser shows per team only what the team's policy allows, and follows a change of
team and offering. Screenshots of the form go to /tmp/shots/form-*.png."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from portal.demo import PEOPLE, seed_demo_organisation
from portal.models import Team, User
from scheduling.demo import seed_demo_catalogue
from scheduling.models import MemberCap, TeamPolicy
from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings
from workspaces.models import GpuOffering

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = {p.username: p.password for p in PEOPLE}
SHOTS = Path("/tmp/shots")  # screenshots for people to look at
VISION_ALLOWS = ["a100-sxm4-80gb-1g-10gb", "a100-sxm4-80gb-2g-20gb"]


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#request-form").screenshot(path=str(SHOTS / f"form-{name}.png"))


def visible_offerings(page: Page) -> list[str]:
    slugs: list[str] = page.locator("#offerings tbody tr:visible").evaluate_all("rows => rows.map(r => r.dataset.slug)")
    return slugs


def count_options(page: Page) -> list[str]:
    values: list[str] = page.locator("#id_gpu_count option").evaluate_all("options => options.map(o => o.value)")
    return values


def test_a_member_sees_per_team_only_what_the_policy_allows(page: Page, live_server) -> None:
    seed_demo_organisation()
    seed_demo_catalogue()
    install_offerings()
    vision = Team.objects.get(slug="vision")
    carol = User.objects.get(username="carol")  # in Vision (restricted by its lead) and Platform ML (not)
    policy, _ = TeamPolicy.objects.update_or_create(  # the demo seeds Vision's idle rules
        team=vision, defaults={"default_runtime_hours": 2, "max_runtime_hours": 4}
    )
    policy.allowed_offerings.set(GpuOffering.objects.filter(slug__in=VISION_ALLOWS))
    MemberCap.objects.create(team=vision, user=carol, flavour="A100-SXM4-80GB", cap=Decimal("0.5"))

    log_in(page, live_server.url, "carol", PASSWORD["carol"])
    page.goto(f"{live_server.url}/workspaces/new/")
    page.select_option("#id_team", "vision")
    assert visible_offerings(page) == VISION_ALLOWS
    expect(page.locator("#offering-h100-80gb-hbm3")).to_be_disabled()
    expect(page.locator("#runtime-max")).to_have_text("4")
    expect(page.locator("#id_max_runtime_hours")).to_have_value("2")
    expect(page.locator("#id_max_runtime_hours")).to_have_attribute("max", "4")
    # Vision has 4 A100 GPU-equivalents left, but Carol's lead caps her at 0.5 of them.
    expect(page.locator("tr[data-slug='a100-sxm4-80gb-1g-10gb'] .quota-left")).to_have_text("0.5")
    page.check("#offering-a100-sxm4-80gb-1g-10gb")
    assert count_options(page) == ["1"]
    expect(page.locator("#id_name")).to_have_attribute("maxlength", "40")
    expect(page.locator("#id_priority")).to_be_hidden()  # notebooks are always interactive
    shot(page, "vision-notebook")

    page.select_option("#id_team", "platform-ml")
    assert "h100-80gb-hbm3" in visible_offerings(page)
    assert len(visible_offerings(page)) == GpuOffering.objects.filter(enabled=True).count()
    expect(page.locator("#offering-a100-sxm4-80gb-1g-10gb")).to_be_checked()  # still allowed: kept
    expect(page.locator("#runtime-max")).to_have_text("72")
    expect(page.locator("#id_max_runtime_hours")).to_have_value("8")
    page.check("#offering-h100-80gb-hbm3")
    assert count_options(page) == ["1", "2", "4", "8"]
    page.check("input[name=kind][value=job]")
    expect(page.locator("#id_priority")).to_be_visible()
    assert page.locator("#id_priority option").evaluate_all("os => os.map(o => o.value)") == ["high", "normal", "batch"]
    expect(page.locator("#multi-worker-storage")).to_be_visible()
    expect(page.locator("#multi-worker-storage")).to_contain_text("Workers spread over several nodes run with no home")
    shot(page, "platform-ml-job")

    page.select_option("#id_team", "vision")  # H100 is not Vision's: it goes, and the choice with it
    assert visible_offerings(page) == VISION_ALLOWS
    expect(page.locator("#offering-h100-80gb-hbm3")).not_to_be_checked()
    expect(page.locator("#id_max_runtime_hours")).to_have_value("2")

    page.fill("#id_name", "train-seg")
    page.check("#offering-a100-sxm4-80gb-1g-10gb")
    page.fill("#id_image", "scipy-notebook")
    page.fill("#id_command", "python train.py")
    page.click("#submit-request")
    expect(page.locator("[data-field=image]")).to_have_text(
        "scipy-notebook is a notebook image; a training job needs a training job image: cuda-base, pytorch."
    )
    assert visible_offerings(page) == VISION_ALLOWS  # sent back for Vision, still only Vision's offerings
    shot(page, "vision-job-error")


def test_an_outsider_is_told_they_are_in_no_team(page: Page, live_server) -> None:
    seed_demo_organisation()
    User.objects.create_user("olga", password="olga-outside-1")
    log_in(page, live_server.url, "olga", "olga-outside-1")
    page.goto(f"{live_server.url}/workspaces/new/")
    expect(page.locator("#no-team")).to_contain_text("You are in no team")
    expect(page.locator("#no-team")).to_contain_text("Oscar Operator")
    expect(page.locator("#request-form")).to_have_count(0)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "form-outsider.png"))
