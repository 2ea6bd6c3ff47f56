"""The login page with its "Sign in with ..." button, the provider's callback, and logout.

A refused sign-in (``SsoRefused``: wrong audience, expired token, bad signature, a username clash...) comes back
to the login page with its sentence; what the provider itself reports (``?error=``) too. Logging out of an
account that signed in through the provider also ends the provider's session when it has an end-session
endpoint (``OIDC_OP_LOGOUT_ENDPOINT``).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from portal.sso.config import SsoConfig
from portal.sso.errors import SsoRefused

logger = logging.getLogger(__name__)
# Where the library keeps the ID token (OIDC_STORE_ID_TOKEN); a session key, not a secret.
ID_TOKEN_SESSION_KEY = "oidc_id_token"  # noqa: S105


def _config() -> SsoConfig:
    config: SsoConfig = settings.SSO
    return config


def _refuse(request: HttpRequest, message: str) -> HttpResponse:
    messages.error(request, message, extra_tags="sso-error")
    return HttpResponseRedirect(reverse("login"))


class LoginView(auth_views.LoginView):
    """Django's login page (username and password stay, for local accounts), with the provider's button."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["sso"] = _config()
        return context


class SignInView(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """Sends the browser to the provider (state, nonce and PKCE kept in the session by the library)."""

    def __init__(self, **kwargs: Any) -> None:
        # The library's __init__ reads its settings, which are absent while single sign-on is off.
        View.__init__(self, **kwargs)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        config = _config()
        if not config.enabled:
            raise Http404("Single sign-on is not configured.")
        self.OIDC_OP_AUTH_ENDPOINT = config.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = config.client_id
        response: HttpResponse = super().dispatch(request, *args, **kwargs)
        return response


class CallbackView(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """Where the provider sends the browser back with a code (or an error)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        config = _config()
        if not config.enabled:
            raise Http404("Single sign-on is not configured.")
        error = request.GET.get("error")
        if error:
            super().get(request)  # forgets the state, logs out
            description = request.GET.get("error_description") or error
            logger.warning("sso: the provider answered %s: %s", error, description)
            return _refuse(request, f"{config.provider_name} did not sign you in: {description}.")
        state = request.GET.get("state")
        if "code" not in request.GET or state not in request.session.get("oidc_states", {}):
            logger.warning("sso: callback without a code or with an unknown state")
            return _refuse(
                request,
                "That sign-in link is not valid here: it was already used, is from another browser, or expired. "
                "Sign in again.",
            )
        try:
            response: HttpResponse = super().get(request)
        except SsoRefused as exc:
            logger.warning("sso: sign-in refused: %s (%s)", exc.message, exc.detail)
            return _refuse(request, exc.message)
        if not request.user.is_authenticated:
            return _refuse(request, f"{config.provider_name} did not sign you in. Sign in again.")
        return response


def _provider_logout_url(request: HttpRequest, id_token: str) -> str:
    config = _config()
    query = {
        "id_token_hint": id_token,
        "client_id": config.client_id,
        "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
    }
    separator = "&" if "?" in config.logout_endpoint else "?"
    return f"{config.logout_endpoint}{separator}{urlencode(query)}"


class LogoutView(auth_views.LogoutView):
    """Ends the portal session; after a provider sign-in, then sends the browser to the provider's logout."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get(ID_TOKEN_SESSION_KEY)
        response: HttpResponse = super().post(request, *args, **kwargs)  # the session is flushed here
        config = _config()
        if config.enabled and config.logout_endpoint and isinstance(id_token, str):
            return HttpResponseRedirect(_provider_logout_url(request, id_token))
        return response
