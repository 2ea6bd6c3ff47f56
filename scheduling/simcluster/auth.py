"""The API server's authentication: a bearer token, the one the simulator writes into its kubeconfig.

Unauthenticated requests are let through only where a real API server lets them through
(`anonymous.conditions` of an AuthenticationConfiguration, the paths of `system:public-info-viewer`),
plus one concession of the simulator: the service and pod proxy, so that a browser can open a notebook
link without an Ingress; the simulated Jupyter behind it checks its own token. A token that is presented
but wrong is refused everywhere (401), as the real server refuses failed credentials before anonymity.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping

from scheduling.simcluster.errors import ApiError

ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
_PROXY = re.compile(r"^/api/v1/namespaces/[^/]+/(services|pods)/[^/]+/proxy(/|$)")
_BEARER = re.compile(r"^bearer\s+(\S+)\s*$", re.IGNORECASE)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The bearer token of an `Authorization` header (keys in lower case), or None."""
    match = _BEARER.match(headers.get("authorization", ""))
    return match.group(1) if match else None


def is_proxy_path(path: str) -> bool:
    return _PROXY.match(path) is not None


def anonymous_allowed(path: str) -> bool:
    return path in ANONYMOUS_PATHS or is_proxy_path(path)


def authenticate(path: str, headers: Mapping[str, str], token: str) -> bool:
    """Raise 401 unless the request may proceed; True when it was authenticated by its bearer token."""
    presented = bearer_token(headers)
    if presented is not None:
        if not hmac.compare_digest(presented.encode(), token.encode()):
            raise unauthorized()
        return True
    if anonymous_allowed(path):
        return False
    raise unauthorized()
