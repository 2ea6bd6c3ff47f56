"""One JSON error shape for every API failure.

``{"detail": "<one readable sentence>", "code": "<machine code>", "errors": {field: [messages]}}``:
``detail`` is what a person reads, ``errors`` what a form binds to field by field.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _flatten(errors: Any, prefix: str = "") -> list[str]:
    if isinstance(errors, dict):
        lines: list[str] = []
        for key, value in errors.items():
            label = "" if key == "non_field_errors" else f"{prefix}{key}"
            lines.extend(_flatten(value, f"{label}." if label else ""))
        return lines
    if isinstance(errors, list):
        return [line for item in errors for line in _flatten(item, prefix)]
    text = str(errors)
    return [f"{prefix.rstrip('.')}: {text}" if prefix else text]


class Conflict(exceptions.APIException):
    """The request is sound but the current state forbids it (e.g. deleting what others still refer to)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "This conflicts with the current state."
    default_code = "conflict"


def protected_reason(exc: ProtectedError | RestrictedError) -> str:
    """What still refers to the object being deleted, in words: "3 workspaces"."""
    objects = exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
    counts = Counter(type(obj) for obj in objects)
    parts = [
        f"{n} {model._meta.verbose_name if n == 1 else model._meta.verbose_name_plural}" for model, n in counts.items()
    ]
    verb = "refers" if sum(counts.values()) == 1 else "refer"
    return f"It cannot be deleted while {' and '.join(parts)} {verb} to it."


def _as_drf(exc: Exception) -> Exception:
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return exceptions.ValidationError(detail=detail)
    if isinstance(exc, ProtectedError | RestrictedError):
        # on_delete=PROTECT/RESTRICT refusing a delete is the caller's conflict, not a server error.
        return Conflict(detail=protected_reason(exc), code="protected")
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    exc = _as_drf(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    body: dict[str, Any]
    if isinstance(exc, exceptions.ValidationError):
        fields = data if isinstance(data, dict) else {"non_field_errors": data}
        body = {"detail": " ".join(_flatten(fields)), "code": "invalid", "errors": fields}
        response.status_code = status.HTTP_400_BAD_REQUEST
    else:
        detail = data.get("detail", "") if isinstance(data, dict) else data
        code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
        body = {"detail": str(detail), "code": code, "errors": {}}
    response.data = body
    return response
