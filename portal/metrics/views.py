"""``/metrics``: Prometheus's text format, for a scraper holding the bearer token (docs/metrics.md)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from portal.metrics.exposition import render


def _refusal(request: HttpRequest) -> HttpResponse | None:
    token = settings.PORTAL_METRICS_TOKEN
    if not token:
        if settings.PORTAL_ENV == "production":
            return HttpResponse(
                "Metrics are off: set PORTAL_METRICS_TOKEN and give Prometheus the same bearer token.\n",
                status=403,
                content_type="text/plain",
            )
        return None  # the demo and the tests serve loopback only
    given = request.headers.get("Authorization", "")
    scheme, _, credential = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), token.encode()):
        response = HttpResponse("A valid bearer token is required (Authorization: Bearer <token>).\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        response["Content-Type"] = "text/plain"
        return response
    return None


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    refused = _refusal(request)
    if refused is not None:
        return refused
    return HttpResponse(render(timezone.now()), content_type=CONTENT_TYPE_LATEST)
