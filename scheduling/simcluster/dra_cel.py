"""CEL device selectors as Kubernetes DRA evaluates them (facts doc 4.2), on `cel-python`.

The input is one object, ``device``, with ``driver``, ``attributes[<domain>]`` and ``capacity[<domain>]``.
Kubernetes adds its CEL libraries to the standard ones; the selectors GPU claims use are covered here:
``quantity("79Gi")`` with ``compareTo``/``isGreaterThan``/``isLessThan``/``asInteger``, ``semver("12.4.0")``
with ``compareTo``, and the strings extension's ``lowerAscii``/``upperAscii``; ``cel.bind`` is not (an
evaluation error). An unknown domain reads as an
empty map; an unknown attribute name is an evaluation error, and anything but a boolean result aborts the
allocation (the ``CELDeviceSelector`` API documentation).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from fractions import Fraction
from functools import cache
from typing import Any, cast

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from scheduling.simcluster import quantity


class SelectorError(ValueError):
    """A selector that does not compile, or whose evaluation fails or is not a boolean."""


class Quantity(celtypes.StringType):
    """A Kubernetes quantity: shown as written, compared by value."""

    def __new__(cls, text: str) -> Quantity:
        try:
            parsed = quantity.value(text)
        except quantity.QuantityError as exc:
            raise CELEvalError(f"invalid quantity {text!r}: {exc}") from exc
        q = cast(Quantity, super().__new__(cls, text))
        q.number = parsed
        return q

    number: Fraction


class Semver(celtypes.StringType):
    """A semantic version (``major.minor.patch[-pre][+build]``), compared by precedence (pre-releases aside)."""

    _PATTERN = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")

    def __new__(cls, text: str) -> Semver:
        match = cls._PATTERN.match(text)
        if match is None:
            raise CELEvalError(f"invalid semver {text!r}")
        v = cast(Semver, super().__new__(cls, text))
        v.parts = tuple(int(g) for g in match.groups())
        return v

    parts: tuple[int, ...]


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map, not an error."""

    def __getitem__(self, key: Any) -> Any:
        if key in self.keys():
            return super().__getitem__(key)
        return celtypes.MapType({})


def _order(a: Any, b: Any) -> int:
    if isinstance(a, Semver) and isinstance(b, Semver):
        return (a.parts > b.parts) - (a.parts < b.parts)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.number > b.number) - (a.number < b.number)
    raise CELEvalError(f"compareTo: cannot compare {type(a).__name__} with {type(b).__name__}")


def _as_integer(q: Any) -> celtypes.IntType:
    if not isinstance(q, Quantity) or q.number.denominator != 1:
        raise CELEvalError(f"asInteger: {q!r} is not an integer quantity")
    return celtypes.IntType(int(q.number))


_FUNCTIONS: dict[str, Any] = {
    "quantity": lambda text: Quantity(str(text)),
    "semver": lambda text: Semver(str(text)),
    "compareTo": lambda a, b: celtypes.IntType(_order(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_order(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_order(a, b) < 0),
    "asInteger": _as_integer,
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
}

_ENV = celpy.Environment()
_lock = threading.Lock()  # lark's parser is not thread-safe; compiled programs are


@cache
def _program(expression: str) -> Any:
    with _lock:
        try:
            return _ENV.program(_ENV.compile(expression), functions=_FUNCTIONS)
        except CELParseError as exc:
            raise SelectorError(f"compilation failed: {str(exc).splitlines()[0]}") from exc


def compile_error(expression: str) -> str | None:
    """What the API server says about a selector it cannot compile, else ``None``."""
    try:
        _program(expression)
    except SelectorError as exc:
        return str(exc)
    return None


def _attribute(value: Mapping[str, Any]) -> Any:
    """A DeviceAttribute (exactly one of bool, int, string, version) as a CEL value."""
    if "bool" in value:
        return celtypes.BoolType(value["bool"])
    if "int" in value:
        return celtypes.IntType(value["int"])
    if "version" in value:
        return Semver(value["version"])
    return celtypes.StringType(value.get("string", ""))


def device_activation(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` variable for one ResourceSlice device (attribute names without a domain are the driver's)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or driver, {})[short] = _attribute(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or driver, {})[short] = Quantity(str(value["value"]))
    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(driver),
                celtypes.StringType("attributes"): _Domains(
                    {celtypes.StringType(k): celtypes.MapType(_keyed(v)) for k, v in attributes.items()}
                ),
                celtypes.StringType("capacity"): _Domains(
                    {celtypes.StringType(k): celtypes.MapType(_keyed(v)) for k, v in capacity.items()}
                ),
                celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                    bool(device.get("allowMultipleAllocations"))
                ),
            }
        )
    }


def _keyed(values: Mapping[str, Any]) -> dict[Any, Any]:
    return {celtypes.StringType(k): v for k, v in values.items()}


def _runtime_error(exc: Exception) -> str:
    # cel-python appends the whole activation to some messages; keep the cause only.
    message = str(exc.args[0] if exc.args else exc).split(" (in activation", 1)[0]
    return f"CEL runtime error: {message}"


def matches(expression: str, activation: Mapping[str, Any]) -> bool:
    """Whether the device satisfies the selector; :class:`SelectorError` when evaluation fails."""
    try:
        result = _program(expression).evaluate(activation)
    except CELEvalError as exc:
        raise SelectorError(_runtime_error(exc)) from exc
    if isinstance(result, CELEvalError):
        raise SelectorError(_runtime_error(result))
    if not isinstance(result, celtypes.BoolType):
        raise SelectorError(f"CEL result must be a boolean, got {type(result).__name__}")
    return bool(result)
