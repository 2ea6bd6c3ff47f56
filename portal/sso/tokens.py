"""Verifying an ID token: signature, algorithm, issuer, audience, expiry and nonce. Pure (PyJWT), no I/O.

mozilla-django-oidc's own check skips the audience (``verify_aud: False``) and lets an expired token escape as
a 500; the portal's backend calls this instead, and each refusal carries the sentence the login page shows.
"""

from __future__ import annotations

from typing import Any

import jwt

from portal.sso.errors import SsoRefused

_START_AGAIN = "Sign in again; if it keeps happening, tell the portal's operators."


def header_of(token: str) -> dict[str, Any]:
    try:
        header: dict[str, Any] = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError as exc:
        raise SsoRefused(f"The provider's sign-in token is malformed. {_START_AGAIN}", detail=str(exc)) from None
    return header


def check_algorithm(token: str, algorithm: str) -> None:
    """The header must name the one algorithm configured: no "none", no HS256 keyed with a public key."""
    alg = header_of(token).get("alg")
    if alg != algorithm:
        raise SsoRefused(
            f"The provider's sign-in token is signed with {alg!r}, not {algorithm} as configured. {_START_AGAIN}",
            detail=f"alg {alg!r} != OIDC_RP_SIGN_ALGO {algorithm!r}",
        )


def verify_id_token(
    token: str,
    key: Any,
    *,
    algorithm: str,
    client_id: str,
    issuer: str,
    nonce: str | None,
    leeway: int,
) -> dict[str, Any]:
    check_algorithm(token, algorithm)
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            audience=client_id,
            issuer=issuer,
            leeway=leeway,
            options={"require": ["iss", "sub", "aud", "exp", "iat"]},
        )
    except jwt.ExpiredSignatureError:
        raise SsoRefused(
            "The provider's sign-in token has expired (check that this server's clock is right). " + _START_AGAIN,
            detail="exp in the past",
        ) from None
    except jwt.InvalidAudienceError as exc:
        raise SsoRefused(
            "The provider's sign-in token was issued for another application, not this portal (wrong audience). "
            + _START_AGAIN,
            detail=str(exc),
        ) from None
    except jwt.InvalidIssuerError as exc:
        raise SsoRefused(
            f"The sign-in token was issued by someone other than the configured provider. {_START_AGAIN}",
            detail=str(exc),
        ) from None
    except jwt.InvalidSignatureError:
        raise SsoRefused(
            "The provider's sign-in token has an invalid signature: it was altered or not signed by the provider. "
            + _START_AGAIN,
            detail="signature does not verify against the provider's JWKS key",
        ) from None
    except jwt.ImmatureSignatureError as exc:
        raise SsoRefused(
            "The provider's sign-in token is not valid yet (check that this server's clock is right). " + _START_AGAIN,
            detail=str(exc),
        ) from None
    except jwt.InvalidTokenError as exc:
        raise SsoRefused(f"The provider's sign-in token is not valid. {_START_AGAIN}", detail=str(exc)) from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    # OpenID Connect Core 3.1.3.7: with several audiences, the authorised party must be this client.
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise SsoRefused(
            "The provider's sign-in token was issued for another application, not this portal (wrong audience). "
            + _START_AGAIN,
            detail=f"several audiences and azp {claims.get('azp')!r} is not {client_id!r}",
        )
    if nonce is None or claims.get("nonce") != nonce:
        raise SsoRefused(
            f"The provider's sign-in token does not belong to this sign-in (nonce). {_START_AGAIN}",
            detail="nonce mismatch",
        )
    return claims
