"""The OIDC_* variables: off by default, required ones named, bad values stop start-up naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from portal.sso.claims import LEAD, map_groups
from portal.sso.config import read_sso_config

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = {
    "OIDC_RP_CLIENT_ID": "gpu-portal",
    "OIDC_RP_CLIENT_SECRET": "s3cret",
    "OIDC_OP_ISSUER": "https://idp.example.org",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://idp.example.org/auth",
    "OIDC_OP_TOKEN_ENDPOINT": "https://idp.example.org/token",
    "OIDC_OP_JWKS_ENDPOINT": "https://idp.example.org/jwks",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("OIDC_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_sso_is_off_unless_a_client_id_is_set(clean_env: pytest.MonkeyPatch) -> None:
    config = read_sso_config()
    assert not config.enabled
    assert config.library_settings() == {}
    assert not settings.SSO.enabled  # the tests' settings: off
    assert settings.AUTHENTICATION_BACKENDS == ["django.contrib.auth.backends.ModelBackend"]


def test_the_defaults_once_on(clean_env: pytest.MonkeyPatch) -> None:
    for name, value in MINIMAL.items():
        clean_env.setenv(name, value)
    config = read_sso_config()
    assert config.enabled
    assert config.sign_algorithm == "RS256"
    assert config.groups_claim == "groups"
    assert config.username_claim == "preferred_username"
    assert map_groups(["gpu-vision-lead"], config.rules).teams == {"vision": LEAD}
    assert map_groups(["gpu-operators", "gpu-finance"], config.rules).org_roles == {"operator", "finance"}
    library = config.library_settings()
    assert library["OIDC_USE_NONCE"] is True
    assert library["OIDC_USE_PKCE"] is True
    assert library["OIDC_ALLOW_UNSECURED_JWT"] is False
    assert library["OIDC_RP_SIGN_ALGO"] == "RS256"


def test_the_secret_can_come_from_a_file(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in MINIMAL.items():
        clean_env.setenv(name, value)
    clean_env.delenv("OIDC_RP_CLIENT_SECRET")
    (tmp_path / "secret").write_text("from-a-file\n")
    clean_env.setenv("OIDC_RP_CLIENT_SECRET_FILE", str(tmp_path / "secret"))
    assert read_sso_config().client_secret == "from-a-file"


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"OIDC_RP_CLIENT_SECRET": ""}, "OIDC_RP_CLIENT_SECRET"),
        ({"OIDC_OP_ISSUER": ""}, "OIDC_OP_ISSUER"),
        ({"OIDC_OP_TOKEN_ENDPOINT": "idp.example.org/token"}, "OIDC_OP_TOKEN_ENDPOINT"),
        ({"OIDC_OP_LOGOUT_ENDPOINT": "ftp://idp/logout"}, "OIDC_OP_LOGOUT_ENDPOINT"),
        ({"OIDC_RP_SIGN_ALGO": "HS256"}, "OIDC_RP_SIGN_ALGO"),
        ({"OIDC_RP_SCOPES": "email profile"}, "OIDC_RP_SCOPES"),
        ({"OIDC_CLOCK_SKEW_SECONDS": "a minute"}, "OIDC_CLOCK_SKEW_SECONDS"),
        ({"OIDC_VERIFY_TLS": "perhaps"}, "OIDC_VERIFY_TLS"),
        ({"OIDC_LEAD_GROUP_PATTERN": "gpu-lead"}, "OIDC_LEAD_GROUP_PATTERN"),
        ({"OIDC_GROUP_MAP": '{"g": "vision:boss"}'}, "OIDC_GROUP_MAP"),
    ],
)
def test_bad_values_name_the_variable(clean_env: pytest.MonkeyPatch, changes: dict[str, str], named: str) -> None:
    for name, value in (MINIMAL | changes).items():
        clean_env.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=named):
        read_sso_config()


def test_a_bad_value_stops_start_up() -> None:
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PORTAL_", "DATABASE_", "OIDC_"))
    }
    environment |= {"PORTAL_ENV": "demo", "PORTAL_VAR_DIR": "/tmp/portal-settings-test"} | MINIMAL
    environment["OIDC_GROUP_MAP"] = "{not json"
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured")
    assert "OIDC_GROUP_MAP" in last_line
