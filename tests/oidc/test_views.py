"""The callback and sign-in views without a browser: off when not configured, state checked."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from tests.oidc.conftest import CLIENT_ID, OpenIdProvider

pytestmark = pytest.mark.django_db


def test_the_sso_pages_are_absent_when_off(client: Client) -> None:
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert b"sso-login" not in client.get("/login/").content


def test_sign_in_sends_state_nonce_and_pkce(client: Client, sso_on: OpenIdProvider) -> None:
    response = client.get("/oidc/authenticate/?next=/teams/")
    assert response.status_code == 302
    url = urlsplit(response["Location"])
    assert f"{url.scheme}://{url.netloc}" == sso_on.issuer
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert query["client_id"] == CLIENT_ID
    assert query["redirect_uri"] == "http://testserver/oidc/callback/"
    assert query["code_challenge_method"] == "S256"
    assert "groups" in query["scope"].split()
    states: dict[str, Any] = client.session["oidc_states"]
    assert states[query["state"]]["nonce"] == query["nonce"]


@pytest.mark.parametrize("query", ["?code=c&state=forged", "?state=s", "?code=c"])
def test_a_callback_with_an_unknown_state_is_refused_on_the_login_page(
    client: Client, sso_on: OpenIdProvider, query: str
) -> None:
    client.get("/oidc/authenticate/")
    response = client.get(f"/oidc/callback/{query}", follow=True)
    assert response.redirect_chain[-1][0] == "/login/"
    assert "That sign-in link is not valid here" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_an_error_from_the_provider_is_shown(client: Client, sso_on: OpenIdProvider) -> None:
    client.get("/oidc/authenticate/")
    state = next(iter(client.session["oidc_states"]))
    response = client.get(
        f"/oidc/callback/?error=access_denied&error_description=End-User+aborted+interaction&state={state}", follow=True
    )
    assert "Test IdP did not sign you in: End-User aborted interaction." in response.content.decode()
    assert state not in client.session.get("oidc_states", {})
