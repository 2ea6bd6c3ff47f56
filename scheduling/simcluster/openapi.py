"""`/openapi/v2`, which kubectl downloads before `apply` and `create` to validate manifests and to learn
the strategic-merge rules. kubectl only takes the protobuf encoding (gnostic's `openapi.v2.Document`),
so the document is encoded here by hand from the same 1.34 definitions the server validates with.

Only the parts kubectl reads are emitted: definitions (types, properties, items, required, references and
the `x-kubernetes-*` extensions) and, per resource, a PATCH operation declaring the `fieldValidation`
query parameter, which tells kubectl to leave validation to the server.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml

from scheduling.simcluster import schemas
from scheduling.simcluster.discovery import SERVER_VERSION
from scheduling.simcluster.resources import RESOURCES

JSON = dict[str, Any]
PROTOBUF_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

# -- protobuf wire format -------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(field: int, payload: bytes) -> bytes:
    """A length-delimited field (strings and embedded messages)."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode()) if text else b""


def _named_any(name: str, value: Any) -> bytes:
    """NamedAny{name, Any{yaml}}: how vendor extensions travel."""
    any_message = _str(2, yaml.safe_dump(value, default_flow_style=False))
    return _str(1, name) + _bytes(2, any_message)


# -- schemas ------------------------------------------------------------------------------------------


def _single_type(schema: JSON) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        return kinds[0] if kinds else ""
    if isinstance(kind, str):
        return kind
    if "oneOf" in schema:  # Quantity and IntOrString are plain strings to OpenAPI v2 clients
        return "string"
    return ""


def _schema(schema: JSON) -> bytes:
    """openapi.v2.Schema, field numbers from gnostic's OpenAPIv2.proto."""
    out = b""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        out += _str(1, "#/definitions/" + ref.rsplit("/", 1)[-1])
    out += _str(2, str(schema.get("format", "")))
    out += _str(4, str(schema.get("description", "")))
    for name in schema.get("required", []):
        out += _str(19, name)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        out += _bytes(21, _bytes(1, _schema(extra)))
    kind = _single_type(schema)
    if kind:
        out += _bytes(22, _str(1, kind))
    items = schema.get("items")
    if isinstance(items, dict):
        out += _bytes(23, _bytes(1, _schema(items)))
    props = schema.get("properties")
    if isinstance(props, dict):
        named = b"".join(_bytes(1, _str(1, k) + _bytes(2, _schema(v))) for k, v in props.items())
        out += _bytes(25, named)
    for key, value in schema.items():
        if key.startswith("x-kubernetes-"):
            out += _bytes(31, _named_any(key, value))
    return out


def _patch_path(group: str, version: str, plural: str, kind: str, namespaced: bool) -> bytes:
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    path = f"{prefix}/namespaces/{{namespace}}/{plural}/{{name}}" if namespaced else f"{prefix}/{plural}/{{name}}"
    query = _str(2, "query") + _str(4, "fieldValidation") + _str(6, "string")
    parameter = _bytes(1, _bytes(2, _bytes(3, query)))  # ParametersItem.parameter.non_body.query
    gvk = {"group": group, "version": version, "kind": kind}
    operation = (
        _str(5, f"patch{kind}")
        + _bytes(8, parameter)
        + _bytes(13, _named_any("x-kubernetes-action", "patch"))
        + _bytes(13, _named_any("x-kubernetes-group-version-kind", gvk))
    )
    return _bytes(2, _str(1, path) + _bytes(2, _bytes(8, operation)))  # Paths.path: NamedPathItem


@cache
def v2_protobuf() -> bytes:
    definitions = schemas.definitions()
    named = b"".join(
        _bytes(1, _str(1, name) + _bytes(2, _schema(schema))) for name, schema in sorted(definitions.items())
    )
    paths = b"".join(_patch_path(r.group, r.version, r.plural, r.kind, r.namespaced) for r in RESOURCES)
    info = _str(1, "Kubernetes") + _str(2, SERVER_VERSION["gitVersion"])
    return _str(1, "2.0") + _bytes(2, info) + _bytes(8, paths) + _bytes(9, named)
