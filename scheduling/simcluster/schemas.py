"""The Kubernetes 1.34 OpenAPI definitions shipped with `kubernetes-validate`, loaded once.

Validation uses the strict per-kind schemas; strategic merge patch reads the `x-kubernetes-patch-*`
extensions from the same definitions, so both follow the real API's types.
"""

from __future__ import annotations

import json
import re
import threading
from functools import cache
from importlib import resources
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs are installed for it
from referencing import Registry, Resource

JSON = dict[str, Any]

KUBERNETES_VERSION = "1.34.0"
_SCHEMA_DIR = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"
_load_lock = threading.Lock()


def _read(name: str) -> JSON:
    data: JSON = json.loads(resources.files("kubernetes_validate").joinpath(f"{_SCHEMA_DIR}/{name}").read_text())
    return data


@cache
def _definitions() -> JSON:
    return _read("_definitions.json")


@cache
def _registry() -> Registry[Any]:
    return Resource.from_contents(_definitions()) @ Registry()


def schema_file(api_version: str, kind: str) -> str:
    # kubernetes-validate names files `<kind>-<group prefix>-<version>.json`, e.g. job-batch-v1.json.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@cache
def _root(api_version: str, kind: str) -> JSON | None:
    try:
        return _read(schema_file(api_version, kind))
    except FileNotFoundError:
        return None


def validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    with _load_lock:  # the first load is slow; keep concurrent requests from doing it twice
        return _validator(api_version, kind)


@cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    root = _root(api_version, kind)
    if root is None:
        return None
    validator_class = jsonschema.validators.Draft202012Validator
    checked: jsonschema.protocols.Validator = validator_class(root, registry=_registry())
    return checked


def resolve(schema: JSON | None) -> JSON | None:
    """Follow a `$ref` into the shared definitions."""
    if schema is None:
        return None
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    name = ref.rsplit("/", 1)[-1]
    definition: JSON | None = _definitions()["$defs"].get(name)
    return definition


def definitions() -> JSON:
    """Every type definition by its OpenAPI name (io.k8s.api.core.v1.Pod, ...)."""
    defs: JSON = _definitions()["$defs"]
    return defs


def root(api_version: str, kind: str) -> JSON | None:
    return _root(api_version, kind)


def property_schema(schema: JSON | None, key: str) -> JSON | None:
    """The schema of `schema`'s property `key` (or of a map's values), with references resolved."""
    schema = resolve(schema)
    if schema is None:
        return None
    props = schema.get("properties")
    if isinstance(props, dict) and key in props:
        return props[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def items_schema(schema: JSON | None) -> JSON | None:
    schema = resolve(schema)
    if schema is None:
        return None
    items = schema.get("items")
    return resolve(items) if isinstance(items, dict) else None


def warm_up() -> None:
    """Load the definitions and the busiest validators ahead of the first request."""
    for api_version, kind in (("v1", "Pod"), ("v1", "Node"), ("batch/v1", "Job"), ("v1", "Event")):
        validator(api_version, kind)
