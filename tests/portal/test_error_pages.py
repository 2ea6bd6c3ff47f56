"""403, 404 and 500 answer in the site's layout with a way back; the demo never shows Django's debug
pages (DEBUG is off there, and WhiteNoise still serves the static files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.template.loader import render_to_string
from django.test import Client

from tests import factories
from tests.conftest import Org

ROOT = Path(__file__).resolve().parents[2]


def test_a_404_is_in_the_sites_layout_with_a_way_back(org: Org) -> None:
    client = Client()
    client.force_login(org.member)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert 'id="main-nav"' in html and 'data-status="404"' in html
    assert 'href="/"' in html and "Back to the start page" in html
    assert "URLconf" not in html
    other_team = factories.make_team()
    assert client.get(f"/teams/{other_team.pk}/").status_code == 404


def test_a_403_is_in_the_sites_layout_and_says_why(org: Org) -> None:
    client = Client()
    client.force_login(org.member)
    response = client.post(f"/teams/{org.alpha.pk}/members/", {"op": "add", "username": "charlie"})
    assert response.status_code == 403
    html = response.content.decode()
    assert 'id="main-nav"' in html and 'data-status="403"' in html
    assert "Only this team&#x27;s leads and operators can change its members." in html
    assert "Back to the start page" in html


def test_the_500_page_needs_no_request_and_has_a_way_back() -> None:
    html = render_to_string("500.html")
    assert "Something went wrong" in html and 'href="/"' in html and "portal.css" in html


DEMO_PROBE = """
import django
django.setup()
from django.conf import settings
from django.test import Client
client = Client()
missing = client.get("/no-such-page/")
css = client.get("/static/css/portal.css")
print(settings.DEBUG, missing.status_code, "URLconf" in missing.content.decode(),
      'data-status="404"' in missing.content.decode(), css.status_code)
"""


def test_the_demo_shows_the_portals_404_not_djangos_debug_page(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_", "DATABASE_"))}
    environment |= {"PORTAL_ENV": "demo", "PORTAL_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "portal.settings"}
    result = subprocess.run(
        [sys.executable, "-c", DEMO_PROBE], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "404", "False", "True", "200"]
