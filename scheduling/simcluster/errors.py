"""API errors and the `Status` bodies the real API server sends with them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class Cause:
    reason: str  # FieldValueInvalid, FieldValueRequired, FieldValueNotSupported, FieldValueForbidden, ...
    message: str
    field: str


@dataclass
class ApiError(Exception):
    code: int
    reason: str
    message: str
    name: str = ""
    kind: str = ""
    group: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after_seconds: int | None = None

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status(self) -> JSON:
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details: JSON = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in self.causes]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        if details:
            body["details"] = details
        return body


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', name=name, kind=resource, group=group)


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(409, "AlreadyExists", f'{qualified} "{name}" already exists', name=name, kind=resource, group=group)


def conflict(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    message = (
        f'Operation cannot be fulfilled on {qualified} "{name}": '
        "the object has been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, name=name, kind=resource, group=group)


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    lines = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    summary = lines[0] if len(lines) == 1 else "[" + ", ".join(lines) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {summary}',
        name=name,
        kind=kind,
        group=group,
        causes=causes,
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: str, name: str, why: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        403, "Forbidden", f'{qualified} "{name}" is forbidden: {why}', name=name, kind=resource, group=group
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, "
        f'application/apply-patch+yaml; got "{content_type}"',
    )


def success_status(code: int = 200, name: str = "", kind: str = "") -> JSON:
    body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if name or kind:
        body["details"] = {"name": name, "kind": kind}
    return body
