"""Liveness and readiness endpoints for load balancers and Kubernetes probes.

``/healthz`` only says the process answers. ``/readyz`` checks that the portal can do its work: the
database answers a query, the broker a connection, the Kubernetes API a real read (not only /version). It
reports each check and names the failed ones, and answers 503 unless all pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from portal.celery import app as celery_app
from scheduling.kube.client import check_api


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return connection.vendor


def _broker() -> str:
    with celery_app.connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=celery_app.conf.broker_connection_timeout)
        # Only the scheme: the URL may carry a password.
        return urlsplit(str(celery_app.conf.broker_url)).scheme


def _kubernetes() -> str:
    return check_api()


CHECKS: dict[str, Callable[[], str]] = {"database": _database, "broker": _broker, "kubernetes": _kubernetes}


def _run(check: Callable[[], str]) -> dict[str, object]:
    started = time.monotonic()
    try:
        detail = check()
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "detail": detail, "ms": round((time.monotonic() - started) * 1000, 1)}


@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    results = {name: _run(check) for name, check in CHECKS.items()}
    failed = [name for name, result in results.items() if not result["ok"]]
    body = {"status": "not ready" if failed else "ready", "failed": failed, "checks": results}
    return JsonResponse(body, status=503 if failed else 200)
