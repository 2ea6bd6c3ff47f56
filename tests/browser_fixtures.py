"""Headless Chromium (Debian's package) driven by Playwright against pytest-django's live server.

Playwright's own browser downloads are never used: ``executable_path`` points at /usr/bin/chromium.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from playwright.sync_api import Browser, Page, sync_playwright

from tests.db_quiet import others_done

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make between page
# actions are still synchronous, so Django's async-safety guard would refuse them without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does).")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class _RequestsInFlight:
    """Counts the requests the live server (threads of this process) is answering, by Django's signals."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def started(self, **kwargs: object) -> None:
        with self._lock:
            self.count += 1

    def finished(self, **kwargs: object) -> None:
        with self._lock:
            self.count -= 1

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until none is being answered. Closing the browser does not stop the server's thread answering
        the page's last fetch or redirect, and its queries would race the database flush that ends the test
        (a deadlock with TRUNCATE, or rows made after it)."""
        deadline = time.monotonic() + timeout
        while self.count > 0 and time.monotonic() < deadline:
            time.sleep(0.02)


@pytest.fixture
def page(browser: Browser, django_db_blocker: Any) -> Iterator[Page]:
    # No ignore_https_errors: notebook links go through the simulated cluster's plain-HTTP door, as the
    # demo's do, so a link to its self-signed API server would fail here as it would stop a visitor.
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(10_000)
    in_flight = _RequestsInFlight()
    request_started.connect(in_flight.started)
    request_finished.connect(in_flight.finished)
    try:
        yield context.new_page()
        context.close()  # no new requests; those being answered finish below
        in_flight.settle()
        with django_db_blocker.unblock():
            others_done(timeout_s=10.0)  # and their statements, if the server's threads left any running
    finally:
        request_started.disconnect(in_flight.started)
        request_finished.disconnect(in_flight.finished)


def log_in(page: Page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
