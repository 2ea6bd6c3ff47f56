"""Bad settings stop start-up with a message that names the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal import env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"DJANGO_DEBUG": "maybe"}, "DJANGO_DEBUG"),
        ({"PORTAL_ENV": "production", "DJANGO_SECRET_KEY": ""}, "DJANGO_SECRET_KEY"),
        ({"DATABASE_URL": "nosuchdb://x/y"}, "DATABASE_URL"),
        ({"CELERY_TASK_TIME_LIMIT": "ten"}, "CELERY_TASK_TIME_LIMIT"),
        ({"PORTAL_ENV": "staging"}, "PORTAL_ENV"),
    ],
)
def test_it_refuses_to_start_with_bad_settings(variables: dict[str, str], named: str) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_", "DATABASE_"))}
    environment |= {"PORTAL_ENV": "demo", "PORTAL_VAR_DIR": "/tmp/portal-settings-test"} | variables
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured")
    assert named in last_line


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("1", True), ("off", False), ("No", False), ("", True)])
def test_it_parses_booleans(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("SOME_FLAG", raw)
    assert env.env_bool("SOME_FLAG", True) is expected


def test_it_checks_integer_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_NUMBER", "3")
    with pytest.raises(ImproperlyConfigured, match="SOME_NUMBER=3 is below the minimum of 10"):
        env.env_int("SOME_NUMBER", 20, minimum=10)


def test_it_reads_secrets_from_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "key"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("SOME_SECRET_FILE", str(secret))
    assert env.env_secret("SOME_SECRET") == "s3cret"
    monkeypatch.setenv("SOME_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="SOME_SECRET_FILE"):
        env.env_secret("SOME_SECRET")
