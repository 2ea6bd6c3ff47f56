"""Refuses URLs with NUL characters (``%00``) in the path or a query parameter with 400.

PostgreSQL text cannot hold NUL, so a lookup such as ``?team=a%00b`` or ``/api/v1/offerings/a%00/`` raised
"PostgreSQL text fields cannot contain NUL (0x00) bytes" (a 500) before any view could refuse it; no URL of
the portal has a use for NUL, so it is refused here, for pages and API alike, before anything reads it."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

NUL = "\x00"


def nul_problem(request: HttpRequest) -> str | None:
    """What in ``request``'s URL holds a NUL, in words, or None."""
    if NUL in request.path:
        return "The URL path contains a NUL character (%00)."
    for name, values in request.GET.lists():
        if NUL in name or any(NUL in value for value in values):
            shown = name.replace(NUL, "%00")
            return f"The query parameter {shown!r} contains a NUL character (%00)."
    return None


class RefuseNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = nul_problem(request)
        if problem is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            # The API's error format (portal/api/errors.py).
            return JsonResponse({"detail": problem, "code": "invalid", "errors": {}}, status=400)
        return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
