"""mozilla-django-oidc's backend with the portal's verification and account sync.

The library runs the code flow (state, nonce, PKCE, the token request); the portal replaces how the ID token
is verified (``portal/sso/tokens.py``: audience, issuer, expiry and signature against the provider's JWKS,
each refusal a sentence for the login page) and what a sign-in does to the database (``portal/sso/sync.py``).
Claims come from the verified ID token alone: no userinfo request.
"""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from portal.models import User
from portal.sso import sync, tokens
from portal.sso.config import SsoConfig
from portal.sso.errors import SsoRefused

logger = logging.getLogger(__name__)


def _config() -> SsoConfig:
    config: SsoConfig = settings.SSO
    return config


class PortalOIDCBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        if not _config().enabled:
            return None
        user: User | None = super().authenticate(request, **kwargs)
        return user

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        name = _config().provider_name
        try:
            token: dict[str, Any] = super().get_token(payload)
        except requests.HTTPError as exc:
            raise SsoRefused(
                f"{name} refused to complete the sign-in. Sign in again.", detail=f"token endpoint: {exc}"
            ) from None
        except (requests.RequestException, ValueError) as exc:
            raise SsoRefused(
                f"The portal could not reach {name} to complete the sign-in. Try again in a minute.",
                detail=f"token endpoint: {exc}",
            ) from None
        if not isinstance(token.get("id_token"), str):
            raise SsoRefused(f"{name} sent no ID token. Sign in again.", detail=f"token response keys {sorted(token)}")
        return token

    def retrieve_matching_jwk(self, token: str) -> Any:
        name = _config().provider_name
        try:
            return super().retrieve_matching_jwk(token)
        except SuspiciousOperation:
            raise SsoRefused(
                f"The sign-in token is signed with a key {name} does not publish. Sign in again; if it keeps "
                "happening, tell the portal's operators.",
                detail=f"no JWKS key for kid {tokens.header_of(token).get('kid')!r}",
            ) from None
        except (requests.RequestException, ValueError, KeyError) as exc:
            raise SsoRefused(
                f"The portal could not read {name}'s signing keys. Try again in a minute.",
                detail=f"JWKS endpoint: {exc}",
            ) from None

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        config = _config()
        tokens.check_algorithm(token, config.sign_algorithm)  # before fetching keys for it
        return tokens.verify_id_token(
            token,
            self.retrieve_matching_jwk(token),
            algorithm=config.sign_algorithm,
            client_id=config.client_id,
            issuer=config.issuer,
            nonce=kwargs.get("nonce"),
            leeway=config.clock_skew_seconds,
        )

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User:
        return sync.sign_in(payload, _config())
