"""The ``OIDC_*`` settings, read and checked once at start-up (``portal/settings.py``).

Single sign-on is on when ``OIDC_RP_CLIENT_ID`` is set; then the provider's issuer, endpoints and the client
secret are required. A bad value stops start-up with ``ImproperlyConfigured`` naming the variable, as every
reader in ``portal/env.py`` does. Each variable is described in ``docker/.env.example`` and docs/sso.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_choice, env_float, env_int, env_list, env_secret, env_str
from portal.sso.claims import GroupRules, compile_team_pattern, parse_group_map

SIGN_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")


@dataclass(frozen=True)
class SsoConfig:
    """What the portal's own SSO code reads. The library's settings are :meth:`library_settings`."""

    enabled: bool = False
    provider_name: str = "single sign-on"
    client_id: str = ""
    client_secret: str = ""
    issuer: str = ""
    authorization_endpoint: str = ""
    token_endpoint: str = ""
    jwks_endpoint: str = ""
    logout_endpoint: str = ""
    scopes: str = "openid email profile"
    sign_algorithm: str = "RS256"
    clock_skew_seconds: int = 60
    timeout_seconds: float = 10.0
    verify_tls: bool = True
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"
    rules: GroupRules = field(default_factory=GroupRules)

    def library_settings(self) -> dict[str, Any]:
        """mozilla-django-oidc's settings: it reads these names from ``django.conf.settings``."""
        if not self.enabled:
            return {}
        return {
            "OIDC_RP_CLIENT_ID": self.client_id,
            "OIDC_RP_CLIENT_SECRET": self.client_secret,
            "OIDC_RP_SIGN_ALGO": self.sign_algorithm,
            "OIDC_RP_SCOPES": self.scopes,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": self.authorization_endpoint,
            "OIDC_OP_TOKEN_ENDPOINT": self.token_endpoint,
            "OIDC_OP_JWKS_ENDPOINT": self.jwks_endpoint,
            # Claims come from the verified ID token alone (portal/sso/backend.py): no userinfo call.
            "OIDC_OP_USER_ENDPOINT": "",
            # Both are the library's defaults; spelled out because the checks must never be off.
            "OIDC_USE_NONCE": True,
            "OIDC_VERIFY_KID": True,
            "OIDC_ALLOW_UNSECURED_JWT": False,
            "OIDC_USE_PKCE": True,
            # Kept in the session for the provider's logout (id_token_hint).
            "OIDC_STORE_ID_TOKEN": True,
            "OIDC_TIMEOUT": self.timeout_seconds,
            "OIDC_VERIFY_SSL": self.verify_tls,
            "LOGIN_REDIRECT_URL_FAILURE": "/login/",
        }


def _required_url(name: str) -> str:
    value = env_str(name).strip()
    if not value:
        raise ImproperlyConfigured(f"{name} must be set when single sign-on is on (OIDC_RP_CLIENT_ID is set).")
    return _url(name, value)


def _url(name: str, value: str) -> str:
    if value and not value.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"{name}={value!r} must be an http:// or https:// URL.")
    return value


def read_sso_config() -> SsoConfig:
    client_id = env_str("OIDC_RP_CLIENT_ID").strip()
    if not client_id:
        return SsoConfig()
    secret = (env_secret("OIDC_RP_CLIENT_SECRET") or "").strip()
    if not secret:
        raise ImproperlyConfigured(
            "OIDC_RP_CLIENT_SECRET (or OIDC_RP_CLIENT_SECRET_FILE) must be set when OIDC_RP_CLIENT_ID is set."
        )
    scopes = env_str("OIDC_RP_SCOPES", "openid email profile").split()
    if "openid" not in scopes:
        raise ImproperlyConfigured(f"OIDC_RP_SCOPES={' '.join(scopes)!r} must include openid.")
    username_claim = env_str("OIDC_USERNAME_CLAIM", "preferred_username").strip()
    if not username_claim:
        raise ImproperlyConfigured("OIDC_USERNAME_CLAIM must name a claim, e.g. preferred_username or email.")
    rules = GroupRules(
        lead_pattern=compile_team_pattern(
            "OIDC_LEAD_GROUP_PATTERN", env_str("OIDC_LEAD_GROUP_PATTERN", "gpu-{team}-lead")
        ),
        member_pattern=compile_team_pattern(
            "OIDC_MEMBER_GROUP_PATTERN", env_str("OIDC_MEMBER_GROUP_PATTERN", "gpu-{team}-member")
        ),
        explicit=parse_group_map("OIDC_GROUP_MAP", env_str("OIDC_GROUP_MAP")),
        finance_groups=frozenset(env_list("OIDC_FINANCE_GROUPS", ["gpu-finance"])),
        operator_groups=frozenset(env_list("OIDC_OPERATOR_GROUPS", ["gpu-operators"])),
    )
    return SsoConfig(
        enabled=True,
        provider_name=env_str("OIDC_PROVIDER_NAME", "single sign-on").strip() or "single sign-on",
        client_id=client_id,
        client_secret=secret,
        issuer=_required_url("OIDC_OP_ISSUER"),
        authorization_endpoint=_required_url("OIDC_OP_AUTHORIZATION_ENDPOINT"),
        token_endpoint=_required_url("OIDC_OP_TOKEN_ENDPOINT"),
        jwks_endpoint=_required_url("OIDC_OP_JWKS_ENDPOINT"),
        logout_endpoint=_url("OIDC_OP_LOGOUT_ENDPOINT", env_str("OIDC_OP_LOGOUT_ENDPOINT").strip()),
        scopes=" ".join(scopes),
        sign_algorithm=env_choice("OIDC_RP_SIGN_ALGO", "RS256", SIGN_ALGORITHMS),
        clock_skew_seconds=env_int("OIDC_CLOCK_SKEW_SECONDS", 60, minimum=0, maximum=600),
        timeout_seconds=env_float("OIDC_TIMEOUT_SECONDS", 10.0, minimum=0.1),
        verify_tls=env_bool("OIDC_VERIFY_TLS", True),
        username_claim=username_claim,
        groups_claim=env_str("OIDC_GROUPS_CLAIM", "groups").strip() or "groups",
        rules=rules,
    )
