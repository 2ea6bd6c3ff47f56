"""The lab-month benchmark's HTML report opens offline in headless Chromium and draws its charts."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Route

from scheduling.benchmarks.lab import __main__ as cli

pytestmark = pytest.mark.browser


def test_the_report_opens_offline_and_shows_its_charts(tmp_path, browser: Browser, capsys):
    report = tmp_path / "report.html"
    assert cli.main(["--days", "2", "--arms", "static,portal-shared", "--html", str(report)]) == 0
    assert f"report: {report}" in capsys.readouterr().out

    context = browser.new_context(viewport={"width": 1300, "height": 1000}, offline=True)
    fetched: list[str] = []

    def refuse(route: Route) -> None:  # anything but the file itself would be a fetch the report must not need
        fetched.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith("file:"), refuse)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg")
    assert page.locator(".js-plotly-plot").count() == 2
    # Held and busy per arm; waits per arm and kind: every series drawn as a line.
    assert page.locator(".js-plotly-plot").nth(0).locator(".scatterlayer .trace").count() == 4
    assert page.locator(".js-plotly-plot").nth(1).locator(".scatterlayer .trace").count() == 4
    assert page.locator(".js-plotly-plot .scatterlayer path.js-line").count() == 8
    rows = page.locator("table tr")
    assert rows.count() == 3 and "portal-shared" in rows.nth(2).inner_text()
    assert not fetched and not errors
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    context.close()
