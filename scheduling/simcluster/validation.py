"""Request validation as the real API server does it: decoding against the OpenAPI schema (unknown
fields and wrong types are 400 BadRequest), then field validation (422 Invalid with causes)."""

from __future__ import annotations

import json
import re
from typing import Any

from scheduling.simcluster import schemas, selectors
from scheduling.simcluster.errors import Cause, bad_request
from scheduling.simcluster.resources import ResourceType

JSON = dict[str, Any]

REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _QUALIFIED_NAME + ")?"

SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN}')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    f"and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{_DNS1123_LABEL}')"  # noqa: E501
)
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    f"character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{_DNS1035_LABEL}')"  # noqa: E501
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    f"start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '{_LABEL_VALUE}')"  # noqa: E501
)


def go_value(value: Any) -> str:
    """Render a value the way field errors quote it (`Invalid value: "0.5"`)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def invalid_value(field: str, value: Any, why: str) -> Cause:
    return Cause(INVALID, f"Invalid value: {go_value(value)}: {why}", field)


def required(field: str, why: str = "") -> Cause:
    return Cause(REQUIRED, "Required value" + (f": {why}" if why else ""), field)


def forbidden(field: str, why: str) -> Cause:
    return Cause(FORBIDDEN, f"Forbidden: {why}", field)


# -- schema decoding ----------------------------------------------------------------------------------


def field_path(schema: JSON | None, parts: list[str | int]) -> str:
    """Render a JSON path as Kubernetes field paths do: `.field` for properties, `[i]` for list items,
    `[key]` for map entries."""
    out = ""
    node = schema
    for part in parts:
        resolved = schemas.resolve(node)
        if isinstance(part, int):
            out += f"[{part}]"
            node = schemas.items_schema(node)
            continue
        props = resolved.get("properties", {}) if resolved else {}
        if part in props or resolved is None:
            out += ("." if out else "") + part
        else:
            out += f"[{part}]"
        node = schemas.property_schema(node, part)
    return out


_GO_TYPES = {
    "string": "string",
    "integer": "int64",
    "number": "float64",
    "boolean": "bool",
    "object": "map",
    "array": "slice",
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def check_schema(obj: JSON, rtype: ResourceType, *, strict: bool = True) -> list[Cause]:
    """Validate against the strict 1.34 schema. Unknown fields (when `strict`) and type mismatches raise
    400 as a decoding failure does; other schema violations come back as 422 causes. Without `strict`,
    unknown fields are dropped from `obj` instead ("fieldValidation=Ignore")."""
    quick = schemas.quick_check(rtype.api_version, rtype.kind)
    if quick is None or quick(obj):
        return []  # valid, or no schema: the full validator would find nothing either
    checker = schemas.validator(rtype.api_version, rtype.kind)
    if checker is None:
        return []
    root = schemas.root(rtype.api_version, rtype.kind)
    unknown: list[str] = []
    decoding: list[str] = []
    causes: list[Cause] = []
    for error in sorted(checker.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        parts = list(error.absolute_path)
        path = field_path(root, parts)
        if error.validator == "additionalProperties":
            allowed = set(error.schema.get("properties", {}))
            extra = [k for k in error.instance if k not in allowed]
            if strict:
                unknown.extend(f"{path}.{k}" if path else k for k in extra)
            else:
                for k in extra:
                    error.instance.pop(k, None)
        elif error.validator in ("type", "oneOf", "anyOf"):
            expected = error.schema.get("type", "string")
            go_type = _GO_TYPES.get(expected if isinstance(expected, str) else expected[0], "string")
            decoding.append(
                f"json: cannot unmarshal {_json_type(error.instance)} into Go struct field "
                f"{rtype.kind}.{path} of type {go_type}"
            )
        elif error.validator == "required":
            missing = re.findall(r"'([^']+)' is a required property", error.message)
            for name in missing or [""]:
                causes.append(required(f"{path}.{name}" if path else name))
        elif error.validator == "enum":
            options = ", ".join(go_value(v) for v in error.validator_value if v is not None)
            causes.append(
                Cause(
                    NOT_SUPPORTED,
                    f"Unsupported value: {go_value(error.instance)}: supported values: {options}",
                    path,
                )
            )
        else:
            causes.append(invalid_value(path, error.instance, error.message))
    prefix = f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
    if decoding:
        raise bad_request(prefix + decoding[0])
    if unknown:
        raise bad_request(prefix + "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown))
    return causes


# -- metadata -----------------------------------------------------------------------------------------


def name_causes(name: str, rtype: ResourceType, field: str = "metadata.name") -> list[Cause]:
    if rtype.plural == "namespaces":
        return _label_name(name, field, _DNS1123_LABEL, LABEL_MESSAGE)
    if rtype.plural == "services":
        return _label_name(name, field, _DNS1035_LABEL, DNS1035_MESSAGE)
    causes = []
    if len(name) > 253:
        causes.append(invalid_value(field, name, "must be no more than 253 characters"))
    if not re.fullmatch(_DNS1123_SUBDOMAIN, name):
        causes.append(invalid_value(field, name, SUBDOMAIN_MESSAGE))
    return causes


def _label_name(name: str, field: str, pattern: str, message: str) -> list[Cause]:
    causes = []
    if len(name) > 63:
        causes.append(invalid_value(field, name, "must be no more than 63 characters"))
    if not re.fullmatch(pattern, name):
        causes.append(invalid_value(field, name, message))
    return causes


def qualified_name_causes(key: str, field: str) -> list[Cause]:
    return [invalid_value(field, key, why) for why in selectors.qualified_name_errors(key)]


def labels_causes(labels: Any, field: str = "metadata.labels") -> list[Cause]:
    if not isinstance(labels, dict):
        return []
    causes = []
    for key, value in labels.items():
        causes.extend(qualified_name_causes(key, field))
        if not isinstance(value, str):
            continue
        if len(value) > 63:
            causes.append(invalid_value(field, value, "must be no more than 63 characters"))
        if not re.fullmatch(_LABEL_VALUE, value):
            causes.append(invalid_value(field, value, LABEL_VALUE_MESSAGE))
    return causes


def metadata_causes(obj: JSON, rtype: ResourceType) -> list[Cause]:
    meta = obj.get("metadata") or {}
    causes: list[Cause] = []
    name = meta.get("name", "")
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    else:
        causes.extend(name_causes(name, rtype))
    causes.extend(labels_causes(meta.get("labels")))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for key in annotations:
            causes.extend(qualified_name_causes(key, "metadata.annotations"))
        if sum(len(k) + len(str(v)) for k, v in annotations.items()) > 256 * 1024:
            causes.append(Cause(TOO_LONG, "Too long: must have at most 262144 bytes", "metadata.annotations"))
    return causes
