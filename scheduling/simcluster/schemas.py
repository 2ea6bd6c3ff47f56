"""The Kubernetes 1.34 OpenAPI definitions shipped with `kubernetes-validate`, loaded once.

Validation uses the strict per-kind schemas; strategic merge patch reads the `x-kubernetes-patch-*`
extensions from the same definitions, so both follow the real API's types.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import urljoin

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
        quick_check(api_version, kind)


# -- quick validity check -----------------------------------------------------------------------------
#
# jsonschema's iter_errors costs about a millisecond per pod, and almost every object is valid. The
# schemas are compiled once into closures that answer "certainly valid" (True) or "maybe not" (False);
# only False goes through the full validator, which produces the error messages. The closures cover the
# keywords the strict kubernetes-validate schemas use, with Draft 2020-12 semantics; for anything else
# (another keyword, a boolean schema, an unexpected Python type such as a dict subclass) they answer
# False, so they can be slower than needed but never lenient.

Check = Callable[[Any], bool]

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),  # bool is its own type(), so True is not an integer, as in jsonschema
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}
_PY_TYPES_ALL = frozenset(t for types in _PY_TYPES.values() for t in types)
# Keywords that assert nothing here: `format` asserts only with a format checker, and the validator
# has none.
_ANNOTATIONS = frozenset({"description", "format"})
_KEYWORDS = frozenset({"type", "enum", "$ref", "properties", "additionalProperties", "required", "items", "oneOf"})


def _any(value: Any) -> bool:
    return True


def unsure(value: Any) -> bool:
    """The check that never vouches for a value (so the full validator decides)."""
    return False


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _any
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda value: first(value) and second(value)
    return lambda value: all(check(value) for check in checks)


def _allowed_types(names: Any) -> frozenset[type] | None:
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(name in _PY_TYPES for name in names):
        return None
    return frozenset(t for name in names for t in _PY_TYPES[name])


def _type_check(allowed: frozenset[type]) -> Check:
    if int in allowed and float not in allowed:
        # "integer" without "number": Draft 2020-12 counts 1.0 as an integer.
        return lambda value: type(value) in allowed or (type(value) is float and value.is_integer())
    return lambda value: type(value) in allowed


def _enum_check(options: Any) -> Check | None:
    if not isinstance(options, list) or not all(type(option) is str for option in options):
        return None
    allowed = frozenset(options)
    return lambda value: type(value) is str and value in allowed


def _object_check(
    properties: dict[str, Check], extra: Check, required: tuple[str, ...], dict_ok: bool, otherwise: Check
) -> Check:
    """properties, additionalProperties and required (which apply to dicts only), with `type` folded in
    as `dict_ok` and `otherwise` (the check for anything but a dict) to save a call per value."""

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return not isinstance(value, dict) and otherwise(value)
        if not dict_ok:
            return False
        for name in required:
            if name not in value:
                return False
        for key, item in value.items():  # noqa: SIM110 - a loop beats all() on these small dicts
            if not properties.get(key, extra)(item):
                return False
        return True

    return check


def _items_check(item_check: Check, list_ok: bool, otherwise: Check) -> Check:
    """items (which applies to lists only), with `type` folded in as for objects."""

    def check(value: Any) -> bool:
        if type(value) is not list:
            return not isinstance(value, list) and otherwise(value)
        if not list_ok:
            return False
        for item in value:  # noqa: SIM110 - as above
            if not item_check(item):
                return False
        return True

    return check


def _one_of_check(branches: list[Check]) -> Check:
    return lambda value: sum(1 for branch in branches if branch(value)) == 1


class _Compiler:
    """Compiles schema nodes into checks, each shared definition once (recursive ones included)."""

    def __init__(self, definitions: JSON) -> None:
        self.url = definitions["$id"]
        self.definitions: JSON = definitions["$defs"]
        self.done: dict[str, Check] = {}
        self.pending: set[str] = set()

    def document(self, document: JSON) -> Check:
        """A whole schema file: `$id` sets the base for its references, `$schema` names the draft."""
        base = document.get("$id")
        if not isinstance(base, str):
            return unsure
        return self.node({k: v for k, v in document.items() if k not in ("$id", "$schema")}, base)

    def node(self, schema: Any, base: str) -> Check:
        if not isinstance(schema, dict):
            return unsure  # boolean schemas do not occur in these files
        keywords = {k for k in schema if not k.startswith("x-kubernetes-")} - _ANNOTATIONS
        if not keywords <= _KEYWORDS:
            return unsure
        checks = [self.ref(schema["$ref"], base)] if "$ref" in schema else []
        if "enum" in schema:
            checks.append(_enum_check(schema["enum"]) or unsure)
        if "oneOf" in schema:
            checks.append(self.one_of(schema["oneOf"], base))
        if keywords & {"type", "items", "properties", "additionalProperties", "required"}:
            checks.append(self.shape(schema, keywords, base))
        return _all(checks)

    def shape(self, schema: JSON, keywords: set[str], base: str) -> Check:
        """type with the array and object keywords."""
        allowed = _allowed_types(schema["type"]) if "type" in schema else _PY_TYPES_ALL
        if allowed is None:
            return unsure
        check = _type_check(allowed) if "type" in schema else _any
        if "items" in schema:
            check = _items_check(self.node(schema["items"], base), list in allowed, check)
        if keywords & {"properties", "additionalProperties", "required"}:
            properties = schema.get("properties", {})
            extra = schema.get("additionalProperties", True)
            required = schema.get("required", [])
            if not isinstance(properties, dict) or not isinstance(required, list):
                return unsure
            compiled = {name: self.node(sub, base) for name, sub in properties.items()}
            # additionalProperties false: an unknown field is for the full validator to report.
            extra_check = _any if extra is True else unsure if extra is False else self.node(extra, base)
            check = _object_check(compiled, extra_check, tuple(required), dict in allowed, check)
        return check

    def one_of(self, branches: Any, base: str) -> Check:
        # A branch check answers False both for "invalid" and "unsure", which would miscount here;
        # plain type checks (all that IntOrString and Quantity use) are exact for JSON values.
        if not isinstance(branches, list) or not all(_plain_type(b) for b in branches):
            return unsure
        return _one_of_check([self.node(branch, base) for branch in branches])

    def ref(self, ref: Any, base: str) -> Check:
        url, _, pointer = urljoin(base, ref).partition("#") if isinstance(ref, str) else ("", "", "")
        name = pointer.removeprefix("/$defs/")
        if url != self.url or name == pointer or name not in self.definitions or any(c in name for c in "/~%"):
            return unsure
        if name in self.done:
            return self.done[name]
        if name in self.pending:  # a recursive definition: look it up once it is compiled
            return lambda value: self.done[name](value)
        self.pending.add(name)
        self.done[name] = self.node(self.definitions[name], self.url)
        self.pending.discard(name)
        return self.done[name]


def _plain_type(schema: Any) -> bool:
    return isinstance(schema, dict) and set(schema) - _ANNOTATIONS == {"type"}


@cache
def _compiler() -> _Compiler:
    return _Compiler(_definitions())


def quick_check(api_version: str, kind: str) -> Check | None:
    """A check that is True only for objects the strict schema accepts (None: no schema)."""
    with _load_lock:
        return _quick_check(api_version, kind)


@cache
def _quick_check(api_version: str, kind: str) -> Check | None:
    root = _root(api_version, kind)
    return None if root is None else _compiler().document(root)
