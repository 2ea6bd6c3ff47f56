"""A real OpenID provider (tests/oidc/provider: panva's certified oidc-provider on Node) for the SSO tests.

One provider per pytest process (xdist workers each start their own on a free loopback port), registered with
the portal's live server as its static client, stopped at the end of the session. ``sso_on`` points the
portal's settings at it, through the same ``OIDC_*`` parsing as production (portal/sso/config.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from portal.sso.config import read_sso_config

PROVIDER_DIR = Path(__file__).resolve().parent / "provider"
CLIENT_ID = "gpu-portal"
CLIENT_SECRET = "gpu-portal-test-secret-of-some-length"
PROVIDER_NAME = "Test IdP"

# Users of the provider, with the claims it releases (groups in the ID token, as an operator would set up).
USERS: dict[str, dict[str, Any]] = {
    "lena-sso": {
        "password": "lena-op-password",
        "claims": {
            "preferred_username": "lena.sso",
            "given_name": "Lena",
            "family_name": "Single",
            "email": "lena.sso@example.org",
            "groups": ["gpu-vision-lead", "gpu-language-member", "gpu-nosuchteam-member", "staff-all"],
        },
    },
    "max-sso": {
        "password": "max-op-password",
        "claims": {"preferred_username": "max.sso", "given_name": "Max", "groups": ["gpu-vision-member"]},
    },
    "fred-sso": {
        "password": "fred-op-password",
        "claims": {"preferred_username": "fred.sso", "given_name": "Fred", "groups": ["gpu-finance"]},
    },
    "nora-sso": {
        # In no group at all: the provider sends no groups claim.
        "password": "nora-op-password",
        "claims": {"preferred_username": "nora.sso", "given_name": "Nora"},
    },
    "alice-sso": {
        # Sends the username of the demo's local account alice.
        "password": "alice-op-password",
        "claims": {"preferred_username": "alice", "given_name": "Not Alice", "groups": ["gpu-vision-lead"]},
    },
}


@dataclass
class OpenIdProvider:
    issuer: str
    process: subprocess.Popen[str]

    def next_id_token(self, mode: str) -> None:
        """Test-only switch: the next ID token issued is ``expired``, for a ``wrong-audience`` or has a
        ``bad-signature`` (altered after signing)."""
        data = urllib.parse.urlencode({"mode": mode}).encode()
        url = f"{self.issuer}/__test__/next-id-token"  # http://127.0.0.1:<port>, the provider above
        with urllib.request.urlopen(url, data=data, timeout=10) as response:  # noqa: S310
            assert json.load(response) == {"next_id_token": mode}

    def env(self) -> dict[str, str]:
        return {
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_PROVIDER_NAME": PROVIDER_NAME,
            "OIDC_OP_ISSUER": self.issuer,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.issuer}/auth",
            "OIDC_OP_TOKEN_ENDPOINT": f"{self.issuer}/token",
            "OIDC_OP_JWKS_ENDPOINT": f"{self.issuer}/jwks",
            "OIDC_OP_LOGOUT_ENDPOINT": f"{self.issuer}/session/end",
            "OIDC_RP_SCOPES": "openid email profile groups",
        }


def _ensure_node_modules() -> None:
    if (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.fail("node and npm are needed for the single sign-on tests (the test OpenID provider runs on Node).")
    # xdist workers share the folder: one installs, the others wait for it.
    lock_name = hashlib.sha256(str(PROVIDER_DIR).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"gpu-portal-oidc-npm-{lock_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PROVIDER_DIR, check=True, timeout=300)


def _read_first_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=0.2):
            return process.stdout.readline()
        if process.poll() is not None:
            break
    return ""


@pytest.fixture(scope="session")
def oidc_provider(live_server: Any) -> Iterator[OpenIdProvider]:
    _ensure_node_modules()
    environment = dict(os.environ) | {
        "PORTAL_URL": live_server.url,
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
        "USERS": json.dumps(USERS),
        "ALLOW_TAMPERING": "1",
    }
    process = subprocess.Popen(
        ["node", "provider.mjs"], cwd=PROVIDER_DIR, env=environment, stdout=subprocess.PIPE, text=True
    )
    try:
        line = _read_first_line(process, timeout=30)
        if not line:
            pytest.fail(f"the test OpenID provider did not start (exit status {process.poll()})")
        yield OpenIdProvider(issuer=json.loads(line)["issuer"], process=process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


@pytest.fixture
def sso_on(oidc_provider: OpenIdProvider, settings: Any, monkeypatch: pytest.MonkeyPatch) -> OpenIdProvider:
    """The portal configured for the provider as an operator would: through the OIDC_* variables."""
    for name, value in oidc_provider.env().items():
        monkeypatch.setenv(name, value)
    config = read_sso_config()
    settings.SSO = config
    for name, value in config.library_settings().items():
        setattr(settings, name, value)
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "portal.sso.backend.PortalOIDCBackend",
    ]
    return oidc_provider
