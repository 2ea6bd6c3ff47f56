"""ID-token verification, with keys the test controls: each refusal and its sentence."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from portal.sso.errors import SsoRefused
from portal.sso.tokens import verify_id_token

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ISSUER = "https://idp.example.org/realms/gpu"


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "sub": "u1", "aud": "portal", "iat": now, "exp": now + 300, "nonce": "n1"} | changes


def sign(payload: dict[str, Any], key: Any = KEY, algorithm: str = "RS256") -> str:
    return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": "k1"})


def verify(token: str, nonce: str | None = "n1") -> dict[str, Any]:
    return verify_id_token(
        token, KEY.public_key(), algorithm="RS256", client_id="portal", issuer=ISSUER, nonce=nonce, leeway=30
    )


def test_a_sound_token_gives_its_claims() -> None:
    assert verify(sign(claims(groups=["g"])))["groups"] == ["g"]


def test_several_audiences_need_this_client_as_authorised_party() -> None:
    assert verify(sign(claims(aud=["portal", "other"], azp="portal")))["sub"] == "u1"
    with pytest.raises(SsoRefused, match="wrong audience"):
        verify(sign(claims(aud=["portal", "other"], azp="other")))


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (lambda: sign(claims(aud="other-app")), "issued for another application"),
        (lambda: sign(claims(exp=int(time.time()) - 120, iat=int(time.time()) - 600)), "has expired"),
        (lambda: sign(claims(), key=OTHER_KEY), "invalid signature"),
        (lambda: sign(claims(iss="https://evil.example.org")), "someone other than the configured provider"),
        (lambda: sign(claims(nonce="replayed")), "does not belong to this sign-in"),
        (lambda: sign({k: v for k, v in claims().items() if k != "exp"}), "not valid"),
        (lambda: sign(claims(iat=int(time.time()) + 3600, nbf=int(time.time()) + 3600)), "not valid yet"),
        (lambda: jwt.encode(claims(), "secret-of-at-least-32-bytes-long!!", algorithm="HS256"), "signed with 'HS256'"),
        (lambda: jwt.encode(claims(), "", algorithm="none"), "signed with 'none'"),
        (lambda: "not.a.token", "malformed"),
    ],
)
def test_it_refuses_bad_tokens_with_a_sentence(token: Any, says: str) -> None:
    with pytest.raises(SsoRefused) as caught:
        verify(token())
    assert says in caught.value.message


def test_a_tampered_payload_fails_the_signature() -> None:
    header, _, signature = sign(claims(groups=["gpu-vision-member"])).split(".")
    forged = jwt.utils.base64url_encode(json.dumps(claims(groups=["gpu-operators"])).encode()).decode()
    with pytest.raises(SsoRefused, match="invalid signature"):
        verify(f"{header}.{forged}.{signature}")


def test_a_missing_nonce_is_refused() -> None:
    with pytest.raises(SsoRefused, match="nonce"):
        verify(sign(claims()), nonce=None)


def test_clock_skew_within_the_leeway_is_accepted() -> None:
    now = int(time.time())
    assert verify(sign(claims(exp=now - 10, iat=now - 300)))["sub"] == "u1"
